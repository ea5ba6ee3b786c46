//! A fake GitHub on a loopback port, for the `github` source's tests: the pilot's unit
//! tests (`crate::github_fake`) and its integration tests (`tests/it`, through `#[path]`)
//! share this one file. It answers each path as told ([`Reply`]: a redirect, a tarball,
//! an error, an error that echoes the request's `Authorization`) and records every request
//! it saw ([`Seen`]).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use chrono::Utc;
use hyper::body::Bytes;
use sortie_core::protocol::pilot::SourceAccess;

/// What the fake answers at one path.
#[derive(Clone)]
pub enum Reply {
    /// 302 to this location (absolute, or relative to the request).
    Redirect(String),
    /// 200 with this body (with a Content-Length).
    Body(Vec<u8>),
    /// 200 with this body, chunked (no Content-Length).
    Streamed(Vec<u8>),
    /// This status and JSON body.
    Status(u16, String),
    /// This status, with the request's Authorization header quoted in GitHub's `message`.
    EchoAuthorization(u16),
    /// 503 for the first this many requests, then the reply.
    FailFirst(u32, Box<Reply>),
}

/// One request the fake saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub user_agent: Option<String>,
    pub accept: Option<String>,
}

#[derive(Clone, Default)]
struct FakeState {
    replies: Arc<Mutex<HashMap<String, Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    failures: Arc<Mutex<HashMap<String, u32>>>,
}

/// A fake GitHub on a loopback port.
pub struct FakeGithub {
    pub base: String,
    state: FakeState,
}

impl FakeGithub {
    pub async fn start() -> Self {
        let state = FakeState::default();
        let app = Router::new().fallback(answer).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base, state }
    }

    pub fn at(&self, path: &str, reply: Reply) -> &Self {
        self.state
            .replies
            .lock()
            .unwrap()
            .insert(path.to_string(), reply);
        self
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

async fn answer(
    axum::extract::State(state): axum::extract::State<FakeState>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let path = uri.path().to_string();
    state.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: path.clone(),
        authorization: header("authorization"),
        user_agent: header("user-agent"),
        accept: header("accept"),
    });
    let reply = state.replies.lock().unwrap().get(&path).cloned();
    let mut reply = match reply {
        Some(reply) => reply,
        None => return (StatusCode::NOT_FOUND, "no such path").into_response(),
    };
    if let Reply::FailFirst(n, then) = reply {
        let mut failures = state.failures.lock().unwrap();
        let count = failures.entry(path.clone()).or_insert(0);
        if *count < n {
            *count += 1;
            return (StatusCode::SERVICE_UNAVAILABLE, r#"{"message":"busy"}"#).into_response();
        }
        reply = *then;
    }
    match reply {
        Reply::Redirect(location) => {
            (StatusCode::FOUND, [("location", location)], "").into_response()
        }
        Reply::Body(bytes) => (StatusCode::OK, bytes).into_response(),
        Reply::Streamed(bytes) => Response::new(Body::new(Chunks(
            bytes.chunks(1000).map(Bytes::copy_from_slice).collect(),
        ))),
        Reply::Status(status, body) => {
            (StatusCode::from_u16(status).unwrap(), body).into_response()
        }
        Reply::EchoAuthorization(status) => {
            let message = format!(
                "Bad credentials: {}",
                header("authorization").unwrap_or_default()
            );
            let body = serde_json::json!({"message": message, "documentation_url": "https://docs.github.com/rest"});
            (StatusCode::from_u16(status).unwrap(), body.to_string()).into_response()
        }
        Reply::FailFirst(..) => (StatusCode::INTERNAL_SERVER_ERROR, "nested").into_response(),
    }
}

/// A body of chunks without a known length (it goes out chunked).
struct Chunks(std::collections::VecDeque<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

pub const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// A gzipped tar of `entries` (path, body), with git's `pax_global_header` first, as
/// GitHub's tarballs have.
pub fn github_tarball(entries: &[(&str, &str)]) -> Vec<u8> {
    archive(Some(&format!("52 comment={SHA}\n")), entries)
}

/// A gzipped tar of `entries` (path, body).
pub fn tar_gz(entries: &[(&str, &str)]) -> Vec<u8> {
    archive(None, entries)
}

/// A gzipped tar of `entries`, after a pax global header holding `pax` when given.
fn archive(pax: Option<&str>, entries: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    if let Some(comment) = pax {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::XGlobalHeader);
        header.set_size(comment.len() as u64);
        header.set_mode(0o666);
        header.set_cksum();
        builder
            .append_data(&mut header, "pax_global_header", comment.as_bytes())
            .unwrap();
    }
    for (path, body) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, body.as_bytes())
            .unwrap();
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&builder.into_inner().unwrap()).unwrap();
    gz.finish().unwrap()
}

/// Access to `url` with `token`, good for half an hour.
pub fn access(url: &str, token: &str) -> SourceAccess {
    SourceAccess {
        url: url.to_string(),
        token: token.to_string(),
        expires_at: Utc::now() + chrono::Duration::minutes(30),
        revoke_url: None,
    }
}
