//! The provider's webhook URL: which URLs the notifier accepts, and where
//! it comes from.
//!
//! The URL usually carries a credential (a token in the path or query), so
//! it is treated as a secret: in AWS it lives in an SSM SecureString
//! parameter that the function reads once per cold start (not in the
//! function's environment, where every `lambda:GetFunctionConfiguration`
//! and DescribeStacks shows it), and it never appears in a log line, an
//! error message or a `Debug` print.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ssm::types::ParameterType;
use thiserror::Error;

use lambda_idempotency::config::ConfigError;

/// `NOTIFY_WEBHOOK_URL`: a literal URL (local runs, tests).
pub const URL_VAR: &str = "NOTIFY_WEBHOOK_URL";
/// `NOTIFY_WEBHOOK_URL_PARAMETER`: the SSM parameter holding it (AWS).
pub const PARAMETER_VAR: &str = "NOTIFY_WEBHOOK_URL_PARAMETER";

/// A webhook URL the notifier may POST to: parsed by a real URL parser
/// (so `https://exa mple` fails at cold start, not on every POST), `https`,
/// or `http` to a loopback host only (local providers in tests and local
/// runs; plain HTTP anywhere else would send the token and the customer
/// data in clear).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl(reqwest::Url);

impl WebhookUrl {
    /// Check `raw` against the rules above. `var` names the configuration
    /// the value came from; the error names it and never echoes the value.
    pub fn parse(raw: &str, var: &'static str) -> Result<WebhookUrl, ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid {
            var,
            reason: reason.to_owned(),
        };
        // url's ParseError messages are fixed texts ("invalid domain
        // character"), never the input.
        let url = reqwest::Url::parse(raw.trim()).map_err(|e| ConfigError::Invalid {
            var,
            reason: format!("not a valid URL ({e})"),
        })?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid("the URL has no host"))?;
        // `domain()` is None for an IP address; url writes IPv6 in brackets.
        let loopback = match url.domain() {
            Some(d) => d.eq_ignore_ascii_case("localhost"),
            None => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
        };
        match url.scheme() {
            "https" => Ok(WebhookUrl(url)),
            "http" if loopback => Ok(WebhookUrl(url)),
            "http" => Err(invalid(
                "http:// is allowed for loopback hosts only (localhost, 127.0.0.0/8, ::1); use https://",
            )),
            _ => Err(invalid("expected an https:// URL")),
        }
    }

    pub fn as_url(&self) -> &reqwest::Url {
        &self.0
    }
}

/// Never the URL itself: a `{:?}` of the configuration must not leak it.
impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookUrl({}://<redacted>)", self.0.scheme())
    }
}

/// Where this cold start gets the webhook URL from: exactly one of the two
/// variables is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookSource {
    /// `NOTIFY_WEBHOOK_URL`, already checked.
    Url(WebhookUrl),
    /// `NOTIFY_WEBHOOK_URL_PARAMETER`: the name of an SSM SecureString
    /// parameter, read (decrypted) by [`webhook_url`] at cold start.
    Parameter(String),
}

impl WebhookSource {
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let set = |var| get(var).filter(|v: &String| !v.trim().is_empty());
        match (set(URL_VAR), set(PARAMETER_VAR)) {
            (Some(url), None) => Ok(WebhookSource::Url(WebhookUrl::parse(&url, URL_VAR)?)),
            (None, Some(name)) => {
                // SSM also allows bare names, but the template's IAM grant
                // is built as `parameter${Name}`, which is only the
                // parameter's ARN with the leading slash: refuse the others
                // here rather than as AccessDenied at cold start.
                let name = name.trim();
                if !name.starts_with('/') || name.contains(char::is_whitespace) {
                    return Err(ConfigError::Invalid {
                        var: PARAMETER_VAR,
                        reason: "expected an absolute SSM parameter name such as /order-consumer/notify-webhook-url".into(),
                    });
                }
                Ok(WebhookSource::Parameter(name.to_owned()))
            }
            (None, None) => Err(ConfigError::Invalid {
                var: PARAMETER_VAR,
                reason: format!(
                    "set {PARAMETER_VAR} (an SSM SecureString parameter name, in AWS) or {URL_VAR} (a literal URL, local runs)"
                ),
            }),
            (Some(_), Some(_)) => Err(ConfigError::Invalid {
                var: PARAMETER_VAR,
                reason: format!("set either {PARAMETER_VAR} or {URL_VAR}, not both"),
            }),
        }
    }

    /// The literal URL, if that is how it was configured.
    pub fn literal(&self) -> Option<&WebhookUrl> {
        match self {
            WebhookSource::Url(url) => Some(url),
            WebhookSource::Parameter(_) => None,
        }
    }
}

/// Why the webhook URL could not be read from SSM. Never carries the value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WebhookUrlError {
    #[error("SSM GetParameter for {PARAMETER_VAR} failed: {code}{}", ssm_hint(.code))]
    Ssm { code: String },
    #[error("SSM GetParameter for {PARAMETER_VAR} returned no value")]
    NoValue,
    /// The parameter holds something that is not an acceptable webhook URL
    /// (the same rules as `NOTIFY_WEBHOOK_URL`).
    #[error(
        "the SSM parameter named by {PARAMETER_VAR} does not hold an acceptable webhook URL: {reason}"
    )]
    InvalidValue { reason: String },
}

/// The SSM client for the one cold-start read, from the function's loaded
/// AWS configuration (`bootstrap::sdk_config`, shared with its DynamoDB
/// client): bounded so that a stuck endpoint fails the cold start within
/// Lambda's 10 s init phase, with a clear log line, instead of timing it out
/// silently.
pub fn ssm_client(sdk: &aws_config::SdkConfig) -> aws_sdk_ssm::Client {
    let config = aws_sdk_ssm::config::Builder::from(sdk)
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(3))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(Duration::from_secs(2))
                .operation_timeout(Duration::from_secs(6))
                .build(),
        )
        .build();
    aws_sdk_ssm::Client::from_conf(config)
}

/// Read the SecureString parameter `name` (decrypted) and check its value
/// like `NOTIFY_WEBHOOK_URL`.
pub async fn read_parameter(
    ssm: &aws_sdk_ssm::Client,
    name: &str,
) -> Result<WebhookUrl, WebhookUrlError> {
    let out = ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| WebhookUrlError::Ssm {
            code: ssm_error_code(&e),
        })?;
    let parameter = out.parameter.ok_or(WebhookUrlError::NoValue)?;
    if parameter.r#type != Some(ParameterType::SecureString) {
        // Still usable, but the secret sits unencrypted in SSM and is
        // shown to anyone with ssm:DescribeParameters/GetParameter.
        tracing::warn!(
            "the webhook URL parameter is not a SecureString; store it with --type SecureString"
        );
    }
    let value = parameter.value.ok_or(WebhookUrlError::NoValue)?;
    // The rules of a literal URL; the reason never contains the value.
    WebhookUrl::parse(&value, PARAMETER_VAR).map_err(|e| WebhookUrlError::InvalidValue {
        reason: match e {
            ConfigError::Invalid { reason, .. } => reason,
            ConfigError::Missing(_) => "empty".into(),
            _ => "not a valid URL".into(),
        },
    })
}

/// A short, value-free name for what went wrong: the service's error code
/// (ParameterNotFound, AccessDeniedException, ...) or the transport's kind.
fn ssm_error_code<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> String {
    match e {
        SdkError::ServiceError(se) => se.err().code().unwrap_or("an unnamed service error"),
        SdkError::TimeoutError(_) => "timed out",
        SdkError::DispatchFailure(_) => "SSM could not be reached",
        SdkError::ResponseError(_) => "an unreadable response",
        SdkError::ConstructionFailure(_) => "the request could not be built",
        _ => "an unknown SDK error",
    }
    .to_owned()
}

/// What an operator checks first for the common service errors.
fn ssm_hint(code: &str) -> &'static str {
    match code {
        "ParameterNotFound" => " (create it: aws ssm put-parameter --type SecureString)",
        "AccessDeniedException" => {
            " (the function's role needs ssm:GetParameter on it, and kms:Decrypt for a customer managed key)"
        }
        "InvalidKeyId" => " (the parameter's KMS key is disabled or missing)",
        _ => "",
    }
}

/// The webhook URL for this cold start: the literal, or the parameter read
/// from SSM once (the only SSM call the function makes).
pub async fn webhook_url(
    source: &WebhookSource,
    sdk: &aws_config::SdkConfig,
) -> Result<WebhookUrl, WebhookUrlError> {
    match source {
        WebhookSource::Url(url) => Ok(url.clone()),
        WebhookSource::Parameter(name) => read_parameter(&ssm_client(sdk), name).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from the function's one loaded configuration, the SSM client
    /// keeps its own bounds (the init phase's 10 s), not the shared ones.
    #[test]
    fn the_ssm_client_keeps_its_own_bounds_over_the_shared_configuration() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("eu-west-1"))
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(9))
            .build();
        let ssm = ssm_client(&sdk);
        let c = ssm.config();
        assert_eq!(c.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert_eq!(c.retry_config().map(|r| r.max_attempts()), Some(3));
        assert_eq!(
            c.timeout_config().and_then(|t| t.operation_timeout()),
            Some(Duration::from_secs(6))
        );
    }

    fn parse(raw: &str) -> Result<WebhookUrl, ConfigError> {
        WebhookUrl::parse(raw, URL_VAR)
    }

    #[test]
    fn https_anywhere_and_http_only_to_loopback() {
        for ok in [
            "https://hooks.example.com/notify?token=abc",
            "https://93.184.216.34/x",
            "http://localhost:8080/notify",
            "http://LOCALHOST/notify",
            "http://127.0.0.1:9/notify",
            "http://127.200.3.4/notify",
            "http://[::1]:8080/notify",
        ] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
        for plain in [
            "http://hooks.example.com/notify",
            "http://10.0.0.1/notify",
            "http://169.254.169.254/latest",
            "http://[::2]/x",
            "http://localhost.example.com/x",
        ] {
            let e = parse(plain).expect_err(plain);
            assert!(e.to_string().contains("loopback"), "{plain}: {e}");
        }
    }

    #[test]
    fn a_url_the_parser_refuses_is_a_config_error_that_never_echoes_it() {
        for bad in [
            "https://exa mple/notify?token=SECRET-TOKEN",
            "https://",
            "hooks.example.com/SECRET-TOKEN",
            "ftp://hooks.example.com/SECRET-TOKEN",
            "https://[::1/SECRET-TOKEN",
            "unix:/var/run/SECRET-TOKEN",
        ] {
            let e = parse(bad).expect_err(bad);
            let msg = e.to_string();
            assert!(
                matches!(e, ConfigError::Invalid { var: URL_VAR, .. }),
                "{bad}: {e:?}"
            );
            assert!(msg.contains(URL_VAR), "{msg}");
            assert!(!msg.contains("SECRET"), "echoes the value: {msg}");
            assert!(!msg.contains("exa mple"), "echoes the value: {msg}");
        }
    }

    #[test]
    fn debug_never_shows_the_url() {
        let url = parse("https://hooks.example.com/SECRET-TOKEN").unwrap();
        let source = WebhookSource::Url(url);
        assert!(!format!("{source:?}").contains("SECRET"), "{source:?}");
        assert!(!format!("{source:?}").contains("example"), "{source:?}");
    }

    #[test]
    fn exactly_one_source_is_set() {
        let lookup = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(matches!(
            WebhookSource::from_lookup(&lookup(&[(URL_VAR, "https://h.example/x")])),
            Ok(WebhookSource::Url(_))
        ));
        assert_eq!(
            WebhookSource::from_lookup(&lookup(&[(PARAMETER_VAR, "/order-consumer/hook")])),
            Ok(WebhookSource::Parameter("/order-consumer/hook".into()))
        );
        for (pairs, says) in [
            (&[][..], "set NOTIFY_WEBHOOK_URL_PARAMETER"),
            (
                &[(URL_VAR, " "), (PARAMETER_VAR, "")][..],
                "set NOTIFY_WEBHOOK_URL_PARAMETER",
            ),
            (
                &[(URL_VAR, "https://h.example/x"), (PARAMETER_VAR, "/p")][..],
                "not both",
            ),
            (&[(PARAMETER_VAR, "relative/name")][..], "absolute"),
            (&[(PARAMETER_VAR, "/with space")][..], "absolute"),
        ] {
            let e = WebhookSource::from_lookup(&lookup(pairs)).expect_err(says);
            assert!(e.to_string().contains(says), "{pairs:?}: {e}");
        }
    }
}
