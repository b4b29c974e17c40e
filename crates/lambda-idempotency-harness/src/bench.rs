//! What the functions' benchmarks (functions/*/benches) share: the report,
//! medians, the machine's description, counted clients, per-message
//! figures.

use lambda_idempotency_testing::RequestCounter;

/// The markdown report: printed, and written by [`Report::write`].
pub struct Report(pub String);

impl Report {
    pub fn line(&mut self, s: impl AsRef<str>) {
        println!("{}", s.as_ref());
        self.0.push_str(s.as_ref());
        self.0.push('\n');
    }

    /// Write the report to the workspace's target/`file`.
    pub fn write(&self, file: &str) {
        let path = workspace_target().join(file);
        let _ = std::fs::write(&path, &self.0);
        println!("\n(written to {})", path.display());
    }
}

/// The workspace's target/ (where `make bench` reads the reports).
pub fn workspace_target() -> std::path::PathBuf {
    // CARGO_TARGET_DIR when cargo was told one, else the workspace's.
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => workspace_root().join("target"),
    }
}

/// The workspace's root (the folder of Cargo.lock), where `make bench`
/// leaves its copies of the builds (target/bench-bins) and the
/// Powertools baseline (bench/powertools): a benchmark's own folder is its
/// package's, not the workspace's.
pub fn workspace_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf()
}

pub const RUNS: usize = 5;

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb / 1024 / 1024)
        .unwrap_or(0);
    format!(
        "{cpu}, {cores} cores, {mem_gib} GiB, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// `client` with every HTTP request it sends counted.
pub fn counted(client: &aws_sdk_dynamodb::Client) -> (aws_sdk_dynamodb::Client, RequestCounter) {
    let counter = RequestCounter::default();
    let conf = client
        .config()
        .to_builder()
        .interceptor(counter.clone())
        .build();
    (aws_sdk_dynamodb::Client::from_conf(conf), counter)
}

/// One row's figures: messages (records) per second, and per message the
/// DynamoDB requests (and, for the notifier, webhook calls).
#[derive(Default)]
pub struct PerMessage {
    pub rates: Vec<f64>,
    pub requests: Vec<f64>,
    pub calls: Vec<f64>,
}

impl PerMessage {
    pub fn add(&mut self, n: usize, secs: f64, requests: u64, calls: u64) {
        self.rates.push(n as f64 / secs);
        self.requests.push(requests as f64 / n as f64);
        self.calls.push(calls as f64 / n as f64);
    }
}
