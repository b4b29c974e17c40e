//! The naive consumer this project exists to avoid, as an in-process
//! "function": GetItem, check the transition in code, then an
//! *unconditional* UpdateItem that appends to `history`. Between the check
//! and the act it waits on a barrier shared by every concurrent copy, so
//! under the concurrency test they all check before any of them acts: the
//! race the real function closes with one conditional write is then
//! certain, not just likely. Used only to show that the concurrency
//! assertion can fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use order_consumer::orders::event::parse_body;
use serde_json::json;
use tokio::sync::Barrier;

use crate::function::{Function, InvokeResult};
use lambda_idempotency::time::epoch_ms;

pub struct NaiveFunction {
    pub client: Client,
    pub table: String,
    /// Every concurrent copy waits here between check and act.
    pub barrier: Option<Arc<Barrier>>,
}

impl NaiveFunction {
    async fn handle(&self, payload: &[u8]) -> Result<Vec<String>, String> {
        let event: SqsEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let mut failures = Vec::new();
        for r in &event.records {
            let id = r.message_id.clone().unwrap_or_default();
            let Ok(ev) = parse_body(r.body.as_deref()) else {
                failures.push(id);
                continue;
            };
            // Check.
            let item = self
                .client
                .get_item()
                .table_name(&self.table)
                .key("order_id", AttributeValue::S(ev.order_id.to_string()))
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| format!("GetItem: {e}"))?
                .item;
            let s = |i: &HashMap<String, AttributeValue>, k: &str| {
                i.get(k)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default()
            };
            let seq = |i: &HashMap<String, AttributeValue>| {
                i.get("last_event_seq")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let kind = ev.kind().as_str();
            let legal = match &item {
                None => kind == "OrderPlaced",
                Some(i) => {
                    let from: &[&str] = match kind {
                        "OrderPaid" => &["PLACED"],
                        "OrderShipped" => &["PAID"],
                        "OrderDelivered" => &["SHIPPED"],
                        "OrderCancelled" => &["PLACED", "PAID"],
                        _ => &[],
                    };
                    from.contains(&s(i, "status").as_str()) && ev.seq.get() > seq(i)
                }
            };
            let already = item.as_ref().is_some_and(|i| seq(i) >= ev.seq.get());
            if let Some(b) = &self.barrier {
                // Every copy reaches this point once per record.
                b.wait().await;
            }
            if already {
                continue; // duplicate or stale: acknowledge
            }
            if !legal {
                failures.push(id); // early: retry later
                continue;
            }
            // Act: unconditional.
            self.client
                .update_item()
                .table_name(&self.table)
                .key("order_id", AttributeValue::S(ev.order_id.to_string()))
                .update_expression(
                    "SET #st = :to, last_event_seq = :seq, last_event_id = :eid, history = list_append(if_not_exists(history, :nil), :eidl)",
                )
                .expression_attribute_names("#st", "status")
                .expression_attribute_values(":to", AttributeValue::S(ev.kind().target().as_str().into()))
                .expression_attribute_values(":seq", AttributeValue::N(ev.seq.get().to_string()))
                .expression_attribute_values(":eid", AttributeValue::S(ev.event_id.to_string()))
                .expression_attribute_values(":nil", AttributeValue::L(vec![]))
                .expression_attribute_values(
                    ":eidl",
                    AttributeValue::L(vec![AttributeValue::S(ev.event_id.to_string())]),
                )
                .send()
                .await
                .map_err(|e| format!("UpdateItem: {e}"))?;
        }
        Ok(failures)
    }
}

impl Function for NaiveFunction {
    async fn invoke(&self, payload: Arc<Vec<u8>>, timeout: Duration) -> InvokeResult {
        let deadline_ms = epoch_ms() + timeout.as_millis() as u64;
        match tokio::time::timeout(timeout, self.handle(&payload)).await {
            Ok(Ok(failures)) => InvokeResult::Response {
                body: serde_json::to_vec(&json!({
                    "batchItemFailures": failures
                        .iter()
                        .map(|id| json!({ "itemIdentifier": id }))
                        .collect::<Vec<_>>()
                }))
                .unwrap(),
                at_ms: epoch_ms(),
                deadline_ms,
            },
            Ok(Err(e)) => InvokeResult::Error {
                error_type: "NaiveError".into(),
                error_message: e,
                at_ms: epoch_ms(),
                deadline_ms,
            },
            Err(_) => InvokeResult::Timeout,
        }
    }
}
