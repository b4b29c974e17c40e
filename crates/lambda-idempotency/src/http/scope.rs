//! Who calls: the principal of the authorizer an API is configured for
//! ([`AuthMode`]), read from an API Gateway request's context, and the
//! record key of (caller, key) that scopes every idempotency key by it.

use lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer;
use lambda_http::{Request, RequestExt};
use thiserror::Error;

use crate::idempotency::hashed_key;

/// Which authorizer the function expects in front of it (read from your
/// configuration, e.g. an `API_AUTH` variable), and so where it reads the caller's
/// principal. Configured once; never guessed from the request, so that a
/// route left without its authorizer is refused (403) instead of sharing
/// one anonymous scope.
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
    /// Only for a local loop (cargo lambda serving the API without API
    /// Gateway): a deployed API should never run with it.
    None,
}

/// Under [`AuthMode::Iam`], whose key space the sessions of an assumed
/// role share. An assumed role's ARN
/// (`arn:aws:sts::123456789012:assumed-role/Role/session`) names its
/// session. Many people may assume one role (IAM Identity Center's
/// `AWSReservedSSO_*` roles, a SAML-federated role: the session name is
/// the person): scoped by the role, alice's answer would replay to bob,
/// bob would learn from a 422 that alice used a key, and an API that shows
/// a caller's own resources by scope would show alice's to bob. So each
/// session is its own caller unless a role is named as a machine's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RoleSessions {
    /// Each session is its own caller (the default, and the safe one).
    /// A caller that picks a new session name when its credentials are
    /// refreshed (the AWS CLI's and SDKs' `role_arn` profiles name it
    /// after the time) finds no key from before the refresh: a retry
    /// across a refresh runs again.
    #[default]
    Apart,
    /// The sessions of these roles (by name, as in the ARN, e.g.
    /// `OrderingService`) share their role's key space: roles only
    /// machines assume, whose session name is a label (a task, an
    /// instance, a function). Never name a role people assume; IAM
    /// Identity Center's (`AWSReservedSSO_*`) stay apart even if named.
    Shared(Vec<String>),
}

impl RoleSessions {
    /// Do the sessions of role `role` (its name) share its key space?
    fn shares(&self, role: &str) -> bool {
        match self {
            RoleSessions::Apart => false,
            RoleSessions::Shared(roles) => {
                !role.starts_with(IDENTITY_CENTER_ROLE_PREFIX) && roles.iter().any(|r| r == role)
            }
        }
    }
}

/// The name prefix of the roles IAM Identity Center makes for its
/// permission sets: a person behind every session.
const IDENTITY_CENTER_ROLE_PREFIX: &str = "AWSReservedSSO_";

/// The key of a Lambda authorizer's context that names the principal.
pub const LAMBDA_PRINCIPAL_KEY: &str = "principalId";

impl AuthMode {
    /// Parse a setting's value (`iam`, `jwt`, `lambda`, `none`; any case).
    pub fn parse(raw: &str) -> Option<AuthMode> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "iam" => Some(AuthMode::Iam),
            "jwt" => Some(AuthMode::Jwt),
            "lambda" => Some(AuthMode::Lambda),
            "none" => Some(AuthMode::None),
            _ => None,
        }
    }

    /// Its spelling, as [`AuthMode::parse`] reads it.
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
#[error("no {0} principal in the request: the route is not behind the configured authorizer")]
pub struct NoPrincipal(pub &'static str);

/// Who the caller is: idempotency keys are scoped by it, so that two
/// callers who pick the same key never see each other's responses. The
/// layer puts it in the request's extensions for the inner service (to show
/// a resource only to the scope that made it, say).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A JWT authorizer's principal: the token's issuer and subject.
    Jwt {
        /// `iss` (empty if the token has none).
        issuer: String,
        /// `sub`.
        subject: String,
    },
    /// An IAM-authorized caller: its user ARN, its assumed role's session
    /// ARN (or the role's, for a role whose sessions are shared: see
    /// [`iam_principal`]), or a Cognito identity pool's identity.
    Iam(String),
    /// A Lambda authorizer's principal ([`LAMBDA_PRINCIPAL_KEY`]).
    Lambda(String),
    /// [`AuthMode::None`] (a local loop): one scope shared by every caller.
    Anonymous,
}

impl Scope {
    /// The caller behind an HTTP API request, read from the authorizer
    /// `mode` names and from no other: a JWT claim does not count under
    /// `iam`, nor an IAM identity under `jwt`. Fails closed: under a
    /// configured authorizer, no principal is [`NoPrincipal`], never the
    /// anonymous scope. `sessions`: under `iam`, which assumed roles'
    /// sessions share one caller.
    pub fn of(
        mode: AuthMode,
        sessions: &RoleSessions,
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
                    Some(Scope::Iam(iam_principal(arn, sessions)))
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

/// The IAM principal of a caller's ARN: an assumed role's session ARN as
/// it is (each session its own caller), unless `sessions` shares that
/// role's sessions ([`RoleSessions`]): then the role
/// (`.../assumed-role/Role`), as IAM policies see it. Any other ARN (a
/// user, root, a federated user) is the principal as it is.
pub fn iam_principal(arn: &str, sessions: &RoleSessions) -> String {
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
        Some((role, _session)) if sessions.shares(role) => {
            let prefix_len = arn.len() - res.len();
            format!("{}assumed-role/{role}", &arn[..prefix_len])
        }
        _ => arn.to_owned(),
    }
}

impl Scope {
    /// [`Scope::of`] the authorizer in `req`'s API Gateway context.
    pub fn of_request(
        mode: AuthMode,
        sessions: &RoleSessions,
        req: &Request,
    ) -> Result<Scope, NoPrincipal> {
        Scope::of(
            mode,
            sessions,
            req.request_context_ref().and_then(|c| c.authorizer()),
        )
    }
}

/// The idempotency table's key for `key` used by `scope`: a hash of both,
/// each part length-prefixed, so that every caller has its own key space,
/// the item key is bounded whatever the scope's length, and the client's
/// key is not stored in the clear.
pub fn record_key(scope: &Scope, key: &str) -> String {
    let mut parts = scope.parts();
    parts.push(key);
    hashed_key(&parts)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(
                Scope::of(mode, &RoleSessions::Apart, auth.as_ref()),
                want,
                "{mode:?} {auth:?}"
            );
        }
    }

    #[test]
    fn an_assumed_roles_sessions_are_apart_unless_its_role_is_shared() {
        let shared =
            RoleSessions::Shared(vec!["Ordering".into(), "AWSReservedSSO_Admin_1a2b".into()]);
        // (arn, by default, with Ordering shared)
        for (arn, apart, with_shared) in [
            (
                "arn:aws:iam::123456789012:user/alice",
                "arn:aws:iam::123456789012:user/alice",
                "arn:aws:iam::123456789012:user/alice",
            ),
            (
                "arn:aws:iam::123456789012:root",
                "arn:aws:iam::123456789012:root",
                "arn:aws:iam::123456789012:root",
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/Ordering/i-0abc",
                "arn:aws:sts::123456789012:assumed-role/Ordering/i-0abc",
                "arn:aws:sts::123456789012:assumed-role/Ordering",
            ),
            (
                "arn:aws-cn:sts::123456789012:assumed-role/Ordering/s/with/slashes",
                "arn:aws-cn:sts::123456789012:assumed-role/Ordering/s/with/slashes",
                "arn:aws-cn:sts::123456789012:assumed-role/Ordering",
            ),
            // People behind the sessions: apart, even when named.
            (
                "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_1a2b/alice@example.com",
                "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_1a2b/alice@example.com",
                "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_1a2b/alice@example.com",
            ),
            // A role not named: apart.
            (
                "arn:aws:sts::123456789012:assumed-role/SamlUsers/bob",
                "arn:aws:sts::123456789012:assumed-role/SamlUsers/bob",
                "arn:aws:sts::123456789012:assumed-role/SamlUsers/bob",
            ),
            (
                "arn:aws:sts::123456789012:federated-user/bob",
                "arn:aws:sts::123456789012:federated-user/bob",
                "arn:aws:sts::123456789012:federated-user/bob",
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/NoSession",
                "arn:aws:sts::123456789012:assumed-role/NoSession",
                "arn:aws:sts::123456789012:assumed-role/NoSession",
            ),
            ("not-an-arn", "not-an-arn", "not-an-arn"),
        ] {
            assert_eq!(iam_principal(arn, &RoleSessions::Apart), apart, "{arn}");
            assert_eq!(iam_principal(arn, &shared), with_shared, "{arn}");
        }
        // Two people on one Identity Center role are two callers.
        let sso = |who: &str| {
            authorizer(serde_json::json!({"iam": {"userArn":
                format!("arn:aws:sts::1:assumed-role/AWSReservedSSO_Read_9f/{who}")}}))
        };
        let alice = Scope::of(AuthMode::Iam, &RoleSessions::default(), Some(&sso("alice")));
        let bob = Scope::of(AuthMode::Iam, &RoleSessions::default(), Some(&sso("bob")));
        assert_ne!(alice.unwrap(), bob.unwrap());
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
    fn record_keys_are_scoped_by_caller() {
        let jwt = |iss: &str, sub: &str| Scope::Jwt {
            issuer: iss.into(),
            subject: sub.into(),
        };
        let keys = [
            record_key(&Scope::Anonymous, "k"),
            record_key(&jwt("i", "alice"), "k"),
            record_key(&jwt("i", "bob"), "k"),
            record_key(&jwt("ia", "lice"), "k"),
            record_key(&Scope::Iam("alice".into()), "k"),
            record_key(&Scope::Lambda("alice".into()), "k"),
            record_key(&Scope::Anonymous, "k2"),
        ];
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len());
        assert_eq!(record_key(&Scope::Anonymous, "k"), keys[0]);
        assert!(keys.iter().all(|k| k.len() == 64));
    }
}
