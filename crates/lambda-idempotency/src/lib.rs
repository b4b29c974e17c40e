#![doc = include_str!("../README.md")]
// # Layout (for contributors)
//
// Idempotent message consumers on AWS Lambda: at-least-once delivery in,
// effects that happen once out. What an adopter of `Function` names is at
// the crate root (`Handler`, `Verdict`, `verdicts!`, `Function`,
// `Settings`, `StoreError`, the records a handler reads, `Idempotent` and
// its store); the modules that stay public are those whose many items read
// better with their path (`config`, `wire`, `time`, `metrics`,
// `bootstrap`, `backoff`, `sequence`, `engine`: the batch engine and the
// Lambda event types for who drives it without `Function`, and with their
// features `dynamo`, `redelivery`, `idempotency` and `http`).
//
// The modules form layers; a module uses only modules of lower layers
// (`scripts/check_module_cycles.py` fails on a cycle):
//
// 1. `time` (epoch milliseconds, RFC 3339, attempt ids), `error` (the
//    SDK-free [`StoreError`], [`ConfigError`], [`TraceSetupError`]),
//    [`wire`] (the body reading every parser shares, [`ParseError`], the
//    validated newtypes).
// 2. `backoff` (how long a failed message stays invisible, per
//    [`RetryClass`]), [`sequence`] (why a write in a key's numbered
//    sequence of events was refused, decided from the item), `records`
//    (the Lambda events read strictly, what the batch needs of each
//    record: [`BatchRecord`], [`BatchEvent`]; a message's bytes whatever
//    its source: [`MessageRecord`]).
// 3. [`config`] (the [`Settings`] every function reads the same way, and
//    the variables' parsers), `outcome` ([`RecordOutcome`]: a verdict or
//    one of the shared outcomes; the [`Verdict`] trait), `dynamo` (feature `dynamodb`: the client's retry
//    and timeout policy, conditional writes, SDK errors mapped once).
// 4. [`metrics`] (the per-invocation CloudWatch EMF line), `idempotency`
//    (feature `idempotency`: any async function once per key; a DynamoDB
//    store of claimed, completed and replayed keys, and its transactional
//    form; uses `dynamo`, `time`, `error`).
// 5. `batch` (the engine: [`process`] parses every record, groups them,
//    applies each group in order with bounded concurrency, honours strict
//    ordering and the deadline, logs one line per record, and builds the
//    partial-batch answer).
// 6. `redelivery` (feature `sqs`: sets the back-off delay on the SQS
//    messages a batch returns), `otel` (feature `otel`: OpenTelemetry
//    traces over OTLP), `http` (feature `http`: the Idempotency-Key
//    layer for `lambda_http` services, on the `idempotency` store; uses
//    `batch` for the invocation's deadline, `time`, `error`).
// 7. [`bootstrap`] (logging, clients and traces, once per cold start).
// 8. `function` (the Lambda function every consumer is: [`Function`],
//    built with [`Function::builder`]).
//
// # Features
//
// `sqs` (SQS standard and FIFO records, their partial-batch response, the
// visibility back-off), `dynamodb-streams` (stream records and their
// response), `dynamodb` (the `dynamo` helpers and
// `bootstrap::dynamodb_client`): all three by default. `otel`: traces.
// `kinesis` (off by default): Kinesis Data Streams records
// (`KinesisBatch`, `KinesisMessage`: data decoded per record, grouped by
// partition key, strictly ordered, answered by sequence number); a
// handler generic over [`MessageRecord`] serves SQS and Kinesis alike.
// `kafka` (off by default): Amazon MSK and self-managed Apache Kafka
// records (`KafkaBatch`, `KafkaMessage`: key, value and headers decoded per
// record, grouped per topic-partition in offset order, a partition stopped
// at its first failure, answered by topic-partition and offset); a
// `MessageRecord` too.
// `idempotency` (implies `dynamodb`): any async function once per key,
// the `idempotency` module. `http` (implies `idempotency`): the
// Idempotency-Key layer for `lambda_http` handlers, the `http` module.
//
// What adopters build on: every public item says what it is for.
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Logs go through `tracing`; the one stdout writer is the EMF line (metrics).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod backoff;
mod batch;
pub mod bootstrap;
pub mod config;
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub mod dynamo;
mod error;
mod function;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
#[cfg(feature = "idempotency")]
#[cfg_attr(docsrs, doc(cfg(feature = "idempotency")))]
pub mod idempotency;
pub mod metrics;
#[cfg(feature = "otel")]
mod otel;
mod outcome;
mod records;
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub mod redelivery;
pub mod sequence;
pub mod time;
pub mod wire;

pub use backoff::RetryClass;
pub use batch::{BatchContext, BatchError, Handler};
pub use config::{BatchSettings, KeyOrder, Settings, WholeBatchFailure};
pub use error::{ConfigError, StoreError};
pub use function::{BuildError, Function, FunctionBuilder};
#[cfg(feature = "idempotency")]
#[cfg_attr(docsrs, doc(cfg(feature = "idempotency")))]
pub use idempotency::{
    IdempotencyError, IdempotencyOptions, IdempotencyStore, IdempotencyTable, Idempotent,
};
pub use outcome::{Failure, RecordOutcome, Skip, Verdict, labels};
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub use records::KafkaMessage;
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
pub use records::KinesisMessage;
pub use records::{BatchRecord, MessageRecord};
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use redelivery::Redelivery;
pub use wire::ParseError;

/// The DynamoDB stream record a handler's `Record` is on a table's stream.
#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
pub use aws_lambda_events::event::dynamodb::EventRecord as StreamRecord;
/// Lambda's Kinesis record, what [`KinesisMessage::record`] holds.
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
pub use aws_lambda_events::event::kinesis::KinesisEventRecord;
/// The SQS record a handler's `Record` is on an SQS queue.
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use aws_lambda_events::event::sqs::SqsMessage;

pub mod engine {
    //! The engine under [`Function`](crate::Function), for a function that
    //! drives it itself: its own runtime loop, its own answer, a test of a
    //! handler without Lambda. [`process`] runs one batch of a handler's
    //! records and reports each; the input types read Lambda's events
    //! strictly ([`StrictInput`]), the [`BatchEvent`]s hold the records
    //! and build each source's partial-batch answer from the failed ids.
    //! A function served by [`Function`](crate::Function) names none of
    //! this.
    //!
    //! ```
    //! # #[cfg(feature = "sqs")]
    //! # {
    //! use lambda_idempotency::engine::{BatchEvent, SqsBatchResponse, SqsEvent};
    //!
    //! // What a function answers when message m-1 must come back.
    //! let answer: SqsBatchResponse = SqsEvent::response(vec!["m-1".to_owned()]);
    //! assert_eq!(answer.batch_item_failures[0].item_identifier, "m-1");
    //! # }
    //! ```

    pub use crate::batch::{BatchReport, RecordReport, Starved, process, record_span};
    pub use crate::config::Telemetry;
    pub use crate::error::TraceSetupError;
    pub use crate::function::{ColdStart, invocation_span};
    pub use crate::records::{BatchEvent, Redeliverable, StrictInput};

    #[cfg(feature = "sqs")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
    pub use crate::records::SqsInput;
    /// The SQS event, and its partial-batch answer.
    #[cfg(feature = "sqs")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
    pub use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};

    #[cfg(feature = "dynamodb-streams")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
    pub use crate::records::StreamInput;
    /// The DynamoDB stream event, and its partial-batch answer.
    #[cfg(feature = "dynamodb-streams")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
    pub use aws_lambda_events::event::{
        dynamodb::Event as StreamEvent, streams::DynamoDbEventResponse,
    };

    #[cfg(feature = "kinesis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
    pub use crate::records::KinesisBatch;
    /// Lambda's Kinesis event, and the partial-batch answer listing
    /// sequence numbers.
    #[cfg(feature = "kinesis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
    pub use aws_lambda_events::event::{kinesis::KinesisEvent, streams::KinesisEventResponse};

    #[cfg(feature = "kafka")]
    #[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
    pub use crate::records::{
        KafkaBatch, KafkaBatchItemFailure, KafkaBatchResponse, KafkaItemIdentifier,
    };
}
/// The Lambda runtime the functions run on (its `Error`, `Context`,
/// `LambdaEvent`), re-exported so adopters use the same version.
pub use lambda_runtime;
/// The logging facade the spans and levels of [`Handler`] and [`Verdict`]
/// come from.
pub use tracing;
