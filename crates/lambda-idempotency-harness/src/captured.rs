//! The functions' own log format captured in memory, for the integration
//! tests of every function under functions/.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lambda_idempotency::bootstrap::json_logs;
use serde_json::{Value, json};
use tracing_subscriber::EnvFilter;

/// The log lines written while it is installed (on this test's thread);
/// `otel.rs` and the functions' own log tests (functions/*/tests) capture
/// with it too.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Install the functions' subscriber at the production default level
    /// (the in-process test server's own logs are left out).
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let guard = tracing::subscriber::set_default(json_logs(
            move || writer.clone(),
            EnvFilter::new("info,dynoxide=off"),
        ));
        // Callsites first hit elsewhere with no subscriber may have cached
        // "never": recompute with this one installed. (nextest, which
        // `make test` uses, runs each test in a process of its own anyway.)
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("log buffer").clone()).expect("UTF-8 logs")
    }

    pub fn lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The "record processed" lines, by messageId.
    pub fn records(&self) -> HashMap<String, Vec<Value>> {
        let mut by_id: HashMap<String, Vec<Value>> = HashMap::new();
        for line in self.lines() {
            if line.pointer("/message") == Some(&json!("record processed")) {
                let id = line
                    .pointer("/message_id")
                    .and_then(Value::as_str)
                    .expect("every record line carries its messageId")
                    .to_owned();
                by_id.entry(id).or_default().push(line);
            }
        }
        by_id
    }
}
