//! The API's one error type and its JSON body:
//! `{"error": {"code", "message", "fields": [{"path", "problem"}]}}`.

use axum::http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sortie_core::{Problem, ValidationError};
use sortie_store::StoreError;
use utoipa::ToSchema;

/// An error answered to an HTTP client.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code such as `invalid_request`.
    pub code: &'static str,
    /// A human sentence.
    pub message: String,
    /// The fields at fault, each with its problem.
    pub fields: Vec<Problem>,
    /// The `WWW-Authenticate` challenge of a 401; `Bearer` when none is set.
    pub www_authenticate: Option<&'static str>,
    /// For a 404: the nearest existing names the caller may see (at most 3).
    pub did_you_mean: Vec<String>,
}

/// The challenge of a 401 for a bearer token that was sent but is not valid (RFC 6750 §3.1).
pub const INVALID_TOKEN_CHALLENGE: &str = r#"Bearer error="invalid_token""#;

/// The media types a request body may have.
pub const ACCEPTED_MEDIA_TYPES: &str =
    "application/json (or any application/*+json type), application/yaml, application/x-yaml, text/yaml";

/// The body of every error response: `{"error": {"code", "message", "fields"}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object of every error response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code such as `invalid_request` or `not_found`.
    pub code: String,
    /// A human sentence.
    pub message: String,
    /// The fields at fault, each with its problem (empty when no field is).
    pub fields: Vec<FieldProblem>,
    /// For a 404 of an environment or a job: the nearest existing names the caller may see,
    /// nearest first, at most 3; absent when none is near.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub did_you_mean: Vec<String>,
}

/// One field at fault: its path (`runner_configuration.subnets[0]`, `query.limit`,
/// `If-Match`, `group`) and what is wrong with it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FieldProblem {
    /// The field's path.
    pub path: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ApiError {
    /// An error with no field list.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            fields: vec![],
            www_authenticate: None,
            did_you_mean: vec![],
        }
    }

    /// 401 `code`: no bearer credentials were sent, so the challenge is a bare `Bearer`.
    pub fn unauthenticated(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// 401 `code` for a bearer token that was sent but is not valid:
    /// `WWW-Authenticate: Bearer error="invalid_token"`.
    pub fn invalid_token(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            www_authenticate: Some(INVALID_TOKEN_CHALLENGE),
            ..Self::new(StatusCode::UNAUTHORIZED, code, message)
        }
    }

    /// 415: the body's `Content-Type` (`sent`, or none) is not one this API reads.
    pub fn unsupported_media_type(sent: &str) -> Self {
        Self {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: format!(
                "a request body of type `{sent}` is not accepted; send {ACCEPTED_MEDIA_TYPES}"
            ),
            fields: vec![Problem {
                path: "Content-Type".into(),
                problem: format!("must be one of {ACCEPTED_MEDIA_TYPES}"),
            }],
            www_authenticate: None,
            did_you_mean: vec![],
        }
    }

    /// 400 naming one field.
    pub fn field(path: impl Into<String>, problem: impl Into<String>) -> Self {
        let problem = Problem {
            path: path.into(),
            problem: problem.into(),
        };
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            message: format!("{}: {}", problem.path, problem.problem),
            fields: vec![problem],
            www_authenticate: None,
            did_you_mean: vec![],
        }
    }

    /// 404 for a resource, also used when the caller may not see it.
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} was not found"),
        )
    }

    /// 404 for a resource, with the nearest names the caller may see.
    pub fn not_found_near(what: impl std::fmt::Display, did_you_mean: Vec<String>) -> Self {
        let mut e = Self::not_found(what);
        e.did_you_mean = did_you_mean;
        e
    }

    /// 403: the caller sees the group but lacks the role.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            message: e.to_string(),
            fields: e.problems,
            www_authenticate: None,
            did_you_mean: vec![],
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match &e {
            StoreError::NotFound { .. } => Self::new(StatusCode::NOT_FOUND, "not_found", message),
            StoreError::AlreadyExists { .. } => {
                Self::new(StatusCode::CONFLICT, "already_exists", message)
            }
            StoreError::VersionMismatch { .. } => {
                Self::new(StatusCode::PRECONDITION_FAILED, "version_mismatch", message)
            }
            StoreError::InUse { by, .. } => Self {
                status: StatusCode::CONFLICT,
                code: "in_use",
                message,
                fields: by
                    .iter()
                    .map(|b| Problem {
                        path: b.clone(),
                        problem: "still uses it".into(),
                    })
                    .collect(),
                www_authenticate: None,
                did_you_mean: vec![],
            },
            StoreError::StateConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "state_conflict", message)
            }
            StoreError::Locked { .. } => Self::new(StatusCode::CONFLICT, "locked", message),
            StoreError::Destroyed { destroyed, .. } => {
                let mut e = Self::new(StatusCode::CONFLICT, "destroyed", message);
                e.fields = vec![Problem {
                    path: "destroyed.at".into(),
                    problem: destroyed.at.to_rfc3339(),
                }];
                e
            }
            StoreError::IdempotencyMismatch { .. } => Self {
                status: StatusCode::CONFLICT,
                code: "idempotency_key_reused",
                message,
                fields: vec![Problem {
                    path: "Idempotency-Key".into(),
                    problem: "was used before with a different request body".into(),
                }],
                www_authenticate: None,
                did_you_mean: vec![],
            },
            StoreError::TooLarge { kind, limit, .. } => Self {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_request",
                message,
                fields: vec![Problem {
                    path: (*kind).into(),
                    problem: format!("is over the store's item limit of {limit} bytes"),
                }],
                www_authenticate: None,
                did_you_mean: vec![],
            },
            StoreError::Invalid { path, problem } => Self {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_request",
                message,
                fields: vec![Problem {
                    path: path.clone(),
                    problem: problem.clone(),
                }],
                www_authenticate: None,
                did_you_mean: vec![],
            },
            StoreError::Aws {
                retryable: true, ..
            } => Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message),
            StoreError::Aws { .. } | StoreError::Corrupt { .. } => {
                tracing::error!(error = %message, "store failure");
                Self::new(
                    StatusCode::BAD_GATEWAY,
                    "store_error",
                    "the store failed; the request was not applied",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, code = self.code, message = %self.message, "request failed");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
                fields: self
                    .fields
                    .into_iter()
                    .map(|p| FieldProblem {
                        path: p.path,
                        problem: p.problem,
                    })
                    .collect(),
                did_you_mean: self.did_you_mean,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = self.www_authenticate.unwrap_or("Bearer");
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        // A retryable failure (a throttled or unavailable store) says when to come back.
        if self.status == StatusCode::SERVICE_UNAVAILABLE
            || self.status == StatusCode::TOO_MANY_REQUESTS
        {
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
