//! The idempotency store's DynamoDB adapter: the only part of the module
//! that knows the table's attribute names or touches SDK types.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::cache::Cache;
use super::{Claimed, Record, Refusal, Stored, classify};
use crate::dynamo::{Item, n, number, s, store_error, string};
use crate::error::{ConfigError, StoreError};

const IN_PROGRESS: &str = "IN_PROGRESS";
const COMPLETED: &str = "COMPLETED";
/// The attributes every record has besides its key and TTL attributes,
/// which may not be named like these.
const STATUS: &str = "status";
const FINGERPRINT: &str = "fingerprint";
const ATTEMPT: &str = "attempt";
const LEASE_UNTIL: &str = "lease_until";
const OUTPUT: &str = "data";
const FIXED: [&str; 5] = [STATUS, FINGERPRINT, ATTEMPT, LEASE_UNTIL, OUTPUT];

/// DynamoDB's largest item, in bytes (attribute names and values).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Kept free below [`MAX_ITEM_BYTES`]: a number's size is DynamoDB's
/// estimate, and an adopter's table may add an attribute or two.
pub(super) const ITEM_HEADROOM: usize = 1024;

/// DynamoDB allows ClientRequestTokens of up to 36 characters.
const MAX_TOKEN: usize = 36;

/// Where the records live: the table, its key attribute(s) and its TTL
/// attribute. Validated when built, so a deployment mistake fails at the
/// cold start, not on the first call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyTable {
    name: String,
    key_attribute: String,
    ttl_attribute: String,
    /// A table shared by many functions: (the partition key's static
    /// value, the sort key attribute, which holds the record's key).
    shared: Option<(String, String)>,
}

impl IdempotencyTable {
    /// The table `name`, with the string hash key `id` holding the record's
    /// key and the TTL attribute `expiration` (epoch seconds): Powertools'
    /// defaults, so a table made for it serves as it is.
    pub fn new(name: impl Into<String>) -> Result<Self, ConfigError> {
        let name = name.into();
        let valid = (3..=255).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !valid {
            return Err(invalid(
                "table_name",
                "3 to 255 characters of A-Z, a-z, 0-9, `_`, `-` and `.`",
            ));
        }
        Ok(IdempotencyTable {
            name,
            key_attribute: DEFAULT_KEY_ATTRIBUTE.into(),
            ttl_attribute: DEFAULT_TTL_ATTRIBUTE.into(),
            shared: None,
        })
    }

    /// The partition key attribute (default `id`).
    pub fn key_attribute(mut self, name: impl Into<String>) -> Result<Self, ConfigError> {
        self.key_attribute = name.into();
        self.validated("key_attribute")
    }

    /// The TTL attribute (default `expiration`), epoch seconds: enable
    /// DynamoDB's TTL on it to have expired records deleted.
    pub fn ttl_attribute(mut self, name: impl Into<String>) -> Result<Self, ConfigError> {
        self.ttl_attribute = name.into();
        self.validated("ttl_attribute")
    }

    /// A table shared with other items (or functions): every record's
    /// partition key is `partition_value`, its sort key attribute
    /// `sort_key_attribute` holds the record's key (Powertools'
    /// `static_pk_value` and `sort_key_attr`).
    pub fn shared(
        mut self,
        partition_value: impl Into<String>,
        sort_key_attribute: impl Into<String>,
    ) -> Result<Self, ConfigError> {
        let value = partition_value.into();
        if value.is_empty() || value.len() > 2048 {
            return Err(invalid("partition_value", "1 to 2048 bytes"));
        }
        self.shared = Some((value, sort_key_attribute.into()));
        self.validated("sort_key_attribute")
    }

    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.name
    }

    /// The partition key attribute (a string).
    pub fn partition_key(&self) -> &str {
        &self.key_attribute
    }

    /// The sort key attribute (a string), for a shared table.
    pub fn sort_key(&self) -> Option<&str> {
        self.shared.as_ref().map(|(_, sk)| sk.as_str())
    }

    /// The TTL attribute.
    pub fn ttl(&self) -> &str {
        &self.ttl_attribute
    }

    /// Every attribute name set is 1 to 255 bytes, none is one of the
    /// record's fixed attributes, and no two are the same.
    fn validated(self, var: &'static str) -> Result<Self, ConfigError> {
        let mut names = vec![self.key_attribute.as_str(), self.ttl_attribute.as_str()];
        names.extend(self.sort_key());
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() || name.len() > 255 {
                return Err(invalid(var, "an attribute name of 1 to 255 bytes"));
            }
            if FIXED.contains(name) || names[..i].contains(name) {
                return Err(invalid(
                    var,
                    "the key, sort key and TTL attributes must differ from each other and \
                     from status, fingerprint, attempt, lease_until and data",
                ));
            }
        }
        Ok(self)
    }

    /// The item key of the record `key`.
    fn item_key(&self, key: &str) -> Item {
        match &self.shared {
            None => HashMap::from([(self.key_attribute.clone(), s(key))]),
            Some((value, sk)) => {
                HashMap::from([(self.key_attribute.clone(), s(value)), (sk.clone(), s(key))])
            }
        }
    }
}

/// A configuration refused: `var` and what a valid one looks like (never
/// the value). The stores' one constructor of it.
pub(super) fn invalid(var: &'static str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        var,
        reason: reason.into(),
    }
}

/// How records are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyOptions {
    /// How long a completed key answers with its output (default 1 hour,
    /// Powertools' `expires_after_seconds`).
    pub expiry: Duration,
    /// Prefixed to every key as `{prefix}#{key}`, so functions sharing a
    /// table have their own key spaces (default none; the wrapper prefixes
    /// its function's name).
    pub key_prefix: Option<String>,
    /// The in-memory cache of completed records, in bytes (0, the
    /// default: off). Each entry is charged its key, fingerprint and
    /// output, plus a fixed overhead.
    pub cache_bytes: usize,
}

impl Default for IdempotencyOptions {
    fn default() -> Self {
        IdempotencyOptions {
            expiry: Duration::from_secs(3600),
            key_prefix: None,
            cache_bytes: 0,
        }
    }
}

/// The default table's partition key attribute; also the name the Valkey
/// store's records are sized with.
pub(super) const DEFAULT_KEY_ATTRIBUTE: &str = "id";
/// The default table's TTL attribute; sized with as well.
pub(super) const DEFAULT_TTL_ATTRIBUTE: &str = "expiration";

/// Does a completed record fit, whatever the store? Its key's bytes
/// (names and values), then its status, fingerprint, attempt and output
/// with their names, and a 21-byte expiry (DynamoDB's largest number),
/// within [`MAX_ITEM_BYTES`] less [`ITEM_HEADROOM`]: one rule, so that an
/// output is stored by every store or by none.
pub(super) fn completed_fits(
    key_bytes: usize,
    ttl_attribute: &str,
    c: &Claim<'_>,
    output: &str,
) -> Result<(), StoreError> {
    let named = |name: &str, value: usize| name.len() + value;
    let bytes = key_bytes
        + named(STATUS, COMPLETED.len())
        + named(FINGERPRINT, c.fingerprint.len())
        + named(ATTEMPT, c.attempt.len())
        + named(OUTPUT, output.len())
        + named(ttl_attribute, 21);
    if bytes > MAX_ITEM_BYTES - ITEM_HEADROOM {
        return Err(StoreError::ItemTooLarge);
    }
    Ok(())
}

impl IdempotencyOptions {
    /// Epoch seconds at which a key whose output is stored at `now_ms`
    /// expires: every store's one formula.
    pub(super) fn expires_at(&self, now_ms: u64) -> u64 {
        (now_ms / 1000).saturating_add(self.expiry.as_secs())
    }

    /// Refuse options that leave the store unusable: an expiry under a
    /// second (stored in whole seconds, it is none: every key would expire
    /// as it completes, and every repeat would run again).
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.expiry < Duration::from_secs(1) {
            return Err(invalid(
                "expiry",
                "at least 1 second: a key that expires as it completes replays nothing",
            ));
        }
        Ok(())
    }
}

/// A claim to make, complete or release: the key, the payload's
/// fingerprint, who claims it and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The record's key (the store prefixes [`IdempotencyOptions::key_prefix`]).
    /// Stored in the clear: hash what should not be ([`super::hashed_key`]).
    pub key: &'a str,
    /// [`super::fingerprint`] of the payload, or any text that is the same
    /// for the same payload.
    pub fingerprint: &'a str,
    /// Unique to this attempt ([`crate::time::unique_id`]): only it may
    /// complete or release the claim, and a refusal against it is its own
    /// claim seen again. Up to 36 characters, it is also the
    /// transaction's ClientRequestToken.
    pub attempt: &'a str,
    /// Epoch milliseconds: the lease, normally the invocation's deadline.
    /// Another call with the key may take it over after this.
    pub lease_until_ms: u64,
    /// Epoch milliseconds: now, by the caller's clock (expiry is decided
    /// from it). For [`IdempotencyStore::complete`] and
    /// [`IdempotencyStore::completion`], the time the output is stored:
    /// the key's expiry counts from it ([`IdempotencyStore::expires_at`]),
    /// so pass the claim with `now_ms` set anew, not the claim's own time.
    pub now_ms: u64,
}

/// Why a transaction ([`IdempotencyStore::transact`]) wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactError {
    /// DynamoDB cancelled it: one reason code per item, in the order
    /// given (`None` for an item that was not the cause,
    /// `ConditionalCheckFailed`, `TransactionConflict`, ...). Nothing was
    /// written; the claim is still this attempt's to release.
    #[error("the transaction was cancelled ({})", reasons.join(", "))]
    Cancelled {
        /// DynamoDB's cancellation reason codes.
        reasons: Vec<String>,
    },
    /// Any other failure.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads the output of a completed record written in an earlier layout,
/// one without the `data` attribute ([`IdempotencyStore::legacy_output`]):
/// the output the current layout would hold for it, or
/// [`StoreError::CorruptItem`] naming the attribute that is missing or
/// malformed (never its value).
pub type LegacyOutput = fn(&Item) -> Result<String, StoreError>;

/// The idempotency records of one table: claims, completions, releases.
/// Cheap to clone (the client and the cache are shared). Its `Debug`
/// shows the table, the options and the cache's size, never a cached
/// output (user data).
#[derive(Clone)]
pub struct IdempotencyStore {
    client: Client,
    table: Arc<IdempotencyTable>,
    options: Arc<IdempotencyOptions>,
    cache: Arc<Mutex<Cache>>,
    legacy: Option<LegacyOutput>,
}

impl std::fmt::Debug for IdempotencyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the client (its whole configuration, pages of it), nor the
        // cache's entries (user data): the cache's Debug is its size.
        f.debug_struct("IdempotencyStore")
            .field("table", &self.table)
            .field("options", &self.options)
            .field("cache", &*self.cache())
            .field("legacy_output", &self.legacy.is_some())
            .finish_non_exhaustive()
    }
}

impl IdempotencyStore {
    /// The store of `table`, written with `client` (built with
    /// [`crate::dynamo::retry_config`] and its timeouts, or
    /// `bootstrap::dynamodb_client`). Errors: options that leave the
    /// store unusable (an expiry under a second).
    pub fn new(
        client: Client,
        table: IdempotencyTable,
        options: IdempotencyOptions,
    ) -> Result<Self, ConfigError> {
        options.check()?;
        let cache = Arc::new(Mutex::new(Cache::new(options.cache_bytes)));
        Ok(IdempotencyStore {
            client,
            table: Arc::new(table),
            options: Arc::new(options),
            cache,
            legacy: None,
        })
    }

    /// The same store, reading a completed record that has no `data`
    /// attribute with `read`: for a table whose records an earlier build
    /// wrote in its own layout (same key, TTL, `status`, `fingerprint`,
    /// `attempt` and `lease_until`; the output in attributes of its own),
    /// so that an in-place upgrade replays the keys completed before it
    /// instead of answering them as corrupt until they expire. Without
    /// it, such a record is [`StoreError::CorruptItem`]. In-progress
    /// records need nothing: their layout is the same.
    pub fn legacy_output(mut self, read: LegacyOutput) -> Self {
        self.legacy = Some(read);
        self
    }

    /// The table.
    pub fn table(&self) -> &IdempotencyTable {
        &self.table
    }

    /// The options.
    pub fn options(&self) -> &IdempotencyOptions {
        &self.options
    }

    /// The same store (client, table) with other options. The cache is
    /// shared with this store's unless `cache_bytes` differs: then it is a
    /// new one of that size. Errors: as [`Self::new`].
    pub fn with_options(&self, options: IdempotencyOptions) -> Result<Self, ConfigError> {
        options.check()?;
        Ok(self.reconfigured(options))
    }

    /// [`Self::with_options`] for options already checked.
    pub(super) fn reconfigured(&self, options: IdempotencyOptions) -> Self {
        let cache = if options.cache_bytes == self.options.cache_bytes {
            self.cache.clone()
        } else {
            Arc::new(Mutex::new(Cache::new(options.cache_bytes)))
        };
        IdempotencyStore {
            client: self.client.clone(),
            table: self.table.clone(),
            options: Arc::new(options),
            cache,
            legacy: self.legacy,
        }
    }

    /// The key as stored: with the prefix, if any.
    fn stored_key(&self, key: &str) -> String {
        match &self.options.key_prefix {
            Some(prefix) => format!("{prefix}#{key}"),
            None => key.to_owned(),
        }
    }

    /// Epoch seconds at which a key whose output is stored at `now_ms`
    /// (epoch milliseconds) expires: the one formula for the expiry, which
    /// counts from the completion (a call that ran for minutes still
    /// replays for the whole expiry), also what a caller publishes (the
    /// HTTP layer's `Idempotency-Expires`). A claim's record lives at
    /// least as long, from the claim.
    pub fn expires_at(&self, now_ms: u64) -> u64 {
        self.options.expires_at(now_ms)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding the lock leaves a cache that is at worst
        // missing an entry: keep using it.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claim the key. The condition admits an absent key, an expired one
    /// (whatever DynamoDB's TTL has deleted yet) and one whose lease is
    /// over (its call ended without completing). A refusal brings the
    /// stored record back (ALL_OLD), classified by [`classify`]: a repeat
    /// costs this one request. With the cache on, a key completed in this
    /// process answers from memory, without a request.
    pub async fn claim(&self, c: &Claim<'_>) -> Result<Claimed, StoreError> {
        let key = self.stored_key(c.key);
        if self.options.cache_bytes > 0
            && let Some((fingerprint, stored)) = self.cache().get(&key, c.now_ms)
        {
            return Ok(Claimed::Refused(if fingerprint == c.fingerprint {
                Refusal::Completed(stored)
            } else {
                Refusal::OtherPayload
            }));
        }
        // An in-progress record outlives its lease (and the clock skew
        // allowed), so that a lease longer than the expiry is not cut
        // short by it.
        let expires_at = super::claim_expires_at(self.expires_at(c.now_ms), c.lease_until_ms);
        let mut item = self.table.item_key(&key);
        item.extend([
            (STATUS.to_owned(), s(IN_PROGRESS)),
            (FINGERPRINT.to_owned(), s(c.fingerprint)),
            (ATTEMPT.to_owned(), s(c.attempt)),
            (LEASE_UNTIL.to_owned(), n(c.lease_until_ms)),
            (self.table.ttl_attribute.clone(), n(expires_at)),
        ]);
        let result = self
            .client
            .put_item()
            .table_name(&self.table.name)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(#k) OR #ex <= :now_s OR (#st = :inp AND #lu <= :now_ms)",
            )
            .expression_attribute_names("#k", &self.table.key_attribute)
            .expression_attribute_names("#ex", &self.table.ttl_attribute)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#lu", LEASE_UNTIL)
            .expression_attribute_values(":now_s", n(c.now_ms / 1000))
            // A lease is over once it ended plus the clock skew allowed
            // between hosts (super::lease_is_live, the same test).
            .expression_attribute_values(":now_ms", n(c.now_ms.saturating_sub(super::skew_ms())))
            .expression_attribute_values(":inp", s(IN_PROGRESS))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let stored = match result {
            Ok(_) => return Ok(Claimed::Held),
            Err(SdkError::ServiceError(ctx)) => match ctx.err() {
                PutItemError::ConditionalCheckFailedException(e) => {
                    e.item().map(|i| self.record(i)).transpose()?
                }
                _ => return Err(store_error(&SdkError::ServiceError(ctx), "PutItem")),
            },
            Err(e) => return Err(store_error(&e, "PutItem")),
        };
        let claimed = classify(c.fingerprint, c.attempt, stored.as_ref(), c.now_ms)?;
        if let Claimed::Refused(Refusal::Completed(done)) = &claimed {
            self.remember(&key, c.fingerprint, done);
        }
        Ok(claimed)
    }

    /// Complete this attempt's claim with `output`, to be replayed until
    /// the expiry, counted from `c.now_ms` (set it to the completion's
    /// time: [`Claim::now_ms`]). Only this attempt's in-progress claim is completed: a
    /// claim that was lost (its lease ran out and another call took the
    /// key) is [`StoreError::InconsistentRefusal`]. A completion whose
    /// answer was lost and that the SDK sent again finds its own completed
    /// record, and is a success.
    ///
    /// Errors: [`StoreError::ItemTooLarge`], before anything is sent, when
    /// the completed record would not fit in a DynamoDB item (the output
    /// with the key, fingerprint, attempt and names).
    pub async fn complete(&self, c: &Claim<'_>, output: &str) -> Result<(), StoreError> {
        let key = self.stored_key(c.key);
        self.fits(c, &key, output)?;
        let (expires_at, update) = self.completing(c, &key, output);
        let result = update(self.client.update_item().table_name(&self.table.name))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => {}
            Err(SdkError::ServiceError(ctx)) => match ctx.err() {
                UpdateItemError::ConditionalCheckFailedException(e) => {
                    let own = match e.item() {
                        Some(i) => {
                            matches!(self.record(i)?, Record::Completed { .. })
                                && string(i, ATTEMPT).is_ok_and(|a| a == c.attempt)
                        }
                        None => false,
                    };
                    if !own {
                        return Err(StoreError::InconsistentRefusal);
                    }
                }
                _ => return Err(store_error(&SdkError::ServiceError(ctx), "UpdateItem")),
            },
            Err(e) => return Err(store_error(&e, "UpdateItem")),
        }
        self.remember(
            &key,
            c.fingerprint,
            &Stored {
                output: output.to_owned(),
                expires_at,
            },
        );
        Ok(())
    }

    /// The completion of this attempt's claim with `output`, as a write
    /// for the caller's own `TransactWriteItems` beside its business
    /// write ([`Self::transact`] sends one): both commit, or neither. Its
    /// condition (this attempt's in-progress claim) cancels the
    /// transaction if the claim was lost.
    ///
    /// Errors: [`StoreError::ItemTooLarge`] as for [`Self::complete`], so
    /// that a transaction that could never commit is not built (and the
    /// business write does not happen).
    pub fn completion(&self, c: &Claim<'_>, output: &str) -> Result<TransactWriteItem, StoreError> {
        let key = self.stored_key(c.key);
        self.fits(c, &key, output)?;
        let (_, update) = self.completing(c, &key, output);
        let built = update(Update::builder().table_name(&self.table.name)).build()?;
        Ok(TransactWriteItem::builder().update(built).build())
    }

    /// Would the completed record of `key` with `output` fit in an item?
    /// Its size by DynamoDB's rules: each attribute's name and value in
    /// UTF-8 bytes, a number at most 21 bytes.
    fn fits(&self, c: &Claim<'_>, key: &str, output: &str) -> Result<(), StoreError> {
        let named = |name: &str, value: usize| name.len() + value;
        let key_bytes: usize = self
            .table
            .item_key(key)
            .iter()
            .map(|(k, v)| named(k, v.as_s().map_or(0, String::len)))
            .sum();
        completed_fits(key_bytes, &self.table.ttl_attribute, c, output)
    }

    /// The completing update's key, expression, condition and values, for
    /// both the UpdateItem and the transaction's Update builder (the same
    /// setters on two types): the expiry it sets, and the function that
    /// fills a builder in.
    fn completing<'s, B: CompletingWrite>(
        &'s self,
        c: &Claim<'s>,
        key: &'s str,
        output: &'s str,
    ) -> (u64, impl FnOnce(B) -> B + 's) {
        let expires_at = self.expires_at(c.now_ms);
        let attempt = c.attempt;
        let fill = move |b: B| {
            let mut b = b;
            for (k, v) in self.table.item_key(key) {
                b = b.key(k, v);
            }
            b.update_expression("SET #st = :done, #out = :out, #ex = :exp REMOVE #lu")
                .condition_expression("#at = :mine AND #st = :inp")
                .expression_attribute_names("#st", STATUS)
                .expression_attribute_names("#out", OUTPUT)
                .expression_attribute_names("#ex", &self.table.ttl_attribute)
                .expression_attribute_names("#lu", LEASE_UNTIL)
                .expression_attribute_names("#at", ATTEMPT)
                .expression_attribute_values(":done", s(COMPLETED))
                .expression_attribute_values(":inp", s(IN_PROGRESS))
                .expression_attribute_values(":mine", s(attempt))
                .expression_attribute_values(":out", s(output))
                .expression_attribute_values(":exp", n(expires_at))
        };
        (expires_at, fill)
    }

    /// Send `items` (the caller's business writes and
    /// [`Self::completion`]) as one TransactWriteItems with this attempt
    /// as its ClientRequestToken: the SDK re-sends the same request (token
    /// included) on its retries, so a retry of a transaction that
    /// committed unseen is answered as the success it was, not cancelled
    /// against its own writes (DynamoDB keeps a token 10 minutes). An
    /// attempt over 36 characters is not sent as the token; the SDK then
    /// fills in its own, once per call: the same holds.
    pub async fn transact(
        &self,
        c: &Claim<'_>,
        items: Vec<TransactWriteItem>,
    ) -> Result<(), TransactError> {
        let mut request = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items));
        if c.attempt.len() <= MAX_TOKEN {
            request = request.client_request_token(c.attempt);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(ctx)) => match ctx.err() {
                TransactWriteItemsError::TransactionCanceledException(e) => {
                    let reasons: Vec<String> = e
                        .cancellation_reasons()
                        .iter()
                        .map(|r| r.code().unwrap_or("None").to_owned())
                        .collect();
                    tracing::warn!(?reasons, "idempotent transaction cancelled");
                    Err(TransactError::Cancelled { reasons })
                }
                _ => Err(store_error(&SdkError::ServiceError(ctx), "TransactWriteItems").into()),
            },
            Err(e) => Err(store_error(&e, "TransactWriteItems").into()),
        }
    }

    /// Give the key back after the function failed, so that a retry runs
    /// it instead of being refused as in progress until the lease ends.
    /// Only this attempt's claim, and only while in progress: a completion
    /// that committed unseen keeps its record. Best effort: if this fails
    /// too, the lease still ends at the deadline.
    pub async fn release(&self, c: &Claim<'_>) {
        let key = self.stored_key(c.key);
        let result = self
            .client
            .delete_item()
            .table_name(&self.table.name)
            .set_key(Some(self.table.item_key(&key)))
            .condition_expression("#at = :mine AND #st = :inp")
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#at", ATTEMPT)
            .expression_attribute_values(":mine", s(c.attempt))
            .expression_attribute_values(":inp", s(IN_PROGRESS))
            .send()
            .await;
        if let Err(e) = result {
            let e = store_error(&e, "DeleteItem");
            tracing::warn!(error = %e, "could not release the idempotency key; its lease ends at the deadline");
        }
    }

    fn remember(&self, key: &str, fingerprint: &str, stored: &Stored) {
        if self.options.cache_bytes > 0 {
            self.cache().put(key, fingerprint, stored);
        }
    }

    /// A stored record, read strictly: errors name the attribute.
    fn record(&self, item: &Item) -> Result<Record, StoreError> {
        let fingerprint = string(item, FINGERPRINT)?;
        let expires_at = number(item, &self.table.ttl_attribute)?;
        match string(item, STATUS)?.as_str() {
            IN_PROGRESS => Ok(Record::InProgress {
                fingerprint,
                attempt: string(item, ATTEMPT)?,
                lease_until_ms: number(item, LEASE_UNTIL)?,
                expires_at,
            }),
            COMPLETED => {
                // Only an absent `data` is an earlier layout's: one that is
                // there but not a string is corrupt whatever wrote it.
                let output = match (item.get(OUTPUT), self.legacy) {
                    (None, Some(read)) => read(item)?,
                    _ => string(item, OUTPUT)?,
                };
                Ok(Record::Completed {
                    fingerprint,
                    stored: Stored { output, expires_at },
                })
            }
            _ => Err(StoreError::CorruptItem(
                "`status` is not a known state".into(),
            )),
        }
    }
}

/// The setters the completing write needs, on both the UpdateItem fluent
/// builder and the transaction's `Update` builder.
trait CompletingWrite: Sized {
    fn key(self, k: String, v: AttributeValue) -> Self;
    fn update_expression(self, e: &str) -> Self;
    fn condition_expression(self, e: &str) -> Self;
    fn expression_attribute_names(self, k: &str, v: &str) -> Self;
    fn expression_attribute_values(self, k: &str, v: AttributeValue) -> Self;
}

macro_rules! completing_write {
    ($t:ty) => {
        impl CompletingWrite for $t {
            fn key(self, k: String, v: AttributeValue) -> Self {
                <$t>::key(self, k, v)
            }
            fn update_expression(self, e: &str) -> Self {
                <$t>::update_expression(self, e)
            }
            fn condition_expression(self, e: &str) -> Self {
                <$t>::condition_expression(self, e)
            }
            fn expression_attribute_names(self, k: &str, v: &str) -> Self {
                <$t>::expression_attribute_names(self, k, v)
            }
            fn expression_attribute_values(self, k: &str, v: AttributeValue) -> Self {
                <$t>::expression_attribute_values(self, k, v)
            }
        }
    };
}

completing_write!(aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder);
completing_write!(aws_sdk_dynamodb::types::builders::UpdateBuilder);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_layouts_are_validated_without_echoing_names() {
        assert!(IdempotencyTable::new("ok-table_1.x").is_ok());
        for bad in ["", "ab", "has space", &"x".repeat(256)] {
            let Err(ConfigError::Invalid { var, reason }) = IdempotencyTable::new(bad) else {
                panic!("accepted a bad table name")
            };
            assert_eq!(var, "table_name");
            // The reason says what is expected, never the name given.
            assert!(bad.is_empty() || !reason.contains(bad), "{reason}");
        }
        let t = || IdempotencyTable::new("table").unwrap();
        assert!(t().key_attribute("").is_err());
        assert!(t().key_attribute("status").is_err());
        assert!(t().ttl_attribute("id").is_err());
        assert!(t().ttl_attribute("data").is_err());
        assert!(t().shared("fn", "id").is_err());
        assert!(t().shared("", "sk").is_err());
        assert!(t().shared("fn", "expiration").is_err());
        let shared = t().key_attribute("pk").unwrap().shared("fn", "sk").unwrap();
        assert_eq!(
            (shared.partition_key(), shared.sort_key(), shared.ttl()),
            ("pk", Some("sk"), "expiration")
        );
        assert_eq!(
            shared.item_key("k"),
            HashMap::from([("pk".to_owned(), s("fn")), ("sk".to_owned(), s("k"))])
        );
        assert_eq!(
            t().item_key("k"),
            HashMap::from([("id".to_owned(), s("k"))])
        );
    }
}
