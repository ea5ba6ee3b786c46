//! `GET /v1/whoami`: the authenticated caller and the roles it holds.

use axum::extract::State;
use serde::Deserialize;
use sortie_core::GroupPath;
use utoipa::IntoParams;

use super::Reply;
use crate::error::ApiError;
use crate::extract::{Caller, QueryParams};
use crate::model::{CallerMembership, Whoami};
use crate::openapi::errors::*;
use crate::AppState;

/// The query of whoami.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WhoamiQuery {
    /// An organisation (or any group in it) whose memberships to read besides the root
    /// group's, such as `acme`.
    #[serde(default)]
    org: Option<String>,
}

/// Who the caller is, its memberships on the root group and in `org`, and the
/// organisations it is granted a role in (by subject; see `organisations`). Any
/// authenticated caller may ask; it needs no role.
#[utoipa::path(get, path = "/v1/whoami", tag = "meta",
    params(WhoamiQuery),
    security(("bearerAuth" = [])),
    responses((status = 200, description = "The caller's subject, issuer, memberships and organisations", body = Whoami),
        BadRequest, Unauthorized, BadGateway, Unavailable))]
pub(crate) async fn whoami(
    State(state): State<AppState>,
    caller: Caller,
    query: QueryParams<WhoamiQuery>,
) -> Result<Reply<Whoami>, ApiError> {
    let query = query.get()?;
    let org = match query
        .org
        .as_deref()
        .map(str::trim)
        .filter(|o| !o.is_empty())
    {
        None => None,
        Some(text) => {
            let group = GroupPath::parse(text.trim_matches('/')).map_err(|e| {
                ApiError::field("query.org", format!("`{text}` is not a group: {e}"))
            })?;
            group.org().map(str::to_string)
        }
    };
    let principal = caller.in_org(&state, org.as_deref()).await?;
    let memberships = principal
        .memberships
        .iter()
        .map(|m| CallerMembership {
            group: m.group.as_str().to_string(),
            role: m.role,
        })
        .collect();
    let organisations = state
        .memberships()
        .organisations_of(&principal.subject, Some(&principal.issuer))
        .await?;
    Ok(Reply::ok(Whoami {
        subject: principal.subject,
        issuer: principal.issuer,
        org,
        memberships,
        organisations,
    }))
}
