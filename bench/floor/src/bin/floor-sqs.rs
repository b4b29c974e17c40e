//! The floor of `make bench`: an SQS function that does nothing but answer
//! an empty partial-batch response. What `lambda_runtime` and tokio cost on
//! their own (cold start, peak RSS, binary size).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|_: LambdaEvent<SqsEvent>| async {
        Ok::<_, Error>(SqsBatchResponse::default())
    }))
    .await
}
