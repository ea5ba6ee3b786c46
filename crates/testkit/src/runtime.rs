//! [`RuntimeDouble`]: a minimal AWS Lambda Runtime API on `127.0.0.1:<free port>`,
//! so a test can run a real, compiled function binary and invoke it.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use sortie_testkit::runtime::{function_binary, RuntimeDouble};
//!
//! let runtime = RuntimeDouble::start();
//! let _api = runtime.spawn_function(&function_binary("api"), &[("SORTIE_TABLE", "t")]);
//! let answer = runtime
//!     .invoke(serde_json::json!({"version": "2.0"}), Duration::from_secs(30))
//!     .await;
//! # }
//! ```
//!
//! Implemented: `GET /2018-06-01/runtime/invocation/next` (long-polls until an
//! event is queued), `POST .../invocation/{id}/response`, `POST
//! .../invocation/{id}/error` and `POST /2018-06-01/runtime/init/error`. Each
//! connection carries one request and is answered with `Connection: close`.
//!
//! Function binaries live in other packages of the workspace, so Cargo does not
//! build them for this package's tests (and `cargo test --workspace` builds only
//! their unit-test harnesses, not the binaries). [`function_binary`] therefore
//! runs `cargo build --workspace --bins --tests` once per test process, into the
//! same target directory, and returns the executable Cargo reports. Building the
//! whole workspace with its tests resolves every dependency's features exactly as
//! `cargo test --workspace` does, so the binaries reuse the tests' compiled
//! dependencies instead of compiling a second copy of each (a `-p <name>` build
//! unifies features per package, and each package's set would be a new copy of
//! tokio, hyper and every AWS SDK crate in the target directory).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::proxy::wire;

/// Path prefix of every Runtime API route.
const PREFIX: &str = "/2018-06-01/runtime";
/// The ARN the double reports as the invoked function's.
pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:sortie-test";

/// Why an invocation produced no response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvokeError {
    /// No response or error arrived in time.
    #[error("the function did not answer within {0:?}")]
    Timeout(Duration),
    /// The function posted to `/invocation/{id}/error`.
    #[error("the function reported {error_type}: {body}")]
    Function {
        /// `Lambda-Runtime-Function-Error-Type`, or the body's `errorType`.
        error_type: String,
        /// The posted body (`{"errorType", "errorMessage"}` for the Rust runtime).
        body: Value,
    },
    /// The function posted to `/init/error`: it could not start.
    #[error("the function failed to initialise: {0}")]
    Init(Value),
    /// The double was dropped while waiting.
    #[error("the runtime double stopped")]
    Stopped,
}

/// What the function posted for one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// `POST /invocation/{id}/response`.
    Response {
        /// The invocation's request id.
        request_id: String,
        /// The body (a JSON string value when the body is not JSON).
        body: Value,
    },
    /// `POST /invocation/{id}/error`.
    Error {
        /// The invocation's request id.
        request_id: String,
        /// The error type.
        error_type: String,
        /// The body.
        body: Value,
    },
}

type Waiter = oneshot::Sender<Result<Value, InvokeError>>;

#[derive(Default)]
struct State {
    /// Events waiting for a `/next` poll: (request id, event bytes).
    queue: VecDeque<(String, Vec<u8>)>,
    /// Invocations waiting for their answer.
    pending: HashMap<String, Waiter>,
    completions: Vec<Completion>,
    init_errors: Vec<Value>,
    polls: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    queued: Condvar,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A Lambda Runtime API double. Stops when dropped; invocations still waiting
/// then fail with [`InvokeError::Stopped`].
pub struct RuntimeDouble {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl RuntimeDouble {
    /// Starts the double on a free loopback port.
    pub fn start() -> RuntimeDouble {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("listener address");
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("runtime-double-{}", addr.port()))
                .spawn(move || accept_loop(listener, shared))
                .expect("spawn the runtime thread")
        };
        RuntimeDouble {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `host:port`: the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// Queues `event`, then waits up to `timeout` for the function's response
    /// (parsed as JSON; a non-JSON body is returned as a JSON string) or error.
    pub async fn invoke(&self, event: Value, timeout: Duration) -> Result<Value, InvokeError> {
        let (tx, rx) = oneshot::channel();
        let request_id = new_request_id();
        {
            let mut state = lock(&self.shared.state);
            if let Some(init) = state.init_errors.last() {
                return Err(InvokeError::Init(init.clone()));
            }
            state.pending.insert(request_id.clone(), tx);
            state
                .queue
                .push_back((request_id.clone(), event.to_string().into_bytes()));
        }
        self.shared.queued.notify_all();
        let result = tokio::time::timeout(timeout, rx).await;
        let mut state = lock(&self.shared.state);
        state.pending.remove(&request_id);
        match result {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(InvokeError::Stopped),
            Err(_) => {
                // Never handed out: take it back so a later poll does not run it.
                state.queue.retain(|(id, _)| *id != request_id);
                Err(InvokeError::Timeout(timeout))
            }
        }
    }

    /// Every response and error posted so far, in order.
    pub fn completions(&self) -> Vec<Completion> {
        lock(&self.shared.state).completions.clone()
    }

    /// The bodies posted to `/init/error`.
    pub fn init_errors(&self) -> Vec<Value> {
        lock(&self.shared.state).init_errors.clone()
    }

    /// How many `/next` polls arrived (a started function polls once when ready).
    pub fn polls(&self) -> usize {
        lock(&self.shared.state).polls
    }

    /// Starts `binary` as a Lambda function against this double: the
    /// `AWS_LAMBDA_*` variables a runtime reads are set, then `env` (which may
    /// override them). The rest of the environment is inherited. Its stdout and
    /// stderr go to a log file ([`FunctionProcess::logs`]). Killed on drop.
    ///
    /// # Panics
    ///
    /// When the binary cannot be started.
    pub fn spawn_function(&self, binary: &Path, env: &[(&str, &str)]) -> FunctionProcess {
        let name = binary
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "function".into());
        let log_path = std::env::temp_dir().join(format!(
            "{}.log",
            crate::unique(&format!("sortie-fn-{name}"))
        ));
        let log = File::create(&log_path)
            .unwrap_or_else(|e| panic!("create {}: {e}", log_path.display()));
        let log_err = log.try_clone().expect("clone the log file handle");
        let mut cmd = Command::new(binary);
        cmd.env("AWS_LAMBDA_RUNTIME_API", self.addr())
            .env("AWS_LAMBDA_FUNCTION_NAME", &name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env(
                "AWS_LAMBDA_LOG_STREAM_NAME",
                "2024/01/01/[1]0123456789abcdef",
            )
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env_remove("AWS_LAMBDA_INITIALIZATION_TYPE")
            .env_remove("AWS_LAMBDA_MAX_CONCURRENCY")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        FunctionProcess {
            child,
            log_path,
            name,
        }
    }
}

impl Drop for RuntimeDouble {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let mut state = lock(&self.shared.state);
            for (_, waiter) in state.pending.drain() {
                let _ = waiter.send(Err(InvokeError::Stopped));
            }
        }
        self.shared.queued.notify_all();
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

mod function;
pub use function::{function_binary, FunctionProcess};

/// A fresh request id shaped like Lambda's (a UUID).
fn new_request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (nanos >> 32) as u32,
        (nanos >> 16) as u16,
        (nanos & 0xfff) as u16,
        (std::process::id() & 0xfff) as u16,
        n & 0xffff_ffff_ffff
    )
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        let _ = std::thread::Builder::new()
            .name("runtime-double-conn".into())
            .spawn(move || {
                if let Err(e) = serve(conn, &shared) {
                    if !shared.stop.load(Ordering::SeqCst) {
                        eprintln!("runtime-double: connection failed: {e}");
                    }
                }
            });
    }
}

fn reply(
    out: &mut TcpStream,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
) -> io::Result<()> {
    let response = wire::Response {
        status,
        reason: wire::reason(status).to_string(),
        headers,
        body,
    };
    wire::write_response(out, &response, false)?;
    out.flush()?;
    let _ = out.shutdown(Shutdown::Write);
    Ok(())
}

fn json_reply(out: &mut TcpStream, status: u16, body: Value) -> io::Result<()> {
    let headers = vec![("Content-Type".to_string(), "application/json".to_string())];
    reply(out, status, headers, body.to_string().into_bytes())
}

fn body_value(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn serve(conn: TcpStream, shared: &Shared) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut out = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    let Some(head) = wire::read_head(&mut reader)? else {
        return Ok(());
    };
    let request = wire::Request::parse(&head)?;
    let body = wire::read_body(&mut reader, &request.headers, false)?;
    let path = request.target.split('?').next().unwrap_or_default();
    let Some(route) = path.strip_prefix(PREFIX) else {
        return json_reply(
            &mut out,
            404,
            serde_json::json!({"errorMessage": "no such route"}),
        );
    };
    let segments: Vec<&str> = route.trim_start_matches('/').split('/').collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["invocation", "next"]) => next(&mut out, reader.get_ref(), shared),
        ("POST", ["invocation", id, kind @ ("response" | "error")]) => {
            let id = id.to_string();
            let value = body_value(&body);
            let mut state = lock(&shared.state);
            let waiter = state.pending.remove(&id);
            let (completion, answer) = if *kind == "response" {
                (
                    Completion::Response {
                        request_id: id.clone(),
                        body: value.clone(),
                    },
                    Ok(value),
                )
            } else {
                let error_type = request
                    .header("lambda-runtime-function-error-type")
                    .map(str::to_string)
                    .or_else(|| value["errorType"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "Unhandled".into());
                (
                    Completion::Error {
                        request_id: id.clone(),
                        error_type: error_type.clone(),
                        body: value.clone(),
                    },
                    Err(InvokeError::Function {
                        error_type,
                        body: value,
                    }),
                )
            };
            state.completions.push(completion);
            drop(state);
            if let Some(waiter) = waiter {
                let _ = waiter.send(answer);
            }
            json_reply(&mut out, 202, serde_json::json!({"status": "OK"}))
        }
        ("POST", ["init", "error"]) => {
            let value = body_value(&body);
            let mut state = lock(&shared.state);
            state.init_errors.push(value.clone());
            for (_, waiter) in state.pending.drain() {
                let _ = waiter.send(Err(InvokeError::Init(value.clone())));
            }
            state.queue.clear();
            drop(state);
            json_reply(&mut out, 202, serde_json::json!({"status": "OK"}))
        }
        _ => json_reply(
            &mut out,
            404,
            serde_json::json!({"errorType": "InvalidRoute", "errorMessage": format!("{} {path} is not a Runtime API route", request.method)}),
        ),
    }
}

/// True while the client is still connected (no EOF or error on a peek).
fn client_alive(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return false;
    }
    let mut buf = [0u8; 1];
    let alive = match conn.peek(&mut buf) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
    };
    let _ = conn.set_nonblocking(false);
    alive
}

/// Long-polls for the next event and hands it out with the invocation headers.
fn next(out: &mut TcpStream, conn: &TcpStream, shared: &Shared) -> io::Result<()> {
    let mut state = lock(&shared.state);
    state.polls += 1;
    let (request_id, event) = loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(item) = state.queue.pop_front() {
            break item;
        }
        state = shared
            .queued
            .wait_timeout(state, Duration::from_millis(200))
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if !client_alive(conn) {
            return Ok(()); // the function went away; leave the queue for the next one
        }
    };
    drop(state);
    let trace = format!(
        "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
        (now_ms() / 1000) as u32,
        now_ms(),
        now_ms() as u64
    );
    let headers = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        (
            "Lambda-Runtime-Aws-Request-Id".to_string(),
            request_id.clone(),
        ),
        (
            "Lambda-Runtime-Deadline-Ms".to_string(),
            (now_ms() + 60_000).to_string(),
        ),
        (
            "Lambda-Runtime-Invoked-Function-Arn".to_string(),
            FUNCTION_ARN.to_string(),
        ),
        ("Lambda-Runtime-Trace-Id".to_string(), trace),
    ];
    if let Err(e) = reply(out, 200, headers, event.clone()) {
        // Not delivered: put it back for the next poll.
        lock(&shared.state).queue.push_front((request_id, event));
        shared.queued.notify_all();
        return Err(e);
    }
    Ok(())
}

/// Reads a whole file into a JSON value; a helper for event fixtures.
///
/// # Panics
///
/// When the file cannot be read or is not JSON.
pub fn read_json(path: &Path) -> Value {
    let mut text = String::new();
    File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The sample event `events/<name>` of the repository, as JSON.
pub fn event(name: &str) -> Value {
    read_json(&crate::repo_root().join("events").join(name))
}
