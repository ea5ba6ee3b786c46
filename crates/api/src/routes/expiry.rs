//! Expiry: `POST /v1/environments/{environment}/-/extend {by}` (needs `deploy`) moves an
//! expiring environment's end later, up to the maximum TTL set on its groups (409 naming
//! the limit when past it).

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
use crate::extract::{Caller, Document, EnvParam};
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
