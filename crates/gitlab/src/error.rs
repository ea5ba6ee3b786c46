//! The one error type of the crate.

use std::time::Duration;

use crate::transport::gitlab_message;

/// What went wrong talking to GitLab, or reading what it sent. Each variant about a request
/// names the call (`METHOD /path/:template`, as GitLab's documentation writes it). No
/// variant ever holds a token: not the client's, not a source token GitLab minted.
#[derive(Debug, thiserror::Error)]
pub enum GitlabError {
    /// The instance URL is not one the client will use.
    #[error("GitLab URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The access token cannot be sent (empty, or not a valid header value). The token
    /// itself is never shown.
    #[error("the GitLab access token: {0}")]
    InvalidToken(String),
    /// A project path is malformed.
    #[error("project {value:?}: {reason}")]
    InvalidProject {
        /// The text as given (cut to 120 characters).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument of a call is malformed (a field name and why).
    #[error("{call}: {field}: {reason}")]
    InvalidArgument {
        /// The call.
        call: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The request never got an answer (connection refused, reset, timed out), after the
    /// bounded retries.
    #[error("{call}: no answer from GitLab after {attempts} attempts: {reason}")]
    Unreachable {
        /// The call.
        call: &'static str,
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
    /// GitLab answered a server error (5xx) to every one of the bounded attempts.
    #[error("{call}: GitLab answered {status} after {attempts} attempts")]
    ServerError {
        /// The call.
        call: &'static str,
        /// The last status.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// GitLab refused the request for good (400, 401, 403, 404, 409, 422, or another 4xx);
    /// its `message` (or `error`) is quoted.
    #[error("{call}: GitLab answered {status}: {message:?}")]
    Refused {
        /// The call.
        call: &'static str,
        /// The status.
        status: u16,
        /// GitLab's message (one line, at most 200 characters).
        message: String,
    },
    /// A rate limit whose wait is longer than the client waits itself, or one that outlasted
    /// the bounded attempts: the caller should requeue the work for after `retry_after`.
    #[error("{call}: GitLab's rate limit: retry after {}s", retry_after.as_secs())]
    RateLimited {
        /// The call.
        call: &'static str,
        /// How long GitLab asks to wait.
        retry_after: Duration,
    },
    /// The answer could not be read as the documented shape.
    #[error("{call}: unexpected answer: {reason}")]
    Decode {
        /// The call.
        call: &'static str,
        /// What did not fit (serde names the field).
        reason: String,
    },
    /// The answer was larger than the client reads.
    #[error("{call}: the answer is over {limit} bytes")]
    TooLarge {
        /// The call.
        call: &'static str,
        /// The cap, in bytes.
        limit: usize,
    },
    /// A paged list went on past the client's bound.
    #[error("{call}: more than {limit} pages")]
    TooManyPages {
        /// The call.
        call: &'static str,
        /// The bound on pages.
        limit: usize,
    },
    /// A webhook delivery could not be read.
    #[error("webhook {event:?}: {reason}")]
    Webhook {
        /// The `X-Gitlab-Event` it came with (cut to 64 characters).
        event: String,
        /// What did not fit (serde names the field).
        reason: String,
    },
}

// What the shared transport could not get an answer for, as the call's error.
sortie_http::impl_from_failure!(GitlabError, gitlab_message);

impl GitlabError {
    /// Whether trying the same work again later may succeed (unreachable, server errors,
    /// rate limits), as opposed to a refusal or malformed input.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. } | Self::ServerError { .. } | Self::RateLimited { .. }
        )
    }

    /// How long GitLab asked to wait, for a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The HTTP status GitLab refused the call with, if it did.
    pub fn refused_status(&self) -> Option<u16> {
        match self {
            Self::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_may_pass_is_transient() {
        let call = "GET /projects/:id";
        assert!(GitlabError::Unreachable {
            call,
            attempts: 4,
            reason: "reset".into()
        }
        .is_transient());
        assert!(GitlabError::ServerError {
            call,
            status: 502,
            attempts: 4
        }
        .is_transient());
        let limited = GitlabError::RateLimited {
            call,
            retry_after: Duration::from_secs(30),
        };
        assert!(limited.is_transient());
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(30)));
        let refused = GitlabError::Refused {
            call,
            status: 403,
            message: "403 Forbidden".into(),
        };
        assert!(!refused.is_transient());
        assert_eq!(refused.refused_status(), Some(403));
        assert!(!GitlabError::Decode {
            call,
            reason: "x".into()
        }
        .is_transient());
        assert!(!GitlabError::TooManyPages { call, limit: 3 }.is_transient());
    }

    #[test]
    fn messages_name_the_call() {
        let e = GitlabError::Refused {
            call: "POST /projects/:id/statuses/:sha",
            status: 400,
            message: "Cannot transition status".into(),
        };
        assert_eq!(
            e.to_string(),
            "POST /projects/:id/statuses/:sha: GitLab answered 400: \"Cannot transition status\""
        );
    }
}
