//! The wire format every consumer shares: the specific [`ParseError`], the
//! validated newtypes (ids, amounts, currencies, timestamps), and the body
//! reading in front of every consumer's own parser: SQS's size limit, JSON,
//! and the SNS and EventBridge envelopes; and the serde route
//! ([`from_json`]) for a `#[derive(Deserialize)]` event. Errors never echo
//! field values: bodies carry customer data, and these errors are logged at
//! ERROR.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use thiserror::Error;

/// Largest body we look at: SQS's message size limit, 1 MiB (1,048,576
/// bytes, raised from 256 KiB: refusing what SQS now delivers
/// would send valid events to the DLQ). Anything larger cannot be a real SQS
/// message and is refused before JSON parsing. What a body is turned into is
/// bounded separately (ids by [`MAX_ID_BYTES`], texts by [`MAX_TEXT_BYTES`],
/// unknown fields ignored), so a large body never makes a large item:
/// DynamoDB's 400 KB item limit is not at stake.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Identifiers (event, order, customer, payment, tracking) are short keys.
/// DynamoDB allows 2 KiB for a partition key; we are far stricter so that a
/// runaway producer cannot bloat items or logs.
pub const MAX_ID_BYTES: usize = 256;
/// Free text (cancel reason, carrier name).
pub const MAX_TEXT_BYTES: usize = 1024;

/// Why a message body is not a valid event. Every variant names the field
/// (as a JSON path like `data.amount`) so the log line is actionable, and
/// none holds a value from the body: it is logged and kept with the
/// message.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The record carries no body at all.
    #[error("the record has no body")]
    MissingBody,
    /// The body is larger than the consumer accepts (`size` and `max` in bytes).
    #[error("body is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The body is not JSON; the text is serde_json's position, not the body.
    #[error("body is not valid JSON: {0}")]
    NotJson(String),
    /// A value that must be an object is not.
    #[error("`{path}` must be a JSON object")]
    NotAnObject {
        /// The JSON path, such as `data`.
        path: String,
    },
    /// A required field is absent.
    #[error("missing required field `{path}`")]
    MissingField {
        /// The JSON path, such as `data.amount`.
        path: String,
    },
    /// A field has the wrong JSON type (`expected` names the right one).
    #[error("`{path}` must be {expected}")]
    WrongType {
        /// The JSON path.
        path: String,
        /// The type it must have.
        expected: &'static str,
    },
    /// A field has the right type and an unacceptable value.
    #[error("`{path}` is invalid: {reason}")]
    InvalidValue {
        /// The JSON path.
        path: String,
        /// What a valid value looks like.
        reason: &'static str,
    },
    /// The field that names the kind of message (an enum's tag or variant)
    /// names none this consumer knows. The value is not kept: it is
    /// attacker-sized input, and this error is logged at ERROR.
    #[error("`{path}` is not one of this consumer's types")]
    UnknownType {
        /// The JSON path of the field that names the type, such as `type`.
        path: String,
    },
    /// An SNS or EventBridge envelope has the right shape but broken content.
    #[error("{envelope} envelope is malformed: {reason}")]
    BadEnvelope {
        /// `SNS` or `EventBridge`.
        envelope: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A non-empty, bounded identifier without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(String);

impl Id {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for Id {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        check_text(s, MAX_ID_BYTES)?;
        Ok(Id(s.to_owned()))
    }
}

/// A positive amount in minor units (paise, cents). Floats are refused
/// rather than rounded: money is never guessed. With [`Currency`], the
/// money fields of events that carry a payment, a refund or a price: kept
/// here because any consumer that reads money needs the same two rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(u64);

impl Amount {
    /// The amount in minor units.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl TryFrom<u64> for Amount {
    type Error = &'static str;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        if n == 0 {
            Err("must be a positive integer in minor units")
        } else {
            Ok(Amount(n))
        }
    }
}

/// An ISO 4217 alphabetic code: three upper-case ASCII letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Currency(String);

impl Currency {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Currency {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        if s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Currency(s.to_owned()))
        } else {
            Err("must be a three-letter upper-case ISO 4217 code")
        }
    }
}

/// An RFC 3339 timestamp, checked for shape only (we store it, we do not
/// compute with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamp(String);

impl Timestamp {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Timestamp {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        if is_rfc3339(s) {
            Ok(Timestamp(s.to_owned()))
        } else {
            Err("must be an RFC 3339 timestamp such as 2026-11-29T10:15:00Z")
        }
    }
}

/// The body, checked for presence and size, read as JSON and given to
/// `parse`; when it is an SNS or EventBridge envelope, as the event inside.
///
/// A body that is a valid event at the top level is that event, whatever
/// else it carries: producers put `source`, `detail-type`, `Type` or
/// `TopicArn` fields on their own events too, and reading such an event as
/// an envelope would send a good message to the DLQ. Only when the body is
/// not an event itself, and has an envelope's complete shape, is the inside
/// read.
pub fn parse_wrapped<T>(
    body: Option<&str>,
    parse: impl Fn(&Value) -> Result<T, ParseError>,
) -> Result<T, ParseError> {
    let value: Value = json_value(checked_body(body)?)?;
    let Value::Object(obj) = &value else {
        return Err(ParseError::NotAnObject {
            path: "(body)".into(),
        });
    };
    let direct = parse(&value);
    if direct.is_ok() {
        return direct;
    }
    match envelope(obj)? {
        Some(inner) => parse(&inner),
        None => direct,
    }
}

fn json_value(text: &str) -> Result<Value, ParseError> {
    // serde_json's own message (line/column and what it expected) is safe to
    // keep: it never quotes the input.
    serde_json::from_str(text).map_err(|e| ParseError::NotJson(e.to_string()))
}

/// The fields of an SNS notification as SQS receives it without raw message
/// delivery; the event is the *string* in `Message`.
const SNS_SHAPE: [&str; 3] = ["TopicArn", "MessageId", "Message"];
/// The string fields of every EventBridge event; the event is the `detail`
/// object.
const EVENTBRIDGE_SHAPE: [&str; 7] = [
    "version",
    "id",
    "detail-type",
    "source",
    "account",
    "time",
    "region",
];

/// The event inside an SNS or EventBridge envelope. `None`: the body does
/// not look like an envelope at all. An error: it has an envelope's marks
/// (`Type: Notification` with `TopicArn`; `detail-type` with `source`) but
/// not its complete shape, which says more than "missing field `type`".
fn envelope(obj: &Map<String, Value>) -> Result<Option<Value>, ParseError> {
    let strings = |fields: &[&str]| {
        fields
            .iter()
            .all(|f| obj.get(*f).is_some_and(Value::is_string))
    };
    if obj.get("Type").and_then(Value::as_str) == Some("Notification")
        && obj.contains_key("TopicArn")
    {
        return match obj.get("Message").and_then(Value::as_str) {
            Some(msg) if strings(&SNS_SHAPE) => json_value(msg).map(Some),
            _ => Err(ParseError::BadEnvelope {
                envelope: "SNS",
                reason: "`TopicArn`, `MessageId` and `Message` must be strings, `Message` holding the event JSON",
            }),
        };
    }
    if obj.contains_key("detail-type") && obj.contains_key("source") {
        return match obj.get("detail") {
            Some(detail @ Value::Object(_)) if strings(&EVENTBRIDGE_SHAPE) => {
                Ok(Some(detail.clone()))
            }
            _ => Err(ParseError::BadEnvelope {
                envelope: "EventBridge",
                reason: "needs `version`, `id`, `detail-type`, `source`, `account`, `time` and `region` strings and a `detail` object holding the event",
            }),
        };
    }
    Ok(None)
}

/// Read a message body into `T` with serde, as [`parse_wrapped`] reads it
/// (no body, or one over [`MAX_BODY_BYTES`], is refused first), with
/// errors as specific and as safe as the hand-written readers': each names
/// the JSON path of the field at fault and never a value from the body.
///
/// serde's own messages quote the input (`invalid value: string "…"`,
/// `unknown variant `…``); here they become [`ParseError`] variants by
/// kind: a missing field is [`ParseError::MissingField`], a tag or variant
/// this type does not know is [`ParseError::UnknownType`], a value of the
/// wrong JSON type is [`ParseError::WrongType`], any other refused value
/// (out of range, a `TryFrom` or custom deserializer's refusal, an unknown
/// field under `deny_unknown_fields`) is [`ParseError::InvalidValue`], and
/// broken JSON is [`ParseError::NotJson`]. Paths are built from the type's
/// field and variant names and from array indices; a map key (it comes
/// from the body, e.g. the keys of a `HashMap`) is written only when it
/// looks like a field name (letters, `_` and `-`: no digits, spaces, `@` or
/// `.`), otherwise as `?`: a key `gold` is shown, `c-1042` is not. Internally tagged and untagged enums read
/// their variant out of serde_path_to_error's sight; a wrong type or value
/// inside one is still found by the value serde describes, but a custom
/// refusal (a `TryFrom` in a variant's field) is reported at the enum's
/// object.
///
/// ```
/// use lambda_idempotency::wire::{ParseError, from_json};
/// use serde::Deserialize;
///
/// #[derive(Debug, PartialEq, Deserialize)]
/// #[serde(tag = "type")]
/// enum LoyaltyEvent {
///     PointsEarned { customer_id: String, points: u64 },
///     PointsRedeemed { customer_id: String, points: u64 },
/// }
///
/// let earned = r#"{"type": "PointsEarned", "customer_id": "c-1", "points": 100}"#;
/// assert_eq!(
///     from_json::<LoyaltyEvent>(Some(earned)),
///     Ok(LoyaltyEvent::PointsEarned { customer_id: "c-1".into(), points: 100 })
/// );
///
/// // The errors name the field, never the value.
/// let negative = r#"{"type": "PointsRedeemed", "customer_id": "c-1", "points": -5}"#;
/// let err = from_json::<LoyaltyEvent>(Some(negative)).unwrap_err();
/// assert_eq!(err.to_string(), "`points` is invalid: is out of range or not an accepted value");
/// let unknown = r#"{"type": "PointsGifted", "customer_id": "c-1", "points": 5}"#;
/// assert_eq!(
///     from_json::<LoyaltyEvent>(Some(unknown)),
///     Err(ParseError::UnknownType { path: "type".into() })
/// );
/// ```
pub fn from_json<T: DeserializeOwned>(body: Option<&str>) -> Result<T, ParseError> {
    let body = checked_body(body)?;
    let mut json = serde_json::Deserializer::from_str(body);
    let value = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        // Only on the error path: the body as a tree, to find the field
        // a path-losing enum's error is about (`locate`).
        let tree = serde_json::from_str::<Value>(body).ok();
        safe_error(e, tree.as_ref())
    })?;
    // Trailing characters after the value: serde_json's `from_str` refuses
    // them too.
    json.end().map_err(|e| ParseError::NotJson(e.to_string()))?;
    Ok(value)
}

/// [`from_json`] for a body already read as JSON (the `data` of an event
/// read by hand, say), with the same errors, paths relative to `value`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, ParseError> {
    serde_path_to_error::deserialize(value).map_err(|e| safe_error(e, Some(value)))
}

/// [`from_json`] through SNS and EventBridge envelopes, as [`parse_wrapped`]
/// reads them: a body that is a `T` itself is that `T`; otherwise, when it
/// is an envelope, the event inside.
pub fn from_json_wrapped<T: DeserializeOwned>(body: Option<&str>) -> Result<T, ParseError> {
    parse_wrapped(body, from_value)
}

/// The body, present and within [`MAX_BODY_BYTES`].
fn checked_body(body: Option<&str>) -> Result<&str, ParseError> {
    let body = body.ok_or(ParseError::MissingBody)?;
    if body.len() > MAX_BODY_BYTES {
        return Err(ParseError::TooLarge {
            size: body.len(),
            max: MAX_BODY_BYTES,
        });
    }
    Ok(body)
}

/// serde's error as a [`ParseError`] without its text: serde's messages
/// quote input values, so only their kind (the message's fixed opening,
/// stable across serde 1.x) and the names that come from the type (a
/// missing field's, in backticks) are read from them.
fn safe_error(
    err: serde_path_to_error::Error<serde_json::Error>,
    tree: Option<&Value>,
) -> ParseError {
    if !err.inner().is_data() {
        // Syntax and end-of-input errors: serde_json's message is a
        // position and what it expected there, never the input.
        return ParseError::NotJson(err.into_inner().to_string());
    }
    let message = err.inner().to_string();
    let path = tree
        .and_then(|tree| locate(tree, err.path(), &message))
        .unwrap_or_else(|| safe_path(err.path()));
    let at = |path: String| {
        if path.is_empty() {
            "(body)".to_owned()
        } else {
            path
        }
    };
    if let Some(rest) = message.strip_prefix("missing field `") {
        // serde's name is the type's own field name (or the tag's); a
        // custom error could word itself the same around a value, so only
        // a name-like text (no spaces, quotes or punctuation) is kept.
        let name = rest.split('`').next().unwrap_or_default();
        let type_like = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        let name = if name.len() <= 64 && !name.is_empty() && name.bytes().all(type_like) {
            name
        } else {
            "?"
        };
        return ParseError::MissingField {
            path: join(&path, name),
        };
    }
    if message.starts_with("unknown variant `") {
        // The path ends at the field that names the variant: an
        // internally tagged enum's tag (`type`), or an externally tagged
        // one's object.
        return ParseError::UnknownType { path: at(path) };
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        // `invalid type: <the input>, expected <from the type>`: only the
        // part after the last `, expected ` is looked at, and only to pick
        // one of these fixed words.
        let expected = rest.rsplit(", expected ").next().unwrap_or_default();
        return ParseError::WrongType {
            path: at(path),
            expected: json_type(expected),
        };
    }
    let reason = if message.starts_with("invalid length ") {
        "has the wrong number of elements"
    } else if message.starts_with("unknown field `") {
        "has a field this consumer does not accept"
    } else if message.starts_with("duplicate field `") {
        "has a field twice"
    } else {
        // `invalid value: …` (a negative number for a u64, a number over
        // the width) and custom messages (`TryFrom`, `deserialize_with`),
        // whose text may be anything.
        "is out of range or not an accepted value"
    };
    ParseError::InvalidValue {
        path: at(path),
        reason,
    }
}

/// The path of the value a type or value error is about, when the path
/// serde_path_to_error tracked ends above it. Internally tagged and
/// untagged enums buffer their object and read the variant from that
/// buffer, out of the tracker's sight: an error in a variant's field is
/// reported at the enum's object. serde's message describes the value
/// (`integer `7``), so the one leaf under that object it describes is the
/// field at fault; none or several, and the tracked path stands. The
/// description is compared, never copied into the error.
fn locate(tree: &Value, path: &serde_path_to_error::Path, message: &str) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut at = tree;
    for segment in path.iter() {
        at = match segment {
            Segment::Map { key } | Segment::Enum { variant: key } => at.get(key)?,
            Segment::Seq { index } => at.get(index)?,
            Segment::Unknown => return None,
        };
    }
    let wanted: Box<dyn Fn(&Value) -> bool> = if let Some(rest) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
    {
        let (unexpected, _) = rest.rsplit_once(", expected ")?;
        let unexpected = unexpected.to_owned();
        Box::new(move |v| describe(v) == unexpected)
    } else if let Some(rest) = message.strip_prefix("invalid length ") {
        let len: usize = rest.split(',').next()?.parse().ok()?;
        Box::new(move |v| v.as_array().is_some_and(|a| a.len() == len))
    } else if let Some(rest) = message.strip_prefix("unknown field `") {
        // The object that has the field (`deny_unknown_fields`).
        let (name, _) = rest.split_once("`, ")?;
        let name = name.to_owned();
        Box::new(move |v| v.as_object().is_some_and(|o| o.contains_key(&name)))
    } else {
        return None;
    };
    if wanted(at) {
        return None;
    }
    let mut found = Vec::new();
    find(at, String::new(), &*wanted, &mut found);
    match found.as_slice() {
        [only] => Some(join_path(&safe_path(path), only)),
        _ => None,
    }
}

/// A value as serde's `Unexpected` describes it in messages.
fn describe(v: &Value) -> String {
    use serde::de::Unexpected;
    match v {
        Value::Null => Unexpected::Unit.to_string(),
        Value::Bool(b) => Unexpected::Bool(*b).to_string(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u).to_string(),
            (_, Some(i), _) => Unexpected::Signed(i).to_string(),
            (_, _, Some(f)) => Unexpected::Float(f).to_string(),
            _ => String::new(),
        },
        Value::String(s) => Unexpected::Str(s).to_string(),
        Value::Array(_) => Unexpected::Seq.to_string(),
        Value::Object(_) => Unexpected::Map.to_string(),
    }
}

/// The relative paths of the values under `v` (not `v` itself) that
/// `wanted` accepts; two are enough to know the answer is ambiguous.
fn find(v: &Value, here: String, wanted: &dyn Fn(&Value) -> bool, found: &mut Vec<String>) {
    let children: Box<dyn Iterator<Item = (String, &Value)>> = match v {
        Value::Object(map) => Box::new(map.iter().map(|(k, child)| {
            let name = if is_field_name(k) { k.as_str() } else { "?" };
            (join(&here, name), child)
        })),
        Value::Array(items) => Box::new(
            items
                .iter()
                .enumerate()
                .map(|(i, child)| (format!("{here}[{i}]"), child)),
        ),
        _ => return,
    };
    for (path, child) in children {
        if found.len() > 1 {
            return;
        }
        if wanted(child) {
            found.push(path.clone());
        }
        find(child, path, wanted, found);
    }
}

/// `prefix` and a relative path that may start with an index.
fn join_path(prefix: &str, rest: &str) -> String {
    if prefix.is_empty() || rest.starts_with('[') {
        format!("{prefix}{rest}")
    } else {
        format!("{prefix}.{rest}")
    }
}

/// A JSON type for serde's `expected …` text (which comes from the target
/// type, e.g. `u64`, `a string`, `struct Points`), in the words
/// [`ParseError::WrongType`] uses elsewhere.
fn json_type(expected: &str) -> &'static str {
    let width = |p: char| {
        expected.strip_prefix(p).is_some_and(|rest| {
            matches!(
                rest.split(' ').next(),
                Some("8" | "16" | "32" | "64" | "128" | "size")
            )
        })
    };
    if width('u') {
        "a non-negative integer"
    } else if width('i') {
        "an integer"
    } else if expected.starts_with('f')
        && (expected.starts_with("f32") || expected.starts_with("f64"))
    {
        "a number"
    } else if expected.contains("string")
        || expected.contains("character")
        || expected.contains("identifier")
    {
        "a string"
    } else if expected.contains("boolean") {
        "a boolean"
    } else if expected.contains("sequence")
        || expected.contains("tuple")
        || expected.contains("array")
    {
        "an array"
    } else if expected.contains("struct") || expected.contains("map") || expected.contains("enum") {
        "an object"
    } else {
        "of another JSON type"
    }
}

/// serde_path_to_error's path in this module's notation (`data.items[2].sku`),
/// with any key that does not look like a field name as `?`: a struct's
/// keys are its field names, but a map's keys are input.
fn safe_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if is_field_name(key) => out = join(&out, key),
            Segment::Enum { variant } if is_field_name(variant) => out = join(&out, variant),
            Segment::Map { .. } | Segment::Enum { .. } | Segment::Unknown => out = join(&out, "?"),
        }
    }
    out
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A name as Rust and JSON APIs spell fields (`customer_id`, `detail-type`,
/// `eventId`): at most 64 ASCII letters, `_` and `-`. A struct's field and
/// a map's key look the same in the tracked path, and a map's keys are
/// input: ids, amounts, emails and free text nearly always hold a digit, a
/// space, `@` or `.`, so such keys are not written. Digits are refused too,
/// at the cost of `line2` reading `?`.
fn is_field_name(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-')
}

/// `v` as an object, or [`ParseError::NotAnObject`] at `path`.
pub fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ParseError> {
    v.as_object()
        .ok_or_else(|| ParseError::NotAnObject { path: path.into() })
}

/// [`ParseError::InvalidValue`] at `path`.
pub fn invalid(path: impl Into<String>, reason: &'static str) -> ParseError {
    ParseError::InvalidValue {
        path: path.into(),
        reason,
    }
}

/// A required field of `obj` (its path is `prefix` + `key`).
pub fn req<'a>(
    obj: &'a Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<&'a Value, ParseError> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(ParseError::MissingField {
            path: format!("{prefix}{key}"),
        }),
        Some(v) => Ok(v),
    }
}

/// A required string field.
pub fn req_str<'a>(
    obj: &'a Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<&'a str, ParseError> {
    req(obj, prefix, key)?
        .as_str()
        .ok_or_else(|| ParseError::WrongType {
            path: format!("{prefix}{key}"),
            expected: "a string",
        })
}

/// A required identifier field, validated as an [`Id`].
pub fn req_id(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<Id, ParseError> {
    Id::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// A required free-text field, bounded and without control characters.
pub fn req_text(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<String, ParseError> {
    let s = req_str(obj, prefix, key)?;
    check_text(s, MAX_TEXT_BYTES).map_err(|reason| invalid(format!("{prefix}{key}"), reason))?;
    Ok(s.to_owned())
}

/// A required non-negative integer field (no fractions, no strings).
pub fn req_u64(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<u64, ParseError> {
    // `as_u64` is None for negatives, floats (even 2.0) and numbers beyond
    // u64, which is exactly the set we refuse.
    req(obj, prefix, key)?
        .as_u64()
        .ok_or_else(|| ParseError::WrongType {
            path: format!("{prefix}{key}"),
            expected: "a non-negative integer",
        })
}

/// A required positive amount in minor units.
pub fn req_amount_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Amount, ParseError> {
    Amount::try_from(req_u64(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// A required ISO 4217 currency code.
pub fn req_currency_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Currency, ParseError> {
    Currency::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// Is `s` non-empty, at most `max` bytes and free of control characters?
pub fn check_text(s: &str, max: usize) -> Result<(), &'static str> {
    if s.trim().is_empty() {
        Err("must not be empty")
    } else if s.len() > max {
        Err("is too long")
    } else if s.chars().any(char::is_control) {
        Err("must not contain control characters")
    } else {
        Ok(())
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, with plausible field ranges.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 40 {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let num = |r: std::ops::Range<usize>| {
        b[r].iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'))
    };
    if !(digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19))
    {
        return false;
    }
    let (month, day, hour, min, sec) =
        (num(5..7), num(8..10), num(11..13), num(14..16), num(17..19));
    if !((1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && min < 60 && sec <= 60)
    {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::HashMap;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "type")]
    enum Loyalty {
        PointsEarned {
            customer_id: String,
            points: u64,
        },
        PointsRedeemed {
            customer_id: String,
            points: u32,
            lines: Vec<Line>,
        },
        Tagged {
            tags: HashMap<String, u8>,
        },
        Gifted {
            to: Recipient,
        },
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        sku: String,
        pair: (u8, u8),
        #[serde(default)]
        flag: bool,
    }

    /// A refusal by the adopter's own validation, whose message quotes
    /// the value (as a careless `TryFrom` error would).
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(try_from = "String")]
    struct Recipient(String);

    impl TryFrom<String> for Recipient {
        type Error = String;
        fn try_from(s: String) -> Result<Self, String> {
            Err(format!("{s} is not a recipient"))
        }
    }

    /// One table: each kind of serde error, the variant and path it
    /// becomes.
    #[test]
    fn serde_errors_map_to_their_kind_and_path() {
        let cases: [(&str, ParseError); 14] = [
            (
                r#"{"type": "PointsEarned", "points": 1}"#,
                ParseError::MissingField {
                    path: "customer_id".into(),
                },
            ),
            (
                r#"{"customer_id": "c", "points": 1}"#,
                ParseError::MissingField {
                    path: "type".into(),
                },
            ),
            (
                r#"{"type": "PointsStolen"}"#,
                ParseError::UnknownType {
                    path: "type".into(),
                },
            ),
            (
                r#"{"type": "PointsEarned", "customer_id": 7, "points": 1}"#,
                ParseError::WrongType {
                    path: "customer_id".into(),
                    expected: "a string",
                },
            ),
            (
                r#"{"type": "PointsEarned", "customer_id": "c", "points": "1"}"#,
                ParseError::WrongType {
                    path: "points".into(),
                    expected: "a non-negative integer",
                },
            ),
            (
                r#"{"type": "PointsEarned", "customer_id": "c", "points": 1.5}"#,
                ParseError::WrongType {
                    path: "points".into(),
                    expected: "a non-negative integer",
                },
            ),
            (
                r#"{"type": "PointsEarned", "customer_id": "c", "points": -1}"#,
                ParseError::InvalidValue {
                    path: "points".into(),
                    reason: "is out of range or not an accepted value",
                },
            ),
            (
                r#"{"type": "PointsRedeemed", "customer_id": "c", "points": 5000000000, "lines": []}"#,
                ParseError::InvalidValue {
                    path: "points".into(),
                    reason: "is out of range or not an accepted value",
                },
            ),
            (
                r#"{"type": "PointsRedeemed", "customer_id": "c", "points": 1,
                    "lines": [{"sku": "a", "pair": [1, 2]}, {"sku": "b", "pair": [1]}]}"#,
                ParseError::InvalidValue {
                    path: "lines[1].pair".into(),
                    reason: "has the wrong number of elements",
                },
            ),
            (
                r#"{"type": "PointsRedeemed", "customer_id": "c", "points": 1,
                    "lines": [{"sku": "a", "pair": [1, 2], "extra": 1}]}"#,
                ParseError::InvalidValue {
                    path: "lines[0]".into(),
                    reason: "has a field this consumer does not accept",
                },
            ),
            (
                r#"{"type": "PointsRedeemed", "customer_id": "c", "points": 1,
                    "lines": [{"sku": "a", "pair": [1, 2], "flag": "yes"}]}"#,
                ParseError::WrongType {
                    path: "lines[0].flag".into(),
                    expected: "a boolean",
                },
            ),
            // A custom refusal says nothing to locate it by: inside an
            // internally tagged enum's variant it is reported at the
            // enum's object (see the plain struct below).
            (
                r#"{"type": "Gifted", "to": "someone"}"#,
                ParseError::InvalidValue {
                    path: "(body)".into(),
                    reason: "is out of range or not an accepted value",
                },
            ),
            (
                r#"{"type": "Tagged", "tags": {"gold": 1, "4111 1111": 300}}"#,
                ParseError::InvalidValue {
                    path: "tags.?".into(),
                    reason: "is out of range or not an accepted value",
                },
            ),
            // serde also reads an internally tagged enum from an array
            // whose first element is the tag.
            (
                r#"[1, 2]"#,
                ParseError::WrongType {
                    path: "[0]".into(),
                    expected: "a string",
                },
            ),
        ];
        for (body, want) in cases {
            assert_eq!(
                from_json::<Loyalty>(Some(body)),
                Err(want.clone()),
                "{body}"
            );
            // The already-parsed route says the same.
            let value: Value = serde_json::from_str(body).unwrap();
            assert_eq!(from_value::<Loyalty>(&value), Err(want), "{body}");
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Gift {
            gifts: Vec<Recipient>,
        }
        assert_eq!(
            from_json::<Gift>(Some(r#"{"gifts": ["someone"]}"#)).map(|_| ()),
            Err(ParseError::InvalidValue {
                path: "gifts[0]".into(),
                reason: "is out of range or not an accepted value",
            })
        );
        assert_eq!(
            from_json::<Gift>(Some("7")).map(|_| ()),
            Err(ParseError::WrongType {
                path: "(body)".into(),
                expected: "an object",
            })
        );
        for broken in [
            r#"{"type": "#,
            r#"{"type": "PointsEarned", "customer_id": "c", "points": 1} x"#,
            "",
        ] {
            assert!(
                matches!(
                    from_json::<Loyalty>(Some(broken)),
                    Err(ParseError::NotJson(_))
                ),
                "{broken}"
            );
        }
        assert_eq!(from_json::<Loyalty>(None), Err(ParseError::MissingBody));
        let huge = " ".repeat(MAX_BODY_BYTES + 1);
        assert!(matches!(
            from_json::<Loyalty>(Some(&huge)),
            Err(ParseError::TooLarge { .. })
        ));
    }

    #[test]
    fn serde_route_reads_events_plain_and_in_envelopes() {
        let event = r#"{"type": "PointsEarned", "customer_id": "c-1", "points": 100}"#;
        let want = Loyalty::PointsEarned {
            customer_id: "c-1".into(),
            points: 100,
        };
        assert_eq!(
            from_json::<Loyalty>(Some(event)),
            Ok(Loyalty::PointsEarned {
                customer_id: "c-1".into(),
                points: 100,
            })
        );
        let sns = serde_json::json!({
            "Type": "Notification", "TopicArn": "arn:aws:sns:eu-west-1:1:t",
            "MessageId": "m", "Message": event,
        })
        .to_string();
        assert_eq!(from_json_wrapped::<Loyalty>(Some(&sns)), Ok(want));
        let bridge = serde_json::json!({
            "version": "0", "id": "i", "detail-type": "d", "source": "s",
            "account": "1", "time": "2026-11-29T10:15:00Z", "region": "eu-west-1",
            "detail": {"type": "PointsStolen"},
        })
        .to_string();
        assert_eq!(
            from_json_wrapped::<Loyalty>(Some(&bridge)),
            Err(ParseError::UnknownType {
                path: "type".into()
            })
        );
    }

    /// No error's text holds a value from the body: a secret planted in
    /// every value position of bodies that fail in every way never shows.
    #[test]
    fn no_serde_error_echoes_a_value() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Plain {
            #[serde(rename = "type")]
            kind: Option<String>,
            tags: Option<HashMap<String, u8>>,
            lines: Option<Vec<Line>>,
            points: Option<u64>,
        }
        const SECRET: &str = "s3cr3t-4111111111111111";
        let values = [
            format!("\"{SECRET}\""),
            format!("[\"{SECRET}\"]"),
            format!("{{\"{SECRET}\": \"{SECRET}\"}}"),
            "-4111111111111111".to_owned(),
            "4111111111111111.5".to_owned(),
            "41111111111111111111111".to_owned(),
        ];
        let fields = [
            "type",
            "customer_id",
            "points",
            "lines",
            "tags",
            "to",
            "sku",
            "pair",
        ];
        let mut seen = 0;
        for value in &values {
            for field in fields {
                for body in [
                    format!(r#"{{"{field}": {value}}}"#),
                    format!(
                        r#"{{"type": "PointsEarned", "customer_id": "c", "{field}": {value}}}"#
                    ),
                    format!(
                        r#"{{"type": "PointsRedeemed", "customer_id": "c", "points": 1, "lines": [{{"sku": "a", "pair": [1, 2], "{field}": {value}}}]}}"#
                    ),
                    // A map's keys are input too: one that is not
                    // name-shaped is written `?` (`from_json`'s doc).
                    format!(
                        r#"{{"type": "Tagged", "tags": {{"{SECRET} key": {value}, "gold": {value}}}}}"#
                    ),
                    format!(r#"{{"type": "Gifted", "{field}": {value}}}"#),
                    format!(r#"{{"tags": {{"{SECRET} key": {value}}}}}"#),
                    format!(r#"{{"type": {value}, "{field}": {value}"#),
                ] {
                    // The enum (whose variants serde reads out of the
                    // path tracker's sight) and a plain struct (whose
                    // tracked path holds a map's keys).
                    let errors = [
                        from_json::<Loyalty>(Some(&body)).err(),
                        from_json::<Plain>(Some(&body)).err(),
                    ];
                    for err in errors.into_iter().flatten() {
                        seen += 1;
                        let text = format!("{err} {err:?}");
                        assert!(
                            !text.contains("s3cr3t") && !text.contains("4111111111111111"),
                            "{body} -> {text}"
                        );
                    }
                }
            }
        }
        assert!(seen > 300, "{seen} errors");
    }

    #[test]
    fn rfc3339_shapes() {
        for ok in [
            "2026-11-29T10:15:00Z",
            "2026-11-29T10:15:00.123Z",
            "2026-11-29T10:15:00+05:30",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2026-13-29T10:15:00Z",
            "2026-11-29 10:15:00Z",
            "2026-11-29T10:15:00",
            "2026-11-29T10:15:00.Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
