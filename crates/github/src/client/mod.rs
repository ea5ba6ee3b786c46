//! [`Github`]: the app's client, its installation tokens and how it sends a call; the
//! calls themselves are in [`pulls`], [`checks`] and [`comments`], reading lists through
//! [`paging`].

mod checks;
mod comments;
mod paging;
mod pulls;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use hyper::body::Bytes;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::auth::{AppKey, TokenCache};
use crate::transport::{self, Answer, Outgoing, Transport};
use crate::{AppCredentials, GithubError, InstallationToken, Permissions, RepoRef};

const GET_INSTALLATION: &str = "GET /repos/{owner}/{repo}/installation";
const CREATE_TOKEN: &str = "POST /app/installations/{installation_id}/access_tokens";
const GET_PULL: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}";
const LIST_PULLS: &str = "GET /repos/{owner}/{repo}/pulls";
const LIST_PULL_FILES: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/files";
const LIST_REVIEWS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews";
const COMPARE: &str = "GET /repos/{owner}/{repo}/compare/{basehead}";
const GET_REQUIRED_CHECKS: &str =
    "GET /repos/{owner}/{repo}/branches/{branch}/protection/required_status_checks";
const GET_BRANCH_RULES: &str = "GET /repos/{owner}/{repo}/rules/branches/{branch}";
const LIST_CHECK_RUNS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs";
const GET_COMBINED_STATUS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/status";
const CREATE_CHECK_RUN: &str = "POST /repos/{owner}/{repo}/check-runs";
const UPDATE_CHECK_RUN: &str = "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}";
const LIST_COMMENTS: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}/comments";
const CREATE_COMMENT: &str = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments";
const UPDATE_COMMENT: &str = "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}";

/// Items per page on every list: GitHub's maximum `per_page`
/// (<https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api>).
pub const PER_PAGE: usize = 100;
/// The most files GitHub lists for a pull request: "Responses include a maximum of 3000
/// files" (<https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files>). A list
/// of exactly this many may be cut short by GitHub.
pub const MAX_PULL_FILES: usize = 3000;
/// The most pages read of any other list (open pull requests, reviews, comments, check
/// runs, statuses, rules): 10,000 items.
pub const MAX_PAGES: usize = 100;
/// The longest ref, branch or marker argument taken.
const MAX_ARGUMENT_CHARS: usize = 1024;

/// Sortie's GitHub App client. Cheap to clone: clones share the token cache and the count
/// of calls.
#[derive(Clone)]
pub struct Github {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    app_id: u64,
    key: AppKey,
    cache: Mutex<TokenCache>,
    /// One mint at a time, so that concurrent calls for one repository mint once.
    mint: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Github {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Github")
            .field("api_url", &self.inner.transport.base)
            .field("app_id", &self.inner.app_id)
            .finish_non_exhaustive()
    }
}

impl Github {
    /// A client for the API at `api_url` (`https://api.github.com`, or a GitHub Enterprise
    /// Server's `https://host/api/v3`; `http://` only to a loopback address) acting as the
    /// app `credentials` names. The key is read (and tried) here.
    pub fn new(api_url: &str, credentials: AppCredentials) -> Result<Self, GithubError> {
        let transport = transport::new(api_url)?;
        let key = AppKey::from_pem(&credentials.private_key_pem)?;
        Ok(Self {
            inner: Arc::new(Inner {
                transport,
                app_id: credentials.app_id,
                key,
                cache: Mutex::new(TokenCache::default()),
                mint: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The app's JWT at `now`: RS256, `iss` the app id, `iat` 60 s before `now` and `exp`
    /// ten minutes after `iat`
    /// (<https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>).
    pub fn app_jwt(&self, now: DateTime<Utc>) -> Result<String, GithubError> {
        self.inner.key.sign(self.inner.app_id, now)
    }

    /// The requests made so far, by endpoint (`METHOD /path/{template}`), retries and pages
    /// included.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.inner.transport.calls()
    }

    /// The URL of `repo`'s tarball at `sha` (`GET /repos/{owner}/{repo}/tarball/{ref}`,
    /// which redirects to a short-lived download;
    /// <https://docs.github.com/en/rest/repos/contents#download-a-repository-archive-tar>).
    pub fn tarball_url(&self, repo: &RepoRef, sha: &str) -> String {
        format!(
            "{}/repos/{}/{}/tarball/{}",
            self.inner.transport.base,
            segment(&repo.owner),
            segment(&repo.name),
            segment(sha)
        )
    }

    /// An installation token for `repo` alone with `permissions`: the repository's
    /// installation (`GET /repos/{owner}/{repo}/installation`, as the app), then a token
    /// limited to `repositories: [name]` and `permissions`
    /// (<https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app>).
    /// Cached per (repository, permissions) until five minutes before it expires.
    pub async fn repository_token(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
    ) -> Result<InstallationToken, GithubError> {
        if let Some(token) = self.cached(repo, permissions) {
            return Ok(token);
        }
        let _one_mint = self.inner.mint.lock().await;
        if let Some(token) = self.cached(repo, permissions) {
            return Ok(token);
        }
        let installation = self.installation_id(repo).await?;
        #[derive(serde::Serialize)]
        struct Body<'a> {
            repositories: [&'a str; 1],
            permissions: &'a Permissions,
        }
        #[derive(Deserialize)]
        struct Minted {
            token: String,
            expires_at: DateTime<Utc>,
        }
        let body = to_json(
            CREATE_TOKEN,
            &Body {
                repositories: [repo.name.as_str()],
                permissions,
            },
        )?;
        let jwt = self.app_jwt(Utc::now())?;
        let path = format!("/app/installations/{installation}/access_tokens");
        let answer = self
            .inner
            .transport
            .send(
                CREATE_TOKEN,
                &path,
                &Outgoing {
                    bearer: Some(&jwt),
                    json: Some(&body),
                    ..Outgoing::default()
                },
            )
            .await;
        let answer = match answer {
            Err(e @ GithubError::Refused { status: 404, .. }) => {
                // The installation is gone (uninstalled, or the repository moved).
                self.with_cache(|c| c.forget_installation(repo));
                return Err(e);
            }
            other => other?,
        };
        let minted: Minted = decode(CREATE_TOKEN, &answer.body)?;
        let token = InstallationToken {
            token: minted.token,
            expires_at: minted.expires_at,
        };
        self.with_cache(|c| c.keep_token(repo, permissions, token.clone(), Utc::now()));
        Ok(token)
    }

    fn cached(&self, repo: &RepoRef, permissions: &Permissions) -> Option<InstallationToken> {
        self.with_cache(|c| c.token(repo, permissions, Utc::now()))
            .flatten()
    }

    fn with_cache<T>(&self, f: impl FnOnce(&mut TokenCache) -> T) -> Option<T> {
        self.inner.cache.lock().ok().map(|mut c| f(&mut c))
    }

    async fn installation_id(&self, repo: &RepoRef) -> Result<u64, GithubError> {
        if let Some(id) = self.with_cache(|c| c.installation(repo)).flatten() {
            return Ok(id);
        }
        #[derive(Deserialize)]
        struct Installation {
            id: u64,
        }
        let jwt = self.app_jwt(Utc::now())?;
        let answer = self
            .inner
            .transport
            .send(
                GET_INSTALLATION,
                &format!("{}/installation", repo_path(repo)),
                &Outgoing {
                    bearer: Some(&jwt),
                    ..Outgoing::default()
                },
            )
            .await?;
        let id = decode::<Installation>(GET_INSTALLATION, &answer.body)?.id;
        self.with_cache(|c| c.keep_installation(repo, id));
        Ok(id)
    }

    /// Sends `call` with an installation token for `repo` and `permissions`; when GitHub
    /// answers 401 to a cached token (revoked, or the clocks disagree), mints a new one and
    /// tries once more.
    async fn send(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        path: &str,
        json: Option<Vec<u8>>,
        if_none_match: Option<&str>,
    ) -> Result<Answer, GithubError> {
        let mut fresh = false;
        loop {
            let token = self.repository_token(repo, permissions).await?;
            let out = Outgoing {
                bearer: Some(&token.token),
                json: json.as_deref(),
                if_none_match,
                ..Outgoing::default()
            };
            match self.inner.transport.send(call, path, &out).await {
                Err(GithubError::Refused { status: 401, .. }) if !fresh => {
                    self.with_cache(|c| c.forget_token(repo, permissions));
                    fresh = true;
                }
                other => return other,
            }
        }
    }

    /// Sends `body` as JSON with `call` (a create or an update).
    async fn send_json<T: serde::Serialize>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        path: &str,
        body: &T,
    ) -> Result<Answer, GithubError> {
        let json = to_json(call, body)?;
        self.send(repo, permissions, call, path, Some(json), None)
            .await
    }
}

#[derive(Deserialize)]
struct Id {
    id: u64,
}

fn decode<T: DeserializeOwned>(call: &'static str, body: &Bytes) -> Result<T, GithubError> {
    serde_json::from_slice(body).map_err(|e| GithubError::Decode {
        call,
        reason: e.to_string(),
    })
}

fn to_json<T: serde::Serialize>(call: &'static str, value: &T) -> Result<Vec<u8>, GithubError> {
    serde_json::to_vec(value).map_err(|e| GithubError::InvalidArgument {
        call,
        field: "body",
        reason: e.to_string(),
    })
}

/// `/repos/{owner}/{repo}`, each part encoded.
fn repo_path(repo: &RepoRef) -> String {
    format!("/repos/{}/{}", segment(&repo.owner), segment(&repo.name))
}

/// `text` as one path segment or query value: everything but RFC 3986's unreserved
/// characters percent-encoded (a branch's `/` included).
fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A ref, branch or marker: not empty, no control characters, at most 1,024 characters.
fn check_argument(call: &'static str, field: &'static str, value: &str) -> Result<(), GithubError> {
    let reason = if value.is_empty() {
        "is empty"
    } else if value.chars().count() > MAX_ARGUMENT_CHARS {
        "is over 1024 characters"
    } else if value.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(());
    };
    Err(GithubError::InvalidArgument {
        call,
        field,
        reason: reason.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn segments_encode_slashes_and_spaces() {
        assert_eq!(segment("feature/x y"), "feature%2Fx%20y");
        assert_eq!(segment("main"), "main");
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let err = check_argument(COMPARE, "head", "").unwrap_err().to_string();
        assert!(err.contains("head: is empty"), "{err}");
        let err = check_argument(COMPARE, "base", "a\nb")
            .unwrap_err()
            .to_string();
        assert!(err.contains("base: holds a control character"), "{err}");
    }

    proptest! {
        #[test]
        fn a_segment_is_always_one_clean_segment(text in "\\PC{0,64}") {
            let encoded = segment(&text);
            prop_assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
        }
    }
}
