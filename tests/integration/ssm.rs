//! The notifier's cold-start read of its webhook URL from SSM, against a
//! tiny local server that speaks the SSM JSON protocol's GetParameter
//! (`X-Amz-Target: AmazonSSM.GetParameter`), as far as the SDK needs it.

use std::sync::{Arc, Mutex};

use aws_sdk_ssm::config::{BehaviorVersion, Credentials, Region};
use order_consumer::notifier::url::{PARAMETER_VAR, WebhookUrlError, read_parameter};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::provider::{header, read_request_with_body};

/// (X-Amz-Target, JSON body) of one request.
type Request = (Option<String>, Value);

/// What the fake SSM holds: one parameter, or none.
#[derive(Clone)]
struct FakeSsm {
    endpoint: String,
    /// (X-Amz-Target, JSON body) of every request received.
    requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeSsm {
    /// `parameter`: (name, type, value) it answers for; any other name is
    /// ParameterNotFound.
    async fn start(parameter: Option<(&str, &str, &str)>) -> FakeSsm {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let parameter = parameter.map(|(n, t, v)| (n.to_owned(), t.to_owned(), v.to_owned()));
        let fake = FakeSsm {
            endpoint,
            requests: Arc::default(),
        };
        let requests = fake.requests.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let requests = requests.clone();
                let parameter = parameter.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some((head, body)) = read_request_with_body(&mut sock, &mut buf).await
                    {
                        let target = header(&head, "x-amz-target");
                        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let asked = body["Name"].as_str().unwrap_or("").to_owned();
                        requests.lock().unwrap().push((target, body));
                        let (status, answer) = match &parameter {
                            Some((name, ty, value)) if *name == asked => (
                                200,
                                json!({"Parameter": {"Name": name, "Type": ty, "Value": value,
                                       "Version": 1, "DataType": "text"}}),
                            ),
                            _ => (400, json!({"__type": "ParameterNotFound", "message": ""})),
                        };
                        let answer = answer.to_string();
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.1\r\n\
                             x-amzn-RequestId: test\r\nContent-Length: {}\r\n\r\n{answer}",
                            answer.len()
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        fake
    }

    fn client(&self) -> aws_sdk_ssm::Client {
        let conf = aws_sdk_ssm::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "static"))
            .endpoint_url(&self.endpoint)
            .build();
        aws_sdk_ssm::Client::from_conf(conf)
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

const NAME: &str = "/order-consumer/notify-webhook-url";
const SECRET_URL: &str = "https://hooks.example.com/notify?token=SECRET-TOKEN-46";

#[tokio::test]
async fn the_url_is_read_once_decrypted_from_the_named_parameter() {
    let ssm = FakeSsm::start(Some((NAME, "SecureString", SECRET_URL))).await;
    let url = read_parameter(&ssm.client(), NAME)
        .await
        .expect("the parameter's URL");
    assert_eq!(url.as_url().as_str(), SECRET_URL);
    let requests = ssm.requests();
    assert_eq!(requests.len(), 1, "one GetParameter: {requests:?}");
    let (target, body) = &requests[0];
    assert_eq!(target.as_deref(), Some("AmazonSSM.GetParameter"));
    assert_eq!(body["Name"], NAME, "exactly the configured name");
    assert_eq!(
        body["WithDecryption"], true,
        "a SecureString must be decrypted"
    );
}

#[tokio::test]
async fn a_missing_parameter_is_a_clear_error() {
    let ssm = FakeSsm::start(Some((NAME, "SecureString", SECRET_URL))).await;
    let e = read_parameter(&ssm.client(), "/order-consumer/other")
        .await
        .expect_err("no such parameter");
    assert_eq!(
        e,
        WebhookUrlError::Ssm {
            code: "ParameterNotFound".into()
        }
    );
    let msg = e.to_string();
    assert!(msg.contains("ParameterNotFound"), "{msg}");
    assert!(msg.contains(PARAMETER_VAR), "{msg}");
    assert!(!msg.contains("SECRET-TOKEN"), "{msg}");
}

#[tokio::test]
async fn a_stored_value_that_is_no_acceptable_url_fails_without_echoing_it() {
    for bad in [
        "https://exa mple/notify?token=SECRET-TOKEN-47",
        "http://hooks.example.com/notify?token=SECRET-TOKEN-47",
    ] {
        let ssm = FakeSsm::start(Some((NAME, "SecureString", bad))).await;
        let e = read_parameter(&ssm.client(), NAME)
            .await
            .expect_err("refused");
        assert!(matches!(e, WebhookUrlError::InvalidValue { .. }), "{e:?}");
        assert!(e.to_string().contains(PARAMETER_VAR), "{e}");
        assert!(!e.to_string().contains("SECRET-TOKEN"), "{e}");
        assert!(!format!("{e:?}").contains("SECRET-TOKEN"), "{e:?}");
    }
}
