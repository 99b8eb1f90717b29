//! The HTTP endpoint behind `slurmwatch metrics --listen`: `GET /metrics` for Prometheus and
//! `GET /jobs/<id>/summary` for the controller's `slurmwatch ctld-epilog` (the job's summary
//! as JSON, to store in slurmdbd), and nothing else.
//!
//! Hand-written on `std::net` rather than a server crate: the whole protocol used is a
//! request line, one header and one response with `Connection: close`. It runs as root and
//! any local user can connect to it, so (issue 37):
//! - **Who may ask.** A summary is served only to a request carrying a munge credential
//!   that the routes accept ([`Routes::authorize`]: root or SlurmUser over this very job,
//!   run and nonce); a request without one is refused before any work (no `unmunge`, no
//!   file). `/metrics` is served only to the peers [`Access`] names: root's own sockets on
//!   this host, the local users and the networks the site lists (Slurm's `PrivateData=jobs`
//!   holds unless the site opens it).
//! - **No one client holds it.** Each connection is served on its own thread, for at most
//!   [`READ_DEADLINE`] to send its head and [`CONNECTION_DEADLINE`] in all; at most
//!   [`Limits::total`] connections at once and [`Limits::per_peer`] per peer (a local peer
//!   is its socket's uid, a remote one its address): past the cap a connection gets a 503 at
//!   once, so the listen queue never fills and a flooding user cannot delay the controller
//!   or Prometheus.
//! - Nothing from the request is used except the method, path, query and that header;
//!   writes time out; any other request gets a 404 (a 400 when it is not HTTP at all).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::slurm::job_id::JobId;
use crate::slurm::munge;

/// The longest a client may take to send its request head.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// The longest one connection is served: the head, the work (an `unmunge`, a file read, a
/// `munge`: each bounded) and the reply.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(20);
/// The largest request head read; a longer one is refused.
pub const MAX_REQUEST_BYTES: usize = 8192;

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which run of a job the controller asks a summary for, and the nonce the reply signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryAsk {
    pub job_id: u32,
    /// The job's uid and Slurm's start time (`analysis::admin_comment::Incarnation`).
    pub uid: u32,
    pub start_unix: i64,
    /// The controller's for this request (`munge::is_nonce`), signed with the reply.
    pub nonce: String,
}

/// What one request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Metrics,
    /// `GET /jobs/<id>/summary?nonce=<hex>&uid=<uid>&start=<unix>`, with the controller's
    /// credential (the [`munge::HEADER`] header) when there was a well-formed one.
    JobSummary {
        ask: SummaryAsk,
        credential: Option<String>,
    },
    /// A summary asked without a well-formed nonce, uid and start (an older controller, or
    /// not one at all).
    SummaryUnbound,
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

/// What the server answers with. Called from one thread per connection.
pub trait Routes: Send + Sync {
    /// The exposition text for `GET /metrics` (only for a peer [`Access`] allows).
    fn metrics(&self) -> String;
    /// Whether `credential` proves the caller is the controller asking for `ask` (`Err`:
    /// one sentence). Called before [`Routes::job_summary`], never without a credential.
    fn authorize(&self, ask: &SummaryAsk, credential: &str) -> Result<(), String>;
    /// The job's summary (`ask` authorized), signed with its nonce.
    fn job_summary(&self, ask: &SummaryAsk) -> Reply;
}

/// Who connected: the address, and the uid owning the client's socket when it is on this
/// host (read from the kernel's socket table: a user cannot claim another uid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub ip: IpAddr,
    pub local_uid: Option<u32>,
}

/// What the connection caps count: a local peer by uid (every user on the node shares the
/// loopback address), a remote one by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PeerKey {
    Uid(u32),
    Ip(IpAddr),
}

impl Peer {
    fn key(&self) -> PeerKey {
        match self.local_uid {
            Some(u) => PeerKey::Uid(u),
            None => PeerKey::Ip(self.ip),
        }
    }
}

/// Who may read `GET /metrics` (every running job on the node, with its user).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Peers in these networks (Prometheus servers). A network holding this host's own
    /// addresses opens the metrics to every local user.
    pub metrics_nets: Vec<ipnet::IpNet>,
    /// Local users (by uid) besides root, e.g. a local Prometheus agent's.
    pub metrics_uids: Vec<u32>,
}

impl Access {
    pub fn may_read_metrics(&self, peer: &Peer) -> bool {
        peer.local_uid
            .is_some_and(|u| u == 0 || self.metrics_uids.contains(&u))
            || self.metrics_nets.iter().any(|n| n.contains(&peer.ip))
    }
}

pub use ipnet::IpNet;

/// A network (`10.0.0.0/16`, `fd00::/64`) or one address (`10.0.0.5`), as `--metrics-allow`
/// takes it.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("{s:?} is not an address or a network (e.g. 10.0.0.5, 10.0.0.0/16, fd00::/64)")
        })
}

/// The connection caps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once, in all.
    pub total: usize,
    /// Connections served at once for one peer ([`Peer`]).
    pub per_peer: usize,
}

impl Default for Limits {
    /// 64 in all, 8 a peer: a controller storing a burst of jobs ending on one node retries
    /// a 503 within its bound; Prometheus scrapes once per interval.
    fn default() -> Self {
        Limits {
            total: 64,
            per_peer: 8,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a dual-stack listener sees IPv4
/// clients so; the kernel's socket table lists them as IPv4).
fn plain(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn plain_addr(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(plain(a.ip()), a.port())
}

/// One address of the kernel's socket table (`/proc/net/tcp{,6}`): hex of the address as
/// stored (32-bit words in host order), `:`, hex port.
fn table_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match ip.len() {
        8 => IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::from(b)
        }
        _ => return None,
    };
    Some(SocketAddr::new(plain(ip), port))
}

/// The most of one socket table read (about 150 bytes a socket).
const MAX_TABLE_BYTES: u64 = 32 << 20;

/// The uid owning the socket on this host whose local end is `client` and remote end
/// `server` (the client's side of a connection to us), from the socket tables under
/// `proc_net` (`/proc/self/net`). `None`: not a socket of this host (a remote peer), or
/// gone.
pub fn local_uid(proc_net: &Path, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let (client, server) = (plain_addr(client), plain_addr(server));
    ["tcp", "tcp6"].iter().find_map(|t| {
        let mut text = String::new();
        std::fs::File::open(proc_net.join(t))
            .ok()?
            .take(MAX_TABLE_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        text.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 7 && table_addr(f[1]) == Some(client) && table_addr(f[2]) == Some(server))
                .then(|| f[7].parse().ok())
                .flatten()
        })
    })
}

/// Who is at the other end of `stream`. Only a peer that could be on this host (loopback,
/// or our own address) costs a look at the socket tables.
fn peer_of(stream: &TcpStream) -> Option<Peer> {
    let (client, server) = (stream.peer_addr().ok()?, stream.local_addr().ok()?);
    let ip = plain(client.ip());
    let local_uid = if ip.is_loopback() || ip == plain(server.ip()) {
        local_uid(Path::new("/proc/self/net"), client, server)
    } else {
        None
    };
    Some(Peer { ip, local_uid })
}

/// Reads the request head from `stream` within the deadline.
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
    parse_request(&buf)
}

/// The value of the controller's credential header in a request head, when it is a
/// well-formed credential (anything else is no credential).
fn credential_in(head: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(head).ok()?;
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(munge::HEADER))
        .map(|(_, v)| v.trim().to_string())
        .filter(|c| munge::is_credential(c))
}

/// `GET /metrics HTTP/1.x` (a query string allowed) and
/// `GET /jobs/<id>/summary?nonce=<hex>&uid=<uid>&start=<unix>` are the requests answered.
pub fn parse_request(head: &[u8]) -> Request {
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
    // A job by its own id only (`slurm::job_id`: at most u32::MAX, no leading zero).
    let job = path
        .strip_prefix("/jobs/")
        .and_then(|p| p.strip_suffix("/summary"))
        .and_then(JobId::own);
    let Some(job_id) = job else {
        return Request::Other;
    };
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
    };
    let digits = |s: &&str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    let nonce = param("nonce").filter(|n| munge::is_nonce(n));
    let uid = param("uid").filter(digits).and_then(|u| u.parse().ok());
    let start = param("start").filter(digits).and_then(|s| s.parse().ok());
    match (nonce, uid, start) {
        (Some(n), Some(uid), Some(start_unix)) => Request::JobSummary {
            ask: SummaryAsk {
                job_id,
                uid,
                start_unix,
                nonce: n.to_string(),
            },
            credential: credential_in(head),
        },
        _ => Request::SummaryUnbound,
    }
}

/// With `credential`, the munge header too (a value that is not a credential is never
/// written: it could break the head).
/// Written by `deadline` (the work before it bounded on its own: `unmunge`, `munge` and the
/// file read each have a deadline).
fn respond_with(
    stream: &mut TcpStream,
    deadline: Instant,
    status: &str,
    content_type: &str,
    credential: Option<&str>,
    body: &str,
) {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    let _ = stream.set_write_timeout(Some(left));
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

const TEXT: &str = "text/plain; charset=utf-8";

fn respond(stream: &mut TcpStream, deadline: Instant, status: &str, body: &str) {
    respond_with(stream, deadline, status, TEXT, None, body)
}

/// Answers one connection from `peer`: its head within [`READ_DEADLINE`], its reply written
/// by [`CONNECTION_DEADLINE`] after it began.
pub fn handle(mut stream: TcpStream, peer: Peer, access: &Access, routes: &dyn Routes) {
    let deadline = Instant::now() + CONNECTION_DEADLINE;
    let request = read_request(&mut stream);
    match request {
        Request::Metrics if access.may_read_metrics(&peer) => {
            let body = routes.metrics();
            respond_with(&mut stream, deadline, "200 OK", CONTENT_TYPE, None, &body);
        }
        Request::Metrics => respond(
            &mut stream,
            deadline,
            "403 Forbidden",
            "GET /metrics is served to root and the readers the node's `slurmwatch metrics` allows (--metrics-allow, --metrics-user)\n",
        ),
        Request::JobSummary {
            credential: None, ..
        } => respond(
            &mut stream,
            deadline,
            "401 Unauthorized",
            "a job's summary is served only to the controller: the request carries no munge credential\n",
        ),
        Request::JobSummary {
            ask,
            credential: Some(c),
        } => match routes.authorize(&ask, &c) {
            Err(why) => respond(&mut stream, deadline, "403 Forbidden", &(why + "\n")),
            Ok(()) => match routes.job_summary(&ask) {
                Reply::Json { body, credential } => respond_with(
                    &mut stream,
                    deadline,
                    "200 OK",
                    "application/json",
                    credential.as_deref(),
                    &body,
                ),
                Reply::NotFound(why) => respond(&mut stream, deadline, "404 Not Found", &(why + "\n")),
                Reply::Unavailable(why) => {
                    respond(&mut stream, deadline, "503 Service Unavailable", &(why + "\n"))
                }
            },
        },
        Request::Other => respond(
            &mut stream,
            deadline,
            "404 Not Found",
            "only GET /metrics and GET /jobs/<id>/summary are served here\n",
        ),
        Request::SummaryUnbound => respond(
            &mut stream,
            deadline,
            "400 Bad Request",
            "a summary is asked with ?nonce=<32 hex digits>&uid=<uid>&start=<unix time> and the controller's munge credential (the controller's slurmwatch is older than this node's)\n",
        ),
        Request::Bad => respond(&mut stream, deadline, "400 Bad Request", "bad request\n"),
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// The connections being served, in all and per peer.
#[derive(Default)]
struct Open {
    total: usize,
    per_peer: HashMap<PeerKey, usize>,
}

/// A place among the connections served; given back on drop.
struct Slot {
    open: Arc<Mutex<Open>>,
    key: PeerKey,
}

impl Slot {
    fn take(open: &Arc<Mutex<Open>>, key: PeerKey, limits: Limits) -> Option<Slot> {
        let mut o = open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = o.per_peer.get(&key).copied().unwrap_or(0);
        if o.total >= limits.total || mine >= limits.per_peer {
            return None;
        }
        o.total += 1;
        o.per_peer.insert(key, mine + 1);
        Some(Slot {
            open: Arc::clone(open),
            key,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        o.total -= 1;
        if let Some(n) = o.per_peer.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                o.per_peer.remove(&self.key);
            }
        }
    }
}

/// Refuses a connection past the caps at once, from the accepting thread: the short reply
/// fits the socket's send buffer, so this never waits on the client.
fn turn_away(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
    );
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Serves every listener forever (one accepting thread each), each connection on its own
/// thread within the caps.
pub fn serve(
    listeners: Vec<TcpListener>,
    routes: Arc<dyn Routes>,
    access: Arc<Access>,
    limits: Limits,
) -> ! {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut accepting = Vec::new();
    for listener in listeners {
        let (routes, access, open) = (Arc::clone(&routes), Arc::clone(&access), Arc::clone(&open));
        accepting.push(std::thread::spawn(move || {
            accept_loop(&listener, routes, access, open, limits)
        }));
    }
    for t in accepting {
        let _ = t.join();
    }
    // An accepting thread only ends by a panic: nothing is served any more.
    panic!("the endpoint's accepting threads ended");
}

fn accept_loop(
    listener: &TcpListener,
    routes: Arc<dyn Routes>,
    access: Arc<Access>,
    open: Arc<Mutex<Open>>,
    limits: Limits,
) {
    loop {
        let Ok((stream, _)) = listener.accept() else {
            // EMFILE and the like: give the served connections a moment to end.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Some(peer) = peer_of(&stream) else {
            continue;
        };
        let Some(slot) = Slot::take(&open, peer.key(), limits) else {
            turn_away(stream);
            continue;
        };
        let (routes, access) = (Arc::clone(&routes), Arc::clone(&access));
        let spawned = std::thread::Builder::new()
            .name("endpoint-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle(stream, peer, &access, routes.as_ref());
            });
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Listeners for `addr` that leave no port of it for a user to take beside ours: the
/// unspecified address of either family becomes one dual-stack `[::]` socket (IPV6_V6ONLY
/// off), and a loopback address also holds the other family's loopback (when this host has
/// IPv6). Without that, a user could bind `[::]:port` beside root's `0.0.0.0:port` (or
/// `[::1]:port` beside `127.0.0.1:port`) and answer the other family's clients.
pub fn listen(addr: SocketAddr) -> std::io::Result<Vec<TcpListener>> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let port = addr.port();
    match addr.ip() {
        ip if ip.is_unspecified() => Ok(vec![bind(
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port),
            Some(false),
        )
        .or_else(|e| {
            // A host without IPv6: the IPv4 socket alone (no family is left to take).
            if ip.is_ipv4() && !ipv6_available() {
                bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port), None)
            } else {
                Err(e)
            }
        })?]),
        ip if ip.is_loopback() => {
            let first = bind(addr, ip.is_ipv6().then_some(true))?;
            let port = first.local_addr()?.port();
            let other: IpAddr = if ip.is_ipv4() {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            let mut all = vec![first];
            if other.is_ipv4() || ipv6_available() {
                all.push(bind(
                    SocketAddr::new(other, port),
                    other.is_ipv6().then_some(true),
                )?);
            }
            Ok(all)
        }
        _ => Ok(vec![bind(addr, addr.is_ipv6().then_some(true))?]),
    }
}

/// Whether this host has IPv6 (`/proc/net/if_inet6` lists its addresses).
fn ipv6_available() -> bool {
    std::fs::metadata("/proc/net/if_inet6").is_ok()
}

/// One listening socket; `v6only` set on an IPv6 one.
fn bind(addr: SocketAddr, v6only: Option<bool>) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if let Some(only) = v6only {
        s.set_only_v6(only)?;
    }
    // As std's bind does: a restart is not refused for the old connections in TIME_WAIT.
    // (A listening socket's port stays refused to everyone else whatever they set.)
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const Q: &str = "nonce=00112233445566778899aabbccddeeff&uid=1001&start=1700000000";

    fn ask(job_id: u32) -> SummaryAsk {
        SummaryAsk {
            job_id,
            uid: 1001,
            start_unix: 1_700_000_000,
            nonce: "00112233445566778899aabbccddeeff".into(),
        }
    }

    #[test]
    fn only_get_metrics_and_a_bound_summary_are_answered() {
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(
            parse_request(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(
            parse_request(format!("GET /jobs/4242/summary?{Q} HTTP/1.1\r\n\r\n").as_bytes()),
            Request::JobSummary {
                ask: ask(4242),
                credential: None
            }
        );
        assert_eq!(
            parse_request(
                format!("GET /jobs/4242/summary?{Q} HTTP/1.1\r\nx-slurmwatch-munge: MUNGE:AwQF+/=:\r\n\r\n")
                    .as_bytes()
            ),
            Request::JobSummary {
                ask: ask(4242),
                credential: Some("MUNGE:AwQF+/=:".into())
            }
        );
        // A header value that is not a credential is no credential.
        assert_eq!(
            parse_request(
                format!("GET /jobs/4242/summary?{Q} HTTP/1.1\r\nX-Slurmwatch-Munge: x y\r\n\r\n")
                    .as_bytes()
            ),
            Request::JobSummary {
                ask: ask(4242),
                credential: None
            }
        );
        // A summary not bound to a nonce and a run: refused, never served.
        for unbound in [
            "GET /jobs/4242/summary HTTP/1.1\r\n\r\n",
            "GET /jobs/4242/summary?nonce= HTTP/1.1\r\n\r\n",
            "GET /jobs/4242/summary?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\n\r\n",
            "GET /jobs/4242/summary?nonce=00112233445566778899aabbccddeeff&uid=1&start=x HTTP/1.1\r\n\r\n",
            "GET /jobs/4242/summary?nonce=00112233445566778899AABBCCDDEEFF&uid=1&start=2 HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                parse_request(unbound.as_bytes()),
                Request::SummaryUnbound,
                "{unbound}"
            );
        }
        for other in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"POST /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics/x HTTP/1.1\r\n\r\n",
            b"GET /jobs/../summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/12a/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/99999999999/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/4294967296/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/04242/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/4242_1/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/4242+0/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/4242.batch/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs/+4242/summary HTTP/1.1\r\n\r\n",
            b"GET /jobs//summary HTTP/1.1\r\n\r\n",
            b"POST /jobs/1/summary HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_request(other), Request::Other);
        }
        for bad in [
            &b"hello\r\n\r\n"[..],
            b"GET /metrics SMTP\r\n\r\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_request(bad), Request::Bad);
        }
    }

    #[test]
    fn metrics_are_read_by_root_and_the_listed_readers_only() {
        let local = |uid| Peer {
            ip: "127.0.0.1".parse().unwrap(),
            local_uid: Some(uid),
        };
        let remote = |ip: &str| Peer {
            ip: ip.parse().unwrap(),
            local_uid: None,
        };
        let default = Access::default();
        assert!(default.may_read_metrics(&local(0)));
        assert!(!default.may_read_metrics(&local(1002)));
        // A loopback connection whose socket was not found is no one's.
        assert!(!default.may_read_metrics(&remote("127.0.0.1")));
        assert!(!default.may_read_metrics(&remote("10.1.2.3")));
        let site = Access {
            metrics_nets: vec![
                "10.1.0.0/16".parse().unwrap(),
                "fd00::5/128".parse().unwrap(),
            ],
            metrics_uids: vec![998],
        };
        assert!(site.may_read_metrics(&local(998)));
        assert!(!site.may_read_metrics(&local(1002)));
        assert!(site.may_read_metrics(&remote("10.1.2.3")));
        assert!(site.may_read_metrics(&remote("fd00::5")));
        assert!(!site.may_read_metrics(&remote("10.2.0.1")));
    }

    /// The kernel's socket table names the uid of our own loopback client, over IPv4 and
    /// IPv6, and of no address that is not one of its sockets.
    #[test]
    fn a_local_peer_is_known_by_its_sockets_uid() {
        let me = unsafe { libc::geteuid() };
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = TcpListener::bind(addr) else {
                continue; // no IPv6 here
            };
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            let p = peer_of(&s).unwrap();
            assert_eq!(p.local_uid, Some(me), "{addr}");
            assert_eq!(p.ip, plain(c.local_addr().unwrap().ip()));
            assert_eq!(
                local_uid(
                    Path::new("/proc/self/net"),
                    SocketAddr::new(c.local_addr().unwrap().ip(), 1),
                    s.local_addr().unwrap()
                ),
                None
            );
        }
        assert_eq!(
            table_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            table_addr("00000000000000000000000001000000:0050"),
            Some("[::1]:80".parse().unwrap())
        );
        assert_eq!(
            table_addr("0000000000000000FFFF00000100007F:0050"),
            Some("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(table_addr("zz:1"), None);
    }

    /// Routes that count what they were asked to do.
    #[derive(Default)]
    struct Counting {
        scrapes: AtomicU32,
        authorized: AtomicU32,
        summaries: AtomicU32,
    }

    impl Routes for Counting {
        fn metrics(&self) -> String {
            format!(
                "scrapes {}\n",
                self.scrapes.fetch_add(1, Ordering::SeqCst) + 1
            )
        }
        fn authorize(&self, _: &SummaryAsk, credential: &str) -> Result<(), String> {
            self.authorized.fetch_add(1, Ordering::SeqCst);
            match credential {
                "MUNGE:controller:" => Ok(()),
                _ => Err("the credential was made by uid 1002, not root or SlurmUser".into()),
            }
        }
        fn job_summary(&self, ask: &SummaryAsk) -> Reply {
            self.summaries.fetch_add(1, Ordering::SeqCst);
            match ask.job_id {
                7 => Reply::Json {
                    body: format!("{{\"job_id\":\"7\",\"nonce\":\"{}\"}}", ask.nonce),
                    credential: Some("MUNGE:AwQF+/=:".into()),
                },
                6 => Reply::Json {
                    body: "{}".into(),
                    credential: Some("MUNGE:x\r\nSet-Cookie: y:".into()),
                },
                8 => Reply::Unavailable("busy".into()),
                _ => Reply::NotFound(format!("job {} was not recorded here", ask.job_id)),
            }
        }
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn start(limits: Limits) -> (SocketAddr, Arc<Counting>) {
        let listeners = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listeners[0].local_addr().unwrap();
        let routes = Arc::new(Counting::default());
        let me = unsafe { libc::geteuid() };
        let access = Arc::new(Access {
            metrics_nets: Vec::new(),
            metrics_uids: vec![me],
        });
        let r: Arc<dyn Routes> = routes.clone();
        std::thread::spawn(move || serve(listeners, r, access, limits));
        (addr, routes)
    }

    fn summary(job: u32, credential: Option<&str>) -> String {
        let h = credential.map_or(String::new(), |c| format!("X-Slurmwatch-Munge: {c}\r\n"));
        format!("GET /jobs/{job}/summary?{Q} HTTP/1.1\r\n{h}\r\n")
    }

    /// Attack 2 of issue 37, on a real socket: a request for a summary without the
    /// controller's credential is refused before any work (no authorize, so no `unmunge`;
    /// no summary, so no file read), and one whose credential is refused reads nothing.
    #[test]
    fn a_summary_is_served_only_to_an_authorized_caller() {
        let (addr, routes) = start(Limits::default());
        let r = get(addr, &summary(7, None));
        assert!(r.starts_with("HTTP/1.1 401"), "{r}");
        assert_eq!(routes.authorized.load(Ordering::SeqCst), 0);
        assert_eq!(routes.summaries.load(Ordering::SeqCst), 0);
        let r = get(addr, &summary(7, Some("MUNGE:someone:")));
        assert!(
            r.starts_with("HTTP/1.1 403") && r.contains("uid 1002"),
            "{r}"
        );
        assert_eq!(routes.authorized.load(Ordering::SeqCst), 1);
        assert_eq!(routes.summaries.load(Ordering::SeqCst), 0);
        let js = get(addr, &summary(7, Some("MUNGE:controller:")));
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
        let odd = get(addr, &summary(6, Some("MUNGE:controller:")));
        assert!(!odd.contains("Munge") && !odd.contains("Cookie"), "{odd}");
        let busy = get(addr, &summary(8, Some("MUNGE:controller:")));
        assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
        let none = get(addr, &summary(9, Some("MUNGE:controller:")));
        assert!(
            none.starts_with("HTTP/1.1 404") && none.contains("job 9 was not recorded"),
            "{none}"
        );
        let old = get(addr, "GET /jobs/7/summary HTTP/1.1\r\n\r\n");
        assert!(
            old.starts_with("HTTP/1.1 400") && old.contains("?nonce="),
            "{old}"
        );
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE), "{ok}");
        assert!(ok.ends_with("\r\n\r\nscrapes 1\n"), "{ok}");
        let nf = get(addr, "GET /other HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
    }

    /// Attack 3 of issue 37 without Slurm: many silent connections (each held open until the
    /// read deadline) do not delay another client — each connection has its own thread —
    /// and one peer past its cap is turned away at once instead of queueing.
    #[test]
    fn silent_clients_cannot_hold_the_endpoint() {
        let (addr, _) = start(Limits {
            total: 64,
            per_peer: 48,
        });
        let silent: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.ends_with("scrapes 1\n"), "{ok}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        drop(silent);

        let (addr, _) = start(Limits {
            total: 64,
            per_peer: 4,
        });
        let silent: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let away = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(away.starts_with("HTTP/1.1 503"), "{away}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        // A silent connection is dropped at the read deadline, giving its place back.
        std::thread::sleep(READ_DEADLINE + Duration::from_millis(500));
        let ok = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.ends_with("scrapes 1\n"), "{ok}");
        drop(silent);
    }

    /// Attack 10 of issue 37 (its first half): once the endpoint listens on the unspecified
    /// address, neither family's port is left to bind, as a user would (`[::]` with
    /// IPV6_V6ONLY, or `0.0.0.0`); on loopback, neither loopback.
    #[test]
    fn no_family_of_the_port_is_left_to_take() {
        let held = listen("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = held[0].local_addr().unwrap().port();
        if ipv6_available() {
            assert!(bind(SocketAddr::new("::".parse().unwrap(), port), Some(true)).is_err());
        }
        assert!(TcpListener::bind(("0.0.0.0", port)).is_err());
        assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
        let lo = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = lo[0].local_addr().unwrap().port();
        if ipv6_available() {
            assert_eq!(lo.len(), 2);
            assert!(bind(SocketAddr::new("::1".parse().unwrap(), port), Some(true)).is_err());
        }
    }
}
