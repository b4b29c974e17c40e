//! What every function does once per cold start.

#[cfg(feature = "sqs")]
use crate::config::Settings;
#[cfg(feature = "dynamodb")]
use crate::dynamo;
use crate::error::{ConfigError, TraceSetupError};
#[cfg(feature = "sqs")]
use crate::redelivery::{self, Redelivery};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

/// A value read at cold start (a variable, the function's settings, a
/// client built from them), or a failed cold start with a clear log
/// line: a misconfigured function must not start consuming (and
/// acknowledging) messages. The failure is also reported to the Runtime API
/// (`/runtime/init/error`), so that the invocation waiting for this cold
/// start fails at once with the reason (Lambda's `Runtime.ExitError` does
/// that too, but a local emulator such as `cargo lambda watch` otherwise
/// waits for a process that is gone).
///
/// ```no_run
/// # async fn cold_start() -> Result<(), lambda_runtime::Error> {
/// use lambda_idempotency::{Settings, bootstrap, config};
/// let env = |k: &str| std::env::var(k).ok();
/// let table = bootstrap::or_init_error(config::required(&env, "TABLE_NAME")).await?;
/// let settings = bootstrap::or_init_error(Settings::from_env("Points", "points")).await?;
/// # Ok(()) }
/// ```
pub async fn or_init_error<C>(read: Result<C, ConfigError>) -> Result<C, lambda_runtime::Error> {
    match read {
        Ok(config) => Ok(config),
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            report_init_error("InvalidConfiguration", &e.to_string()).await;
            Err(e.into())
        }
    }
}

/// Tell the Runtime API that the cold start failed, best effort: a failure
/// to report is logged, and the process exits with the error either way.
/// The message is a configuration error's text, which names a variable and
/// a range, never a value.
pub async fn report_init_error(error_type: &str, message: &str) {
    let Ok(api) = std::env::var("AWS_LAMBDA_RUNTIME_API") else {
        return;
    };
    // Lambda sets `host:port`; `cargo lambda watch` a URL with its scheme
    // and a path of its own.
    let base = if api.starts_with("http://") || api.starts_with("https://") {
        api.trim_end_matches('/').to_owned()
    } else {
        format!("http://{api}")
    };
    let body = serde_json::json!({"errorType": error_type, "errorMessage": message});
    let sent = reqwest::Client::new()
        .post(format!("{base}/2018-06-01/runtime/init/error"))
        .header("Lambda-Runtime-Function-Error-Type", error_type)
        .timeout(std::time::Duration::from_secs(2))
        .body(body.to_string())
        .send()
        .await;
    if let Err(e) = sent {
        tracing::warn!(error = %e, "could not report the init error to the Runtime API");
    }
}

/// JSON logs to stdout (CloudWatch). The level: `RUST_LOG` when set (a full
/// tracing filter, for local debugging), else Lambda's
/// `AWS_LAMBDA_LOG_LEVEL` (set from the function's `LoggingConfig`
/// ApplicationLogLevel), else info. Built with the feature `otel` and with
/// `OTEL_EXPORTER_OTLP_ENDPOINT` set, the spans are exported as well
/// ([`subscriber`]).
pub fn init_tracing() {
    let get = |k: &str| std::env::var(k).ok();
    let (subscriber, traces) = subscriber(std::io::stdout, log_filter(&get), &get);
    // Only fails if a subscriber is already installed (then keep that one).
    let _ = tracing::subscriber::set_global_default(subscriber);
    // Logged once logging works. Traces are an aid: without them the
    // function still runs.
    if let Err(e) = traces {
        tracing::warn!(error = %e, "OpenTelemetry traces are off");
    }
}

/// The functions' subscriber: [`json_logs`] to `writer` at `filter`'s
/// level, and, built with the feature `otel` and an OTLP endpoint in `get`
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`),
/// a layer exporting the spans to it, with a filter of its own that leaves
/// the log lines exactly as they are. Without the feature or the endpoint
/// there is no exporter and no thread. The error says why traces were
/// asked for and are off (the logs work regardless).
pub fn subscriber<W>(
    writer: W,
    filter: EnvFilter,
    get: &impl Fn(&str) -> Option<String>,
) -> (
    impl tracing::Subscriber + Send + Sync,
    Result<(), TraceSetupError>,
)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::registry().with(json_layer(writer).with_filter(filter));
    let (traces, problem) = match otel::layer(get) {
        Ok(layer) => (layer, Ok(())),
        Err(e) => (None, Err(e)),
    };
    (logs.with(traces), problem)
}

/// Make the invocation's `span` a child of the X-Ray segment Lambda opened
/// (`xray_trace_id`: Lambda's `Root=...;Parent=...;Sampled=...` header),
/// so that the exported spans join the function's X-Ray trace. A no-op
/// without the feature `otel` or without an exporter.
pub fn join_xray_trace(span: &tracing::Span, xray_trace_id: Option<&str>) {
    otel::join_xray_trace(span, xray_trace_id);
}

/// After an invocation's answer is ready, before it is returned: export
/// its spans, waiting a bounded time (at most a second, never past the
/// deadline `deadline_ms`, epoch milliseconds, less a reserve; see
/// `otel::FLUSH_TIMEOUT`). A no-op without the feature `otel` or
/// without an exporter.
pub async fn flush_traces(deadline_ms: u64) {
    otel::flush(deadline_ms).await;
}

/// Without the feature `otel`: nothing to export; the stand-ins compile
/// away.
#[cfg(not(feature = "otel"))]
mod otel {
    use crate::error::TraceSetupError;

    pub(crate) fn layer(
        _get: &impl Fn(&str) -> Option<String>,
    ) -> Result<Option<tracing_subscriber::layer::Identity>, TraceSetupError> {
        Ok(None)
    }

    pub(crate) fn join_xray_trace(_span: &tracing::Span, _xray_trace_id: Option<&str>) {}

    pub(crate) async fn flush(_deadline_ms: u64) {}
}

#[cfg(feature = "otel")]
use crate::otel;

/// The log filter from `RUST_LOG`, else `AWS_LAMBDA_LOG_LEVEL` (TRACE,
/// DEBUG, INFO, WARN, ERROR, FATAL; FATAL is tracing's ERROR), else info. An
/// unreadable value falls back to info rather than failing the cold start:
/// logging must never stop the function consuming.
pub fn log_filter(get: &impl Fn(&str) -> Option<String>) -> EnvFilter {
    if let Some(f) = get("RUST_LOG")
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| EnvFilter::try_new(s).ok())
    {
        return f;
    }
    let level = match get("AWS_LAMBDA_LOG_LEVEL")
        .map(|s| s.trim().to_ascii_uppercase())
        .as_deref()
    {
        Some("TRACE") => "trace",
        Some("DEBUG") => "debug",
        Some("WARN") => "warn",
        Some("ERROR") | Some("FATAL") => "error",
        _ => "info",
    };
    EnvFilter::new(level)
}

/// The functions' log format: one flat JSON object per line with the keys
/// Powertools for AWS Lambda users search by (`level`, `message`,
/// `service`, `cold_start`, `function_name`, `function_memory_size`,
/// `function_arn`, `function_request_id`, `xray_trace_id`) and ours
/// (`message_id`, `order_id`, `event_id`, `seq`, `outcome`, ...): the fields
/// of every span the line is in, from the invocation's to the record's,
/// then the event's own. Public so that tests check the lines the functions
/// really write.
pub fn json_logs<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::registry().with(json_layer(writer).with_filter(filter))
}

/// The layer writing [`json_logs`]' lines. Its level filter is its own
/// (a per-layer filter, not the subscriber's), so that another layer (the
/// traces) may see spans the logs leave out without changing a line.
fn json_layer<S, W>(writer: W) -> impl Layer<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
        .event_format(FlatJson)
        .with_writer(writer)
}

/// The line format of [`json_logs`]. Lambda timestamps every line already,
/// so there is no time key.
struct FlatJson;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for FlatJson
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use serde_json::{Map, Value};
        let mut line = Map::new();
        line.insert(
            "level".into(),
            Value::from(event.metadata().level().as_str()),
        );
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<tracing_subscriber::fmt::FormattedFields<N>>()
                else {
                    continue;
                };
                // JsonFields keeps each span's fields as a JSON object.
                if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                    line.extend(fields);
                }
            }
        }
        event.record(&mut JsonVisitor(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields into the line's object.
struct JsonVisitor<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonVisitor<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

/// The AWS SDK's shared configuration: region, credentials and endpoints
/// (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_SQS` for local servers)
/// from the standard AWS environment. Load it once per cold start and build
/// every client of the function from it ([`dynamodb_client_from`],
/// [`redelivery()`]): each load reads the environment and sets up a
/// credentials chain of its own, which a second client would otherwise pay
/// for again at init.
#[cfg(any(feature = "dynamodb", feature = "sqs"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "dynamodb", feature = "sqs"))))]
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await
}

/// The DynamoDB client, with the retry and timeout policy of
/// [`dynamo::retry_config`] and [`dynamo::timeout_config`], from a loaded
/// [`sdk_config`].
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub fn dynamodb_client_from(sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_config(dynamo::retry_config())
        .timeout_config(dynamo::timeout_config())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// [`dynamodb_client_from`] a configuration loaded for it alone: for a
/// function whose only AWS client is DynamoDB's.
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    dynamodb_client_from(&sdk_config().await)
}

/// The SQS client that sets returned messages' visibility, when
/// `RETRY_BACKOFF` is on, from a loaded [`sdk_config`]. Its own retries are
/// few and its timeouts short ([`redelivery::timeout_config`]): it runs in
/// the deadline margin, and a failure only means the message comes back
/// later.
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub fn redelivery(sdk: &aws_config::SdkConfig, runtime: &Settings) -> Option<Redelivery> {
    let policy = runtime.retry_backoff?;
    Some(Redelivery::new(sqs_client_from(sdk), policy))
}

/// [`redelivery()`]'s client.
#[cfg(feature = "sqs")]
fn sqs_client_from(sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::config::Builder::from(sdk)
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
        .timeout_config(redelivery::timeout_config())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One loaded configuration, two clients, each with its own policy: the
    /// client's settings are not the shared configuration's.
    #[cfg(all(feature = "dynamodb", feature = "sqs"))]
    #[test]
    fn each_client_from_one_loaded_config_keeps_its_own_policy() {
        use aws_config::{BehaviorVersion, Region, SdkConfig};
        use std::time::Duration;
        let sdk = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("eu-west-1"))
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(7))
            .build();
        let dynamodb = dynamodb_client_from(&sdk);
        let c = dynamodb.config();
        assert_eq!(c.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert_eq!(c.retry_config().map(|r| r.max_attempts()), Some(3));
        let t = c.timeout_config().expect("timeouts set");
        assert_eq!(t.connect_timeout(), Some(Duration::from_secs(1)));
        assert_eq!(t.operation_timeout(), Some(Duration::from_secs(5)));
        let sqs = sqs_client_from(&sdk);
        let c = sqs.config();
        assert_eq!(c.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert_eq!(c.retry_config().map(|r| r.max_attempts()), Some(2));
        let t = c.timeout_config().expect("timeouts set");
        assert_eq!(t.connect_timeout(), Some(Duration::from_millis(500)));
        assert_eq!(t.operation_timeout(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn rust_log_overrides_lambdas_log_level() {
        let filter = |env: &[(&str, &str)]| {
            log_filter(&|k| {
                env.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            })
            .to_string()
        };
        assert_eq!(filter(&[]), "info");
        assert_eq!(filter(&[("AWS_LAMBDA_LOG_LEVEL", "DEBUG")]), "debug");
        assert_eq!(filter(&[("AWS_LAMBDA_LOG_LEVEL", "FATAL")]), "error");
        assert_eq!(filter(&[("AWS_LAMBDA_LOG_LEVEL", "loud")]), "info");
        assert_eq!(
            filter(&[
                ("AWS_LAMBDA_LOG_LEVEL", "ERROR"),
                ("RUST_LOG", "warn,order_consumer=debug")
            ]),
            "order_consumer=debug,warn" // EnvFilter lists directives most specific first
        );
        assert_eq!(
            filter(&[("AWS_LAMBDA_LOG_LEVEL", "WARN"), ("RUST_LOG", " ")]),
            "warn"
        );
    }
}
