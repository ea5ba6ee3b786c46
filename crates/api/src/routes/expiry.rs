//! Expiry: `POST /v1/environments/{environment}/-/extend {by}` (needs `deploy`) moves an
//! expiring environment's end later, up to the maximum TTL set on its groups (409 naming
//! the limit when past it); `PUT`/`GET /v1/groups/{group}/-/expiry` set (needs `manage`)
//! and read (needs `read`) a group's default and maximum TTL; a job on an environment
//! marked destroyed by its expiry is refused with 409 `destroyed`.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sortie_core::expiry::{self, ExtendRefusal};
use sortie_core::problems::{Fields, Problems};
use sortie_core::{Action, Problem};
use sortie_lifecycle::expiry::ExtendError;
use utoipa::ToSchema;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{Caller, Document, EnvParam, GroupParam};
use crate::openapi::errors::*;
use crate::AppState;

/// The body of an extension.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExtendBody {
    /// How much longer, such as `24h` (`s`, `m`, `h`, `d`; at least `1m`).
    pub by: String,
}

/// The environment's end after an extension.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExtendView {
    /// The environment's path.
    pub environment: String,
    /// Its new end (written as its `expires_at`).
    pub expires_at: DateTime<Utc>,
}

/// The `by` of an extend body, in seconds: required, every other field refused.
fn by_of(body: &Document) -> Result<u64, ApiError> {
    let value = body.value()?;
    let mut p = Problems::default();
    let by = Fields::new(&value, "", &mut p).and_then(|mut f| {
        let by = f.required_str("by", &mut p);
        f.finish(&mut p);
        by
    });
    let seconds = by.and_then(|b| match expiry::parse_duration(&b) {
        Ok(s) => Some(s),
        Err(problem) => {
            p.push("by", problem);
            None
        }
    });
    Ok(p.finish(seconds.unwrap_or_default())?)
}

fn refused(e: ExtendError) -> ApiError {
    match e {
        ExtendError::Store(e) => e.into(),
        ExtendError::Refused(r @ ExtendRefusal::TooShort) => {
            let mut e = ApiError::new(StatusCode::BAD_REQUEST, "invalid", r.to_string());
            e.fields = vec![Problem {
                path: "by".into(),
                problem: "must be at least 1m".into(),
            }];
            e
        }
        ExtendError::Refused(r @ ExtendRefusal::NoExpiry) => {
            ApiError::new(StatusCode::CONFLICT, "not_expiring", r.to_string())
        }
        ExtendError::Refused(r @ ExtendRefusal::OverMaximum { .. }) => {
            let mut e = ApiError::new(StatusCode::CONFLICT, "over_maximum", r.to_string());
            if let ExtendRefusal::OverMaximum { max, latest, .. } = &r {
                e.fields = vec![
                    Problem {
                        path: "max_ttl".into(),
                        problem: max.clone(),
                    },
                    Problem {
                        path: "latest".into(),
                        problem: latest.to_rfc3339(),
                    },
                ];
            }
            e
        }
    }
}

/// Extends an expiring environment's life by `by`, counted from the later of its current
/// end and now, up to the maximum TTL (from now) set on its groups.
#[utoipa::path(post, path = "/v1/environments/{environment}/-/extend", tag = "environments",
    params(("environment" = String, Path, description = "Environment path")),
    request_body(description = "How much longer", content((ExtendBody = "application/json"), (ExtendBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Extended", body = ExtendView),
        BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn extend_environment(
    State(state): State<AppState>,
    EnvParam(path): EnvParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<ExtendView>, ApiError> {
    caller
        .authorize(
            &state,
            Action::Deploy,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let by = by_of(&body)?;
    let (_, end) = state
        .environments()
        .extend(&path, by)
        .await
        .map_err(refused)?;
    Ok(Reply::ok(ExtendView {
        environment: path.to_string(),
        expires_at: end,
    }))
}

/// The 409 of a job on an environment its expiry destroyed.
pub(crate) fn destroyed(env: &sortie_core::EnvPath, d: &expiry::Destroyed) -> ApiError {
    let mut e = ApiError::new(StatusCode::CONFLICT, "destroyed", d.refusal(env));
    e.fields = vec![Problem {
        path: "destroyed.at".into(),
        problem: d.at.to_rfc3339(),
    }];
    e
}

/// The body of a group's expiry limits: each a duration such as `3d`; absent (or `null`)
/// sets none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct GroupExpiryBody {
    /// The TTL of an environment below the group that sets neither `ttl` nor `expires_at`.
    /// A new default reaches the environments created from now on; those that exist now
    /// only with `apply_to_existing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<String>,
    /// The longest an environment below the group may live from now on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<String>,
    /// A new default also reaches the environments below the group that exist now (they
    /// get ends; see the answer's `change`). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apply_to_existing: bool,
    /// Answer what the change would do (`change`) and write nothing. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// The limits in force below a group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct InheritedExpiry {
    /// The deepest default TTL set on the group or above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<String>,
    /// The smallest maximum TTL set on the group or above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<String>,
}

/// A group's expiry limits: its own, and those in force below it (with its ancestors').
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupExpiryView {
    /// The group's path.
    pub group: String,
    /// Its own default TTL (`3d`), if it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<String>,
    /// Since when its default applies: to environments created from then on (absent: to
    /// every environment below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_since: Option<DateTime<Utc>>,
    /// Its own maximum TTL, if it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<String>,
    /// The limits in force below it: the deepest default, the smallest maximum.
    pub inherited: InheritedExpiry,
    /// Environments whose ends were written again by this change (absent on a read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed: Option<usize>,
    /// What this change does (or, for a dry run, would do) to the environments below
    /// (absent on a read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<ExpiryChangeView>,
}

/// At most this many environments a change names (`change.environments`).
pub const CHANGE_NAMED_MAX: usize = 50;

/// What a change of a group's expiry limits does to the environments below it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExpiryChangeView {
    /// True when nothing was written.
    pub dry_run: bool,
    /// How many environments expire with the change and did not before, or expire sooner.
    pub sooner: usize,
    /// The first of them, earliest end first (at most 50).
    pub environments: Vec<ExpiringEnvironment>,
    /// How many expire later with the change, or no longer expire.
    pub later: usize,
    /// How many existing environments a new default does not reach because
    /// `apply_to_existing` was not asked for (they keep their ends).
    pub kept: usize,
    /// True when more environments were below the group than one change reads (1,000):
    /// the rest are corrected by the sweep when they come due.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// An environment and its end after a change.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExpiringEnvironment {
    /// The environment's path.
    pub environment: String,
    /// Its end with the change.
    pub expires_at: DateTime<Utc>,
}

impl ExpiryChangeView {
    fn of(c: sortie_lifecycle::expiry::ExpiryChange, dry_run: bool) -> Self {
        Self {
            dry_run,
            sooner: c.sooner.len(),
            environments: c
                .sooner
                .into_iter()
                .take(CHANGE_NAMED_MAX)
                .map(|(p, at)| ExpiringEnvironment {
                    environment: p.to_string(),
                    expires_at: at,
                })
                .collect(),
            later: c.later,
            kept: c.kept,
            truncated: c.truncated,
        }
    }
}

fn body_of(limits: &expiry::ExpiryLimits) -> InheritedExpiry {
    InheritedExpiry {
        default_ttl: limits.default_ttl_seconds.map(expiry::format_duration),
        max_ttl: limits.max_ttl_seconds.map(expiry::format_duration),
    }
}

/// The limits of a group expiry body and its two flags (`apply_to_existing`, `dry_run`):
/// every other field refused, each duration checked.
fn limits_of(body: &Document) -> Result<(expiry::ExpiryLimits, bool, bool), ApiError> {
    let value = body.value()?;
    let mut p = Problems::default();
    let mut limits = expiry::ExpiryLimits::default();
    let (mut apply_to_existing, mut dry_run) = (false, false);
    if let Some(mut f) = Fields::new(&value, "", &mut p) {
        for field in ["default_ttl", "max_ttl"] {
            let text: Option<String> = f.optional(field, &mut p);
            let seconds = text.and_then(|t| match expiry::parse_duration(&t) {
                Ok(s) => Some(s),
                Err(problem) => {
                    p.push(field, problem);
                    None
                }
            });
            match field {
                "default_ttl" => limits.default_ttl_seconds = seconds,
                _ => limits.max_ttl_seconds = seconds,
            }
        }
        apply_to_existing = f.optional("apply_to_existing", &mut p).unwrap_or(false);
        dry_run = f.optional("dry_run", &mut p).unwrap_or(false);
        f.finish(&mut p);
    }
    Ok(p.finish((limits, apply_to_existing, dry_run))?)
}

async fn group_view(
    state: &AppState,
    group: &sortie_core::GroupPath,
    change: Option<ExpiryChangeView>,
    refreshed: Option<usize>,
) -> Result<GroupExpiryView, ApiError> {
    let (own_limits, inherited) = state.environments().group_expiry(group).await?;
    let own = body_of(&own_limits);
    Ok(GroupExpiryView {
        group: group.to_string(),
        default_ttl: own.default_ttl,
        default_since: own_limits.default_since,
        max_ttl: own.max_ttl,
        inherited: body_of(&inherited),
        refreshed,
        change,
    })
}

/// Sets a group's expiry limits (replacing both): the default TTL of the environments below
/// it that set none, and the longest any of them may live from now on. A new default
/// reaches the environments that exist now only with `apply_to_existing`; the answer's
/// `change` says which environments expire sooner (with `dry_run`, would, and nothing is
/// written).
#[utoipa::path(put, path = "/v1/groups/{group}/-/expiry", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    request_body(description = "The limits; an absent one is unset", content((GroupExpiryBody = "application/json"), (GroupExpiryBody = "application/yaml"))),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "Set (or, for a dry run, what it would do)", body = GroupExpiryView),
        BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType, BadGateway, Unavailable))]
pub(crate) async fn set_group_expiry(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
    body: Document,
) -> Result<Reply<GroupExpiryView>, ApiError> {
    caller
        .authorize(&state, Action::Manage, &group, &format!("group `{group}`"))
        .await?;
    let (limits, apply_to_existing, dry_run) = limits_of(&body)?;
    let change = state
        .environments()
        .set_group_expiry(&group, &limits, apply_to_existing, dry_run)
        .await?;
    let written = change.written;
    let change = ExpiryChangeView::of(change, dry_run);
    let mut view = group_view(&state, &group, Some(change), (!dry_run).then_some(written)).await?;
    if dry_run {
        // What it would be: the limits asked for, not those still in force.
        view.default_ttl = limits.default_ttl_seconds.map(expiry::format_duration);
        view.max_ttl = limits.max_ttl_seconds.map(expiry::format_duration);
    }
    Ok(Reply::ok(view))
}

/// Reads a group's expiry limits, and those in force below it.
#[utoipa::path(get, path = "/v1/groups/{group}/-/expiry", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The limits", body = GroupExpiryView),
        BadRequest, Unauthorized, Forbidden, NotFound, BadGateway, Unavailable))]
pub(crate) async fn get_group_expiry(
    State(state): State<AppState>,
    GroupParam(group): GroupParam,
    caller: Caller,
) -> Result<Reply<GroupExpiryView>, ApiError> {
    caller
        .authorize(&state, Action::Read, &group, &format!("group `{group}`"))
        .await?;
    Ok(Reply::ok(group_view(&state, &group, None, None).await?))
}
