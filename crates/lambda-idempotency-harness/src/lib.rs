//! The workspace's own test and benchmark harness: one crate that every
//! function's tests and benchmark depend on, instead of source files they
//! compiled into themselves from another folder. Built on the
//! published test support (`lambda-idempotency-testing`: a local DynamoDB,
//! the Lambda Runtime API emulator, the fault proxy, the seeded RNG); not
//! published itself (Cargo.toml says why).
//!
//! - [`reliability`]: a function's real binary started as Lambda starts it
//!   ([`reliability::function`]), an SQS queue with its event source
//!   mapping ([`reliability::sqs`]), a local DynamoDB for it
//!   ([`reliability::db`]) and the wiring of the three
//!   ([`reliability::harness`]); docs/reliability.md.
//! - [`captured`]: the functions' own JSON log lines captured in memory.
//! - [`sample_files`]: a folder of sample SQS events and its scenarios.json.
//! - [`bench`]: what the functions' benchmarks share (the report, medians);
//!   [`limits`]: the latency section's lower bound.
//! - [`cost`]: what a measured workload costs per million messages on
//!   Lambda and DynamoDB on-demand, at published prices.
//! - [`demo`]: the demo runner of `make demo` (a server in the process, a
//!   folder of sample events through a function's handler).

pub mod bench;
pub mod captured;
pub mod cost;
pub mod demo;
pub mod limits;
pub mod reliability;
pub mod sample_files;
