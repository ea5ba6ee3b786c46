//! Pull requests: organisations' connections, the index of environments bound to each
//! repository, webhook deliveries seen, and each pull request's record.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::vcs::reconcile::OpenPulls;
use sortie_core::vcs::VcsProvider;
use sortie_core::EnvPath;

use crate::{StoreError, Versioned};

/// At most this many environments are read as bound to one repository: a webhook's work
/// is bounded, and the rest are named in the logs.
pub const MAX_BOUND_ENVIRONMENTS: usize = 1000;

/// The longest delivery id kept (GitHub's are GUIDs of 36 characters).
pub const DELIVERY_ID_MAX: usize = 100;

/// Connections, bindings, deliveries and pull requests.
#[async_trait]
pub trait VcsStore: Send + Sync {
    /// Writes an organisation's connection, replacing an earlier one of the same provider.
    async fn put_connection(&self, connection: &VcsConnection) -> Result<(), StoreError>;
    /// Reads an organisation's connection; `NotFound` when it has none.
    async fn get_connection(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<VcsConnection, StoreError>;
    /// Deletes an organisation's connection; `NotFound` when it has none.
    async fn delete_connection(&self, org: &str, provider: VcsProvider) -> Result<(), StoreError>;
    /// Records a webhook delivery until `expires_at`: true when it is new, false when it was
    /// seen before (and has not expired), so a redelivery is handled once.
    async fn claim_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Forgets a claimed delivery (idempotent): its work could not be queued, so GitHub's
    /// redelivery must be handled.
    async fn forget_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
    ) -> Result<(), StoreError>;
    /// Indexes `env` as bound to `repository` (idempotent). Written before the binding
    /// itself, so a bound environment is always found; a stale entry is harmless, as every
    /// reader checks the environment's binding.
    async fn index_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError>;
    /// Removes `env` from `repository`'s index (idempotent).
    async fn unindex_binding(
        &self,
        provider: VcsProvider,
        repository: &str,
        env: &EnvPath,
    ) -> Result<(), StoreError>;
    /// The environments indexed as bound to `repository` (repository names compare without
    /// case, as GitHub's do), paged to the end, at most [`MAX_BOUND_ENVIRONMENTS`].
    async fn bound_environments(
        &self,
        provider: VcsProvider,
        repository: &str,
    ) -> Result<Vec<EnvPath>, StoreError>;
    /// The organisations connected to `provider`, paged to the end (the reconcile's list).
    async fn connected_organisations(
        &self,
        provider: VcsProvider,
    ) -> Result<Vec<String>, StoreError>;
    /// The environments of `org` indexed as bound to any repository of `provider`, paged
    /// to the end, at most [`MAX_BOUND_ENVIRONMENTS`] (a stale entry is possible, as in
    /// [`VcsStore::bound_environments`]).
    async fn bound_environments_of(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Vec<EnvPath>, StoreError>;
    /// What the last reconcile of `repository`'s pull requests into `base` saw open (empty
    /// when none ran).
    async fn get_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
    ) -> Result<OpenPulls, StoreError>;
    /// Remembers what a reconcile of `repository`'s pull requests into `base` saw open.
    async fn put_open_pulls(
        &self,
        org: &str,
        provider: VcsProvider,
        repository: &str,
        base: &str,
        open: &OpenPulls,
    ) -> Result<(), StoreError>;
    /// Reads a pull request's record; `None` when Sortie has not seen it.
    async fn get_pull_request(
        &self,
        provider: VcsProvider,
        repository: &str,
        number: u64,
    ) -> Result<Option<Versioned<PullRequestRecord>>, StoreError>;
    /// Writes a pull request's record if it is still at `expected` (`None`: new), returning
    /// its new version; `VersionMismatch` (or `AlreadyExists`) when another writer was first.
    async fn put_pull_request(
        &self,
        record: &PullRequestRecord,
        expected: Option<u64>,
    ) -> Result<u64, StoreError>;
}

/// A repository's key part: names compare without case on GitHub.
pub(crate) fn repository_key(repository: &str) -> String {
    repository.to_ascii_lowercase()
}

/// A pull request's id in errors: `owner/name#7`.
pub(crate) fn pull_id(repository: &str, number: u64) -> String {
    format!("{repository}#{number}")
}
