//! Just enough HTTP/1.1 for the local servers of the test support: the
//! Runtime API emulator (`runtime_api`), the fault proxy (`proxy`), the
//! notification provider (`provider`): the modules above this one) and
//! the tests' own small fakes (SSM). One reader for all of them, so that
//! keep-alive, chunked bodies and the bounds are handled once, and correctly,
//! instead of by a copy per server that each get a little wrong.
//!
//! It reads one message (request or response) with a Content-Length or
//! chunked body, keeps the raw bytes so a proxy can forward them untouched,
//! and writes simple responses. Bounded: headers at most 64 KiB, bodies at
//! most 64 MiB, a write at most 30 s, so a hostile or stuck peer fails a test
//! instead of wedging it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One HTTP/1.1 message.
#[derive(Debug, Clone)]
pub struct Message {
    /// `POST /path HTTP/1.1` or `HTTP/1.1 200 OK`.
    pub start_line: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunked bodies are de-chunked).
    pub body: Vec<u8>,
    /// The bytes exactly as read from the wire (head and body).
    pub raw: Vec<u8>,
}

impl Message {
    /// A header's value; `name` is lower case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `(method, path)` of a request.
    pub fn request_line(&self) -> (&str, &str) {
        let mut it = self.start_line.split_whitespace();
        (it.next().unwrap_or(""), it.next().unwrap_or(""))
    }

    /// `Connection: close`: the peer ends the connection after this message.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A buffered reader over a socket (or a socket half) that can read
/// consecutive messages (keep-alive) without losing bytes between them.
pub struct Reader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R> Reader<R> {
    /// A reader over `inner`, with an empty buffer.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::new(),
        }
    }

    /// The socket itself, to write answers on a whole `TcpStream` (the
    /// buffer holds only bytes read, so writing through it loses nothing).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

impl<R: AsyncRead + Unpin> Reader<R> {
    async fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.inner.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Read one message. `Ok(None)` on a clean EOF before any byte of it.
    /// A message without Content-Length or chunking has an empty body (our
    /// peers never send bodies delimited by connection close).
    pub async fn read_message(&mut self) -> std::io::Result<Option<Message>> {
        let head_end = loop {
            if let Some(p) = find(&self.buf, b"\r\n\r\n") {
                break p + 4;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("HTTP head too large"));
            }
            if !self.fill().await? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(std::io::ErrorKind::UnexpectedEof.into())
                };
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        let mut lines = head.split("\r\n");
        let start_line = lines.next().unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let chunked =
            get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let (body, consumed) = if chunked {
            self.read_chunked(head_end).await?
        } else {
            let len: usize = match get("content-length") {
                Some(v) => v.parse().map_err(|_| invalid("bad Content-Length"))?,
                None => 0,
            };
            if len > MAX_BODY {
                return Err(invalid("HTTP body too large"));
            }
            while self.buf.len() < head_end + len {
                if !self.fill().await? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            (self.buf[head_end..head_end + len].to_vec(), head_end + len)
        };
        let raw: Vec<u8> = self.buf.drain(..consumed).collect();
        Ok(Some(Message {
            start_line,
            headers,
            body,
            raw,
        }))
    }

    /// De-chunk the body starting at `start`; returns it and the offset just
    /// past the terminating chunk (and trailers).
    async fn read_chunked(&mut self, start: usize) -> std::io::Result<(Vec<u8>, usize)> {
        let mut pos = start;
        let mut body = Vec::new();
        loop {
            let line_end = self.line_end(pos).await?;
            let size_txt = String::from_utf8_lossy(&self.buf[pos..line_end]).into_owned();
            let size = usize::from_str_radix(size_txt.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| invalid("bad chunk size"))?;
            pos = line_end + 2;
            if size == 0 {
                // Trailers until an empty line.
                loop {
                    let end = self.line_end(pos).await?;
                    let empty = end == pos;
                    pos = end + 2;
                    if empty {
                        return Ok((body, pos));
                    }
                }
            }
            if body.len() + size > MAX_BODY {
                return Err(invalid("HTTP body too large"));
            }
            while self.buf.len() < pos + size + 2 {
                if !self.fill().await? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            body.extend_from_slice(&self.buf[pos..pos + size]);
            pos += size + 2;
        }
    }

    /// The offset of the CRLF that ends the line starting at `pos`, reading
    /// until it arrives (a chunk-size or trailer line, at most 64 KiB).
    async fn line_end(&mut self, pos: usize) -> std::io::Result<usize> {
        loop {
            if let Some(p) = find(&self.buf[pos..], b"\r\n") {
                return Ok(pos + p);
            }
            if self.buf.len() - pos > MAX_HEAD {
                return Err(invalid("HTTP chunk line too long"));
            }
            if !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn invalid(msg: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// Serialize a response with a Content-Length body.
pub fn response(status: u16, reason: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Write `bytes` and flush, failing after 30 s.
pub async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    // A peer that stops reading must not wedge a test forever.
    tokio::time::timeout(Duration::from_secs(30), async {
        w.write_all(bytes).await?;
        w.flush().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "write timed out"))?
}
