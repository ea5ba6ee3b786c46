//! What handlers share: the JSON [`Reply`] and the action a group write needs.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sortie_core::{Action, GroupPath};

/// Writes to the root group (shared runners, root rules) need a system administrator.
pub(crate) fn manage_action(group: &GroupPath) -> Action {
    if group.is_root() {
        Action::Administer
    } else {
        Action::Manage
    }
}

/// A JSON answer with its status and, for versioned resources, its ETag.
pub(crate) struct Reply<T> {
    status: StatusCode,
    etag: Option<u64>,
    body: T,
}

impl<T> Reply<T> {
    /// 200 with `body`.
    pub(crate) fn ok(body: T) -> Self {
        Self::new(StatusCode::OK, body)
    }

    /// `status` with `body`.
    pub(crate) fn new(status: StatusCode, body: T) -> Self {
        Self {
            status,
            etag: None,
            body,
        }
    }

    /// Sends `version` as the ETag.
    pub(crate) fn etag(mut self, version: u64) -> Self {
        self.etag = Some(version);
        self
    }
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body)).into_response();
        if let Some(v) = self
            .etag
            .and_then(|v| HeaderValue::from_str(&format!("\"{v}\"")).ok())
        {
            r.headers_mut().insert("etag", v);
        }
        r
    }
}
