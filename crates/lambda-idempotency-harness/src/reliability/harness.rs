//! Wiring shared by the tests: dynoxide, the fault proxy in front of it, and
//! N execution environments running the function's binary through the proxy.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use proptest::test_runner::{Config, FileFailurePersistence};

use std::path::PathBuf;

use super::db::Db;
use super::function::{FnConfig, Function, InvokeResult, LambdaEnv};
use super::sqs::{Audit, Queue};
use super::util::env_usize;
use lambda_idempotency_testing::proxy::FaultProxy;
use lambda_idempotency_testing::rng::Rng;

pub struct Harness {
    pub db: Arc<Db>,
    pub proxy: FaultProxy,
    pub envs: Vec<Arc<LambdaEnv>>,
}

impl Harness {
    /// dynoxide + proxy + `n` environments (started, i.e. cold-started
    /// ahead of the first invocation). `configure` adds function settings.
    /// `binary` is the function every environment runs.
    pub async fn start(
        binary: PathBuf,
        n: usize,
        seed: u64,
        configure: impl Fn(FnConfig) -> FnConfig,
    ) -> Harness {
        Self::start_with(binary, n, seed, true, configure).await
    }

    /// `via_proxy = false`: the functions talk to dynoxide directly (the
    /// load test, where the proxy would only cost time).
    pub async fn start_with(
        binary: PathBuf,
        n: usize,
        seed: u64,
        via_proxy: bool,
        configure: impl Fn(FnConfig) -> FnConfig,
    ) -> Harness {
        let db = Arc::new(Db::start().await);
        let proxy = FaultProxy::start(&db.url, seed).await;
        let endpoint = if via_proxy {
            proxy.url()
        } else {
            db.url.clone()
        };
        let envs: Vec<_> = (0..n)
            .map(|i| {
                LambdaEnv::new(
                    &format!("env{i}"),
                    configure(FnConfig::new(binary.clone(), &db.table, &endpoint)),
                )
            })
            .collect();
        join_all(envs.iter().map(|e| e.start())).await;
        Harness { db, proxy, envs }
    }

    /// Stop every function process, asserting nothing (for a test that is
    /// already failing: its own message matters more).
    pub async fn stop(&self) {
        join_all(self.envs.iter().map(|e| e.shutdown())).await;
    }

    /// Assert that no function process ever panicked, died on its own or
    /// missed a deadline, then stop them all and print (not assert) their
    /// peak RSS.
    pub async fn finish(&self, test: &str) -> Vec<u64> {
        for e in &self.envs {
            let p = e.logs.panics();
            assert!(
                p.is_empty(),
                "{}: the function panicked:\n{}",
                e.name,
                p.join("\n")
            );
            assert_eq!(
                e.unexpected_exits(),
                0,
                "{}: the function process died on its own; last log lines:\n{}",
                e.name,
                e.logs.tail(30)
            );
            assert_eq!(e.timeouts(), 0, "{}: an invocation timed out", e.name);
        }
        let rss: Vec<u64> = self.envs.iter().map(|e| e.peak_rss_kb()).collect();
        join_all(self.envs.iter().map(|e| e.shutdown())).await;
        let starts: Vec<u32> = self.envs.iter().map(|e| e.starts()).collect();
        println!(
            "[{test}] function peak RSS (VmHWM) per environment: {} (process starts: {starts:?})",
            rss.iter()
                .map(|k| format!("{:.1} MiB", *k as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
        rss
    }
}

/// Deliver each batch to every function at the same time, round after
/// round, until the queue drains: SQS's at-least-once delivery at its worst.
/// With `overlap = 1.0` every function gets the whole batch; below that,
/// each gets a random subset (each record with that probability, at least
/// one), so their batches overlap partially and differ in composition.
pub async fn drain_overlapping<F: Function>(
    queue: &Arc<Queue>,
    functions: &[Arc<F>],
    batch_size: usize,
    overlap: f64,
    timeout: Duration,
    max_rounds: usize,
    audit: Option<Audit>,
) -> Result<(), String> {
    let mut rng = Rng::new(queue.cfg.seed ^ 0x0F0F);
    for _ in 0..max_rounds {
        if queue.is_drained() {
            return Ok(());
        }
        let Some(batch) = queue.receive(batch_size) else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        };
        let n = batch.handles.len();
        let subsets: Vec<Vec<usize>> = functions
            .iter()
            .map(|_| {
                let mut s: Vec<usize> = (0..n)
                    .filter(|_| overlap >= 1.0 || rng.chance(overlap))
                    .collect();
                if s.is_empty() {
                    s.push(rng.below(n));
                }
                s
            })
            .collect();
        let results: Vec<InvokeResult> = join_all(functions.iter().zip(&subsets).map(|(f, s)| {
            let payload = if s.len() == n {
                batch.payload.clone()
            } else {
                batch.subset_payload(s)
            };
            f.invoke(payload, timeout)
        }))
        .await;
        let parts: Vec<(Vec<usize>, InvokeResult)> = subsets.into_iter().zip(results).collect();
        let settled = queue.complete_parts(&batch, &parts);
        if let Some(a) = &audit {
            a(settled).await;
        }
    }
    Err(format!(
        "not drained after {max_rounds} rounds: {}; {}",
        queue.describe(),
        queue.stats.summary()
    ))
}

/// proptest settings for these tests: `PROPTEST_CASES` (default `cases`),
/// `PROPTEST_MAX_SHRINK_ITERS` (default 32, each shrink step re-runs the
/// whole scenario), failures persisted next to the test's source file.
pub fn proptest_config(source_file: &'static str, cases: u32) -> Config {
    Config {
        cases: env_usize("PROPTEST_CASES", cases as usize) as u32,
        max_shrink_iters: env_usize("PROPTEST_MAX_SHRINK_ITERS", 32) as u32,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        source_file: Some(source_file),
        ..Config::default()
    }
}

/// A multi-threaded runtime for tests that drive proptest (sync) themselves.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
