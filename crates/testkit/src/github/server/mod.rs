//! The double's HTTP side: each request's credential, faults, rate limits and ETags, and
//! the dispatch to the routes. Every rule is from GitHub's documentation
//! ([`super::rules`]).

mod auth;
mod check_runs;
mod codeload;
mod json;
mod paging;
mod repository;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};

use super::rules;
use super::{Grant, Shared, TokenKind, World};
use auth::{authenticate, create_token, repository_installation};
use codeload::codeload;
pub(crate) use json::{pull_json, repo_json, timestamp, user_json};
use paging::percent_decode;
use repository::repository_route;

pub(crate) fn router(world: Shared) -> Router {
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    Router::new().fallback(handle).with_state(world)
}

/// An answer before it becomes a response.
pub(crate) struct Reply {
    status: u16,
    body: Vec<u8>,
    content_type: &'static str,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            body: serde_json::to_vec(value).unwrap_or_default(),
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
        }
    }

    /// GitHub's error body: `message` and `documentation_url`.
    fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({"message": message, "documentation_url": "https://docs.github.com/rest"}),
        )
    }

    /// GitHub's 422 "Validation Failed" with one error naming the field.
    fn invalid(resource: &str, field: &str, code: &str, message: &str) -> Self {
        Self::json(
            422,
            &json!({
                "message": "Validation Failed",
                "errors": [{"resource": resource, "field": field, "code": code, "message": message}],
                "documentation_url": "https://docs.github.com/rest"
            }),
        )
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

async fn handle(
    State(world): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut world = world.lock().unwrap_or_else(|p| p.into_inner());
        answer(&mut world, &method, &uri, &headers, &body)
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header("content-type", reply.content_type);
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response
        .body(Body::from(reply.body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The credential of a request and its grant.
struct Caller {
    kind: TokenKind,
    grant: Option<Grant>,
    bucket: String,
}

fn answer(
    world: &mut World,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Reply {
    let path = uri.path().to_string();
    let query = uri.query().map(str::to_string);
    let if_none_match = headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let caller = authenticate(world, headers);
    let (reply, counted) = respond(world, method, &path, query.as_deref(), &caller, body);
    let mut reply = reply;
    let mut refund = false;
    if reply.status == 200
        && *method == Method::GET
        && reply.content_type.starts_with("application/json")
    {
        let etag = format!("\"{}\"", hex(&sha256(&reply.body)));
        let matched = if_none_match.as_deref().is_some_and(|sent| {
            sent.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        });
        if matched && !matches!(caller.kind, TokenKind::None | TokenKind::Invalid(_)) {
            // A 304 to a correctly authorised request costs no rate limit.
            reply = Reply {
                status: 304,
                body: Vec::new(),
                content_type: "application/json; charset=utf-8",
                headers: Vec::new(),
            };
            refund = true;
        }
        reply = reply.header("etag", etag);
    }
    if counted {
        let bucket = bucket(world, &caller);
        if refund {
            bucket.remaining += 1;
        }
        let bucket = *bucket;
        let limit = limit_of(&caller);
        reply = reply
            .header("x-ratelimit-limit", limit.to_string())
            .header("x-ratelimit-remaining", bucket.remaining.to_string())
            .header(
                "x-ratelimit-used",
                limit.saturating_sub(bucket.remaining).to_string(),
            )
            .header("x-ratelimit-reset", bucket.reset.to_string())
            .header("x-ratelimit-resource", "core");
    }
    super::push_bounded(
        &mut world.requests,
        super::RequestRecord {
            method: method.to_string(),
            path,
            query,
            token: caller.kind.clone(),
            conditional: if_none_match.is_some(),
            status: reply.status,
        },
        super::MAX_RECORDED_REQUESTS,
    );
    reply
}

fn limit_of(caller: &Caller) -> u64 {
    match caller.kind {
        // An unauthenticated caller gets 60 an hour.
        TokenKind::None | TokenKind::Invalid(_) => 60,
        _ => rules::RATE_LIMIT_PER_HOUR,
    }
}

fn bucket<'a>(world: &'a mut World, caller: &Caller) -> &'a mut super::Bucket {
    let now = world.now().timestamp();
    let limit = if world.rate_limit == 0 {
        0
    } else {
        limit_of(caller)
    };
    let exhausted_reset = world.buckets.get("*").map(|b| b.reset);
    let bucket = world
        .buckets
        .entry(caller.bucket.clone())
        .or_insert(super::Bucket {
            remaining: limit,
            reset: exhausted_reset.unwrap_or(now + 3600),
        });
    if bucket.reset <= now && world.rate_limit != 0 {
        bucket.remaining = limit;
        bucket.reset = now + 3600;
    }
    bucket
}

/// The answer, and whether it counts against (and reports) the primary rate limit.
fn respond(
    world: &mut World,
    method: &Method,
    path: &str,
    query: Option<&str>,
    caller: &Caller,
    body: &[u8],
) -> (Reply, bool) {
    if let Some(rest) = path.strip_prefix("/codeload/") {
        return (codeload(world, rest, query), false);
    }
    let faults = &mut world.faults;
    let now = std::time::Instant::now();
    let fault = if let Some(status) = faults.always {
        Some(status)
    } else if let Some((_, status)) = faults.until.filter(|(until, _)| *until > now) {
        Some(status)
    } else if faults.next > 0 {
        faults.next -= 1;
        Some(faults.next_status)
    } else {
        None
    };
    if let Some(status) = fault {
        return (Reply::error(status, "Server Error"), true);
    }
    if faults.secondary > 0 {
        faults.secondary -= 1;
        let retry_after = faults.secondary_retry_after;
        return (
            Reply::error(
                403,
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            )
            .header("retry-after", retry_after.to_string()),
            true,
        );
    }
    if let TokenKind::Invalid(message) = &caller.kind {
        return (Reply::error(401, message), true);
    }
    {
        let bucket = bucket(world, caller);
        if bucket.remaining == 0 {
            let message = match &caller.kind {
                TokenKind::Installation(id) => {
                    format!("API rate limit exceeded for installation ID {id}.")
                }
                _ => "API rate limit exceeded.".to_string(),
            };
            return (Reply::error(403, &message), true);
        }
        bucket.remaining -= 1;
    }
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let reply = match (method.as_str(), segments.as_slice()) {
        ("GET", ["repos", owner, repo, "installation"]) => {
            repository_installation(world, caller, owner, repo)
        }
        ("POST", ["app", "installations", id, "access_tokens"]) => {
            create_token(world, caller, id, body)
        }
        ("GET" | "POST" | "PATCH", ["repos", owner, repo, rest @ ..]) => {
            repository_route(world, method, caller, owner, repo, rest, path, query, body)
        }
        _ => Reply::error(404, "Not Found"),
    };
    (reply, true)
}

pub(crate) fn sha256(bytes: &[u8]) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
