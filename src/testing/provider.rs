//! A local notification provider for the notifier's tests: an HTTP server on
//! 127.0.0.1:0 that deduplicates by `Idempotency-Key` like a Stripe-style
//! API (the first request with a key is accepted, later ones get the same
//! answer and change nothing), counts what it accepted, and can be told to
//! fail (an HTTP status), to redirect to itself, or to hang.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
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

#[derive(Clone)]
pub struct Provider {
    pub url: String,
    state: Arc<Mutex<State>>,
    mode: Arc<Mutex<Mode>>,
}

impl Provider {
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

    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Keys accepted, each with how many times (always 1 for a provider that
    /// deduplicates; more would mean the key changed between attempts).
    pub fn accepted(&self) -> HashMap<String, u32> {
        self.state.lock().unwrap().accepted.clone()
    }

    pub fn requests(&self, key: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .requests
            .get(key)
            .copied()
            .unwrap_or(0)
    }

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

    async fn serve(&self, mut sock: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some(head) = read_request(&mut sock, &mut buf).await else {
                return;
            };
            let key = header(&head, "idempotency-key");
            let method = head.split_whitespace().next().unwrap_or("").to_owned();
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
            let body = r#"{"ok":true}"#;
            let location = match mode {
                Mode::Redirect(_) => format!("Location: {}\r\n", self.url),
                _ => String::new(),
            };
            let resp = format!(
                "HTTP/1.1 {status} X\r\n{location}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if sock.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// Read one HTTP/1.1 request from `sock` (its head, then Content-Length
/// bytes of body) and return the head; None when the connection ends.
/// `buf` carries bytes already read past the request over to the next call.
pub async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    read_request_with_body(sock, buf)
        .await
        .map(|(head, _)| head)
}

/// [`read_request`], keeping the body.
pub async fn read_request_with_body(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf.drain(..head_end + len).skip(head_end).collect();
    Some((head, body))
}

/// A header's value, by case-insensitive name.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}
