//! The one error type of the crate.

use std::time::Duration;

use crate::transport::github_message;

/// What went wrong talking to GitHub, or reading what it sent. Each variant about a request
/// names the call (`METHOD /path/{template}`). No variant ever holds a token or a key.
#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// The API URL is not one the client will use.
    #[error("GitHub API URL {url:?}: {reason}")]
    InvalidApiUrl {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The app's private key could not be read or used (the key itself is never shown).
    #[error("the GitHub App private key: {0}")]
    InvalidKey(String),
    /// A repository reference is malformed.
    #[error("repository {value:?}: {reason}")]
    InvalidRepository {
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
    #[error("{call}: no answer from GitHub after {attempts} attempts: {reason}")]
    Unreachable {
        /// The call.
        call: &'static str,
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
    /// GitHub answered a server error (5xx) to every one of the bounded attempts.
    #[error("{call}: GitHub answered {status} after {attempts} attempts")]
    ServerError {
        /// The call.
        call: &'static str,
        /// The last status.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// GitHub refused the request for good (401, 403, 404, 422, or another 4xx); its
    /// `message` is quoted.
    #[error("{call}: GitHub answered {status}: {message:?}")]
    Refused {
        /// The call.
        call: &'static str,
        /// The status.
        status: u16,
        /// GitHub's `message` (one line, at most 200 characters).
        message: String,
    },
    /// A primary or secondary rate limit whose wait is longer than the client waits: the
    /// caller should requeue the work for after `retry_after`.
    #[error("{call}: GitHub's rate limit: retry after {}s", retry_after.as_secs())]
    RateLimited {
        /// The call.
        call: &'static str,
        /// How long GitHub asks to wait.
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
    /// The app JWT could not be made.
    #[error("the app JWT: {0}")]
    Jwt(String),
    /// A webhook delivery could not be read.
    #[error("webhook {event:?}: {reason}")]
    Webhook {
        /// The `X-GitHub-Event` it came with.
        event: String,
        /// What did not fit (serde names the field).
        reason: String,
    },
}

// What the shared transport could not get an answer for, as the call's error.
sortie_http::impl_from_failure!(GithubError, github_message);

impl GithubError {
    /// Whether trying the same work again later may succeed (unreachable, server errors,
    /// rate limits), as opposed to a refusal or malformed input.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. } | Self::ServerError { .. } | Self::RateLimited { .. }
        )
    }
}
