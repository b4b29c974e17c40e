//! An SQS queue and a Lambda event source mapping (ESM) over it.
//!
//! The queue holds messages (messageId, body, receive count). A receive takes
//! up to N visible messages and makes them invisible; the ESM invokes a
//! function with them as a batch whose records are shaped exactly like
//! Lambda's. Afterwards, as Lambda does with `ReportBatchItemFailures`:
//! - a partial response deletes every record not listed in
//!   `batchItemFailures`; the listed ones become visible again after a
//!   (scaled-down) visibility timeout;
//! - an invocation error, a timeout, a crash, or a malformed response (an
//!   empty or unknown itemIdentifier, not JSON) fails the whole batch;
//! - a message that fails when its receive count has reached
//!   `max_receive_count` moves to the DLQ.
//!
//! - a message whose visibility the function set through the queue's SQS
//!   endpoint ([`Queue::serve_sqs`], ChangeMessageVisibilityBatch) comes
//!   back when that visibility ends instead.
//!
//! Several pollers may invoke several functions at once (Lambda
//! concurrency). Everything is bounded: a drain stops with an error after
//! `max_invocations` or `max_wall`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::function::{Function, InvokeResult};
use super::util::md5_hex;
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency_testing::rng::Rng;
use lambda_idempotency_testing::sqs_endpoint::SqsEndpoint;

pub const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:111122223333:order-events";

#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub max_receive_count: u32,
    /// How long a failed message stays invisible before redelivery.
    pub redelivery_delay: Duration,
    /// How a receive picks messages among the visible ones.
    pub pick: Pick,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// Uniformly at random: a standard queue with no ordering at all.
    Random,
    /// At random among the oldest `n` visible: roughly FIFO, locally shuffled.
    Window(usize),
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_receive_count: 50,
            redelivery_delay: Duration::from_millis(10),
            pick: Pick::Random,
            seed: 1,
        }
    }
}

/// A message as the producer sent it.
#[derive(Debug, Clone)]
pub struct Message {
    /// Internal handle: two copies of one messageId are two handles.
    pub handle: u64,
    pub message_id: String,
    pub body: String,
    pub receive_count: u32,
    pub sent_ms: u64,
    pub first_receive_ms: Option<u64>,
    /// The visibility (seconds) the function asked for on each receive it
    /// did not acknowledge, in order.
    pub visibility_requests: Vec<u64>,
    /// When it was deleted (acknowledged), epoch ms.
    pub deleted_ms: Option<u64>,
}

/// A received batch, in flight until completed.
#[derive(Debug, Clone)]
pub struct Batch {
    pub handles: Vec<u64>,
    pub message_ids: Vec<String>,
    pub bodies: Vec<String>,
    pub payload: Arc<Vec<u8>>,
}

impl Batch {
    /// The event holding only the records at `indices`.
    pub fn subset_payload(&self, indices: &[usize]) -> Arc<Vec<u8>> {
        let mut v: Value = serde_json::from_slice(&self.payload).unwrap();
        let records = v["Records"].as_array().unwrap();
        let kept: Vec<Value> = indices.iter().map(|&i| records[i].clone()).collect();
        v["Records"] = Value::Array(kept);
        Arc::new(serde_json::to_vec(&v).unwrap())
    }
}

/// How the ESM settled one batch.
#[derive(Debug, Clone, Default)]
pub struct Settled {
    /// Deleted (acknowledged) messages: (messageId, body).
    pub deleted: Vec<(String, String)>,
    /// Returned to the queue (or moved to the DLQ).
    pub failed: Vec<String>,
}

#[derive(Default)]
struct State {
    msgs: HashMap<u64, Message>,
    visible: VecDeque<u64>,
    delayed: BinaryHeap<Reverse<(Instant, u64)>>,
    in_flight: HashSet<u64>,
    /// In-flight messages whose visibility the function set: when they are
    /// visible again if not deleted.
    visible_at: HashMap<u64, Instant>,
    dlq: Vec<Message>,
    deleted: Vec<Message>,
    next_handle: u64,
}

pub struct Queue {
    pub cfg: QueueConfig,
    st: Mutex<State>,
    rng: Mutex<Rng>,
    /// messageIds are unique across every queue of the test process.
    ids: Mutex<Rng>,
    pub stats: Stats,
}

#[derive(Default)]
pub struct Stats {
    pub receives: AtomicU64,
    pub invocations: AtomicU64,
    pub responses: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub crashes: AtomicU64,
    pub whole_batch_failures: AtomicU64,
    pub record_failures: AtomicU64,
    pub deletions: AtomicU64,
    pub lost_responses: AtomicU64,
}

impl Stats {
    pub fn summary(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "invocations={} responses={} errors={} timeouts={} crashes={} whole_batch_failures={} record_failures={} deletions={} lost_responses={}",
            g(&self.invocations),
            g(&self.responses),
            g(&self.errors),
            g(&self.timeouts),
            g(&self.crashes),
            g(&self.whole_batch_failures),
            g(&self.record_failures),
            g(&self.deletions),
            g(&self.lost_responses)
        )
    }
}

impl Queue {
    pub fn new(cfg: QueueConfig) -> Arc<Self> {
        let seed = cfg.seed;
        static QUEUES: AtomicU64 = AtomicU64::new(0);
        let n = QUEUES.fetch_add(1, Ordering::Relaxed);
        Arc::new(Queue {
            cfg,
            st: Mutex::new(State::default()),
            rng: Mutex::new(Rng::new(seed)),
            ids: Mutex::new(Rng::new(
                seed ^ n.wrapping_mul(0xA24B_AED4_963E_E407) ^ u64::from(std::process::id()) << 32,
            )),
            stats: Stats::default(),
        })
    }

    /// SendMessage. A fresh SQS messageId is drawn unless `message_id` is
    /// given (a second copy of an existing message: SQS's at-least-once).
    pub fn send(&self, body: impl Into<String>, message_id: Option<String>) -> String {
        let id = message_id.unwrap_or_else(|| self.ids.lock().unwrap().uuid());
        let mut st = self.st.lock().unwrap();
        let handle = st.next_handle;
        st.next_handle += 1;
        st.msgs.insert(
            handle,
            Message {
                handle,
                message_id: id.clone(),
                body: body.into(),
                receive_count: 0,
                sent_ms: epoch_ms(),
                first_receive_ms: None,
                visibility_requests: Vec::new(),
                deleted_ms: None,
            },
        );
        st.visible.push_back(handle);
        id
    }

    /// No message is visible, delayed or in flight.
    pub fn is_drained(&self) -> bool {
        let st = self.st.lock().unwrap();
        st.visible.is_empty() && st.delayed.is_empty() && st.in_flight.is_empty()
    }

    /// ChangeMessageVisibility for one in-flight message, by the receipt
    /// handle of its current receive (an older receive's handle, or one of
    /// a message no longer in flight, is refused as SQS refuses it).
    pub fn change_visibility(&self, receipt_handle: &str, secs: u64) -> bool {
        let Some((handle, count)) = parse_receipt(receipt_handle) else {
            return false;
        };
        let mut st = self.st.lock().unwrap();
        let current = st.in_flight.contains(&handle)
            && st
                .msgs
                .get(&handle)
                .is_some_and(|m| m.receive_count == count);
        if !current {
            return false;
        }
        st.visible_at
            .insert(handle, Instant::now() + Duration::from_secs(secs));
        if let Some(m) = st.msgs.get_mut(&handle) {
            m.visibility_requests.push(secs);
        }
        true
    }

    /// A local SQS endpoint (`AWS_ENDPOINT_URL_SQS`) whose visibility
    /// changes apply to this queue.
    pub async fn serve_sqs(self: &Arc<Self>) -> SqsEndpoint {
        let queue = Arc::downgrade(self);
        SqsEndpoint::start(Arc::new(move |_url: &str, receipt: &str, secs: u64| {
            queue
                .upgrade()
                .is_some_and(|q| q.change_visibility(receipt, secs))
        }))
        .await
    }

    pub fn dlq(&self) -> Vec<Message> {
        self.st.lock().unwrap().dlq.clone()
    }

    pub fn deleted(&self) -> Vec<Message> {
        self.st.lock().unwrap().deleted.clone()
    }

    pub fn describe(&self) -> String {
        let st = self.st.lock().unwrap();
        format!(
            "visible={} delayed={} in_flight={} dlq={} deleted={}",
            st.visible.len(),
            st.delayed.len(),
            st.in_flight.len(),
            st.dlq.len(),
            st.deleted.len()
        )
    }

    /// ReceiveMessage as the ESM does: up to `max` visible messages.
    pub fn receive(&self, max: usize) -> Option<Batch> {
        let now = Instant::now();
        let mut st = self.st.lock().unwrap();
        while let Some(Reverse((at, h))) = st.delayed.peek().copied() {
            if at > now {
                break;
            }
            st.delayed.pop();
            st.visible.push_back(h);
        }
        if st.visible.is_empty() {
            return None;
        }
        let mut rng = self.rng.lock().unwrap();
        let mut handles = Vec::new();
        while handles.len() < max && !st.visible.is_empty() {
            let n = st.visible.len();
            let i = match self.cfg.pick {
                Pick::Random => rng.below(n),
                Pick::Window(w) => rng.below(n.min(w.max(1))),
            };
            let h = match self.cfg.pick {
                Pick::Random => st.visible.swap_remove_back(i).unwrap(),
                Pick::Window(_) => st.visible.remove(i).unwrap(),
            };
            handles.push(h);
        }
        drop(rng);
        let now_ms = epoch_ms();
        let mut records = Vec::with_capacity(handles.len());
        let mut message_ids = Vec::with_capacity(handles.len());
        let mut bodies = Vec::with_capacity(handles.len());
        for &h in &handles {
            st.in_flight.insert(h);
            let m = st.msgs.get_mut(&h).unwrap();
            m.receive_count += 1;
            let first = *m.first_receive_ms.get_or_insert(now_ms);
            records.push(sqs_record(m, first, now_ms));
            message_ids.push(m.message_id.clone());
            bodies.push(m.body.clone());
        }
        self.stats.receives.fetch_add(1, Ordering::Relaxed);
        let payload = serde_json::to_vec(&json!({ "Records": records })).unwrap();
        Some(Batch {
            handles,
            message_ids,
            bodies,
            payload: Arc::new(payload),
        })
    }

    /// Settle a batch from one invocation's result.
    pub fn complete(&self, batch: &Batch, result: &InvokeResult) -> Settled {
        self.complete_many(batch, std::slice::from_ref(result))
    }

    /// Settle a batch that several functions received at the same time (an
    /// at-least-once duplicate delivery): a message is deleted if any of
    /// them acknowledged it.
    pub fn complete_many(&self, batch: &Batch, results: &[InvokeResult]) -> Settled {
        let all: Vec<usize> = (0..batch.handles.len()).collect();
        let parts: Vec<(Vec<usize>, InvokeResult)> =
            results.iter().map(|r| (all.clone(), r.clone())).collect();
        self.complete_parts(batch, &parts)
    }

    /// Like `complete_many`, when each function received only some records
    /// of the batch (their indices): partially overlapping deliveries. A
    /// record nobody received goes back to the queue.
    pub fn complete_parts(&self, batch: &Batch, parts: &[(Vec<usize>, InvokeResult)]) -> Settled {
        let mut acked: HashSet<u64> = HashSet::new();
        for (indices, result) in parts {
            self.count(result);
            let ids: Vec<String> = indices
                .iter()
                .map(|&i| batch.message_ids[i].clone())
                .collect();
            match failed_ids(&ids, result) {
                Ok(failed) => {
                    for &i in indices {
                        if !failed.contains(batch.message_ids[i].as_str()) {
                            acked.insert(batch.handles[i]);
                        }
                    }
                }
                Err(_) => {
                    self.stats
                        .whole_batch_failures
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.settle(batch, &acked)
    }

    /// The function answered, but the ESM "lost" the answer (its visibility
    /// timeout expired first): the whole batch is redelivered.
    pub fn lose(&self, batch: &Batch, result: &InvokeResult) -> Settled {
        self.count(result);
        self.stats.lost_responses.fetch_add(1, Ordering::Relaxed);
        self.stats
            .whole_batch_failures
            .fetch_add(1, Ordering::Relaxed);
        self.settle(batch, &HashSet::new())
    }

    fn count(&self, result: &InvokeResult) {
        self.stats.invocations.fetch_add(1, Ordering::Relaxed);
        match result {
            InvokeResult::Response { .. } => &self.stats.responses,
            InvokeResult::Error { .. } => &self.stats.errors,
            InvokeResult::Timeout => &self.stats.timeouts,
            InvokeResult::Crashed { .. } => &self.stats.crashes,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// Delete the acknowledged messages; return the others to the queue
    /// (after the visibility timeout) or move them to the DLQ.
    fn settle(&self, batch: &Batch, acked: &HashSet<u64>) -> Settled {
        let mut settled = Settled::default();
        let mut st = self.st.lock().unwrap();
        let mut rng = self.rng.lock().unwrap();
        for (i, &h) in batch.handles.iter().enumerate() {
            st.in_flight.remove(&h);
            let requested = st.visible_at.remove(&h);
            if acked.contains(&h) {
                let mut m = st.msgs.remove(&h).unwrap();
                m.deleted_ms = Some(epoch_ms());
                settled.deleted.push((m.message_id.clone(), m.body.clone()));
                st.deleted.push(m);
                self.stats.deletions.fetch_add(1, Ordering::Relaxed);
            } else {
                self.stats.record_failures.fetch_add(1, Ordering::Relaxed);
                settled.failed.push(batch.message_ids[i].clone());
                let m = st.msgs.get(&h).unwrap();
                if m.receive_count >= self.cfg.max_receive_count {
                    let m = st.msgs.remove(&h).unwrap();
                    st.dlq.push(m);
                } else {
                    // The visibility the function set, else the queue's
                    // timeout, jittered a little, as real redeliveries are
                    // not in lockstep.
                    let at = requested.unwrap_or_else(|| {
                        let base = self.cfg.redelivery_delay.as_micros() as u64;
                        Instant::now() + Duration::from_micros(rng.range(base / 2, base * 3 / 2))
                    });
                    st.delayed.push(Reverse((at, h)));
                }
            }
        }
        settled
    }
}

/// The messageIds to keep, or why Lambda would fail the whole batch.
fn failed_ids(message_ids: &[String], result: &InvokeResult) -> Result<HashSet<String>, String> {
    let body = match result {
        InvokeResult::Response { body, .. } => body,
        InvokeResult::Error {
            error_type,
            error_message,
            ..
        } => return Err(format!("invocation error {error_type}: {error_message}")),
        InvokeResult::Timeout => return Err("timeout".into()),
        InvokeResult::Crashed { detail } => return Err(format!("crashed: {detail}")),
    };
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("response not JSON: {e}"))?;
    let ids: HashSet<&str> = message_ids.iter().map(String::as_str).collect();
    let mut failed = HashSet::new();
    match v.get("batchItemFailures") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let id = item
                    .get("itemIdentifier")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if id.is_empty() || !ids.contains(id) {
                    return Err(format!("invalid itemIdentifier {id:?}"));
                }
                failed.insert(id.to_owned());
            }
        }
        Some(other) => return Err(format!("batchItemFailures is not a list: {other}")),
    }
    Ok(failed)
}

/// The message handle and receive count in a receipt handle of
/// [`sqs_record`].
fn parse_receipt(receipt: &str) -> Option<(u64, u32)> {
    let mut parts = receipt.strip_prefix("AQEB")?.split('/');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// One record as Lambda's SQS event source mapping delivers it.
fn sqs_record(m: &Message, first_receive_ms: u64, now_ms: u64) -> Value {
    json!({
        "messageId": m.message_id,
        "receiptHandle": format!("AQEB{}/{}/{}", m.handle, m.receive_count, now_ms),
        "body": m.body,
        "attributes": {
            "ApproximateReceiveCount": m.receive_count.to_string(),
            "SentTimestamp": m.sent_ms.to_string(),
            "SenderId": "AROAEXAMPLE:order-producer",
            "ApproximateFirstReceiveTimestamp": first_receive_ms.to_string()
        },
        "messageAttributes": {},
        "md5OfBody": md5_hex(m.body.as_bytes()),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1"
    })
}

/// Something to run on every settled batch, e.g. checking that every deleted
/// message's effect is committed at the moment it is deleted.
pub type Audit = Arc<
    dyn Fn(Settled) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

#[derive(Clone)]
pub struct DrainOpts {
    pub batch_size: usize,
    /// The invocation timeout (the function's configured timeout).
    pub timeout: Duration,
    pub max_invocations: u64,
    pub max_wall: Duration,
    /// Probability that the ESM "loses" a successful answer (redelivery).
    pub lose_response: f64,
    pub audit: Option<Audit>,
    /// Reaching `max_invocations` ends the run quietly (a fault phase) rather
    /// than being an error.
    pub stop_at_bound: bool,
}

impl Default for DrainOpts {
    fn default() -> Self {
        DrainOpts {
            batch_size: 10,
            timeout: Duration::from_secs(30),
            max_invocations: 100_000,
            max_wall: Duration::from_secs(120),
            lose_response: 0.0,
            audit: None,
            stop_at_bound: false,
        }
    }
}

/// Run one poller per function until the queue is drained (hitting a bound
/// first is an error, unless `stop_at_bound`).
pub async fn drain<F: Function>(
    queue: &Arc<Queue>,
    functions: &[Arc<F>],
    opts: DrainOpts,
) -> Result<(), String> {
    let started = Instant::now();
    let invocations = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        let (q, f, opts, inv) = (queue.clone(), f.clone(), opts.clone(), invocations.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(q.cfg.seed.wrapping_add(1000 + i as u64));
            loop {
                if q.is_drained() {
                    return Ok(());
                }
                if started.elapsed() > opts.max_wall {
                    return Err(format!("not drained after {:?}", opts.max_wall));
                }
                if inv.fetch_add(1, Ordering::SeqCst) >= opts.max_invocations {
                    if opts.stop_at_bound {
                        return Ok(());
                    }
                    return Err(format!(
                        "not drained after {} invocations",
                        opts.max_invocations
                    ));
                }
                let Some(batch) = q.receive(opts.batch_size) else {
                    inv.fetch_sub(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                let result = f.invoke(batch.payload.clone(), opts.timeout).await;
                let settled = if matches!(result, InvokeResult::Response { .. })
                    && rng.chance(opts.lose_response)
                {
                    q.lose(&batch, &result)
                } else {
                    q.complete(&batch, &result)
                };
                if let Some(audit) = &opts.audit {
                    audit(settled).await;
                }
            }
        }));
    }
    let mut errors = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("poller panicked: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        errors.dedup();
        Err(format!(
            "{}; queue: {}; {}",
            errors.join("; "),
            queue.describe(),
            queue.stats.summary()
        ))
    }
}
