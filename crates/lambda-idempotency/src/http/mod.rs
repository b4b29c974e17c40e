//! An Idempotency-Key layer for `lambda_http` services (feature `http`):
//! the IETF httpapi Idempotency-Key draft. This first part: the header,
//! the problems, the stored response.

mod key;
mod problem;
mod stored;

pub use key::{IDEMPOTENCY_KEY, KeyError, MAX_KEY_CHARS, key_of, parse_key};
pub use problem::{DEFAULT_PROBLEM_PREFIX, PROBLEM_JSON, Problem, ProblemKind};
pub use stored::{StoredBody, StoredResponse};
