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

/// Builds the record of a request: the AWS service and operation it names.
fn describe(request: &wire::Request, body: Vec<u8>) -> Recorded {
    let target = request.header("x-amz-target").map(str::to_string);
    let scope_service = request.header("authorization").and_then(|auth| {
        // AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/sts/aws4_request, ...
        let cred = auth.split("Credential=").nth(1)?;
        let cred = cred.split([',', ' ']).next()?;
        cred.split('/').nth(3).map(str::to_string)
    });
    let (service, mut operation) = match target.as_deref().and_then(|t| t.rsplit_once('.')) {
        Some((prefix, op)) => (Some(prefix.to_string()), Some(op.to_string())),
        None => (scope_service, None),
    };
    if operation.is_none() {
        let is_form = request
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let mut params = if is_form {
            parse_form(&String::from_utf8_lossy(&body))
        } else {
            vec![]
        };
        if let Some((_, q)) = request.target.split_once('?') {
            params.extend(parse_form(q));
        }
        operation = params
            .into_iter()
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v);
    }
    Recorded {
        method: request.method.clone(),
        path: request.target.clone(),
        headers: request.headers.clone(),
        body,
        target,
        service,
        operation,
        injected: false,
    }
}

fn take_fault(shared: &Shared, recorded: &Recorded) -> Option<Fault> {
    let mut faults = lock(&shared.faults);
    let i = faults.iter().position(|f| recorded.is(&f.op))?;
    if faults[i].skip > 0 {
        faults[i].skip -= 1;
        return None;
    }
    let fault = faults[i].clone();
    faults[i].remaining -= 1;
    if faults[i].remaining == 0 {
        faults.remove(i);
    }
    Some(fault)
}

/// True (and one fewer to lose) when `recorded`'s answer is to be lost.
fn take_lost_answer(shared: &Shared, recorded: &Recorded) -> bool {
    let mut lost = lock(&shared.lost_answers);
    let Some(i) = lost.iter().position(|(op, _)| recorded.is(op)) else {
        return false;
    };
    lost[i].1 -= 1;
    if lost[i].1 == 0 {
        lost.remove(i);
    }
    true
}

/// Forwards the request (its write is committed upstream), then answers a retryable
/// `500 InternalServerError` in the request's protocol: the real answer is lost.
fn lost_answer(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
) -> io::Result<wire::Response> {
    let _committed = forward(upstream, request, &recorded.body)?;
    Ok(synthetic_error(
        recorded,
        &Fault {
            op: String::new(),
            skip: 0,
            remaining: 0,
            status: 500,
            code: "InternalServerError".into(),
            message: "Internal server error (fault-proxy: the answer was lost after the request was applied)".into(),
        },
    ))
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The error answer the SDK expects for the request's protocol.
fn synthetic_error(recorded: &Recorded, fault: &Fault) -> wire::Response {
    const REQUEST_ID: &str = "fault-proxy-0000-0000-0000-000000000000";
    let mut headers = vec![("x-amzn-RequestId".to_string(), REQUEST_ID.to_string())];
    let body = if recorded.target.is_some() {
        // awsJson1_0 / awsJson1_1: the SDK reads x-amzn-ErrorType, then __type and message.
        let content_type = recorded
            .header("content-type")
            .filter(|t| t.starts_with("application/x-amz-json"))
            .unwrap_or("application/x-amz-json-1.1")
            .to_string();
        headers.push(("Content-Type".into(), content_type));
        headers.push(("x-amzn-ErrorType".into(), fault.code.clone()));
        serde_json::json!({"__type": fault.code, "message": fault.message}).to_string()
    } else if recorded.form().contains_key("Action") || recorded.query().contains_key("Action") {
        // awsQuery (STS, classic SQS).
        headers.push(("Content-Type".into(), "text/xml".into()));
        let kind = if fault.status >= 500 {
            "Receiver"
        } else {
            "Sender"
        };
        format!(
            "<ErrorResponse><Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{REQUEST_ID}</RequestId></ErrorResponse>",
            xml_escape(&fault.code),
            xml_escape(&fault.message)
        )
    } else {
        // restXml (S3).
        headers.push(("Content-Type".into(), "application/xml".into()));
        headers.push(("x-amz-request-id".into(), REQUEST_ID.into()));
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message><RequestId>{REQUEST_ID}</RequestId></Error>",
            xml_escape(&fault.code),
            xml_escape(&fault.message)
        )
    };
    wire::Response {
        status: fault.status,
        reason: wire::reason(fault.status).to_string(),
        headers,
        body: body.into_bytes(),
    }
}

/// ECS's `clientToken` rules for RunTask, which moto ignores (the strict double).
///
/// - The same token with the same parameters answers what the first request got: the
///   same task, and no second launch.
/// - The same token with different parameters is refused with `ConflictException`,
///   naming the first request's tasks in `resourceIds`.
/// - A request without a token, or whose first answer was an error, is forwarded.
///
/// Requests with a token are serialised, so two racing ones cannot both launch.
fn strict_run_task(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
    shared: &Shared,
) -> io::Result<wire::Response> {
    let Some(mut params) = recorded.json() else {
        return forward(upstream, request, &recorded.body);
    };
    if let Some(refusal) = strict_ecs::run_task_refusal(&params) {
        return Ok(refusal);
    }
    if let Some(message) = ecs_tags::run_task_tags_problem(&params) {
        let fault = Fault {
            op: "RunTask".into(),
            skip: 0,
            remaining: 1,
            status: 400,
            code: "InvalidParameterException".into(),
            message,
        };
        return Ok(synthetic_error(recorded, &fault));
    }
    let token = params
        .as_object_mut()
        .and_then(|o| o.remove("clientToken"))
        .and_then(|t| t.as_str().map(str::to_string));
    let Some(token) = token else {
        return forward(upstream, request, &recorded.body);
    };
    let mut tokens = lock(&shared.run_task_tokens);
    if let Some((first, answer)) = tokens.get(&token) {
        if *first == params {
            return Ok(answer.clone());
        }
        let tasks: Vec<serde_json::Value> =
            serde_json::from_slice::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|v| v["tasks"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .map(|t| t["taskArn"].clone())
                .collect();
        let body = serde_json::json!({
            "__type": "ConflictException",
            "message": "The specified client token has already been used with different parameters.",
            "resourceIds": tasks,
        })
        .to_string();
        return Ok(wire::Response {
            status: 400,
            reason: wire::reason(400).to_string(),
            headers: vec![
                ("Content-Type".into(), "application/x-amz-json-1.1".into()),
                ("x-amzn-ErrorType".into(), "ConflictException".into()),
                ("x-amzn-RequestId".into(), "strict-ecs-double".into()),
            ],
            body: body.into_bytes(),
        });
    }
    let answer = forward(upstream, request, &recorded.body)?;
    if answer.status == 200 {
        tokens.insert(token, (params, answer.clone()));
    }
    Ok(answer)
}

/// ECS's rule for ListTasks, which moto ignores (the strict double): "When you
/// specify startedBy as the filter, it must be the only filter that you use."
/// (ECS API Reference, ListTasks). A `startedBy` with `containerInstance`,
/// `family`, `serviceName`, `desiredStatus` or `launchType` is refused with
/// `InvalidParameterException`; `cluster` names where to look and may go with it.
fn strict_list_tasks(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
) -> io::Result<wire::Response> {
    const OTHER_FILTERS: [&str; 5] = [
        "containerInstance",
        "family",
        "serviceName",
        "desiredStatus",
        "launchType",
    ];
    let params = recorded.json().unwrap_or_default();
    let given = |k: &str| !params[k].is_null();
    if given("startedBy") && OTHER_FILTERS.iter().any(|k| given(k)) {
        let body = serde_json::json!({
            "__type": "InvalidParameterException",
            "message": "When you specify startedBy as the filter, it must be the only filter that you use.",
        })
        .to_string();
        return Ok(wire::Response {
            status: 400,
            reason: wire::reason(400).to_string(),
            headers: vec![
                ("Content-Type".into(), "application/x-amz-json-1.1".into()),
                (
                    "x-amzn-ErrorType".into(),
                    "InvalidParameterException".into(),
                ),
                ("x-amzn-RequestId".into(), "strict-ecs-double".into()),
            ],
            body: body.into_bytes(),
        });
    }
    forward(upstream, request, &recorded.body)
}

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
pub(crate) mod wire {
    use super::*;

    /// Header names and values, in order.
    pub type Headers = Vec<(String, String)>;

    /// A parsed request head.
    #[derive(Debug, Clone)]
    pub(crate) struct Request {
        pub method: String,
        pub target: String,
        pub headers: Vec<(String, String)>,
    }

    impl Request {
        pub fn parse(head: &str) -> io::Result<Request> {
            let mut lines = head.split("\r\n");
            let start = lines.next().unwrap_or_default();
            let mut parts = start.split(' ');
            let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
                return Err(bad(format!("bad request line `{start}`")));
            };
            Ok(Request {
                method: method.to_string(),
                target: target.to_string(),
                headers: parse_headers(lines),
            })
        }

        pub fn header(&self, name: &str) -> Option<&str> {
            header(&self.headers, name)
        }
    }

    /// A response to write (or one read from upstream).
    #[derive(Debug, Clone)]
    pub(crate) struct Response {
        pub status: u16,
        pub reason: String,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    pub fn bad(msg: impl Into<String>) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, msg.into())
    }

    pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn parse_headers<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
        lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()
    }

    /// Parses a status line and headers.
    pub fn parse_status(head: &str) -> io::Result<(u16, String, Headers)> {
        let mut lines = head.split("\r\n");
        let start = lines.next().unwrap_or_default();
        let mut parts = start.splitn(3, ' ');
        let _version = parts.next();
        let status = parts
            .next()
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| bad(format!("bad status line `{start}`")))?;
        let reason = parts.next().unwrap_or_default().to_string();
        Ok((status, reason, parse_headers(lines)))
    }

    /// Reads up to and including the blank line; `None` on EOF before any byte.
    pub fn read_head<R: BufRead>(reader: &mut R) -> io::Result<Option<String>> {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                if head.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the message head",
                ));
            }
            if head.is_empty() && (line == b"\r\n" || line == b"\n") {
                continue; // tolerate stray blank lines between messages
            }
            if line == b"\r\n" || line == b"\n" {
                break;
            }
            head.extend_from_slice(&line);
            if head.len() > 1 << 20 {
                return Err(bad("message head over 1 MiB"));
            }
        }
        let text = String::from_utf8_lossy(&head).replace("\r\n", "\n");
        Ok(Some(text.trim_end().replace('\n', "\r\n")))
    }

    /// Reads a body framed by `Transfer-Encoding: chunked` or `Content-Length`;
    /// without either, reads to EOF when `until_eof` (responses) or nothing (requests).
    pub fn read_body<R: BufRead>(
        reader: &mut R,
        headers: &[(String, String)],
        until_eof: bool,
    ) -> io::Result<Vec<u8>> {
        let chunked = header(headers, "transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if chunked {
            return read_chunked(reader);
        }
        if let Some(len) = header(headers, "content-length") {
            let len: usize = len
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad Content-Length `{len}`")))?;
            let mut body = vec![0; len];
            reader.read_exact(&mut body)?;
            return Ok(body);
        }
        let mut body = Vec::new();
        if until_eof {
            reader.read_to_end(&mut body)?;
        }
        Ok(body)
    }

    fn read_chunked<R: BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "chunked body cut short",
                ));
            }
            let size = line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size.trim(), 16)
                .map_err(|_| bad(format!("bad chunk size `{}`", line.trim())))?;
            if size == 0 {
                // Trailers, then the blank line.
                loop {
                    let mut trailer = String::new();
                    if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    }

    /// Writes a response with `Content-Length` and `Connection: close`,
    /// dropping any framing headers of the original. For a HEAD answer the
    /// original `Content-Length` is kept and no body is written.
    pub fn write_response<W: Write>(out: &mut W, r: &Response, is_head: bool) -> io::Result<()> {
        let mut buf = Vec::with_capacity(256 + r.body.len());
        let reason = if r.reason.is_empty() {
            reason(r.status)
        } else {
            &r.reason
        };
        write!(buf, "HTTP/1.1 {} {}\r\n", r.status, reason)?;
        for (name, value) in &r.headers {
            let framing = ["connection", "transfer-encoding", "keep-alive"];
            if framing.iter().any(|s| name.eq_ignore_ascii_case(s))
                || (!is_head && name.eq_ignore_ascii_case("content-length"))
            {
                continue;
            }
            write!(buf, "{name}: {value}\r\n")?;
        }
        if !is_head {
            write!(buf, "Content-Length: {}\r\n", r.body.len())?;
        }
        buf.extend_from_slice(b"Connection: close\r\n\r\n");
        if !is_head {
            buf.extend_from_slice(&r.body);
        }
        out.write_all(&buf)
    }

    /// The standard reason phrase of the statuses the doubles use.
    pub fn reason(status: u16) -> &'static str {
        match status {
            200 => "OK",
            201 => "Created",
            202 => "Accepted",
            204 => "No Content",
            400 => "Bad Request",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            409 => "Conflict",
            413 => "Payload Too Large",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            504 => "Gateway Timeout",
            _ => "Status",
        }
    }
}

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
