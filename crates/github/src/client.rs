//! [`Github`]: the app's client and its calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use hyper::body::Bytes;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::auth::{AppKey, TokenCache};
use crate::transport::{Answer, Outgoing, Transport};
use crate::types::{PullWire, ReviewWire};
use crate::{
    AppCredentials, ChangedFile, CheckRunBody, Comparison, Conditional, GithubError,
    InstallationToken, Permissions, Pull, RepoRef, Review,
};

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
        let transport = Transport::new(api_url)?;
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
                    json: Some(body),
                    if_none_match: None,
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
                json: json.clone(),
                if_none_match,
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

    /// A whole list within the default bounds ([`MAX_PAGES`] pages of [`PER_PAGE`]).
    async fn list<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Vec<T>, GithubError> {
        self.walk_all(
            repo,
            permissions,
            call,
            first,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            items,
        )
        .await
    }

    /// Reads a paged list from `first` on, following `rel="next"` links, at most
    /// `max_pages` pages and `max_items` items (then cut there). The first page is sent
    /// with `If-None-Match` when `etag` is given.
    #[allow(clippy::too_many_arguments)]
    async fn walk<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        etag: Option<&str>,
        max_pages: usize,
        max_items: usize,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Conditional<Vec<T>>, GithubError> {
        let mut all = Vec::new();
        let mut path = first;
        let mut first_etag = None;
        for page in 1..=max_pages {
            let answer = self
                .send(
                    repo,
                    permissions,
                    call,
                    &path,
                    None,
                    etag.filter(|_| page == 1),
                )
                .await?;
            if answer.status == http::StatusCode::NOT_MODIFIED {
                return Ok(Conditional::NotModified);
            }
            if page == 1 {
                first_etag = answer.etag();
            }
            all.extend(items(call, &answer.body)?);
            if all.len() >= max_items {
                all.truncate(max_items);
                break;
            }
            match answer.next_link() {
                None => break,
                Some(next) => {
                    // Only ever follow a link to the same API: the token goes with it.
                    path = next
                        .strip_prefix(&self.inner.transport.base)
                        .filter(|rest| rest.starts_with('/'))
                        .ok_or_else(|| GithubError::Decode {
                            call,
                            reason: "a next-page link outside the API".into(),
                        })?
                        .to_string();
                    if page == max_pages {
                        return Err(GithubError::TooManyPages {
                            call,
                            limit: max_pages,
                        });
                    }
                }
            }
        }
        Ok(Conditional::Modified {
            value: all,
            etag: first_etag,
        })
    }

    /// Like [`Github::walk`] without an ETag: the list itself.
    #[allow(clippy::too_many_arguments)]
    async fn walk_all<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        max_pages: usize,
        max_items: usize,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Vec<T>, GithubError> {
        match self
            .walk(
                repo,
                permissions,
                call,
                first,
                None,
                max_pages,
                max_items,
                items,
            )
            .await?
        {
            Conditional::Modified { value, .. } => Ok(value),
            // Without If-None-Match GitHub never answers 304.
            Conditional::NotModified => Ok(Vec::new()),
        }
    }

    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}`
    /// (<https://docs.github.com/en/rest/pulls/pulls#get-a-pull-request>).
    pub async fn pull(&self, repo: &RepoRef, number: u64) -> Result<Pull, GithubError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        let answer = self
            .send(repo, &Permissions::PULLS_READ, GET_PULL, &path, None, None)
            .await?;
        Ok(decode::<PullWire>(GET_PULL, &answer.body)?.into_pull())
    }

    /// The open pull requests into `base`, all pages
    /// (<https://docs.github.com/en/rest/pulls/pulls#list-pull-requests>). With `etag` (from
    /// the last answer), the first page is asked with `If-None-Match`: a 304 is
    /// [`Conditional::NotModified`] and "does not count against your primary rate limit"
    /// (<https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate>).
    pub async fn open_pulls(
        &self,
        repo: &RepoRef,
        base: &str,
        etag: Option<&str>,
    ) -> Result<Conditional<Vec<Pull>>, GithubError> {
        check_argument(LIST_PULLS, "base", base)?;
        let first = format!(
            "{}/pulls?state=open&base={}&per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(base)
        );
        self.walk(
            repo,
            &Permissions::PULLS_READ,
            LIST_PULLS,
            first,
            etag,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            |call, body| {
                Ok(decode::<Vec<PullWire>>(call, body)?
                    .into_iter()
                    .map(PullWire::into_pull)
                    .collect())
            },
        )
        .await
    }

    /// The files pull request `number` changes, renames with their old path, all pages of
    /// 100, at most [`MAX_PULL_FILES`]
    /// (<https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files>).
    pub async fn pull_files(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ChangedFile>, GithubError> {
        let first = format!(
            "{}/pulls/{number}/files?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        self.walk_all(
            repo,
            &Permissions::PULLS_READ,
            LIST_PULL_FILES,
            first,
            MAX_PULL_FILES.div_ceil(PER_PAGE),
            MAX_PULL_FILES,
            decode::<Vec<ChangedFile>>,
        )
        .await
    }

    /// The reviews of pull request `number`, oldest first, all pages
    /// (<https://docs.github.com/en/rest/pulls/reviews#list-reviews-for-a-pull-request>).
    pub async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, GithubError> {
        let first = format!(
            "{}/pulls/{number}/reviews?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        self.list(
            repo,
            &Permissions::PULLS_READ,
            LIST_REVIEWS,
            first,
            |call, body| {
                Ok(decode::<Vec<ReviewWire>>(call, body)?
                    .into_iter()
                    .map(ReviewWire::into_review)
                    .collect())
            },
        )
        .await
    }

    /// How `head` compares with `base`
    /// (<https://docs.github.com/en/rest/commits/commits#compare-two-commits>). Asks for
    /// one file per page: only the counts are read.
    pub async fn compare(
        &self,
        repo: &RepoRef,
        base: &str,
        head: &str,
    ) -> Result<Comparison, GithubError> {
        check_argument(COMPARE, "base", base)?;
        check_argument(COMPARE, "head", head)?;
        let path = format!(
            "{}/compare/{}...{}?per_page=1",
            repo_path(repo),
            segment(base),
            segment(head)
        );
        let answer = self
            .send(
                repo,
                &Permissions::CONTENTS_READ,
                COMPARE,
                &path,
                None,
                None,
            )
            .await?;
        decode(COMPARE, &answer.body)
    }

    /// The status check contexts `branch` requires before a merge: branch protection's
    /// required status checks (a 404 means none: the branch is not protected or requires
    /// no checks;
    /// <https://docs.github.com/en/rest/branches/branch-protection#get-status-checks-protection>)
    /// and every `required_status_checks` rule of the rulesets that apply to it
    /// (<https://docs.github.com/en/rest/repos/rules#get-rules-for-a-branch>). Sorted, each
    /// once.
    pub async fn required_checks(
        &self,
        repo: &RepoRef,
        branch: &str,
    ) -> Result<Vec<String>, GithubError> {
        check_argument(GET_REQUIRED_CHECKS, "branch", branch)?;
        #[derive(Deserialize)]
        struct Protection {
            #[serde(default)]
            contexts: Vec<String>,
            #[serde(default)]
            checks: Vec<Context>,
        }
        #[derive(Deserialize)]
        struct Context {
            context: String,
        }
        #[derive(Deserialize)]
        struct Rule {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            parameters: Option<RuleParameters>,
        }
        #[derive(Deserialize)]
        struct RuleParameters {
            #[serde(default)]
            required_status_checks: Vec<Context>,
        }
        let mut required = BTreeSet::new();
        let path = format!(
            "{}/branches/{}/protection/required_status_checks",
            repo_path(repo),
            segment(branch)
        );
        match self
            .send(
                repo,
                &Permissions::PROTECTION_READ,
                GET_REQUIRED_CHECKS,
                &path,
                None,
                None,
            )
            .await
        {
            Ok(answer) => {
                let protection: Protection = decode(GET_REQUIRED_CHECKS, &answer.body)?;
                required.extend(protection.contexts);
                required.extend(protection.checks.into_iter().map(|c| c.context));
            }
            Err(GithubError::Refused { status: 404, .. }) => {}
            Err(e) => return Err(e),
        }
        let first = format!(
            "{}/rules/branches/{}?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(branch)
        );
        let rules = self
            .list(
                repo,
                &Permissions::PROTECTION_READ,
                GET_BRANCH_RULES,
                first,
                decode::<Vec<Rule>>,
            )
            .await?;
        for rule in rules {
            if rule.kind == "required_status_checks" {
                if let Some(parameters) = rule.parameters {
                    required.extend(
                        parameters
                            .required_status_checks
                            .into_iter()
                            .map(|c| c.context),
                    );
                }
            }
        }
        Ok(required.into_iter().collect())
    }

    /// What the checks of commit `sha` say, by name: `None` while pending, `Some(true)` when
    /// passed, `Some(false)` when failed. The latest check run of each name
    /// (<https://docs.github.com/en/rest/checks/runs#list-check-runs-for-a-git-reference>;
    /// `success`, `neutral` and `skipped` pass, as they do for a required check:
    /// <https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/collaborating-on-repositories-with-code-quality-features/about-status-checks#check-statuses-and-conclusions>),
    /// then the commit statuses' contexts
    /// (<https://docs.github.com/en/rest/commits/statuses#get-the-combined-status-for-a-specific-reference>).
    pub async fn head_checks(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<(String, Option<bool>)>, GithubError> {
        check_argument(LIST_CHECK_RUNS, "sha", sha)?;
        #[derive(Deserialize)]
        struct Runs {
            check_runs: Vec<Run>,
        }
        #[derive(Deserialize)]
        struct Run {
            name: String,
            status: String,
            #[serde(default)]
            conclusion: Option<String>,
        }
        #[derive(Deserialize)]
        struct Combined {
            statuses: Vec<Status>,
        }
        #[derive(Deserialize)]
        struct Status {
            context: String,
            state: String,
        }
        let first = format!(
            "{}/commits/{}/check-runs?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(sha)
        );
        let runs = self
            .list(
                repo,
                &Permissions::CHECKS_READ,
                LIST_CHECK_RUNS,
                first,
                |call, body| Ok(decode::<Runs>(call, body)?.check_runs),
            )
            .await?;
        let mut checks: Vec<(String, Option<bool>)> = runs
            .into_iter()
            .map(|run| {
                let passed = (run.status == "completed").then_some(matches!(
                    run.conclusion.as_deref(),
                    Some("success" | "neutral" | "skipped")
                ));
                (run.name, passed)
            })
            .collect();
        let first = format!(
            "{}/commits/{}/status?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(sha)
        );
        let statuses = self
            .list(
                repo,
                &Permissions::CHECKS_READ,
                GET_COMBINED_STATUS,
                first,
                |call, body| Ok(decode::<Combined>(call, body)?.statuses),
            )
            .await?;
        checks.extend(statuses.into_iter().map(|s| {
            let passed = match s.state.as_str() {
                "success" => Some(true),
                "failure" | "error" => Some(false),
                _ => None,
            };
            (s.context, passed)
        }));
        Ok(checks)
    }

    /// Creates a check run; its id
    /// (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>).
    pub async fn create_check_run(
        &self,
        repo: &RepoRef,
        body: &CheckRunBody,
    ) -> Result<u64, GithubError> {
        check_argument(CREATE_CHECK_RUN, "head_sha", &body.head_sha)?;
        let path = format!("{}/check-runs", repo_path(repo));
        let answer = self
            .send_json(
                repo,
                &Permissions::CHECKS_WRITE,
                CREATE_CHECK_RUN,
                &path,
                body,
            )
            .await?;
        Ok(decode::<Id>(CREATE_CHECK_RUN, &answer.body)?.id)
    }

    /// Updates check run `id`
    /// (<https://docs.github.com/en/rest/checks/runs#update-a-check-run>; the update takes
    /// no `head_sha`, so it is left out).
    pub async fn update_check_run(
        &self,
        repo: &RepoRef,
        id: u64,
        body: &CheckRunBody,
    ) -> Result<(), GithubError> {
        let path = format!("{}/check-runs/{id}", repo_path(repo));
        let mut value = serde_json::to_value(body).map_err(|e| GithubError::Decode {
            call: UPDATE_CHECK_RUN,
            reason: format!("could not encode the body: {e}"),
        })?;
        if let Some(object) = value.as_object_mut() {
            object.remove("head_sha");
        }
        self.send_json(
            repo,
            &Permissions::CHECKS_WRITE,
            UPDATE_CHECK_RUN,
            &path,
            &value,
        )
        .await
        .map(drop)
    }

    /// The oldest comment on pull request (or issue) `number` written by an app (a `Bot`)
    /// whose body holds `marker`: Sortie's sticky comment. All pages, bounded
    /// (<https://docs.github.com/en/rest/issues/comments#list-issue-comments>).
    pub async fn find_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        marker: &str,
    ) -> Result<Option<u64>, GithubError> {
        if marker.trim().is_empty() {
            return Err(GithubError::InvalidArgument {
                call: LIST_COMMENTS,
                field: "marker",
                reason: "is empty".into(),
            });
        }
        check_argument(LIST_COMMENTS, "marker", marker)?;
        #[derive(Deserialize)]
        struct Comment {
            id: u64,
            #[serde(default)]
            body: Option<String>,
            user: Option<Author>,
        }
        #[derive(Deserialize)]
        struct Author {
            #[serde(rename = "type", default)]
            kind: String,
        }
        let first = format!(
            "{}/issues/{number}/comments?per_page={PER_PAGE}&page=1",
            repo_path(repo)
        );
        let comments = self
            .list(
                repo,
                &Permissions::COMMENTS_WRITE,
                LIST_COMMENTS,
                first,
                decode::<Vec<Comment>>,
            )
            .await?;
        Ok(comments
            .into_iter()
            .find(|c| {
                c.user.as_ref().is_some_and(|u| u.kind == "Bot")
                    && c.body.as_deref().is_some_and(|b| b.contains(marker))
            })
            .map(|c| c.id))
    }

    /// Comments on pull request (or issue) `number`; the comment's id
    /// (<https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>).
    pub async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<u64, GithubError> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo));
        let answer = self
            .send_json(
                repo,
                &Permissions::COMMENTS_WRITE,
                CREATE_COMMENT,
                &path,
                &serde_json::json!({ "body": body }),
            )
            .await?;
        Ok(decode::<Id>(CREATE_COMMENT, &answer.body)?.id)
    }

    /// Replaces comment `id`'s body
    /// (<https://docs.github.com/en/rest/issues/comments#update-an-issue-comment>).
    pub async fn update_comment(
        &self,
        repo: &RepoRef,
        id: u64,
        body: &str,
    ) -> Result<(), GithubError> {
        let path = format!("{}/issues/comments/{id}", repo_path(repo));
        self.send_json(
            repo,
            &Permissions::COMMENTS_WRITE,
            UPDATE_COMMENT,
            &path,
            &serde_json::json!({ "body": body }),
        )
        .await
        .map(drop)
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
