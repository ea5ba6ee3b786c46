//! Locks and freezes: `POST /v1/environments/{environment}/-/lock` and `/-/unlock` (need
//! `deploy`), `POST /v1/groups/{group}/-/lock` and `/-/unlock` (a group freeze; both
//! need `manage`). A locked environment refuses new jobs with 409 [`locked`]. Locking
//! again by the same subject for the same reason answers the lock held (idempotent); by
//! anyone else, or for another reason, 409 naming the lock held.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use sortie_core::lock::{EnvLock, Held, LockScope};
use sortie_core::problems::{Fields, Problems};
use sortie_core::{Action, EnvPath, Problem};
use sortie_lifecycle::LockRefusal;
use sortie_store::LockOutcome;
use utoipa::ToSchema;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{Caller, Document, EnvParam, GroupParam};
use crate::openapi::errors::*;
use crate::AppState;

/// The body of a lock or a freeze.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LockBody {
    /// Why, in the locker's words (required; at most 500 bytes, no control characters).
    pub reason: String,
}

/// A lock or a freeze, as it stands after the request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LockView {
    /// The environment's path, or the group's.
    pub target: String,
    /// True while it is locked (frozen).
    pub locked: bool,
    /// The lock held now (after a lock), or the one removed (after an unlock); absent
    /// when an unlock found nothing to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<EnvLock>,
}

/// The 409 of a job refused by a lock: the sentence names who locked it, when and why, and
/// the fields give each (`lock.by`, `lock.at`, `lock.reason`, and `lock.group` for a freeze).
pub(crate) fn locked(env: &EnvPath, held: &Held) -> ApiError {
    let mut e = ApiError::new(StatusCode::CONFLICT, "locked", held.refusal(env));
    e.fields = lock_fields(&held.lock);
    if let LockScope::Group { group } = &held.scope {
        e.fields.push(Problem {
            path: "lock.group".into(),
            problem: group.to_string(),
        });
    }
    e
}

fn lock_fields(lock: &EnvLock) -> Vec<Problem> {
    [
        ("lock.by", lock.by.clone()),
        ("lock.at", lock.at.to_rfc3339()),
        ("lock.reason", lock.reason.clone()),
    ]
    .into_iter()
    .map(|(path, problem)| Problem {
        path: path.into(),
        problem,
    })
    .collect()
}

/// The 409 of a second lock: it names the lock already held.
fn already(what: &str, held: &EnvLock) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::CONFLICT,
        "locked",
        format!("{what} is already locked by {}", held.describe()),
    );
    e.fields = lock_fields(held);
    e
}

/// The `reason` of a lock body: required, every other field refused.
fn reason_of(body: &Document) -> Result<String, ApiError> {
    let value = body.value()?;
    let mut p = Problems::default();
    let reason = Fields::new(&value, "", &mut p).and_then(|mut f| {
        let r = f.required_str("reason", &mut p);
        f.finish(&mut p);
        r
    });
    Ok(p.finish(reason.unwrap_or_default())?)
}

fn refused(e: LockRefusal) -> ApiError {
    match e {
        LockRefusal::Invalid(e) => e.into(),
        LockRefusal::Store(e) => e.into(),
    }
}

fn answer(
    target: String,
    outcome: LockOutcome,
    lock: EnvLock,
    what: &str,
) -> Result<Reply<LockView>, ApiError> {
    match outcome {
        LockOutcome::Taken => Ok(Reply::ok(LockView {
            target,
            locked: true,
            lock: Some(lock),
        })),
        // The same subject locking again for the same reason is a retry (a lost answer, a
        // CLI run twice): it gets the lock it holds, so a lock is safe to repeat, as a PUT.
        LockOutcome::AlreadyHeld(held) if held.by == lock.by && held.reason == lock.reason => {
            Ok(Reply::ok(LockView {
                target,
                locked: true,
                lock: Some(held),
            }))
        }
        LockOutcome::AlreadyHeld(held) => Err(already(what, &held)),
    }
}

/// Locks an environment: it refuses new jobs (409 naming who, when and why) until
/// unlocked; a job already running finishes.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/lock", tag = "environments",
    params(("environment" = String, Path, description = "Environment path")),
    request_body(description = "Why it is locked", content((LockBody = "application/json"), (LockBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Locked (or already locked by the caller for the same reason: the lock held, with its time; a retry is safe)", body = LockView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn lock_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<LockView>, ApiError> {
    let what = format!("environment `{path}`");
    let principal = caller
        .authorize(&state, Action::Deploy, path.group(), &what)
        .await?;
    let reason = reason_of(&body)?;
    let at = Utc::now();
    let outcome = state
        .jobs
        .lock_environment(&path, &principal.subject, &reason, at)
        .await
        .map_err(refused)?;
    let lock = EnvLock::new(principal.subject.clone(), at, &reason)?;
    answer(path.to_string(), outcome, lock, &what)
}

/// Unlocks an environment: new jobs run again.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/unlock", tag = "environments",
    params(("environment" = String, Path, description = "Environment path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Unlocked; `lock` is the lock removed, absent when it was not locked", body = LockView),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn unlock_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
) -> Result<Reply<LockView>, ApiError> {
    let principal = caller
        .authorize(
            &state,
            Action::Deploy,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let removed = state
        .jobs
        .unlock_environment(&path, &principal.subject)
        .await?;
    Ok(Reply::ok(LockView {
        target: path.to_string(),
        locked: false,
        lock: removed,
    }))
}

/// Freezes a group: every environment below it refuses new jobs until it is unlocked.
#[utoipa::path(post, path = "/v1/groups/{group}/-/lock", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    request_body(description = "Why it is frozen", content((LockBody = "application/json"), (LockBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Frozen (or already frozen by the caller for the same reason: the freeze held, with its time; a retry is safe)", body = LockView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn freeze_group(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<LockView>, ApiError> {
    let what = format!("group `{group}`");
    let principal = caller
        .authorize(&state, Action::Manage, &group, &what)
        .await?;
    let reason = reason_of(&body)?;
    let at = Utc::now();
    let outcome = state
        .jobs
        .freeze_group(&group, &principal.subject, &reason, at)
        .await
        .map_err(refused)?;
    let lock = EnvLock::new(principal.subject.clone(), at, &reason)?;
    answer(group.to_string(), outcome, lock, &what)
}

/// Ends a group's freeze.
#[utoipa::path(post, path = "/v1/groups/{group}/-/unlock", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Unfrozen; `lock` is the freeze removed, absent when it was not frozen", body = LockView),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn unfreeze_group(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<LockView>, ApiError> {
    let principal = caller
        .authorize(&state, Action::Manage, &group, &format!("group `{group}`"))
        .await?;
    let removed = state
        .jobs
        .unfreeze_group(&group, &principal.subject)
        .await?;
    Ok(Reply::ok(LockView {
        target: group.to_string(),
        locked: false,
        lock: removed,
    }))
}
