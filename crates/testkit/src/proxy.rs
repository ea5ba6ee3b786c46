//! [`FaultProxy`]: a loopback HTTP/1.1 proxy in front of the local AWS that
//! records every request and can answer chosen operations with AWS errors.
//!
//! Point an SDK client's endpoint at [`FaultProxy::url`] instead of
//! [`crate::endpoint`]; every request is forwarded to the upstream endpoint
//! unchanged (the `Host` header is rewritten; moto does not check signatures)
//! and the answer relayed. Each client connection carries one request and is
//! answered with `Connection: close`; the SDK simply reconnects.
//!
//! Every request is recorded with the AWS operation it names, read from
//! `X-Amz-Target` (JSON protocols: DynamoDB, ECS, SQS, EventBridge) or from the
//! `Action` form parameter (query protocol: STS). [`FaultProxy::inject`] makes
//! the next calls of an operation fail with a synthetic error in the wire
//! format the SDK parses for the request's protocol.
//!
//! **It is also a strict ECS double where moto is lenient.** Moto ignores RunTask's
//! `clientToken`; real ECS does not. The proxy applies ECS's rules to every RunTask that
//! carries one: the same token with the same parameters answers the first request's
//! tasks again (no second launch), and the same token with different parameters is
//! refused with `ConflictException` and the first tasks in `resourceIds`. A ListTasks
//! with `startedBy` and another filter is refused with `InvalidParameterException`, as
//! ECS documents. A RunTask whose `tags` break ECS's tag rules (more than 50, a key over
//! 128 or a value over 256 characters, a character outside ECS's set, the reserved `aws:`
//! prefix, a key twice) is refused with `InvalidParameterException` (`proxy/ecs_tags.rs`).
//! Everything else is moto's answer.
//!
//! ```no_run
//! # async fn demo() {
//! let proxy = sortie_testkit::proxy::FaultProxy::start(&sortie_testkit::endpoint());
//! proxy.inject("ListTables", 1, 400, "ThrottlingException", "slow down");
//! // ... a client whose endpoint_url is proxy.url() now sees one ThrottlingException.
//! assert_eq!(proxy.count("ListTables"), 0);
//! # }
//! ```

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the proxy waits on a silent client or upstream before giving up.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// One request the proxy received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target: path and query, e.g. `/` or `/bucket/key?uploads`.
    pub path: String,
    /// Headers in the order received, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked if it was sent chunked).
    pub body: Vec<u8>,
    /// The full `X-Amz-Target`, e.g. `DynamoDB_20120810.PutItem`.
    pub target: Option<String>,
    /// The service: the `X-Amz-Target` prefix (`DynamoDB_20120810`), or else the
    /// SigV4 credential scope's service (`sts`, `s3`).
    pub service: Option<String>,
    /// The operation: the `X-Amz-Target` suffix (`PutItem`) or the `Action`
    /// form or query parameter (`AssumeRole`). `None` for REST protocols (S3).
    pub operation: Option<String>,
    /// True when the proxy answered with an injected fault instead of forwarding.
    pub injected: bool,
}

impl Recorded {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        wire::header(&self.headers, name)
    }

    /// The body as UTF-8 text (lossy).
    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, when it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The decoded `application/x-www-form-urlencoded` parameters of the body
    /// (query protocol), e.g. `Action`, `Version`, `RoleArn`. Empty when the
    /// body is not a form. A repeated key keeps its last value.
    pub fn form(&self) -> BTreeMap<String, String> {
        let is_form = self
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        if !is_form {
            return BTreeMap::new();
        }
        parse_form(&String::from_utf8_lossy(&self.body))
            .into_iter()
            .collect()
    }

    /// The decoded query-string parameters of [`Recorded::path`].
    pub fn query(&self) -> BTreeMap<String, String> {
        self.path
            .split_once('?')
            .map(|(_, q)| parse_form(q).into_iter().collect())
            .unwrap_or_default()
    }

    /// True when this request names `op`: its operation (`PutItem`), its full
    /// `X-Amz-Target` (`DynamoDB_20120810.PutItem`) or `service.operation`.
    pub fn is(&self, op: &str) -> bool {
        self.operation.as_deref() == Some(op)
            || self.target.as_deref() == Some(op)
            || match (&self.service, &self.operation, op.split_once('.')) {
                (Some(s), Some(o), Some((want_s, want_o))) => s == want_s && o == want_o,
                _ => false,
            }
    }
}

/// Decodes `a=1&b=x%20y` into pairs (`+` is a space).
pub fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (url_decode(k), url_decode(v))
        })
        .collect()
}

fn url_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// An error the proxy answers instead of forwarding.
#[derive(Debug, Clone)]
struct Fault {
    op: String,
    /// Matching requests still to forward untouched before this fault applies.
    skip: usize,
    remaining: usize,
    status: u16,
    code: String,
    message: String,
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Recorded>>,
    faults: Mutex<Vec<Fault>>,
    /// RunTask's idempotency, as ECS keeps it: client token → the request's parameters
    /// (its JSON body without the token) and the answer it got.
    run_task_tokens: Mutex<BTreeMap<String, (serde_json::Value, wire::Response)>>,
    /// Task definition families with a registration in progress, and until when each stays
    /// busy (see [`strict_ecs::register_task_definition`]).
    registering: Mutex<BTreeMap<String, std::time::Instant>>,
    stop: AtomicBool,
    /// Operations whose next answers are lost after the request reached upstream, and how
    /// many of them (see [`FaultProxy::lose_answer`]).
    lost_answers: Mutex<Vec<(String, usize)>>,
}

/// Locks a mutex, ignoring poisoning: a panicking connection thread must not
/// take the test's view of the proxy down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A recording, fault-injecting HTTP/1.1 proxy on `127.0.0.1:<free port>`.
/// Stops accepting connections when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: String,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy forwarding to `upstream` (`http://host:port`, as
    /// [`crate::endpoint`] returns it).
    ///
    /// # Panics
    ///
    /// When `upstream` is not an `http://host:port` URL or no loopback port can be bound.
    pub fn start(upstream: &str) -> FaultProxy {
        let authority = upstream
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("FaultProxy needs an http:// upstream, got `{upstream}`"))
            .trim_end_matches('/')
            .to_string();
        assert!(
            !authority.contains('/'),
            "FaultProxy upstream must be http://host:port, got `{upstream}`"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("listener address");
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("fault-proxy-{}", addr.port()))
                .spawn(move || accept_loop(listener, authority, shared))
                .expect("spawn the proxy thread")
        };
        FaultProxy {
            addr,
            upstream: upstream.to_string(),
            shared,
            accept: Some(accept),
        }
    }

    /// The proxy's endpoint URL, `http://127.0.0.1:<port>`: give it to an SDK
    /// client as its `endpoint_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The upstream endpoint requests are forwarded to.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// Every request received so far, oldest first (injected ones included).
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// The requests naming `op` (see [`Recorded::is`]).
    pub fn requests_for(&self, op: &str) -> Vec<Recorded> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.is(op))
            .cloned()
            .collect()
    }

    /// How many requests named `op` (see [`Recorded::is`]), injected ones included.
    pub fn count(&self, op: &str) -> usize {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.is(op))
            .count()
    }

    /// Forgets the recorded requests and every pending fault.
    pub fn clear(&self) {
        lock(&self.shared.requests).clear();
        lock(&self.shared.faults).clear();
    }

    /// Answers the next `times` requests naming `op` with an AWS error
    /// (`status`, error code `aws_code`, `message`) instead of forwarding them.
    ///
    /// The wire format follows the request's protocol: JSON (`x-amzn-ErrorType`
    /// and `{"__type","message"}`) when it carries `X-Amz-Target`, the query
    /// protocol's `<ErrorResponse>` XML when it has an `Action` parameter, and
    /// the REST-XML `<Error>` document otherwise. Faults for the same
    /// operation are used in the order injected.
    pub fn inject(&self, op: &str, times: usize, status: u16, aws_code: &str, message: &str) {
        self.inject_after(op, 0, times, status, aws_code, message);
    }

    /// Like [`FaultProxy::inject`], but forwards the next `skip` requests naming `op`
    /// untouched first: `inject_after("TransactWriteItems", 1, ...)` fails the second one.
    pub fn inject_after(
        &self,
        op: &str,
        skip: usize,
        times: usize,
        status: u16,
        aws_code: &str,
        message: &str,
    ) {
        if times == 0 {
            return;
        }
        lock(&self.shared.faults).push(Fault {
            op: op.to_string(),
            skip,
            remaining: times,
            status,
            code: aws_code.to_string(),
            message: message.to_string(),
        });
    }

    /// Forwards the next `times` requests naming `op` upstream (so their effect is
    /// committed), then answers each with DynamoDB's `500 InternalServerError` instead of
    /// upstream's answer: the answer is lost, as when a connection drops after the write.
    /// DynamoDB lists `InternalServerError` (500) as retryable (Error handling with DynamoDB,
    /// Developer Guide), and the SDK retries it: a write whose answer was lost meets its
    /// own result.
    pub fn lose_answer(&self, op: &str, times: usize) {
        if times > 0 {
            lock(&self.shared.lost_answers).push((op.to_string(), times));
        }
    }

    /// How many injected faults are still waiting to be used, over all operations.
    pub fn pending_faults(&self) -> usize {
        lock(&self.shared.faults).iter().map(|f| f.remaining).sum()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() so the thread sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: String, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        let upstream = upstream.clone();
        let _ = std::thread::Builder::new()
            .name("fault-proxy-conn".into())
            .spawn(move || {
                if let Err(e) = serve(conn, &upstream, &shared) {
                    if !shared.stop.load(Ordering::SeqCst) {
                        eprintln!("fault-proxy: connection failed: {e}");
                    }
                }
            });
    }
}

/// Handles one client connection: one request, one answer, then close.
fn serve(conn: TcpStream, upstream: &str, shared: &Shared) -> io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut client = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    let Some(head) = wire::read_head(&mut reader)? else {
        return Ok(()); // connected and closed without a request (the Drop wake-up)
    };
    let request = wire::Request::parse(&head)?;
    if request
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = wire::read_body(&mut reader, &request.headers, false)?;

    let mut recorded = describe(&request, body);
    let fault = take_fault(shared, &recorded);
    recorded.injected = fault.is_some();
    let body = recorded.body.clone();
    lock(&shared.requests).push(recorded.clone());

    let response = match fault {
        Some(fault) => synthetic_error(&recorded, &fault),
        None if take_lost_answer(shared, &recorded) => lost_answer(upstream, &request, &recorded)?,
        None if recorded.is("RunTask") => strict_run_task(upstream, &request, &recorded, shared)?,
        None if recorded.is("ListTasks") => strict_list_tasks(upstream, &request, &recorded)?,
        None if recorded.is("StopTask") => strict_ecs::stop_task(upstream, &request, &recorded)?,
        None if recorded.is("RegisterTaskDefinition") => {
            strict_ecs::register_task_definition(upstream, &request, &recorded, shared)?
        }
        None => forward(upstream, &request, &body)?,
    };
    let is_head = request.method.eq_ignore_ascii_case("HEAD");
    wire::write_response(&mut client, &response, is_head)?;
    client.flush()?;
    let _ = client.shutdown(Shutdown::Both);
    Ok(())
}

mod faults;
use faults::*;
use strict_ecs::{strict_list_tasks, strict_run_task};

mod ecs_tags;
mod strict_ecs;

/// Sends the request upstream on a fresh connection and reads the whole answer.
fn forward(upstream: &str, request: &wire::Request, body: &[u8]) -> io::Result<wire::Response> {
    let addr = upstream
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "upstream has no address"))?;
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut out = Vec::with_capacity(512 + body.len());
    write!(out, "{} {} HTTP/1.1\r\n", request.method, request.target)?;
    for (name, value) in &request.headers {
        let skip = [
            "host",
            "connection",
            "expect",
            "transfer-encoding",
            "content-length",
            "keep-alive",
        ];
        if skip.iter().any(|s| name.eq_ignore_ascii_case(s)) {
            continue;
        }
        write!(out, "{name}: {value}\r\n")?;
    }
    write!(out, "Host: {upstream}\r\nConnection: close\r\n")?;
    let has_length =
        request.header("content-length").is_some() || request.header("transfer-encoding").is_some();
    if has_length || !body.is_empty() {
        write!(out, "Content-Length: {}\r\n", body.len())?;
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    let mut writer = stream.try_clone()?;
    writer.write_all(&out)?;
    writer.flush()?;

    let mut reader = BufReader::new(stream);
    let is_head = request.method.eq_ignore_ascii_case("HEAD");
    loop {
        let head = wire::read_head(&mut reader)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "upstream closed without answering",
            )
        })?;
        let (status, reason, headers) = wire::parse_status(&head)?;
        if (100..200).contains(&status) {
            continue; // 100 Continue and friends: the real answer follows
        }
        let no_body = is_head || status == 204 || status == 304;
        let body = if no_body {
            vec![]
        } else {
            wire::read_body(&mut reader, &headers, true)?
        };
        return Ok(wire::Response {
            status,
            reason,
            headers,
            body,
        });
    }
}

/// Minimal HTTP/1.1 message reading and writing, shared with [`crate::runtime`].
pub(crate) mod wire;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent_escapes() {
        let pairs = parse_form(
            "Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx&S=a+b&bad=%zz&e=",
        );
        assert_eq!(
            pairs,
            vec![
                ("Action".to_string(), "AssumeRole".to_string()),
                ("RoleArn".to_string(), "arn:aws:iam::1:role/x".to_string()),
                ("S".to_string(), "a b".to_string()),
                ("bad".to_string(), "%zz".to_string()),
                ("e".to_string(), String::new()),
            ]
        );
        assert_eq!(url_decode("100%"), "100%");
        assert_eq!(url_decode("%4"), "%4");
    }

    #[test]
    fn chunked_bodies_are_decoded() {
        let raw = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let headers = vec![("Transfer-Encoding".to_string(), "chunked".to_string())];
        let body = wire::read_body(&mut &raw[..], &headers, false).unwrap();
        assert_eq!(body, b"Wikipedia");
    }

    #[test]
    fn operations_match_by_name_target_or_service_dot_name() {
        let r = Recorded {
            method: "POST".into(),
            path: "/".into(),
            headers: vec![],
            body: vec![],
            target: Some("DynamoDB_20120810.PutItem".into()),
            service: Some("DynamoDB_20120810".into()),
            operation: Some("PutItem".into()),
            injected: false,
        };
        assert!(r.is("PutItem"));
        assert!(r.is("DynamoDB_20120810.PutItem"));
        assert!(!r.is("GetItem"));
        assert!(!r.is("DynamoDB_20120810XPutItem"));
    }
}
