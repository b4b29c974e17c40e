//! A local SQS endpoint for what the functions ask of SQS: it answers
//! `ChangeMessageVisibilityBatch` in the AWS JSON 1.0 protocol that
//! aws-sdk-sqs speaks, on 127.0.0.1 port 0, so a function started with
//! `AWS_ENDPOINT_URL_SQS` set to [`SqsEndpoint::url`] never reaches AWS.
//! Each entry goes to a callback (the reliability suite's queue simulator
//! applies it to its in-flight message), and every request is recorded.
//! It can be told to fail whole calls, to refuse every entry (the batch
//! API's per-entry failure, which the SDK reports as a success), or to hang.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use super::http1::{self, Reader};

/// How the endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Apply each entry through the callback.
    Serve,
    /// Answer every call with this HTTP status and an `InternalError`.
    Fail(u16),
    /// Answer 200 with every entry in `Failed` (`ReceiptHandleIsInvalid`).
    RefuseEntries,
    /// Read the request and never answer.
    Hang,
}

/// One entry of a `ChangeMessageVisibilityBatch` call, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The call's `QueueUrl`.
    pub queue_url: String,
    /// The entry's `ReceiptHandle`.
    pub receipt_handle: String,
    /// The entry's `VisibilityTimeout`, in seconds.
    pub visibility_secs: u64,
    /// Whether it was applied (the callback accepted it, in [`Mode::Serve`]).
    pub applied: bool,
}

/// Applies one change: `(queue_url, receipt_handle, seconds)`; `false` when
/// the receipt handle is not that of a message in flight.
pub type Apply = Arc<dyn Fn(&str, &str, u64) -> bool + Send + Sync>;

/// The endpoint. Cloning shares it.
#[derive(Clone)]
pub struct SqsEndpoint {
    /// `http://127.0.0.1:{port}`, for `AWS_ENDPOINT_URL_SQS`.
    pub url: String,
    apply: Apply,
    mode: Arc<Mutex<Mode>>,
    changes: Arc<Mutex<Vec<Change>>>,
    calls: Arc<Mutex<u64>>,
}

impl SqsEndpoint {
    /// Serve on 127.0.0.1:0, applying entries through `apply`.
    pub async fn start(apply: Apply) -> SqsEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let endpoint = SqsEndpoint {
            url,
            apply,
            mode: Arc::new(Mutex::new(Mode::Serve)),
            changes: Arc::default(),
            calls: Arc::default(),
        };
        let server = endpoint.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move { server.serve(sock).await });
            }
        });
        endpoint
    }

    /// An SQS client of this endpoint, with test credentials.
    pub fn client(&self) -> aws_sdk_sqs::Client {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "AKIDLOCAL",
                "local",
                None,
                None,
                "test",
            ))
            .endpoint_url(&self.url)
            .timeout_config(lambda_idempotency::redelivery::timeout_config())
            .build();
        aws_sdk_sqs::Client::from_conf(config)
    }

    /// Change how it answers from now on.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().expect("mode") = mode;
    }

    /// Every entry received so far, in arrival order.
    pub fn changes(&self) -> Vec<Change> {
        self.changes.lock().expect("changes").clone()
    }

    /// Calls received so far (any action, any answer).
    pub fn calls(&self) -> u64 {
        *self.calls.lock().expect("calls")
    }

    async fn serve(&self, sock: TcpStream) {
        let mut conn = Reader::new(sock);
        while let Ok(Some(req)) = conn.read_message().await {
            *self.calls.lock().expect("calls") += 1;
            let mode = *self.mode.lock().expect("mode");
            let target = req.header("x-amz-target").unwrap_or("").to_owned();
            let (status, body) = match mode {
                Mode::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                Mode::Fail(status) => (
                    status,
                    json!({"__type": "com.amazonaws.sqs#InternalError", "message": "injected failure"}),
                ),
                Mode::Serve | Mode::RefuseEntries
                    if target == "AmazonSQS.ChangeMessageVisibilityBatch" =>
                {
                    match serde_json::from_slice::<Value>(&req.body) {
                        Ok(call) => (200, self.change_batch(&call, mode == Mode::Serve)),
                        Err(_) => (
                            400,
                            json!({"__type": "com.amazonaws.sqs#InvalidParameterValue", "message": "body is not JSON"}),
                        ),
                    }
                }
                _ => (
                    400,
                    json!({"__type": "com.amazonaws.sqs#UnsupportedOperation", "message": "not implemented by the test endpoint"}),
                ),
            };
            let headers = [("Content-Type", "application/x-amz-json-1.0".to_owned())];
            let bytes = serde_json::to_vec(&body).unwrap_or_default();
            let resp = http1::response(status, "X", &headers, &bytes);
            if http1::write_all(conn.get_mut(), &resp).await.is_err() {
                return;
            }
            if req.wants_close() {
                return;
            }
        }
    }

    fn change_batch(&self, call: &Value, serve: bool) -> Value {
        let queue_url = call["QueueUrl"].as_str().unwrap_or("").to_owned();
        let (mut ok, mut failed) = (Vec::new(), Vec::new());
        for entry in call["Entries"].as_array().map_or(&[][..], Vec::as_slice) {
            let id = entry["Id"].clone();
            let receipt_handle = entry["ReceiptHandle"].as_str().unwrap_or("").to_owned();
            let visibility_secs = entry["VisibilityTimeout"].as_u64().unwrap_or(0);
            let applied = serve && (self.apply)(&queue_url, &receipt_handle, visibility_secs);
            self.changes.lock().expect("changes").push(Change {
                queue_url: queue_url.clone(),
                receipt_handle,
                visibility_secs,
                applied,
            });
            if applied {
                ok.push(json!({"Id": id}));
            } else {
                failed.push(json!({
                    "Id": id,
                    "SenderFault": true,
                    "Code": "ReceiptHandleIsInvalid",
                    "Message": "The input receipt handle is invalid."
                }));
            }
        }
        json!({"Successful": ok, "Failed": failed})
    }
}
