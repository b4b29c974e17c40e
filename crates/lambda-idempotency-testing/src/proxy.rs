//! A fault-injecting TCP proxy in front of DynamoDB (dynoxide), or, without
//! an upstream, a faulty DynamoDB of its own. It is not a mock of the SDK:
//! the function's real SDK client talks HTTP through it, parses what it
//! answers, and retries and times out by its own policy; the proxy breaks
//! that conversation the way a network or DynamoDB does:
//!
//! - `Refuse`: the listening socket is closed (connects get ECONNREFUSED) and
//!   open connections are reset on their next request;
//! - `ResetBeforeForward`: the request is dropped with a TCP RST;
//! - `ResetMidResponse`: the request reaches DynamoDB (the write commits),
//!   then half of the answer is sent and the connection is reset;
//! - `DropAnswer`: the request reaches DynamoDB (the write commits), its
//!   whole answer is read, and the connection is reset without a byte of
//!   it: the ambiguous failure, where the caller cannot tell a write that
//!   committed from one that never arrived, and the SDK re-sends it;
//! - `Http500`: an InternalServerError, before or after the write committed;
//! - `Throttle`: HTTP 400 with `ThrottlingException`,
//!   `ProvisionedThroughputExceededException` or `RequestLimitExceeded`, as
//!   DynamoDB sends them;
//! - `Error` and `Body`: any other DynamoDB error (AccessDeniedException, a
//!   cancelled transaction with its reasons, ...), not forwarded;
//! - `Latency`: spikes before forwarding and/or before answering;
//! - `Hang`: the request is read and never answered (until the fault is
//!   switched, healed, or the proxy dropped);
//! - `ByOperation`: one of the above by DynamoDB operation (`X-Amz-Target`),
//!   the other operations forwarded.
//!
//! Each request is hit with probability `p`, or (with
//! [`FaultProxy::set_first`]) exactly the next `n` requests the fault
//! applies to, for a test that must know which attempt breaks. Faults are
//! switched and healed at runtime; the decisions come from a seeded RNG
//! ([`super::rng`]), so a seed replays them.
//!
//! One server for both kinds of fault test: the reliability suite puts it
//! between the release binary and dynoxide ([`FaultProxy::start`]); the
//! integration tests point a client at [`FaultProxy::answering`], which has
//! no DynamoDB behind it and answers every request with the fault.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::http1::{self, Message, Reader};
use super::rng::Rng;

/// What the proxy does to a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Stop listening: connections are refused until the plan changes.
    Refuse,
    /// Read the request and reset the connection without forwarding it.
    ResetBeforeForward,
    /// Forward, and reset the connection partway through the answer.
    ResetMidResponse,
    /// Forward, read the whole answer, and reset the connection without
    /// sending any of it.
    DropAnswer,
    /// HTTP 500 with an InternalServerError body.
    Http500 {
        /// Forward first (the request is applied, its answer replaced), or
        /// not at all.
        after_forward: bool,
    },
    /// HTTP 400 with this throttling error type.
    Throttle(&'static str),
    /// This HTTP status and DynamoDB error type (`__type`), not forwarded.
    Error(u16, &'static str),
    /// This HTTP status and this exact JSON body, not forwarded.
    Body(u16, &'static str),
    /// Forward after a delay and answer after another, each drawn
    /// uniformly from its inclusive range of milliseconds.
    Latency {
        /// Before forwarding the request.
        before_ms: (u64, u64),
        /// After the answer arrived, before sending it on.
        after_ms: (u64, u64),
    },
    /// Read the request and never answer it.
    Hang,
    /// The fault for each operation (the `X-Amz-Target` suffix, e.g.
    /// `PutItem`); an operation not listed is forwarded. `Refuse` here
    /// resets the connection (the listener is for all operations).
    ByOperation(&'static [(&'static str, Fault)]),
}

impl Fault {
    /// The name [`FaultProxy::injected`] counts this fault under.
    pub fn label(&self) -> &'static str {
        match self {
            Fault::Refuse => "refuse",
            Fault::ResetBeforeForward => "reset-before-forward",
            Fault::ResetMidResponse => "reset-mid-response",
            Fault::DropAnswer => "drop-answer",
            Fault::Http500 {
                after_forward: false,
            } => "http500",
            Fault::Http500 {
                after_forward: true,
            } => "http500-after-commit",
            Fault::Throttle(_) => "throttle",
            Fault::Error(..) => "error",
            Fault::Body(..) => "body",
            Fault::Latency { .. } => "latency",
            Fault::Hang => "hang",
            Fault::ByOperation(_) => "by-operation",
        }
    }
}

/// The fault in force: with probability `p`, and, when `left` is set, only
/// until it has been injected that many more times.
#[derive(Clone, Copy)]
struct Plan {
    fault: Fault,
    p: f64,
    left: Option<u64>,
}

struct Inner {
    /// None: a fault server, nothing behind it.
    upstream: Option<SocketAddr>,
    plan: Mutex<Option<Plan>>,
    /// Bumped on every change of plan (and on drop), so that a hung request
    /// knows when to let go.
    generation: AtomicU64,
    changed: Notify,
    rng: Mutex<Rng>,
    requests: AtomicU64,
    forwarded: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    injected: Mutex<BTreeMap<&'static str, u64>>,
    item_writes: Mutex<ItemWrites>,
}

/// The item writes the requests asked for, by kind: what DynamoDB bills
/// write request units on (one per KB of the item for a standard write, two
/// for a transactional one). A refused conditional write is billed as one,
/// so every request received is counted, whatever its answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemWrites {
    /// Items written by `PutItem`, `UpdateItem`, `DeleteItem` and
    /// `BatchWriteItem`.
    pub standard: u64,
    /// Items written or checked by `TransactWriteItems` (a `ConditionCheck`
    /// is billed as a write).
    pub transactional: u64,
}

impl ItemWrites {
    /// The item writes one request asks for: by its operation, and for the
    /// batch and transaction operations by the items its JSON body lists
    /// (none if the body is not what DynamoDB would accept).
    pub fn of_request(operation: &str, body: &[u8]) -> ItemWrites {
        let items = |field: &str| -> u64 {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
                return 0;
            };
            match &v[field] {
                // TransactItems: [{"Put": ...}, ...]
                serde_json::Value::Array(a) => a.len() as u64,
                // RequestItems: {"table": [{"PutRequest": ...}, ...], ...}
                serde_json::Value::Object(tables) => tables
                    .values()
                    .map(|t| t.as_array().map_or(0, |a| a.len() as u64))
                    .sum(),
                _ => 0,
            }
        };
        match operation {
            "PutItem" | "UpdateItem" | "DeleteItem" => ItemWrites {
                standard: 1,
                transactional: 0,
            },
            "BatchWriteItem" => ItemWrites {
                standard: items("RequestItems"),
                transactional: 0,
            },
            "TransactWriteItems" => ItemWrites {
                standard: 0,
                transactional: items("TransactItems"),
            },
            _ => ItemWrites::default(),
        }
    }
}

/// The proxy (or fault server); it stops listening when dropped.
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listen on 127.0.0.1:0 and forward to `upstream_url` (http://host:port),
    /// with no fault until [`FaultProxy::set`].
    pub async fn start(upstream_url: &str, seed: u64) -> FaultProxy {
        let upstream: SocketAddr = upstream_url
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|e| panic!("upstream {upstream_url:?} is not http://host:port: {e}"));
        Self::listen(Some(upstream), seed)
    }

    /// A faulty DynamoDB: listen on 127.0.0.1:0, with nothing behind, and
    /// answer every request with `fault`. A request the fault would forward
    /// (an operation `ByOperation` does not list) is answered with a
    /// `ValidationException`, which the SDK does not retry, so a test that
    /// sends one sees it at once.
    pub async fn answering(fault: Fault) -> FaultProxy {
        let proxy = Self::listen(None, 0);
        proxy.set(fault, 1.0);
        proxy
    }

    fn listen(upstream: Option<SocketAddr>, seed: u64) -> FaultProxy {
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let inner = Arc::new(Inner {
            upstream,
            plan: Mutex::new(None),
            generation: AtomicU64::new(0),
            changed: Notify::new(),
            rng: Mutex::new(Rng::new(seed)),
            requests: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            injected: Mutex::new(BTreeMap::new()),
            item_writes: Mutex::new(ItemWrites::default()),
        });
        let task = tokio::spawn(accept_loop(listener, addr, inner.clone()));
        FaultProxy { addr, inner, task }
    }

    /// Its endpoint URL, for a client's `endpoint_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Hit each request with `fault` with probability `p` (from now on).
    pub fn set(&self, fault: Fault, p: f64) {
        self.inner.replan(Some(Plan {
            fault,
            p,
            left: None,
        }));
    }

    /// Hit exactly the next `n` requests that `fault` applies to (for
    /// [`Fault::ByOperation`], requests of a listed operation), then
    /// forward everything: deterministic, whatever the seed. `Refuse` is
    /// not counted per request; use [`FaultProxy::set`] for it.
    pub fn set_first(&self, fault: Fault, n: u64) {
        self.inner.replan(Some(Plan {
            fault,
            p: 1.0,
            left: Some(n),
        }));
    }

    /// No fault from now on (hung requests are let go: reset).
    pub fn heal(&self) {
        self.inner.replan(None);
    }

    /// Requests received (whatever happened to them).
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

    /// Requests that reached the upstream and got its answer.
    pub fn forwarded(&self) -> u64 {
        self.inner.forwarded.load(Ordering::SeqCst)
    }

    /// How many times each fault was injected, by [`Fault::label`].
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.inner.injected.lock().unwrap().clone()
    }

    /// The item writes of every request received so far (see
    /// [`ItemWrites`]).
    pub fn item_writes(&self) -> ItemWrites {
        *self.inner.item_writes.lock().unwrap()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.inner.replan(None);
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = TcpSocket::new_v4()?;
    s.set_reuseaddr(true)?;
    s.bind(addr)?;
    s.listen(1024)
}

/// Accept connections, except while the plan is `Refuse`: then the listener
/// is closed, and opened again on the same port when the plan changes.
async fn accept_loop(listener: TcpListener, addr: SocketAddr, inner: Arc<Inner>) {
    let mut listener = Some(listener);
    loop {
        let changed = inner.changed.notified();
        let refusing = matches!(
            *inner.plan.lock().unwrap(),
            Some(Plan {
                fault: Fault::Refuse,
                ..
            })
        );
        if refusing {
            if listener.take().is_some() {
                inner.count("refuse");
            }
            changed.await;
            continue;
        }
        let l = match listener.take() {
            Some(l) => l,
            // Healed: listen on the same port again.
            None => rebind(addr).await,
        };
        tokio::select! {
            accepted = l.accept() => {
                if let Ok((sock, _)) = accepted {
                    tokio::spawn(serve(sock, inner.clone()));
                }
            }
            _ = changed => {}
        }
        listener = Some(l);
    }
}

async fn rebind(addr: SocketAddr) -> TcpListener {
    let mut tries = 0;
    loop {
        match bind(addr) {
            Ok(l) => return l,
            Err(_) if tries < 200 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("proxy could not re-listen on {addr}: {e}"),
        }
    }
}

impl Inner {
    fn replan(&self, plan: Option<Plan>) {
        *self.plan.lock().unwrap() = plan;
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn count(&self, label: &'static str) {
        *self.injected.lock().unwrap().entry(label).or_default() += 1;
    }

    /// The fault for this request, if any.
    fn decide(&self, req: &Message) -> Option<Fault> {
        // One lock for the whole decision, so that concurrent requests
        // cannot both take the last of a `set_first` budget.
        let mut plan = self.plan.lock().unwrap();
        let Plan { mut fault, p, left } = (*plan)?;
        if left == Some(0) {
            return None;
        }
        if fault != Fault::Refuse && !self.rng.lock().unwrap().chance(p) {
            return None;
        }
        while let Fault::ByOperation(routes) = fault {
            let op = operation(req);
            fault = routes.iter().find(|(o, _)| *o == op).map(|(_, f)| *f)?;
        }
        if let (Some(plan), Some(n)) = (plan.as_mut(), left) {
            plan.left = Some(n - 1);
        }
        drop(plan);
        self.count(fault.label());
        Some(fault)
    }

    fn ms(&self, (lo, hi): (u64, u64)) -> Duration {
        Duration::from_millis(self.rng.lock().unwrap().range(lo, hi))
    }

    /// Wait until the plan changes after `generation`.
    async fn changed_since(&self, generation: u64) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.generation.load(Ordering::SeqCst) != generation {
                return;
            }
            changed.await;
        }
    }
}

/// The DynamoDB operation of a request: `PutItem` for
/// `X-Amz-Target: DynamoDB_20120810.PutItem`.
fn operation(req: &Message) -> &str {
    req.header("x-amz-target")
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("")
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

/// A DynamoDB error response with the message DynamoDB gives for `kind`.
fn dynamodb_error(status: u16, kind: &str) -> Vec<u8> {
    let message = match kind {
        "ThrottlingException" => "Rate of requests exceeds the allowed throughput.",
        "ProvisionedThroughputExceededException" => {
            "The level of configured provisioned throughput for the table was exceeded."
        }
        "RequestLimitExceeded" => {
            "Throughput exceeds the current throughput limit for your account."
        }
        "InternalServerError" => "Internal server error",
        _ => "injected by the fault proxy",
    };
    dynamodb_answer(
        status,
        &format!(r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"{message}"}}"#),
    )
}

fn dynamodb_answer(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        200..=299 => "OK",
        500.. => "Internal Server Error",
        _ => "Bad Request",
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

type Upstream = (
    Reader<tokio::net::tcp::OwnedReadHalf>,
    tokio::net::tcp::OwnedWriteHalf,
);

async fn serve(client: TcpStream, inner: Arc<Inner>) {
    // Every close of a client connection by the proxy is an RST: that is
    // what "reset" means below, and it is harmless otherwise.
    let _ = client.set_zero_linger();
    let _ = client.set_nodelay(true);
    let (cr, mut cw) = client.into_split();
    let mut from_client = Reader::new(cr);
    let mut upstream: Option<Upstream> = None;
    loop {
        let req = match from_client.read_message().await {
            Ok(Some(r)) => r,
            _ => return,
        };
        inner.requests.fetch_add(1, Ordering::SeqCst);
        {
            let w = ItemWrites::of_request(operation(&req), &req.body);
            let mut total = inner.item_writes.lock().unwrap();
            total.standard += w.standard;
            total.transactional += w.transactional;
        }
        let _in_flight = InFlight::new(&inner);
        let generation = inner.generation.load(Ordering::SeqCst);
        let fault = inner.decide(&req);
        // An answer instead of forwarding, if the fault gives one.
        let answer = match fault {
            Some(Fault::Refuse) | Some(Fault::ResetBeforeForward) => return, // RST
            Some(Fault::Hang) => {
                inner.changed_since(generation).await;
                return; // RST
            }
            Some(Fault::Throttle(kind)) => Some(dynamodb_error(400, kind)),
            Some(Fault::Http500 {
                after_forward: false,
            }) => Some(dynamodb_error(500, "InternalServerError")),
            Some(Fault::Error(status, kind)) => Some(dynamodb_error(status, kind)),
            Some(Fault::Body(status, body)) => Some(dynamodb_answer(status, body)),
            Some(Fault::Latency { before_ms, .. }) => {
                tokio::time::sleep(inner.ms(before_ms)).await;
                None
            }
            _ => None,
        };
        let answer = match (answer, inner.upstream) {
            (Some(a), _) => a,
            (None, None) => dynamodb_error(400, "ValidationException"),
            (None, Some(addr)) => {
                let Some(resp) = forward(addr, &mut upstream, &req).await else {
                    return;
                };
                inner.forwarded.fetch_add(1, Ordering::SeqCst);
                match fault {
                    // The write is committed; its answer never arrives.
                    Some(Fault::DropAnswer) => return, // RST
                    Some(Fault::ResetMidResponse) => {
                        let half = resp.raw.len() / 2;
                        let _ = http1::write_all(&mut cw, &resp.raw[..half]).await;
                        return; // RST
                    }
                    Some(Fault::Http500 {
                        after_forward: true,
                    }) => dynamodb_error(500, "InternalServerError"),
                    Some(Fault::Latency { after_ms, .. }) => {
                        tokio::time::sleep(inner.ms(after_ms)).await;
                        resp.raw
                    }
                    _ => resp.raw,
                }
            }
        };
        if http1::write_all(&mut cw, &answer).await.is_err() {
            return;
        }
    }
}

/// Send `req` upstream on this client connection's own upstream connection
/// (opened on first use, again after the upstream closed it) and read the
/// answer; None if the upstream cannot be reached or breaks.
async fn forward(
    addr: SocketAddr,
    upstream: &mut Option<Upstream>,
    req: &Message,
) -> Option<Message> {
    if upstream.is_none() {
        let s = TcpStream::connect(addr).await.ok()?;
        let _ = s.set_nodelay(true);
        let (r, w) = s.into_split();
        *upstream = Some((Reader::new(r), w));
    }
    let (ur, uw) = upstream.as_mut()?;
    http1::write_all(uw, &req.raw).await.ok()?;
    let resp = ur.read_message().await.ok()??;
    if resp.wants_close() {
        *upstream = None;
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::ItemWrites;

    fn w(standard: u64, transactional: u64) -> ItemWrites {
        ItemWrites {
            standard,
            transactional,
        }
    }

    #[test]
    fn item_writes_are_counted_by_operation_and_listed_items() {
        let put = br#"{"TableName":"t","Item":{"pk":{"S":"a"}}}"#;
        let transact = br#"{"TransactItems":[{"Put":{}},{"Update":{}},{"ConditionCheck":{}}]}"#;
        let batch = br#"{"RequestItems":{"a":[{"PutRequest":{}},{"DeleteRequest":{}}],"b":[{"PutRequest":{}}]}}"#;
        for (operation, body, want) in [
            ("PutItem", &put[..], w(1, 0)),
            ("UpdateItem", &put[..], w(1, 0)),
            ("DeleteItem", &put[..], w(1, 0)),
            ("TransactWriteItems", &transact[..], w(0, 3)),
            ("BatchWriteItem", &batch[..], w(3, 0)),
            // Reads and anything else write nothing.
            ("GetItem", &put[..], w(0, 0)),
            ("Query", &put[..], w(0, 0)),
            ("", &put[..], w(0, 0)),
            // A body DynamoDB would refuse lists no items.
            ("TransactWriteItems", &b"not json"[..], w(0, 0)),
            ("BatchWriteItem", &br#"{"RequestItems":7}"#[..], w(0, 0)),
        ] {
            assert_eq!(ItemWrites::of_request(operation, body), want, "{operation}");
        }
    }
}
