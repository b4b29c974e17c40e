//! When an unacknowledged SQS message comes back: its visibility is set,
//! before the batch answers, to the delay [`BackoffPolicy`] gives its
//! outcome, with one `ChangeMessageVisibilityBatch` call per ten messages.
//!
//! This can only change *when* a message comes back, never *whether*: the
//! record is in `batchItemFailures` whatever the call does. A call that
//! fails, times out, or refuses some entries (the batch API reports those in
//! its answer rather than as an error) is logged and counted
//! (`VisibilityFailed`), and the message comes back after the queue's own
//! visibility timeout, as it would without this module.
//!
//! FIFO queues: a message that is invisible holds back every later message
//! of its group, so a delayed head delays its group, which is what strict
//! order needs anyway (its successors could not be applied before it).
//! The successors the batch did not attempt are given 0 and come back right
//! behind it.
//!
//! The queue URL is derived from the record's `eventSourceARN`
//! (`arn:{partition}:sqs:{region}:{account}:{name}`), so no GetQueueUrl call
//! and no permission beyond `sqs:ChangeMessageVisibility` on the function's
//! own queue are needed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
use futures_util::StreamExt;
use tokio::time::Instant;

use crate::backoff::{BackoffPolicy, RetryClass};
use crate::batch::BatchReport;
use crate::metrics::VisibilityTally;
use crate::outcome::Verdict;
use crate::records::BatchRecord;

/// One message's new visibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delay {
    /// The message's id (for the logs; SQS does not need it).
    pub message_id: String,
    /// Its queue.
    pub queue_url: String,
    /// Its receipt handle.
    pub receipt_handle: String,
    /// Why it goes back.
    pub class: RetryClass,
    /// Seconds until it is visible again.
    pub visibility_secs: u64,
}

/// The queue URL of an SQS queue ARN, or `None` if it is not one.
pub fn queue_url(arn: &str) -> Option<String> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("sqs"), Some(region), Some(account), Some(name)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let ok = |s: &str, extra: &[char]| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || extra.contains(&c))
    };
    if !ok(region, &[]) || !ok(account, &[]) || !ok(name, &['_', '.']) {
        return None;
    }
    let suffix = match partition {
        "aws-cn" => "amazonaws.com.cn",
        "aws" | "aws-us-gov" => "amazonaws.com",
        _ => return None,
    };
    Some(format!("https://sqs.{region}.{suffix}/{account}/{name}"))
}

/// What to change: the delays, and how many returned messages cannot be
/// delayed (no receipt handle, no source ARN, an ARN of a partition this
/// module does not know). Those count as failed, so a deployment where the
/// backoff never works does not look healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One per message to delay.
    pub delays: Vec<Delay>,
    /// Returned messages that cannot be delayed.
    pub unplannable: u64,
}

/// The new visibility of every message `report` does not acknowledge;
/// `draw(n)` is the jitter (uniform in `0..=n`,
/// [`crate::backoff::jitter`]). Nothing when the invocation was
/// starved: then there is no time to spend on it.
pub fn plan<R: BatchRecord, V: Verdict, F>(
    policy: &BackoffPolicy,
    records: &[R],
    report: &BatchReport<V, F>,
    mut draw: impl FnMut(u64) -> u64,
) -> Plan {
    let mut plan = Plan::default();
    if report.starved.is_some() {
        return plan;
    }
    for (record, r) in records.iter().zip(&report.records) {
        if r.outcome.acknowledge() {
            continue;
        }
        let target = record
            .redelivery()
            .and_then(|back| Some((back, queue_url(back.queue_arn)?)));
        let Some((back, queue_url)) = target else {
            plan.unplannable += 1;
            continue;
        };
        let class = r.outcome.retry_class();
        plan.delays.push(Delay {
            message_id: r.record_id.clone().unwrap_or_default(),
            queue_url,
            receipt_handle: back.receipt_handle.to_owned(),
            class,
            visibility_secs: policy.delay_secs(class, back.receive_count, &mut draw),
        });
    }
    plan
}

/// Time kept for the answer after the visibility phase, at least.
const ANSWER_RESERVE: Duration = Duration::from_millis(250);
/// The visibility phase's own bound, whatever the deadline.
const PHASE_MAX: Duration = Duration::from_secs(3);

/// When the visibility phase must stop: half the deadline margin (at least
/// 250 ms) before the deadline, and never more than 3 s from `now`, so a
/// slow SQS costs each invocation at most
/// that, and the answer is never pushed past the deadline, even with
/// `DEADLINE_MARGIN_MS=0`.
pub fn cutoff(deadline: Instant, margin: Duration, now: Instant) -> Instant {
    let reserve = (margin / 2).max(ANSWER_RESERVE);
    deadline
        .checked_sub(reserve)
        .unwrap_or(now)
        .min(now + PHASE_MAX)
        .max(now)
}

/// SQS takes at most ten entries per batch call.
const ENTRIES_PER_CALL: usize = 10;
/// Calls in flight at once (a batch of 10,000 records is 1,000 calls).
const CALLS_AT_ONCE: usize = 8;

/// Sets the visibility of the messages a batch returns. Built once per cold
/// start.
#[derive(Debug, Clone)]
pub struct Redelivery {
    client: aws_sdk_sqs::Client,
    policy: BackoffPolicy,
}

impl Redelivery {
    /// Delays from `policy`, applied through `client`.
    pub fn new(client: aws_sdk_sqs::Client, policy: BackoffPolicy) -> Self {
        Redelivery { client, policy }
    }

    /// The delays it applies.
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// Apply `plan`, giving up at `until` (what is unconfirmed then counts
    /// as failed). Never fails: the outcome is only a count.
    pub async fn apply(&self, plan: Plan, until: Instant) -> VisibilityTally {
        let Plan {
            delays,
            unplannable,
        } = plan;
        if unplannable > 0 {
            tracing::warn!(
                messages = unplannable,
                "returned messages without a receipt handle or an SQS queue ARN this function can address; they come back after the queue's visibility timeout"
            );
        }
        let total = delays.len() as u64;
        if total == 0 {
            return VisibilityTally {
                changed: 0,
                failed: unplannable,
            };
        }
        let mut by_queue: Vec<(String, Vec<Delay>)> = Vec::new();
        for d in delays {
            match by_queue.iter_mut().find(|(url, _)| *url == d.queue_url) {
                Some((_, list)) => list.push(d),
                None => by_queue.push((d.queue_url.clone(), vec![d])),
            }
        }
        let calls: Vec<(String, Vec<Delay>)> = by_queue
            .into_iter()
            .flat_map(|(url, list)| {
                list.chunks(ENTRIES_PER_CALL)
                    .map(|c| (url.clone(), c.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        // Counted as confirmations arrive, so that a cutoff keeps the
        // calls that completed before it.
        let confirmed = AtomicU64::new(0);
        let run = futures_util::stream::iter(calls).for_each_concurrent(
            CALLS_AT_ONCE,
            |(url, chunk)| async {
                let n = self.call(url, chunk).await;
                confirmed.fetch_add(n, Ordering::Relaxed);
            },
        );
        if tokio::time::timeout_at(until, run).await.is_err() {
            tracing::warn!(
                messages = total,
                "setting the messages' visibility ran out of time; unconfirmed ones come back after the delay SQS applied, if it did, else after the queue's visibility timeout"
            );
        }
        let changed = confirmed.load(Ordering::Relaxed).min(total);
        VisibilityTally {
            changed,
            failed: total - changed + unplannable,
        }
    }

    /// One ChangeMessageVisibilityBatch call; the number of entries SQS
    /// confirmed.
    async fn call(&self, queue_url: String, chunk: Vec<Delay>) -> u64 {
        let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(&d.receipt_handle)
                    .visibility_timeout(i32::try_from(d.visibility_secs).unwrap_or(i32::MAX))
                    .build()
                    .ok()
            })
            .collect();
        let sent = entries.len();
        let answer = self
            .client
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        match answer {
            Ok(out) => {
                for f in out.failed() {
                    let message_id = f
                        .id()
                        .strip_prefix('m')
                        .and_then(|i| i.parse::<usize>().ok())
                        .and_then(|i| chunk.get(i))
                        .map_or("-", |d| d.message_id.as_str());
                    // The code only (ReceiptHandleIsInvalid, MessageNotInflight):
                    // SQS's message text quotes the receipt handle.
                    tracing::warn!(
                        message_id,
                        code = f.code(),
                        sender_fault = f.sender_fault(),
                        "SQS refused to set the message's visibility; it comes back after the queue's visibility timeout"
                    );
                }
                let ok = out.successful().len() as u64;
                ok.min(sent as u64)
            }
            Err(err) => {
                let code = err.code().unwrap_or("transport");
                tracing::warn!(
                    messages = chunk.len(),
                    code,
                    "ChangeMessageVisibilityBatch failed; the messages come back after the queue's visibility timeout"
                );
                tracing::debug!(error = %aws_sdk_sqs::error::DisplayErrorContext(&err), "ChangeMessageVisibilityBatch error");
                0
            }
        }
    }
}

/// The SQS client's timeouts: the visibility call is the last thing before
/// answering, within the deadline margin, so one attempt gets a second and
/// the whole operation two.
pub fn timeout_config() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_millis(500))
        .operation_attempt_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(2))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::RecordReport;
    use crate::outcome::{RecordOutcome, Skip};
    use crate::wire::ParseError;
    use aws_lambda_events::event::sqs::SqsMessage;

    #[test]
    fn queue_urls_come_from_arns_and_nothing_else() {
        for (arn, url) in [
            (
                "arn:aws:sqs:eu-west-1:111122223333:orders",
                Some("https://sqs.eu-west-1.amazonaws.com/111122223333/orders"),
            ),
            (
                "arn:aws:sqs:us-east-1:111122223333:orders.fifo",
                Some("https://sqs.us-east-1.amazonaws.com/111122223333/orders.fifo"),
            ),
            (
                "arn:aws-cn:sqs:cn-north-1:111122223333:q_1",
                Some("https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q_1"),
            ),
            (
                "arn:aws-us-gov:sqs:us-gov-west-1:111122223333:q",
                Some("https://sqs.us-gov-west-1.amazonaws.com/111122223333/q"),
            ),
            ("arn:aws:sns:us-east-1:111122223333:topic", None),
            ("arn:aws:sqs:us-east-1:111122223333:a/b", None),
            ("arn:aws:sqs:us-east-1::orders", None),
            ("arn:aws:sqs:us-east-1:1:a:b", None),
            ("arn:other:sqs:us-east-1:1:a", None),
            ("orders", None),
            ("", None),
        ] {
            assert_eq!(queue_url(arn).as_deref(), url, "{arn}");
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Toy {
        Done,
        Early,
        Conflict,
    }
    impl std::fmt::Display for Toy {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.label())
        }
    }
    impl Verdict for Toy {
        const LABELS: &'static [&'static str] = &["Done", "Early", "Conflict"];
        fn acknowledge(&self) -> bool {
            matches!(self, Toy::Done)
        }
        fn label(&self) -> &'static str {
            match self {
                Toy::Done => "Done",
                Toy::Early => "Early",
                Toy::Conflict => "Conflict",
            }
        }
        fn retry_class(&self) -> RetryClass {
            match self {
                Toy::Conflict => RetryClass::Hopeless,
                _ => RetryClass::Predecessor,
            }
        }
    }

    fn message(id: &str, receive_count: Option<&str>, arn: Option<&str>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.receipt_handle = Some(format!("rh-{id}"));
        m.event_source_arn = arn.map(str::to_owned);
        if let Some(n) = receive_count {
            m.attributes
                .insert("ApproximateReceiveCount".into(), n.into());
        }
        m
    }

    fn report(outcomes: Vec<RecordOutcome<Toy>>) -> BatchReport<Toy> {
        BatchReport {
            records: outcomes
                .into_iter()
                .enumerate()
                .map(|(i, outcome)| RecordReport {
                    record_id: Some(format!("m{i}")),
                    key: None,
                    outcome,
                })
                .collect(),
            ..BatchReport::default()
        }
    }

    const ARN: &str = "arn:aws:sqs:us-east-1:111122223333:orders";

    #[test]
    fn each_unacknowledged_message_gets_its_class_delay_from_its_receive_count() {
        let records = [
            message("m0", Some("1"), Some(ARN)),
            message("m1", Some("3"), Some(ARN)),
            message("m2", Some("2"), Some(ARN)),
            message("m3", Some("4"), Some(ARN)),
            message("m4", Some("2"), Some(ARN)),
            message("m5", Some("2"), Some(ARN)),
            message("m6", Some("9"), Some(ARN)),
            message("m7", Some("1"), Some(ARN)),
        ];
        let r = report(vec![
            RecordOutcome::Settled(Toy::Done),
            RecordOutcome::Settled(Toy::Early),
            RecordOutcome::Settled(Toy::Conflict),
            RecordOutcome::Failed(crate::error::StoreError::Timeout),
            RecordOutcome::Invalid(ParseError::MissingBody),
            RecordOutcome::NotAttempted(Skip::FifoGroupBlocked),
            RecordOutcome::Settled(Toy::Early),
            RecordOutcome::NotAttempted(Skip::Deadline),
        ]);
        // The largest draw: the ceilings themselves.
        let planned = plan(&BackoffPolicy::default(), &records, &r, |c| c);
        assert_eq!(planned.unplannable, 0);
        let planned = planned.delays;
        let got: Vec<(&str, RetryClass, u64)> = planned
            .iter()
            .map(|d| (d.message_id.as_str(), d.class, d.visibility_secs))
            .collect();
        assert_eq!(
            got,
            [
                ("m1", RetryClass::Predecessor, 4),
                ("m2", RetryClass::Hopeless, 0),
                ("m3", RetryClass::Dependency, 40),
                ("m4", RetryClass::Hopeless, 0),
                ("m5", RetryClass::Immediate, 0),
                ("m6", RetryClass::Predecessor, 60),
                // Cut off by the deadline: not straight back, or a batch that
                // keeps running out of time would spend its receives in
                // seconds.
                ("m7", RetryClass::Dependency, 5),
            ],
            "the acknowledged m0 is left alone"
        );
        assert!(planned.iter().all(|d| d.queue_url
            == "https://sqs.us-east-1.amazonaws.com/111122223333/orders"
            && d.receipt_handle == format!("rh-{}", d.message_id)));
    }

    #[test]
    fn records_that_cannot_be_redelivered_early_are_left_to_the_queue() {
        let records = [
            message("m0", None, Some(ARN)),      // no receive count: the first
            message("m1", Some("x"), Some(ARN)), // unreadable: the first
            message("m2", Some("2"), None),      // no source ARN
            message("m3", Some("2"), Some("arn:aws:kinesis:us-east-1:1:s")),
        ];
        let mut no_handle = message("m4", Some("2"), Some(ARN));
        no_handle.receipt_handle = None;
        let records: Vec<SqsMessage> = records.into_iter().chain([no_handle]).collect();
        let r = report(vec![RecordOutcome::Settled(Toy::Early); 5]);
        let planned = plan(&BackoffPolicy::default(), &records, &r, |c| c);
        assert_eq!(
            planned.unplannable, 3,
            "counted, so they show as VisibilityFailed"
        );
        let got: Vec<(&str, u64)> = planned
            .delays
            .iter()
            .map(|d| (d.message_id.as_str(), d.visibility_secs))
            .collect();
        assert_eq!(got, [("m0", 1), ("m1", 1)]);

        let mut starved = report(vec![RecordOutcome::Settled(Toy::Early); 5]);
        starved.starved = Some(crate::batch::Starved {
            budget_ms: 1,
            margin_ms: 2,
        });
        assert_eq!(
            plan(&BackoffPolicy::default(), &records, &starved, |c| c),
            Plan::default()
        );
    }

    #[test]
    fn the_visibility_phase_keeps_time_for_the_answer() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // Half the margin before the deadline...
        assert_eq!(cutoff(now + s(2), s(2), now), now + s(1));
        // ...but never more than 3 s of the invocation...
        assert_eq!(cutoff(now + s(900), s(2), now), now + s(3));
        // ...and at least 250 ms for the answer, even with no margin.
        assert_eq!(cutoff(now + s(2), Duration::ZERO, now), now + ms(1_750));
        // No time left: nothing is attempted.
        assert_eq!(cutoff(now + ms(100), s(2), now), now);
        assert_eq!(cutoff(now, s(2), now), now);
    }
}
