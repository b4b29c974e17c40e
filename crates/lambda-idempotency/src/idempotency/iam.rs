//! ElastiCache's IAM authentication for the Valkey store: the password is
//! a token, a SigV4-presigned `connect` request to the cache, valid 15
//! minutes, made from the function's own AWS credentials (no secret to
//! store). A token is checked when a connection authenticates, so the
//! store makes one for each new connection, kept for 10 minutes;
//! ElastiCache closes an IAM-authenticated connection after 12 hours, and
//! the store then connects again with a fresh token.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::store::invalid;
use crate::error::{ConfigError, StoreError};

/// How long a token is good for (ElastiCache accepts up to 15 minutes).
const TOKEN_LIFETIME: Duration = Duration::from_secs(900);
/// How long the store uses a token for new connections: well within its
/// lifetime, so that a connection never presents one about to expire.
const TOKEN_REUSE: Duration = Duration::from_secs(600);

/// Who connects, to which cache, with which credentials: for
/// [`ValkeyConfig::iam_auth`](super::ValkeyConfig::iam_auth). Its `Debug`
/// shows the user and the cache, never a credential or a token.
#[derive(Clone)]
pub struct IamAuth {
    user_id: String,
    cache_name: String,
    serverless: bool,
    region: String,
    credentials: SharedCredentialsProvider,
    /// The token in use for new connections, and the wall-clock time it
    /// was signed at (what ElastiCache checks it against).
    token: Arc<Mutex<Option<(String, SystemTime)>>>,
}

impl fmt::Debug for IamAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IamAuth")
            .field("user_id", &self.user_id)
            .field("cache_name", &self.cache_name)
            .field("serverless", &self.serverless)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl IamAuth {
    /// The ElastiCache user `user_id` (whose authentication mode is IAM,
    /// and whose user id and user name are the same, as ElastiCache
    /// requires for IAM) of the cache `cache_name` (a replication group's
    /// id, or a serverless cache's name: then call
    /// [`serverless`](Self::serverless)), with the region and credentials
    /// of `sdk` (the function's role, from `aws_config::load_defaults`).
    /// The role needs `elasticache:Connect` on the cache and the user.
    /// Errors: an empty user or cache name, `sdk` without a region or
    /// credentials.
    pub fn new(sdk: &SdkConfig, user_id: &str, cache_name: &str) -> Result<Self, ConfigError> {
        if user_id.is_empty() {
            return Err(invalid("user_id", "an ElastiCache user id"));
        }
        if cache_name.is_empty() {
            return Err(invalid(
                "cache_name",
                "a replication group id or a serverless cache name",
            ));
        }
        let region = sdk
            .region()
            .ok_or_else(|| invalid("region", "the AWS region of the cache (AWS_REGION)"))?;
        let credentials = sdk
            .credentials_provider()
            .ok_or_else(|| invalid("credentials", "AWS credentials (the function's role)"))?;
        Ok(IamAuth {
            user_id: user_id.to_owned(),
            // ElastiCache names its caches in lower case.
            cache_name: cache_name.to_ascii_lowercase(),
            serverless: false,
            region: region.to_string(),
            credentials,
            token: Arc::default(),
        })
    }

    /// The cache is an ElastiCache Serverless cache (its token says so);
    /// not for a node-based cache's replication group.
    pub fn serverless(mut self) -> Self {
        self.serverless = true;
        // A token made before this is for a node-based cache.
        self.token = Arc::default();
        self
    }

    /// Forget the token in use: the server refused it.
    pub(crate) fn forget_token(&self) {
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The user to authenticate as.
    pub(crate) fn user_id(&self) -> &str {
        &self.user_id
    }

    /// A token for a new connection: the one in use while signed less than
    /// 10 minutes ago by the wall clock (which ElastiCache checks it by,
    /// and which a frozen Lambda environment does not stop), else a fresh
    /// one from the credentials. The provider is asked each time a token
    /// is made (the SDK's default chain reads the function's role from
    /// its environment variables on Lambda).
    pub(crate) async fn token(&self) -> Result<String, StoreError> {
        let held = self
            .token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((token, signed)) = held
            && SystemTime::now()
                .duration_since(signed)
                .is_ok_and(|age| age < TOKEN_REUSE)
        {
            return Ok(token);
        }
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| credentials_error(&e))?;
        let now = SystemTime::now();
        let token = connect_token(
            &self.user_id,
            &self.cache_name,
            self.serverless,
            &self.region,
            credentials,
            now,
        )?;
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = Some((token.clone(), now));
        Ok(token)
    }
}

/// Why the credentials could not be had: a provider that timed out or
/// failed is retried like a network failure; none configured, or a
/// configuration it cannot use, is an access problem. Logged at debug:
/// the provider's message names the source, never a secret.
fn credentials_error(e: &CredentialsError) -> StoreError {
    tracing::debug!(error = %e, "no AWS credentials for the IAM token");
    match e {
        CredentialsError::ProviderTimedOut(_) => StoreError::Timeout,
        CredentialsError::ProviderError(_) => StoreError::Network,
        _ => StoreError::AccessDenied {
            code: "NoCredentials".into(),
        },
    }
}

/// The IAM token of `user_id` for `cache_name` at `now`: the request
/// `GET http://{cache_name}/?Action=connect&User={user_id}` (with
/// `&ResourceType=ServerlessCache` for a serverless cache), presigned with
/// SigV4 for the service `elasticache`, valid 15 minutes, without its
/// `http://`.
pub(crate) fn connect_token(
    user_id: &str,
    cache_name: &str,
    serverless: bool,
    region: &str,
    credentials: Credentials,
    now: SystemTime,
) -> Result<String, StoreError> {
    let failed = || StoreError::Client {
        code: "IamTokenSigning".into(),
    };
    let mut url = format!(
        "http://{cache_name}/?Action=connect&User={}",
        uri_encode(user_id)
    );
    if serverless {
        url.push_str("&ResourceType=ServerlessCache");
    }
    let identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_LIFETIME);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("elasticache")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|_| failed())?
        .into();
    let request = SignableRequest::new("GET", &url, std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|_| failed())?;
    let (instructions, _) = sign(request, &params).map_err(|_| failed())?.into_parts();
    let mut token = url.strip_prefix("http://").ok_or_else(failed)?.to_owned();
    for (name, value) in instructions.params() {
        token.push('&');
        token.push_str(name);
        token.push('=');
        token.push_str(&uri_encode(value));
    }
    Ok(token)
}

/// What SigV4 leaves unencoded in a query value: `A-Z a-z 0-9 - _ . ~`.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` percent-encoded as SigV4 encodes a query value.
fn uri_encode(text: &str) -> String {
    utf8_percent_encode(text, QUERY_VALUE).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn params(token: &str) -> (String, BTreeMap<String, String>) {
        let (host, query) = token.split_once("/?").expect("host/?query");
        let params = query
            .split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("k=v");
                (k.to_owned(), v.to_owned())
            })
            .collect();
        (host.to_owned(), params)
    }

    /// A provider that timed out or failed is retried; no credentials at
    /// all is an access problem, not retried.
    #[test]
    fn missing_credentials_are_classified_by_cause() {
        let cases = [
            (
                CredentialsError::provider_timed_out(Duration::from_secs(5)),
                StoreError::Timeout,
            ),
            (
                CredentialsError::provider_error("IMDS answered 500"),
                StoreError::Network,
            ),
            (
                CredentialsError::not_loaded("no provider"),
                StoreError::AccessDenied {
                    code: "NoCredentials".into(),
                },
            ),
        ];
        for (e, want) in cases {
            let got = credentials_error(&e);
            assert_eq!(got, want);
            assert_eq!(
                got.is_retryable(),
                !matches!(want, StoreError::AccessDenied { .. })
            );
        }
    }

    /// Known answers from an independent implementation: botocore's
    /// `RequestSigner.generate_presigned_url` (1.43), as AWS's examples
    /// make ElastiCache tokens, with the same credentials at the same
    /// instant (2026-01-02T03:04:05Z). The parameters' order may differ;
    /// their set and the signature may not.
    #[test]
    fn the_token_is_botocores_presigned_connect_request() {
        let now = UNIX_EPOCH + Duration::from_secs(1_767_323_045);
        let cases = [
            (
                None,
                false,
                "bfeac349ee1d596150831f38017b883380aad2f0b563a879ddf7d178e2528d0f",
            ),
            (
                None,
                true,
                "e3502affcabf89b872a0bf3965f9ffc663a94c1ff502b75d6eb58f0e14902e7a",
            ),
            (
                Some("session-token/with+chars="),
                false,
                "e6018534ec273004ea2fc7cd0b1f89ebb4e024e286926385340b8ea812b2ffb0",
            ),
            (
                Some("session-token/with+chars="),
                true,
                "4961675f437b0b4a5247d932e198a17b85d33ce1f23625330a3c0aed618316e9",
            ),
        ];
        for (session, serverless, signature) in cases {
            let credentials = Credentials::new(
                "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                session.map(str::to_owned),
                None,
                "test",
            );
            let token = connect_token(
                "iam-user-01",
                "my-cache",
                serverless,
                "us-east-1",
                credentials,
                now,
            )
            .expect("a token");
            let (host, got) = params(&token);
            assert_eq!(host, "my-cache");
            let mut want: BTreeMap<String, String> = [
                ("Action", "connect"),
                ("User", "iam-user-01"),
                ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
                (
                    "X-Amz-Credential",
                    "AKIDEXAMPLE%2F20260102%2Fus-east-1%2Felasticache%2Faws4_request",
                ),
                ("X-Amz-Date", "20260102T030405Z"),
                ("X-Amz-SignedHeaders", "host"),
                ("X-Amz-Expires", "900"),
                ("X-Amz-Signature", signature),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            if serverless {
                want.insert("ResourceType".into(), "ServerlessCache".into());
            }
            if session.is_some() {
                want.insert(
                    "X-Amz-Security-Token".into(),
                    "session-token%2Fwith%2Bchars%3D".into(),
                );
            }
            assert_eq!(got, want, "session {session:?}, serverless {serverless}");
        }
    }
}
