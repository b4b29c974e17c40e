//! Clock helpers every consumer shares: epoch milliseconds (leases,
//! timestamps in items and metrics), RFC 3339 text, and ids unique to one
//! attempt of one process.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Epoch milliseconds of 2001-09-09. A real invocation deadline is always
/// later; a smaller value is a duration, which is what some local emulators
/// (cargo lambda watch 1.9 sends 600000) put in `Lambda-Runtime-Deadline-Ms`.
const EPOCH_MS_FLOOR: u64 = 1_000_000_000_000;

/// An invocation's deadline as epoch milliseconds, from what the Runtime
/// API sent (lambda_runtime's `Context::deadline`), at `now_ms`: a value
/// below 10^12 (2001-09-09 in epoch milliseconds) is a local emulator's
/// duration, read as milliseconds from now. `None` for 0, which no
/// runtime sends (a `Context::default()`): no deadline to lease until.
pub fn runtime_deadline(deadline_ms: u64, now_ms: u64) -> Option<u64> {
    match deadline_ms {
        0 => None,
        d if d < EPOCH_MS_FLOOR => Some(now_ms.saturating_add(d)),
        d => Some(d),
    }
}

/// Lambda's deadline as epoch milliseconds, whatever the runtime API sent:
/// a value below 10^12 (2001-09-09 in epoch milliseconds) is read as
/// milliseconds from now.
pub fn deadline_epoch_ms(deadline_ms: u64) -> u64 {
    let now = epoch_ms();
    let read = runtime_deadline(deadline_ms, now).unwrap_or(now);
    if read != deadline_ms {
        tracing::warn!(
            deadline_ms,
            "invocation deadline is not an epoch timestamp (local emulator?); reading it as milliseconds from now"
        );
    }
    read
}

/// Convert Lambda's deadline (milliseconds since the epoch) to an `Instant`.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> tokio::time::Instant {
    let left = deadline_epoch_ms(deadline_ms).saturating_sub(epoch_ms());
    tokio::time::Instant::now() + std::time::Duration::from_millis(left)
}

/// An id no other attempt of any process shares: when this process started
/// (nanoseconds), its pid, and a counter. Claims and suspense Puts write it
/// so that a refusal can tell "my own earlier write" from someone else's.
pub fn unique_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static STARTED: OnceLock<u128> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    });
    format!(
        "{started:x}-{:x}-{:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Format a time as RFC 3339 UTC with millisecond precision, e.g.
/// `2026-11-29T10:15:00.123Z`. (Days-to-civil from H. Hinnant's algorithm;
/// not worth a date crate for one timestamp.)
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z, a leap day.
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599);
        assert_eq!(rfc3339(t), "2026-12-31T23:59:59.000Z");
    }
}
