//! The host of a pull request (GitHub today, GitLab next), as the service needs it: one
//! small trait of the seams every host has. Its GitHub implementation is
//! [`crate::pull_requests::GithubHost`]; tests use the GitHub double behind it, or a fake.

use std::sync::Arc;

use async_trait::async_trait;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::reconcile::ListedPull;
use sortie_core::vcs::report::CheckOutput;
use sortie_core::vcs::VcsProvider;

/// A pull request as its host reports it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullInfo {
    /// Its head commit.
    pub head_sha: String,
    /// Its base branch.
    pub base: String,
    /// Its author's login.
    pub author: String,
    /// True when its head is in another repository.
    pub fork: bool,
    /// False once closed or merged.
    pub open: bool,
    /// True when merged.
    pub merged: bool,
    /// The merge commit, once merged.
    pub merge_commit_sha: Option<String>,
}

/// Why a host call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The host refused the call for good (401, 403, 404, 422): its message, quoted.
    #[error("{0}")]
    Refused(String),
    /// The host is down, slow or limiting us: try the work again later.
    #[error("{message} (retry in {retry_after_seconds} s)")]
    Unavailable {
        /// What happened.
        message: String,
        /// When to try again.
        retry_after_seconds: u64,
    },
    /// The connection's secrets could not be read.
    #[error("the connection's secret could not be read: {0}")]
    Secret(String),
}

impl HostError {
    /// True when the same work may succeed later.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Refused(_))
    }
}

/// One connection's host: the seams a pull request needs.
#[async_trait]
pub trait CodeHost: Send + Sync {
    /// The host this is.
    fn provider(&self) -> VcsProvider;
    /// The open pull requests into `base`, every page (at most 3,000). With `etag` from
    /// the last list, `None` when the host says nothing changed since (which costs no rate
    /// limit); else the list and its new `ETag`.
    async fn open_pulls(
        &self,
        repository: &str,
        base: &str,
        etag: Option<&str>,
    ) -> Result<Option<(Vec<ListedPull>, Option<String>)>, HostError>;
    /// The pull request now.
    async fn pull(&self, repository: &str, number: u64) -> Result<PullInfo, HostError>;
    /// The paths its changes touch (both names of a renamed file), paged to the end.
    async fn changed_files(&self, repository: &str, number: u64) -> Result<Vec<String>, HostError>;
    /// Creates (`id: None`) or updates the check run of `check.name` on `sha`, linking to
    /// `details_url`; returns its id.
    async fn write_check(
        &self,
        repository: &str,
        sha: &str,
        id: Option<u64>,
        check: &CheckOutput,
        details_url: Option<&str>,
    ) -> Result<u64, HostError>;
    /// Writes the pull request's one comment: updates comment `id`, or, without one, the
    /// comment that carries the marker, or creates it; returns its id.
    async fn upsert_comment(
        &self,
        repository: &str,
        number: u64,
        id: Option<u64>,
        body: &str,
    ) -> Result<u64, HostError>;
    /// Answers a command with a new comment (a refusal, the help).
    async fn reply(&self, repository: &str, number: u64, body: &str) -> Result<(), HostError>;
    /// What an apply's requirements are decided on, read now: the reviews, mergeability,
    /// how far the head is behind its base, the base's required checks and the head's
    /// results (`planned_sha` is the caller's to fill).
    async fn facts(
        &self,
        repository: &str,
        number: u64,
    ) -> Result<sortie_core::vcs::requirements::PullFacts, HostError>;
    /// What job `job`'s pilot needs to download `sha`: a URL and a token that can only read
    /// this one repository, for a short while, and where the pilot revokes it when the
    /// token is the job's alone.
    async fn source_access(
        &self,
        repository: &str,
        sha: &str,
        job: &str,
    ) -> Result<SourceAccess, HostError>;
    /// The source tokens of `repository` still active, each with the job it was minted for:
    /// only a host whose tokens are each one job's (GitLab) has any.
    async fn source_tokens(&self, repository: &str) -> Result<Vec<HeldSource>, HostError> {
        let _ = repository;
        Ok(Vec::new())
    }
    /// Revokes source token `token_id` of `repository` (one already gone is done).
    async fn revoke_source(&self, repository: &str, token_id: u64) -> Result<(), HostError> {
        let _ = (repository, token_id);
        Ok(())
    }
}

/// A source token still active on its host, and the job it was minted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSource {
    /// The token's id on the host.
    pub token_id: u64,
    /// The job it was minted for.
    pub job: String,
}

/// Opens the host of an organisation's connection (reading its secrets).
#[async_trait]
pub trait CodeHosts: Send + Sync {
    /// The host behind `connection`.
    async fn open(&self, connection: &VcsConnection) -> Result<Arc<dyn CodeHost>, HostError>;
}

/// At most this many connections' clients are kept warm per instance.
const CLIENTS_MAX: usize = 256;

/// Each connection's client, kept warm (with whatever it caches, such as installation
/// tokens) while the connection is unchanged: keyed by everything that makes it, so a
/// reconnect (a new credential ARN) opens a new one. Past [`CLIENTS_MAX`] all are
/// forgotten at once.
pub(crate) struct WarmClients<H> {
    clients: std::sync::Mutex<std::collections::HashMap<String, H>>,
}

impl<H: Clone> WarmClients<H> {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self {
            clients: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn key(connection: &VcsConnection) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}",
            connection.provider.as_str(),
            connection.org,
            connection.app_id,
            connection.api_url,
            connection.credential_secret
        )
    }

    /// The client kept for `connection`, if any.
    pub(crate) fn get(&self, connection: &VcsConnection) -> Option<H> {
        let clients = self.clients.lock().expect("not poisoned");
        clients.get(&Self::key(connection)).cloned()
    }

    /// Keeps `client` for `connection`.
    pub(crate) fn keep(&self, connection: &VcsConnection, client: H) {
        let mut clients = self.clients.lock().expect("not poisoned");
        if clients.len() >= CLIENTS_MAX {
            clients.clear();
        }
        clients.insert(Self::key(connection), client);
    }
}
