//! Sortie in the pull request: the service that turns a pull request's work
//! ([`PullWork`]) into speculative plans, check runs and one comment, and answers its
//! `/sortie` commands. What is decided is decided in `sortie_core::vcs`; the host (GitHub
//! or GitLab) is reached through [`CodeHost`], opened for each connection by
//! [`AnyHosts`].

mod applies;
mod bus;
mod commands;
mod connections;
mod github;
mod gitlab;
mod host;
mod merge;
mod plans;
mod reconcile;
mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use sortie_core::auth::{Grantee, Principal};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::{VcsBinding, VcsProvider};
use sortie_core::EnvPath;
use sortie_store::{Store, StoreError};
use tracing::warn;

pub use bus::{report_of, work_of_message, PullReportingBus, REPORTED_EVENTS};
pub use connections::{
    ConnectRefusal, Connections, PRIVATE_KEY_MAX, WEBHOOK_SECRET_MAX, WEBHOOK_SECRET_MIN,
};
pub use github::{work_of, GithubHost, GithubHosts};
pub use gitlab::{AnyHosts, GitlabHost, GitlabHosts};
pub use host::{CodeHost, CodeHosts, HeldSource, HostError, PullInfo};
pub use reconcile::{Reconciled, MAX_REPAIRS};

use crate::JobService;

/// A record written on condition of its version is read and tried again at most this
/// many times when another worker wrote it first.
const RECORD_TRIES: u32 = 3;

/// The issuer of the principals a connection's users are mapped to: a membership granted
/// to subject `<login>` with this issuer lets that GitHub user command Sortie.
pub fn issuer_of(connection: &VcsConnection) -> String {
    let host = url::Url::parse(&connection.api_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    format!("vcs:{}:{host}", connection.provider.as_str())
}

/// Why pull-request work failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The host failed.
    #[error("{0}")]
    Host(#[from] HostError),
    /// An approved apply waits for requirements that may still come to hold (a required
    /// check running, GitHub still computing mergeability): the work is tried again.
    #[error("waiting for the pull request's requirements: {0}")]
    Waiting(String),
}

impl PullError {
    /// True when the work may succeed if tried again (the queue redelivers it).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Store(e) => e.is_retryable(),
            Self::Host(e) => e.is_retryable(),
            Self::Waiting(_) => true,
        }
    }
}

/// Who discards an approved apply whose pull request's requirements no longer hold.
pub const REQUIREMENTS_PRINCIPAL: &str = "sortie:pull-request-requirements";

/// The pull-request service.
#[derive(Clone)]
pub struct PullRequests {
    /// The job operations (its store is the repository).
    pub jobs: JobService,
    /// Opens each connection's host.
    pub hosts: Arc<dyn CodeHosts>,
    /// The console's URL: a job's page is `<console_url>/#/jobs/<id>`.
    pub console_url: String,
}

/// Writes the bindings index before an environment's binding changes to `after` (from
/// `before`): a bound environment is always in the index of its repository.
pub(crate) async fn index_binding(
    store: &dyn Store,
    env: &EnvPath,
    before: Option<&VcsBinding>,
    after: Option<&VcsBinding>,
) -> Result<(), StoreError> {
    if let Some(b) = after {
        if before.map(index_key) != Some(index_key(b)) {
            store.index_binding(b.provider, &b.repository, env).await?;
        }
    }
    Ok(())
}

/// Removes an environment from the index of the repository it was bound to, after its
/// binding moved (or the environment went). Best effort: a stale entry is skipped by every
/// reader, which checks the binding.
pub(crate) async fn unindex_moved_binding(
    store: &dyn Store,
    env: &EnvPath,
    before: Option<&VcsBinding>,
    after: Option<&VcsBinding>,
) {
    if let Some(b) = before {
        if after.map(index_key) != Some(index_key(b)) {
            if let Err(e) = store.unindex_binding(b.provider, &b.repository, env).await {
                warn!(environment = %env, error = %e, "a stale bindings index entry is left (readers skip it)");
            }
        }
    }
}

fn index_key(b: &VcsBinding) -> (VcsProvider, String) {
    (b.provider, b.repository.to_ascii_lowercase())
}

impl PullRequests {
    fn store(&self) -> &dyn Store {
        self.jobs.store.as_ref()
    }

    /// Does one piece of work. A retryable error asks the queue to redeliver it; any other
    /// is logged by the caller and the work dropped.
    pub async fn handle(&self, work: &PullWork) -> Result<(), PullError> {
        let Some((connection, host)) = self.host(work.org(), work.provider()).await? else {
            return Ok(());
        };
        match work {
            PullWork::PullRequest {
                repository,
                number,
                action,
                ..
            } => {
                if *action == PullAction::Closed {
                    self.closed(&connection, host.as_ref(), repository, *number)
                        .await
                } else {
                    self.plan_head(&connection, host.as_ref(), repository, *number, None)
                        .await
                }
            }
            PullWork::Comment {
                repository,
                number,
                author,
                commands,
                ..
            } => {
                for command in commands {
                    self.command(
                        &connection,
                        host.as_ref(),
                        repository,
                        *number,
                        author,
                        command,
                    )
                    .await?;
                }
                Ok(())
            }
            PullWork::Review {
                repository, number, ..
            }
            | PullWork::Report {
                repository, number, ..
            } => self.report(host.as_ref(), repository, *number).await,
            // Applies after a merge come with the merge commands' work (issue 42, next).
            PullWork::Push { .. } => Ok(()),
            PullWork::Reconcile { .. } => self
                .reconcile_with(&connection, host.as_ref())
                .await
                .map(|_| ()),
        }
    }

    /// The organisation's connection and its host; `None` (the work is dropped) when the
    /// organisation has no connection any more.
    async fn host(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Option<(VcsConnection, Arc<dyn CodeHost>)>, PullError> {
        let connection = match self.store().get_connection(org, provider).await {
            Ok(c) => c,
            Err(StoreError::NotFound { .. }) => {
                warn!(
                    org,
                    "pull request work for an organisation with no connection: dropped"
                );
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let host = self.hosts.open(&connection).await?;
        Ok(Some((connection, host)))
    }

    /// The principal a host user is: subject `<login>` (lower case) of the connection's
    /// issuer, with the memberships of the connection's organisation granted to it by name
    /// and issuer. A grant that names no issuer is not counted: it was meant for a token's
    /// `sub`, and a host user may pick any login, such as a person's subject elsewhere.
    async fn principal(
        &self,
        connection: &VcsConnection,
        login: &str,
    ) -> Result<Principal, PullError> {
        let mut principal = Principal {
            issuer: issuer_of(connection),
            subject: login.to_ascii_lowercase(),
            claims: Default::default(),
            memberships: vec![],
        };
        let memberships = self.store().memberships_for(Some(&connection.org)).await?;
        principal.memberships = memberships
            .into_iter()
            .filter(|m| {
                matches!(&m.grantee, Grantee::Subject { issuer: Some(i), .. } if *i == principal.issuer)
                    && m.applies_to(&principal)
            })
            .collect();
        Ok(principal)
    }
}
