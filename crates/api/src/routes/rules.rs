//! Runner rules: `/v1/groups/{group}/-/rules[/{id}]`. A scope's rules are one rule
//! set with one version: its ETag, checked by `If-Match` on update and delete.

use axum::extract::State;
use axum::http::StatusCode;
use sortie_core::{Action, RunnerRule};
use sortie_lifecycle::RuleRefusal;

use super::{manage_action, Reply};
use crate::error::ApiError;
use crate::extract::{Caller, Document, GroupParam, IdParam, IfMatch};
use crate::model::{RuleCreate, RuleList, RuleUpdate};
use crate::openapi::errors::*;
use crate::AppState;

/// The answer to a refused rule read or write.
fn refused(e: RuleRefusal, what: &str) -> ApiError {
    match e {
        RuleRefusal::Invalid(e) => e.into(),
        RuleRefusal::Field { field, problem } => ApiError::field(field, problem),
        RuleRefusal::NoSuchRule(_) => ApiError::not_found(what),
        RuleRefusal::Store(e) => e.into(),
    }
}

/// The rules of exactly this scope.
#[utoipa::path(get, path = "/v1/groups/{group}/-/rules", tag = "rules",
    params(("group" = String, Path, description = "Scope group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The scope's rules; ETag is the scope's rule-set version", body = RuleList, headers(("etag" = String, description = "The rule set's version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn list_rules(
    State(state): State<AppState>,
    GroupParam(scope): GroupParam,
    caller: Caller,
) -> Result<Reply<RuleList>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Read,
            &scope,
            &format!("group `{}`", scope.as_str()),
        )
        .await?;
    let rules = state.rules().list(&scope).await?;
    Ok(Reply::ok(RuleList { rules: rules.item }).etag(rules.version))
}

/// Creates a rule at the scope.
#[utoipa::path(post, path = "/v1/groups/{group}/-/rules", tag = "rules",
    params(("group" = String, Path, description = "Scope group path")),
    request_body(description = "The rule, YAML or JSON", content((RuleCreate = "application/json"), (RuleCreate = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 201, description = "Created; ETag is the rule set's new version", body = sortie_core::RunnerRule, headers(("etag" = String, description = "The rule set's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn create_rule(
    State(state): State<AppState>,
    GroupParam(scope): GroupParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<RunnerRule>, ApiError> {
    caller
        .authorize(
            &state,
            manage_action(&scope),
            &scope,
            &format!("group `{}`", scope.as_str()),
        )
        .await?;
    let created = state
        .rules()
        .create(&scope, body.value()?)
        .await
        .map_err(|e| refused(e, "rule"))?;
    Ok(Reply::new(StatusCode::CREATED, created.item).etag(created.version))
}

/// One rule.
#[utoipa::path(get, path = "/v1/groups/{group}/-/rules/{id}", tag = "rules",
    params(("group" = String, Path, description = "Scope group path"), ("id" = String, Path, description = "Rule id")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The rule; ETag is the rule set's version", body = sortie_core::RunnerRule, headers(("etag" = String, description = "The rule set's version"))),
        BadRequest, Unauthorized, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_rule(
    State(state): State<AppState>,
    GroupParam(scope): GroupParam,
    IdParam(id): IdParam,
    caller: Caller,
) -> Result<Reply<RunnerRule>, ApiError> {
    let what = format!("rule `{id}` in `{}`", scope.as_str());
    caller
        .authorize(&state, Action::Read, &scope, &what)
        .await?;
    let rule = state
        .rules()
        .get(&scope, &id)
        .await
        .map_err(|e| refused(e, &what))?;
    Ok(Reply::ok(rule.item).etag(rule.version))
}

/// Replaces a rule. Linked environments keep their runner until refreshed.
#[utoipa::path(put, path = "/v1/groups/{group}/-/rules/{id}", tag = "rules",
    params(("group" = String, Path, description = "Scope group path"), ("id" = String, Path, description = "Rule id"),
        ("If-Match" = Option<String>, Header, description = "The rule set's ETag")),
    request_body(description = "The rule's new content, YAML or JSON", content((RuleUpdate = "application/json"), (RuleUpdate = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Updated; ETag is the rule set's new version", body = sortie_core::RunnerRule, headers(("etag" = String, description = "The rule set's version"))),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn update_rule(
    State(state): State<AppState>,
    GroupParam(scope): GroupParam,
    IdParam(id): IdParam,
    caller: Caller,
    if_match: IfMatch,
    body: Document,
) -> Result<Reply<RunnerRule>, ApiError> {
    caller
        .authorize(
            &state,
            manage_action(&scope),
            &scope,
            &format!("rule `{id}`"),
        )
        .await?;
    let expected = if_match.version()?;
    let updated = state
        .rules()
        .update(&scope, &id, body.value()?, expected)
        .await
        .map_err(|e| refused(e, &format!("rule `{id}`")))?;
    Ok(Reply::ok(updated.item).etag(updated.version))
}

/// Deletes a rule. Linked environments keep their runner until refreshed.
#[utoipa::path(delete, path = "/v1/groups/{group}/-/rules/{id}", tag = "rules",
    params(("group" = String, Path, description = "Scope group path"), ("id" = String, Path, description = "Rule id"),
        ("If-Match" = Option<String>, Header, description = "The rule set's ETag")),
    security(("bearerAuth" = [])),
    responses((status = 204, description = "Deleted; linked environments keep their runner until refreshed"),
        BadRequest, Unauthorized, Forbidden, NotFound, PreconditionFailed, BadGateway, Unavailable))]
pub(crate) async fn delete_rule(
    State(state): State<AppState>,
    GroupParam(scope): GroupParam,
    IdParam(id): IdParam,
    caller: Caller,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    caller
        .authorize(
            &state,
            manage_action(&scope),
            &scope,
            &format!("rule `{id}`"),
        )
        .await?;
    state
        .rules()
        .delete(&scope, &id, if_match.version()?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
