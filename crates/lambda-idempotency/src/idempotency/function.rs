//! The wrapper: any `async fn(Input) -> Result<Output, E>` once per key.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;
use lambda_runtime::Diagnostic;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::persistence::Persistence;
use super::store::{Claim, IdempotencyOptions, IdempotencyStore, TransactError};
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
#[non_exhaustive]
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
    /// The lease end given to the call cannot be an invocation's deadline:
    /// 0, as a `Context::default()` has. Pass the invocation's `Context`
    /// (or, in a test, a `Context` whose `deadline` is set).
    #[error(
        "the call's deadline is 0, which no Lambda invocation has: pass the invocation's Context"
    )]
    NoDeadline,
    /// The transactional form ([`Idempotent::call_transact`]): DynamoDB
    /// cancelled the transaction, so neither the function's writes nor the
    /// completion happened, and the claim was given back. One reason code
    /// per write, in the order given, the completion last
    /// (`ConditionalCheckFailed` on one of yours: its condition refused;
    /// on the completion: the lease ended and another call took the key).
    #[error("the transaction was cancelled ({})", reasons.join(", "))]
    Cancelled {
        /// DynamoDB's cancellation reason codes.
        reasons: Vec<String>,
    },
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
#[non_exhaustive]
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

impl<E: fmt::Display> IdempotencyError<E> {
    /// The variant's name: `InProgress`, `OtherPayload`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            IdempotencyError::Function(_) => "Function",
            IdempotencyError::InProgress { .. } => "InProgress",
            IdempotencyError::OtherPayload => "OtherPayload",
            IdempotencyError::NoKey => "NoKey",
            IdempotencyError::NoDeadline => "NoDeadline",
            IdempotencyError::Json(_) => "Json",
            IdempotencyError::Cancelled { .. } => "Cancelled",
            IdempotencyError::OutputNotStored(_) => "OutputNotStored",
            IdempotencyError::Store(_) => "Store",
        }
    }

    /// How Lambda reports it as the invocation's error: `errorType`
    /// `IdempotencyError.{kind}` (what the console and logs show, and what
    /// a caller matches on), the message as displayed (never an input
    /// value; a `Function` error shows the function's own message).
    pub fn diagnostic(&self) -> Diagnostic {
        Diagnostic {
            error_type: format!("IdempotencyError.{}", self.kind()),
            error_message: self.to_string(),
        }
    }
}

/// `?` in a handler whose error is lambda_runtime's `Diagnostic`.
impl<E: fmt::Display> From<IdempotencyError<E>> for Diagnostic {
    fn from(e: IdempotencyError<E>) -> Self {
        e.diagnostic()
    }
}

/// When a call's lease ends: the invocation's `lambda_runtime::Context`
/// (its deadline, as the runtime gives it), epoch milliseconds (a
/// `Context::deadline`), or a `tokio::time::Instant` (the deadline the
/// library's batch code carries). A deadline under 10^12 ms is a local
/// emulator's duration (`cargo lambda watch`), read as milliseconds from
/// now; 0 ([`IdempotencyError::NoDeadline`]) is none.
pub trait LeaseEnd {
    /// This end as epoch milliseconds, with `now_ms` the wrapper's clock;
    /// `None` when it cannot be an invocation's deadline.
    fn epoch_ms(self, now_ms: u64) -> Option<u64>;
}

impl LeaseEnd for u64 {
    fn epoch_ms(self, now_ms: u64) -> Option<u64> {
        crate::time::runtime_deadline(self, now_ms)
    }
}

impl LeaseEnd for &lambda_runtime::Context {
    fn epoch_ms(self, now_ms: u64) -> Option<u64> {
        self.deadline.epoch_ms(now_ms)
    }
}

impl LeaseEnd for tokio::time::Instant {
    fn epoch_ms(self, now_ms: u64) -> Option<u64> {
        let left = self.saturating_duration_since(tokio::time::Instant::now());
        Some(now_ms.saturating_add(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)))
    }
}

/// A claim this call holds, owned, so that the two forms of the call
/// share the claiming.
struct Held {
    key: String,
    fingerprint: String,
    attempt: String,
    lease_until_ms: u64,
    now_ms: u64,
}

impl Held {
    fn claim(&self) -> Claim<'_> {
        Claim {
            key: &self.key,
            fingerprint: &self.fingerprint,
            attempt: &self.attempt,
            lease_until_ms: self.lease_until_ms,
            now_ms: self.now_ms,
        }
    }
}

/// What claiming the input's key came to.
enum Start<I, O> {
    /// This call holds the key: run the function.
    Run(I, Held),
    /// The input has no key and may run without one.
    Unkeyed(I),
    /// The stored output of a completed call.
    Replay(O),
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
pub struct Idempotent<I, O, S = IdempotencyStore> {
    store: S,
    key: Option<Arc<KeyFn<I>>>,
    payload: Option<Arc<PayloadFn<I>>>,
    require_key: bool,
    max_lease: Duration,
    clock: Arc<Clock>,
    on_replay: Option<Arc<ReplayHook<O>>>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O, S: Clone> Clone for Idempotent<I, O, S> {
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

impl<I, O, S: fmt::Debug> fmt::Debug for Idempotent<I, O, S> {
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

impl<I, O, S> Idempotent<I, O, S>
where
    I: Serialize,
    O: Serialize + DeserializeOwned,
    S: Persistence,
{
    /// The function `name`, its records in `store`: the store's options
    /// (expiry, cache), with the key prefix `name` (Powertools prefixes
    /// the function's name too), so functions sharing a table or a store
    /// have their own keys. `name`: 1 to 128 characters, no `#`.
    pub fn new(store: S, name: &str) -> Result<Self, ConfigError> {
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
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Run `f(input)` once for the input's key: the first call claims the
    /// key until `lease_end` (the invocation's `&Context`, capped at
    /// [`Self::max_lease`]), runs `f` and stores its output; a repeat with
    /// the same payload returns that output (through [`Self::on_replay`])
    /// without running `f`. A failed `f` gives the key back, so a retry
    /// runs it again. A call whose lease has already ended is refused
    /// before anything is written ([`StoreError::DeadlineExceeded`]).
    ///
    /// If the completion fails after `f` ran (DynamoDB throttled or did not
    /// answer), `f`'s effect has happened but its record still says in
    /// progress: a retry before the lease ends is answered `InProgress`,
    /// one after it runs `f` again. Where `f`'s effect is a DynamoDB write,
    /// [`Self::call_transact`] closes that window.
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
        let (input, held) = match self.start(input, lease_end).await? {
            Start::Replay(output) => return Ok(output),
            Start::Unkeyed(input) => return f(input).await.map_err(IdempotencyError::Function),
            Start::Run(input, held) => (input, held),
        };
        let claim = held.claim();
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

    /// Claim the input's key, or answer from its record.
    async fn start<E>(
        &self,
        input: I,
        lease_end: impl LeaseEnd,
    ) -> Result<Start<I, O>, IdempotencyError<E>> {
        let now_ms = (self.clock)();
        let Some(key) = self.key_of(&input)? else {
            if self.require_key {
                return Err(IdempotencyError::NoKey);
            }
            tracing::warn!("no idempotency key in the input: running it without idempotency");
            return Ok(Start::Unkeyed(input));
        };
        let lease_end = lease_end
            .epoch_ms(now_ms)
            .ok_or(IdempotencyError::NoDeadline)?;
        if lease_end <= now_ms {
            return Err(IdempotencyError::Store(StoreError::DeadlineExceeded));
        }
        let cap = u64::try_from(self.max_lease.as_millis()).unwrap_or(u64::MAX);
        let fingerprint = match &self.payload {
            Some(payload) => fingerprint(&payload(&input)),
            None => fingerprint(&Value::Null),
        };
        let held = Held {
            key,
            fingerprint,
            attempt: crate::time::unique_id(),
            lease_until_ms: lease_end.min(now_ms.saturating_add(cap)),
            now_ms,
        };
        let claim = held.claim();
        match self.store.claim(&claim).await {
            Ok(Claimed::Held) => Ok(Start::Run(input, held)),
            Ok(Claimed::Refused(Refusal::Completed(stored))) => {
                if let Some(why) = NotStored::of_stored(&stored.output) {
                    return Err(IdempotencyError::OutputNotStored(why));
                }
                let output: O = serde_json::from_str(&stored.output)
                    .map_err(|_| IdempotencyError::Json("the stored output"))?;
                Ok(Start::Replay(match &self.on_replay {
                    Some(hook) => hook(output),
                    None => output,
                }))
            }
            Ok(Claimed::Refused(Refusal::OtherPayload)) => Err(IdempotencyError::OtherPayload),
            Ok(Claimed::Refused(Refusal::InProgress { lease_until_ms })) => {
                // Taken over only once the skew allowance has passed too.
                let left = lease_until_ms
                    .saturating_add(super::skew_ms())
                    .saturating_sub(now_ms)
                    .max(1);
                Err(IdempotencyError::InProgress {
                    retry_after: Duration::from_millis(left),
                    lease_until_ms,
                })
            }
            Err(e) => {
                // The claim may have committed unseen (every one of the
                // SDK's tries lost its answer): give it back, or the key
                // refuses its own retry until the lease ends.
                self.store.release(&claim).await;
                Err(IdempotencyError::Store(e))
            }
        }
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

/// What only the DynamoDB store can do: the completion committed with the
/// function's own DynamoDB writes in one transaction.
impl<I, O> Idempotent<I, O, IdempotencyStore>
where
    I: Serialize,
    O: Serialize + DeserializeOwned,
{
    /// The transactional form: `f(input)` returns its output and its
    /// effect as DynamoDB writes, not yet made; they commit in one
    /// `TransactWriteItems` with the key's completion (the attempt as its
    /// ClientRequestToken, so the SDK's retry of a transaction that
    /// committed unseen is a success). The effect and the record never
    /// disagree: no crash or lost answer leaves the effect without its
    /// record, so no retry runs it twice. At most 99 writes of yours
    /// (DynamoDB's 100 per transaction, the completion included).
    ///
    /// If DynamoDB cancels the transaction (one of your writes' conditions,
    /// or the key taken over after the lease ended), nothing was written
    /// and the key is given back: [`IdempotencyError::Cancelled`]. An
    /// output that cannot be stored is refused before anything is written
    /// ([`IdempotencyError::OutputNotStored`], the key given back). A
    /// transaction DynamoDB did not confirm keeps the key until its lease
    /// ends, as a failed completion of [`Self::call`] does.
    pub async fn call_transact<F, Fut, E>(
        &self,
        input: I,
        lease_end: impl LeaseEnd,
        f: F,
    ) -> Result<O, IdempotencyError<E>>
    where
        F: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<(O, Vec<TransactWriteItem>), E>>,
    {
        let (input, held) = match self.start(input, lease_end).await? {
            Start::Replay(output) => return Ok(output),
            Start::Unkeyed(input) => {
                let (output, writes) = f(input).await.map_err(IdempotencyError::Function)?;
                let attempt = crate::time::unique_id();
                let unkeyed = Claim {
                    key: "",
                    fingerprint: "",
                    attempt: &attempt,
                    lease_until_ms: 0,
                    now_ms: (self.clock)(),
                };
                self.transact(&unkeyed, writes).await?;
                return Ok(output);
            }
            Start::Run(input, held) => (input, held),
        };
        let claim = held.claim();
        let (output, mut writes) = match f(input).await {
            Ok(done) => done,
            Err(e) => {
                self.store.release(&claim).await;
                return Err(IdempotencyError::Function(e));
            }
        };
        let completed = Claim {
            now_ms: (self.clock)(),
            ..claim
        };
        // Nothing is written yet: an output that cannot be stored gives
        // the key back, and the effect does not happen.
        let completion = serde_json::to_string(&output)
            .map_err(|_| NotStored::NotJson)
            .and_then(|text| {
                self.store
                    .completion(&completed, &text)
                    .map_err(|e| match e {
                        StoreError::ItemTooLarge => NotStored::TooLarge,
                        // Building the write failed: no output is stored.
                        _ => NotStored::NotJson,
                    })
            });
        let completion = match completion {
            Ok(c) => c,
            Err(why) => {
                self.store.release(&claim).await;
                return Err(IdempotencyError::OutputNotStored(why));
            }
        };
        writes.push(completion);
        match self.transact(&completed, writes).await {
            Ok(()) => Ok(output),
            Err(e @ IdempotencyError::Cancelled { .. }) => {
                self.store.release(&claim).await;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    async fn transact<E>(
        &self,
        claim: &Claim<'_>,
        writes: Vec<TransactWriteItem>,
    ) -> Result<(), IdempotencyError<E>> {
        self.store
            .transact(claim, writes)
            .await
            .map_err(|e| match e {
                TransactError::Cancelled { reasons } => IdempotencyError::Cancelled { reasons },
                TransactError::Store(e) => IdempotencyError::Store(e),
            })
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
