//! Agent pools (`/v1/agent-pools[/{id}]`, `/v1/groups/{group}/-/agent-pools`) and the pull
//! protocol agents speak (`/v1/agent-pools/{id}/claims`, `…/jobs/{job}/heartbeat|exit`).
//!
//! Agents authenticate with a pool token (`sortie-pool-<pool>.<token id>.<secret>`, stored
//! only as its SHA-256) or with an OIDC token whose issuer, audience and claim match the
//! pool's `oidc` trust. A token of another pool is answered 404, as another tenant's pool
//! is; a wrong or revoked token of this pool is 401, logged without the token.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::de::DeserializeOwned;
use sortie_core::agent_pool::{agent_id_problem, pool_name_problem, OidcTrust};
use sortie_core::protocol::agent::{
    AgentExit, ClaimRequest, ExitAnswer, HeartbeatRequest, EXIT_REASON_MAX, MAX_CLAIM_WAIT_SECONDS,
};
use sortie_core::{Action, GroupPath};
use sortie_lifecycle::{AgentAuth, AgentRefusal, EndReport as Exited, OidcCheck, PoolTokenRefusal};
use sortie_store::{AgentPoolRecord, StoreError, Versioned};
use tracing::warn;

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{
    bearer_token, Caller, Document, GroupParam, IdParam, IfMatch, JobParam, TokenParam,
};
use crate::model::agents::{self as m, AgentPoolList, AgentPoolView};
use crate::openapi::errors::*;
use crate::AppState;

fn pool_what(id: &str) -> String {
    format!("agent pool `{id}`")
}

/// The pool of `{id}` if the caller may at least read its group (404 otherwise), with
/// `action` checked (403 when it may read but not act).
async fn pool_for(
    state: &AppState,
    caller: &Caller,
    id: &str,
    action: impl Fn(&GroupPath) -> Action,
) -> Result<(Versioned<AgentPoolRecord>, String), ApiError> {
    let pool = match state.pools().get(id).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => return Err(ApiError::not_found(pool_what(id))),
        Err(e) => return Err(e.into()),
    };
    let group = pool.item.pool.group.clone();
    let principal = caller
        .authorize(state, action(&group), &group, &pool_what(id))
        .await?;
    Ok((pool, principal.subject))
}

/// Creates an agent pool in a group, with its first token (shown once).
#[utoipa::path(post, path = "/v1/agent-pools", tag = "agent-pools",
    request_body(description = "group, name, description and OIDC trust, YAML or JSON", content((m::AgentPoolCreate = "application/json"), (m::AgentPoolCreate = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created; `token` is shown only now", body = AgentPoolView),
        BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_agent_pool(
    State(state): State<AppState>,
    caller: Caller,
    body: Document,
) -> Result<Reply<AgentPoolView>, ApiError> {
    let doc = body.value()?;
    let mut p = sortie_core::Problems::default();
    let Some(mut f) = sortie_core::problems::Fields::new(&doc, "", &mut p) else {
        return Err(sortie_core::ValidationError { problems: p.0 }.into());
    };
    let group: Option<String> = f.required("group", &mut p);
    let name: Option<String> = f.required("name", &mut p);
    let description: String = f.optional("description", &mut p).unwrap_or_default();
    let oidc: Option<OidcTrust> = f.optional("oidc", &mut p);
    f.finish(&mut p);
    let group = group.and_then(|g| match GroupPath::parse(&g) {
        Ok(g) if !g.is_root() => Some(g),
        Ok(_) => {
            p.push("group", "must be a group, not the root");
            None
        }
        Err(e) => {
            for problem in e.problems {
                p.push("group", problem.problem);
            }
            None
        }
    });
    if let Some(problem) = name.as_deref().and_then(pool_name_problem) {
        p.push("name", problem);
    }
    if description.len() > 1024 || sortie_core::limits::has_control(&description) {
        p.push(
            "description",
            "must be at most 1024 characters, without control characters",
        );
    }
    if let Some(trust) = &oidc {
        p.0.extend(trust.problems("oidc"));
    }
    let (Some(group), Some(name)) = (group, name) else {
        return Err(sortie_core::ValidationError { problems: p.0 }.into());
    };
    if !p.is_empty() {
        return Err(sortie_core::ValidationError { problems: p.0 }.into());
    }
    let principal = caller
        .authorize(
            &state,
            manage_action(&group),
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let made = state
        .pools()
        .create(group, name, description, oidc, &principal.subject)
        .await?;
    Ok(minted(made))
}

/// A pool with a token just made, shown only now.
fn minted(made: sortie_lifecycle::MintedToken) -> Reply<AgentPoolView> {
    let version = made.pool.version;
    let mut view = AgentPoolView::from(made.pool);
    view.token = Some(made.token);
    view.token_id = Some(made.token_id);
    Reply::new(StatusCode::CREATED, view).etag(version)
}

/// The agent pools of exactly this group.
#[utoipa::path(get, path = "/v1/groups/{group}/-/agent-pools", tag = "agent-pools",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The group's agent pools", body = AgentPoolList),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_agent_pools(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<AgentPoolList>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            &group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let pools = state.pools().list(&group).await?;
    Ok(Reply::ok(AgentPoolList {
        pools: pools.into_iter().map(AgentPoolView::from).collect(),
    }))
}

/// An agent pool (its tokens by id only).
#[utoipa::path(get, path = "/v1/agent-pools/{id}", tag = "agent-pools",
    params(("id" = String, Path, description = "Pool id, `apool-…`")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The pool", body = AgentPoolView),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_agent_pool(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    caller: Caller,
) -> Result<Reply<AgentPoolView>, ApiError> {
    let (pool, _) = pool_for(&state, &caller, &id, |_| Action::Read).await?;
    let version = pool.version;
    Ok(Reply::ok(pool.into()).etag(version))
}

/// Deletes an agent pool: its agents are refused from then on, and its runners' jobs fail
/// at dispatch, saying the pool does not exist.
#[utoipa::path(delete, path = "/v1/agent-pools/{id}", tag = "agent-pools",
    params(("id" = String, Path, description = "Pool id")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted"),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_agent_pool(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    let (_, _) = pool_for(&state, &caller, &id, manage_action).await?;
    state.pools().delete(&id, if_match.version()?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Adds a token to the pool (shown once): rotation is adding one, moving the agents to it,
/// and revoking the old one.
#[utoipa::path(post, path = "/v1/agent-pools/{id}/tokens", tag = "agent-pools",
    params(("id" = String, Path, description = "Pool id")),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "The pool, with the new `token` shown only now", body = AgentPoolView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, BadGateway, Unavailable))]
pub(crate) async fn create_pool_token(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    caller: Caller,
) -> Result<Reply<AgentPoolView>, ApiError> {
    let (pool, by) = pool_for(&state, &caller, &id, manage_action).await?;
    match state.pools().add_token(pool, &by).await {
        Ok(made) => Ok(minted(made)),
        Err(e @ PoolTokenRefusal::TooMany) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "too_many_tokens",
            e.to_string(),
        )),
        Err(PoolTokenRefusal::NoSuchToken(t)) => Err(ApiError::not_found(format!("token `{t}`"))),
        Err(PoolTokenRefusal::Store(e)) => Err(e.into()),
    }
}

/// Revokes a pool token: agents using it are refused (401) from the next call.
#[utoipa::path(delete, path = "/v1/agent-pools/{id}/tokens/{token}", tag = "agent-pools",
    params(("id" = String, Path, description = "Pool id"), ("token" = String, Path, description = "Token id")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Revoked"),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, BadGateway, Unavailable))]
pub(crate) async fn revoke_pool_token(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    TokenParam(token_id): TokenParam,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    let (pool, _) = pool_for(&state, &caller, &id, manage_action).await?;
    match state.pools().revoke_token(pool, &token_id).await {
        Ok(_) => Ok(StatusCode::NO_CONTENT),
        Err(PoolTokenRefusal::NoSuchToken(_)) => Err(ApiError::not_found(format!(
            "token `{token_id}` of {}",
            pool_what(&id)
        ))),
        Err(e @ PoolTokenRefusal::TooMany) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "too_many_tokens",
            e.to_string(),
        )),
        Err(PoolTokenRefusal::Store(e)) => Err(e.into()),
    }
}

/// The pool an agent's credential opens: 401 without one, or for a wrong or revoked token
/// of this pool; 404 for an unknown pool, or a credential of another pool.
async fn agent_pool(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
) -> Result<AgentPoolRecord, ApiError> {
    let refuse = |sent: bool| {
        let message = "the agent credential is not valid for this pool";
        if sent {
            ApiError::invalid_token("invalid_token", message)
        } else {
            ApiError::unauthenticated("invalid_token", message)
        }
    };
    let token = bearer_token(headers)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| refuse(bearer_token(headers).is_some()))?;
    let oidc = state.oidc.clone();
    let verify = |trust: OidcTrust| async move {
        match oidc.verify(token, &trust.issuer, &trust.audience).await {
            Ok(claims) => OidcCheck::Claims(claims),
            Err(crate::oidc::OidcError::Unavailable(why)) => OidcCheck::Unavailable(why),
            Err(e) => OidcCheck::Invalid(e.to_string()),
        }
    };
    match state.pools().authenticate(id, token, verify).await? {
        AgentAuth::Accepted(pool) => Ok(*pool),
        AgentAuth::NoSuchPool => Err(ApiError::not_found(pool_what(id))),
        AgentAuth::Refused => Err(refuse(true)),
        AgentAuth::IssuerUnavailable(why) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "issuer_unavailable",
            format!("the keys of the pool's OIDC issuer could not be fetched: {why}"),
        )),
    }
}

/// A protocol body: JSON of a core type, or 400 naming the problem.
fn protocol_body<T: DeserializeOwned>(body: &Document) -> Result<T, ApiError> {
    serde_json::from_value(body.value()?).map_err(|e| ApiError::field("body", e.to_string()))
}

fn check_agent(agent: &str) -> Result<(), ApiError> {
    match agent_id_problem(agent) {
        Some(problem) => Err(ApiError::field("agent", problem)),
        None => Ok(()),
    }
}

fn not_held(state: sortie_core::JobState) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "not_held",
        format!("this agent does not hold the job: it is {state}, or held by another claim"),
    )
}

/// Claims one job offered to the pool, waiting up to `wait_seconds` (at most 20) for one.
#[utoipa::path(post, path = "/v1/agent-pools/{id}/claims", tag = "agents",
    params(("id" = String, Path, description = "Pool id")),
    request_body(content = ClaimRequest, content_type = "application/json"),
    security(("agentToken" = [])),
    responses((status = 200, description = "A claimed job: run `sortie-pilot` with its token", body = sortie_core::protocol::agent::Claim),
        (status = 204, description = "No job came within the wait"),
        BadRequest, Unauthorized, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn claim_job(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Response, ApiError> {
    let pool = agent_pool(&state, &headers, &id).await?;
    let request: ClaimRequest = protocol_body(&body)?;
    check_agent(&request.agent)?;
    // The pool saw an agent: recorded at most every 30 s, for waiting jobs and `runner check`.
    if let Err(e) = state
        .pools()
        .record_claim(&id, pool.last_claim_at, Utc::now())
        .await
    {
        warn!(pool = %id, error = %e, "the pool's last claim was not recorded");
    }
    if request
        .wait_seconds
        .is_some_and(|w| w > MAX_CLAIM_WAIT_SECONDS)
    {
        return Err(ApiError::field(
            "wait_seconds",
            format!("must be 0 to {MAX_CLAIM_WAIT_SECONDS}"),
        ));
    }
    let url = super::public_url(&state, &headers);
    match state
        .jobs
        .claim(&id, &request, &url, state.agent_heartbeat_seconds)
        .await?
    {
        Some(claim) => Ok(Reply::ok(claim).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Heartbeats a claimed job; the answer says run on, or stop (a cancel, the timeout).
#[utoipa::path(post, path = "/v1/agent-pools/{id}/jobs/{job}/heartbeat", tag = "agents",
    params(("id" = String, Path, description = "Pool id"), ("job" = String, Path, description = "Job id")),
    request_body(content = HeartbeatRequest, content_type = "application/json"),
    security(("agentToken" = [])),
    responses((status = 200, description = "Run on, or stop", body = sortie_core::protocol::agent::HeartbeatAnswer),
        BadRequest, Unauthorized, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn agent_heartbeat(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    JobParam(job): JobParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<sortie_core::protocol::agent::HeartbeatAnswer>, ApiError> {
    agent_pool(&state, &headers, &id).await?;
    let beat: HeartbeatRequest = protocol_body(&body)?;
    check_agent(&beat.agent)?;
    match state.jobs.heartbeat(&id, &job, &beat).await {
        Ok(answer) => Ok(Reply::ok(answer)),
        Err(AgentRefusal::NotHeld { state }) => Err(not_held(state)),
        Err(AgentRefusal::Store(StoreError::NotFound { .. })) => {
            Err(ApiError::not_found(format!("job `{job}`")))
        }
        Err(AgentRefusal::Store(e)) => Err(e.into()),
    }
}

/// Reports a claimed job's runner exit, or hands the job back.
#[utoipa::path(post, path = "/v1/agent-pools/{id}/jobs/{job}/exit", tag = "agents",
    params(("id" = String, Path, description = "Pool id"), ("job" = String, Path, description = "Job id")),
    request_body(content = AgentExit, content_type = "application/json"),
    security(("agentToken" = [])),
    responses((status = 200, description = "The job's state after the report", body = ExitAnswer),
        BadRequest, Unauthorized, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn agent_exit(
    State(state): State<AppState>,
    IdParam(id): IdParam,
    JobParam(job): JobParam,
    headers: HeaderMap,
    body: Document,
) -> Result<Reply<ExitAnswer>, ApiError> {
    agent_pool(&state, &headers, &id).await?;
    let report: AgentExit = protocol_body(&body)?;
    check_agent(&report.agent)?;
    if report
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > EXIT_REASON_MAX)
    {
        return Err(ApiError::field(
            "reason",
            format!("must be at most {EXIT_REASON_MAX} bytes"),
        ));
    }
    match state.jobs.agent_exited(&id, &job, &report).await {
        Ok(Exited::Ended(r) | Exited::AlreadyEnded(r)) => {
            Ok(Reply::ok(ExitAnswer { state: r.job.state }))
        }
        Ok(Exited::NotRunning(s)) | Err(AgentRefusal::NotHeld { state: s }) => Err(not_held(s)),
        Err(AgentRefusal::Store(StoreError::NotFound { .. })) => {
            Err(ApiError::not_found(format!("job `{job}`")))
        }
        Err(AgentRefusal::Store(e)) => Err(e.into()),
    }
}
