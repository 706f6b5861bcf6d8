//! The smallest HTTP/1.1 client that the examples' self-checks and the benchmark's load need,
//! written by hand: a request line, a `Host` header, and answers framed by `Content-Length`
//! (which is how hyper frames a body it knows the length of). A real program would use a crate
//! such as reqwest or hyper's client; this one costs the load generator as little CPU as
//! possible, and is the same for every server it measures.
//!
//! - [`parse_head`] (pure): the status and the framing of a response, from its first bytes.
//! - [`get_once`]: one blocking request on a connection closed after the answer (`--once`).
//! - [`run_round`]: keep-alive connections, each sending requests back to back for a while,
//!   on the tokio runtime that polls it (the benchmark's load).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest response head accepted: a server sending more is not one of ours.
pub const MAX_HEAD: usize = 16 * 1024;

/// The head of a response: its status code and where its body starts and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The status code (`200`).
    pub status: u16,
    /// The length of the head, up to and including the blank line that ends it.
    pub head_len: usize,
    /// The length of the body (`Content-Length`).
    pub body_len: usize,
}

impl Head {
    /// The length of the whole response, head and body.
    pub fn total_len(&self) -> usize {
        self.head_len + self.body_len
    }
}

/// Reads the head of the response that `bytes` begin with: `Ok(None)` while the blank line
/// that ends it has not arrived yet.
///
/// # Errors
///
/// A head longer than [`MAX_HEAD`], not text, without an HTTP/1 status line, with a header
/// line without a colon, without a `Content-Length`, with two that differ, or with a
/// `Transfer-Encoding` (this client reads only bodies of a known length).
pub fn parse_head(bytes: &[u8]) -> Result<Option<Head>, String> {
    let Some(end) = bytes.windows(4).position(|window| window == b"\r\n\r\n") else {
        if bytes.len() > MAX_HEAD {
            return Err(format!("no end of the response's head in its first {MAX_HEAD} bytes"));
        }
        return Ok(None);
    };
    if end > MAX_HEAD {
        return Err(format!("a response head of {end} bytes (at most {MAX_HEAD} expected)"));
    }
    let head =
        std::str::from_utf8(&bytes[..end]).map_err(|_| "the response's head is not text".to_owned())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut words = status_line.splitn(3, ' ');
    if !words.next().is_some_and(|version| version.starts_with("HTTP/1.")) {
        return Err(format!("not an HTTP/1 status line: {status_line:?}"));
    }
    let status = words
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (100..=999).contains(code))
        .ok_or_else(|| format!("no status code in {status_line:?}"))?;
    let mut body_len = None;
    for line in lines {
        let (name, value) =
            line.split_once(':').ok_or_else(|| format!("a header line without a colon: {line:?}"))?;
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("content-length") {
            let len: usize =
                value.parse().map_err(|_| format!("Content-Length is not a whole number: {value:?}"))?;
            if body_len.is_some_and(|earlier| earlier != len) {
                return Err("two different Content-Length headers".to_owned());
            }
            body_len = Some(len);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!(
                "Transfer-Encoding {value:?}: this client reads only bodies with a Content-Length"
            ));
        }
    }
    let body_len = body_len.ok_or_else(|| format!("no Content-Length in the response ({status_line})"))?;
    Ok(Some(Head { status, head_len: end + 4, body_len }))
}

/// The request for `path` that keeps the connection open (HTTP/1.1's default).
pub fn keep_alive_request(addr: SocketAddr, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n")
}

/// `GET path` on a new connection to `addr`, closed by the server after its answer: the status
/// and the body. Each step (connect, write, read) waits at most `timeout`.
///
/// # Errors
///
/// What failed and why, naming the request: the connection, a timeout, a malformed answer.
pub fn get_once(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    let fail = |what: String| format!("GET {path} from {addr}: {what}");
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail(format!("cannot connect: {e}")))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| fail(format!("cannot set a read timeout: {e}")))?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| fail(format!("cannot set a write timeout: {e}")))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
        .map_err(|e| fail(format!("cannot send the request: {e}")))?;
    let mut response = Vec::new();
    // The server closes the connection after its answer (`Connection: close`).
    stream.read_to_end(&mut response).map_err(|e| fail(format!("cannot read the answer: {e}")))?;
    let head = parse_head(&response)
        .map_err(|e| fail(format!("malformed answer: {e}")))?
        .ok_or_else(|| fail("the connection closed before the end of the answer's head".to_owned()))?;
    let body = response.get(head.head_len..head.total_len()).ok_or_else(|| {
        fail(format!("the connection closed before the end of the body ({} bytes)", head.body_len))
    })?;
    let body = String::from_utf8(body.to_vec()).map_err(|e| fail(format!("the body is not text: {e}")))?;
    Ok((head.status, body))
}

/// What one round of load measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    /// From the start of the requests to the end of the last answer.
    pub elapsed: Duration,
    /// The latency of each request answered, in microseconds (from writing the request to
    /// reading the end of its answer), in no particular order.
    pub latencies_us: Vec<u32>,
}

impl Round {
    /// Requests answered per second.
    pub fn rate(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.latencies_us.len() as f64 / seconds
        } else {
            0.0
        }
    }
}

/// Opens `connections` keep-alive connections to `addr`, then sends `GET path` on each, a
/// request as soon as the previous answer has arrived, for `duration` (the requests in
/// flight then are finished and counted); every answer must be a 200. Must run on a tokio
/// runtime (it spawns one task per connection); a current-thread runtime keeps the load to
/// one thread, the same for every server measured.
///
/// # Errors
///
/// A connection that fails, is closed by the server, or gets an answer that is not a 200 or
/// that this client cannot read: the message names the address and the request.
pub async fn run_round(
    addr: SocketAddr,
    path: &str,
    connections: usize,
    duration: Duration,
) -> Result<Round, String> {
    let request: Arc<[u8]> = Arc::from(keep_alive_request(addr, path).into_bytes());
    let mut streams = Vec::with_capacity(connections);
    for _ in 0..connections {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|error| format!("cannot connect to {addr}: {error}"))?;
        // Without it, an answer written in two pieces could wait for the client's delayed ACK.
        stream.set_nodelay(true).map_err(|error| format!("cannot set TCP_NODELAY on {addr}: {error}"))?;
        streams.push(stream);
    }
    let start = Instant::now();
    let until = start + duration;
    let mut running = tokio::task::JoinSet::new();
    for stream in streams {
        running.spawn(keep_alive_loop(stream, Arc::clone(&request), until));
    }
    let mut latencies_us = Vec::new();
    let mut failure = None;
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok(Ok(latencies)) => latencies_us.extend(latencies),
            // The first failure is the one reported; the other connections end at `until`.
            Ok(Err(error)) if failure.is_none() => failure = Some(error),
            Err(error) if failure.is_none() => {
                failure = Some(format!("a load connection's task failed: {error}"))
            }
            Ok(Err(_)) | Err(_) => {}
        }
    }
    let elapsed = start.elapsed();
    match failure {
        Some(error) => Err(format!("GET {path} on {addr}: {error}")),
        None => Ok(Round { elapsed, latencies_us }),
    }
}

/// One connection's requests until `until`: the latency of each, in microseconds.
async fn keep_alive_loop(
    stream: tokio::net::TcpStream,
    request: Arc<[u8]>,
    until: Instant,
) -> Result<Vec<u32>, String> {
    let mut latencies = Vec::new();
    let mut buf = vec![0u8; MAX_HEAD];
    while Instant::now() < until {
        let sent = Instant::now();
        write_all(&stream, &request).await.map_err(|error| format!("cannot send a request: {error}"))?;
        let head = read_answer(&stream, &mut buf).await?;
        if head.status != 200 {
            let body = String::from_utf8_lossy(buf.get(head.head_len..head.total_len()).unwrap_or_default());
            return Err(format!("status {} (expected 200): {:?}", head.status, body.trim_end()));
        }
        latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    Ok(latencies)
}

/// Writes all of `bytes` (readiness, then a non-blocking write: no `io-util` feature needed).
async fn write_all(stream: &tokio::net::TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "the server closed the connection"))
            }
            Ok(n) => bytes = &bytes[n..],
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Reads one whole answer into `buf` (its head and body must fit: the benchmark's answers are
/// a few hundred bytes) and returns its head. More bytes than the answer is an error: this
/// client never pipelines, so the server had nothing more to send.
async fn read_answer(stream: &tokio::net::TcpStream, buf: &mut [u8]) -> Result<Head, String> {
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            return Err(format!("an answer longer than {} bytes", buf.len()));
        }
        stream.readable().await.map_err(|error| format!("cannot read an answer: {error}"))?;
        match stream.try_read(&mut buf[filled..]) {
            Ok(0) => return Err("the server closed the connection before its answer ended".to_owned()),
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(format!("cannot read an answer: {error}")),
        }
        if let Some(head) = parse_head(&buf[..filled])? {
            match filled.cmp(&head.total_len()) {
                std::cmp::Ordering::Less => {} // the rest of the body is on its way
                std::cmp::Ordering::Equal => return Ok(head),
                std::cmp::Ordering::Greater => {
                    return Err(format!("{} bytes after the end of an answer", filled - head.total_len()))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 2\r\n\
date: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\nok";

    #[test]
    fn a_whole_response_gives_its_status_and_framing() {
        let head = parse_head(OK).unwrap().unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.body_len, 2);
        assert_eq!(head.total_len(), OK.len());
        assert_eq!(&OK[head.head_len..], b"ok");
    }

    #[test]
    fn a_head_cut_short_is_not_yet_a_head() {
        for cut in 0..OK.len() - 2 {
            assert_eq!(parse_head(&OK[..cut]), Ok(None), "cut at {cut}");
        }
        // The head is complete before the body is: the caller reads until `total_len`.
        assert!(parse_head(&OK[..OK.len() - 1]).unwrap().is_some());
    }

    #[test]
    fn responses_this_client_cannot_read_are_errors_that_say_why() {
        let cases: [(&[u8], &str); 7] = [
            (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1 status line"),
            (b"HTTP/1.1 OK\r\ncontent-length: 0\r\n\r\n", "no status code"),
            (b"HTTP/1.1 200 OK\r\n\r\n", "no Content-Length"),
            (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "Transfer-Encoding"),
            (b"HTTP/1.1 200 OK\r\ncontent-length: two\r\n\r\n", "not a whole number"),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\nContent-Length: 2\r\n\r\n", "two different"),
            (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "without a colon"),
        ];
        for (response, expected) in cases {
            let error = parse_head(response).unwrap_err();
            assert!(error.contains(expected), "{error:?} should contain {expected:?}");
        }
        let endless = vec![b'a'; MAX_HEAD + 1];
        assert!(parse_head(&endless).unwrap_err().contains("no end"));
    }

    #[test]
    fn the_keep_alive_request_names_the_path_and_host() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            keep_alive_request(addr, "/work?ms=1"),
            "GET /work?ms=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
    }

    #[test]
    fn a_round_rate_is_answers_per_second() {
        let round = Round { elapsed: Duration::from_millis(500), latencies_us: vec![10; 100] };
        assert!((round.rate() - 200.0).abs() < 1e-9, "{}", round.rate());
        assert!(Round::default().rate().abs() < 1e-9);
    }
}
