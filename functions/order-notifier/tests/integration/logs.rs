//! What the order notifier writes to its logs, through the functions' own log format
//! (`bootstrap::json_logs`, captured by the workspace's harness): no payload
//! data at INFO or above.

use serde_json::json;

use crate::captured::Captured;
use orders::testing::{TestDb, far_deadline};

/// The webhook URL carries the provider's token, and reqwest's errors name
/// the URL they failed on: the notifier's lines about a failed request (a
/// timeout here) say what failed, never where.
#[tokio::test]
async fn a_failing_webhook_request_is_logged_without_its_url() {
    use crate::notifier::{function, record as change, stream};
    use order_notifier::NotifierConfig;
    use orders::testing::provider::{Mode, Provider};

    let db = TestDb::with_table("notifications-test", order_notifier::store::KEY).await;
    let table = db.table.clone();
    let provider = Provider::start().await;
    provider.set_mode(Mode::Hang);
    let url = format!("{}?token=SECRET-TOKEN-45", provider.url);
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let config = NotifierConfig::from_lookup(|k| match k {
        "NOTIFICATIONS_TABLE" => Some(table.clone()),
        "NOTIFY_WEBHOOK_URL" => Some(url.clone()),
        "NOTIFY_TIMEOUT_MS" => Some("200".into()),
        _ => None,
    })
    .expect("config");
    let n = function(&db.client, config);

    let logs = Captured::default();
    let _guard = logs.install();
    let event = stream(vec![change(1, "ord-1", None, Some("PLACED"))]);
    let (report, _) = n.handle_batch(&event, far_deadline()).await;
    assert_eq!(
        report.records[0].outcome.to_string(),
        "Failed: the provider did not answer in time (or could not be reached)"
    );

    let lines = logs.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.pointer("/message") == Some(&json!("webhook request failed"))),
        "the failure is logged"
    );
    let text = logs.text();
    for leak in ["SECRET-TOKEN-45", host.as_str(), "/notify"] {
        assert!(!text.contains(leak), "{leak:?} in the logs:\n{text}");
    }
}
