//! The double's HTTP side: each request's credential, faults and throttling, the request
//! record, and the dispatch to the routes. Every rule is from GitLab's documentation
//! ([`super::rules`]).

mod archive;
mod auth;
mod json;
mod merge_requests;
mod notes;
mod paging;
mod statuses;
pub(crate) mod tokens;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Map, Value};

use super::rules;
use super::{Caller, RequestRecord, Shared, World};
pub(crate) use json::{mr_hook_attributes, project_hook_json, user_hook_json};
pub(crate) use paging::percent_decode;

pub(crate) fn router(world: Shared) -> Router {
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
            content_type: "application/json",
            headers: Vec::new(),
        }
    }

    /// GitLab's `{"message": ...}` error body.
    fn message(status: u16, message: &str) -> Self {
        Self::json(status, &json!({ "message": message }))
    }

    /// Grape's `{"error": ...}` body: an unmatched route or a parameter refused.
    fn error(status: u16, error: &str) -> Self {
        Self::json(status, &json!({ "error": error }))
    }

    /// `400 Bad request - <reason>` (GitLab's `bad_request!`).
    fn bad_request(reason: &str) -> Self {
        Self::message(400, &format!("400 Bad request - {reason}"))
    }

    fn no_route() -> Self {
        Self::error(404, "404 Not Found")
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// A request's parameters: the query, then a JSON object or form body (GitLab reads all
/// three).
pub(crate) struct Params {
    values: Map<String, Value>,
}

impl Params {
    fn parse(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Result<Self, Reply> {
        let mut values = Map::new();
        add_form(&mut values, query.unwrap_or(""));
        if !body.is_empty() {
            let json_body = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if json_body || body.first() == Some(&b'{') {
                match serde_json::from_slice::<Value>(body) {
                    Ok(Value::Object(fields)) => values.extend(fields),
                    _ => return Err(Reply::error(400, "the request body is not a JSON object")),
                }
            } else {
                add_form(&mut values, &String::from_utf8_lossy(body));
            }
        }
        Ok(Self { values })
    }

    fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name).filter(|v| !v.is_null())
    }

    /// A parameter as text (numbers and booleans as written).
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        match self.value(name)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Whether a boolean parameter is `true`.
    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(self.text(name).as_deref(), Some("true" | "1" | "yes"))
    }

    /// A parameter given as an array (`scopes[]=a&scopes[]=b`, or a JSON array).
    pub(crate) fn list(&self, name: &str) -> Option<Vec<String>> {
        match self.value(name)? {
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect(),
            ),
            Value::String(s) => Some(s.split(',').map(str::to_string).collect()),
            _ => None,
        }
    }

    /// A required parameter, or Grape's `<name> is missing`.
    pub(crate) fn required(&self, name: &str) -> Result<String, Reply> {
        self.text(name)
            .ok_or_else(|| Reply::error(400, &format!("{name} is missing")))
    }
}

fn add_form(values: &mut Map<String, Value>, form: &str) {
    for pair in form.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(&key.replace('+', " "));
        let value = Value::String(percent_decode(&value.replace('+', " ")));
        if let Some(name) = key.strip_suffix("[]") {
            match values
                .entry(name.to_string())
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                Value::Array(items) => items.push(value),
                other => *other = Value::Array(vec![value]),
            }
        } else {
            values.insert(key, value);
        }
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

fn answer(
    world: &mut World,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Reply {
    let path = uri.path().to_string();
    let query = uri.query().map(str::to_string);
    let (reply, caller) = respond(world, method, &path, query.as_deref(), headers, body);
    world.record(RequestRecord {
        method: method.to_string(),
        path,
        query,
        caller,
        status: reply.status,
    });
    reply
}

fn respond(
    world: &mut World,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> (Reply, Caller) {
    if let Some(reply) = fault(world) {
        return (reply, Caller::Anonymous);
    }
    let params = match Params::parse(query, headers, body) {
        Ok(params) => params,
        Err(reply) => return (reply, Caller::Anonymous),
    };
    let who = match auth::authenticate(world, headers, &params) {
        Ok(who) => who,
        Err((reply, caller)) => return (reply, caller),
    };
    let caller = who.caller();
    let Some(rest) = path.strip_prefix("/api/v4/") else {
        return (Reply::no_route(), caller);
    };
    // Each segment decoded on its own: an encoded `%2F` stays inside its segment, an
    // unencoded `/` splits the path and matches no route (rules::PROJECT_NOT_FOUND).
    let segments: Vec<String> = rest.split('/').map(percent_decode).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    if method == Method::GET && segments == ["user"] {
        return (auth::current_user(world, &who), caller);
    }
    if method == Method::DELETE && segments == ["personal_access_tokens", "self"] {
        return (tokens::revoke_self(world, &who), caller);
    }
    let ["projects", id, rest @ ..] = segments.as_slice() else {
        return (Reply::no_route(), caller);
    };
    let reply = route(world, method.as_str(), &who, id, rest, path, &params);
    (reply.unwrap_or_else(|refusal| refusal), caller)
}

fn route(
    world: &mut World,
    method: &str,
    who: &auth::Who,
    id: &str,
    rest: &[&str],
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    use auth::Need;
    let read = Need::read();
    match (method, rest) {
        ("GET", []) => {
            let project = auth::project(world, who, id, read)?;
            Ok(Reply::json(200, &json::project_json(world, project)))
        }
        ("GET", ["merge_requests"]) => merge_requests::list(world, who, id, path, params),
        ("GET", ["merge_requests", iid]) => merge_requests::get(world, who, id, iid, params),
        ("GET", ["merge_requests", iid, "diffs"]) => {
            merge_requests::diffs(world, who, id, iid, path, params)
        }
        ("GET", ["merge_requests", iid, "versions"]) => {
            merge_requests::versions(world, who, id, iid, path, params)
        }
        ("GET", ["merge_requests", iid, "approvals"]) => {
            merge_requests::approvals(world, who, id, iid)
        }
        ("POST", ["merge_requests", iid, "approve"]) => {
            merge_requests::approve(world, who, id, iid, params)
        }
        ("GET", ["merge_requests", iid, "notes"]) => notes::list(world, who, id, iid, path, params),
        ("POST", ["merge_requests", iid, "notes"]) => notes::create(world, who, id, iid, params),
        ("PUT", ["merge_requests", iid, "notes", note]) => {
            notes::update(world, who, id, iid, note, params)
        }
        ("POST", ["statuses", sha]) => statuses::create(world, who, id, sha, params),
        ("GET", ["repository", "commits", sha, "statuses"]) => {
            statuses::list(world, who, id, sha, path, params)
        }
        ("GET", ["repository", "archive" | "archive.tar.gz"]) => {
            archive::archive(world, who, id, params)
        }
        ("POST", ["access_tokens"]) => tokens::create(world, who, id, params),
        ("GET", ["access_tokens"]) => tokens::list(world, who, id, path, params),
        ("DELETE", ["access_tokens", token_id]) => tokens::revoke(world, who, id, token_id),
        _ => Err(Reply::no_route()),
    }
}

/// An injected 5xx or throttling, if one is due.
fn fault(world: &mut World) -> Option<Reply> {
    let now = world.now();
    let faults = &mut world.faults;
    let status = if let Some(status) = faults.always {
        Some(status)
    } else if faults.next > 0 {
        faults.next -= 1;
        Some(faults.next_status)
    } else {
        None
    };
    if let Some(status) = status {
        return Some(Reply::message(
            status,
            &format!("{status} Internal Server Error"),
        ));
    }
    if faults.throttled > 0 {
        faults.throttled -= 1;
        let retry_after = faults.retry_after;
        let reset = now + chrono::Duration::seconds(retry_after as i64);
        let limit = 2000;
        return Some(
            Reply {
                status: 429,
                body: b"Retry later\n".to_vec(),
                content_type: "text/plain",
                headers: Vec::new(),
            }
            .header("retry-after", retry_after.to_string())
            .header("ratelimit-name", rules::RATE_LIMIT_NAME)
            .header("ratelimit-limit", limit.to_string())
            .header("ratelimit-observed", (limit + 1).to_string())
            .header("ratelimit-remaining", "0")
            .header("ratelimit-reset", reset.timestamp().to_string())
            .header(
                "ratelimit-resettime",
                reset.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
            ),
        );
    }
    None
}

/// The merge request iid in a path, or Grape's refusal of a non-integer.
pub(crate) fn iid_of(text: &str) -> Result<u64, Reply> {
    text.parse()
        .map_err(|_| Reply::error(400, "merge_request_iid is invalid"))
}
