//! GitLab behind [`CodeHost`]: each connection's client (its access token read from Secrets
//! Manager once per warm instance), merge requests read as pull requests, a commit status
//! per environment for a check, and one sticky note for the comment.

use std::sync::Arc;

use async_trait::async_trait;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::reconcile::ListedPull;
use sortie_core::vcs::report::{CheckOutput, COMMENT_MARKER};
use sortie_core::vcs::requirements::{PullFacts, Review, ReviewState};
use sortie_core::vcs::VcsProvider;
use sortie_gitlab::{
    Gitlab, GitlabError, MergeRequest, ProjectPath, Secret, StatusBody, StatusOutcome,
};
use sortie_launch::JobSecrets;
use tracing::warn;

use super::host::HeldSource;
use super::host::WarmClients;
use super::{CodeHost, CodeHosts, HostError, PullInfo};

/// What GitLab answers a status for a commit no branch of the project holds (a fork's).
const NO_BRANCH_HOLDS_IT: &str = "References for commit Not Found";

/// How long to wait before trying work again that GitLab failed without saying when.
const RETRY_SECONDS: u64 = 30;

/// The `detailed_merge_status` values that only say a pipeline has not passed yet: on a
/// project where pipelines must succeed, Sortie's own commit status is one of them, so
/// these never count against `mergeable` when every other status on the head passed.
const PIPELINE_WAITS: [&str; 2] = ["ci_must_pass", "ci_still_running"];

fn host_error(e: GitlabError) -> HostError {
    if e.is_transient() {
        return HostError::Unavailable {
            message: e.to_string(),
            retry_after_seconds: e
                .retry_after()
                .map_or(RETRY_SECONDS, |d| d.as_secs().max(1)),
        };
    }
    HostError::Refused(e.to_string())
}

fn project(path: &str) -> Result<ProjectPath, HostError> {
    ProjectPath::parse(path).map_err(|e| HostError::Refused(e.to_string()))
}

/// The head a merge request's plans are of: GitLab leaves `sha` empty while it computes
/// the diff, which is worth waiting for.
fn head_of(mr: &MergeRequest) -> Result<String, HostError> {
    mr.sha.clone().ok_or_else(|| HostError::Unavailable {
        message: format!(
            "GitLab has not computed merge request !{}'s head yet",
            mr.iid
        ),
        retry_after_seconds: RETRY_SECONDS,
    })
}

/// One connection's GitLab.
#[derive(Clone)]
pub struct GitlabHost {
    /// The instance's client.
    pub client: Gitlab,
}

#[async_trait]
impl CodeHost for GitlabHost {
    fn provider(&self) -> VcsProvider {
        VcsProvider::Gitlab
    }

    /// GitLab's merge request list takes no conditional request: every call lists, and
    /// none is ever "not modified".
    async fn open_pulls(
        &self,
        repository: &str,
        base: &str,
        _etag: Option<&str>,
    ) -> Result<Option<(Vec<ListedPull>, Option<String>)>, HostError> {
        let listed = self
            .client
            .open_merge_requests(&project(repository)?, base)
            .await
            .map_err(host_error)?;
        Ok(Some((
            listed
                .into_iter()
                .filter_map(|mr| {
                    Some(ListedPull {
                        number: mr.iid,
                        head_sha: mr.sha?,
                    })
                })
                .collect(),
            None,
        )))
    }

    async fn pull(&self, repository: &str, number: u64) -> Result<PullInfo, HostError> {
        let mr = self
            .client
            .merge_request(&project(repository)?, number)
            .await
            .map_err(host_error)?;
        Ok(PullInfo {
            head_sha: head_of(&mr)?,
            base: mr.target_branch.clone(),
            author: mr.author_username.clone(),
            fork: mr.is_from_fork(),
            open: mr.is_open(),
            merged: mr.is_merged(),
            merge_commit_sha: mr.landed_sha().map(str::to_string),
        })
    }

    async fn changed_files(&self, repository: &str, number: u64) -> Result<Vec<String>, HostError> {
        Ok(self
            .client
            .changed_files(&project(repository)?, number)
            .await
            .map_err(host_error)?
            .paths())
    }

    /// A check is the commit status named for its environment. A state GitLab will not
    /// move to from the one the status has (running to pending) leaves it as it is: the
    /// next state the job reaches moves it on.
    async fn write_check(
        &self,
        repository: &str,
        sha: &str,
        id: Option<u64>,
        check: &CheckOutput,
        details_url: Option<&str>,
    ) -> Result<u64, HostError> {
        let body = StatusBody::for_check(check, details_url);
        match self
            .client
            .set_status(&project(repository)?, sha, &body)
            .await
        {
            Ok(StatusOutcome::Set { id, .. }) => Ok(id),
            Ok(StatusOutcome::Kept { .. }) => Ok(id.unwrap_or_default()),
            // A fork's commit: no branch of the target project holds it, and GitLab takes
            // its statuses only in the fork's project, from the fork's Developers
            // (gitlab-org/gitlab#374133). The note carries the result instead; a refusal
            // here must not keep the note from being written.
            Err(GitlabError::Refused {
                status: 404,
                message,
                ..
            }) if message.contains(NO_BRANCH_HOLDS_IT) => {
                warn!(
                    repository,
                    sha, "no status on a fork's commit: GitLab takes it only in the fork's project"
                );
                Ok(id.unwrap_or_default())
            }
            Err(e) => Err(host_error(e)),
        }
    }

    async fn upsert_comment(
        &self,
        repository: &str,
        number: u64,
        id: Option<u64>,
        body: &str,
    ) -> Result<u64, HostError> {
        self.client
            .upsert_note(&project(repository)?, number, id, COMMENT_MARKER, body)
            .await
            .map_err(host_error)
    }

    async fn reply(&self, repository: &str, number: u64, body: &str) -> Result<(), HostError> {
        self.client
            .reply(&project(repository)?, number, body)
            .await
            .map(|_| ())
            .map_err(host_error)
    }

    /// The requirements' facts, read now: approvals on the head (approvals given before
    /// the head's last push do not count, whatever the project's reset setting), GitLab's
    /// `detailed_merge_status` with Sortie's own statuses left out, and how far the head
    /// is behind its target.
    async fn facts(&self, repository: &str, number: u64) -> Result<PullFacts, HostError> {
        let project = project(repository)?;
        let c = &self.client;
        let mr = c
            .merge_request(&project, number)
            .await
            .map_err(host_error)?;
        let head = head_of(&mr)?;
        let approvers = c
            .approvals_on_head(&project, number)
            .await
            .map_err(host_error)?;
        let epoch = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        let mergeable = match mr.mergeable() {
            Some(false) => Some(false),
            None => None,
            Some(true) => match mr.detailed_merge_status.as_deref() {
                Some("mergeable") => Some(true),
                Some(wait) if PIPELINE_WAITS.contains(&wait) => {
                    let others = c.head_statuses(&project, &head).await.map_err(host_error)?;
                    Some(
                        others
                            .iter()
                            .filter(|s| {
                                !s.name
                                    .starts_with(sortie_core::vcs::report::CHECK_NAME_PREFIX)
                            })
                            .all(|s| s.passed()),
                    )
                }
                // Draft, unresolved threads, GitLab's own approval rules, a blocking
                // merge request: GitLab would not merge it.
                _ => Some(false),
            },
        };
        Ok(PullFacts {
            author: mr.author_username.clone(),
            head_sha: head.clone(),
            planned_sha: None,
            reviews: approvers
                .into_iter()
                .enumerate()
                .map(|(i, user)| Review {
                    user,
                    state: ReviewState::Approved,
                    commit_id: head.clone(),
                    submitted_at: epoch + chrono::Duration::seconds(i as i64),
                })
                .collect(),
            mergeable,
            draft: mr.draft,
            behind_by: mr.diverged_commits_count,
            required_checks: Vec::new(),
            checks: Vec::new(),
        })
    }

    async fn source_access(
        &self,
        repository: &str,
        sha: &str,
        job: &str,
    ) -> Result<SourceAccess, HostError> {
        self.client
            .source_access(&project(repository)?, sha, job, chrono::Utc::now())
            .await
            .map(|grant| grant.access)
            .map_err(host_error)
    }

    async fn source_tokens(&self, repository: &str) -> Result<Vec<HeldSource>, HostError> {
        let held = self
            .client
            .source_tokens(&project(repository)?)
            .await
            .map_err(host_error)?;
        Ok(held
            .into_iter()
            .map(|t| HeldSource {
                token_id: t.id,
                job: t.job,
            })
            .collect())
    }

    async fn revoke_source(&self, repository: &str, token_id: u64) -> Result<(), HostError> {
        self.client
            .revoke_source_token(&project(repository)?, token_id)
            .await
            .map_err(host_error)
    }
}

/// Each connection's GitLab client, its token read from Secrets Manager once per instance
/// and the client kept while the connection is unchanged.
pub struct GitlabHosts {
    secrets: Arc<dyn JobSecrets>,
    clients: WarmClients<GitlabHost>,
}

impl GitlabHosts {
    /// Hosts whose tokens are read from `secrets`.
    pub fn new(secrets: Arc<dyn JobSecrets>) -> Self {
        Self {
            secrets,
            clients: WarmClients::new(),
        }
    }
}

#[async_trait]
impl CodeHosts for GitlabHosts {
    async fn open(&self, connection: &VcsConnection) -> Result<Arc<dyn CodeHost>, HostError> {
        if let Some(host) = self.clients.get(connection) {
            return Ok(Arc::new(host));
        }
        let token = self
            .secrets
            .value(&connection.credential_secret)
            .await
            .map_err(HostError::Secret)?;
        let client = Gitlab::new(&connection.api_url, Secret::new(token))
            .map_err(|e| HostError::Refused(e.to_string()))?;
        let host = GitlabHost { client };
        self.clients.keep(connection, host.clone());
        Ok(Arc::new(host))
    }
}

/// Every host Sortie speaks to, each connection opened by its own host's kind.
pub struct AnyHosts {
    /// GitHub's.
    pub github: Arc<dyn CodeHosts>,
    /// GitLab's.
    pub gitlab: Arc<dyn CodeHosts>,
}

impl AnyHosts {
    /// GitHub and GitLab hosts whose credentials are read from `secrets`.
    pub fn new(secrets: Arc<dyn JobSecrets>) -> Self {
        Self {
            github: Arc::new(super::GithubHosts::new(secrets.clone())),
            gitlab: Arc::new(GitlabHosts::new(secrets)),
        }
    }
}

#[async_trait]
impl CodeHosts for AnyHosts {
    async fn open(&self, connection: &VcsConnection) -> Result<Arc<dyn CodeHost>, HostError> {
        match connection.provider {
            VcsProvider::Github => self.github.open(connection).await,
            VcsProvider::Gitlab => self.gitlab.open(connection).await,
        }
    }
}
