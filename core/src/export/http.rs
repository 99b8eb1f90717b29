//! The HTTP endpoint behind `slurmwatch metrics --listen`: `GET /metrics` for Prometheus and
//! `GET /jobs/<id>/summary` for the controller's `slurmwatch slurmdbd-summary` (the job's
//! summary as JSON, to store in slurmdbd), and nothing else.
//!
//! Hand-written on `std::net` rather than a server crate: one request at a time is all a
//! Prometheus scraper needs, and the whole protocol used is a request line, headers to skip
//! and one response with `Connection: close`. What keeps a root process safe here is a
//! bound on everything a client controls: the request head is read for at most
//! [`READ_DEADLINE`] and [`MAX_REQUEST_BYTES`], writes time out, nothing from the request is
//! used except the method and path, and any other request gets a 404 (a 400 when it is not
//! HTTP at all).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::slurm::munge;

/// The longest a client may take to send its request head.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// The longest a client may take to read the response.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// The largest request head read; a longer one is refused.
pub const MAX_REQUEST_BYTES: usize = 8192;

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Metrics,
    /// `GET /jobs/<id>/summary?nonce=<hex>`: the id is all digits and fits a Slurm job id;
    /// the nonce is the controller's for this request (`munge::is_nonce`), signed with the
    /// reply.
    JobSummary {
        job_id: u32,
        nonce: String,
    },
    /// A summary asked without a well-formed nonce (an older controller, or not one at all).
    SummaryWithoutNonce,
    Other,
    Bad,
}

/// The answer to a [`Request::JobSummary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The summary as JSON, and the munge credential over it (`slurm::munge`), sent in its
    /// header.
    Json {
        body: String,
        credential: Option<String>,
    },
    /// Not recorded on this node (one sentence).
    NotFound(String),
    /// Recorded but unreadable now (one sentence): the caller may retry.
    Unavailable(String),
}

/// What the server answers with.
pub trait Routes {
    /// The exposition text for `GET /metrics`.
    fn metrics(&mut self) -> String;
    /// The job's summary for `GET /jobs/<id>/summary`, signed with `nonce`.
    fn job_summary(&mut self, job_id: u32, nonce: &str) -> Reply;
}

/// Reads the request head from `stream` within the deadlines.
fn read_request(stream: &mut TcpStream) -> Request {
    let start = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break;
        }
        let left = READ_DEADLINE.saturating_sub(start.elapsed());
        if left.is_zero() || buf.len() >= MAX_REQUEST_BYTES {
            return Request::Bad;
        }
        if stream.set_read_timeout(Some(left)).is_err() {
            return Request::Bad;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Request::Bad,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    parse_request_line(&buf)
}

/// `GET /metrics HTTP/1.x` (a query string allowed) and `GET /jobs/<id>/summary?nonce=<hex>`
/// are the requests answered.
pub fn parse_request_line(head: &[u8]) -> Request {
    let line = head.split(|&b| b == b'\n').next().unwrap_or(b"");
    let Ok(line) = std::str::from_utf8(line) else {
        return Request::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Request::Bad;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != "GET" {
        return Request::Other;
    }
    if path == "/metrics" {
        return Request::Metrics;
    }
    let job = path
        .strip_prefix("/jobs/")
        .and_then(|p| p.strip_suffix("/summary"))
        .filter(|id| !id.is_empty() && id.len() <= 10 && id.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|id| id.parse::<u32>().ok());
    let nonce = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("nonce="))
        .filter(|n| munge::is_nonce(n));
    match (job, nonce) {
        (Some(job_id), Some(n)) => Request::JobSummary {
            job_id,
            nonce: n.to_string(),
        },
        (Some(_), None) => Request::SummaryWithoutNonce,
        (None, _) => Request::Other,
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    respond_with(stream, status, content_type, None, body)
}

/// With `credential`, the munge header too (a value that is not a credential is never
/// written: it could break the head).
fn respond_with(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    credential: Option<&str>,
    body: &str,
) {
    let _ = stream.set_write_timeout(Some(WRITE_DEADLINE));
    let extra = match credential {
        Some(c) if munge::is_credential(c) => format!("{}: {c}\r\n", munge::HEADER),
        _ => String::new(),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()))
        .and_then(|_| stream.flush());
}

/// Answers one connection.
pub fn handle(mut stream: TcpStream, routes: &mut dyn Routes) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match read_request(&mut stream) {
        Request::Metrics => {
            let body = routes.metrics();
            respond(&mut stream, "200 OK", CONTENT_TYPE, &body);
        }
        Request::JobSummary { job_id, nonce } => match routes.job_summary(job_id, &nonce) {
            Reply::Json { body, credential } => respond_with(
                &mut stream,
                "200 OK",
                "application/json",
                credential.as_deref(),
                &body,
            ),
            Reply::NotFound(why) => respond(&mut stream, "404 Not Found", TEXT, &(why + "\n")),
            Reply::Unavailable(why) => {
                respond(&mut stream, "503 Service Unavailable", TEXT, &(why + "\n"))
            }
        },
        Request::Other => respond(
            &mut stream,
            "404 Not Found",
            TEXT,
            "only GET /metrics and GET /jobs/<id>/summary are served here\n",
        ),
        Request::SummaryWithoutNonce => respond(
            &mut stream,
            "400 Bad Request",
            TEXT,
            "a summary is asked with ?nonce=<32 hex digits> (the controller's slurmwatch is older than this node's)\n",
        ),
        Request::Bad => respond(&mut stream, "400 Bad Request", TEXT, "bad request\n"),
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Serves `listener` forever, one connection at a time.
pub fn serve(listener: &TcpListener, routes: &mut dyn Routes) -> ! {
    loop {
        if let Ok((stream, _)) = listener.accept() {
            handle(stream, routes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_answered() {
        assert_eq!(
            parse_request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(
            parse_request_line(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(
            parse_request_line(
                b"GET /jobs/4242/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n"
            ),
            Request::JobSummary {
                job_id: 4242,
                nonce: "00112233445566778899aabbccddeeff".into()
            }
        );
        // A summary without a nonce a node would sign: refused, not served unsigned.
        for no_nonce in [
            &b"GET /jobs/4242/summary HTTP/1.1\r\n\r\n"[..],
            b"GET /jobs/4242/summary?nonce= HTTP/1.1\r\n\r\n",
            b"GET /jobs/4242/summary?nonce=0011 HTTP/1.1\r\n\r\n",
            b"GET /jobs/4242/summary?nonce=00112233445566778899AABBCCDDEEFF HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_request_line(no_nonce), Request::SummaryWithoutNonce);
        }
        for other in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"POST /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics/x HTTP/1.1\r\n\r\n",
            b"GET /jobs/../summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/12a/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/99999999999/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs//summary HTTP/1.1\r\n\r\n",
            b"POST /jobs/1/summary HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_request_line(other), Request::Other);
        }
        for bad in [
            &b"hello\r\n\r\n"[..],
            b"GET /metrics SMTP\r\n\r\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_request_line(bad), Request::Bad);
        }
    }

    fn get(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// A real socket: the scrape runs only for GET /metrics; a client that sends nothing
    /// is dropped after the read deadline and the next one is served.
    #[test]
    fn the_server_answers_and_a_silent_client_cannot_hold_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        struct Counting(u32);
        impl Routes for Counting {
            fn metrics(&mut self) -> String {
                self.0 += 1;
                format!("scrapes {}\n", self.0)
            }
            fn job_summary(&mut self, job_id: u32, nonce: &str) -> Reply {
                match job_id {
                    7 => Reply::Json {
                        body: format!("{{\"job_id\":\"7\",\"nonce\":\"{nonce}\"}}"),
                        credential: Some("MUNGE:AwQF+/=:".into()),
                    },
                    6 => Reply::Json {
                        body: "{}".into(),
                        credential: Some("MUNGE:x\r\nSet-Cookie: y:".into()),
                    },
                    8 => Reply::Unavailable("busy".into()),
                    _ => Reply::NotFound(format!("job {job_id} was not recorded here")),
                }
            }
        }
        std::thread::spawn(move || serve(&listener, &mut Counting(0)));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE), "{ok}");
        assert!(ok.ends_with("\r\n\r\nscrapes 1\n"), "{ok}");
        let nf = get(addr, b"GET /other HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        let js = get(
            addr,
            b"GET /jobs/7/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n",
        );
        assert!(js.starts_with("HTTP/1.1 200 OK\r\n"), "{js}");
        assert!(
            js.contains("application/json")
                && js
                    .ends_with("{\"job_id\":\"7\",\"nonce\":\"00112233445566778899aabbccddeeff\"}"),
            "{js}"
        );
        assert!(
            js.contains("\r\nX-Slurmwatch-Munge: MUNGE:AwQF+/=:\r\n"),
            "{js}"
        );
        let odd = get(
            addr,
            b"GET /jobs/6/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n",
        );
        assert!(!odd.contains("Munge") && !odd.contains("Cookie"), "{odd}");
        let busy = get(
            addr,
            b"GET /jobs/8/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n",
        );
        assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
        let none = get(
            addr,
            b"GET /jobs/9/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n",
        );
        assert!(
            none.starts_with("HTTP/1.1 404") && none.contains("job 9 was not recorded"),
            "{none}"
        );
        let old = get(addr, b"GET /jobs/7/summary HTTP/1.1\r\n\r\n");
        assert!(
            old.starts_with("HTTP/1.1 400") && old.contains("?nonce="),
            "{old}"
        );
        let silent = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.ends_with("scrapes 2\n"), "{ok}");
        assert!(
            t.elapsed() < READ_DEADLINE + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        drop(silent);
    }
}
