//! The audit trail of the API: the scope every audited route runs in (its entry is
//! written by the store in the change's own transaction) and `GET /v1/orgs/{org}/-/audit`.

use axum::extract::{Request, State};
use axum::http::header::{IF_MATCH, USER_AGENT};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde::Deserialize;
use sortie_core::{Action, GroupPath};
use sortie_store::audit::{AuditRange, AuditScope, Draft, ROOT_CHAIN};
use utoipa::IntoParams;

use super::separator::{decode_param, OriginalPath};
use super::{Auth, Reply, Route};
use crate::error::ApiError;
use crate::extract::{query_field, Caller, QueryParams};
use crate::model::{AuditList, AuditRecordView};
use crate::openapi::errors::*;
use crate::{AppState, RequestOrigin};

/// The mutating routes of a person that write no audit entry, and why: each changes no
/// configuration and decides nothing.
pub const UNAUDITED: &[(Route, &str)] = &[
    (
        Route::CheckRunner,
        "tries the runner's role and answers; changes nothing",
    ),
    (
        Route::TestNotification,
        "sends one test message; the destination's delivery history records it",
    ),
    (
        Route::RedeliverNotification,
        "sends a delivery again; the destination's delivery history records it",
    ),
];

impl Route {
    /// Whether this route writes an audit entry: every route of a person (`bearerAuth`)
    /// that changes something, but those of [`UNAUDITED`]. A job's and an agent's own
    /// reports are recorded in the job's history; the webhook in its delivery claims.
    pub fn audited(self) -> bool {
        let (method, _) = self.method_and_path();
        method != Method::GET
            && method != Method::HEAD
            && self.auth() == Auth::User
            && !UNAUDITED.iter().any(|(r, _)| *r == self)
    }
}

/// The audited routes that decide rather than configure (a job's submit, review, cancel or
/// restore) or that have their own event (a lock's `sortie.environment.lock_changed`):
/// they publish no `sortie.configuration.changed`.
const NOT_CONFIGURATION: &[Route] = &[
    Route::SubmitJob,
    Route::CancelJob,
    Route::ApproveJob,
    Route::DiscardJob,
    Route::RestoreStateVersion,
    Route::LockEnvironment,
    Route::UnlockEnvironment,
    Route::FreezeGroup,
    Route::UnfreezeGroup,
];

impl Route {
    /// Whether a success of this route publishes `sortie.configuration.changed`: every
    /// audited route that changes configuration.
    pub fn configures(self) -> bool {
        self.audited() && !NOT_CONFIGURATION.contains(&self)
    }
}

/// Runs an audited route's handler inside its audit scope: the action, the target and
/// the request, the actor and organisation named by its authorisation, the body's digest
/// by its body extractor. A change to configuration that wrote its entry then publishes
/// `sortie.configuration.changed` (for the group it was authorised on).
pub(crate) async fn scope(
    State(state): State<AppState>,
    route: Route,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let text = |v: Option<&axum::http::HeaderValue>| {
        v.and_then(|v| v.to_str().ok())
            .map(|s| s.chars().take(512).collect::<String>())
    };
    let origin = request.extensions().get::<RequestOrigin>().cloned();
    let draft = Draft {
        action: route.operation_id().to_string(),
        target: readable_path(
            &request
                .extensions()
                .get::<OriginalPath>()
                .map(|p| p.0.clone())
                .unwrap_or_else(|| request.uri().path().to_string()),
        ),
        request_id: origin
            .as_ref()
            .map(|o| o.request_id.clone())
            .unwrap_or_else(sortie_core::tokens::new_id),
        source_ip: origin.and_then(|o| o.source_ip),
        user_agent: text(headers.get(USER_AGENT)),
        before: text(headers.get(IF_MATCH)),
        ..Draft::default()
    };
    let scope = AuditScope::new(draft);
    let response = scope.run(next.run(request)).await;
    if route.configures() && response.status().is_success() {
        if let Some(entry) = scope.written() {
            let group = scope.group().unwrap_or_default();
            let detail = serde_json::json!({
                "group": group,
                "org": entry.org,
                "action": entry.action,
                "target": entry.target,
                "by": entry.actor.subject,
                "entry": entry.id,
            });
            let resource = format!("sortie:audit/{}/{}", entry.org, entry.id);
            if let Err(e) = state
                .jobs
                .bus
                .publish(
                    sortie_core::notify::CONFIGURATION_CHANGED,
                    &resource,
                    detail,
                )
                .await
            {
                tracing::warn!(error = %e, action = %entry.action, "configuration.changed not published");
            }
        }
    }
    response
}

/// A request's path as people write it: each segment percent-decoded (a group sent as one
/// encoded segment, `acme%2Fdemo`, reads `acme/demo`), so one target has one form and a
/// filter by prefix finds it however the client encoded it. A segment that does not decode
/// stays as sent.
fn readable_path(path: &str) -> String {
    path.split('/')
        .map(|segment| decode_param(segment).unwrap_or_else(|_| segment.to_string()))
        .collect::<Vec<_>>()
        .join("/")
}

/// The query of the audit listing.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Only entries by this subject.
    actor: Option<String>,
    /// Only entries of this action (`create_runner`, `approve_job`, …).
    action: Option<String>,
    /// Only entries whose target starts with this path.
    target: Option<String>,
    /// Only entries made at or after this time (RFC 3339).
    #[serde(default, deserialize_with = "since")]
    #[param(value_type = Option<String>)]
    since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only entries made before this time (RFC 3339).
    #[serde(default, deserialize_with = "until")]
    #[param(value_type = Option<String>)]
    until: Option<chrono::DateTime<chrono::Utc>>,
    /// `oldest` reads oldest first (to verify the chain); newest first otherwise.
    #[serde(default, deserialize_with = "order")]
    #[param(value_type = Option<String>)]
    order: Option<bool>,
    /// At most this many entries read (1 to 1000, default 100).
    #[serde(default, deserialize_with = "limit")]
    #[param(value_type = Option<u32>)]
    limit: Option<u32>,
    /// The `next` of the previous page.
    cursor: Option<String>,
}

type Time = Option<chrono::DateTime<chrono::Utc>>;

fn rfc3339(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

fn since<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    query_field(d, "since", "is not an RFC 3339 time", rfc3339)
}

fn until<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    query_field(d, "until", "is not an RFC 3339 time", rfc3339)
}

fn order<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    query_field(d, "order", "is not `newest` or `oldest`", |s| match s {
        "oldest" => Some(true),
        "newest" => Some(false),
        _ => None,
    })
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    query_field(d, "limit", "is not a number from 1 to 1000", |s| {
        s.parse::<u32>().ok().filter(|n| (1..=1000).contains(n))
    })
}

/// The organisation's audit trail, a page at a time, each entry as stored (the bytes its
/// seal covers) with its seal: `sortie audit verify` recomputes the chain from them.
/// Filters apply within the page read, so a page may hold fewer entries than `limit`
/// and still have a `next`.
#[utoipa::path(get, path = "/v1/orgs/{org}/-/audit", tag = "audit",
    params(("org" = String, Path, description = "Organisation (`-`: the root group's configuration)"), AuditQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "A page of the audit trail", body = AuditList),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_audit(
    State(state): State<AppState>,
    axum::extract::Path(org): axum::extract::Path<String>,
    caller: Caller,
    query: QueryParams<AuditQuery>,
) -> Result<Reply<AuditList>, ApiError> {
    let group = if org == ROOT_CHAIN {
        GroupPath::root()
    } else {
        GroupPath::parse(&org)
            .ok()
            .filter(|g| g.org() == Some(org.as_str()))
            .ok_or_else(|| ApiError::field("org", "is not an organisation's name"))?
    };
    caller
        .authorize(
            &state,
            Action::Administer,
            &group,
            &format!("organisation `{org}`"),
        )
        .await?;
    let q = query.get()?;
    if let Some(c) = &q.cursor {
        if c.len() != 26 || !c.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ApiError::field(
                "cursor",
                "is not a cursor this API returned",
            ));
        }
    }
    let range = AuditRange {
        after: q.cursor.clone(),
        since: q.since.map(sortie_core::audit::id_bound),
        until: q.until.map(sortie_core::audit::id_bound),
        newest_first: !q.order.unwrap_or(false),
        limit: q.limit.unwrap_or(100),
    };
    let page = state.audit_trail().page(&org, &range).await?;
    let entries = page
        .records
        .into_iter()
        .filter_map(|r| {
            let entry: Option<sortie_core::audit::AuditEntry> = serde_json::from_str(&r.body).ok();
            let keep = entry.as_ref().is_none_or(|e| {
                q.actor.as_ref().is_none_or(|a| &e.actor.subject == a)
                    && q.action.as_ref().is_none_or(|a| &e.action == a)
                    && q.target
                        .as_ref()
                        .is_none_or(|t| e.target.starts_with(t.as_str()))
            });
            keep.then_some(AuditRecordView {
                entry,
                stored: r.body,
                seal: r.seal,
            })
        })
        .collect();
    Ok(Reply::ok(AuditList {
        entries,
        next: page.next,
        head: state.audit_trail().head(&org).await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::readable_path;

    #[test]
    fn a_target_reads_the_same_however_its_group_was_encoded() {
        assert_eq!(
            readable_path("/v1/groups/acme%2Fdemo/-/environments"),
            "/v1/groups/acme/demo/-/environments"
        );
        assert_eq!(
            readable_path("/v1/groups/acme/demo/-/environments"),
            "/v1/groups/acme/demo/-/environments"
        );
        assert_eq!(readable_path("/v1/x/%zz"), "/v1/x/%zz", "left as sent");
    }
}
