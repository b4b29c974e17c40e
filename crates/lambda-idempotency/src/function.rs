//! The Lambda function every consumer is: one [`Handler`] behind the same
//! invocation wrapper, whatever the record source. It reads the deadline,
//! logs the batch, runs it ([`batch::process`]), writes the EMF line and
//! answers with the partial-batch response the source expects, or an
//! invocation error named `{function}.{case}`.

use std::sync::atomic::{AtomicBool, Ordering};

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use tokio::time::Instant;
use tracing::Instrument;

use thiserror::Error;

use crate::batch::{self, BatchError, BatchReport, Handler};
use crate::config::{BatchSettings, KeyOrder, Settings, Telemetry, WholeBatchFailure};
use crate::error::ConfigError;
use crate::metrics;
use crate::outcome::Verdict;
use crate::records::{BatchEvent, BatchRecord, StrictInput};
#[cfg(feature = "sqs")]
use crate::redelivery::{self, Redelivery};
use crate::time::{deadline_epoch_ms, deadline_from_epoch_ms};

/// A consumer's Lambda function: built once per cold start, shared by every
/// invocation.
#[derive(Debug)]
pub struct Function<H> {
    handler: H,
    runtime: Settings,
    /// Names its invocation errors: `{error_prefix}.DependencyOutage`.
    error_prefix: String,
    /// Sets the visibility of the SQS messages a batch returns (none for
    /// streams, or with `RETRY_BACKOFF=off`).
    #[cfg(feature = "sqs")]
    redelivery: Option<Redelivery>,
    /// `cold_start` in the logs and `ColdStart` in the metrics.
    cold: ColdStart,
    key_order: KeyOrder,
    whole_batch_failure: WholeBatchFailure,
}

/// True for the first invocation of a process only: `cold_start` in the
/// logs and `ColdStart` in the metrics, as Powertools reports them.
#[derive(Debug)]
pub struct ColdStart(AtomicBool);

impl Default for ColdStart {
    fn default() -> Self {
        ColdStart(AtomicBool::new(true))
    }
}

impl ColdStart {
    /// Whether this is the process's first invocation; every later call
    /// says false.
    pub fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// The invocation's span: the keys Powertools users search by, on every
/// line logged inside it (the records' spans are its children).
pub fn invocation_span(
    telemetry: &Telemetry,
    cold_start: bool,
    cx: &lambda_runtime::Context,
) -> tracing::Span {
    let span = tracing::info_span!(
        "invocation",
        service = %telemetry.service,
        cold_start,
        function_name = %telemetry.function_name,
        function_memory_size = cx.env_config.memory,
        function_arn = %cx.invoked_function_arn,
        function_request_id = %cx.request_id,
        xray_trace_id = tracing::field::Empty,
    );
    if let Some(trace) = &cx.xray_trace_id {
        span.record("xray_trace_id", trace.as_str());
    }
    // Before anything enters it: a started span's parent is fixed.
    crate::bootstrap::join_xray_trace(&span, cx.xray_trace_id.as_deref());
    span
}

/// Why [`FunctionBuilder`] refused a setting.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The name is not 1 to 64 ASCII letters and digits starting with a
    /// letter (it becomes the `errorType` prefix Lambda shows).
    #[error("a function name is 1 to 64 ASCII letters and digits, starting with a letter")]
    InvalidName,
    /// `build` was called before `name`.
    #[error("the function has no name: call FunctionBuilder::name")]
    MissingName,
    /// No [`settings`](FunctionBuilder::settings) were given, and those
    /// read from the environment are invalid (the variable and what it
    /// must be, never its value).
    #[error(transparent)]
    Settings(#[from] ConfigError),
}

/// Builds a [`Function`] from another crate:
/// `Function::builder(handler).name("Points").build()?` (its settings read
/// from the environment), or `.settings(settings)` before `build`.
#[derive(Debug)]
pub struct FunctionBuilder<H> {
    handler: H,
    name: Option<String>,
    settings: Option<Settings>,
    #[cfg(feature = "sqs")]
    redelivery: Option<Redelivery>,
    key_order: KeyOrder,
    whole_batch_failure: WholeBatchFailure,
}

impl<H> FunctionBuilder<H> {
    /// On an SQS standard queue, whether a failed record holds back the
    /// rest of its key in the batch ([`KeyOrder::Strict`]) or not
    /// ([`KeyOrder::Ranked`], the default). FIFO queues and streams are
    /// always strict per group.
    pub fn key_order(mut self, order: KeyOrder) -> Self {
        self.key_order = order;
        self
    }

    /// What a batch whose every record failed on a dependency answers:
    /// an invocation error ([`WholeBatchFailure::FailInvocation`], the
    /// default) or the partial-batch response listing every record
    /// ([`WholeBatchFailure::ReportEach`]).
    pub fn whole_batch_failure(mut self, whole: WholeBatchFailure) -> Self {
        self.whole_batch_failure = whole;
        self
    }

    /// The function's name in its invocation errors' `errorType`
    /// (`{name}.DependencyOutage`): 1 to 64 ASCII letters and digits,
    /// starting with a letter, so the type stays one searchable token.
    /// Checked, with everything else, by [`build`](Self::build).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// How its batches run and where its metrics go. Without it,
    /// [`build`](Self::build) reads them from the environment, as
    /// `Settings::from_env(name, name)` does (the function's name is then
    /// the default metrics namespace and service); give them to read
    /// other defaults, or through [`Settings::from_lookup`] in tests.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// Sets the visibility of the SQS messages a batch returns (built once
    /// per cold start by `bootstrap::redelivery`); `None`, the default,
    /// leaves them to the queue's visibility timeout.
    #[cfg(feature = "sqs")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
    pub fn redelivery(mut self, redelivery: Option<Redelivery>) -> Self {
        self.redelivery = redelivery;
        self
    }

    /// The function, once it has a valid name and settings (given, or
    /// read from the environment once, here): the one place a builder can
    /// fail.
    pub fn build(self) -> Result<Function<H>, BuildError> {
        self.build_from(&|var: &str| std::env::var(var).ok())
    }

    /// [`build`](Self::build), the environment read through `get`.
    fn build_from(self, get: &impl Fn(&str) -> Option<String>) -> Result<Function<H>, BuildError> {
        let name = self.name.ok_or(BuildError::MissingName)?;
        let valid = (1..=64).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(BuildError::InvalidName);
        }
        let runtime = match self.settings {
            Some(settings) => settings,
            None => Settings::from_lookup(get, &name, &name)?,
        };
        Ok(Function {
            handler: self.handler,
            error_prefix: name,
            runtime,
            #[cfg(feature = "sqs")]
            redelivery: self.redelivery,
            cold: ColdStart::default(),
            key_order: self.key_order,
            whole_batch_failure: self.whole_batch_failure,
        })
    }
}

impl<H> Function<H> {
    /// Start building a function around `handler`.
    pub fn builder(handler: H) -> FunctionBuilder<H> {
        FunctionBuilder {
            handler,
            name: None,
            settings: None,
            #[cfg(feature = "sqs")]
            redelivery: None,
            key_order: KeyOrder::default(),
            whole_batch_failure: WholeBatchFailure::default(),
        }
    }

    /// The consumer's handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// How its batches run.
    pub fn settings(&self) -> BatchSettings {
        BatchSettings {
            key_order: self.key_order,
            whole_batch_failure: self.whole_batch_failure,
            ..self.runtime.batch()
        }
    }

    /// Serve invocations of records `R` until the runtime stops: the
    /// event source the function is subscribed to. A handler of one source
    /// needs no annotation (`serve()`); one for any source says which
    /// (`serve::<KinesisMessage>()`), as the event source mapping does.
    /// Each event is read strictly ([`StrictInput`]): an event or record that is not a JSON
    /// object fails the invocation (the whole batch returns) instead of
    /// being read as a record with an invented id.
    ///
    /// On Lambda Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY` > 1) one
    /// process serves that many invocations at once. What they share is
    /// behind this `Arc` and made to be shared: the handler's clients, its
    /// warm cache (which only learns what DynamoDB confirmed, whichever
    /// invocation asked), the cold-start flag. The deadline, the report and
    /// the metrics line are each invocation's own. Unset or 1, invocations
    /// run one at a time, exactly as with `lambda_runtime::run`.
    pub async fn serve<R>(self) -> Result<(), lambda_runtime::Error>
    where
        R: BatchRecord + 'static,
        H: Handler<R> + Send + Sync + 'static,
    {
        let function = std::sync::Arc::new(self);
        lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<Input<R>>| {
            let function = function.clone();
            async move {
                let event = LambdaEvent::new(event.payload.into_inner(), event.context);
                function.handle(event).await
            }
        }))
        .await
    }

    /// The Lambda entry point: run the batch, emit its metrics line, answer.
    pub async fn handle<E: BatchEvent>(
        &self,
        event: LambdaEvent<E>,
    ) -> Result<E::Response, Diagnostic>
    where
        H: Handler<E::Record>,
    {
        let cold_start = self.cold.take();
        let span = invocation_span(&self.runtime.telemetry, cold_start, &event.context);
        let deadline_ms = deadline_epoch_ms(event.context.deadline);
        // The span is closed when the instrumented future is dropped, at
        // the end of this statement: the flush then exports it.
        let answer = self
            .run(event, deadline_ms, cold_start)
            .instrument(span)
            .await;
        crate::bootstrap::flush_traces(deadline_ms).await;
        answer
    }

    /// `deadline_ms`: the invocation's deadline, as [`deadline_epoch_ms`]
    /// reads it.
    async fn run<E: BatchEvent>(
        &self,
        event: LambdaEvent<E>,
        deadline_ms: u64,
        cold_start: bool,
    ) -> Result<E::Response, Diagnostic>
    where
        H: Handler<E::Record>,
    {
        let deadline = deadline_from_epoch_ms(deadline_ms);
        tracing::info!(
            request_id = %event.context.request_id,
            records = event.payload.records().len(),
            deadline_ms,
            remaining_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64,
            "batch received"
        );
        let (report, response) = self.handle_batch(&event.payload, deadline).await;
        #[cfg(feature = "sqs")]
        let visibility = self.redelivery.is_some();
        #[cfg(not(feature = "sqs"))]
        let visibility = false;
        emit_metrics(&self.runtime, &report, visibility, cold_start);
        response.map_err(|e| e.diagnostic(&self.error_prefix))
    }

    /// Process a batch and build the response, keeping the per-record report
    /// for callers that show it (tests, the local demo).
    pub async fn handle_batch<E: BatchEvent>(
        &self,
        event: &E,
        deadline: Instant,
    ) -> (
        BatchReport<H::Verdict, H::Failure>,
        Result<E::Response, BatchError>,
    )
    where
        H: Handler<E::Record>,
    {
        #[cfg_attr(not(feature = "sqs"), allow(unused_mut))]
        let mut report =
            batch::process(&self.handler, self.settings(), event.records(), deadline).await;
        let response = report
            .failures_with(self.whole_batch_failure)
            .map(E::response);
        #[cfg(feature = "sqs")]
        if let Some(redelivery) = &self.redelivery {
            // After the failure list is final, before answering: the delay
            // only decides when a returned message comes back.
            let plan = redelivery::plan(
                redelivery.policy(),
                event.records(),
                &report,
                crate::backoff::jitter,
            );
            let until = redelivery::cutoff(deadline, self.runtime.deadline_margin, Instant::now());
            report.visibility = redelivery.apply(plan, until).await;
        }
        match &response {
            Err(e) => tracing::error!(error = %e, "failing the invocation"),
            Ok(_) if report.is_outage() => tracing::warn!(
                records = report.records.len(),
                "every record failed on a dependency; all are returned in the partial-batch response (WholeBatchFailure::ReportEach)"
            ),
            Ok(_) => {}
        }
        (report, response)
    }
}

/// The Lambda event that carries records `R`, as `serve` reads it.
type Input<R> = <<R as BatchRecord>::Event as BatchEvent>::Input;

/// The invocation's EMF line: a count per outcome, the batch size, the
/// cache's hits and misses, and, for a function that sets returned
/// messages' visibility, how many it set and how many it could not.
pub(crate) fn emit_metrics<V: Verdict, F>(
    runtime: &Settings,
    report: &BatchReport<V, F>,
    visibility: bool,
    cold_start: bool,
) {
    let mut extra = vec![
        ("ColdStart", u64::from(cold_start)),
        ("BatchSize", report.records.len() as u64),
        ("CacheHits", report.cache_hits),
        ("CacheMisses", report.cache_misses),
    ];
    if visibility {
        extra.push(("VisibilityChanged", report.visibility.changed));
        extra.push(("VisibilityFailed", report.visibility.failed));
    }
    metrics::emit(&metrics::emf_document(
        &runtime.telemetry,
        &report.counts(),
        &extra,
    ));
}

#[cfg(all(test, feature = "sqs"))]
mod tests {
    use super::*;
    use crate::batch::BatchContext;
    use crate::error::StoreError;
    use crate::wire::ParseError;
    use aws_lambda_events::event::sqs::SqsMessage;

    #[derive(Debug, Clone)]
    struct Done;

    impl std::fmt::Display for Done {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Done")
        }
    }

    impl Verdict for Done {
        const LABELS: &'static [&'static str] = &["Done"];
        fn acknowledge(&self) -> bool {
            true
        }
        fn label(&self) -> &'static str {
            "Done"
        }
    }

    struct Nothing;

    impl Handler<SqsMessage> for Nothing {
        type Event = ();
        type Verdict = Done;
        type Failure = StoreError;
        fn parse(&self, _: &SqsMessage) -> Result<(), ParseError> {
            Ok(())
        }
        fn key(&self, _: &()) -> String {
            String::new()
        }
        fn rank(&self, _: &()) -> u64 {
            0
        }
        fn span(&self, _: &str, _: Option<&()>) -> tracing::Span {
            tracing::Span::none()
        }
        async fn apply(&self, _: &(), _: &BatchContext) -> Result<Done, StoreError> {
            Ok(Done)
        }
    }

    fn settings() -> Settings {
        Settings::from_lookup(&|_: &str| None, "Ns", "fn").unwrap_or_else(|e| panic!("{e}"))
    }

    /// A handler whose every write fails, with the defaults the trait
    /// gives (no `rank`, no `span`).
    struct Down;

    impl Handler<SqsMessage> for Down {
        type Event = ();
        type Verdict = Done;
        type Failure = StoreError;
        fn parse(&self, _: &SqsMessage) -> Result<(), ParseError> {
            Ok(())
        }
        fn key(&self, _: &()) -> String {
            String::new()
        }
        async fn apply(&self, _: &(), _: &BatchContext) -> Result<Done, StoreError> {
            Err(StoreError::Throttled {
                code: "ThrottlingException".into(),
            })
        }
    }

    fn two_messages() -> aws_lambda_events::event::sqs::SqsEvent {
        let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
        for id in ["m1", "m2"] {
            let mut m = SqsMessage::default();
            m.message_id = Some(id.into());
            m.body = Some("{}".into());
            event.records.push(m);
        }
        event
    }

    /// The function's choice reaches its answer: by default a whole-batch
    /// outage is an invocation error; with `ReportEach`, the partial-batch
    /// response lists every record.
    #[tokio::test]
    async fn a_whole_batch_outage_is_the_functions_choice() {
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let event = two_messages();
        let default = Function::builder(Down)
            .name("Down")
            .settings(settings())
            .build();
        let Ok(default) = default else {
            panic!("builds")
        };
        let (_, answer) = default.handle_batch(&event, deadline).await;
        assert_eq!(answer.err(), Some(BatchError::Outage(2)));
        let each = Function::builder(Down)
            .name("Down")
            .settings(settings())
            .whole_batch_failure(WholeBatchFailure::ReportEach)
            .key_order(KeyOrder::Strict)
            .build();
        let Ok(each) = each else { panic!("builds") };
        assert_eq!(each.settings().key_order, KeyOrder::Strict);
        let (_, answer) = each.handle_batch(&event, deadline).await;
        let Ok(answer) = answer else {
            panic!("a partial-batch response")
        };
        let ids: Vec<_> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["m1", "m2"]);
    }

    #[test]
    fn the_builder_validates_the_name_and_reads_missing_settings() {
        for bad in [
            "",
            "1st",
            "Order-Consumer",
            "Orders.Consumer",
            &"x".repeat(65),
        ] {
            assert_eq!(
                Function::builder(Nothing)
                    .name(bad)
                    .settings(settings())
                    .build()
                    .err(),
                Some(BuildError::InvalidName),
                "{bad:?}"
            );
        }
        assert_eq!(
            Function::builder(Nothing)
                .settings(settings())
                .build()
                .err(),
            Some(BuildError::MissingName)
        );
        // Without settings, they are read from the environment: the
        // function's name is the default namespace and service, and a bad
        // variable is the builder's error (naming it, not its value).
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(v, _)| *v == k)
                    .map(|(_, x)| (*x).to_owned())
            }
        };
        let read = Function::builder(Nothing)
            .name("Orders")
            .build_from(&env(&[("MAX_CONCURRENCY", "3")]));
        let Ok(read) = read else {
            panic!("settings read from the environment must build");
        };
        assert_eq!(read.settings().max_concurrency(), 3);
        assert_eq!(read.runtime.telemetry().metrics_namespace, "Orders");
        assert_eq!(read.runtime.telemetry().service, "Orders");
        let bad = Function::builder(Nothing)
            .name("Orders")
            .build_from(&env(&[("MAX_CONCURRENCY", "lots")]));
        let Err(BuildError::Settings(err)) = bad else {
            panic!("an invalid variable must refuse the build");
        };
        assert!(err.to_string().contains("MAX_CONCURRENCY"), "{err}");
        assert!(!err.to_string().contains("lots"), "{err}");
        let built = Function::builder(Nothing)
            .name("Orders2")
            .settings(settings())
            .build();
        let Ok(function) = built else {
            panic!("a valid function must build");
        };
        assert_eq!(function.error_prefix, "Orders2");
        assert_eq!(function.settings(), BatchSettings::default());
        assert!(function.redelivery.is_none());
    }
}
