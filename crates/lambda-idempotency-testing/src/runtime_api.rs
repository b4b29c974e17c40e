//! A Lambda Runtime API emulator: what one execution environment's runtime
//! talks to. The function binary long-polls `GET /2018-06-01/runtime/invocation/next`,
//! gets the event with the `Lambda-Runtime-*` headers, and answers with
//! `POST .../invocation/{id}/response` or `.../invocation/{id}/error`; a
//! failed cold start posts `/2018-06-01/runtime/init/error`.
//!
//! One emulator serves one process: one invocation at a time, as Lambda
//! runs an environment, or several at once when the process polls from
//! several workers (Lambda Managed Instances, `AWS_LAMBDA_MAX_CONCURRENCY`);
//! answers are matched to invocations by request id either way. It listens
//! on 127.0.0.1:0 and is torn down with the process.
//!
//! In the library because two places run the release binaries exactly as
//! Lambda does: the reliability suite (many invocations, crashes, deadlines)
//! and the benchmark (cold start: time to the first poll and to the first
//! response). One emulator means the binary under benchmark speaks to the
//! same Runtime API, headers and all, as the binary under test.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinHandle;

use super::http1::{self, Reader};
use lambda_idempotency::time::epoch_ms;

/// The ARN every invocation names (`Lambda-Runtime-Invoked-Function-Arn`).
pub const FUNCTION_ARN: &str =
    "arn:aws:lambda:us-east-1:111122223333:function:order-consumer-reliability";

/// What the runtime said about one invocation.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `POST .../response`: the body, and when it arrived (epoch ms).
    Response {
        /// The response body, as sent.
        body: Vec<u8>,
        /// When it arrived (epoch ms).
        at_ms: u64,
    },
    /// `POST .../error`.
    Error {
        /// `errorType` of the error body.
        error_type: String,
        /// `errorMessage` of the error body.
        error_message: String,
        /// When it arrived (epoch ms).
        at_ms: u64,
    },
}

/// One invocation to hand to the runtime's next poll; its answer goes to
/// `reply` (dropped unanswered if the process never answers).
pub struct Invocation {
    /// `Lambda-Runtime-Aws-Request-Id`.
    pub request_id: String,
    /// The event, as the next poll's body.
    pub payload: Arc<Vec<u8>>,
    /// `Lambda-Runtime-Deadline-Ms` (epoch ms).
    pub deadline_ms: u64,
    /// Where the runtime's answer goes.
    pub reply: oneshot::Sender<Reply>,
}

struct Shared {
    next: Mutex<mpsc::Receiver<Invocation>>,
    inflight: std::sync::Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    init_error: std::sync::Mutex<Option<String>>,
    first_poll: OnceLock<Instant>,
    /// The most invocations the process held at once (taken, not answered).
    peak_in_flight: AtomicUsize,
}

/// The emulator: hand it invocations with [`RuntimeApi::submit`] and point
/// the process's `AWS_LAMBDA_RUNTIME_API` at [`RuntimeApi::addr`].
pub struct RuntimeApi {
    /// Where it listens (`AWS_LAMBDA_RUNTIME_API` is this `host:port`).
    pub addr: std::net::SocketAddr,
    tx: mpsc::Sender<Invocation>,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
    conns: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
}

static REQUEST_IDS: AtomicU64 = AtomicU64::new(1);

/// A request id shaped like Lambda's (a UUID), unique in this process.
pub fn new_request_id() -> String {
    let n = REQUEST_IDS.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        std::process::id(),
        (n >> 48) & 0xffff,
        (n >> 36) & 0xfff,
        (n >> 24) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

impl RuntimeApi {
    /// `binary` as Lambda would start it against this emulator: a cleared
    /// environment with the Runtime API's address, the function's name,
    /// memory, version and log names, and offline AWS settings (a region,
    /// static test credentials, no instance metadata, no config files), so
    /// that the SDK never reaches for a real endpoint or credential. Its
    /// stdin and stdout are closed (stderr stays, for a failing test's
    /// logs) and it is killed when dropped. Add the function's own
    /// variables (its table, `AWS_ENDPOINT_URL_DYNAMODB`) and spawn it.
    pub fn command(
        &self,
        binary: impl AsRef<std::ffi::OsStr>,
        function_name: &str,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(binary);
        cmd.env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", self.addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", function_name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function_name}"),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/12/04/[$LATEST]test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .env("AWS_SECRET_ACCESS_KEY", "test-secret")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Listen on 127.0.0.1:0 and serve until dropped.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind runtime API");
        let addr = listener.local_addr().expect("runtime API address");
        let (tx, rx) = mpsc::channel(16);
        let shared = Arc::new(Shared {
            next: Mutex::new(rx),
            inflight: Default::default(),
            init_error: Default::default(),
            first_poll: OnceLock::new(),
            peak_in_flight: AtomicUsize::new(0),
        });
        let conns: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>> = Default::default();
        let (s, c) = (shared.clone(), conns.clone());
        let server = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let _ = sock.set_nodelay(true);
                let s = s.clone();
                let h = tokio::spawn(serve_conn(sock, s));
                let mut c = c.lock().unwrap();
                c.retain(|h| !h.is_finished());
                c.push(h);
            }
        });
        RuntimeApi {
            addr,
            tx,
            shared,
            server,
            conns,
        }
    }

    /// Queue an invocation for the runtime's next poll.
    pub async fn submit(&self, inv: Invocation) {
        // The receiver lives as long as `self`.
        let _ = self.tx.send(inv).await;
    }

    /// What the runtime posted to `/runtime/init/error`, if it did:
    /// `"{error type}: {message}"`.
    pub fn init_error(&self) -> Option<String> {
        self.shared.init_error.lock().unwrap().clone()
    }

    /// The most invocations the process held at once: above 1 only when it
    /// serves invocations concurrently.
    pub fn peak_in_flight(&self) -> usize {
        self.shared.peak_in_flight.load(Ordering::SeqCst)
    }

    /// When the runtime first polled for an invocation (the end of its cold
    /// start, as Lambda counts it).
    pub fn first_poll(&self) -> Option<Instant> {
        self.shared.first_poll.get().copied()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
        for h in self.conns.lock().unwrap().drain(..) {
            h.abort();
        }
    }
}

async fn serve_conn(sock: tokio::net::TcpStream, shared: Arc<Shared>) {
    let (r, mut w) = sock.into_split();
    let mut reader = Reader::new(r);
    while let Ok(Some(req)) = reader.read_message().await {
        let (method, path) = req.request_line();
        let path = path.to_owned();
        let out = match (method, path.as_str()) {
            ("GET", "/2018-06-01/runtime/invocation/next") => {
                shared.first_poll.get_or_init(Instant::now);
                let inv = {
                    let mut next = shared.next.lock().await;
                    next.recv().await
                };
                let Some(inv) = inv else { return };
                {
                    let mut inflight = shared.inflight.lock().unwrap();
                    inflight.insert(inv.request_id.clone(), inv.reply);
                    shared
                        .peak_in_flight
                        .fetch_max(inflight.len(), Ordering::SeqCst);
                }
                http1::response(
                    200,
                    "OK",
                    &[
                        ("Content-Type", "application/json".into()),
                        ("Lambda-Runtime-Aws-Request-Id", inv.request_id.clone()),
                        ("Lambda-Runtime-Deadline-Ms", inv.deadline_ms.to_string()),
                        ("Lambda-Runtime-Invoked-Function-Arn", FUNCTION_ARN.into()),
                        (
                            "Lambda-Runtime-Trace-Id",
                            format!(
                                "Root=1-{:08x}-{:0>24};Parent=53995c3f42cd8ad8;Sampled=0",
                                epoch_ms() / 1000,
                                inv.request_id
                                    .replace('-', "")
                                    .chars()
                                    .rev()
                                    .take(24)
                                    .collect::<String>()
                            ),
                        ),
                    ],
                    &inv.payload,
                )
            }
            ("POST", "/2018-06-01/runtime/init/error") => {
                let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                *shared.init_error.lock().unwrap() = Some(format!(
                    "{}: {}",
                    req.header("lambda-runtime-function-error-type")
                        .unwrap_or("?"),
                    v.get("errorMessage").and_then(Value::as_str).unwrap_or("")
                ));
                accepted()
            }
            ("POST", p) if p.starts_with("/2018-06-01/runtime/invocation/") => {
                let rest = &p["/2018-06-01/runtime/invocation/".len()..];
                let (id, kind) = rest.split_once('/').unwrap_or((rest, ""));
                let sender = shared.inflight.lock().unwrap().remove(id);
                match (sender, kind) {
                    (Some(tx), "response") => {
                        let _ = tx.send(Reply::Response {
                            body: req.body.clone(),
                            at_ms: epoch_ms(),
                        });
                        accepted()
                    }
                    (Some(tx), "error") => {
                        let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                        let field =
                            |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                        let _ = tx.send(Reply::Error {
                            error_type: field("errorType"),
                            error_message: field("errorMessage"),
                            at_ms: epoch_ms(),
                        });
                        accepted()
                    }
                    // Not in flight: a late answer after a timeout.
                    _ => http1::response(
                        400,
                        "Bad Request",
                        &[("Content-Type", "application/json".into())],
                        br#"{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}"#,
                    ),
                }
            }
            _ => http1::response(404, "Not Found", &[], b""),
        };
        if http1::write_all(&mut w, &out).await.is_err() {
            return;
        }
    }
}

fn accepted() -> Vec<u8> {
    http1::response(
        202,
        "Accepted",
        &[("Content-Type", "application/json".into())],
        br#"{"status":"OK"}"#,
    )
}
