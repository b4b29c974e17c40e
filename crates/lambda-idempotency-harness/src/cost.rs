//! What a workload costs per million messages on AWS Lambda (arm64) and
//! DynamoDB on-demand, from figures a benchmark measured: wall time per
//! invocation, init duration, memory size, batch size and DynamoDB requests
//! per message. Pure arithmetic, no I/O: the benchmarks measure, this turns
//! their figures into GB-seconds, request units and dollars.
//!
//! Every price is in [`US_EAST_1_ON_DEMAND`], the one place to edit when a
//! published price changes.

use std::fmt;

/// Published on-demand prices, with the date they were read and where.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Where they apply.
    pub region: &'static str,
    /// When they were read off the pages in [`Prices::sources`].
    pub as_of: &'static str,
    /// Lambda, arm64, dollars per GB-second of billed duration (the first
    /// pricing tier: the first 7.5 billion GB-seconds a month).
    pub lambda_gb_second: f64,
    /// Lambda, dollars per million requests (invocations).
    pub lambda_million_requests: f64,
    /// DynamoDB on-demand, dollars per million write request units.
    pub million_write_units: f64,
    /// DynamoDB on-demand, dollars per million read request units.
    pub million_read_units: f64,
    /// The pages the prices were read from.
    pub sources: &'static [&'static str],
}

/// us-east-1, arm64 Lambda and DynamoDB on-demand (standard table class),
/// without free tier or savings plans. DynamoDB's on-demand prices are the
/// ones in force since the cut of November 2024 (half the earlier $1.25 /
/// $0.25).
pub const US_EAST_1_ON_DEMAND: Prices = Prices {
    region: "us-east-1",
    as_of: "2026-12-05",
    lambda_gb_second: 0.000_013_333_4,
    lambda_million_requests: 0.20,
    million_write_units: 0.625,
    million_read_units: 0.125,
    sources: &[
        "https://aws.amazon.com/lambda/pricing/",
        "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ],
};

/// A figure the cost cannot be computed from: which one, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidWorkload(&'static str);

impl fmt::Display for InvalidWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid workload figure: {}", self.0)
    }
}

impl std::error::Error for InvalidWorkload {}

/// One function's measured figures for one batch size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    batch_size: u32,
    wall_ms_per_invocation: f64,
    init_ms: f64,
    memory_mb: u32,
    cold_starts_per_invocation: f64,
    writes_per_message: f64,
    reads_per_message: f64,
    write_units_per_write: f64,
    read_units_per_read: f64,
}

/// The figures a [`Workload`] is built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Messages per invocation.
    pub batch_size: u32,
    /// Wall time of one invocation, as measured (ms); billed rounded up to
    /// the next millisecond, as Lambda bills.
    pub wall_ms_per_invocation: f64,
    /// Init duration of one cold start (ms): Lambda bills the init phase.
    pub init_ms: f64,
    /// The function's memory size (MB), 128 to 10,240.
    pub memory_mb: u32,
    /// Cold starts per invocation (0.01: one in a hundred).
    pub cold_starts_per_invocation: f64,
    /// DynamoDB write requests per message.
    pub writes_per_message: f64,
    /// DynamoDB read requests per message.
    pub reads_per_message: f64,
    /// Write request units per write request (by item size: see
    /// [`write_units`]).
    pub write_units_per_write: f64,
    /// Read request units per read request (see [`read_units`]).
    pub read_units_per_read: f64,
}

/// Per million messages: the billed quantities and their price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerMillion {
    /// Lambda invocations (requests).
    pub invocations: f64,
    /// Lambda GB-seconds, invocations and inits.
    pub gb_seconds: f64,
    /// Of [`PerMillion::gb_seconds`], the init phases'.
    pub init_gb_seconds: f64,
    /// DynamoDB write request units.
    pub write_units: f64,
    /// DynamoDB read request units.
    pub read_units: f64,
    /// Lambda's price: duration and requests (dollars).
    pub lambda_usd: f64,
    /// DynamoDB's price: request units (dollars).
    pub dynamodb_usd: f64,
}

impl PerMillion {
    /// Lambda and DynamoDB together (dollars).
    pub fn total_usd(&self) -> f64 {
        self.lambda_usd + self.dynamodb_usd
    }
}

const MILLION: f64 = 1e6;

impl Workload {
    /// A workload from measured figures; an error names the first figure
    /// that is out of range (a batch of none, a negative or non-finite time
    /// or count, a memory size Lambda does not offer).
    pub fn new(m: Measured) -> Result<Self, InvalidWorkload> {
        let finite_non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if m.batch_size == 0 {
            return Err(InvalidWorkload("batch size"));
        }
        if !finite_non_negative(m.wall_ms_per_invocation) {
            return Err(InvalidWorkload("wall time per invocation"));
        }
        if !finite_non_negative(m.init_ms) {
            return Err(InvalidWorkload("init duration"));
        }
        // Lambda's range of memory sizes.
        if !(128..=10_240).contains(&m.memory_mb) {
            return Err(InvalidWorkload("memory size"));
        }
        if !(finite_non_negative(m.cold_starts_per_invocation)
            && m.cold_starts_per_invocation <= 1.0)
        {
            return Err(InvalidWorkload("cold starts per invocation"));
        }
        for (v, name) in [
            (m.writes_per_message, "writes per message"),
            (m.reads_per_message, "reads per message"),
            (m.write_units_per_write, "write units per write"),
            (m.read_units_per_read, "read units per read"),
        ] {
            if !finite_non_negative(v) {
                return Err(InvalidWorkload(name));
            }
        }
        Ok(Self {
            batch_size: m.batch_size,
            wall_ms_per_invocation: m.wall_ms_per_invocation,
            init_ms: m.init_ms,
            memory_mb: m.memory_mb,
            cold_starts_per_invocation: m.cold_starts_per_invocation,
            writes_per_message: m.writes_per_message,
            reads_per_message: m.reads_per_message,
            write_units_per_write: m.write_units_per_write,
            read_units_per_read: m.read_units_per_read,
        })
    }

    /// What a million messages cost at `prices`.
    pub fn per_million_messages(&self, prices: &Prices) -> PerMillion {
        let invocations = MILLION / f64::from(self.batch_size);
        // Lambda bills memory in GB of 1,024 MB and duration rounded up to
        // the millisecond, per invocation and per init.
        let gb = f64::from(self.memory_mb) / 1024.0;
        let invoke_s = self.wall_ms_per_invocation.ceil() / 1e3;
        let init_s = self.init_ms.ceil() / 1e3;
        let init_gb_seconds = invocations * self.cold_starts_per_invocation * init_s * gb;
        let gb_seconds = invocations * invoke_s * gb + init_gb_seconds;
        let write_units = MILLION * self.writes_per_message * self.write_units_per_write;
        let read_units = MILLION * self.reads_per_message * self.read_units_per_read;
        PerMillion {
            invocations,
            gb_seconds,
            init_gb_seconds,
            write_units,
            read_units,
            lambda_usd: gb_seconds * prices.lambda_gb_second
                + invocations / MILLION * prices.lambda_million_requests,
            dynamodb_usd: write_units / MILLION * prices.million_write_units
                + read_units / MILLION * prices.million_read_units,
        }
    }
}

/// Write request units of one standard write of an item of `item_bytes`
/// (DynamoDB: one per KB or part of one, at least one; a transactional
/// write costs twice that).
pub fn write_units(item_bytes: u64, transactional: bool) -> u64 {
    let units = item_bytes.div_ceil(1024).max(1);
    if transactional { 2 * units } else { units }
}

/// Write requests and write request units per request for [`Measured`],
/// from the item writes per message, `standard` and `transactional`, of
/// items of `item_bytes`: a transactional item write is billed twice (see
/// [`write_units`]).
pub fn item_writes(standard: f64, transactional: f64, item_bytes: u64) -> (f64, f64) {
    let writes = standard + transactional;
    let units = standard * write_units(item_bytes, false) as f64
        + transactional * write_units(item_bytes, true) as f64;
    (writes, if writes > 0.0 { units / writes } else { 0.0 })
}

/// Read request units of one strongly consistent read of an item of
/// `item_bytes` (one per 4 KB or part of one, at least one); an eventually
/// consistent read costs half.
pub fn read_units(item_bytes: u64, strongly_consistent: bool) -> f64 {
    let units = item_bytes.div_ceil(4096).max(1) as f64;
    if strongly_consistent {
        units
    } else {
        units / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round prices, so that every expected figure below is worked out by
    /// hand from the inputs.
    const ROUND: Prices = Prices {
        region: "test",
        as_of: "test",
        lambda_gb_second: 0.00001,
        lambda_million_requests: 0.2,
        million_write_units: 1.0,
        million_read_units: 0.5,
        sources: &[],
    };

    fn measured() -> Measured {
        Measured {
            batch_size: 10,
            // Billed as 40 ms.
            wall_ms_per_invocation: 39.2,
            // Billed as 300 ms.
            init_ms: 299.5,
            memory_mb: 256,
            cold_starts_per_invocation: 0.01,
            writes_per_message: 3.0,
            reads_per_message: 1.0,
            write_units_per_write: 2.0,
            read_units_per_read: 0.5,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_million_messages_cost_what_the_hand_arithmetic_says() {
        let w = Workload::new(measured()).expect("valid");
        let c = w.per_million_messages(&ROUND);
        // 1e6 / 10 = 100,000 invocations of 0.040 s at 0.25 GB = 1,000
        // GB-s; 1 % of them cold, 1,000 inits of 0.300 s at 0.25 GB = 75.
        assert!(close(c.invocations, 100_000.0), "{c:?}");
        assert!(close(c.init_gb_seconds, 75.0), "{c:?}");
        assert!(close(c.gb_seconds, 1_075.0), "{c:?}");
        // 3 writes of 2 units and 1 read of half a unit per message.
        assert!(close(c.write_units, 6e6), "{c:?}");
        assert!(close(c.read_units, 0.5e6), "{c:?}");
        // 1,075 GB-s at 0.00001 + 0.1 million requests at 0.2 = 0.0315;
        // 6 million WRU at 1 + 0.5 million RRU at 0.5 = 6.25.
        assert!(close(c.lambda_usd, 0.010_75 + 0.02), "{c:?}");
        assert!(close(c.dynamodb_usd, 6.25), "{c:?}");
        assert!(close(c.total_usd(), 6.280_75), "{c:?}");
    }

    #[test]
    fn durations_are_billed_rounded_up_to_the_millisecond() {
        let exact = Workload::new(Measured {
            wall_ms_per_invocation: 40.0,
            ..measured()
        })
        .expect("valid");
        let above = Workload::new(Measured {
            wall_ms_per_invocation: 39.001,
            ..measured()
        })
        .expect("valid");
        assert_eq!(
            exact.per_million_messages(&ROUND),
            above.per_million_messages(&ROUND)
        );
    }

    #[test]
    fn request_units_follow_the_item_size() {
        assert_eq!(write_units(0, false), 1);
        assert_eq!(write_units(1024, false), 1);
        assert_eq!(write_units(1025, false), 2);
        assert_eq!(write_units(1025, true), 4);
        assert!(close(read_units(4096, true), 1.0));
        assert!(close(read_units(4097, true), 2.0));
        assert!(close(read_units(100, false), 0.5));
    }

    #[test]
    fn transactional_item_writes_are_billed_twice() {
        // A claim and a transaction of two items of 545 B: 1 + 2 x 2 = 5
        // units over 3 writes.
        let (writes, units) = item_writes(1.0, 2.0, 545);
        assert!(
            close(writes, 3.0) && close(writes * units, 5.0),
            "{writes} {units}"
        );
        // Three standard writes of 1.5 KB: 2 units each.
        let (writes, units) = item_writes(3.0, 0.0, 1536);
        assert!(close(writes, 3.0) && close(units, 2.0), "{writes} {units}");
        // Nothing written: no units, never a division by zero.
        assert_eq!(item_writes(0.0, 0.0, 545), (0.0, 0.0));
    }

    #[test]
    fn figures_out_of_range_are_refused_by_name() {
        for (bad, name) in [
            (
                Measured {
                    batch_size: 0,
                    ..measured()
                },
                "batch size",
            ),
            (
                Measured {
                    wall_ms_per_invocation: f64::NAN,
                    ..measured()
                },
                "wall time per invocation",
            ),
            (
                Measured {
                    init_ms: -1.0,
                    ..measured()
                },
                "init duration",
            ),
            (
                Measured {
                    memory_mb: 64,
                    ..measured()
                },
                "memory size",
            ),
            (
                Measured {
                    cold_starts_per_invocation: 2.0,
                    ..measured()
                },
                "cold starts per invocation",
            ),
            (
                Measured {
                    writes_per_message: f64::INFINITY,
                    ..measured()
                },
                "writes per message",
            ),
        ] {
            assert_eq!(Workload::new(bad), Err(InvalidWorkload(name)));
        }
    }
}
