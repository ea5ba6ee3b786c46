//! The extractors every route shares: the authenticated caller, the path's typed
//! group, environment and id, `If-Match`, typed query strings and the body document.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Query, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;
use sortie_core::audit::{Actor, CredentialKind};
use sortie_core::document::Format;
use sortie_core::{can, Action, EnvPath, GroupPath, JobId, Principal};

use crate::error::ApiError;
use crate::routes::separator::{
    decode_param, decode_segment, encoded_segment_problem, path_shape_problem,
};
use crate::{AppState, VerifiedClaims, MAX_BODY_BYTES};

/// The token of an `Authorization: Bearer <token>` header, the scheme matched in any
/// case (`bearer`, `BEARER`); `Some("")` for a bearer header without a token, `None`
/// when no bearer credentials were sent (no header, or another scheme).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once([' ', '\t']).unwrap_or((value, ""));
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches([' ', '\t']))
}

/// The caller of a user route: from the claims API Gateway verified, or the local
/// development identity when the state enables it. 401 otherwise.
pub(crate) struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (caller, credential) = match parts.extensions.get::<VerifiedClaims>() {
            Some(claims) if !claims.0.is_empty() => (
                Principal::from_claims(claims.0.clone()),
                CredentialKind::User,
            ),
            _ if state.dev_identity => (Principal::local_dev(), CredentialKind::Development),
            // A token reached the API but nobody verified it: refused as invalid (RFC 6750).
            _ if bearer_token(&parts.headers).is_some() => {
                return Err(ApiError::invalid_token(
                    "invalid_token",
                    "the bearer token was not verified",
                ))
            }
            _ => {
                return Err(ApiError::unauthenticated(
                    "unauthenticated",
                    "a bearer token is required",
                ))
            }
        };
        sortie_store::audit::actor(Actor {
            subject: caller.subject.clone(),
            issuer: Some(caller.issuer.clone()).filter(|i| !i.is_empty()),
            credential,
        });
        Ok(Caller(caller))
    }
}

impl Caller {
    /// The caller with the memberships that apply to it inside `org` (the org's and the
    /// root's; the root's only for `None`), a configured administrator included.
    pub(crate) async fn in_org(
        &self,
        state: &AppState,
        org: Option<&str>,
    ) -> Result<Principal, ApiError> {
        let caller = &self.0;
        sortie_store::audit::organisation(org);
        let mut memberships = state
            .memberships
            .memberships_for(state.store.as_ref(), org)
            .await?
            .as_ref()
            .clone();
        if state.admin_subjects.contains(&caller.subject) && !caller.subject.is_empty() {
            memberships.push(sortie_core::Membership {
                group: GroupPath::root(),
                role: sortie_core::Role::Owner,
                grantee: sortie_core::Grantee::Subject {
                    subject: caller.subject.clone(),
                    issuer: None,
                },
            });
        }
        Ok(caller.clone().with_memberships(memberships))
    }

    /// Loads the caller's memberships for `group` and checks `action`: 404 when the caller
    /// may not even read the group, 403 when it may read but not act.
    pub(crate) async fn authorize(
        &self,
        state: &AppState,
        action: Action,
        group: &GroupPath,
        what: &str,
    ) -> Result<Principal, ApiError> {
        let principal = self.in_org(state, group.org()).await?;
        sortie_store::audit::group(group.as_str());
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
}

/// One path parameter of the matched route, percent-decoded strictly: a malformed
/// escape or text that is not UTF-8 is 400 naming the parameter.
async fn path_param(parts: &mut Parts, name: &str) -> Result<String, ApiError> {
    let template = MatchedPath::from_request_parts(parts, &())
        .await
        .map_err(|_| ApiError::not_found("route"))?;
    let placeholder = format!("{{{name}}}");
    let position = template
        .as_str()
        .split('/')
        .position(|s| s == placeholder)
        .ok_or_else(|| ApiError::not_found("route"))?;
    let raw = parts
        .uri
        .path()
        .split('/')
        .nth(position)
        .ok_or_else(|| ApiError::not_found("route"))?;
    decode_param(raw).map_err(|problem| ApiError::field(name, problem))
}

/// A `{group}` or `{environment}` as [`canonical_path`](crate::routes::separator::canonical_path)
/// left it: a segment it could not decode (a malformed escape, double encoding, an
/// encoded `-` separator) is named here, and so are empty, `.` and `..` segments
/// (400 naming `what`).
fn path_segments_decoded(what: &str, path: &str) -> Result<(), ApiError> {
    for segment in path.split('/').filter(|s| s.contains('%')) {
        let problem = match decode_param(segment) {
            Err(problem) => problem,
            Ok(decoded) => match encoded_segment_problem(segment, &decoded) {
                Some(problem) => problem,
                None => continue,
            },
        };
        return Err(ApiError::field(
            what,
            format!("segment `{segment}` {problem}"),
        ));
    }
    match path_shape_problem(path) {
        Some(problem) => Err(ApiError::field(what, problem)),
        None => Ok(()),
    }
}

/// 400 naming the path parameter (`group` or `environment`) for a path that does not parse.
fn bad_path(what: &str, e: sortie_core::ValidationError) -> ApiError {
    let mut err = ApiError::from(e);
    for f in &mut err.fields {
        f.path = what.to_string();
    }
    err.message = format!(
        "the {what} in the URL is invalid: {}",
        err.fields
            .first()
            .map(|f| f.problem.as_str())
            .unwrap_or_default()
    );
    err
}

/// The `{group}` of a group route, parsed (`-` is the root group).
pub(crate) struct GroupParam(pub GroupPath);

impl<S: Send + Sync> FromRequestParts<S> for GroupParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let raw = path_param(parts, "group").await?;
        path_segments_decoded("group", &raw)?;
        GroupPath::parse(decode_segment(&raw))
            .map(GroupParam)
            .map_err(|e| bad_path("group", e))
    }
}

/// The `{environment}` of an environment route, parsed.
pub(crate) struct EnvParam(pub EnvPath);

impl<S: Send + Sync> FromRequestParts<S> for EnvParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let raw = path_param(parts, "environment").await?;
        path_segments_decoded("environment", &raw)?;
        EnvPath::parse(decode_segment(&raw))
            .map(EnvParam)
            .map_err(|e| bad_path("environment", e))
    }
}

/// The `{name}` of a runner route (checked by the handler, with its group).
pub(crate) struct NameParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for NameParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "name").await.map(NameParam)
    }
}

/// The `{id}` of a rule, membership or job route.
pub(crate) struct IdParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "id").await.map(IdParam)
    }
}

/// The `{delivery}` of a notification delivery route (a delivery's id).
pub(crate) struct DeliveryParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for DeliveryParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "delivery").await.map(DeliveryParam)
    }
}

/// The `{job}` of an agent route, as a [`JobId`].
pub(crate) struct JobParam(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "job")
            .await
            .map(|id| JobParam(JobId::new(id)))
    }
}

/// The `{token}` of a pool token route.
pub(crate) struct TokenParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TokenParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "token").await.map(TokenParam)
    }
}

/// The `{id}` of a job route, as a [`JobId`].
pub(crate) struct JobIdParam(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobIdParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "id")
            .await
            .map(|id| JobIdParam(JobId::new(id)))
    }
}

/// The `If-Match` header, read when the handler asks (after it authorised).
pub(crate) struct IfMatch(Option<HeaderValue>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(IfMatch(parts.headers.get("if-match").cloned()))
    }
}

impl IfMatch {
    /// The version sent, if any: `"3"`, `W/"3"` or `3`; `*` is none.
    pub(crate) fn version(&self) -> Result<Option<u64>, ApiError> {
        let Some(v) = &self.0 else {
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
}

/// A typed query string (axum's `Query`), checked when the handler asks, so that
/// authorisation comes first. Field deserializers name their field in their error
/// as `query.<field>: <problem>` (see [`query_field`]).
pub(crate) struct QueryParams<T>(Result<T, ApiError>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryParams(
            Query::<T>::try_from_uri(&parts.uri)
                .map(|Query(q)| q)
                .map_err(|rejection| {
                    let text = rejection.body_text();
                    match text.find("query.").map(|i| &text[i..]) {
                        Some(tail) => match tail.split_once(": ") {
                            Some((path, problem)) => ApiError::field(path, problem),
                            None => ApiError::field("query", tail),
                        },
                        None => ApiError::field("query", text),
                    }
                }),
        ))
    }
}

impl<T> QueryParams<T> {
    /// The parsed query, or 400 naming the field at fault.
    pub(crate) fn get(self) -> Result<T, ApiError> {
        self.0
    }
}

/// Parses one query field's text, failing with `query.<field>: <problem>`.
pub(crate) fn query_field<'de, D, T>(
    d: D,
    field: &str,
    problem: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse(&text)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("query.{field}: {problem}")))
}

/// The request body, read whole (at most [`MAX_BODY_BYTES`]; 413 above) with its
/// `Content-Type`, and parsed by that type when the handler asks, after it authorised.
pub(crate) struct Document {
    /// The body's bytes, as sent.
    pub bytes: Bytes,
    content_type: Option<HeaderValue>,
}

impl<S: Send + Sync> FromRequest<S> for Document {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let content_type = req.headers().get(CONTENT_TYPE).cloned();
        axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map(|bytes| {
                sortie_store::audit::sent(&bytes);
                Document {
                    bytes,
                    content_type,
                }
            })
            .map_err(|_| {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the request body is over {} KiB", MAX_BODY_BYTES / 1024),
                )
            })
    }
}

/// The format a `Content-Type` names: JSON for `application/json` and
/// `application/*+json`, YAML for `application/yaml`, `application/x-yaml` and
/// `text/yaml`, unknown (`None`: JSON text is JSON, anything else YAML) when the
/// header is absent, and 415 for anything else.
fn body_format(content_type: Option<&HeaderValue>) -> Result<Option<Format>, ApiError> {
    let Some(value) = content_type else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    let essence = text.split(';').next().unwrap_or_default().trim();
    let essence = essence.to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(Some(Format::Json)),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(Some(Format::Yaml)),
        other
            if other
                .strip_prefix("application/")
                .and_then(|s| s.strip_suffix("+json"))
                .is_some_and(|s| !s.is_empty() && !s.contains('/')) =>
        {
            Ok(Some(Format::Json))
        }
        _ => Err(ApiError::unsupported_media_type(text)),
    }
}

impl Document {
    /// The body as the document its `Content-Type` says (415 for a type this API does
    /// not read); the caller's core type validates it field by field.
    pub(crate) fn value(&self) -> Result<serde_json::Value, ApiError> {
        let format = body_format(self.content_type.as_ref())?;
        let text = std::str::from_utf8(&self.bytes)
            .map_err(|_| ApiError::field("body", "is not UTF-8 text"))?;
        Ok(sortie_core::document::parse(text, format)?)
    }
}
