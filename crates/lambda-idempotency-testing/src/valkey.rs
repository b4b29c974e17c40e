//! A real Valkey/Redis server per test or benchmark: `redis-server` (or
//! `valkey-server`) on a free loopback port, in a folder of its own, killed
//! and its folder removed when dropped.
//!
//! Not a mock: the store under test speaks RESP to a real server, with its
//! real `SET ... NX PX`, `WATCH`/`MULTI`/`EXEC` and expiry.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lambda_idempotency::ConfigError;
use lambda_idempotency::idempotency::{IdempotencyOptions, ValkeyConfig, ValkeyStore};

use crate::unique_name;

/// How the server keeps what it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every write appended to its file and fsynced before the answer
    /// (`appendfsync always`): a restart keeps every record.
    FsyncAlways,
    /// In memory only, as ElastiCache runs it (durability there comes from
    /// replicas, not a local file).
    InMemory,
}

/// A running server; see the module's docs.
#[derive(Debug)]
pub struct ValkeyServer {
    port: u16,
    dir: PathBuf,
    durability: Durability,
    /// The program that started, kept for [`ValkeyServer::restart`].
    program: &'static str,
    /// None while killed.
    child: Option<Child>,
}

/// Why a server could not be started (the program missing, or it never
/// answered a PING).
#[derive(Debug)]
pub struct ValkeyStartError(String);

impl std::fmt::Display for ValkeyStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValkeyStartError {}

impl ValkeyServer {
    /// Start `valkey-server`, or `redis-server` where there is no Valkey
    /// (Debian packages Redis 7), and wait (10 s at most) until it answers
    /// a PING.
    pub async fn start(durability: Durability) -> Result<ValkeyServer, ValkeyStartError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| ValkeyStartError(format!("no free port: {e}")))?
            .port();
        let dir = std::env::temp_dir().join(unique_name("valkey"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| ValkeyStartError(format!("no folder for the server: {e}")))?;
        let mut server = ValkeyServer {
            port,
            dir,
            durability,
            program: "valkey-server",
            child: None,
        };
        let mut last = None;
        for program in ["valkey-server", "redis-server"] {
            server.program = program;
            match server.spawn() {
                Ok(child) => {
                    server.child = Some(child);
                    server.ready().await?;
                    return Ok(server);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(ValkeyStartError(format!(
            "neither valkey-server nor redis-server could be started ({}): \
             install one (Debian: apt-get install redis-server)",
            last.map_or_else(String::new, |e| e.to_string())
        )))
    }

    fn spawn(&self) -> std::io::Result<Child> {
        let persistence: &[&str] = match self.durability {
            Durability::FsyncAlways => &["--appendonly", "yes", "--appendfsync", "always"],
            Durability::InMemory => &["--appendonly", "no"],
        };
        Command::new(self.program)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(persistence)
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    }

    /// Kill the server (SIGKILL: no shutdown of its own); its folder
    /// stays, for [`ValkeyServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port and folder (with
    /// [`Durability::FsyncAlways`] it comes back with every record it
    /// answered for), and wait until it answers a PING.
    pub async fn restart(&mut self) -> Result<(), ValkeyStartError> {
        self.kill();
        let child = self.spawn().map_err(|e| {
            ValkeyStartError(format!("{} could not be started again: {e}", self.program))
        })?;
        self.child = Some(child);
        self.ready().await
    }

    /// Its URL, for [`ValkeyConfig::new`].
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A store on this server; an error only for options the store
    /// refuses.
    pub fn store(&self, options: IdempotencyOptions) -> Result<ValkeyStore, ConfigError> {
        ValkeyStore::new(ValkeyConfig::new(&self.url())?, options)
    }

    async fn ready(&self) -> Result<(), ValkeyStartError> {
        let store = self
            .store(IdempotencyOptions::default())
            .map_err(|e| ValkeyStartError(format!("no store on the server: {e}")))?;
        for _ in 0..500 {
            if store.ping().await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(ValkeyStartError(format!(
            "the server on port {} did not answer a PING within 10 s",
            self.port
        )))
    }
}

impl Drop for ValkeyServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
