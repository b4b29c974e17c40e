//! A fault-injecting TCP proxy between the function and dynoxide. It is not
//! a mock of the SDK: the function's real SDK client talks HTTP through it
//! to the real server, and the proxy breaks that conversation the way a
//! network or DynamoDB does:
//!
//! - `Refuse`: the listening socket is closed (connects get ECONNREFUSED) and
//!   open connections are reset on their next request;
//! - `ResetBeforeForward`: the request is dropped with a TCP RST;
//! - `ResetMidResponse`: the request reaches DynamoDB (the write commits),
//!   then half of the answer is sent and the connection is reset;
//! - `Http500`: an InternalServerError, before or after the write committed;
//! - `Throttle`: HTTP 400 with `ThrottlingException` or
//!   `ProvisionedThroughputExceededException`, as DynamoDB sends them;
//! - `Latency`: spikes before forwarding and/or before answering.
//!
//! Each request is hit with probability `p`. Faults are switched and healed
//! at runtime; the decisions come from a seeded RNG.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::http1::{self, Reader};
use crate::util::Rng;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    Refuse,
    ResetBeforeForward,
    ResetMidResponse,
    Http500 {
        after_forward: bool,
    },
    Throttle(&'static str),
    Latency {
        before_ms: (u64, u64),
        after_ms: (u64, u64),
    },
}

impl Fault {
    pub fn label(&self) -> &'static str {
        match self {
            Fault::Refuse => "refuse",
            Fault::ResetBeforeForward => "reset-before-forward",
            Fault::ResetMidResponse => "reset-mid-response",
            Fault::Http500 {
                after_forward: false,
            } => "http500",
            Fault::Http500 {
                after_forward: true,
            } => "http500-after-commit",
            Fault::Throttle(_) => "throttle",
            Fault::Latency { .. } => "latency",
        }
    }
}

struct Inner {
    upstream: SocketAddr,
    plan: Mutex<Option<(Fault, f64)>>,
    changed: Notify,
    rng: Mutex<Rng>,
    requests: AtomicU64,
    forwarded: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    injected: Mutex<BTreeMap<&'static str, u64>>,
}

pub struct FaultProxy {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listen on 127.0.0.1:0 and forward to `upstream_url` (http://host:port).
    pub async fn start(upstream_url: &str, seed: u64) -> FaultProxy {
        let upstream: SocketAddr = upstream_url
            .trim_start_matches("http://")
            .parse()
            .expect("upstream host:port");
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind proxy");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            upstream,
            plan: Mutex::new(None),
            changed: Notify::new(),
            rng: Mutex::new(Rng::new(seed)),
            requests: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            injected: Mutex::new(BTreeMap::new()),
        });
        let i = inner.clone();
        let task = tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                let changed = i.changed.notified();
                let refusing = matches!(*i.plan.lock().unwrap(), Some((Fault::Refuse, _)));
                if refusing {
                    if listener.take().is_some() {
                        i.count("refuse");
                    }
                    changed.await;
                    continue;
                }
                if listener.is_none() {
                    // Healed: listen on the same port again.
                    let mut tries = 0;
                    listener = loop {
                        match bind(addr) {
                            Ok(l) => break Some(l),
                            Err(e) if tries < 200 => {
                                tries += 1;
                                let _ = e;
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Err(e) => panic!("proxy could not re-listen on {addr}: {e}"),
                        }
                    };
                }
                let l = listener.as_ref().unwrap();
                tokio::select! {
                    accepted = l.accept() => {
                        if let Ok((sock, _)) = accepted {
                            tokio::spawn(serve(sock, i.clone()));
                        }
                    }
                    _ = changed => {}
                }
            }
        });
        FaultProxy { addr, inner, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Hit each request with `fault` with probability `p` (from now on).
    pub fn set(&self, fault: Fault, p: f64) {
        *self.inner.plan.lock().unwrap() = Some((fault, p));
        self.inner.changed.notify_waiters();
    }

    pub fn heal(&self) {
        *self.inner.plan.lock().unwrap() = None;
        self.inner.changed.notify_waiters();
    }

    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Requests being handled right now (delayed ones included).
    pub fn in_flight(&self) -> u64 {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests that were being handled at the same moment.
    pub fn max_in_flight(&self) -> u64 {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn forwarded(&self) -> u64 {
        self.inner.forwarded.load(Ordering::SeqCst)
    }

    /// How many times each fault was injected.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.inner.injected.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let s = TcpSocket::new_v4()?;
    s.set_reuseaddr(true)?;
    s.bind(addr)?;
    s.listen(1024)
}

impl Inner {
    fn count(&self, label: &'static str) {
        *self.injected.lock().unwrap().entry(label).or_default() += 1;
    }

    /// The fault for this request, if any.
    fn decide(&self) -> Option<Fault> {
        let plan = *self.plan.lock().unwrap();
        let (fault, p) = plan?;
        if fault == Fault::Refuse || self.rng.lock().unwrap().chance(p) {
            self.count(fault.label());
            Some(fault)
        } else {
            None
        }
    }

    fn ms(&self, (lo, hi): (u64, u64)) -> Duration {
        Duration::from_millis(self.rng.lock().unwrap().range(lo, hi))
    }
}

struct InFlight<'a>(&'a Inner);

impl<'a> InFlight<'a> {
    fn new(inner: &'a Inner) -> Self {
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(inner)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn dynamodb_error(status: u16, kind: &str, message: &str) -> Vec<u8> {
    let body =
        format!(r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"{message}"}}"#);
    let reason = if status >= 500 {
        "Internal Server Error"
    } else {
        "Bad Request"
    };
    http1::response(
        status,
        reason,
        &[
            ("Content-Type", "application/x-amz-json-1.0".into()),
            (
                "x-amzn-RequestId",
                "FAULTPROXY0000000000000000000000000000000000000000000".into(),
            ),
        ],
        body.as_bytes(),
    )
}

async fn serve(client: TcpStream, inner: Arc<Inner>) {
    // Every close of a client connection by the proxy is an RST: that is
    // what "reset" means below, and it is harmless otherwise.
    let _ = client.set_zero_linger();
    let _ = client.set_nodelay(true);
    let (cr, mut cw) = client.into_split();
    let mut from_client = Reader::new(cr);
    let mut upstream: Option<(
        Reader<tokio::net::tcp::OwnedReadHalf>,
        tokio::net::tcp::OwnedWriteHalf,
    )> = None;
    loop {
        let req = match from_client.read_message().await {
            Ok(Some(r)) => r,
            _ => return,
        };
        inner.requests.fetch_add(1, Ordering::SeqCst);
        let _in_flight = InFlight::new(&inner);
        let fault = inner.decide();
        match fault {
            Some(Fault::Refuse) | Some(Fault::ResetBeforeForward) => return, // RST
            Some(Fault::Throttle(kind)) => {
                let msg = if kind == "ThrottlingException" {
                    "Rate of requests exceeds the allowed throughput."
                } else {
                    "The level of configured provisioned throughput for the table was exceeded."
                };
                if http1::write_all(&mut cw, &dynamodb_error(400, kind, msg))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Some(Fault::Http500 {
                after_forward: false,
            }) => {
                if http1::write_all(
                    &mut cw,
                    &dynamodb_error(500, "InternalServerError", "Internal server error"),
                )
                .await
                .is_err()
                {
                    return;
                }
                continue;
            }
            Some(Fault::Latency { before_ms, .. }) => tokio::time::sleep(inner.ms(before_ms)).await,
            _ => {}
        }
        // Forward to dynoxide.
        if upstream.is_none() {
            match TcpStream::connect(inner.upstream).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let (r, w) = s.into_split();
                    upstream = Some((Reader::new(r), w));
                }
                Err(_) => return,
            }
        }
        let (ur, uw) = upstream.as_mut().unwrap();
        if http1::write_all(uw, &req.raw).await.is_err() {
            return;
        }
        let resp = match ur.read_message().await {
            Ok(Some(r)) => r,
            _ => return,
        };
        inner.forwarded.fetch_add(1, Ordering::SeqCst);
        if resp.wants_close() {
            upstream = None;
        }
        let out = match fault {
            Some(Fault::ResetMidResponse) => {
                let half = resp.raw.len() / 2;
                let _ = http1::write_all(&mut cw, &resp.raw[..half]).await;
                return; // RST
            }
            Some(Fault::Http500 {
                after_forward: true,
            }) => dynamodb_error(500, "InternalServerError", "Internal server error"),
            Some(Fault::Latency { after_ms, .. }) => {
                tokio::time::sleep(inner.ms(after_ms)).await;
                resp.raw
            }
            _ => resp.raw,
        };
        if http1::write_all(&mut cw, &out).await.is_err() {
            return;
        }
    }
}
