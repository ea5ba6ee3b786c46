//! GitHub behind [`CodeHost`]: each connection's GitHub App client (its installation
//! tokens cached for as long as the function is warm), and GitHub's webhook events read
//! into [`PullWork`].

use std::sync::Arc;

use async_trait::async_trait;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_core::vcs::command::parse_commands;
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::reconcile::ListedPull;
use sortie_core::vcs::report::{CheckOutput, CheckStatus, Conclusion, COMMENT_MARKER};
use sortie_core::vcs::requirements::{CheckResult, PullFacts, Review, ReviewState};
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::VcsProvider;
use sortie_github::webhook::{Event, PullRequestAction};
use sortie_github::{
    AppCredentials, CheckConclusion, CheckRunBody, Github, GithubError, Permissions, RepoRef,
};
use sortie_launch::JobSecrets;

use super::host::WarmClients;
use super::{CodeHost, CodeHosts, HostError, PullInfo};

/// How long to wait before trying work again that GitHub failed without saying when.
const RETRY_SECONDS: u64 = 30;

fn host_error(e: GithubError) -> HostError {
    match e {
        GithubError::RateLimited { retry_after, .. } => HostError::Unavailable {
            message: e.to_string(),
            retry_after_seconds: retry_after.as_secs().max(1),
        },
        GithubError::ServerError { .. } | GithubError::Unreachable { .. } => {
            HostError::Unavailable {
                message: e.to_string(),
                retry_after_seconds: RETRY_SECONDS,
            }
        }
        other => HostError::Refused(other.to_string()),
    }
}

fn repo(repository: &str) -> Result<RepoRef, HostError> {
    RepoRef::parse(repository).map_err(|e| HostError::Refused(e.to_string()))
}

/// One connection's GitHub.
#[derive(Clone)]
pub struct GithubHost {
    /// The App's client.
    pub client: Github,
}

#[async_trait]
impl CodeHost for GithubHost {
    fn provider(&self) -> VcsProvider {
        VcsProvider::Github
    }

    async fn open_pulls(
        &self,
        repository: &str,
        base: &str,
        etag: Option<&str>,
    ) -> Result<Option<(Vec<ListedPull>, Option<String>)>, HostError> {
        let listed = self
            .client
            .open_pulls(&repo(repository)?, base, etag)
            .await
            .map_err(host_error)?;
        Ok(match listed {
            sortie_github::Conditional::NotModified => None,
            sortie_github::Conditional::Modified { value, etag } => Some((
                value
                    .into_iter()
                    .map(|p| ListedPull {
                        number: p.number,
                        head_sha: p.head_sha,
                    })
                    .collect(),
                etag,
            )),
        })
    }

    async fn pull(&self, repository: &str, number: u64) -> Result<PullInfo, HostError> {
        let pull = self
            .client
            .pull(&repo(repository)?, number)
            .await
            .map_err(host_error)?;
        Ok(PullInfo {
            fork: pull.is_from_fork(),
            head_sha: pull.head_sha,
            base: pull.base_ref,
            author: pull.user_login,
            open: pull.state == "open",
            merged: pull.merged,
            merge_commit_sha: pull.merge_commit_sha,
        })
    }

    async fn changed_files(&self, repository: &str, number: u64) -> Result<Vec<String>, HostError> {
        let files = self
            .client
            .pull_files(&repo(repository)?, number)
            .await
            .map_err(host_error)?;
        Ok(files
            .into_iter()
            .flat_map(|f| std::iter::once(f.filename).chain(f.previous_filename))
            .collect())
    }

    async fn write_check(
        &self,
        repository: &str,
        sha: &str,
        id: Option<u64>,
        check: &CheckOutput,
        details_url: Option<&str>,
    ) -> Result<u64, HostError> {
        let repo = repo(repository)?;
        let body = CheckRunBody {
            name: check.name.clone(),
            head_sha: sha.to_string(),
            status: match check.status {
                CheckStatus::Queued => sortie_github::CheckStatus::Queued,
                CheckStatus::InProgress => sortie_github::CheckStatus::InProgress,
                CheckStatus::Completed => sortie_github::CheckStatus::Completed,
            },
            conclusion: check.conclusion.map(|c| match c {
                Conclusion::Success => CheckConclusion::Success,
                Conclusion::Failure => CheckConclusion::Failure,
                Conclusion::Neutral => CheckConclusion::Neutral,
                Conclusion::Cancelled => CheckConclusion::Cancelled,
                Conclusion::ActionRequired => CheckConclusion::ActionRequired,
                Conclusion::Skipped => CheckConclusion::Skipped,
            }),
            details_url: details_url.map(str::to_string),
            external_id: None,
            output: Some(sortie_github::CheckOutput {
                title: check.title.clone(),
                summary: check.summary.clone(),
                text: check.text.clone(),
            }),
        };
        match id {
            Some(id) => {
                self.client
                    .update_check_run(&repo, id, &body)
                    .await
                    .map_err(host_error)?;
                Ok(id)
            }
            None => self
                .client
                .create_check_run(&repo, &body)
                .await
                .map_err(host_error),
        }
    }

    async fn upsert_comment(
        &self,
        repository: &str,
        number: u64,
        id: Option<u64>,
        body: &str,
    ) -> Result<u64, HostError> {
        let repo = repo(repository)?;
        // Without a known id, the comment that carries the marker: a record lost between
        // the comment's creation and its write never makes a second comment.
        let id = match id {
            Some(id) => Some(id),
            None => self
                .client
                .find_comment(&repo, number, COMMENT_MARKER)
                .await
                .map_err(host_error)?,
        };
        match id {
            Some(id) => {
                self.client
                    .update_comment(&repo, id, body)
                    .await
                    .map_err(host_error)?;
                Ok(id)
            }
            None => self
                .client
                .create_comment(&repo, number, body)
                .await
                .map_err(host_error),
        }
    }

    async fn reply(&self, repository: &str, number: u64, body: &str) -> Result<(), HostError> {
        self.client
            .create_comment(&repo(repository)?, number, body)
            .await
            .map_err(host_error)?;
        Ok(())
    }

    async fn facts(&self, repository: &str, number: u64) -> Result<PullFacts, HostError> {
        let repo = repo(repository)?;
        let c = &self.client;
        let pull = c.pull(&repo, number).await.map_err(host_error)?;
        let reviews = c.reviews(&repo, number).await.map_err(host_error)?;
        // Unknown (and so unmet, when required) if GitHub cannot compare them.
        let behind_by = c
            .compare(&repo, &pull.base_ref, &pull.head_sha)
            .await
            .ok()
            .and_then(|cmp| u32::try_from(cmp.behind_by).ok());
        let required_checks = c
            .required_checks(&repo, &pull.base_ref)
            .await
            .map_err(host_error)?;
        let checks = c
            .head_checks(&repo, &pull.head_sha)
            .await
            .map_err(host_error)?;
        // GitHub lists reviews oldest first; their order is what decides.
        let epoch = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        Ok(PullFacts {
            author: pull.user_login.clone(),
            head_sha: pull.head_sha.clone(),
            planned_sha: None,
            reviews: reviews
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    Some(Review {
                        user: r.user_login?,
                        state: match r.state.as_str() {
                            "APPROVED" => ReviewState::Approved,
                            "CHANGES_REQUESTED" => ReviewState::ChangesRequested,
                            "DISMISSED" => ReviewState::Dismissed,
                            "PENDING" => ReviewState::Pending,
                            _ => ReviewState::Commented,
                        },
                        commit_id: r.commit_id.unwrap_or_default(),
                        submitted_at: epoch + chrono::Duration::seconds(i as i64),
                    })
                })
                .collect(),
            mergeable: pull.mergeable,
            draft: pull.draft,
            behind_by,
            required_checks,
            checks: checks
                .into_iter()
                .map(|(name, passed)| CheckResult { name, passed })
                .collect(),
        })
    }

    /// An installation token is cached and shared by the repository's jobs, so the pilot is
    /// given no URL to revoke it: it expires within the hour.
    async fn source_access(
        &self,
        repository: &str,
        sha: &str,
        _job: &str,
    ) -> Result<SourceAccess, HostError> {
        let repo = repo(repository)?;
        let token = self
            .client
            .repository_token(&repo, &Permissions::CONTENTS_READ)
            .await
            .map_err(host_error)?;
        Ok(SourceAccess {
            url: self.client.tarball_url(&repo, sha),
            token: token.token,
            expires_at: token.expires_at,
            revoke_url: None,
        })
    }
}

/// Each connection's GitHub App client, its private key read from Secrets Manager once
/// per instance and the client kept (with its cached installation tokens) while the
/// connection is unchanged.
pub struct GithubHosts {
    secrets: Arc<dyn JobSecrets>,
    clients: WarmClients<GithubHost>,
}

impl GithubHosts {
    /// Hosts whose App keys are read from `secrets`.
    pub fn new(secrets: Arc<dyn JobSecrets>) -> Self {
        Self {
            secrets,
            clients: WarmClients::new(),
        }
    }
}

#[async_trait]
impl CodeHosts for GithubHosts {
    async fn open(&self, connection: &VcsConnection) -> Result<Arc<dyn CodeHost>, HostError> {
        if let Some(host) = self.clients.get(connection) {
            return Ok(Arc::new(host));
        }
        let pem = self
            .secrets
            .value(&connection.credential_secret)
            .await
            .map_err(HostError::Secret)?;
        let client = Github::new(
            &connection.api_url,
            AppCredentials {
                app_id: connection.app_id,
                private_key_pem: pem,
            },
        )
        .map_err(|e| HostError::Refused(e.to_string()))?;
        let host = GithubHost { client };
        self.clients.keep(connection, host.clone());
        Ok(Arc::new(host))
    }
}

/// The work a verified GitHub delivery makes for organisation `org`'s connection; `None`
/// for an event Sortie does not act on (a ping, a comment with no command, an issue).
pub fn work_of(org: &str, event: &Event) -> Option<PullWork> {
    let org = org.to_string();
    match event {
        Event::PullRequest(e) => Some(PullWork::PullRequest {
            org,
            provider: VcsProvider::Github,
            repository: e.repository.full_name.clone(),
            number: e.number,
            action: match e.action {
                PullRequestAction::Opened => PullAction::Opened,
                // A new base is planned as a new head is: its bound environments, again.
                PullRequestAction::Synchronize | PullRequestAction::Edited => {
                    PullAction::Synchronize
                }
                PullRequestAction::Reopened => PullAction::Reopened,
                PullRequestAction::Closed => PullAction::Closed,
            },
            head_sha: e.pull_request.head.sha.clone(),
            merged: e.pull_request.merged.unwrap_or(false),
        }),
        Event::IssueComment(e) if e.is_on_pull_request() => {
            let commands = parse_commands(&e.comment.body);
            (!commands.is_empty()).then(|| PullWork::Comment {
                org,
                provider: VcsProvider::Github,
                repository: e.repository.full_name.clone(),
                number: e.issue.number,
                author: e.comment.user.login.clone(),
                commands,
            })
        }
        Event::PullRequestReview(e) => Some(PullWork::Review {
            org,
            provider: VcsProvider::Github,
            repository: e.repository.full_name.clone(),
            number: e.pull_request.number,
        }),
        Event::Push(e) => e
            .branch()
            .filter(|_| !e.deleted)
            .map(|branch| PullWork::Push {
                org,
                provider: VcsProvider::Github,
                repository: e.repository.full_name.clone(),
                branch: branch.to_string(),
                after: e.after.clone(),
            }),
        _ => None,
    }
}
