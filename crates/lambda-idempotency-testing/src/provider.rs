//! A local notification provider for the notifier's tests: an HTTP server on
//! 127.0.0.1:0 that deduplicates by `Idempotency-Key` like a Stripe-style
//! API (the first request with a key is accepted, later ones get the same
//! answer and change nothing), counts what it accepted, and can be told to
//! fail (an HTTP status), to redirect to itself, or to hang. It reads
//! requests with the shared [`super::http1`] reader.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use super::http1::{self, Reader};

/// How the provider answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Accept: the first request with a key is accepted, a repeat gets
    /// the same answer and changes nothing.
    Accept,
    /// Answer every request with this status (nothing is accepted).
    Fail(u16),
    /// Answer every request with this 3xx and a `Location` back to the
    /// provider itself (what a client that follows redirects would then
    /// request, as a GET for 301/302/303).
    Redirect(u16),
    /// Read the request and never answer.
    Hang,
}

#[derive(Default)]
struct State {
    /// Idempotency-Key -> times accepted (a correct provider: at most 1).
    accepted: HashMap<String, u32>,
    /// Idempotency-Key -> requests received (resends included).
    requests: HashMap<String, u32>,
    /// Requests without an Idempotency-Key.
    unkeyed: u32,
    /// Method -> requests received with it.
    methods: HashMap<String, u32>,
}

/// A local webhook receiver that deduplicates by `Idempotency-Key` and
/// counts what it received.
#[derive(Clone)]
pub struct Provider {
    /// Where to send notifications (`http://127.0.0.1:<port>/notify`).
    pub url: String,
    state: Arc<Mutex<State>>,
    mode: Arc<Mutex<Mode>>,
}

impl Provider {
    /// Listen on a free local port, in [`Mode::Accept`].
    pub async fn start() -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/notify", listener.local_addr().expect("addr"));
        let p = Provider {
            url,
            state: Arc::default(),
            mode: Arc::new(Mutex::new(Mode::Accept)),
        };
        let server = p.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move { server.serve(sock).await });
            }
        });
        p
    }

    /// Answer the following requests this way.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Keys accepted, each with how many times (always 1 for a provider that
    /// deduplicates; more would mean the key changed between attempts).
    pub fn accepted(&self) -> HashMap<String, u32> {
        self.state.lock().unwrap().accepted.clone()
    }

    /// Requests received with this key, resends included.
    pub fn requests(&self, key: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .requests
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    /// Requests received without an `Idempotency-Key`.
    pub fn unkeyed(&self) -> u32 {
        self.state.lock().unwrap().unkeyed
    }

    /// Requests received with this method (`POST`, `GET`, ...).
    pub fn method_count(&self, method: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .methods
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    async fn serve(&self, sock: TcpStream) {
        let mut conn = Reader::new(sock);
        while let Ok(Some(req)) = conn.read_message().await {
            let key = req.header("idempotency-key").map(str::to_owned);
            let method = req.request_line().0.to_owned();
            let mode = *self.mode.lock().unwrap();
            let status = {
                let mut st = self.state.lock().unwrap();
                *st.methods.entry(method).or_default() += 1;
                match &key {
                    Some(k) => *st.requests.entry(k.clone()).or_default() += 1,
                    None => st.unkeyed += 1,
                }
                match (mode, &key) {
                    (Mode::Hang, _) => None,
                    (Mode::Fail(code) | Mode::Redirect(code), _) => Some(code),
                    (Mode::Accept, None) => Some(400),
                    (Mode::Accept, Some(k)) => {
                        if st.accepted.contains_key(k) {
                            Some(200) // a replay: same answer, nothing new
                        } else {
                            st.accepted.insert(k.clone(), 1);
                            Some(201)
                        }
                    }
                }
            };
            let Some(status) = status else {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            };
            let mut headers = vec![("Content-Type", "application/json".to_owned())];
            if let Mode::Redirect(_) = mode {
                headers.push(("Location", self.url.clone()));
            }
            let resp = http1::response(status, "X", &headers, br#"{"ok":true}"#);
            if http1::write_all(conn.get_mut(), &resp).await.is_err() {
                return;
            }
        }
    }
}
