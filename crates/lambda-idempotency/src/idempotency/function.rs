//! The wrapper: any `async fn(Input) -> Result<Output, E>` once per key.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::store::{Claim, IdempotencyOptions, IdempotencyStore};
use super::{Claimed, Refusal, fingerprint, hashed_key};
use crate::error::{ConfigError, StoreError};

/// Lambda's longest invocation: no lease is longer by default.
const MAX_LEASE: Duration = Duration::from_secs(15 * 60);

type KeyFn<I> = dyn Fn(&I) -> Option<String> + Send + Sync;
type PayloadFn<I> = dyn Fn(&I) -> Value + Send + Sync;
type Clock = dyn Fn() -> u64 + Send + Sync;
type ReplayHook<O> = dyn Fn(O) -> O + Send + Sync;

/// Why an idempotent call returned no output. Never holds an input value
/// (key or payload): these errors are logged and answered to callers.
#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError<E> {
    /// The function ran and failed; its claim was given back, so a retry
    /// runs it again.
    #[error("the function failed: {0}")]
    Function(E),
    /// A call with the same key and payload is running (or crashed before
    /// its lease ended): retry after `retry_after`.
    #[error("a call with this idempotency key is in progress; retry in {} ms", retry_after.as_millis())]
    InProgress {
        /// How long until its lease ends (at least 1 ms).
        retry_after: Duration,
        /// When it ends, epoch milliseconds.
        lease_until_ms: u64,
    },
    /// The key was used before with another payload (the fields
    /// [`Idempotent::payload`] names differ).
    #[error("the idempotency key was already used with another payload")]
    OtherPayload,
    /// The input has no key ([`Idempotent::key`] gave none or an empty
    /// one), and the wrapper requires one (the default).
    #[error("the input has no idempotency key")]
    NoKey,
    /// The input (for its key or payload) could not be serialised, or a
    /// stored output does not read as the output type; says which, never
    /// the value.
    #[error("{0} could not be (de)serialised as JSON")]
    Json(&'static str),
    /// The function ran (its effect counts), but its output could not be
    /// stored ([`NotStored`] says why): the key is completed without it,
    /// so the function does not run again for the key until the key
    /// expires, and this call and every repeat get this error. A defect
    /// of the function's output type or size, logged at ERROR.
    #[error("the function ran, but its output could not be stored: {0}")]
    OutputNotStored(NotStored),
    /// The store did not confirm: the claim, or the completion after the
    /// function ran. In the latter case the function's effect happened
    /// and the key stays claimed until its lease ends: a retry before
    /// then is answered `InProgress`, one after it runs the function
    /// again.
    #[error(transparent)]
    Store(StoreError),
}

/// Why a function's output was not stored
/// ([`IdempotencyError::OutputNotStored`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotStored {
    /// It does not serialise as JSON (e.g. a map whose keys are not
    /// strings).
    #[error("it does not serialise as JSON")]
    NotJson,
    /// Its record would be larger than the store's item limit.
    #[error("it is larger than the store's item limit")]
    TooLarge,
}

impl NotStored {
    /// What the key's record holds instead of the output: JSON no output
    /// is (a key that starts with NUL), so that a repeat is answered with
    /// the same error instead of running the function again.
    fn marker(self) -> &'static str {
        match self {
            NotStored::NotJson => r#"{"\u0000lambda-idempotency:not-stored":"not-json"}"#,
            NotStored::TooLarge => r#"{"\u0000lambda-idempotency:not-stored":"too-large"}"#,
        }
    }

    /// The reason a stored output marks, if it is a marker.
    fn of_stored(output: &str) -> Option<NotStored> {
        [NotStored::NotJson, NotStored::TooLarge]
            .into_iter()
            .find(|n| n.marker() == output)
    }
}

/// When a call's lease ends: epoch milliseconds (lambda_runtime's
/// `Context::deadline`) or a `tokio::time::Instant` (the deadline the
/// library's batch code carries).
pub trait LeaseEnd {
    /// This end as epoch milliseconds, with `now_ms` the wrapper's clock.
    fn epoch_ms(self, now_ms: u64) -> u64;
}

impl LeaseEnd for u64 {
    fn epoch_ms(self, _now_ms: u64) -> u64 {
        self
    }
}

impl LeaseEnd for tokio::time::Instant {
    fn epoch_ms(self, now_ms: u64) -> u64 {
        let left = self.saturating_duration_since(tokio::time::Instant::now());
        now_ms.saturating_add(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
    }
}

/// An async function made idempotent: [`Idempotent::call`] runs it once
/// per key; a repeat with the same payload returns the stored output
/// instead of running it again (Powertools' `idempotent_function`).
///
/// - The key: [`Idempotent::key`] picks it from the input (an order id, a
///   client's idempotency key); by default it is the whole input, as
///   canonical JSON. It is hashed (SHA-256) and prefixed with the
///   function's name (or [`Idempotent::key_prefix`]) before it is stored.
/// - The payload: [`Idempotent::payload`] names the fields that must be
///   the same for a repeat ("same key, other payload" is
///   [`IdempotencyError::OtherPayload`]); by default none are checked.
/// - The lease: each call passes when its lease ends ([`LeaseEnd`]: the
///   invocation's deadline), capped at [`Idempotent::max_lease`].
///
/// ```
/// use std::time::Duration;
///
/// use lambda_idempotency::idempotency::{
///     Idempotent, IdempotencyError, IdempotencyOptions, IdempotencyStore, IdempotencyTable,
/// };
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Charge {
///     payment_id: String,
///     amount: u64,
/// }
///
/// #[derive(Serialize, Deserialize)]
/// struct Receipt {
///     reference: String,
/// }
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("the card was declined")]
/// struct Declined;
///
/// # static CHARGED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// async fn charge_card(charge: Charge) -> Result<Receipt, Declined> {
/// #   CHARGED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///     Ok(Receipt { reference: format!("r-{}", charge.payment_id) })
/// }
///
/// # // A local DynamoDB (the testing crate's dynoxide) with the table.
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use lambda_idempotency_testing as testing;
/// # let client = testing::client_for(&testing::start_dynoxide().await);
/// # testing::create_table(&client, "idempotency", "id").await?;
/// # let deadline_ms = lambda_idempotency::time::epoch_ms() + 30_000;
/// // Once per cold start: the table, the store, the wrapped function.
/// let table = IdempotencyTable::new("idempotency")?;
/// let store = IdempotencyStore::new(client, table, IdempotencyOptions::default())?;
/// let charge = Idempotent::<Charge, Receipt>::new(store, "charge")?
///     .key(|c: &Charge| Some(c.payment_id.clone()))
///     .payload(|c: &Charge| serde_json::json!({ "amount": c.amount }))
///     .expiry(Duration::from_secs(24 * 3600))?
///     .cache_bytes(1 << 20);
///
/// // Per invocation (`deadline_ms`: lambda_runtime's Context::deadline).
/// let input = Charge { payment_id: "p-1".into(), amount: 500 };
/// match charge.call(input, deadline_ms, charge_card).await {
///     Ok(receipt) => println!("{}", receipt.reference),
///     Err(IdempotencyError::InProgress { retry_after, .. }) => {
///         println!("retry in {retry_after:?}")
///     }
///     Err(e) => return Err(e.into()),
/// }
/// # // A repeat: the stored receipt, the card not charged again.
/// # let again = Charge { payment_id: "p-1".into(), amount: 500 };
/// # let receipt = charge.call(again, deadline_ms, charge_card).await?;
/// # assert_eq!(receipt.reference, "r-p-1");
/// # assert_eq!(CHARGED.load(std::sync::atomic::Ordering::SeqCst), 1);
/// # Ok(())
/// # }
/// ```
pub struct Idempotent<I, O> {
    store: IdempotencyStore,
    key: Option<Arc<KeyFn<I>>>,
    payload: Option<Arc<PayloadFn<I>>>,
    require_key: bool,
    max_lease: Duration,
    clock: Arc<Clock>,
    on_replay: Option<Arc<ReplayHook<O>>>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for Idempotent<I, O> {
    fn clone(&self) -> Self {
        Idempotent {
            store: self.store.clone(),
            key: self.key.clone(),
            payload: self.payload.clone(),
            require_key: self.require_key,
            max_lease: self.max_lease,
            clock: self.clock.clone(),
            on_replay: self.on_replay.clone(),
            _types: PhantomData,
        }
    }
}

impl<I, O> fmt::Debug for Idempotent<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotent")
            .field("store", &self.store)
            .field("key", &self.key.is_some())
            .field("payload", &self.payload.is_some())
            .field("require_key", &self.require_key)
            .field("max_lease", &self.max_lease)
            .finish_non_exhaustive()
    }
}

impl<I, O> Idempotent<I, O>
where
    I: Serialize,
    O: Serialize + DeserializeOwned,
{
    /// The function `name`, its records in `store`: the store's options
    /// (expiry, cache), with the key prefix `name` (Powertools prefixes
    /// the function's name too), so functions sharing a table or a store
    /// have their own keys. `name`: 1 to 128 characters, no `#`.
    pub fn new(store: IdempotencyStore, name: &str) -> Result<Self, ConfigError> {
        let store = store.reconfigured(IdempotencyOptions {
            key_prefix: Some(prefix(name)?),
            ..store.options().clone()
        });
        Ok(Idempotent {
            store,
            key: None,
            payload: None,
            require_key: true,
            max_lease: MAX_LEASE,
            clock: Arc::new(crate::time::epoch_ms),
            on_replay: None,
            _types: PhantomData,
        })
    }

    /// The key of an input (`None` or empty: it has none). Default: the
    /// whole input, as canonical JSON.
    pub fn key(mut self, key: impl Fn(&I) -> Option<String> + Send + Sync + 'static) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// The part of an input a repeat must match (e.g. `json!({"amount":
    /// i.amount})`), compared by [`super::fingerprint`]. Default: nothing
    /// is compared.
    pub fn payload(mut self, payload: impl Fn(&I) -> Value + Send + Sync + 'static) -> Self {
        self.payload = Some(Arc::new(payload));
        self
    }

    /// The key prefix instead of the function's name (1 to 128
    /// characters, no `#`), e.g. to keep a function's records when it is
    /// renamed.
    pub fn key_prefix(mut self, key_prefix: &str) -> Result<Self, ConfigError> {
        self.store = self.store.reconfigured(IdempotencyOptions {
            key_prefix: Some(prefix(key_prefix)?),
            ..self.store.options().clone()
        });
        Ok(self)
    }

    /// How long a completed call's output is replayed, from its
    /// completion (default: the store's, one hour unless set). Errors:
    /// under a second ([`IdempotencyStore::new`]).
    pub fn expiry(mut self, expiry: Duration) -> Result<Self, ConfigError> {
        self.store = self.store.with_options(IdempotencyOptions {
            expiry,
            ..self.store.options().clone()
        })?;
        Ok(self)
    }

    /// An in-memory cache of completed outputs of at most `bytes` (0: off),
    /// this function's own: a repeat in the same environment costs no
    /// request.
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.store = self.store.reconfigured(IdempotencyOptions {
            cache_bytes: bytes,
            ..self.store.options().clone()
        });
        self
    }

    /// Run an input without a key without idempotency (a warning is
    /// logged), instead of refusing it with [`IdempotencyError::NoKey`]
    /// (Powertools' `raise_on_no_idempotency_key`, the other way round:
    /// here refusing is the default).
    pub fn run_without_key(mut self) -> Self {
        self.require_key = false;
        self
    }

    /// The longest lease a call takes, whatever its deadline (default 15
    /// minutes, Lambda's longest invocation): the time after which a
    /// crashed call's key can be taken over. Errors: under a millisecond
    /// (a lease over as it is taken: every concurrent call would run the
    /// function too).
    pub fn max_lease(mut self, max_lease: Duration) -> Result<Self, ConfigError> {
        if max_lease < Duration::from_millis(1) {
            return Err(ConfigError::Invalid {
                var: "max_lease",
                reason: "at least 1 ms: a lease over as it is taken holds off no concurrent call"
                    .into(),
            });
        }
        self.max_lease = max_lease;
        Ok(self)
    }

    /// The clock, epoch milliseconds (default the system's): for tests.
    pub fn clock(mut self, clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Applied to a replayed output only (Powertools' `response_hook`),
    /// e.g. to mark it as replayed.
    pub fn on_replay(mut self, hook: impl Fn(O) -> O + Send + Sync + 'static) -> Self {
        self.on_replay = Some(Arc::new(hook));
        self
    }

    /// The store, as configured for this function.
    pub fn store(&self) -> &IdempotencyStore {
        &self.store
    }

    /// Run `f(input)` once for the input's key: the first call claims the
    /// key until `lease_end` (capped at [`Self::max_lease`]), runs `f` and
    /// stores its output; a repeat with the same payload returns that
    /// output (through [`Self::on_replay`]) without running `f`. A failed
    /// `f` gives the key back, so a retry runs it again. A call whose
    /// lease has already ended is refused before anything is written
    /// ([`StoreError::DeadlineExceeded`]).
    pub async fn call<F, Fut, E>(
        &self,
        input: I,
        lease_end: impl LeaseEnd,
        f: F,
    ) -> Result<O, IdempotencyError<E>>
    where
        F: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let now_ms = (self.clock)();
        let Some(key) = self.key_of(&input)? else {
            if self.require_key {
                return Err(IdempotencyError::NoKey);
            }
            tracing::warn!("no idempotency key in the input: running it without idempotency");
            return f(input).await.map_err(IdempotencyError::Function);
        };
        let lease_end = lease_end.epoch_ms(now_ms);
        if lease_end <= now_ms {
            return Err(IdempotencyError::Store(StoreError::DeadlineExceeded));
        }
        let cap = u64::try_from(self.max_lease.as_millis()).unwrap_or(u64::MAX);
        let fingerprint = match &self.payload {
            Some(payload) => fingerprint(&payload(&input)),
            None => fingerprint(&Value::Null),
        };
        let attempt = crate::time::unique_id();
        let claim = Claim {
            key: &key,
            fingerprint: &fingerprint,
            attempt: &attempt,
            lease_until_ms: lease_end.min(now_ms.saturating_add(cap)),
            now_ms,
        };
        match self.store.claim(&claim).await {
            Ok(Claimed::Held) => {}
            Ok(Claimed::Refused(Refusal::Completed(stored))) => {
                if let Some(why) = NotStored::of_stored(&stored.output) {
                    return Err(IdempotencyError::OutputNotStored(why));
                }
                let output: O = serde_json::from_str(&stored.output)
                    .map_err(|_| IdempotencyError::Json("the stored output"))?;
                return Ok(match &self.on_replay {
                    Some(hook) => hook(output),
                    None => output,
                });
            }
            Ok(Claimed::Refused(Refusal::OtherPayload)) => {
                return Err(IdempotencyError::OtherPayload);
            }
            Ok(Claimed::Refused(Refusal::InProgress { lease_until_ms })) => {
                // Taken over only once the skew allowance has passed too.
                let left = lease_until_ms
                    .saturating_add(super::skew_ms())
                    .saturating_sub(now_ms)
                    .max(1);
                return Err(IdempotencyError::InProgress {
                    retry_after: Duration::from_millis(left),
                    lease_until_ms,
                });
            }
            Err(e) => {
                // The claim may have committed unseen (every one of the
                // SDK's tries lost its answer): give it back, or the key
                // refuses its own retry until the lease ends.
                self.store.release(&claim).await;
                return Err(IdempotencyError::Store(e));
            }
        }
        let output = match f(input).await {
            Ok(output) => output,
            Err(e) => {
                self.store.release(&claim).await;
                return Err(IdempotencyError::Function(e));
            }
        };
        // The expiry counts from now, when the output is stored, not from
        // the claim: a call that ran long still replays for the whole
        // expiry.
        let completed = Claim {
            now_ms: (self.clock)(),
            ..claim
        };
        let why = match serde_json::to_string(&output) {
            Ok(text) => match self.store.complete(&completed, &text).await {
                Ok(()) => return Ok(output),
                Err(StoreError::ItemTooLarge) => NotStored::TooLarge,
                // Not confirmed: the key stays claimed until its lease
                // ends (IdempotencyError::Store says what follows).
                Err(e) => return Err(IdempotencyError::Store(e)),
            },
            Err(_) => NotStored::NotJson,
        };
        // The function ran: its effect counts. Given back (or left to its
        // lease), the key would run it again at the next call, and again
        // after every lease, for an output that never fits. Completed with
        // a marker instead, every repeat gets this error until the key
        // expires.
        tracing::error!(
            reason = %why,
            "the function ran, but its output cannot be stored: the key is completed without it"
        );
        self.store
            .complete(&completed, why.marker())
            .await
            .map_err(IdempotencyError::Store)?;
        Err(IdempotencyError::OutputNotStored(why))
    }

    /// The input's stored key (prefix added by the store): its key,
    /// hashed; `None` if it has none.
    fn key_of<E>(&self, input: &I) -> Result<Option<String>, IdempotencyError<E>> {
        let key = match &self.key {
            Some(key) => key(input),
            None => {
                let value =
                    serde_json::to_value(input).map_err(|_| IdempotencyError::Json("the input"))?;
                // A unit or empty input has no key.
                match value {
                    Value::Null => None,
                    Value::Object(ref m) if m.is_empty() => None,
                    v => Some(fingerprint(&v)),
                }
            }
        };
        Ok(key.filter(|k| !k.is_empty()).map(|k| hashed_key(&[&k])))
    }
}

fn prefix(name: &str) -> Result<String, ConfigError> {
    if name.is_empty() || name.chars().count() > 128 || name.contains('#') {
        return Err(ConfigError::Invalid {
            var: "key_prefix",
            reason: "1 to 128 characters, without `#`".into(),
        });
    }
    Ok(name.to_owned())
}
