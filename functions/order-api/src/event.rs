//! The HTTP contract of `POST /orders`: the `Idempotency-Key` header, the
//! content type, the body (validated exactly as the order consumer
//! validates an OrderPlaced's `data`), and who the caller is.
//!
//! Every error names the header or the field, never its value: requests
//! carry customer data, and these errors go back to the client and into the
//! logs.

use aws_lambda_events::apigw::ApiGatewayRequestAuthorizer;
use serde_json::{Map, Value};
use thiserror::Error;

pub use lambda_idempotency::wire::ParseError;
use lambda_idempotency::wire::{Amount, Currency, Id, req_amount_at, req_currency_at, req_id};

/// Longest accepted idempotency key, in characters (Stripe's limit).
pub const MAX_KEY_CHARS: usize = 255;

/// Largest accepted request body. An order is three short fields: anything
/// near this size is not an order, and refusing it before parsing bounds
/// the work a hostile client can cause.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Why the `Idempotency-Key` header cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum KeyError {
    /// No such header. Clients (curl among them) and proxies drop a header
    /// whose value is empty, so an empty key usually arrives as none: say so.
    #[error(
        "the Idempotency-Key header is required, and none arrived (a header with an empty value is often dropped on the way)"
    )]
    Missing,
    /// The header is sent more than once, or its value is a list (a comma
    /// outside a quoted key: how API Gateway joins a repeated header).
    #[error("the Idempotency-Key header must be sent once, with one key")]
    Repeated,
    /// The key is empty, too long, or has characters outside printable
    /// ASCII (or a broken quoted string); `reason` says which.
    #[error("the Idempotency-Key header is malformed: {reason}")]
    Malformed {
        /// What a valid key looks like.
        reason: &'static str,
    },
}

/// Read the key from the header's raw bytes: either the IETF draft's
/// structured-field string (`"abc"`, with `\"` and `\\` escapes) or a bare
/// token (`abc`). Both spell the same key, so a client that switches from
/// one form to the other keeps its key. Surrounding spaces and tabs are
/// not part of the value (RFC 9110 OWS).
///
/// The value must be exactly one key. API Gateway's HTTP API joins a
/// header sent twice into one value with commas (`k1,k2`, `"k1", "k2"`),
/// so a comma outside a quoted key is [`KeyError::Repeated`]: read as one
/// key, two different retries' keys would place an order neither asked for
/// under a key neither sent. A bare key therefore never contains a comma.
pub fn parse_key(raw: &[u8]) -> Result<String, KeyError> {
    let malformed = |reason| Err(KeyError::Malformed { reason });
    let raw = raw.trim_ascii();
    let key = if let Some(inner) = raw.strip_prefix(b"\"") {
        let mut key = Vec::with_capacity(inner.len());
        let mut bytes = inner.iter();
        let mut closed = false;
        while let Some(&b) = bytes.next() {
            match b {
                b'\\' => match bytes.next() {
                    Some(&e @ (b'"' | b'\\')) => key.push(e),
                    _ => return malformed("a quoted key may only escape \" and \\"),
                },
                b'"' => {
                    closed = true;
                    break;
                }
                0x20..=0x7e => key.push(b),
                _ => return malformed("must be printable ASCII characters"),
            }
        }
        if !closed {
            return malformed("a quoted key must end with its closing quote");
        }
        match bytes.as_slice().trim_ascii_start().first() {
            None => {}
            Some(b',') => return Err(KeyError::Repeated),
            Some(_) => return malformed("a quoted key must end with its closing quote"),
        }
        key
    } else {
        if raw.contains(&b',') {
            return Err(KeyError::Repeated);
        }
        if raw.iter().any(|b| !(0x21..=0x7e).contains(b)) {
            return malformed(
                "must be printable ASCII characters without spaces (or a quoted string)",
            );
        }
        raw.to_vec()
    };
    if key.is_empty() {
        return malformed("must not be empty");
    }
    if key.len() > MAX_KEY_CHARS {
        return malformed("must be at most 255 characters");
    }
    // Only bytes 0x20..=0x7e were kept: ASCII, so valid UTF-8.
    String::from_utf8(key).or(malformed("must be printable ASCII characters"))
}

/// Is `content_type` JSON? `application/json`, any case, with or without
/// parameters (`; charset=utf-8`).
pub fn is_json(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|ct| {
        let media = ct.split(|b| *b == b';').next().unwrap_or_default();
        media.trim_ascii().eq_ignore_ascii_case(b"application/json")
    })
}

/// A validated `POST /orders` body: the data of the OrderPlaced it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    /// `customerId`, an [`Id`] as in OrderPlaced.
    pub customer_id: Id,
    /// `amount`, in minor units.
    pub amount: Amount,
    /// `currency`, ISO 4217.
    pub currency: Currency,
}

/// Parse and validate the body. Returns the order and the JSON value it was
/// read from (the fingerprint is taken of the whole value, so that any
/// change to what the client sent is a different request).
pub fn parse_place_order(body: &[u8]) -> Result<(PlaceOrder, Value), ParseError> {
    if body.is_empty() {
        return Err(ParseError::MissingBody);
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(ParseError::TooLarge {
            size: body.len(),
            max: MAX_BODY_BYTES,
        });
    }
    // serde_json's message gives the position, never the input; its
    // recursion limit turns a deeply nested body into an error, not a
    // stack overflow.
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let obj: &Map<String, Value> = value.as_object().ok_or(ParseError::NotAnObject {
        path: "(body)".into(),
    })?;
    // The same checks, and so the same messages, as OrderPlaced's `data`
    // in the order consumer.
    let order = PlaceOrder {
        customer_id: req_id(obj, "", "customerId")?,
        amount: req_amount_at(obj, "", "amount")?,
        currency: req_currency_at(obj, "", "currency")?,
    };
    Ok((order, value))
}

/// Which authorizer the function expects in front of it (`API_AUTH`), and
/// so where it reads the caller's principal. Read once per cold start;
/// never guessed from the request, so that a route left without its
/// authorizer is refused (403) instead of sharing one anonymous scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// `iam` (the default): IAM authorization (SigV4) on the routes; the
    /// principal is the caller's IAM identity (`authorizer.iam`).
    Iam,
    /// `jwt`: an HTTP API JWT authorizer; the principal is the token's
    /// `iss` and `sub` (`authorizer.jwt.claims`).
    Jwt,
    /// `lambda`: a Lambda (REQUEST) authorizer; the principal is the
    /// string [`LAMBDA_PRINCIPAL_KEY`] of the context it returns
    /// (`authorizer.lambda`).
    Lambda,
    /// `none`: no authorizer; every caller is one anonymous principal.
    /// Only for the local loop (`make local`, where cargo lambda serves
    /// the API without API Gateway): the template does not allow it.
    None,
}

/// The key of a Lambda authorizer's context that names the principal.
pub const LAMBDA_PRINCIPAL_KEY: &str = "principalId";

impl AuthMode {
    /// Parse `API_AUTH`'s value (`iam`, `jwt`, `lambda`, `none`; any case).
    pub fn parse(raw: &str) -> Option<AuthMode> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "iam" => Some(AuthMode::Iam),
            "jwt" => Some(AuthMode::Jwt),
            "lambda" => Some(AuthMode::Lambda),
            "none" => Some(AuthMode::None),
            _ => None,
        }
    }

    /// Its `API_AUTH` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Iam => "iam",
            AuthMode::Jwt => "jwt",
            AuthMode::Lambda => "lambda",
            AuthMode::None => "none",
        }
    }
}

/// An authorizer is configured but the request carries no principal it
/// would have set: the route is not behind it (or behind another kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("no {0} principal in the request: the route is not behind the authorizer API_AUTH names")]
pub struct NoPrincipal(pub &'static str);

/// Who the caller is: idempotency keys are scoped by it, so that two
/// callers who pick the same key never see each other's responses, and an
/// order is shown only to the caller who placed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A JWT authorizer's principal: the token's issuer and subject.
    Jwt {
        /// `iss` (empty if the token has none).
        issuer: String,
        /// `sub`.
        subject: String,
    },
    /// An IAM-authorized caller: its user or role ARN (an assumed role
    /// without its session name, see [`iam_principal`]), or a Cognito
    /// identity pool's identity.
    Iam(String),
    /// A Lambda authorizer's principal ([`LAMBDA_PRINCIPAL_KEY`]).
    Lambda(String),
    /// `API_AUTH=none` (the local loop): one scope shared by every caller.
    Anonymous,
}

impl Scope {
    /// The caller behind an HTTP API request, read from the authorizer
    /// `mode` names and from no other: a JWT claim does not count under
    /// `iam`, nor an IAM identity under `jwt`. Fails closed: under a
    /// configured authorizer, no principal is [`NoPrincipal`], never the
    /// anonymous scope.
    pub fn of(
        mode: AuthMode,
        authorizer: Option<&ApiGatewayRequestAuthorizer>,
    ) -> Result<Scope, NoPrincipal> {
        let nonempty = |s: &&String| !s.trim().is_empty();
        match mode {
            AuthMode::None => Ok(Scope::Anonymous),
            AuthMode::Jwt => authorizer
                .and_then(|a| a.jwt.as_ref())
                .and_then(|jwt| {
                    let sub = jwt.claims.get("sub").filter(nonempty)?;
                    Some(Scope::Jwt {
                        issuer: jwt.claims.get("iss").cloned().unwrap_or_default(),
                        subject: sub.clone(),
                    })
                })
                .ok_or(NoPrincipal("JWT")),
            AuthMode::Iam => authorizer
                .and_then(|a| a.iam.as_ref())
                .and_then(|iam| {
                    // Cognito identity pool callers all assume the pool's
                    // role: the identity, not the role, is the caller.
                    if let Some(cognito) = &iam.cognito_identity
                        && let (Some(pool), Some(id)) = (
                            cognito.identity_pool_id.as_ref().filter(nonempty),
                            cognito.identity_id.as_ref().filter(nonempty),
                        )
                    {
                        return Some(Scope::Iam(format!("cognito:{pool}:{id}")));
                    }
                    let arn = iam.user_arn.as_ref().filter(nonempty)?;
                    Some(Scope::Iam(iam_principal(arn)))
                })
                .ok_or(NoPrincipal("IAM")),
            AuthMode::Lambda => authorizer
                .and_then(|a| a.fields.get(LAMBDA_PRINCIPAL_KEY))
                .and_then(|v| v.as_str())
                .filter(|s| !s.trim().is_empty())
                .map(|s| Scope::Lambda(s.to_owned()))
                .ok_or(NoPrincipal("Lambda authorizer")),
        }
    }

    /// Length-prefixed parts, so that no two scopes (and keys) can be
    /// spelled alike.
    pub fn parts(&self) -> Vec<&str> {
        match self {
            Scope::Jwt { issuer, subject } => vec!["jwt", issuer, subject],
            Scope::Iam(who) => vec!["iam", who],
            Scope::Lambda(who) => vec!["lambda", who],
            Scope::Anonymous => vec!["anonymous"],
        }
    }
}

/// The IAM principal of a caller's ARN. An assumed role's ARN
/// (`arn:aws:sts::123456789012:assumed-role/Role/session`) names its
/// session, which the caller picks and which changes when credentials are
/// refreshed (an ECS task, a new STS session): scoped by session, a retry
/// after a refresh would not find its key and would place a second order.
/// So the principal is the role (`.../assumed-role/Role`), as IAM policies
/// see it; any other ARN (a user, root) is the principal as it is.
pub fn iam_principal(arn: &str) -> String {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("sts"), Some(_region), Some(_account), Some(res)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return arn.to_owned();
    };
    match res
        .strip_prefix("assumed-role/")
        .and_then(|r| r.split_once('/'))
    {
        Some((role, _session)) => {
            let prefix_len = arn.len() - res.len();
            format!("{}assumed-role/{role}", &arn[..prefix_len])
        }
        None => arn.to_owned(),
    }
}

/// The order id in a `GET /orders/{orderId}` path segment, percent-decoded
/// exactly once (`ord%201` is `ord 1`; `ord%25201` is `ord%201`). `None`
/// when the segment is not a valid encoding (a `%` without two hex digits)
/// or does not decode to UTF-8: no order has such an id.
pub fn decode_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            // Two hex digits, nothing else (from_str_radix alone would
            // take a sign: `%+1`).
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_quoted_or_bare() {
        let long = "k".repeat(255);
        let too_long = "k".repeat(256);
        let quoted_long = format!("\"{long}\"");
        let cases: &[(&[u8], Result<&str, ()>)] = &[
            (b"abc", Ok("abc")),
            (b"\"abc\"", Ok("abc")),
            (b"  abc\t", Ok("abc")),
            (b"\"a b\"", Ok("a b")),
            (br#""a\"b\\c""#, Ok(r#"a"b\c"#)),
            (
                b"8e03978e-40d5-43e8-bc93-6894a57f9324",
                Ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
            ),
            (long.as_bytes(), Ok(&long)),
            (quoted_long.as_bytes(), Ok(&long)),
            (too_long.as_bytes(), Err(())),
            (b"", Err(())),
            (b"\"\"", Err(())),
            (b"   ", Err(())),
            (b"a b", Err(())),
            (b"\"abc", Err(())),
            (b"\"abc\"x", Err(())),
            (b"\"a\\nb\"", Err(())),
            (b"a\x00b", Err(())),
            (b"a\x7fb", Err(())),
            ("ключ".as_bytes(), Err(())),
            ("\"ключ\"".as_bytes(), Err(())),
            (b"\"a,b\"", Ok("a,b")),
        ];
        for (raw, want) in cases {
            let got = parse_key(raw);
            match want {
                Ok(k) => assert_eq!(got.as_deref(), Ok(*k), "{:?}", String::from_utf8_lossy(raw)),
                Err(()) => assert!(
                    matches!(got, Err(KeyError::Malformed { .. })),
                    "{:?} -> {got:?}",
                    String::from_utf8_lossy(raw)
                ),
            }
        }
    }

    #[test]
    fn a_value_holding_more_than_one_key_is_repeated() {
        // How API Gateway's HTTP API joins a header sent twice, and the
        // same written by hand.
        for raw in [
            &b"k1,k2"[..],
            b"k1, k2",
            b"k1,k1",
            b"\"k1\",\"k2\"",
            b"\"k1\", \"k2\"",
            b"\"k1\" ,k2",
            b"k1,\"k2\"",
            b"k1,",
            b",k1",
            b",",
        ] {
            assert_eq!(
                parse_key(raw),
                Err(KeyError::Repeated),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        assert_eq!(
            parse_key(b"\"k1\";x"),
            Err(KeyError::Malformed {
                reason: "a quoted key must end with its closing quote"
            })
        );
    }

    fn authorizer(v: serde_json::Value) -> ApiGatewayRequestAuthorizer {
        serde_json::from_value(v).expect("an authorizer block")
    }

    #[test]
    fn the_principal_comes_from_the_configured_authorizer_only() {
        let iam = |arn: &str| {
            authorizer(serde_json::json!({"iam": {"userArn": arn, "callerId": "AIDA"}}))
        };
        let jwt = |iss: &str, sub: &str| {
            authorizer(
                serde_json::json!({"jwt": {"claims": {"iss": iss, "sub": sub}, "scopes": null}}),
            )
        };
        let lambda = |v: serde_json::Value| authorizer(serde_json::json!({"lambda": v}));
        let cognito = authorizer(serde_json::json!({"iam": {
            "userArn": "arn:aws:sts::1:assumed-role/Pool_Auth_Role/CognitoIdentityCredentials",
            "cognitoIdentity": {"amr": ["authenticated"], "identityId": "us-east-1:abc",
                                "identityPoolId": "us-east-1:pool"}}}));
        let alice_iam = iam("arn:aws:iam::1:user/alice");
        let alice_jwt = jwt("https://i", "alice");
        let alice_lambda = lambda(serde_json::json!({"principalId": "alice", "other": 1}));
        let ok = |s: Scope| Ok::<_, NoPrincipal>(s);
        let cases: Vec<(
            AuthMode,
            Option<ApiGatewayRequestAuthorizer>,
            Result<Scope, NoPrincipal>,
        )> = vec![
            (
                AuthMode::Iam,
                Some(alice_iam.clone()),
                ok(Scope::Iam("arn:aws:iam::1:user/alice".into())),
            ),
            (
                AuthMode::Iam,
                Some(cognito.clone()),
                ok(Scope::Iam("cognito:us-east-1:pool:us-east-1:abc".into())),
            ),
            (AuthMode::Iam, None, Err(NoPrincipal("IAM"))),
            (
                AuthMode::Iam,
                Some(alice_jwt.clone()),
                Err(NoPrincipal("IAM")),
            ),
            (
                AuthMode::Iam,
                Some(alice_lambda.clone()),
                Err(NoPrincipal("IAM")),
            ),
            (AuthMode::Iam, Some(iam("")), Err(NoPrincipal("IAM"))),
            (
                AuthMode::Jwt,
                Some(alice_jwt.clone()),
                ok(Scope::Jwt {
                    issuer: "https://i".into(),
                    subject: "alice".into(),
                }),
            ),
            (AuthMode::Jwt, None, Err(NoPrincipal("JWT"))),
            (
                AuthMode::Jwt,
                Some(alice_iam.clone()),
                Err(NoPrincipal("JWT")),
            ),
            (
                AuthMode::Jwt,
                Some(jwt("https://i", "")),
                Err(NoPrincipal("JWT")),
            ),
            (
                AuthMode::Lambda,
                Some(alice_lambda.clone()),
                ok(Scope::Lambda("alice".into())),
            ),
            (
                AuthMode::Lambda,
                None,
                Err(NoPrincipal("Lambda authorizer")),
            ),
            (
                AuthMode::Lambda,
                Some(alice_iam.clone()),
                Err(NoPrincipal("Lambda authorizer")),
            ),
            (
                AuthMode::Lambda,
                Some(lambda(serde_json::json!({"principalId": 7}))),
                Err(NoPrincipal("Lambda authorizer")),
            ),
            (
                AuthMode::Lambda,
                Some(lambda(serde_json::json!({"sub": "alice"}))),
                Err(NoPrincipal("Lambda authorizer")),
            ),
            (AuthMode::None, None, ok(Scope::Anonymous)),
            (
                AuthMode::None,
                Some(alice_iam.clone()),
                ok(Scope::Anonymous),
            ),
        ];
        for (mode, auth, want) in cases {
            assert_eq!(Scope::of(mode, auth.as_ref()), want, "{mode:?} {auth:?}");
        }
    }

    #[test]
    fn an_assumed_role_is_its_role_whatever_the_session() {
        for (arn, want) in [
            (
                "arn:aws:iam::123456789012:user/alice",
                "arn:aws:iam::123456789012:user/alice",
            ),
            (
                "arn:aws:iam::123456789012:root",
                "arn:aws:iam::123456789012:root",
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/Ordering/i-0abc",
                "arn:aws:sts::123456789012:assumed-role/Ordering",
            ),
            (
                "arn:aws-cn:sts::123456789012:assumed-role/Ordering/s/with/slashes",
                "arn:aws-cn:sts::123456789012:assumed-role/Ordering",
            ),
            (
                "arn:aws:sts::123456789012:federated-user/bob",
                "arn:aws:sts::123456789012:federated-user/bob",
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/NoSession",
                "arn:aws:sts::123456789012:assumed-role/NoSession",
            ),
            ("not-an-arn", "not-an-arn"),
        ] {
            assert_eq!(iam_principal(arn), want, "{arn}");
        }
    }

    #[test]
    fn auth_modes() {
        for (raw, want) in [
            ("iam", Some(AuthMode::Iam)),
            (" JWT ", Some(AuthMode::Jwt)),
            ("lambda", Some(AuthMode::Lambda)),
            ("none", Some(AuthMode::None)),
            ("", None),
            ("anonymous", None),
            ("aws_iam", None),
        ] {
            assert_eq!(AuthMode::parse(raw), want, "{raw}");
            if let Some(m) = want {
                assert_eq!(AuthMode::parse(m.as_str()), Some(m));
            }
        }
    }

    #[test]
    fn path_segments_are_decoded_once() {
        for (seg, want) in [
            ("ord_1", Some("ord_1")),
            ("ord%201", Some("ord 1")),
            ("ord%25201", Some("ord%201")),
            ("%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7", Some("заказ")),
            ("%d0%b7", Some("з")),
            ("a%2Fb", Some("a/b")),
            ("", Some("")),
            ("ord%2", None),
            ("ord%", None),
            ("ord%zz", None),
            ("ord%+1", None),
            ("%FF", None),
            ("%D0", None),
        ] {
            assert_eq!(decode_segment(seg).as_deref(), want, "{seg}");
        }
    }

    #[test]
    fn content_types() {
        for (ct, ok) in [
            (Some("application/json"), true),
            (Some("Application/JSON; charset=utf-8"), true),
            (Some(" application/json ;"), true),
            (Some("text/plain"), false),
            (Some("application/jsonx"), false),
            (Some("application/x-www-form-urlencoded"), false),
            (None, false),
        ] {
            assert_eq!(is_json(ct.map(str::as_bytes)), ok, "{ct:?}");
        }
    }

    #[test]
    fn bodies_are_validated_as_order_placed_data_without_echoing_values() {
        let ok = br#"{"customerId":"c-1","amount":150000,"currency":"INR"}"#;
        let (order, _) = parse_place_order(ok).expect("valid");
        assert_eq!(order.amount.get(), 150000);
        let cases: &[(&str, &str)] = &[
            ("", "no body"),
            ("secret-not-json", "not valid JSON"),
            ("[\"secret\"]", "must be a JSON object"),
            (r#"{"amount":1,"currency":"INR"}"#, "`customerId`"),
            (
                r#"{"customerId":"secret","amount":1.5,"currency":"INR"}"#,
                "`amount` must be",
            ),
            (
                r#"{"customerId":"secret","amount":0,"currency":"INR"}"#,
                "`amount` is invalid",
            ),
            (
                r#"{"customerId":"secret","amount":"12","currency":"INR"}"#,
                "`amount` must be",
            ),
            (
                r#"{"customerId":"secret","amount":1,"currency":"inr"}"#,
                "`currency` is invalid",
            ),
            (
                r#"{"customerId":"","amount":1,"currency":"INR"}"#,
                "`customerId` is invalid",
            ),
        ];
        for (body, want) in cases {
            let err = parse_place_order(body.as_bytes())
                .expect_err(body)
                .to_string();
            assert!(err.contains(want), "{body}: {err}");
            assert!(!err.contains("secret") && !err.contains("inr"), "{err}");
        }
        let nested = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
        assert!(matches!(
            parse_place_order(nested.as_bytes()),
            Err(ParseError::NotJson(_))
        ));
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert!(matches!(
            parse_place_order(&huge),
            Err(ParseError::TooLarge { .. })
        ));
    }
}
