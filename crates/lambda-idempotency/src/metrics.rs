//! One CloudWatch Embedded Metric Format (EMF) line per invocation.
//!
//! EMF is a JSON document that Lambda's log pipeline turns into metrics with
//! no API call on the hot path. It must be a line of its own on stdout (not
//! inside a tracing log record), which is why it is written directly here.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use crate::config::Telemetry;

/// Count of records per outcome label, every label present (zeros included,
/// so a dashboard shows 0 rather than "no data").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeCounts(pub BTreeMap<&'static str, u64>);

impl OutcomeCounts {
    /// Count `outcomes` (labels) with every one of `labels` present.
    pub fn tally(
        labels: impl IntoIterator<Item = &'static str>,
        outcomes: impl IntoIterator<Item = &'static str>,
    ) -> Self {
        let mut m: BTreeMap<&'static str, u64> = labels.into_iter().map(|l| (l, 0)).collect();
        for label in outcomes {
            *m.entry(label).or_default() += 1;
        }
        OutcomeCounts(m)
    }

    /// The count for `label` (0 if it never occurred).
    pub fn get(&self, label: &str) -> u64 {
        self.0.get(label).copied().unwrap_or(0)
    }
}

/// How many visibility changes SQS confirmed, and how many it did not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VisibilityTally {
    /// Messages whose visibility was set.
    pub changed: u64,
    /// Messages whose visibility could not be set (they come back after
    /// the queue's visibility timeout).
    pub failed: u64,
}

/// Build the EMF document for one invocation. `extra` are further
/// per-invocation counts (batch size, cache hits and misses, ColdStart).
///
/// Every metric is published under two dimension sets: `FunctionName`,
/// which alarms on one function use, and `service`, the dimension
/// Powertools for AWS Lambda users already chart by.
pub fn emf_document(telemetry: &Telemetry, counts: &OutcomeCounts, extra: &[(&str, u64)]) -> Value {
    let timestamp = crate::time::epoch_ms();
    let values: Vec<(&str, u64)> = counts
        .0
        .iter()
        .map(|(k, v)| (*k, *v))
        .chain(extra.iter().copied())
        .collect();
    let declared: Vec<Value> = values
        .iter()
        .map(|(k, _)| json!({"Name": k, "Unit": "Count"}))
        .collect();
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": telemetry.metrics_namespace,
                "Dimensions": [["FunctionName"], ["service"]],
                "Metrics": declared,
            }]
        },
        "FunctionName": telemetry.function_name,
        "service": telemetry.service,
    });
    if let Value::Object(obj) = &mut doc {
        for (k, v) in values {
            obj.insert(k.to_owned(), json!(v));
        }
    }
    doc
}

/// Write the document as one line to stdout. A failed write is ignored: losing
/// a metric must never fail a batch whose writes committed.
pub fn emit(doc: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{doc}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABELS: [&str; 3] = ["Applied", "Duplicate", "Early"];

    #[test]
    fn document_has_every_outcome_and_its_declaration() {
        let counts = OutcomeCounts::tally(LABELS, ["Applied", "Applied", "Duplicate"]);
        let telemetry = Telemetry {
            metrics_namespace: "NS".into(),
            function_name: "fn".into(),
            service: "svc".into(),
        };
        let doc = emf_document(&telemetry, &counts, &[("BatchSize", 3), ("CacheHits", 1)]);
        assert_eq!(doc["Applied"], 2);
        assert_eq!(doc["Duplicate"], 1);
        assert_eq!(doc["Early"], 0);
        assert_eq!(doc["BatchSize"], 3);
        assert_eq!(doc["CacheHits"], 1);
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap();
        for label in LABELS.into_iter().chain(["BatchSize", "CacheHits"]) {
            assert!(
                declared.iter().any(|m| m["Name"] == label),
                "{label} not declared"
            );
            assert!(doc.get(label).is_some(), "{label} has no value");
        }
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "NS");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["FunctionName"], ["service"]])
        );
        assert_eq!(
            (doc["FunctionName"].clone(), doc["service"].clone()),
            (json!("fn"), json!("svc"))
        );
    }
}
