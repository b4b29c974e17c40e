//! The function under test, started the way Lambda starts it: the real
//! binary, with `AWS_LAMBDA_RUNTIME_API` pointing at a Runtime API emulator
//! and the function's configuration in the environment.
//!
//! A [`LambdaEnv`] is one execution environment: one process, one invocation
//! at a time. If the process crashes, is killed, or misses its deadline, the
//! environment is torn down and the next invocation cold-starts a new
//! process, as Lambda does.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, oneshot};

use lambda_idempotency::time::epoch_ms;
use lambda_idempotency_testing::runtime_api::{self, Invocation, Reply, RuntimeApi};

/// How one invocation ended, as the event source mapping sees it.
#[derive(Debug, Clone)]
pub enum InvokeResult {
    /// The function answered (an `SqsBatchResponse`, normally).
    Response {
        body: Vec<u8>,
        at_ms: u64,
        deadline_ms: u64,
    },
    /// The function reported an invocation error.
    Error {
        error_type: String,
        error_message: String,
        at_ms: u64,
        deadline_ms: u64,
    },
    /// No answer by the deadline: Lambda kills the environment.
    Timeout,
    /// The process died (or was killed) during the invocation.
    Crashed { detail: String },
}

impl InvokeResult {
    pub fn label(&self) -> &'static str {
        match self {
            InvokeResult::Response { .. } => "response",
            InvokeResult::Error { .. } => "error",
            InvokeResult::Timeout => "timeout",
            InvokeResult::Crashed { .. } => "crashed",
        }
    }

    pub fn is_panic(&self) -> bool {
        matches!(self, InvokeResult::Error { error_message, .. } if error_message.contains("panicked"))
    }
}

/// Anything the event source mapping can invoke: the real binary, or the
/// in-process naive variant used to show that the assertions can fail.
pub trait Function: Send + Sync + 'static {
    fn invoke(
        &self,
        payload: Arc<Vec<u8>>,
        timeout: Duration,
    ) -> impl Future<Output = InvokeResult> + Send;
}

/// The binary named by `var` (for example the shipped release build:
/// `ORDER_CONSUMER_BIN=target/release/order-consumer`), else `built`: the
/// one cargo builds for the tests, so a fresh clone's `make test` needs no
/// release build. The properties hold for either: they are about what the
/// code does, not how fast it is compiled to do it.
pub fn function_binary(var: &str, built: &str) -> PathBuf {
    let path = match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(built),
    };
    assert!(
        path.is_file(),
        "{} does not exist (from {var}, or cargo's build of the tests)",
        path.display()
    );
    path
}

/// The function's configuration: what Lambda and the template put in its
/// environment. Nothing is inherited from the test's own environment.
#[derive(Debug, Clone)]
pub struct FnConfig {
    pub binary: PathBuf,
    pub table: String,
    pub dynamodb_endpoint: String,
    pub extra_env: Vec<(String, String)>,
    /// Keep every per-record log line, indexed by messageId (hostile tests).
    pub index_record_logs: bool,
    /// Invocations one process serves at once (`AWS_LAMBDA_MAX_CONCURRENCY`,
    /// Lambda Managed Instances); 1 is classic Lambda.
    pub concurrency: usize,
}

impl FnConfig {
    /// `RELIABILITY_FUNCTION_ENV` (space-separated `KEY=VALUE` pairs) is
    /// added to every function's environment, e.g. `RUST_LOG=debug`.
    pub fn new(binary: PathBuf, table: &str, dynamodb_endpoint: &str) -> Self {
        let extra_env = std::env::var("RELIABILITY_FUNCTION_ENV")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        FnConfig {
            // The test binary's function (its main.rs's `binary_path`).
            binary,
            table: table.to_owned(),
            dynamodb_endpoint: dynamodb_endpoint.to_owned(),
            extra_env,
            index_record_logs: false,
            concurrency: 1,
        }
    }

    /// One process serving `n` invocations at once, as on Lambda Managed
    /// Instances.
    pub fn managed(mut self, n: usize) -> Self {
        self.concurrency = n;
        self.env("AWS_LAMBDA_MAX_CONCURRENCY", &n.to_string())
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.extra_env.push((k.to_owned(), v.to_owned()));
        self
    }

    pub fn index_logs(mut self) -> Self {
        self.index_record_logs = true;
        self
    }
}

/// The function's stdout/stderr (JSON log lines), shared by every process
/// generation of an environment.
#[derive(Default)]
pub struct Logs {
    state: Mutex<LogState>,
}

#[derive(Default)]
struct LogState {
    tail: VecDeque<String>,
    panics: Vec<String>,
    /// EMF lines that said `ColdStart` 1.
    cold_starts: u32,
    records: Option<HashMap<String, Vec<Value>>>,
}

impl Logs {
    fn push(&self, line: String, index: bool) {
        let mut st = self.state.lock().unwrap();
        if line.contains("panicked") {
            st.panics.push(line.clone());
        }
        if line.starts_with('{') && line.contains("\"_aws\"") && line.contains("\"ColdStart\":1") {
            st.cold_starts += 1;
        }
        if index
            && let Ok(v) = serde_json::from_str::<Value>(&line)
            && v.pointer("/message").and_then(Value::as_str) == Some("record processed")
            && let Some(id) = v.pointer("/message_id").and_then(Value::as_str)
        {
            st.records
                .get_or_insert_with(HashMap::new)
                .entry(id.to_owned())
                .or_default()
                .push(v.clone());
        }
        if st.tail.len() >= 400 {
            st.tail.pop_front();
        }
        st.tail.push_back(line);
    }

    pub fn tail(&self, n: usize) -> String {
        let st = self.state.lock().unwrap();
        let skip = st.tail.len().saturating_sub(n);
        st.tail
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The kept lines that are JSON (log lines and EMF documents).
    pub fn json_lines(&self) -> Vec<Value> {
        let st = self.state.lock().unwrap();
        st.tail
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// How many invocations reported a cold start in their EMF line.
    pub fn cold_starts(&self) -> u32 {
        self.state.lock().unwrap().cold_starts
    }

    pub fn panics(&self) -> Vec<String> {
        self.state.lock().unwrap().panics.clone()
    }

    /// The per-record log lines for a messageId (needs `index_logs`).
    pub fn record_lines(&self, message_id: &str) -> Vec<Value> {
        let st = self.state.lock().unwrap();
        st.records
            .as_ref()
            .and_then(|m| m.get(message_id))
            .cloned()
            .unwrap_or_default()
    }
}

struct Running {
    api: RuntimeApi,
    child: Child,
    pid: u32,
}

/// One Lambda execution environment running the real binary.
pub struct LambdaEnv {
    pub name: String,
    cfg: FnConfig,
    pub logs: Arc<Logs>,
    running: tokio::sync::Mutex<Option<Running>>,
    kill: Notify,
    busy: AtomicBool,
    pid: AtomicU32,
    starts: AtomicU32,
    kills: AtomicU32,
    unexpected_exits: AtomicU32,
    timeouts: AtomicU32,
    peak_rss_kb: AtomicU64,
    /// How long after the deadline we still wait before declaring a timeout
    /// (only absorbs scheduling jitter; the deadline test checks the real
    /// arrival time against the deadline).
    grace: Duration,
}

impl LambdaEnv {
    pub fn new(name: &str, cfg: FnConfig) -> Arc<Self> {
        Arc::new(LambdaEnv {
            name: name.to_owned(),
            cfg,
            logs: Arc::new(Logs::default()),
            running: tokio::sync::Mutex::new(None),
            kill: Notify::new(),
            busy: AtomicBool::new(false),
            pid: AtomicU32::new(0),
            starts: AtomicU32::new(0),
            kills: AtomicU32::new(0),
            unexpected_exits: AtomicU32::new(0),
            timeouts: AtomicU32::new(0),
            peak_rss_kb: AtomicU64::new(0),
            grace: Duration::from_millis(1500),
        })
    }

    /// Start the process now (cold start ahead of the first invocation).
    pub async fn start(&self) {
        let mut g = self.running.lock().await;
        if g.is_none() {
            *g = Some(self.spawn().await);
        }
    }

    async fn spawn(&self) -> Running {
        let api = RuntimeApi::start().await;
        let mut cmd = Command::new(&self.cfg.binary);
        cmd.env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "order-consumer-reliability")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                "/aws/lambda/order-consumer-reliability",
            )
            .env(
                "AWS_LAMBDA_LOG_STREAM_NAME",
                format!("2026/11/29/[$LATEST]{}", self.name),
            )
            .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
            .env("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023")
            .env("LAMBDA_TASK_ROOT", "/var/task")
            .env("TZ", ":UTC")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "AKIDRELIABILITYTEST")
            .env("AWS_SECRET_ACCESS_KEY", "reliability-test-secret")
            .env("AWS_SESSION_TOKEN", "reliability-test-token")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_ENDPOINT_URL_DYNAMODB", &self.cfg.dynamodb_endpoint)
            .env("TABLE_NAME", &self.cfg.table)
            // Most tests scale SQS's redelivery down to milliseconds, which
            // the function's visibility backoff (seconds) would undo: it is
            // off unless a test turns it on with its own SQS endpoint
            // (tests/reliability/backoff.rs). Even then nothing reaches
            // AWS: the default endpoint refuses connections.
            .env("RETRY_BACKOFF", "off")
            .env("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9")
            .env("RUST_LOG", "info");
        for (k, v) in &self.cfg.extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.cfg.binary.display()));
        let pid = child.id().expect("child pid");
        for (stream, tag) in [
            (
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
                "",
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
                "[stderr] ",
            ),
        ] {
            let Some(stream) = stream else { continue };
            let logs = self.logs.clone();
            let index = self.cfg.index_record_logs;
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    logs.push(format!("{tag}{line}"), index);
                }
            });
        }
        self.pid.store(pid, Ordering::SeqCst);
        self.starts.fetch_add(1, Ordering::SeqCst);
        Running { api, child, pid }
    }

    /// SIGKILL the process if an invocation is in flight. Returns whether a
    /// kill was requested.
    pub fn kill_if_busy(&self) -> bool {
        if self.busy.load(Ordering::SeqCst) {
            self.kill.notify_waiters();
            true
        } else {
            false
        }
    }

    /// How many processes this environment has started (1 = never restarted).
    pub fn starts(&self) -> u32 {
        self.starts.load(Ordering::SeqCst)
    }

    /// Processes SIGKILLed by the test mid-invocation.
    pub fn kills(&self) -> u32 {
        self.kills.load(Ordering::SeqCst)
    }

    /// Processes that died on their own during an invocation.
    pub fn unexpected_exits(&self) -> u32 {
        self.unexpected_exits.load(Ordering::SeqCst)
    }

    /// Invocations that got no answer by their deadline.
    pub fn timeouts(&self) -> u32 {
        self.timeouts.load(Ordering::SeqCst)
    }

    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::SeqCst)
    }

    /// Is the current process alive?
    pub async fn alive(&self) -> bool {
        let mut g = self.running.lock().await;
        match g.as_mut() {
            Some(r) => matches!(r.child.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn note_rss(&self, pid: u32) {
        if let Some(kb) = vm_hwm_kb(pid) {
            self.peak_rss_kb.fetch_max(kb, Ordering::SeqCst);
        }
    }

    /// Peak resident set size (VmHWM) over every process of this environment.
    pub fn peak_rss_kb(&self) -> u64 {
        let pid = self.pid();
        if pid != 0 {
            self.note_rss(pid);
        }
        self.peak_rss_kb.load(Ordering::SeqCst)
    }

    pub async fn shutdown(&self) {
        let mut g = self.running.lock().await;
        if let Some(mut r) = g.take() {
            self.note_rss(r.pid);
            let _ = r.child.start_kill();
            let _ = r.child.wait().await;
        }
    }

    /// The most invocations the current process held at once.
    pub async fn peak_in_flight(&self) -> usize {
        let g = self.running.lock().await;
        g.as_ref().map(|r| r.api.peak_in_flight()).unwrap_or(0)
    }

    /// An invocation of a process that serves several at once: the
    /// environment is held only to hand the invocation over, not while it
    /// runs. A process that dies leaves its invocations unanswered, which
    /// shows as timeouts (`Harness::finish` asserts there are none).
    async fn invoke_concurrent(&self, payload: Arc<Vec<u8>>, timeout: Duration) -> InvokeResult {
        let deadline_ms = epoch_ms() + timeout.as_millis() as u64;
        let (tx, rx) = oneshot::channel();
        {
            let mut g = self.running.lock().await;
            if g.is_none() {
                *g = Some(self.spawn().await);
            }
            let r = g.as_ref().unwrap();
            r.api
                .submit(Invocation {
                    request_id: runtime_api::new_request_id(),
                    payload,
                    deadline_ms,
                    reply: tx,
                })
                .await;
        }
        match tokio::time::timeout(timeout + self.grace, rx).await {
            Ok(Ok(Reply::Response { body, at_ms })) => InvokeResult::Response {
                body,
                at_ms,
                deadline_ms,
            },
            Ok(Ok(Reply::Error {
                error_type,
                error_message,
                at_ms,
            })) => InvokeResult::Error {
                error_type,
                error_message,
                at_ms,
                deadline_ms,
            },
            Ok(Err(_)) => InvokeResult::Crashed {
                detail: "runtime API dropped the invocation".into(),
            },
            Err(_) => {
                self.timeouts.fetch_add(1, Ordering::SeqCst);
                InvokeResult::Timeout
            }
        }
    }

    async fn invoke_inner(&self, payload: Arc<Vec<u8>>, timeout: Duration) -> InvokeResult {
        if self.cfg.concurrency > 1 {
            return self.invoke_concurrent(payload, timeout).await;
        }
        let mut g = self.running.lock().await;
        if g.is_none() {
            *g = Some(self.spawn().await);
        }
        let r = g.as_mut().unwrap();
        let deadline_ms = epoch_ms() + timeout.as_millis() as u64;
        let (tx, rx) = oneshot::channel();
        r.api
            .submit(Invocation {
                request_id: runtime_api::new_request_id(),
                payload,
                deadline_ms,
                reply: tx,
            })
            .await;
        let killed = self.kill.notified();
        tokio::pin!(killed);
        self.busy.store(true, Ordering::SeqCst);
        let result = tokio::select! {
            reply = rx => match reply {
                Ok(Reply::Response { body, at_ms }) => InvokeResult::Response { body, at_ms, deadline_ms },
                Ok(Reply::Error { error_type, error_message, at_ms }) => InvokeResult::Error { error_type, error_message, at_ms, deadline_ms },
                Err(_) => InvokeResult::Crashed { detail: "runtime API dropped the invocation".into() },
            },
            status = r.child.wait() => { self.unexpected_exits.fetch_add(1, Ordering::SeqCst); InvokeResult::Crashed {
                detail: format!(
                    "process exited ({status:?}); init error: {:?}; last log lines:\n{}",
                    r.api.init_error(),
                    self.logs.tail(20)
                ),
            }},
            _ = tokio::time::sleep(timeout + self.grace) => { self.timeouts.fetch_add(1, Ordering::SeqCst); InvokeResult::Timeout },
            _ = &mut killed => { self.kills.fetch_add(1, Ordering::SeqCst); InvokeResult::Crashed { detail: "SIGKILL (test)".into() } },
        };
        self.busy.store(false, Ordering::SeqCst);
        if matches!(result, InvokeResult::Timeout | InvokeResult::Crashed { .. }) {
            // Lambda throws the environment away; the next invocation gets a
            // fresh process (a cold start).
            let mut r = g.take().unwrap();
            self.note_rss(r.pid);
            let _ = r.child.start_kill(); // SIGKILL
            let _ = r.child.wait().await;
        }
        result
    }
}

impl Function for LambdaEnv {
    fn invoke(
        &self,
        payload: Arc<Vec<u8>>,
        timeout: Duration,
    ) -> impl Future<Output = InvokeResult> + Send {
        self.invoke_inner(payload, timeout)
    }
}

/// VmHWM (peak RSS) of a live process, in KiB.
pub fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
