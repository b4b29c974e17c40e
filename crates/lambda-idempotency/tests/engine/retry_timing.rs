//! docs/retry-timing.md's tables, computed by the library's
//! `BackoffPolicy`, so that the document cannot drift from the code.

use lambda_idempotency::RetryClass;
use lambda_idempotency::backoff::BackoffPolicy;

/// The two tables of docs/retry-timing.md, from the code, so that the
/// document cannot drift from it.
fn doc_tables(p: &BackoffPolicy) -> (String, String) {
    let span = |least: u64, worst: u64| {
        if least == worst {
            format!("{least} s")
        } else {
            format!("{least} s to {worst} s")
        }
    };
    let mut budget = String::from(
        "| class | `MaxReceiveCount` 5 | `MaxReceiveCount` 10 (the template's default) |\n|---|---|---|\n",
    );
    for (label, class, receives_off) in [
        (
            "predecessor (Early): until the DLQ",
            RetryClass::Predecessor,
            0,
        ),
        (
            "predecessor (Early): until its last receive",
            RetryClass::Predecessor,
            1,
        ),
        (
            "dependency (Failed): until the DLQ",
            RetryClass::Dependency,
            0,
        ),
        ("hopeless (Invalid, Conflict)", RetryClass::Hopeless, 0),
    ] {
        let cell = |n: u32| {
            let n = n - receives_off;
            span(p.least_case_secs(class, n), p.worst_case_secs(class, n))
        };
        budget += &format!("| {label} | {} | {} |\n", cell(5), cell(10));
    }
    let mut after = String::from(
        "| throttled receives | throttled for at least | the event's last receive, at least | the predecessor back, at most | in time |\n|---|---|---|---|---|\n",
    );
    for row in p.after_throttling(10) {
        let (throttled_for, back) = match row.predecessor_back_secs {
            None => ("–".to_owned(), "–".to_owned()),
            Some(b) => (format!("{} s", row.throttled_for_secs), format!("{b} s")),
        };
        after += &format!(
            "| {} | {throttled_for} | {} s | {back} | {} |\n",
            row.throttled,
            row.event_left_secs,
            if row.in_time() { "yes" } else { "**no**" }
        );
    }
    (budget, after)
}

#[test]
fn the_tables_in_the_docs_are_the_codes() {
    let doc = include_str!("../../../../docs/retry-timing.md");
    let (budget, after) = doc_tables(&BackoffPolicy::default());
    assert!(
        doc.contains(&budget),
        "docs/retry-timing.md should hold:\n{budget}"
    );
    assert!(
        doc.contains(&after),
        "docs/retry-timing.md should hold:\n{after}"
    );
}
