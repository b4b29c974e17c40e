//! What the functions write to their logs, captured through their own log
//! format (`bootstrap::json_logs`, the subscriber the binaries install): one
//! line per record carrying the record's span (messageId, orderId, eventId,
//! seq, outcome), at a level that says what an operator must do, and no
//! payload data (customer ids, amounts, payment and tracking ids, reasons)
//! at INFO or above.

use std::collections::HashMap;

use serde_json::{Value, json};

use order_consumer::testing::*;

pub(crate) use crate::captured::Captured;

/// Payload values that must never reach a log line at INFO or above.
const SECRETS: [&str; 7] = [
    "cust-SECRET-41",
    "987654321",
    "pay-SECRET-42",
    "CarrierSECRET",
    "trk-SECRET-43",
    "reason-SECRET-44",
    "GBP",
];

fn secret_body(order: &str, seq: u64, kind: &str, event_id: &str) -> Value {
    let data = match kind {
        "OrderPlaced" => {
            json!({"customerId": "cust-SECRET-41", "amount": 987654321, "currency": "GBP"})
        }
        "OrderPaid" => {
            json!({"paymentId": "pay-SECRET-42", "amount": 987654321, "currency": "GBP"})
        }
        "OrderShipped" => json!({"carrier": "CarrierSECRET", "trackingId": "trk-SECRET-43"}),
        "OrderCancelled" => json!({"reason": "reason-SECRET-44"}),
        _ => json!({}),
    };
    json!({"eventId": event_id, "orderId": order, "seq": seq, "type": kind,
           "occurredAt": "2026-11-29T10:15:00Z", "data": data})
}

fn rec(id: &str, body: &Value) -> aws_lambda_events::event::sqs::SqsMessage {
    record(id, &body.to_string())
}

#[tokio::test]
async fn each_record_is_logged_once_at_its_level_with_its_ids_and_no_payload() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let logs = Captured::default();
    let _guard = logs.install();

    let placed = secret_body("ord-L1", 1, "OrderPlaced", "ev-1");
    let paid = secret_body("ord-L1", 2, "OrderPaid", "ev-2");
    // An ill-typed amount: the reason names the field, never its value.
    let mut invalid = secret_body("ord-L3", 1, "OrderPlaced", "ev-bad");
    invalid["data"]["amount"] = json!("987654321");
    let first = batch(vec![
        rec("m-placed", &placed),
        rec("m-paid", &paid),
        rec("m-early", &secret_body("ord-L2", 3, "OrderShipped", "ev-3")),
        rec("m-invalid", &invalid),
        rec(
            "m-placed-4",
            &secret_body("ord-L4", 1, "OrderPlaced", "ev-4"),
        ),
        rec(
            "m-cancel-5",
            &secret_body("ord-L5", 1, "OrderPlaced", "ev-5"),
        ),
    ]);
    let (_, failed) = run(&c, &first).await;
    assert_eq!(failed, ["m-early", "m-invalid"]);

    let second = batch(vec![
        rec("m-dup", &paid),
        rec("m-stale", &placed),
        rec(
            "m-conflict",
            &secret_body("ord-L1", 2, "OrderPaid", "ev-other"),
        ),
        // A second OrderPlaced, in its turn: rejected for good.
        rec(
            "m-rejected",
            &secret_body("ord-L4", 2, "OrderPlaced", "ev-4b"),
        ),
        rec(
            "m-cancelled",
            &secret_body("ord-L5", 2, "OrderCancelled", "ev-5b"),
        ),
    ]);
    let (_, failed) = run(&c, &second).await;
    assert_eq!(failed, ["m-conflict"]);

    let expected = [
        ("m-placed", "Applied", "INFO"),
        ("m-paid", "Applied", "INFO"),
        ("m-early", "Early", "INFO"),
        ("m-invalid", "Invalid", "ERROR"),
        ("m-placed-4", "Applied", "INFO"),
        ("m-cancel-5", "Applied", "INFO"),
        ("m-dup", "Duplicate", "INFO"),
        ("m-stale", "Stale", "INFO"),
        ("m-conflict", "Conflict", "ERROR"),
        ("m-rejected", "Rejected", "WARN"),
        ("m-cancelled", "Applied", "INFO"),
    ];
    let records = logs.records();
    assert_eq!(records.len(), expected.len(), "one set of lines per record");
    let bodies: HashMap<&str, Value> = [
        ("m-placed", placed.clone()),
        ("m-paid", paid.clone()),
        ("m-dup", paid.clone()),
        ("m-stale", placed.clone()),
    ]
    .into_iter()
    .collect();
    for (id, outcome, level) in expected {
        let lines = &records[id];
        assert_eq!(lines.len(), 1, "{id}: exactly one line per record");
        let line = &lines[0];
        assert_eq!(line["level"], json!(level), "{id}: {line}");
        assert_eq!(line.pointer("/outcome"), Some(&json!(outcome)), "{id}");
        if outcome != "Invalid" {
            for field in ["order_id", "event_id", "seq", "event_type"] {
                assert!(
                    line.pointer(&format!("/{field}")).is_some(),
                    "{id}: span field {field} missing: {line}"
                );
            }
        }
        if let Some(b) = bodies.get(id) {
            assert_eq!(line.pointer("/order_id"), Some(&b["orderId"]));
            assert_eq!(line.pointer("/event_id"), Some(&b["eventId"]));
            assert_eq!(line.pointer("/seq"), Some(&b["seq"]));
        }
    }
    let invalid_line = &records["m-invalid"][0];
    let detail = invalid_line
        .pointer("/detail")
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert!(
        detail.starts_with("Invalid: ") && detail.contains("data.amount"),
        "a specific reason: {detail}"
    );

    let text = logs.text();
    for secret in SECRETS {
        assert!(
            !text.contains(secret),
            "payload value {secret:?} in the logs:\n{text}"
        );
    }
}

/// Every line of an invocation carries the keys Powertools users search by,
/// with the invocation's own values: `cold_start` true on the first one
/// only, the request id of the invocation it belongs to.
#[tokio::test]
async fn every_line_carries_the_powertools_keys_of_its_invocation() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let logs = Captured::default();
    let _guard = logs.install();
    let now_ms = lambda_idempotency::time::epoch_ms();
    let arn = "arn:aws:lambda:us-east-1:111122223333:function:order-consumer";
    for (i, trace) in [
        (1, Some("Root=1-5759e988-bd862e3fe1be46a994272793")),
        (2, None),
    ] {
        let mut ctx = lambda_runtime::Context::default();
        ctx.deadline = now_ms + 30_000;
        ctx.request_id = format!("req-{i}");
        ctx.invoked_function_arn = arn.into();
        ctx.xray_trace_id = trace.map(str::to_owned);
        let event = batch_of(&[body(
            "ord-keys",
            i,
            ["OrderPlaced", "OrderPaid"][i as usize - 1],
            &format!("e{i}"),
        )]);
        c.handle(lambda_runtime::LambdaEvent::new(event, ctx))
            .await
            .expect("an answer");
    }
    let lines = logs.lines();
    for i in [1u64, 2] {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["function_request_id"] == json!(format!("req-{i}")))
            .collect();
        assert!(
            mine.iter()
                .any(|l| l["message"] == json!("record processed")),
            "invocation {i} wrote its record line: {lines:?}"
        );
        for l in &mine {
            assert_eq!(l["cold_start"], json!(i == 1), "{l}");
            assert_eq!(l["service"], json!("order-consumer"), "{l}");
            assert_eq!(l["function_name"], json!("order-consumer"), "{l}");
            assert_eq!(l["function_arn"], json!(arn), "{l}");
            assert!(l["function_memory_size"].is_number(), "{l}");
            assert!(l["level"].is_string() && l["message"].is_string(), "{l}");
            assert_eq!(
                l.get("xray_trace_id").is_some(),
                i == 1,
                "the trace id when Lambda gives one: {l}"
            );
        }
        let record = mine
            .iter()
            .find(|l| l["message"] == json!("record processed"))
            .expect("record line");
        assert_eq!(record["outcome"], json!("Applied"));
        assert_eq!(record["order_id"], json!("ord-keys"));
        assert_eq!(record["event_id"], json!(format!("e{i}")));
    }
    // Nothing of the invocation is written outside its span.
    assert!(
        lines.iter().all(|l| l.get("function_request_id").is_some()),
        "{lines:?}"
    );
}
