//! The second floor of `make bench`: the empty SQS function plus what every
//! DynamoDB consumer pays at init, one `aws_config` load and one DynamoDB
//! client (the SDK's defaults), held by the handler so that neither is
//! optimised away. It sends no request.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sdk_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config);
    lambda_runtime::run(service_fn(move |_: LambdaEvent<SqsEvent>| {
        // The handler owns a handle on the client, as a real one would.
        let client = client.clone();
        async move {
            std::hint::black_box(client);
            Ok::<_, Error>(SqsBatchResponse::default())
        }
    }))
    .await
}
