//! [`Gitlab`]: the client, its bounds and how it sends a call; the calls themselves are in
//! [`merge_requests`], [`statuses`], [`notes`] and [`tokens`], reading lists through
//! [`paging`].

mod merge_requests;
mod notes;
mod paging;
mod statuses;
mod tokens;

use std::collections::BTreeMap;
use std::sync::Arc;

use hyper::body::Bytes;
use serde::de::DeserializeOwned;

use crate::transport::{self, Answer, Outgoing, Retry, Transport};
use crate::{CurrentUser, GitlabError, Secret};

pub use notes::MAX_NOTE_CHARS;
pub use statuses::MAX_STATUS_TEXT_CHARS;
pub use tokens::{
    job_of_source_token, source_token_name, SOURCE_TOKEN_ACCESS_LEVEL, SOURCE_TOKEN_MIN_LIFETIME,
    SOURCE_TOKEN_PREFIX, SOURCE_TOKEN_SCOPES,
};

const GET_USER: &str = "GET /user";
const LIST_MERGE_REQUESTS: &str = "GET /projects/:id/merge_requests";
const GET_MERGE_REQUEST: &str = "GET /projects/:id/merge_requests/:merge_request_iid";
const LIST_DIFFS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/diffs";
const GET_CHANGES: &str = "GET /projects/:id/merge_requests/:merge_request_iid/changes";
const GET_APPROVALS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/approvals";
const LIST_VERSIONS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/versions";
const SET_STATUS: &str = "POST /projects/:id/statuses/:sha";
const LIST_STATUSES: &str = "GET /projects/:id/repository/commits/:sha/statuses";
const LIST_NOTES: &str = "GET /projects/:id/merge_requests/:merge_request_iid/notes";
const CREATE_NOTE: &str = "POST /projects/:id/merge_requests/:merge_request_iid/notes";
const UPDATE_NOTE: &str = "PUT /projects/:id/merge_requests/:merge_request_iid/notes/:note_id";
const CREATE_TOKEN: &str = "POST /projects/:id/access_tokens";
const REVOKE_TOKEN: &str = "DELETE /projects/:id/access_tokens/:token_id";
const LIST_TOKENS: &str = "GET /projects/:id/access_tokens";

/// Items per page on every list: GitLab's maximum `per_page`
/// (<https://docs.gitlab.com/api/rest/#offset-based-pagination>).
pub const PER_PAGE: usize = 100;
/// The most pages read of a list (open merge requests, notes): 10,000 items. GitLab stops
/// sending `x-total` past 10,000 records; a longer list is an error, not a silent cut.
pub const MAX_PAGES: usize = 100;
/// The most files read of a merge request's diffs: GitLab's highest diff limit, 3,000 files
/// (<https://docs.gitlab.com/administration/diff_limits/>).
pub const MAX_MR_FILES: usize = 3000;
/// The longest ref, branch or marker argument taken.
const MAX_ARGUMENT_CHARS: usize = 1024;

/// A GitLab REST (v4) client for one instance and one access token. Cheap to clone: clones
/// share the connection pool, the count of calls and the token's user.
#[derive(Clone)]
pub struct Gitlab {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    /// The token's user, read once (the sticky note is the one this user wrote).
    user: tokio::sync::OnceCell<CurrentUser>,
}

impl std::fmt::Debug for Gitlab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gitlab")
            .field("api_url", &self.inner.transport.base)
            .finish_non_exhaustive()
    }
}

impl Gitlab {
    /// A client for the instance at `instance_url` (`https://gitlab.com`, or a self-managed
    /// `https://host[/relative-root]`; `http://` only to a loopback address) sending
    /// `token` (a personal, group or project access token with the `api` scope) in
    /// `PRIVATE-TOKEN`. The API root is the instance URL and `/api/v4`.
    pub fn new(instance_url: &str, token: Secret) -> Result<Self, GitlabError> {
        Ok(Self {
            inner: Arc::new(Inner {
                transport: transport::new(instance_url, &token)?,
                user: tokio::sync::OnceCell::new(),
            }),
        })
    }

    /// The REST API root, `https://gitlab.example.com/api/v4`.
    pub fn api_url(&self) -> &str {
        &self.inner.transport.base
    }

    /// The requests made so far, by endpoint (`METHOD /path/:template`, as GitLab's
    /// documentation writes them), retries and pages included.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.inner.transport.calls()
    }

    /// The user the token belongs to, asked once (`GET /user`,
    /// <https://docs.gitlab.com/api/users/#get-the-current-user>).
    pub async fn current_user(&self) -> Result<CurrentUser, GitlabError> {
        self.inner
            .user
            .get_or_try_init(|| async {
                let answer = self.send(GET_USER, "/user", &Outgoing::READ).await?;
                decode::<CurrentUser>(GET_USER, &answer.body)
            })
            .await
            .cloned()
    }

    async fn send(
        &self,
        call: &'static str,
        path: &str,
        out: &Outgoing,
    ) -> Result<Answer, GitlabError> {
        let answer = self.inner.transport.send(call, path, &out.rest()).await?;
        Ok(Answer::from(answer))
    }

    /// Sends `body` as JSON with `call`, tried again as `retry` allows.
    async fn send_json<T: serde::Serialize>(
        &self,
        call: &'static str,
        path: &str,
        body: &T,
        retry: Retry,
    ) -> Result<Answer, GitlabError> {
        let json = to_json(call, body)?;
        self.send(
            call,
            path,
            &Outgoing {
                json: Some(json),
                retry,
            },
        )
        .await
    }
}

#[derive(serde::Deserialize)]
struct Id {
    id: u64,
}

fn decode<T: DeserializeOwned>(call: &'static str, body: &Bytes) -> Result<T, GitlabError> {
    serde_json::from_slice(body).map_err(|e| GitlabError::Decode {
        call,
        reason: e.to_string(),
    })
}

fn to_json<T: serde::Serialize>(call: &'static str, value: &T) -> Result<Vec<u8>, GitlabError> {
    serde_json::to_vec(value).map_err(|e| GitlabError::InvalidArgument {
        call,
        field: "body",
        reason: e.to_string(),
    })
}

/// A ref, branch or marker: not empty, no control characters, at most 1,024 characters.
fn check_argument(call: &'static str, field: &'static str, value: &str) -> Result<(), GitlabError> {
    let reason = if value.trim().is_empty() {
        "is empty"
    } else if value.chars().count() > MAX_ARGUMENT_CHARS {
        "is over 1024 characters"
    } else if value.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(());
    };
    Err(GitlabError::InvalidArgument {
        call,
        field,
        reason: reason.into(),
    })
}

/// A commit SHA: 7 to 64 hexadecimal digits (SHA-1 or SHA-256 object names, or a short
/// one).
fn check_sha(call: &'static str, sha: &str) -> Result<(), GitlabError> {
    if (7..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(());
    }
    Err(GitlabError::InvalidArgument {
        call,
        field: "sha",
        reason: "is not 7 to 64 hexadecimal digits".into(),
    })
}

/// `text` cut to at most `max` characters, ending in `…` when cut.
fn cut_chars(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.chars().count() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bad_arguments_name_the_field() {
        let err = check_argument(LIST_MERGE_REQUESTS, "target_branch", " ")
            .unwrap_err()
            .to_string();
        assert!(err.contains("target_branch: is empty"), "{err}");
        let err = check_argument(LIST_NOTES, "marker", "a\nb")
            .unwrap_err()
            .to_string();
        assert!(err.contains("marker: holds a control character"), "{err}");
    }

    #[test]
    fn shas_are_hexadecimal() {
        assert!(check_sha(SET_STATUS, "e82eb4a098e32c796079ca3915e07487fc4db24c").is_ok());
        assert!(check_sha(SET_STATUS, &"a".repeat(64)).is_ok());
        for bad in ["", "abc", "main", "../../x", &"a".repeat(65)] {
            assert!(check_sha(SET_STATUS, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cutting_keeps_the_limit_in_characters() {
        assert_eq!(cut_chars("short", 10), "short");
        let long = "é".repeat(300);
        let cut = cut_chars(&long, 255);
        assert_eq!(cut.chars().count(), 255);
        assert!(cut.ends_with('…'));
    }

    proptest! {
        #[test]
        fn a_cut_is_never_over_its_limit(text in "\\PC{0,400}", max in 1usize..300) {
            prop_assert!(cut_chars(&text, max).chars().count() <= max);
        }
    }
}
