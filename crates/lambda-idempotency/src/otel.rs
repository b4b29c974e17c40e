//! OpenTelemetry traces (cargo feature `otel`, off by default): the
//! `tracing` spans of an invocation, exported over OTLP/HTTP (JSON) to a
//! collector, usually the ADOT/OTel collector Lambda layer on
//! `localhost:4318`, which forwards them to X-Ray. Reached only through
//! the `bootstrap` module above it (`subscriber`, `join_xray_trace`,
//! `flush_traces`), which has no-op stand-ins without the feature, so no
//! call site needs a `#[cfg]`.
//!
//! What is exported: our own spans (`invocation`, `record`, `webhook.post`)
//! and events at INFO and above, and the AWS SDK's DEBUG operation spans
//! (`DynamoDB.UpdateItem`, `SQS.ChangeMessageVisibilityBatch`, ... and the
//! smithy runtime's `try_attempt` etc. below them), whatever the log level:
//! the log level decides what reaches CloudWatch Logs, not what reaches the
//! trace. The SDK's events are not exported (they are many, and its spans
//! carry what a trace needs).
//!
//! Why not lambda_runtime's `OpenTelemetryLayer`: it needs
//! `Runtime::new(..).layer(..)` where the functions use `lambda_runtime::run`
//! and `lambda_http::run`; it opens its own root span ("Lambda function
//! invocation") that we cannot give Lambda's X-Ray header as its parent, so
//! the trace would not join the function's X-Ray segment; and it calls its
//! flush as a plain `Fn()` inside a future's `poll`, which would block a tokio
//! worker for the batch processor's fixed 5 s flush timeout. [`flush`] is
//! bounded and blocks no worker.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt as _, LevelFilter, filter_fn};
use tracing_subscriber::registry::LookupSpan;

use crate::error::TraceSetupError;
use crate::time::deadline_from_epoch_ms;

/// The longest an invocation waits for its spans to be exported. A collector
/// on localhost takes milliseconds; a dead one refuses the connection at
/// once; a hung one would hold the function until the exporter's own
/// timeout. One second caps what tracing can add to an invocation's billed
/// time and latency; the spans of an invocation that hits it are lost (the
/// export goes on in the background), never its records.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// Time kept before the invocation's deadline for answering the Runtime API:
/// a flush never eats into it, so tracing can never time an invocation out
/// (a timed-out batch is retried whole).
pub(crate) const FLUSH_RESERVE: Duration = Duration::from_millis(250);

/// One export request's timeout, the same second: a hung collector holds
/// the exporting thread no longer than an invocation waits for it, so the
/// next invocation's flush is not queued behind a stuck one.
pub(crate) const EXPORT_TIMEOUT: Duration = FLUSH_TIMEOUT;

/// The SDK crates whose DEBUG spans are exported: one per operation
/// (`DynamoDB.PutItem`) and the smithy runtime's attempt spans below it.
const SDK_TARGETS: [&str; 4] = [
    "aws_sdk_dynamodb",
    "aws_sdk_sqs",
    "aws_sdk_ssm",
    "aws_smithy_runtime",
];

/// The tracer provider, as a layer that does nothing (its filter lets no
/// span or event through): [`flush`] finds it in the current subscriber
/// (`Dispatch::downcast_ref`), so each subscriber flushes its own provider
/// and there is no global state.
struct Provider(SdkTracerProvider);

impl<S: Subscriber> Layer<S> for Provider {}

/// The OTLP endpoint of the traces: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
/// is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces` (the OTLP
/// specification's rule); `None` when neither is set: then there is no
/// exporter at all.
pub(crate) fn traces_endpoint(get: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |k: &str| {
        get(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if let Some(url) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Some(url);
    }
    set("OTEL_EXPORTER_OTLP_ENDPOINT")
        .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
}

/// The layer that turns spans into OpenTelemetry spans, filtered to what is
/// exported (the module's doc), with its provider; `None` without an
/// endpoint. Read through `get` (the environment in a function, a map in
/// tests).
pub(crate) fn layer<S>(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<impl Layer<S> + Send + Sync + 'static>, TraceSetupError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let Some(endpoint) = traces_endpoint(get) else {
        return Ok(None);
    };
    let provider = provider(&endpoint, get)?;
    let exported = filter_fn(ours).or(filter_fn(sdk_operation));
    let spans = tracing_opentelemetry::layer()
        // The instrumentation scope is the library that made the spans,
        // whatever function it runs in (the resource names the function).
        .with_tracer(provider.tracer(env!("CARGO_PKG_NAME")))
        // Our events become span events (the "record processed" line with
        // its outcome); their `message` is the event's name.
        .with_filter(exported);
    Ok(Some(spans.and_then(
        Provider(provider).with_filter(LevelFilter::OFF),
    )))
}

/// The crates whose spans are not the function's own: the runtime's
/// (lambda_runtime opens an INFO span per invocation, which would be a
/// second root beside ours, outside Lambda's X-Ray trace), the SDK's (only
/// its operation spans are wanted, [`sdk_operation`]) and the HTTP and TLS
/// stacks'.
const NOT_OURS: [&str; 12] = [
    "lambda_runtime",
    "lambda_http",
    "aws_config",
    "aws_smithy_runtime",
    "aws_sdk_dynamodb",
    "aws_sdk_sqs",
    "aws_sdk_ssm",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "rustls",
];

/// The function's spans and events at INFO and above: this library's and
/// the adopter's own, whatever its crate is called (the library cannot know
/// it), which is every target outside [`NOT_OURS`].
fn ours(meta: &Metadata<'_>) -> bool {
    *meta.level() <= Level::INFO && !NOT_OURS.iter().any(|t| under(meta.target(), t))
}

/// The SDK's spans (not its events) at DEBUG and above.
fn sdk_operation(meta: &Metadata<'_>) -> bool {
    meta.is_span()
        && *meta.level() <= Level::DEBUG
        && SDK_TARGETS.iter().any(|t| under(meta.target(), t))
}

/// `target` is the module `module` or one below it.
fn under(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// The provider: a batch span processor (exports from its own thread,
/// never from a handler's) over the OTLP/HTTP JSON exporter, X-Ray
/// compatible trace ids (the first 8 hex digits are the start time, as
/// X-Ray requires), and the resource naming the function.
fn provider(
    endpoint: &str,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<SdkTracerProvider, TraceSetupError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| TraceSetupError::new(format!("OTLP exporter: {e}")))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(opentelemetry_aws::trace::XrayIdGenerator::default())
        .with_resource(resource(get))
        .build())
}

/// `service.name`: `OTEL_SERVICE_NAME` when set (the OpenTelemetry
/// convention wins), else `POWERTOOLS_SERVICE_NAME`, else the function's
/// name, as the log lines' `service` key; and what the collector's X-Ray
/// exporter reads to mark the spans as a Lambda function's.
fn resource(get: &impl Fn(&str) -> Option<String>) -> Resource {
    let set = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    let function = set("AWS_LAMBDA_FUNCTION_NAME");
    let service = set("OTEL_SERVICE_NAME")
        .or_else(|| set("POWERTOOLS_SERVICE_NAME"))
        .or_else(|| function.clone());
    let mut attributes = vec![
        KeyValue::new("cloud.provider", "aws"),
        KeyValue::new("cloud.platform", "aws_lambda"),
    ];
    for (key, value) in [
        ("cloud.region", set("AWS_REGION")),
        ("faas.name", function),
        ("faas.version", set("AWS_LAMBDA_FUNCTION_VERSION")),
    ] {
        if let Some(v) = value {
            attributes.push(KeyValue::new(key, v));
        }
    }
    let builder = Resource::builder().with_attributes(attributes);
    match service {
        Some(name) => builder.with_service_name(name).build(),
        None => builder.build(),
    }
}

/// Make `span` (an invocation's, just created) a child of the X-Ray segment
/// Lambda opened for the invocation: `header` is Lambda's
/// `Root=1-...;Parent=...;Sampled=1`. Its trace id becomes the trace's and
/// its sampling decision the trace's (the default sampler follows the
/// parent), so an invocation X-Ray does not sample exports nothing. A
/// header that does not parse leaves the span a root of its own trace.
pub(crate) fn join_xray_trace(span: &tracing::Span, header: Option<&str>) {
    let Some(parent) =
        header.and_then(opentelemetry_aws::trace::xray_propagator::span_context_from_str)
    else {
        return;
    };
    // Fails only without the layer (no endpoint: nothing is exported) or
    // for a span the layer filters out: nothing to join then.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}

/// Export the spans of the invocation that just ended: force-flush the
/// batch processor, waiting at most [`FLUSH_TIMEOUT`] and never past
/// Lambda's deadline (`deadline_ms`, epoch milliseconds) less
/// [`FLUSH_RESERVE`]. Between invocations Lambda freezes the process, so
/// spans left in the queue would wait for the next invocation (or be lost
/// with the environment). The flush blocks, so it runs on tokio's blocking
/// pool; when the wait ends first it goes on there, and the invocation
/// answers.
pub(crate) async fn flush(deadline_ms: u64) {
    let provider =
        tracing::dispatcher::get_default(|d| d.downcast_ref::<Provider>().map(|p| p.0.clone()));
    let Some(provider) = provider else {
        return;
    };
    let left = deadline_from_epoch_ms(deadline_ms)
        .saturating_duration_since(tokio::time::Instant::now())
        .saturating_sub(FLUSH_RESERVE);
    let bound = FLUSH_TIMEOUT.min(left);
    if bound.is_zero() {
        tracing::warn!("no time left before the deadline to export this invocation's spans");
        return;
    }
    let flushing = tokio::task::spawn_blocking(move || provider.force_flush());
    match tokio::time::timeout(bound, flushing).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "could not export this invocation's spans"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the span flush task failed"),
        Err(_) => tracing::warn!(
            bound_ms = bound.as_millis() as u64,
            "the span export did not finish in time; answering without waiting for it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(env: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_traces_endpoint_follows_the_otlp_rules() {
        assert_eq!(traces_endpoint(&lookup(&[])), None);
        assert_eq!(
            traces_endpoint(&lookup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])),
            None
        );
        assert_eq!(
            traces_endpoint(&lookup(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://localhost:4318/"
            )]))
            .as_deref(),
            Some("http://localhost:4318/v1/traces")
        );
        assert_eq!(
            traces_endpoint(&lookup(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://127.0.0.1:9/traces"
                )
            ]))
            .as_deref(),
            Some("http://127.0.0.1:9/traces")
        );
    }

    #[test]
    fn only_our_spans_and_the_sdks_operation_spans_are_exported() {
        let ours_at_info = |target: &str| !NOT_OURS.iter().any(|t| under(target, t));
        assert!(ours_at_info("lambda_idempotency::function"));
        assert!(ours_at_info("order_consumer::orders"));
        assert!(ours_at_info("payment_ledger"));
        assert!(!ours_at_info("lambda_runtime::layers::trace"));
        assert!(!ours_at_info("aws_config::imds"));
        assert!(!ours_at_info("hyper_util::client"));
        assert!(under("order_consumer", "order_consumer"));
        assert!(under("order_consumer::orders", "order_consumer"));
        assert!(!under("order_consumer_extra", "order_consumer"));
        assert!(under(
            "aws_sdk_dynamodb::operation::update_item",
            "aws_sdk_dynamodb"
        ));
        assert!(!under("aws_config::imds", "aws_sdk_dynamodb"));
    }
}
