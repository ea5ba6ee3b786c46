//! What the API reads through the services, apart from the use cases that write: an
//! environment or a job by name, the lists and counts behind the views and the
//! did-you-mean of a 404, an organisation's audit trail. Each is one store read (or a
//! bounded few), so a route module never holds the store itself.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sortie_core::audit::Seal;
use sortie_core::{EnvPath, GroupPath, JobId};
use sortie_store::{
    AuditPage, AuditRange, EnvironmentRecord, EnvironmentsUnder, JobPage, JobRecord, Listed, Store,
    StoreError, Versioned,
};

use crate::{Environments, JobService, Memberships};

impl Environments {
    /// Environment `path`.
    pub async fn get(&self, path: &EnvPath) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        self.store.get_environment(path).await
    }

    /// The environments of exactly `group`.
    pub async fn list(
        &self,
        group: &GroupPath,
    ) -> Result<Vec<Versioned<EnvironmentRecord>>, StoreError> {
        self.store.list_environments(group).await
    }

    /// The environments of `group` and every group below it, by path, at most `limit`
    /// (saying when there were more).
    pub async fn list_under(
        &self,
        group: &GroupPath,
        limit: usize,
    ) -> Result<EnvironmentsUnder, StoreError> {
        self.store.list_environments_under(group, limit).await
    }

    /// How many environments `group` and the groups below it hold.
    pub async fn count_under(&self, group: &GroupPath) -> Result<u64, StoreError> {
        self.store.count_environments_under(group).await
    }

    /// The trigger graph of organisation `org`: each environment and its upstreams.
    pub async fn trigger_graph(
        &self,
        org: &str,
    ) -> Result<std::collections::BTreeMap<EnvPath, Vec<EnvPath>>, StoreError> {
        crate::triggers::graph(self.store.as_ref(), org).await
    }
}

impl JobService {
    /// Job `id`.
    pub async fn get(&self, id: &JobId) -> Result<JobRecord, StoreError> {
        self.store.get_job(id).await
    }

    /// A page of environment `env`'s jobs, newest first, after `cursor`.
    pub async fn list(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError> {
        self.store.list_jobs(env, limit, cursor).await
    }

    /// The launched jobs (`dispatching`, `running`), longest in that state first, at most
    /// `limit`.
    pub async fn in_flight(&self, limit: u32) -> Result<Listed<JobRecord>, StoreError> {
        self.store.active_jobs(limit).await
    }

    /// The jobs awaiting approval whose deadline is before `before`, earliest first, at
    /// most `limit`.
    pub async fn awaiting_approval(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError> {
        self.store.approvals_due(before, limit).await
    }
}

impl Memberships {
    /// The organisations in which `subject` (of `issuer`) holds a membership.
    pub async fn organisations_of(
        &self,
        subject: &str,
        issuer: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        self.store.organisations_of(subject, issuer).await
    }
}

/// An organisation's audit trail, read: its entries page by page and its chain's head.
/// Entries are written by the store with each change, and sealed by the sweep.
#[derive(Clone)]
pub struct AuditTrail {
    /// The repository.
    pub store: Arc<dyn Store>,
}

impl AuditTrail {
    /// The trail over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// A page of `org`'s entries, sealed or not.
    pub async fn page(&self, org: &str, range: &AuditRange) -> Result<AuditPage, StoreError> {
        self.store.audit_page(org, range).await
    }

    /// `org`'s last seal, when it has one.
    pub async fn head(&self, org: &str) -> Result<Option<Seal>, StoreError> {
        self.store.audit_head(org).await
    }
}
