//! A real Valkey/Redis server per test or benchmark: `redis-server` (or
//! `valkey-server`) on a free loopback port, in a folder of its own, killed
//! and its folder removed when dropped.
//!
//! Not a mock: the store under test speaks RESP to a real server, with its
//! real `SET ... NX PX GET`, `WATCH`/`MULTI`/`EXEC` and expiry.
//! [`ValkeyServer::start_tls`] serves TLS only, with a certificate a CA of
//! its own signed (made with the `openssl` command), as a server in
//! transit encryption does.

use std::path::{Path, PathBuf};
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
    /// Serving TLS only, with the certificates in `dir`.
    tls: bool,
    /// A node of a cluster (`--cluster-enabled yes`).
    cluster: bool,
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
        Self::start_with(durability, false, false).await
    }

    /// [`ValkeyServer::start`], serving TLS only (`rediss://`): its
    /// certificate, for 127.0.0.1 and localhost, is signed by a CA made
    /// for this server alone ([`ValkeyServer::root_certificate`]), so no
    /// system store trusts it. Needs the `openssl` command.
    pub async fn start_tls(durability: Durability) -> Result<ValkeyServer, ValkeyStartError> {
        Self::start_with(durability, true, false).await
    }

    async fn start_with(
        durability: Durability,
        tls: bool,
        cluster: bool,
    ) -> Result<ValkeyServer, ValkeyStartError> {
        let dir = std::env::temp_dir().join(unique_name("valkey"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| ValkeyStartError(format!("no folder for the server: {e}")))?;
        let mut server = ValkeyServer {
            port: 0,
            dir,
            durability,
            program: "valkey-server",
            tls,
            cluster,
            child: None,
        };
        if tls {
            make_certificates(&server.dir)?;
        }
        let mut missing = Vec::new();
        let mut failed = None;
        for program in ["valkey-server", "redis-server"] {
            server.program = program;
            // A port found free can be taken by another process before the
            // server binds it; the server then exits, and is started again
            // on another port.
            for _ in 0..3 {
                server.port = free_port(cluster)?;
                match server.spawn() {
                    Err(e) => {
                        missing.push(format!("{program}: {e}"));
                        break;
                    }
                    Ok(child) => server.child = Some(child),
                }
                match server.ready().await {
                    Ok(()) => return Ok(server),
                    Err(e) => {
                        server.kill();
                        failed = Some(e);
                    }
                }
            }
            if failed.is_some() {
                break;
            }
        }
        Err(failed.unwrap_or_else(|| {
            ValkeyStartError(format!(
                "neither valkey-server nor redis-server could be started ({}): \
                 install one (Debian: apt-get install redis-server)",
                missing.join("; ")
            ))
        }))
    }

    fn spawn(&self) -> std::io::Result<Child> {
        let persistence: &[&str] = match self.durability {
            Durability::FsyncAlways => &["--appendonly", "yes", "--appendfsync", "always"],
            Durability::InMemory => &["--appendonly", "no"],
        };
        let port = self.port.to_string();
        let listen: Vec<&str> = if self.tls {
            vec![
                "--port",
                "0",
                "--tls-port",
                &port,
                "--tls-auth-clients",
                "no",
            ]
        } else {
            vec!["--port", &port]
        };
        let mut command = Command::new(self.program);
        if self.cluster {
            command
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(self.dir.join("nodes.conf"));
        }
        if self.tls {
            command
                .arg("--tls-cert-file")
                .arg(self.dir.join("server.crt"))
                .arg("--tls-key-file")
                .arg(self.dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(self.dir.join("ca.crt"));
        }
        // A TLS server also listens on 127.0.0.2, a name its certificate
        // does not carry, for a test that the name is checked.
        let bind: &[&str] = if self.tls {
            &["--bind", "127.0.0.1", "127.0.0.2"]
        } else {
            &["--bind", "127.0.0.1"]
        };
        command
            .args(listen)
            .args(bind)
            .args(["--save", ""])
            .args(persistence)
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("server.log"))
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

    /// Its URL, for [`ValkeyConfig::new`]: `rediss://` when it serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The PEM certificate of the CA that signed a TLS server's
    /// certificate, for [`ValkeyConfig::root_certificates`]; `None` for a
    /// server without TLS.
    pub fn root_certificate(&self) -> Option<Vec<u8>> {
        self.tls
            .then(|| std::fs::read(self.dir.join("ca.crt")).ok())
            .flatten()
    }

    /// Its configuration, trusting its CA when it serves TLS.
    pub fn config(&self) -> Result<ValkeyConfig, ConfigError> {
        let config = ValkeyConfig::new(&self.url())?;
        match self.root_certificate() {
            Some(pem) => config.root_certificates(&pem),
            None => Ok(config),
        }
    }

    /// A store on this server; an error only for options the store
    /// refuses.
    pub fn store(&self, options: IdempotencyOptions) -> Result<ValkeyStore, ConfigError> {
        ValkeyStore::new(self.config()?, options)
    }

    /// Wait (10 s at most) until the server answers a PING; a server that
    /// exits first (a port taken, a bad argument) is reported with the end
    /// of its log.
    async fn ready(&mut self) -> Result<(), ValkeyStartError> {
        let store = self
            .store(IdempotencyOptions::default())
            .map_err(|e| ValkeyStartError(format!("no store on the server: {e}")))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(ValkeyStartError(format!(
                    "{} exited ({status}) before it answered: {}",
                    self.program,
                    self.log_tail()
                )));
            }
            if store.ping().await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(ValkeyStartError(format!(
            "{} on port {} did not answer a PING within 10 s: {}",
            self.program,
            self.port,
            self.log_tail()
        )))
    }

    /// The last lines of the server's log, on one line.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

/// A cluster of real servers (cluster mode, no replicas), every hash slot
/// assigned, as a node-based ElastiCache cluster in cluster mode serves
/// one: a key lives on one node, and a node answers a key of another's
/// with `MOVED`. Its nodes are killed when it
/// is dropped.
#[derive(Debug)]
pub struct ValkeyCluster {
    nodes: Vec<ValkeyServer>,
}

impl ValkeyCluster {
    /// Start `nodes` (at least 3, the cluster's minimum) servers in cluster
    /// mode, in memory, and join them with `valkey-cli --cluster create`
    /// (or `redis-cli`), then wait (10 s at most) until every node says
    /// `cluster_state:ok`.
    pub async fn start(nodes: usize) -> Result<ValkeyCluster, ValkeyStartError> {
        if nodes < 3 {
            return Err(ValkeyStartError("a cluster needs at least 3 nodes".into()));
        }
        let mut started = Vec::with_capacity(nodes);
        for _ in 0..nodes {
            started.push(ValkeyServer::start_with(Durability::InMemory, false, true).await?);
        }
        let cluster = ValkeyCluster { nodes: started };
        let cli = cluster.cli();
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(cli)
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .map_err(|e| ValkeyStartError(format!("{cli} could not be run: {e}")))?;
        if !out.status.success() {
            return Err(ValkeyStartError(format!(
                "{cli} --cluster create failed: {} {}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !cluster.is_ok(cli) {
            if std::time::Instant::now() > deadline {
                return Err(ValkeyStartError(
                    "the cluster did not reach cluster_state:ok within 10 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(cluster)
    }

    /// The command-line client of the servers' program.
    fn cli(&self) -> &'static str {
        match self.nodes.first().map(|n| n.program) {
            Some("valkey-server") => "valkey-cli",
            _ => "redis-cli",
        }
    }

    fn is_ok(&self, cli: &str) -> bool {
        self.nodes.iter().all(|node| {
            Command::new(cli)
                .args(["-h", "127.0.0.1", "-p", &node.port.to_string()])
                .args(["cluster", "info"])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok"))
        })
    }

    /// Its nodes' URLs; the first is the one [`ValkeyCluster::store`]
    /// connects to (as to a configuration endpoint).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(ValkeyServer::url).collect()
    }

    /// A store whose URL is the first node's: the keys of the other nodes'
    /// slots are reached by following `MOVED`.
    pub fn store(&self, options: IdempotencyOptions) -> Result<ValkeyStore, ConfigError> {
        match self.nodes.first() {
            Some(node) => node.store(options),
            None => Err(ConfigError::Missing("a cluster node")),
        }
    }
}

/// A loopback port nobody listened on a moment ago. A cluster node also
/// listens on its port + 10000 (its bus), so for one the port is below
/// 55536.
fn free_port(cluster: bool) -> Result<u16, ValkeyStartError> {
    let highest = if cluster { 55_535 } else { u16::MAX };
    for _ in 0..100 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| ValkeyStartError(format!("no free port: {e}")))?;
        if port <= highest {
            return Ok(port);
        }
    }
    Err(ValkeyStartError(format!("no free port below {highest}")))
}

/// A CA and a server certificate it signed (127.0.0.1 and localhost), in
/// `dir`: `ca.crt`, `server.crt`, `server.key`. P-256 keys, a day long.
fn make_certificates(dir: &Path) -> Result<(), ValkeyStartError> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "1"],
            &["-subj", "/CN=lambda-idempotency-testing CA"],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign"],
        ]
        .concat(),
        [
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "server.ext",
        ],
    ];
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n\
         basicConstraints=CA:FALSE\n\
         extendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| ValkeyStartError(format!("no certificate extensions file: {e}")))?;
    for args in steps {
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .output()
            .map_err(|e| {
                ValkeyStartError(format!(
                    "the openssl command could not be run ({e}): install it \
                     (Debian: apt-get install openssl)"
                ))
            })?;
        if !out.status.success() {
            return Err(ValkeyStartError(format!(
                "openssl {} failed: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

impl Drop for ValkeyServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
