//! The reconcile: every period, each connected organisation's bound repositories are
//! listed on the host (with the last list's `ETag`, so an unchanged list is free) and
//! compared with Sortie's records (`sortie_core::vcs::reconcile::repairs`). A pull request
//! whose webhook was lost is planned, one whose close was lost is closed (and its merge
//! applied), and every open one's report is written again where it changed. Each
//! repository and each pull request is handled on its own: one failure never stops the
//! rest.

use std::collections::{BTreeMap, BTreeSet};

use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::reconcile::{remembered, repairs, OpenPulls, Repair, MAX_REMEMBERED};
use sortie_core::vcs::work::PullWork;
use sortie_core::vcs::VcsProvider;
use sortie_store::{PullQueue, StoreError};
use tracing::{info, warn};

use super::{CodeHost, PullError, PullRequests};

/// At most this many pull requests are planned or closed by one reconcile of an
/// organisation (each costs a few host calls); the rest wait for the next period, whose
/// list is read again in full (the `ETag` is kept only after a complete pass).
pub const MAX_REPAIRS: usize = 100;

/// What one reconcile of an organisation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Repositories (and base branches) listed.
    pub repositories: usize,
    /// Repositories whose list had not changed (the host answered 304).
    pub unchanged: usize,
    /// Pull requests planned: their opening or new head had not reached Sortie.
    pub planned: usize,
    /// Pull requests handled as closed: their close had not reached Sortie.
    pub closed: usize,
    /// Pull requests whose report was written again (where it changed).
    pub reported: usize,
    /// Pull requests left for the next period (over [`MAX_REPAIRS`]).
    pub deferred: usize,
    /// Repositories or pull requests that failed (logged; retried by the next period).
    pub failed: usize,
}

impl PullRequests {
    /// Queues one reconcile per connected organisation (the schedule's work), each in its
    /// own message so that one organisation never delays another. Every organisation is
    /// tried; the first failure is returned after the rest were queued.
    pub async fn queue_reconciles(&self, queue: &dyn PullQueue) -> Result<usize, PullError> {
        let mut connected = Vec::new();
        for provider in [VcsProvider::Github, VcsProvider::Gitlab] {
            for org in self.store().connected_organisations(provider).await? {
                connected.push((org, provider));
            }
        }
        let mut first = None;
        let mut queued = 0;
        for (org, provider) in connected {
            match queue
                .send_work(&PullWork::Reconcile {
                    org: org.clone(),
                    provider,
                })
                .await
            {
                Ok(()) => queued += 1,
                Err(e) => {
                    warn!(org, error = %e, "the organisation's reconcile could not be queued");
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e.into()),
            None => Ok(queued),
        }
    }

    /// Reconciles `org`'s pull requests on `provider` now (what [`PullWork::Reconcile`]
    /// does).
    pub async fn reconcile(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Reconciled, PullError> {
        let Some((connection, host)) = self.host(org, provider).await? else {
            return Ok(Reconciled::default());
        };
        self.reconcile_with(&connection, host.as_ref()).await
    }

    pub(super) async fn reconcile_with(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
    ) -> Result<Reconciled, PullError> {
        let org = connection.org.as_str();
        // Each bound repository and base once (repository names without case).
        let mut targets: BTreeMap<(String, String), String> = BTreeMap::new();
        for path in self
            .store()
            .bound_environments_of(org, connection.provider)
            .await?
        {
            let env = match self.store().get_environment(&path).await {
                Ok(e) => e.item.environment,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if let Some(b) = env
                .settings
                .vcs
                .filter(|b| b.provider == connection.provider)
            {
                targets
                    .entry((b.repository.to_ascii_lowercase(), b.branch.clone()))
                    .or_insert(b.repository);
            }
        }
        let mut done = Reconciled::default();
        let mut budget = MAX_REPAIRS;
        let mut first = None;
        for ((_, base), repository) in targets {
            done.repositories += 1;
            if let Err(e) = self
                .reconcile_repository(connection, host, &repository, &base, &mut budget, &mut done)
                .await
            {
                warn!(org, repository, base, error = %e, "the repository could not be reconciled");
                done.failed += 1;
                if e.is_retryable() {
                    first.get_or_insert(e);
                }
            }
        }
        info!(org, reconciled = ?done, "pull requests reconciled");
        match first {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// One repository and base: list, repair, and remember what was open when every repair
    /// succeeded. A failed pull request is logged and counted, and the others go on; the
    /// first retryable failure is returned at the end.
    async fn reconcile_repository(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
        repository: &str,
        base: &str,
        budget: &mut usize,
        done: &mut Reconciled,
    ) -> Result<(), PullError> {
        let org = connection.org.as_str();
        let store = self.store();
        let last = store
            .get_open_pulls(org, connection.provider, repository, base)
            .await?;
        let listed = host
            .open_pulls(repository, base, last.etag.as_deref())
            .await?;
        let mut recorded = BTreeMap::new();
        if let Some((pulls, _)) = &listed {
            for p in pulls {
                if let Some(found) = store
                    .get_pull_request(connection.provider, repository, p.number)
                    .await?
                {
                    if found.item.open {
                        recorded.insert(p.number, found.item.head_sha);
                    }
                }
            }
        } else {
            done.unchanged += 1;
        }
        let list = listed.as_ref().map(|(pulls, _)| pulls.as_slice());
        let mut complete = true;
        let mut first = None;
        for repair in repairs(&last, list, &recorded) {
            let costly = !matches!(repair, Repair::Report(_));
            if costly {
                if *budget == 0 {
                    done.deferred += 1;
                    complete = false;
                    continue;
                }
                *budget -= 1;
            }
            let (number, outcome) = match repair {
                Repair::Plan(n) => {
                    info!(
                        org,
                        repository,
                        number = n,
                        "reconcile: planning a pull request whose change had not reached Sortie"
                    );
                    (
                        n,
                        self.plan_head(connection, host, repository, n, None).await,
                    )
                }
                Repair::Closed(n) => {
                    info!(
                        org,
                        repository,
                        number = n,
                        "reconcile: a pull request closed without Sortie hearing of it"
                    );
                    (n, self.closed(connection, host, repository, n).await)
                }
                Repair::Report(n) => (n, self.report(host, repository, n).await),
            };
            match outcome {
                Ok(()) => match repair {
                    Repair::Plan(_) => done.planned += 1,
                    Repair::Closed(_) => done.closed += 1,
                    Repair::Report(_) => done.reported += 1,
                },
                Err(e) => {
                    warn!(org, repository, number, error = %e, "reconcile: the pull request could not be repaired");
                    done.failed += 1;
                    complete = false;
                    if e.is_retryable() {
                        first.get_or_insert(e);
                    }
                }
            }
        }
        // A complete pass remembers the list and its ETag; an incomplete one remembers
        // every number open then or now without an ETag, so the next pass lists again and
        // still finds the ones closed meanwhile.
        let remember = match listed {
            Some((pulls, etag)) if complete => Some(remembered(&pulls, etag)),
            Some((pulls, _)) => {
                let numbers: BTreeSet<u64> = pulls
                    .iter()
                    .map(|p| p.number)
                    .chain(last.numbers.iter().copied())
                    .collect();
                Some(OpenPulls {
                    etag: None,
                    numbers: numbers.into_iter().take(MAX_REMEMBERED).collect(),
                })
            }
            None => None,
        };
        if let Some(open) = remember {
            store
                .put_open_pulls(org, connection.provider, repository, base, &open)
                .await?;
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
