//! The notifier's cold-start read of its webhook URL from SSM, against a
//! tiny local server that speaks the SSM JSON protocol's GetParameter
//! (`X-Amz-Target: AmazonSSM.GetParameter`), as far as the SDK needs it:
//! through the library call, and through the `order-notifier` binary's cold
//! start with `AWS_ENDPOINT_URL` (how MiniStack points functions at itself).

use std::sync::{Arc, Mutex};

use aws_sdk_ssm::config::{BehaviorVersion, Credentials, Region};
use order_notifier::url::{PARAMETER_VAR, WebhookUrlError, read_parameter};
use serde_json::{Value, json};
use std::io::Read;

use tokio::net::TcpListener;

use orders::testing::http1::{self, Reader};

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
            while let Ok((sock, _)) = listener.accept().await {
                let requests = requests.clone();
                let parameter = parameter.clone();
                tokio::spawn(async move {
                    let mut conn = Reader::new(sock);
                    while let Ok(Some(req)) = conn.read_message().await {
                        let target = req.header("x-amz-target").map(str::to_owned);
                        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
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
                        let resp = http1::response(
                            status,
                            "X",
                            &[
                                ("Content-Type", "application/x-amz-json-1.1".into()),
                                ("x-amzn-RequestId", "test".into()),
                            ],
                            answer.to_string().as_bytes(),
                        );
                        if http1::write_all(conn.get_mut(), &resp).await.is_err() {
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

/// The `order-notifier` binary's cold start, as Lambda (or MiniStack, which
/// sets AWS_ENDPOINT_URL) runs it, against the fake SSM: its exit status (None:
/// still running after the cold start, then stopped) and everything it wrote.
async fn cold_start(ssm: &FakeSsm, parameter: &str) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_order-notifier"))
        .env_clear()
        .env("NOTIFICATIONS_TABLE", "notifications")
        .env("NOTIFY_WEBHOOK_URL_PARAMETER", parameter)
        .env("AWS_ENDPOINT_URL", &ssm.endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        // No Runtime API listens there: past the cold start the runtime
        // fails (or is stopped below).
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .env("AWS_LAMBDA_FUNCTION_NAME", "order-notifier")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the order-notifier binary");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if tokio::time::Instant::now() > deadline {
            child.kill().expect("kill");
            child.wait().expect("wait");
            break None;
        }
        // Not std's sleep: the fake SSM runs on this runtime.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut out = String::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut pipe = pipe;
        pipe.read_to_string(&mut out).expect("output");
    }
    (code, out)
}

#[tokio::test]
async fn the_binary_reads_its_webhook_url_from_ssm_at_cold_start() {
    let ssm = FakeSsm::start(Some((NAME, "SecureString", SECRET_URL))).await;
    let (_code, out) = cold_start(&ssm, NAME).await;
    assert!(
        out.contains("\"cold start\""),
        "the cold start completed:\n{out}"
    );
    let requests = ssm.requests();
    assert_eq!(requests.len(), 1, "one GetParameter per cold start");
    assert_eq!(requests[0].0.as_deref(), Some("AmazonSSM.GetParameter"));
    assert_eq!(requests[0].1["Name"], NAME);
    assert_eq!(requests[0].1["WithDecryption"], true);
    assert!(
        !out.contains("SECRET-TOKEN"),
        "the URL in the output:\n{out}"
    );
}

#[tokio::test]
async fn an_unreadable_parameter_fails_the_cold_start_with_a_clear_line() {
    let ssm = FakeSsm::start(Some((NAME, "SecureString", SECRET_URL))).await;
    let (code, out) = cold_start(&ssm, "/order-consumer/missing").await;
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}:\n{out}");
    let line = out
        .lines()
        .find(|l| l.contains("could not read the webhook URL"))
        .unwrap_or_else(|| panic!("no clear line:\n{out}"));
    assert!(line.contains("\"ERROR\""), "{line}");
    assert!(line.contains("ParameterNotFound"), "{line}");
    assert!(
        !out.contains("\"cold start\""),
        "went on without a URL:\n{out}"
    );
    assert!(!out.contains("SECRET-TOKEN"), "{out}");
}
