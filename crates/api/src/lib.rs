//! Sortie's HTTP API v1: one axum [`router`] over the [`Store`] and the jobs
//! queue, served by the `api` Lambda behind API Gateway and by `sortie dev` on
//! a local port.
//!
//! Authentication: in AWS, API Gateway's JWT authorizer verifies the token and
//! the `api` function puts its claims on the request as [`VerifiedClaims`].
//! Locally, the development identity is used only when [`AppState::dev_identity`]
//! is set explicitly. Every route checks `sortie_core::can`; a caller who may not
//! read a group gets 404 for its resources, so other tenants' names never leak.

mod error;
mod handlers;
mod openapi;
pub mod routes;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sortie_core::{can, Action, GroupPath, Principal};
use sortie_store::{JobQueue, Store};

pub use error::ApiError;
pub use openapi::openapi;
pub use routes::{match_route, Params, Route};

/// Largest request body accepted: 256 KiB.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Claims of a token the platform already verified (API Gateway's JWT authorizer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifiedClaims(pub BTreeMap<String, serde_json::Value>);

/// What every request handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// The jobs queue.
    pub queue: Arc<dyn JobQueue>,
    /// Use the local development identity for requests without verified claims.
    /// Never set in AWS; set only by `sortie dev` or tests that ask for it.
    pub dev_identity: bool,
    /// Where runners write logs and artifacts, and where the API reads them.
    pub artifacts: Arc<dyn sortie_store::Artifacts>,
    /// The artifacts bucket's name and region, given to runners in their spec.
    pub bucket: BucketConfig,
    /// JWT subjects that are system administrators (owners of the root group) from
    /// configuration: how the first administrator of a fresh deployment exists.
    pub admin_subjects: Vec<String>,
}

/// The artifacts bucket, as runners are told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketConfig {
    /// Bucket name.
    pub name: String,
    /// Bucket region.
    pub region: String,
}

/// The API router: every v1 route, answering JSON errors for anything else.
pub fn router(state: AppState) -> axum::Router {
    axum::Router::new().fallback(dispatch).with_state(state)
}

/// One request's context: who asks, what they sent, and which route matched.
pub struct Ctx {
    state: AppState,
    principal: Option<Principal>,
    headers: HeaderMap,
    query: HashMap<String, String>,
    body: Bytes,
    params: Params,
}

async fn dispatch(State(state): State<AppState>, request: Request) -> Response {
    match handle(state, request).await {
        Ok(response) => response,
        Err(e) => {
            if e.status.is_server_error() {
                tracing::error!(status = %e.status, code = e.code, message = %e.message, "request failed");
            }
            e.into_response()
        }
    }
}

async fn handle(state: AppState, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let (route, params) = match_route(&parts.method, parts.uri.path())?;
    match route {
        Route::Health => return Ok(axum::Json(serde_json::json!({"status": "ok"})).into_response()),
        Route::OpenApi => return Ok(axum::Json(openapi()).into_response()),
        _ => {}
    }
    let principal = match parts.extensions.get::<VerifiedClaims>() {
        Some(claims) if !claims.0.is_empty() => Some(Principal::from_claims(claims.0.clone())),
        _ if state.dev_identity => Some(Principal::local_dev()),
        // A runner's job token is checked by its route, against that one job.
        _ if route.uses_job_token() => None,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "a bearer token is required",
            ))
        }
    };
    let body = read_body(body).await?;
    let query = parse_query(parts.uri.query().unwrap_or_default())?;
    let cx = Ctx {
        state,
        principal,
        headers: parts.headers,
        query,
        body,
        params,
    };
    handlers::run(route, &cx).await
}

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the request body is over {} KiB", MAX_BODY_BYTES / 1024),
            )
        })
}

fn parse_query(q: &str) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_decode(s).ok_or_else(|| {
                ApiError::field(format!("query.{k}"), "is not valid percent-encoded UTF-8")
            })
        };
        out.insert(decode(k)?, decode(v)?);
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

impl Ctx {
    /// Loads the caller's memberships for `group` and checks `action`: 404 when the caller
    /// may not even read the group, 403 when it may read but not act.
    async fn authorize(
        &self,
        action: Action,
        group: &GroupPath,
        what: &str,
    ) -> Result<Principal, ApiError> {
        let Some(caller) = &self.principal else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "a bearer token is required",
            ));
        };
        let mut memberships = self.state.store.memberships_for(group.org()).await?;
        if self.state.admin_subjects.contains(&caller.subject) && !caller.subject.is_empty() {
            memberships.push(sortie_core::Membership {
                group: GroupPath::root(),
                role: sortie_core::Role::Owner,
                grantee: sortie_core::Grantee::Subject {
                    subject: caller.subject.clone(),
                    issuer: None,
                },
            });
        }
        let principal = caller.clone().with_memberships(memberships);
        if !can(&principal, Action::Read, group) {
            return Err(ApiError::not_found(what));
        }
        if !can(&principal, action, group) {
            return Err(ApiError::forbidden(
                format!(
                    "{what}: this needs the {:?} role on `{group}`",
                    action.required_role()
                )
                .to_lowercase(),
            ));
        }
        Ok(principal)
    }

    /// The body as a JSON or YAML document.
    fn document(&self) -> Result<serde_json::Value, ApiError> {
        let text = std::str::from_utf8(&self.body)
            .map_err(|_| ApiError::field("body", "is not UTF-8 text"))?;
        Ok(sortie_core::problems::parse_document(text)?)
    }

    /// The `If-Match` version, if sent: `"3"`, `W/"3"` or `3`.
    fn if_match(&self) -> Result<Option<u64>, ApiError> {
        let Some(v) = self.headers.get("if-match") else {
            return Ok(None);
        };
        let text = v.to_str().unwrap_or_default().trim();
        let text = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
        if text == "*" {
            return Ok(None);
        }
        text.parse::<u64>().map(Some).map_err(|_| {
            ApiError::field(
                "If-Match",
                "must be an ETag this API returned, such as \"3\"",
            )
        })
    }

    fn param_group(&self) -> &GroupPath {
        self.params
            .group
            .as_ref()
            .expect("group routes carry a group")
    }

    fn param_env(&self) -> &sortie_core::EnvPath {
        self.params
            .environment
            .as_ref()
            .expect("environment routes carry an environment")
    }

    fn param_id(&self) -> &str {
        self.params.id.as_deref().expect("item routes carry an id")
    }
}
