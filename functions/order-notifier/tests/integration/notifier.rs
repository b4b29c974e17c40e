//! The order notifier against a real DynamoDB-compatible server and a local
//! provider that deduplicates by Idempotency-Key. Stream records have
//! exactly the shape Lambda delivers (`eventName`, `dynamodb.Keys`,
//! `NewImage`, `OldImage`, `SequenceNumber`, `StreamViewType`, ...).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::BatchError;
use lambda_idempotency::RecordOutcome;
use lambda_idempotency::time::epoch_ms;
use order_notifier::domain::{Notification, NotifyError, NotifyOutcome, Template};
use order_notifier::store::{Claim, KEY, NotificationStore};
use order_notifier::url::{URL_VAR, WebhookUrl};
use order_notifier::webhook::{Delivery, REFUSAL_REASON, Webhook};
use order_notifier::{NotifierConfig, NotifierFunction};
use serde_json::{Value, json};

use orders::testing::provider::{Mode, Provider};
use orders::testing::proxy::{Fault, FaultProxy};
use orders::testing::*;

struct Setup {
    db: TestDb,
    table: String,
    provider: Provider,
}

impl Setup {
    async fn new() -> Setup {
        let db = TestDb::new().await;
        let table = db.extra_table("notifications", KEY).await;
        Setup {
            db,
            table,
            provider: Provider::start().await,
        }
    }

    fn notifier(&self, env: &[(&str, &str)]) -> NotifierFunction {
        self.notifier_with(&self.db.client, env)
    }

    /// The notifier with its own DynamoDB client (through a fault proxy).
    fn notifier_with(
        &self,
        client: &aws_sdk_dynamodb::Client,
        env: &[(&str, &str)],
    ) -> NotifierFunction {
        let mut vars: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.insert("NOTIFICATIONS_TABLE".into(), self.table.clone());
        vars.insert("NOTIFY_WEBHOOK_URL".into(), self.provider.url.clone());
        let config = NotifierConfig::from_lookup(|k| vars.get(k).cloned()).expect("config");
        function(client, config)
    }

    async fn item(&self, id: &str) -> Option<HashMap<String, AttributeValue>> {
        self.db
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(id.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item
    }

    async fn status(&self, id: &str) -> Option<String> {
        self.item(id).await.map(|i| s(&i, "status"))
    }
}

/// The function for a configuration with a literal NOTIFY_WEBHOOK_URL (what
/// the binary's bootstrap does after reading it from SSM otherwise).
pub(crate) fn function(
    client: &aws_sdk_dynamodb::Client,
    config: NotifierConfig,
) -> NotifierFunction {
    let url = config
        .webhook
        .literal()
        .cloned()
        .expect("a literal NOTIFY_WEBHOOK_URL");
    order_notifier::function(client.clone(), config, &url).expect("notifier")
}

/// An order image as the order consumer writes it (the fields that matter).
fn image(order: &str, status: &str) -> Value {
    json!({"order_id": {"S": order}, "status": {"S": status},
           "customer_id": {"S": "cust-1"}, "last_event_seq": {"N": "1"},
           "history": {"L": [{"S": "evt-1"}]}})
}

/// One stream record, shaped as Lambda delivers it.
pub(crate) fn record(seq: u64, order: &str, old: Option<&str>, new: Option<&str>) -> Value {
    order_notifier::testing::stream_record(
        seq,
        order,
        old.map(|o| image(order, o)),
        new.map(|n| image(order, n)),
    )
}

pub(crate) fn stream(records: Vec<Value>) -> StreamEvent {
    serde_json::from_value(json!({ "Records": records })).expect("a DynamoDB stream event")
}

async fn run(n: &NotifierFunction, event: &StreamEvent) -> (Vec<&'static str>, Vec<String>) {
    let (report, response) = n.handle_batch(event, far_deadline()).await;
    let response = response.unwrap_or_else(|e| {
        let outcomes: Vec<String> = report.outcomes().map(ToString::to_string).collect();
        panic!("partial-batch response, not {e:?}: {outcomes:?}")
    });
    (
        report.outcomes().map(RecordOutcome::label).collect(),
        response
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.clone())
            .collect(),
    )
}

/// The webhook timeout for a provider that answers: the configuration's
/// longest (NOTIFY_TIMEOUT_MS). A test that expects the provider's answer
/// (an HTTP status, a delivery) must not depend on how fast a loaded
/// machine gets that answer to the client: under load a local POST has
/// taken longer than 300 ms, and was then (rightly) ProviderUnreachable.
const ANSWERED_MS: &str = "30000";

/// The webhook timeout for a provider that hangs ([`Mode::Hang`]): short,
/// only so that the test does not wait long; any load only makes the
/// request time out later, never answer.
const HANG_MS: &str = "300";

/// Two orders' lifecycles: ord-1 placed, paid, shipped, delivered, and a
/// MODIFY that keeps SHIPPED (a rejection recorded); ord-2 placed, cancelled.
fn lifecycles() -> Vec<Value> {
    vec![
        record(1, "ord-1", None, Some("PLACED")),
        record(2, "ord-2", None, Some("PLACED")),
        record(3, "ord-1", Some("PLACED"), Some("PAID")),
        record(4, "ord-1", Some("PAID"), Some("SHIPPED")),
        record(5, "ord-2", Some("PLACED"), Some("CANCELLED")),
        record(6, "ord-1", Some("SHIPPED"), Some("SHIPPED")),
        record(7, "ord-1", Some("SHIPPED"), Some("DELIVERED")),
    ]
}

fn expected_keys() -> HashSet<String> {
    [
        "order-ord-1-order-confirmation",
        "order-ord-1-shipping-notice",
        "order-ord-2-order-confirmation",
        "order-ord-2-cancellation-notice",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn assert_each_accepted_once(p: &Provider) {
    let accepted = p.accepted();
    assert_eq!(
        accepted.keys().cloned().collect::<HashSet<_>>(),
        expected_keys(),
        "exactly the notifying transitions reached the provider"
    );
    assert!(accepted.values().all(|n| *n == 1), "{accepted:?}");
    assert_eq!(p.unkeyed(), 0, "every request carries an Idempotency-Key");
}

#[tokio::test]
async fn each_transition_notifies_once_under_duplicated_and_replayed_batches() {
    let s = Setup::new().await;
    let n = s.notifier(&[]);
    let (labels, failed) = run(&n, &stream(lifecycles())).await;
    assert_eq!(
        labels,
        [
            "Sent",
            "Sent",
            "NothingToSend",
            "Sent",
            "Sent",
            "NothingToSend",
            "NothingToSend"
        ]
    );
    assert!(failed.is_empty());
    assert_each_accepted_once(&s.provider);
    assert_eq!(
        s.status("ord-1#shipping-notice").await.as_deref(),
        Some("SENT")
    );

    // Lambda replays the batch, and a batch holding every record twice.
    let mut twice = lifecycles();
    twice.extend(lifecycles());
    for event in [stream(lifecycles()), stream(twice)] {
        let (labels, failed) = run(&n, &event).await;
        assert!(failed.is_empty());
        assert!(!labels.contains(&"Sent"), "{labels:?}");
    }
    assert_each_accepted_once(&s.provider);
    for key in expected_keys() {
        assert_eq!(s.provider.requests(&key), 1, "{key}: no resend after SENT");
    }
}

#[tokio::test]
async fn a_crash_between_sending_and_recording_resends_under_the_same_key() {
    let s = Setup::new().await;
    let n = s.notifier(&[]);
    // An earlier invocation claimed the confirmation with a 300 ms lease,
    // delivered it, and died before recording SENT.
    let note = Notification {
        order_id: "ord-1".into(),
        template: Template::OrderConfirmation,
        customer_id: Some("cust-1".into()),
        tracking_id: None,
        carrier: None,
    };
    let store = NotificationStore::new(s.db.client.clone(), &s.table);
    let now = epoch_ms();
    assert_eq!(
        store.claim(&note, "crashed", now + 300, now).await.unwrap(),
        Claim::Granted
    );
    let url = WebhookUrl::parse(&s.provider.url, URL_VAR).unwrap();
    let hook = Webhook::new(&url, Duration::from_secs(2)).unwrap();
    assert_eq!(hook.post(&note).await, Delivery::Accepted(201));

    // Its redelivery while the lease is live: someone is on it, retry later.
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Busy"]);
    assert_eq!(failed, [format!("{:021}", 1001)]);

    // After the lease: sent again under the same key; the provider keeps one.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Sent"]);
    assert!(failed.is_empty());
    let key = "order-ord-1-order-confirmation";
    assert_eq!(s.provider.requests(key), 2, "the retry did send");
    assert_eq!(s.provider.accepted().get(key), Some(&1), "accepted once");
    assert_eq!(
        s.status("ord-1#order-confirmation").await.as_deref(),
        Some("SENT")
    );
}

#[tokio::test]
async fn provider_errors_and_timeouts_are_retried_then_delivered_once() {
    let s = Setup::new().await;
    let n = s.notifier(&[("NOTIFY_TIMEOUT_MS", ANSWERED_MS)]);
    let hanging = s.notifier(&[("NOTIFY_TIMEOUT_MS", HANG_MS)]);
    let event = stream(vec![
        record(1, "ord-1", None, Some("PLACED")),
        record(2, "ord-1", Some("PLACED"), Some("CANCELLED")),
    ]);
    for (mode, want) in [
        (
            Mode::Fail(500),
            RecordOutcome::Failed(NotifyError::Provider { status: 500 }),
        ),
        (
            Mode::Fail(429),
            RecordOutcome::Failed(NotifyError::Provider { status: 429 }),
        ),
        (
            Mode::Hang,
            RecordOutcome::Failed(NotifyError::ProviderUnreachable),
        ),
    ] {
        s.provider.set_mode(mode);
        let n = if mode == Mode::Hang { &hanging } else { &n };
        let (report, response) = n.handle_batch(&event, far_deadline()).await;
        assert_eq!(report.records[0].outcome, want, "{mode:?}");
        // The order's later record waits for the failed one (stream order).
        assert_eq!(report.records[1].outcome.label(), "NotAttempted");
        // Nothing in the batch got through: an outage, not a bad record.
        assert_eq!(response.unwrap_err(), BatchError::Outage(2), "{mode:?}");
    }
    assert!(s.provider.accepted().is_empty());

    // Healed: the claim was given back, so the retry sends at once.
    s.provider.set_mode(Mode::Accept);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Sent", "Sent"]);
    assert!(failed.is_empty());
    let accepted = s.provider.accepted();
    assert_eq!(accepted.len(), 2);
    assert!(accepted.values().all(|c| *c == 1));
}

#[tokio::test]
async fn a_refusal_is_recorded_and_never_resent() {
    let s = Setup::new().await;
    let n = s.notifier(&[]);
    s.provider.set_mode(Mode::Fail(422));
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Rejected"]);
    assert!(failed.is_empty(), "a refusal is final: acknowledged");
    // Acknowledged only because it is durably recorded, with the status
    // and a reason that carries no payload value.
    let item = s.item("ord-1#order-confirmation").await.expect("recorded");
    assert_eq!(s_(&item, "status"), "REJECTED");
    assert_eq!(
        item.get("http_status"),
        Some(&AttributeValue::N("422".into()))
    );
    assert_eq!(s_(&item, "reason"), REFUSAL_REASON);
    assert!(!REFUSAL_REASON.contains("cust-1"));
    s.provider.set_mode(Mode::Accept);
    let (labels, _) = run(&n, &event).await;
    assert_eq!(labels, ["AlreadyRejected"]);
    assert_eq!(s.provider.requests("order-ord-1-order-confirmation"), 1);
}

#[tokio::test]
async fn concurrent_invocations_deliver_each_notification_once() {
    let s = Setup::new().await;
    let (a, b, c) = (s.notifier(&[]), s.notifier(&[]), s.notifier(&[]));
    let event = stream(lifecycles());
    let ((la, fa), (lb, fb), (lc, fc)) =
        tokio::join!(run(&a, &event), run(&b, &event), run(&c, &event));
    let sent = [&la, &lb, &lc]
        .iter()
        .flat_map(|l| l.iter())
        .filter(|l| **l == "Sent")
        .count();
    assert_eq!(sent, 4, "four notifications, each sent by one invocation");
    // The others saw a live claim (retried) or a finished record.
    for labels in [&la, &lb, &lc] {
        assert!(
            labels.iter().all(|l| [
                "Sent",
                "AlreadySent",
                "Busy",
                "NothingToSend",
                "NotAttempted"
            ]
            .contains(l)),
            "{labels:?}"
        );
    }
    let _ = (fa, fb, fc);
    // Lambda retries what was reported: nothing new is sent.
    let (labels, failed) = run(&a, &event).await;
    assert!(failed.is_empty(), "{labels:?}");
    assert_each_accepted_once(&s.provider);
    for key in expected_keys() {
        assert_eq!(
            s.provider.requests(&key),
            1,
            "{key}: sent by exactly one invocation"
        );
    }
}

#[test]
fn a_record_that_is_not_an_order_change_is_invalid_alone() {
    let bad = record(1, "", None, Some("PLACED"));
    let mut unknown = record(2, "ord-1", None, Some("PLACED"));
    unknown["dynamodb"]["NewImage"]["status"] = json!({"S": "TELEPORTED"});
    let event = stream(vec![bad, unknown]);
    for r in &event.records {
        assert!(order_notifier::event::parse_change(r).is_err());
    }
}

/// The whole path: the order consumer applies events (shuffled, with
/// duplicates, over several batches) to a table whose real stream dynoxide
/// records; the notifier then reads that stream in small batches, again
/// whole, and with every record twice. Each notifying transition reaches the
/// provider exactly once; nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_from_the_real_stream_are_sent_once() {
    use crate::streams::{StreamDb, stream_event};

    let sdb = StreamDb::new().await;
    let consumer = consumer_with(sdb.store(), &[]);
    let e = |order: &str, seq: u64, kind: &str| body(order, seq, kind, &format!("e-{order}-{seq}"));
    let batches = [
        vec![
            e("ord-1", 2, "OrderPaid"),
            e("ord-1", 1, "OrderPlaced"),
            e("ord-2", 1, "OrderPlaced"),
        ],
        vec![
            e("ord-1", 1, "OrderPlaced"),
            e("ord-3", 1, "OrderPlaced"),
            e("ord-1", 3, "OrderShipped"),
        ],
        vec![
            e("ord-2", 2, "OrderCancelled"),
            e("ord-1", 4, "OrderDelivered"),
            e("ord-2", 2, "OrderCancelled"),
        ],
        // Rejected in its turn: a MODIFY that keeps CANCELLED (spends seq 3).
        vec![e("ord-2", 3, "OrderShipped"), e("ord-3", 2, "OrderPaid")],
    ];
    for b in &batches {
        orders::testing::run(&consumer, &batch_of(b)).await;
    }
    let records = sdb.records();
    assert!(
        records.len() >= 9,
        "one stream record per committed write: {}",
        records.len()
    );

    let table = "notifications".to_owned();
    orders::testing::create_table(&sdb.client, &table, KEY)
        .await
        .expect("notifications table");
    let provider = Provider::start().await;
    let config = NotifierConfig::from_lookup(|k| match k {
        "NOTIFICATIONS_TABLE" => Some(table.clone()),
        "NOTIFY_WEBHOOK_URL" => Some(provider.url.clone()),
        _ => None,
    })
    .expect("config");
    let n = function(&sdb.client, config);

    let mut doubled = records.clone();
    doubled.extend(records.clone());
    let mut sent = 0;
    for chunk in records.chunks(3) {
        let (labels, failed) = run(&n, &stream_event(chunk)).await;
        assert!(failed.is_empty(), "{labels:?}");
        sent += labels.iter().filter(|l| **l == "Sent").count();
    }
    for event in [stream_event(&records), stream_event(&doubled)] {
        let (labels, failed) = run(&n, &event).await;
        assert!(failed.is_empty());
        assert!(
            !labels.contains(&"Sent"),
            "a replay sends nothing: {labels:?}"
        );
    }
    let want: HashSet<String> = [
        "order-ord-1-order-confirmation",
        "order-ord-1-shipping-notice",
        "order-ord-2-order-confirmation",
        "order-ord-2-cancellation-notice",
        "order-ord-3-order-confirmation",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let accepted = provider.accepted();
    assert_eq!(accepted.keys().cloned().collect::<HashSet<_>>(), want);
    assert!(accepted.values().all(|c| *c == 1));
    assert_eq!(sent, want.len());
    for key in &want {
        assert_eq!(provider.requests(key), 1, "{key}");
    }
}

/// Records that can never be read, in the middle of a batch (an unknown
/// status on one of ord-1's records; a record with no order id at all): they
/// used to be Invalid, the checkpoint stopped at the first (batchItemFailures
/// named it and everything of its order behind it), and Lambda retried the
/// shard from it until the record was a day old. Now each is recorded in the
/// notifications table under its eventID with the reason (never a value),
/// counted `Unreadable` and acknowledged; the records behind it are
/// delivered, ord-1's own later one included. A redelivery of the same batch
/// records each once.
#[tokio::test]
async fn an_unreadable_record_is_recorded_once_and_does_not_hold_the_shard() {
    let s = Setup::new().await;
    let n = s.notifier(&[]);
    let mut unknown = record(2, "ord-1", Some("PLACED"), Some("PLACED"));
    unknown["dynamodb"]["NewImage"]["status"] = json!({"S": "TELEPORTED-secret"});
    let event = stream(vec![
        record(1, "ord-1", None, Some("PLACED")),
        unknown,
        record(3, "", None, Some("PLACED")),
        record(4, "ord-1", Some("PLACED"), Some("CANCELLED")),
        record(5, "ord-2", None, Some("PLACED")),
    ]);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(
        (labels, failed),
        (
            vec!["Sent", "Unreadable", "Unreadable", "Sent", "Sent"],
            vec![]
        ),
        "(outcomes, batchItemFailures)"
    );
    let keys = |p: &Provider| p.accepted().keys().cloned().collect::<HashSet<_>>();
    let delivered: HashSet<String> = [
        "order-ord-1-order-confirmation",
        "order-ord-1-cancellation-notice",
        "order-ord-2-order-confirmation",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(keys(&s.provider), delivered);

    let status = s
        .item("stream:event:ev-2#unreadable")
        .await
        .expect("recorded");
    assert_eq!(s_(&status, "status"), "UNREADABLE");
    assert_eq!(
        s_(&status, "reason"),
        "`NewImage.status` is invalid: is not an order status"
    );
    assert_eq!(s_(&status, "event_id"), "ev-2");
    assert_eq!(s_(&status, "sequence_number"), format!("{:021}", 1002));
    assert_eq!(s_(&status, "event_name"), "MODIFY");
    assert_eq!(s_(&status, "order_id"), "ord-1");
    assert!(
        !format!("{status:?}").contains("secret"),
        "no value of the record is kept: {status:?}"
    );
    let no_order = s
        .item("stream:event:ev-3#unreadable")
        .await
        .expect("recorded");
    assert_eq!(
        s_(&no_order, "reason"),
        "missing required field `Keys.order_id`"
    );
    assert!(!no_order.contains_key("order_id"), "{no_order:?}");
    let recorded_at = |i: &HashMap<String, AttributeValue>| i.get("recorded_at").cloned();
    let first = recorded_at(&status);

    // Lambda retries a batch whole (a later record failed, a lost answer).
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(
        labels,
        [
            "AlreadySent",
            "AlreadyUnreadable",
            "AlreadyUnreadable",
            "AlreadySent",
            "AlreadySent"
        ]
    );
    assert!(failed.is_empty(), "{failed:?}");
    let again = s.item("stream:event:ev-2#unreadable").await.expect("kept");
    assert_eq!(recorded_at(&again), first, "written once");
    let unreadable = scan_all(&s.db.client, &s.table)
        .await
        .into_iter()
        .filter(|i| s_(i, "status") == "UNREADABLE")
        .count();
    assert_eq!(unreadable, 2, "one dead letter per unreadable record");
    assert!(s.provider.accepted().values().all(|n| *n == 1));
}

/// Only a dependency failure holds the shard: when the dead letter cannot
/// be written (here the table does not exist), the unreadable record is
/// Failed and reported, and its order's later records wait behind it, as
/// for any failure; other orders go on.
#[tokio::test]
async fn an_unreadable_record_that_cannot_be_recorded_holds_its_shard() {
    let s = Setup::new().await;
    let config = NotifierConfig::from_lookup(|k| match k {
        "NOTIFICATIONS_TABLE" => Some(format!("{}-missing", s.table)),
        "NOTIFY_WEBHOOK_URL" => Some(s.provider.url.clone()),
        _ => None,
    })
    .expect("config");
    let n = function(&s.db.client, config);
    let mut bad = record(1, "ord-1", None, Some("PLACED"));
    bad["dynamodb"]["NewImage"]["status"] = json!({"S": "TELEPORTED"});
    let event = stream(vec![
        bad,
        record(2, "ord-1", Some("PLACED"), Some("CANCELLED")),
        record(3, "ord-2", Some("PLACED"), Some("PAID")),
    ]);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Failed", "NotAttempted", "NothingToSend"]);
    assert_eq!(failed, [format!("{:021}", 1001), format!("{:021}", 1002)]);
    assert!(s.provider.accepted().is_empty());
}

fn s_(item: &HashMap<String, AttributeValue>, key: &str) -> String {
    s(item, key)
}

fn outcome_of(
    report: &lambda_idempotency::engine::BatchReport<NotifyOutcome, NotifyError>,
) -> RecordOutcome<NotifyOutcome, NotifyError> {
    report.records[0].outcome.clone()
}

/// reqwest follows redirects by default: a 301/302/303 becomes a body-less
/// GET, and whatever the last hop answers is classified (200: SENT with
/// nothing POSTed). The notifier follows none: one POST, no GET, and the
/// notification stays retryable (and pages, at ERROR) until the URL is
/// fixed.
#[tokio::test]
async fn a_redirect_is_not_followed_and_leaves_the_notification_retryable() {
    let s = Setup::new().await;
    let n = s.notifier(&[("NOTIFY_TIMEOUT_MS", ANSWERED_MS)]);
    let codes = [301, 302, 303, 307, 308];
    for (i, code) in codes.into_iter().enumerate() {
        s.provider.set_mode(Mode::Redirect(code));
        let order = format!("ord-r{code}");
        let event = stream(vec![record(i as u64 + 1, &order, None, Some("PLACED"))]);
        let posts = s.provider.method_count("POST");
        let (report, response) = n.handle_batch(&event, far_deadline()).await;
        let outcome = outcome_of(&report);
        assert_eq!(
            outcome,
            RecordOutcome::Failed(NotifyError::Misconfigured { status: code }),
            "{code}"
        );
        assert!(!outcome.acknowledge(), "{code}");
        assert_eq!(outcome.level(), tracing::Level::ERROR, "{code}");
        assert!(response.is_err(), "{code}: the only record failed: outage");
        assert_eq!(
            s.provider.method_count("POST"),
            posts + 1,
            "{code}: one POST"
        );
        assert_eq!(s.provider.method_count("GET"), 0, "{code}: no GET");
        let item = s
            .item(&format!("{order}#order-confirmation"))
            .await
            .expect("claimed");
        assert_eq!(
            s_(&item, "status"),
            "SENDING",
            "{code}: neither SENT nor REJECTED"
        );
        assert_eq!(s_(&item, "lease_until"), "0", "{code}: claim released");
    }
    assert!(s.provider.accepted().is_empty());

    // The URL fixed: each is sent at once, once.
    s.provider.set_mode(Mode::Accept);
    for (i, code) in codes.into_iter().enumerate() {
        let order = format!("ord-r{code}");
        let event = stream(vec![record(i as u64 + 1, &order, None, Some("PLACED"))]);
        let (labels, failed) = run(&n, &event).await;
        assert_eq!(labels, ["Sent"], "{code}");
        assert!(failed.is_empty());
    }
}

/// A 4xx other than 422 says the request itself is wrong - its URL, method,
/// size, media type or schema - which refuses every notification alike:
/// retried (not acknowledged, claim released, not recorded REJECTED) and
/// logged at ERROR, so a provider's contract change drops nothing.
#[tokio::test]
async fn contract_refusals_are_retried_not_recorded_as_rejected() {
    let s = Setup::new().await;
    let n = s.notifier(&[]);
    let codes = [400, 401, 403, 404, 405, 410, 413, 415];
    let event_for = |i: usize, code: u16| {
        stream(vec![record(
            i as u64 + 1,
            &format!("ord-c{code}"),
            None,
            Some("PLACED"),
        )])
    };
    for (i, code) in codes.into_iter().enumerate() {
        s.provider.set_mode(Mode::Fail(code));
        let (report, response) = n.handle_batch(&event_for(i, code), far_deadline()).await;
        let outcome = outcome_of(&report);
        assert_eq!(
            outcome,
            RecordOutcome::Failed(NotifyError::Misconfigured { status: code }),
            "{code}"
        );
        assert!(!outcome.acknowledge(), "{code}: not acknowledged");
        assert_eq!(outcome.level(), tracing::Level::ERROR, "{code}: pages");
        assert!(outcome.is_dependency_failure(), "{code}");
        assert!(response.is_err(), "{code}: retried as an outage");
        let item = s
            .item(&format!("ord-c{code}#order-confirmation"))
            .await
            .expect("claimed");
        assert_eq!(s_(&item, "status"), "SENDING", "{code}: not REJECTED");
        assert_eq!(s_(&item, "lease_until"), "0", "{code}: claim released");
        assert!(!item.contains_key("reason"), "{code}");
    }
    // The provider's contract restored: every one of them is delivered.
    s.provider.set_mode(Mode::Accept);
    for (i, code) in codes.into_iter().enumerate() {
        let (labels, failed) = run(&n, &event_for(i, code)).await;
        assert_eq!(labels, ["Sent"], "{code}");
        assert!(failed.is_empty());
    }
    assert_eq!(s.provider.accepted().len(), codes.len());
}

/// The provider down for every record of a batch: the invocation fails
/// (OrderNotifier.DependencyOutage, so the Errors alarm fires and Lambda
/// retries the batch by record age) instead of returning every record as a
/// partial failure. A batch in which something got through is a partial
/// response as usual.
#[tokio::test]
async fn a_provider_outage_fails_the_invocation_and_a_partial_one_does_not() {
    let s = Setup::new().await;
    let n = s.notifier(&[("NOTIFY_TIMEOUT_MS", ANSWERED_MS)]);
    let hanging = s.notifier(&[("NOTIFY_TIMEOUT_MS", HANG_MS)]);
    // ord-3's confirmation went out before the outage.
    let (labels, _) = run(&n, &stream(vec![record(1, "ord-3", None, Some("PLACED"))])).await;
    assert_eq!(labels, ["Sent"]);

    let all_down = stream(vec![
        record(2, "ord-1", None, Some("PLACED")),
        record(3, "ord-2", None, Some("PLACED")),
        record(4, "ord-1", Some("PLACED"), Some("CANCELLED")),
    ]);
    for (mode, n) in [(Mode::Fail(503), &n), (Mode::Hang, &hanging)] {
        s.provider.set_mode(mode);
        let mut context = lambda_runtime::Context::default();
        context.deadline = epoch_ms() + 60_000;
        let err = n
            .handle(lambda_runtime::LambdaEvent::new(all_down.clone(), context))
            .await
            .expect_err("every record failed on the provider");
        assert_eq!(err.error_type, "OrderNotifier.DependencyOutage", "{mode:?}");
    }

    // Some records need no delivery (a PAID transition, one already sent):
    // only the failed one is returned.
    s.provider.set_mode(Mode::Fail(503));
    let partly = stream(vec![
        record(5, "ord-1", None, Some("PLACED")),
        record(6, "ord-2", Some("PLACED"), Some("PAID")),
        record(7, "ord-3", None, Some("PLACED")),
    ]);
    let (report, response) = n.handle_batch(&partly, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(RecordOutcome::label).collect();
    assert_eq!(labels, ["Failed", "NothingToSend", "AlreadySent"]);
    let failed: Vec<_> = response
        .expect("a partial batch response")
        .batch_item_failures
        .into_iter()
        .filter_map(|f| f.item_identifier)
        .collect();
    assert_eq!(failed, [format!("{:021}", 1005)]);
}

/// The claim's UpdateItem commits and its answer is lost (the proxy
/// forwards it, reads the answer, resets the connection); the SDK sends it
/// again and the re-send is refused against this attempt's own claim. That
/// is the attempt's claim, not another invocation's: it sends, once, instead
/// of reporting Busy and holding the shard back for the lease.
#[tokio::test]
async fn a_claim_that_committed_unseen_is_the_attempts_own_not_busy() {
    let s = Setup::new().await;
    let proxy = FaultProxy::start(s.db.endpoint(), 27).await;
    proxy.set_first(Fault::ByOperation(&[("UpdateItem", Fault::DropAnswer)]), 1);
    let n = s.notifier_with(&client_for(&proxy.url()), &[]);
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    assert_eq!(labels, ["Sent"]);
    assert!(failed.is_empty());
    let key = "order-ord-1-order-confirmation";
    assert_eq!(s.provider.requests(key), 1, "sent once");
    let item = s.item("ord-1#order-confirmation").await.expect("recorded");
    assert_eq!(s_(&item, "status"), "SENT");
    // One claim, applied once (the re-send changed nothing).
    assert_eq!(item.get("attempts"), Some(&AttributeValue::N("1".into())));
    let (labels, _) = run(&n, &event).await;
    assert_eq!(labels, ["AlreadySent"]);
}

/// A POST the invocation's time left cannot cover to its end is not
/// started (the batch's cutoff would cancel it half-sent, a delivery nobody
/// can know about): the record is NotAttempted, the claim given back, and
/// an invocation with the time sends it at once.
#[tokio::test]
async fn a_post_the_invocation_cannot_cover_is_not_started() {
    let s = Setup::new().await;
    // A 30 s webhook timeout; 10 s left, less the 2 s deadline margin.
    let n = s.notifier(&[("NOTIFY_TIMEOUT_MS", "30000")]);
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (report, _) = n.handle_batch(&event, deadline).await;
    assert_eq!(
        outcome_of(&report),
        RecordOutcome::NotAttempted(lambda_idempotency::Skip::Deadline)
    );
    let key = "order-ord-1-order-confirmation";
    assert_eq!(s.provider.requests(key), 0, "no POST started");
    let item = s.item("ord-1#order-confirmation").await.expect("claimed");
    assert_eq!(
        item.get("lease_until"),
        Some(&AttributeValue::N("0".into())),
        "the claim was given back"
    );
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Sent"]);
    assert!(failed.is_empty());
    assert_eq!(s.provider.requests(key), 1);
}

/// The lease covers the whole POST from the moment the claim is confirmed,
/// however long the claim took: here its UpdateItem is held 2.5 s before it
/// reaches DynamoDB (a slow network, the SDK's retries), and the webhook
/// request may take 1 s. While the POST is at the provider, the claim's
/// lease must still outlast the POST's whole timeout: otherwise another
/// attempt could take the claim over and send while it runs.
#[tokio::test]
async fn the_lease_covers_the_whole_post_after_a_slow_claim() {
    let s = Setup::new().await;
    let proxy = FaultProxy::start(s.db.endpoint(), 27).await;
    proxy.set_first(
        Fault::ByOperation(&[(
            "UpdateItem",
            Fault::Latency {
                before_ms: (2_500, 2_500),
                after_ms: (0, 0),
            },
        )]),
        1,
    );
    // A client patient enough to wait for it in one attempt.
    let patient = orders::testing::client_with(
        &proxy.url(),
        lambda_idempotency::dynamo::retry_config(),
        aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(Duration::from_secs(10))
            .operation_timeout(Duration::from_secs(10))
            .build(),
    );
    let post_timeout = 1_000;
    let n = s.notifier_with(&patient, &[("NOTIFY_TIMEOUT_MS", "1000")]);
    s.provider.set_mode(Mode::Hang);
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let running = tokio::spawn(async move { n.handle_batch(&event, far_deadline()).await.0 });
    let key = "order-ord-1-order-confirmation";
    while s.provider.requests(key) == 0 {
        assert!(!running.is_finished(), "the POST was never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The POST is running: its lease must outlast its whole timeout.
    let at_post = epoch_ms();
    let item = s.item("ord-1#order-confirmation").await.expect("claimed");
    let lease: u64 = s_(&item, "lease_until").parse().unwrap_or(0);
    assert_eq!(proxy.injected().get("latency"), Some(&1));
    assert!(
        lease >= at_post + post_timeout,
        "the lease ends {} ms after the POST started, before its {post_timeout} ms timeout",
        lease.saturating_sub(at_post)
    );
    let report = running.await.expect("no panic");
    assert_eq!(
        outcome_of(&report),
        RecordOutcome::Failed(NotifyError::ProviderUnreachable)
    );
}

/// The claim commits and its answer is lost on every one of the SDK's
/// tries: the attempt fails, not knowing. Its claim is given back (the
/// release, an UpdateItem too, commits even though its own answers are
/// dropped), so the retry sends at once instead of finding its own dead
/// claim Busy until the lease ends.
#[tokio::test]
async fn a_claim_whose_answer_never_arrives_is_given_back() {
    let s = Setup::new().await;
    let proxy = FaultProxy::start(s.db.endpoint(), 27).await;
    proxy.set(
        Fault::ByOperation(&[("UpdateItem", Fault::DropAnswer)]),
        1.0,
    );
    let n = s.notifier_with(&client_for(&proxy.url()), &[]);
    let event = stream(vec![record(1, "ord-1", None, Some("PLACED"))]);
    let (report, _) = n.handle_batch(&event, far_deadline()).await;
    assert_eq!(
        outcome_of(&report),
        RecordOutcome::Failed(NotifyError::Store(lambda_idempotency::StoreError::Network))
    );
    let key = "order-ord-1-order-confirmation";
    assert_eq!(s.provider.requests(key), 0);
    let item = s.item("ord-1#order-confirmation").await.expect("claimed");
    assert_eq!(
        item.get("lease_until"),
        Some(&AttributeValue::N("0".into())),
        "the claim was given back"
    );
    proxy.heal();
    let (labels, failed) = run(&n, &event).await;
    assert_eq!(labels, ["Sent"]);
    assert!(failed.is_empty());
    assert_eq!(s.provider.requests(key), 1);
}

#[test]
fn the_notifiers_labels_cover_its_verdicts() {
    use strum::VariantNames;
    orders::testing::assert_labels_cover_variants::<NotifyOutcome>(
        "notifier",
        NotifyOutcome::VARIANTS,
    );
}
