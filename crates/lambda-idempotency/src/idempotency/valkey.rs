//! The idempotency store on Valkey or Redis (feature `valkey`): the same
//! records, contract and limits as the DynamoDB store, for a function
//! whose claims should answer in about a millisecond from an in-VPC cache.
//!
//! # How a key is used
//!
//! Each key is one string value, a small JSON record (status, fingerprint,
//! attempt, lease, expiry, output), under `idempotency:{<key>}`: the
//! braces are a hash tag, so that everything about one key lives in one
//! slot of a cluster.
//!
//! - Claim: one atomic `SET key record NX PX ttl GET` (Redis 7.0+ and
//!   every Valkey), which sets the key only if it is absent and answers
//!   the record it found: a new key, a completed one (a replay) and a live
//!   claim each cost one round trip. The record found is classified by
//!   [`super::classify`], exactly as DynamoDB's refusal is, so this
//!   attempt's own claim seen again (a claim whose answer was lost, sent
//!   again) is held, not refused; a record [`super::may_take_over`]
//!   allows (expired, or in progress with its lease over, with the clock
//!   skew allowance: the rule DynamoDB's condition states) is read again
//!   under `WATCH` and taken over with
//!   `MULTI SET ... PX ttl EXEC`, which writes nothing if anyone touched
//!   the key since the read.
//! - Completion and release: `WATCH` the key, read it, and only if it is
//!   this attempt's in-progress claim, `MULTI SET` (or `DEL`) `EXEC`.
//!   Never a plain read-then-write: between the read and the write another
//!   call may have taken the key over, and `EXEC` then writes nothing.
//!   Not Lua (Valkey 9.1 moved scripting into a module) and not
//!   `SET ... IFEQ` (Valkey 8.1+ only; Redis 7 has none): `WATCH` works on
//!   Redis 7 and every Valkey.
//! - Expiry: every write sets `PX`, so no record outlives its expiry;
//!   expiry is still decided from the stored time by the caller's clock,
//!   as for DynamoDB.
//!
//! # Connections
//!
//! [`ValkeyStore::new`] builds the client once per cold start (no I/O);
//! connections are opened on first use, with a connect and a response
//! timeout, and kept in a small pool: a `WATCH` holds a connection for
//! one call's few commands, so a connection serves one call at a time. A
//! connection that failed is dropped, and with it every idle one (a
//! server that restarted broke them all): the next call connects anew,
//! so the store outlives a server restart without being rebuilt.
//!
//! TLS (`rediss://`, ElastiCache's in-transit encryption) through rustls
//! with the system's roots, or a private CA's
//! ([`ValkeyConfig::root_certificates`]); the server's name is always
//! checked. A TLS store installs aws-lc-rs as rustls's process-wide
//! crypto provider unless the process installed one first. AUTH with a
//! username and password ([`ValkeyConfig::credentials`], or in the URL).
//! ElastiCache's IAM authentication ([`ValkeyConfig::iam_auth`],
//! [`IamAuth`]): each new connection presents a token signed with the
//! function's own credentials (SigV4, the SDK's signer), made at most 10
//! minutes before, so no password is stored anywhere.
//!
//! # Cluster mode
//!
//! Every step of a call touches one key, whose hash tag puts it in one
//! slot, so a call runs on the one node that serves that slot. The store
//! starts with its URL's node (give it the cluster's configuration
//! endpoint, whose name resolves to a live node: a single node's address
//! makes that node a single point of failure). The first `MOVED` answer
//! has the store read the cluster's slot map (`CLUSTER SLOTS`) and run
//! the step again on the right node (nothing was done on a `MOVED`); each
//! node has its own pool. A node that cannot be reached, or whose
//! connection fails, is forgotten with its slots, so a failover's new
//! layout is learned again from the URL's node. `ASK` (a slot being
//! migrated) is answered as a retryable [`StoreError::Server`]: the
//! message is redelivered, not followed mid-migration. With TLS, a node
//! is reached by the name the cluster gives for it, which its certificate
//! must carry: ElastiCache names nodes by hostname; a self-managed
//! cluster that names them by IP address needs the addresses in its
//! certificates (or `cluster-preferred-endpoint-type hostname`). Tested
//! against a three-node cluster in cluster mode (the contract suite runs
//! on it too), without TLS.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo, RedisError};
use serde::{Deserialize, Serialize};

use super::cache::Cache;
use super::iam::IamAuth;
use super::persistence::{Persistence, sealed};
use super::store::{
    Claim, DEFAULT_KEY_ATTRIBUTE, DEFAULT_TTL_ATTRIBUTE, IdempotencyOptions, completed_fits,
    invalid,
};
use super::{Claimed, Record, Refusal, Stored, classify, may_take_over};
use crate::error::{ConfigError, StoreError};

const IN_PROGRESS: &str = "IN_PROGRESS";
const COMPLETED: &str = "COMPLETED";
/// Every record's key starts with this, before its hash tag.
const NAMESPACE: &str = "idempotency:";
/// How many times a claim or completion whose `EXEC` was aborted by a
/// concurrent write reads the key again before answering
/// [`StoreError::InconsistentRefusal`] (retryable).
const TRIES: usize = 3;
/// Idle connections kept for the next calls, per node.
const MAX_IDLE: usize = 16;
/// How many `MOVED` answers one call follows (a cluster resharding while
/// it runs) before it answers a retryable [`StoreError::Server`].
const MAX_REDIRECTS: usize = 3;
/// A cluster's hash slots.
const SLOTS: u16 = 16_384;

/// Where the server is and how to reach it: validated when built, so a
/// deployment mistake fails at the cold start. Its `Debug` shows neither
/// the URL (it may hold a password) nor the credentials.
#[derive(Clone)]
pub struct ValkeyConfig {
    url: String,
    username: Option<String>,
    password: Option<String>,
    /// PEM certificates trusted instead of the system's (a server whose
    /// certificate a private CA signed).
    root_certificates: Option<Vec<u8>>,
    /// ElastiCache IAM authentication: a fresh token per new connection.
    iam: Option<IamAuth>,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyConfig")
            .field("tls", &self.url.starts_with("rediss://"))
            .field("auth", &(self.password.is_some() || self.url.contains('@')))
            .field("own_roots", &self.root_certificates.is_some())
            .field("iam", &self.iam.is_some())
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish_non_exhaustive()
    }
}

impl ValkeyConfig {
    /// The server at `url`: `redis://host:port[/db]`, or `rediss://` for
    /// TLS (`valkey://` and `valkeys://` are read alike). Timeouts default
    /// to 1 s to connect and 500 ms for an answer: an in-VPC cache answers
    /// in about a millisecond, and a call that waits longer is better
    /// answered as a store failure, retried, than left to the deadline.
    pub fn new(url: &str) -> Result<Self, ConfigError> {
        let url = match url.split_once("://") {
            Some(("valkey", rest)) => format!("redis://{rest}"),
            Some(("valkeys", rest)) => format!("rediss://{rest}"),
            Some(("redis" | "rediss", _)) => url.to_owned(),
            _ => {
                return Err(invalid(
                    "url",
                    "a redis://, rediss://, valkey:// or valkeys:// URL",
                ));
            }
        };
        // Parsed once here so that a malformed URL fails now; the error
        // would quote the URL, so only its kind is kept.
        if url.as_str().into_connection_info().is_err() {
            return Err(invalid("url", "a redis:// or rediss:// URL with a host"));
        }
        Ok(ValkeyConfig {
            url,
            username: None,
            password: None,
            root_certificates: None,
            iam: None,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_millis(500),
        })
    }

    /// AUTH with `password`, as `username` (an ACL user; `None`: the
    /// `default` user). Overrides credentials in the URL.
    pub fn credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.username = username.map(str::to_owned);
        self.password = Some(password.to_owned());
        self
    }

    /// Authenticate with ElastiCache's IAM authentication: each new
    /// connection presents the user of `auth` with a token signed by the
    /// function's own credentials (see [`IamAuth`]); overrides
    /// [`credentials`](Self::credentials). ElastiCache accepts IAM only
    /// over TLS, so use a `rediss://` URL.
    pub fn iam_auth(mut self, auth: IamAuth) -> Self {
        self.iam = Some(auth);
        self
    }

    /// With a `rediss://` URL, trust the certificates in `pem` (one or more
    /// PEM `CERTIFICATE` blocks: a private CA's) instead of the system's
    /// roots, which is what a server whose certificate a private CA signed
    /// needs. ElastiCache's certificates chain to Amazon's public roots,
    /// which the system's store (Lambda's included) already trusts: it
    /// needs none. The server's name is checked against its certificate
    /// either way. Errors: a `redis://` URL (no TLS to trust anything
    /// for), or `pem` without a certificate that parses.
    pub fn root_certificates(mut self, pem: &[u8]) -> Result<Self, ConfigError> {
        if !self.url.starts_with("rediss://") {
            return Err(invalid(
                "url",
                "a rediss:// or valkeys:// URL: root certificates are for TLS",
            ));
        }
        let not_pem = || invalid("root_certificates", "PEM certificates");
        if !pem
            .windows(CERTIFICATE_PEM.len())
            .any(|w| w == CERTIFICATE_PEM)
        {
            return Err(not_pem());
        }
        // Parsed now, so that a malformed certificate fails at the cold
        // start; the parser's message could quote it, so only its kind
        // is kept.
        Client::build_with_tls(self.url.as_str(), tls_roots(pem)).map_err(|_| not_pem())?;
        self.root_certificates = Some(pem.to_vec());
        Ok(self)
    }

    /// How long to wait for a connection (default 1 s). Errors: zero.
    pub fn connect_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(invalid("connect_timeout", "more than zero"));
        }
        self.connect_timeout = timeout;
        Ok(self)
    }

    /// How long to wait for an answer (default 500 ms). Errors: zero.
    pub fn response_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(invalid("response_timeout", "more than zero"));
        }
        self.response_timeout = timeout;
        Ok(self)
    }

    fn client(&self) -> Result<Client, ConfigError> {
        if self.url.starts_with("rediss://") {
            install_crypto_provider();
        }
        let bad = || invalid("url", "a redis:// or rediss:// URL with a host");
        let mut info = self
            .url
            .as_str()
            .into_connection_info()
            .map_err(|_| bad())?;
        if let Some(password) = &self.password {
            let mut settings = info.redis_settings().clone().set_password(password);
            if let Some(user) = &self.username {
                settings = settings.set_username(user);
            }
            info = info.set_redis_settings(settings);
        }
        match &self.root_certificates {
            Some(pem) => Client::build_with_tls(info, tls_roots(pem)).map_err(|_| bad()),
            None => Client::open(info).map_err(|_| bad()),
        }
    }
}

/// redis-rs builds its TLS client on rustls's process default provider,
/// which rustls cannot choose when more than one is compiled in (this
/// crate's dependencies compile aws-lc-rs and ring): install aws-lc-rs's,
/// the AWS SDK's own, unless the process installed one first (that one is
/// kept: installing fails, harmlessly).
fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// How a PEM certificate block starts.
const CERTIFICATE_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----";

/// `pem` as the only roots of a TLS client, with no client certificate.
fn tls_roots(pem: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    }
}

/// The idempotency records on a Valkey or Redis server: claims,
/// completions, releases, with the same contract as the DynamoDB store
/// (the module's docs say how). Cheap to clone (the client, the pool and
/// the cache are shared). Its `Debug` shows the options and the cache's
/// size, never a cached output or the server's credentials.
#[derive(Clone)]
pub struct ValkeyStore {
    client: Client,
    config: Arc<ValkeyConfig>,
    options: Arc<IdempotencyOptions>,
    cache: Arc<Mutex<Cache>>,
    nodes: Arc<Mutex<Nodes>>,
}

/// The nodes this store has talked to: the one its URL names (`None`)
/// and, in cluster mode, the nodes the cluster named, with their idle
/// connections; and which node serves which hash slots.
#[derive(Default)]
struct Nodes {
    idle: HashMap<Option<String>, Vec<MultiplexedConnection>>,
    /// `(first, last, node)`: the cluster's own map (`CLUSTER SLOTS`),
    /// read when a node first answers `MOVED`, or single slots from
    /// `MOVED` answers where it could not be read. Bounded: the ranges do
    /// not overlap, so there are at most 16384.
    slots: Vec<(u16, u16, String)>,
}

impl Nodes {
    /// The node that serves `slot`, as far as known (`None`: the URL's).
    fn node_of(&self, slot: u16) -> Option<String> {
        self.slots
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, node)| node.clone())
    }

    /// `slot` is served by `node` (a `MOVED` answer says so).
    fn learn(&mut self, slot: u16, node: String) {
        self.slots
            .retain(|(first, last, _)| !(*first..=*last).contains(&slot));
        self.slots.push((slot, slot, node));
    }

    /// Forget what was learned about `node` (`None`: everything), and its
    /// idle connections: it failed, and its slots may have moved.
    fn forget(&mut self, node: Option<&str>) {
        match node {
            None => {
                self.idle.clear();
                self.slots.clear();
            }
            Some(node) => {
                self.idle.remove(&Some(node.to_owned()));
                self.slots.retain(|(_, _, n)| n != node);
            }
        }
    }
}

/// The cluster's slot map as a node reports it (`CLUSTER SLOTS`): each
/// range's primary as `host:port`. `None` when the node refuses the
/// command or answers something else; a range whose primary has no known
/// address (an empty host or `?`) is left out, to be learned from a
/// `MOVED` answer.
async fn cluster_slots(conn: &mut MultiplexedConnection) -> Option<Vec<(u16, u16, String)>> {
    use redis::Value;
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let answer: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .ok()?;
    let Value::Array(ranges) = answer else {
        return None;
    };
    let mut map = Vec::with_capacity(ranges.len());
    for range in &ranges {
        let Value::Array(range) = range else {
            return None;
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(primary))) =
            (range.first(), range.get(1), range.get(2))
        else {
            return None;
        };
        let (first, last) = (u16::try_from(*first).ok()?, u16::try_from(*last).ok()?);
        if first > last || last >= SLOTS {
            return None;
        }
        let host = primary
            .first()
            .and_then(text)
            .filter(|h| !h.is_empty() && h != "?");
        let port = match primary.get(1) {
            Some(Value::Int(port)) => u16::try_from(*port).ok(),
            _ => None,
        };
        if let (Some(host), Some(port)) = (host, port) {
            map.push((first, last, format!("{host}:{port}")));
        }
    }
    Some(map)
}

/// The cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the
/// text between its first `{` and the next `}`, when not empty), else of
/// the whole key, modulo 16384.
fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = key.find('{').and_then(|open| {
        let close = key[open + 1..].find('}')?;
        (close > 0).then(|| &bytes[open + 1..open + 1 + close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(bytes) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

impl fmt::Debug for ValkeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyStore")
            .field("config", &self.config)
            .field("options", &self.options)
            .field("cache", &*self.cache())
            .finish_non_exhaustive()
    }
}

/// A stored record, as JSON: the DynamoDB store's attribute names.
#[derive(Serialize, Deserialize)]
struct Item {
    status: String,
    fingerprint: String,
    attempt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_until: Option<u64>,
    expiration: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<String>,
}

impl Item {
    fn read(text: &str) -> Result<(Item, Record), StoreError> {
        // serde_json's messages may quote the value: only the kind is kept.
        let item: Item = serde_json::from_str(text)
            .map_err(|_| StoreError::CorruptItem("the record is not the store's JSON".into()))?;
        let record = match item.status.as_str() {
            IN_PROGRESS => Record::InProgress {
                fingerprint: item.fingerprint.clone(),
                attempt: item.attempt.clone(),
                lease_until_ms: item
                    .lease_until
                    .ok_or_else(|| StoreError::CorruptItem("`lease_until` is missing".into()))?,
                expires_at: item.expiration,
            },
            COMPLETED => Record::Completed {
                fingerprint: item.fingerprint.clone(),
                stored: Stored {
                    output: item
                        .data
                        .clone()
                        .ok_or_else(|| StoreError::CorruptItem("`data` is missing".into()))?,
                    expires_at: item.expiration,
                },
            },
            _ => {
                return Err(StoreError::CorruptItem(
                    "`status` is not a known state".into(),
                ));
            }
        };
        Ok((item, record))
    }

    fn text(&self) -> Result<String, StoreError> {
        serde_json::to_string(self).map_err(|_| StoreError::CorruptItem("unserialisable".into()))
    }
}

/// Why a step failed: the server (or the connection), or the records.
enum Fail {
    Redis(RedisError),
    Store(StoreError),
}

impl From<RedisError> for Fail {
    fn from(e: RedisError) -> Self {
        Fail::Redis(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// A connection error's class, never its text (which may name the host).
fn store_error(e: &RedisError) -> StoreError {
    if e.is_timeout() {
        return StoreError::Timeout;
    }
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return StoreError::Network;
    }
    let code = e.code().unwrap_or("ERR").to_owned();
    match e.kind() {
        redis::ErrorKind::AuthenticationFailed => StoreError::AccessDenied { code },
        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension => match code.as_str() {
            "NOPERM" | "NOAUTH" | "WRONGPASS" => StoreError::AccessDenied { code },
            "LOADING" | "BUSY" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "MOVED" | "ASK"
            | "EXECABORT" => StoreError::Server { code },
            _ => StoreError::Client { code },
        },
        _ => StoreError::Client { code },
    }
}

/// Whether the server `INFO server` describes takes `SET ... NX ... GET`:
/// Redis from 7.0, every Valkey (which reports a `redis_version` of 7.2 or
/// later). An answer without a version it can read counts as yes.
fn serves_set_nx_get(info: &str) -> bool {
    let version = info
        .lines()
        .find_map(|line| line.trim().strip_prefix("redis_version:"));
    let major = version.and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    major.is_none_or(|major| major >= 7)
}

/// Milliseconds from `now_ms` until `expires_at` (epoch seconds): the
/// record's `PX`, at least 1.
fn px(expires_at: u64, now_ms: u64) -> u64 {
    expires_at
        .saturating_mul(1000)
        .saturating_sub(now_ms)
        .max(1)
}

/// `$op` (an expression of `$conn`, a `&mut MultiplexedConnection`)
/// awaited on a connection to the node that serves `$key`: the URL's,
/// until a `MOVED` answer names another (a cluster), which is then
/// remembered for the key's slot and `$op` run again there. Every `$op`
/// can be run again from its start: a `MOVED` answer changed nothing. A
/// macro, not a function taking an async closure: the store's futures
/// must be `Send` for every lifetime, which a closure over borrowed
/// arguments cannot yet promise.
macro_rules! routed {
    ($store:expr, $key:expr, |$conn:ident| $op:expr) => {{
        let store = $store;
        let slot = slot($key);
        let mut answer = Err(StoreError::Server {
            code: "MOVED".into(),
        });
        for _ in 0..=MAX_REDIRECTS {
            let node = store.nodes().node_of(slot);
            let mut conn = match store.checkout(node.as_deref()).await {
                Ok(conn) => conn,
                Err(e) => {
                    // A node that cannot be reached may have failed over:
                    // its slots are asked of the URL's node again.
                    if node.is_some() && matches!(e, StoreError::Network | StoreError::Timeout) {
                        store.nodes().forget(node.as_deref());
                    }
                    answer = Err(e);
                    break;
                }
            };
            let $conn = &mut conn;
            let result = $op.await;
            if let Some((moved, addr)) = moved_to(&result) {
                // The whole map at once (one MOVED per node, not per
                // slot), then this answer, which is the latest word on
                // its slot. The connection is then dropped: a WATCH may
                // be left on it.
                let map = cluster_slots(&mut conn).await;
                let mut nodes = store.nodes();
                if let Some(map) = map {
                    nodes.slots = map;
                }
                if nodes.node_of(moved).as_deref() != Some(addr.as_str()) {
                    nodes.learn(moved, addr);
                }
                continue;
            }
            answer = store.finish(node, conn, result);
            break;
        }
        answer
    }};
}

/// The slot and node a `MOVED` answer names.
fn moved_to<T>(result: &Result<T, Fail>) -> Option<(u16, String)> {
    let Err(Fail::Redis(e)) = result else {
        return None;
    };
    if e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::Moved) {
        return None;
    }
    let (addr, slot) = e.redirect_node()?;
    (slot < SLOTS).then(|| (slot, addr.to_owned()))
}

impl ValkeyStore {
    /// The store on the server `config` names. No connection is made
    /// yet (the first call makes one; [`Self::ping`] to check at a cold
    /// start). Errors: options that leave the store unusable (an expiry
    /// under a second), a URL the client cannot use.
    pub fn new(config: ValkeyConfig, options: IdempotencyOptions) -> Result<Self, ConfigError> {
        options.check()?;
        let client = config.client()?;
        Ok(ValkeyStore {
            client,
            config: Arc::new(config),
            cache: Arc::new(Mutex::new(Cache::new(options.cache_bytes))),
            options: Arc::new(options),
            nodes: Arc::default(),
        })
    }

    /// Connect (if no connection is idle) and `PING`: a cold start that
    /// calls it learns of a wrong host, port, password or certificate at
    /// once. Where the user may read `INFO server`, a Redis older than 7.0
    /// (whose `SET` cannot take `NX` with `GET`, so every claim would fail)
    /// is [`StoreError::Unsupported`] here too; a user whose ACL refuses
    /// `INFO` is not refused for that.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.checkout(None).await?;
        let answer = async {
            let _: String = redis::cmd("PING").query_async(&mut conn).await?;
            let info: Result<String, RedisError> = redis::cmd("INFO")
                .arg("server")
                .query_async(&mut conn)
                .await;
            match info {
                Ok(info) if !serves_set_nx_get(&info) => {
                    Err(Fail::Store(StoreError::Unsupported {
                        needs: "Redis 7.0 or later, or Valkey",
                    }))
                }
                // Refused (an ACL without INFO): the claim will tell.
                Ok(_) | Err(_) => Ok(()),
            }
        }
        .await;
        self.finish(None, conn, answer)
    }

    /// The options.
    pub fn options(&self) -> &IdempotencyOptions {
        &self.options
    }

    /// The same store (client, connections) with other options. The
    /// cache is shared unless `cache_bytes` differs. Errors: as
    /// [`Self::new`].
    pub fn with_options(&self, options: IdempotencyOptions) -> Result<Self, ConfigError> {
        options.check()?;
        Ok(self.reconfigured(options))
    }

    fn reconfigured(&self, options: IdempotencyOptions) -> Self {
        let cache = if options.cache_bytes == self.options.cache_bytes {
            self.cache.clone()
        } else {
            Arc::new(Mutex::new(Cache::new(options.cache_bytes)))
        };
        ValkeyStore {
            client: self.client.clone(),
            config: self.config.clone(),
            options: Arc::new(options),
            cache,
            nodes: self.nodes.clone(),
        }
    }

    /// Epoch seconds at which a key whose output is stored at `now_ms`
    /// expires: the DynamoDB store's formula.
    pub fn expires_at(&self, now_ms: u64) -> u64 {
        self.options.expires_at(now_ms)
    }

    /// The server's key of a record: namespaced, prefixed, hash-tagged.
    fn stored_key(&self, key: &str) -> String {
        match &self.options.key_prefix {
            Some(prefix) => format!("{NAMESPACE}{{{prefix}#{key}}}"),
            None => format!("{NAMESPACE}{{{key}}}"),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, key: &str, fingerprint: &str, stored: &Stored) {
        if self.options.cache_bytes > 0 {
            self.cache().put(key, fingerprint, stored);
        }
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection to `node` (`None`: the URL's) for this call alone (a
    /// `WATCH` is the connection's).
    async fn checkout(&self, node: Option<&str>) -> Result<MultiplexedConnection, StoreError> {
        let key = node.map(str::to_owned);
        if let Some(conn) = self.nodes().idle.get_mut(&key).and_then(Vec::pop) {
            return Ok(conn);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout))
            .set_response_timeout(Some(self.config.response_timeout));
        let mut client = match node {
            None => self.client.clone(),
            Some(addr) => self.node_client(addr)?,
        };
        if let Some(iam) = &self.config.iam {
            // A token is checked when a connection authenticates: each new
            // connection presents one that is at most 10 minutes old.
            let token = tokio::time::timeout(self.config.connect_timeout, iam.token())
                .await
                .map_err(|_| StoreError::Timeout)??;
            let info = client.get_connection_info().clone();
            let settings = info
                .redis_settings()
                .clone()
                .set_username(iam.user_id())
                .set_password(token);
            client =
                Client::open(info.set_redis_settings(settings)).map_err(|e| store_error(&e))?;
        }
        let connected = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| store_error(&e));
        if let (Err(StoreError::AccessDenied { .. }), Some(iam)) = (&connected, &self.config.iam) {
            // A refused token is not offered to the next connection.
            iam.forget_token();
        }
        connected
    }

    /// A client of the cluster node at `addr` (`host:port`, as `MOVED`
    /// names it), with the URL's credentials and TLS settings.
    fn node_client(&self, addr: &str) -> Result<Client, StoreError> {
        let moved = || StoreError::Server {
            code: "MOVED".into(),
        };
        let (host, port) = addr.rsplit_once(':').ok_or_else(moved)?;
        let port: u16 = port.parse().map_err(|_| moved())?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let info = self.client.get_connection_info().clone();
        let addr = match info.addr().clone() {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => redis::ConnectionAddr::Tcp(host, port),
        };
        Client::open(info.set_addr(addr)).map_err(|_| moved())
    }

    /// Keep the connection after a step that succeeded (every `WATCH`
    /// ended by `EXEC` or `UNWATCH`); drop it after one that failed, since
    /// it may still watch a key, and on a connection error every idle one
    /// too.
    fn finish<T>(
        &self,
        node: Option<String>,
        conn: MultiplexedConnection,
        result: Result<T, Fail>,
    ) -> Result<T, StoreError> {
        match result {
            Ok(v) => {
                let mut nodes = self.nodes();
                let idle = nodes.idle.entry(node).or_default();
                if idle.len() < MAX_IDLE {
                    idle.push(conn);
                }
                Ok(v)
            }
            Err(Fail::Store(e)) => Err(e),
            Err(Fail::Redis(e)) => {
                let e = store_error(&e);
                if matches!(e, StoreError::Network | StoreError::Timeout) {
                    // A node that restarted broke its connections (and
                    // a standalone server's restart broke them all); a
                    // cluster whose node failed moved its slots.
                    self.nodes().forget(node.as_deref());
                }
                Err(e)
            }
        }
    }

    /// Claim the key: `SET NX PX GET`; refused, the record it answers is
    /// classified by [`super::classify`], or, if it expired or its lease is
    /// over, taken over (`WATCH`, `MULTI SET EXEC`). With the cache on, a key
    /// completed in this process answers from memory.
    pub async fn claim(&self, c: &Claim<'_>) -> Result<Claimed, StoreError> {
        let key = self.stored_key(c.key);
        if self.options.cache_bytes > 0
            && let Some((fingerprint, stored)) = self.cache().get(&key, c.now_ms)
        {
            return Ok(Claimed::Refused(if fingerprint == c.fingerprint {
                Refusal::Completed(stored)
            } else {
                Refusal::OtherPayload
            }));
        }
        let claimed = routed!(self, &key, |conn| self.claim_on(conn, c, &key))?;
        if let Claimed::Refused(Refusal::Completed(done)) = &claimed {
            self.remember(&key, c.fingerprint, done);
        }
        Ok(claimed)
    }

    async fn claim_on(
        &self,
        conn: &mut MultiplexedConnection,
        c: &Claim<'_>,
        key: &str,
    ) -> Result<Claimed, Fail> {
        // An in-progress record outlives its lease and the clock skew
        // allowed (the DynamoDB store's rule), so that a lease longer than
        // the expiry is not cut short by it.
        let expires_at = super::claim_expires_at(self.expires_at(c.now_ms), c.lease_until_ms);
        let record = Item {
            status: IN_PROGRESS.into(),
            fingerprint: c.fingerprint.into(),
            attempt: c.attempt.into(),
            lease_until: Some(c.lease_until_ms),
            expiration: expires_at,
            data: None,
        }
        .text()?;
        let ttl = px(expires_at, c.now_ms);
        for _ in 0..TRIES {
            // One round trip for a new key and for the common refusals (a
            // completed key, a live claim): `SET ... NX GET` (Redis 7.0+,
            // Valkey) sets the key only if it is absent and answers the
            // record it found, nil if it set it.
            let found: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&record)
                .arg("NX")
                .arg("PX")
                .arg(ttl)
                .arg("GET")
                .query_async(conn)
                .await?;
            let Some(found) = found else {
                return Ok(Claimed::Held);
            };
            let (_, found) = Item::read(&found)?;
            if !may_take_over(&found, c.now_ms) {
                return Ok(classify(c.fingerprint, c.attempt, Some(&found), c.now_ms)?);
            }
            // Expired or its lease over: taken over only if no one writes
            // the key between this read and the write (`WATCH`; EXEC
            // answers nil then, and the key is tried again).
            redis::cmd("WATCH").arg(key).exec_async(conn).await?;
            let stored: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
            let Some(stored) = stored else {
                // Expired or released since the SET: claim it again.
                redis::cmd("UNWATCH").exec_async(conn).await?;
                continue;
            };
            let (_, found) = match Item::read(&stored) {
                Ok(read) => read,
                Err(e) => {
                    redis::cmd("UNWATCH").exec_async(conn).await?;
                    return Err(e.into());
                }
            };
            if may_take_over(&found, c.now_ms) {
                let taken: Option<(String,)> = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(key)
                    .arg(&record)
                    .arg("PX")
                    .arg(ttl)
                    .query_async(conn)
                    .await?;
                if taken.is_some() {
                    return Ok(Claimed::Held);
                }
                continue;
            }
            redis::cmd("UNWATCH").exec_async(conn).await?;
            return Ok(classify(c.fingerprint, c.attempt, Some(&found), c.now_ms)?);
        }
        Err(StoreError::InconsistentRefusal.into())
    }

    /// Complete this attempt's claim with `output`, replayed until the
    /// expiry counted from `c.now_ms`: `WATCH` the key, and only if it
    /// holds this attempt's in-progress claim, `MULTI SET PX EXEC`. A
    /// claim that was lost (taken over after its lease) is
    /// [`StoreError::InconsistentRefusal`]; this attempt's own completion
    /// seen again is a success.
    ///
    /// Errors: [`StoreError::ItemTooLarge`], before anything is sent, by
    /// the DynamoDB store's rule (the same outputs fit in both).
    pub async fn complete(&self, c: &Claim<'_>, output: &str) -> Result<(), StoreError> {
        let key = self.stored_key(c.key);
        self.fits(c, &key, output)?;
        let expires_at = self.expires_at(c.now_ms);
        routed!(self, &key, |conn| self
            .complete_on(conn, c, &key, output, expires_at))?;
        self.remember(
            &key,
            c.fingerprint,
            &Stored {
                output: output.to_owned(),
                expires_at,
            },
        );
        Ok(())
    }

    async fn complete_on(
        &self,
        conn: &mut MultiplexedConnection,
        c: &Claim<'_>,
        key: &str,
        output: &str,
        expires_at: u64,
    ) -> Result<(), Fail> {
        let record = Item {
            status: COMPLETED.into(),
            fingerprint: c.fingerprint.into(),
            attempt: c.attempt.into(),
            lease_until: None,
            expiration: expires_at,
            data: Some(output.into()),
        }
        .text()?;
        for _ in 0..TRIES {
            redis::cmd("WATCH").arg(key).exec_async(conn).await?;
            let stored: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
            let mine = match stored.as_deref().map(Item::read) {
                Some(Ok((item, Record::InProgress { .. }))) if item.attempt == c.attempt => true,
                Some(Ok((item, Record::Completed { .. }))) if item.attempt == c.attempt => {
                    // Completed already by this very attempt: its answer
                    // was lost and it was sent again.
                    redis::cmd("UNWATCH").exec_async(conn).await?;
                    return Ok(());
                }
                _ => false,
            };
            if !mine {
                redis::cmd("UNWATCH").exec_async(conn).await?;
                return Err(StoreError::InconsistentRefusal.into());
            }
            let done: Option<(String,)> = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(key)
                .arg(&record)
                .arg("PX")
                .arg(px(expires_at, c.now_ms))
                .query_async(conn)
                .await?;
            if done.is_some() {
                return Ok(());
            }
        }
        Err(StoreError::InconsistentRefusal.into())
    }

    /// Would the completed record fit? The DynamoDB store's rule, so that
    /// an output is stored by both or by neither: the key, fingerprint,
    /// attempt and output with their names, a 21-byte expiry, within 400
    /// KB less 1 KB of headroom.
    fn fits(&self, c: &Claim<'_>, key: &str, output: &str) -> Result<(), StoreError> {
        // Sized as a DynamoDB item with the default table's names.
        completed_fits(
            DEFAULT_KEY_ATTRIBUTE.len() + key.len(),
            DEFAULT_TTL_ATTRIBUTE,
            c,
            output,
        )
    }

    /// Give the key back after the function failed: `WATCH`, and only if
    /// it holds this attempt's in-progress claim, `MULTI DEL EXEC`. Best
    /// effort: if this fails, the lease still ends at the deadline.
    pub async fn release(&self, c: &Claim<'_>) {
        let key = self.stored_key(c.key);
        let result = routed!(self, &key, |conn| self.release_on(conn, c, &key));
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not release the idempotency key; its lease ends at the deadline");
        }
    }

    async fn release_on(
        &self,
        conn: &mut MultiplexedConnection,
        c: &Claim<'_>,
        key: &str,
    ) -> Result<(), Fail> {
        redis::cmd("WATCH").arg(key).exec_async(conn).await?;
        let stored: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
        let mine = matches!(
            stored.as_deref().map(Item::read),
            Some(Ok((item, Record::InProgress { .. }))) if item.attempt == c.attempt
        );
        if !mine {
            redis::cmd("UNWATCH").exec_async(conn).await?;
            return Ok(());
        }
        // Aborted (someone wrote the key since the read): it is no longer
        // this attempt's to give back.
        let _: Option<(i64,)> = redis::pipe()
            .atomic()
            .cmd("DEL")
            .arg(key)
            .query_async(conn)
            .await?;
        Ok(())
    }
}

impl sealed::Sealed for ValkeyStore {
    fn reconfigured(&self, options: IdempotencyOptions) -> Self {
        ValkeyStore::reconfigured(self, options)
    }
}

impl Persistence for ValkeyStore {
    fn claim(&self, c: &Claim<'_>) -> impl Future<Output = Result<Claimed, StoreError>> + Send {
        ValkeyStore::claim(self, c)
    }

    fn complete(
        &self,
        c: &Claim<'_>,
        output: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        ValkeyStore::complete(self, c, output)
    }

    fn release(&self, c: &Claim<'_>) -> impl Future<Output = ()> + Send {
        ValkeyStore::release(self, c)
    }

    fn options(&self) -> &IdempotencyOptions {
        ValkeyStore::options(self)
    }

    fn with_options(&self, options: IdempotencyOptions) -> Result<Self, ConfigError> {
        ValkeyStore::with_options(self, options)
    }

    fn expires_at(&self, now_ms: u64) -> u64 {
        ValkeyStore::expires_at(self, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::{serves_set_nx_get, slot};

    /// The vectors of the Redis cluster specification's key hash rules.
    #[test]
    fn a_key_hashes_to_its_cluster_slot_by_its_hash_tag() {
        // CRC16/XMODEM's check value is 0x31C3.
        assert_eq!(slot("123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        for (key, hashed) in [
            ("{user1000}.following", "user1000"),
            ("{user1000}.followers", "user1000"),
            ("foo{{bar}}zap", "{bar"),
            ("foo{bar}{zap}", "bar"),
            ("idempotency:{a1b2}", "a1b2"),
        ] {
            assert_eq!(slot(key), slot(hashed), "{key}");
        }
        // An empty tag, or none closed: the whole key is hashed.
        assert_ne!(slot("foo{}{bar}"), slot("bar"));
        assert_ne!(slot("foo{bar"), slot("bar"));
    }

    #[test]
    fn set_nx_get_needs_redis_7_or_valkey() {
        for (info, serves) in [
            (
                "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n",
                true,
            ),
            (
                "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n",
                true,
            ),
            ("redis_version:10.0.0\r\n", true),
            ("# Server\r\nredis_version:6.2.14\r\n", false),
            ("redis_version:5.0.6\r\n", false),
            // Nothing to read a version from: the claim itself will tell.
            ("# Server\r\n", true),
            ("redis_version:unknown\r\n", true),
        ] {
            assert_eq!(serves_set_nx_get(info), serves, "{info:?}");
        }
    }
}
