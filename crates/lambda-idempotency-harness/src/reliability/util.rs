//! Small helpers of this suite only: MD5 for `md5OfBody`, env knobs, the
//! proptest verdict. The clock (`lambda_idempotency::time::epoch_ms`) and
//! the seeded RNG (`lambda_idempotency_testing::rng`) are the library's.

/// An integer from the environment, or `default`.
pub fn env_usize(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{var}={v:?} is not a non-negative integer")),
        _ => default,
    }
}

/// A property case passes when the checks found no problem; otherwise it
/// fails with every problem listed and the queue's statistics.
pub fn no_problems(
    problems: &[String],
    queue_summary: &str,
) -> Result<(), proptest::test_runner::TestCaseError> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(proptest::test_runner::TestCaseError::fail(format!(
        "{} problem(s):\n  {}\nqueue: {queue_summary}",
        problems.len(),
        problems.join("\n  "),
    )))
}

/// MD5 of `data` as lower-case hex, as SQS computes `md5OfBody`.
pub fn md5_hex(data: &[u8]) -> String {
    format!("{:x}", md5::compute(data))
}
