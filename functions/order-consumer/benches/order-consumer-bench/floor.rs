//! Section `floor`: every shipped function (the release builds `make bench`
//! copies to target/bench-bins) next to three functions that do the least,
//! built with the same profile (bench/floor): an empty `lambda_runtime` SQS
//! function, the same with an `aws_config` load and a DynamoDB client at
//! init, and that with one plain conditional PutItem per record (the least
//! a DynamoDB consumer does with a batch). Cold start (spawn → first poll,
//! spawn → first response), peak RSS and binary size, then each function's
//! ratios to the floors. The cold starts are interleaved: one of each
//! binary in turn, [`FLOOR_RUNS`] rounds, so that the machine's load moves
//! all of them alike.

use super::*;
use order_consumer::testing::provider::Provider;

/// What a binary's cold start is handed, by the kind of event it takes.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// An SQS batch of 10 order events (the floors ignore it).
    Orders,
    /// An SQS batch of 10 payment captures.
    Payments,
    /// A stream batch of 10 new orders (10 webhook calls).
    Stream,
    /// One `POST /orders` (payload 2.0).
    Api,
}

struct Subject {
    /// Its file under target/bench-bins.
    file: &'static str,
    label: &'static str,
    kind: Kind,
    env: &'static [(&'static str, &'static str)],
}

const FLOOR: &str = "floor-sqs";
const FLOOR_DYNAMODB: &str = "floor-sqs-dynamodb";
const FLOOR_PUT: &str = "floor-sqs-dynamodb-put";

/// Cold starts of each binary: more than [`RUNS`], since a cold start's
/// range is as wide as the differences measured.
const FLOOR_RUNS: usize = 9;

const SUBJECTS: &[Subject] = &[
    Subject {
        file: FLOOR,
        label: "floor: empty SQS function",
        kind: Kind::Orders,
        env: &[],
    },
    Subject {
        file: FLOOR_DYNAMODB,
        label: "floor: + `aws_config` load and DynamoDB client at init",
        kind: Kind::Orders,
        env: &[],
    },
    Subject {
        file: FLOOR_PUT,
        label: "floor: + one conditional PutItem per record",
        kind: Kind::Orders,
        env: &[],
    },
    Subject {
        file: "order-consumer.release",
        label: "order-consumer",
        kind: Kind::Orders,
        env: &[],
    },
    // Its init without the SQS client of RETRY_BACKOFF (on by default): what
    // that second `aws_config` load costs.
    Subject {
        file: "order-consumer.release",
        label: "order-consumer, RETRY_BACKOFF=off",
        kind: Kind::Orders,
        env: &[("RETRY_BACKOFF", "off")],
    },
    Subject {
        file: "payment-ledger",
        label: "payment-ledger",
        kind: Kind::Payments,
        env: &[],
    },
    Subject {
        file: "order-notifier",
        label: "order-notifier",
        kind: Kind::Stream,
        env: &[],
    },
    Subject {
        file: "order-api",
        label: "order-api",
        kind: Kind::Api,
        env: &[],
    },
];

/// A cold start's tables, servers and environment; dropped after it.
struct Prepared {
    _db: TestDb,
    _provider: Option<Provider>,
    endpoint: String,
    env: Vec<(String, String)>,
    payload: Vec<u8>,
}

async fn prepare(kind: Kind) -> Prepared {
    let db = TestDb::new().await;
    let mut env = vec![("TABLE_NAME".to_owned(), db.table.clone())];
    let mut provider = None;
    let payload = match kind {
        Kind::Orders => serde_json::to_vec(&batch_of(&lifecycle_bodies(10, "floor"))),
        Kind::Payments => {
            env.push((
                "LEDGER_TABLE".into(),
                db.extra_table("ledger", "entry_id").await,
            ));
            env.push((
                "ACCOUNTS_TABLE".into(),
                db.extra_table("accounts", "account_id").await,
            ));
            // Shaped as functions/payment-ledger/events/01-captures.json.
            let bodies: Vec<Value> = (0..10)
                .map(|i| {
                    serde_json::json!({"eventId": format!("evt-cap-{i}"), "type": "PaymentCaptured",
                        "paymentId": format!("pay-{i}"), "accountId": format!("acct-{}", i % 3),
                        "amount": 1000, "currency": "INR", "occurredAt": "2026-12-05T10:00:00Z"})
                })
                .collect();
            serde_json::to_vec(&batch_of(&bodies))
        }
        Kind::Stream => {
            env.push((
                "NOTIFICATIONS_TABLE".into(),
                db.extra_table("notifications", "notification_id").await,
            ));
            let p = Provider::start().await;
            env.push(("NOTIFY_WEBHOOK_URL".into(), p.url.clone()));
            provider = Some(p);
            let records: Vec<Value> = (0..10)
                .map(|i| new_order_stream_record(i, &format!("floor-{i}")))
                .collect();
            serde_json::to_vec(&serde_json::json!({ "Records": records }))
        }
        Kind::Api => {
            env.push((
                "IDEMPOTENCY_TABLE".into(),
                db.extra_table("idempotency", "idempotency_key").await,
            ));
            Ok(api_peer::post_event("floor-key", &api_peer::order_body(0)))
        }
    }
    .expect("event json");
    Prepared {
        endpoint: db.endpoint().to_owned(),
        _db: db,
        _provider: provider,
        env,
        payload,
    }
}

/// The INSERT of a PLACED order on the orders table's stream, shaped as
/// order_notifier::testing::stream_record builds it (this bench does not
/// depend on the notifier's crate).
fn new_order_stream_record(seq: u64, order: &str) -> Value {
    serde_json::json!({
        "eventID": format!("ev-{seq}"),
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1796551200.0,
            "Keys": {"order_id": {"S": order}},
            "NewImage": {"order_id": {"S": order}, "status": {"S": "PLACED"},
                "customer_id": {"S": "cust-1"}, "last_event_seq": {"N": "1"},
                "history": {"L": [{"S": "evt-1"}]}},
            "SequenceNumber": format!("{:021}", 1000 + seq),
            "SizeBytes": 120,
            "StreamViewType": "NEW_AND_OLD_IMAGES"
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:111122223333:table/orders/stream/2026-12-01T00:00:00.000"
    })
}

/// Whether a cold start's answer is the work done: every record acked, or
/// the order created.
fn answered_in_full(kind: Kind, response: &str) -> bool {
    let v: Value = serde_json::from_str(response).unwrap_or(Value::Null);
    match kind {
        Kind::Api => v["statusCode"].as_u64() == Some(201),
        _ => v["batchItemFailures"].as_array().is_some_and(Vec::is_empty),
    }
}

/// One binary's figures: medians of [`RUNS`] cold starts, with their range.
struct Figures {
    size: u64,
    first_poll_ms: Vec<f64>,
    first_response_ms: Vec<f64>,
    rss_kib: Vec<f64>,
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(0.0, f64::max);
    format!("{:.1} ms ({lo:.1}–{hi:.1})", median(v.to_vec()))
}

pub async fn figures(r: &mut Report) {
    let root = workspace_root().join("target/bench-bins");
    r.line(format!(
        "\n### The floor: each shipped function next to two that do nothing (release builds, median of {FLOOR_RUNS} interleaved cold starts, their range in brackets)\n"
    ));
    r.line("| binary | size | spawn → first poll (init) | spawn → first response | peak RSS at the first response |");
    r.line("|---|---:|---:|---:|---:|");
    // The binaries present, each with its figures so far.
    let mut measured: Vec<(&Subject, std::path::PathBuf, Figures)> = Vec::new();
    for subject in SUBJECTS {
        let bin = root.join(subject.file);
        match std::fs::metadata(&bin) {
            Ok(meta) => measured.push((
                subject,
                bin,
                Figures {
                    size: meta.len(),
                    first_poll_ms: Vec::new(),
                    first_response_ms: Vec::new(),
                    rss_kib: Vec::new(),
                },
            )),
            Err(_) => r.line(format!(
                "| {} | (missing {}: `make bench` builds it) | | | |",
                subject.label,
                bin.display()
            )),
        }
    }
    for _ in 0..FLOOR_RUNS {
        for (subject, bin, f) in &mut measured {
            let p = prepare(subject.kind).await;
            let env: Vec<(&str, &str)> = p
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .chain(subject.env.iter().copied())
                .collect();
            let run = run_cold(bin, &p.endpoint, &env, p.payload.clone()).await;
            assert!(
                answered_in_full(subject.kind, &run.response),
                "{}: unexpected answer: {:.300}",
                subject.label,
                run.response
            );
            f.first_poll_ms.push(run.to_first_poll.as_secs_f64() * 1e3);
            f.first_response_ms
                .push(run.to_response.as_secs_f64() * 1e3);
            f.rss_kib.push(run.peak_rss_kib as f64);
        }
    }
    for (subject, _, f) in &measured {
        r.line(format!(
            "| {} | {:.1} MiB | {} | {} | {:.1} MiB |",
            subject.label,
            f.size as f64 / 1024.0 / 1024.0,
            spread(&f.first_poll_ms),
            spread(&f.first_response_ms),
            median(f.rss_kib.clone()) / 1024.0
        ));
    }
    let floor = |file: &str| {
        measured
            .iter()
            .find(|(s, _, _)| s.file == file)
            .map(|(_, _, f)| f)
    };
    let (Some(empty), Some(sdk)) = (floor(FLOOR), floor(FLOOR_DYNAMODB)) else {
        r.line("\n(no ratios: a floor binary is missing)");
        return;
    };
    r.line(
        "\nEach function's figure over the empty floor's / over the DynamoDB floor's, same run:\n",
    );
    r.line("| function | init (first poll) | first response | peak RSS | size |");
    r.line("|---|---:|---:|---:|---:|");
    let both = |f: &dyn Fn(&Figures) -> f64, of: &Figures| {
        format!("{:.2}x / {:.2}x", f(of) / f(empty), f(of) / f(sdk))
    };
    let poll = |f: &Figures| median(f.first_poll_ms.clone());
    let resp = |f: &Figures| median(f.first_response_ms.clone());
    let rss = |f: &Figures| median(f.rss_kib.clone());
    let size = |f: &Figures| f.size as f64;
    for (subject, _, f) in &measured {
        if subject.file == FLOOR || subject.file == FLOOR_DYNAMODB || subject.file == FLOOR_PUT {
            continue;
        }
        r.line(format!(
            "| {} | {} | {} | {} | {} |",
            subject.label,
            both(&poll, f),
            both(&resp, f),
            both(&rss, f),
            both(&size, f)
        ));
    }
    if let Some(put) = floor(FLOOR_PUT) {
        // Paired by round: each round ran one cold start of each binary
        // back to back, so a round's ratio shares the machine's load.
        let paired = |of: &[f64], by: &[f64]| {
            let v: Vec<f64> = of.iter().zip(by).map(|(a, b)| a / b).collect();
            let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            format!("{:.2}x ({lo:.2}–{hi:.2})", median(v))
        };
        r.line("\nThe SQS functions over the PutItem floor (the same 10 records, one conditional PutItem each, one after another), same run: the median of the rounds' ratios, their range in brackets:\n");
        r.line("| function | init (first poll) | first response | peak RSS |");
        r.line("|---|---:|---:|---:|");
        for (subject, _, f) in &measured {
            if subject.kind != Kind::Orders || subject.file == FLOOR_PUT {
                continue;
            }
            r.line(format!(
                "| {} | {} | {} | {} |",
                subject.label,
                paired(&f.first_poll_ms, &put.first_poll_ms),
                paired(&f.first_response_ms, &put.first_response_ms),
                paired(&f.rss_kib, &put.rss_kib)
            ));
        }
    }
    r.line(format!(
        "\nThe DynamoDB floor over the empty one: init {:.2}x, first response {:.2}x, peak RSS {:.2}x, size {:.2}x. A function's first response includes its first invocation's work, which the floors do not do: 10 records each (order-consumer: 10 conditional writes over 3 orders; payment-ledger: 10 TransactWriteItems; order-notifier: 10 claims, 10 webhook POSTs, 10 completions), one `POST /orders` (2 requests) for order-api. Each run gets a fresh local DynamoDB (dynoxide, in this process) and, for the notifier, a local webhook provider with its URL in `NOTIFY_WEBHOOK_URL` (no SSM read).",
        poll(sdk) / poll(empty),
        resp(sdk) / resp(empty),
        rss(sdk) / rss(empty),
        size(sdk) / size(empty)
    ));
}
