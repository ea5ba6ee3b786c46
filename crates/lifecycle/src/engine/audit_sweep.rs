//! The sweep's audit step (issue 44): entries written more than
//! [`SweepSettings::audit_settle`] ago (a minute by default) and
//! not yet sealed are sealed into their organisation's chain, oldest first, at most
//! [`AUDIT_SEALS`] a pass. Each organisation on its own: one that fails is counted and the
//! others go on; what is left is sealed by the next pass. Then each organisation whose
//! sealed entries were last exported [`SweepSettings::audit_export_every`] ago or more has
//! them exported to the store's archive (an S3 bucket under Object Lock), at most
//! [`AUDIT_EXPORTS`] organisations a pass.

use std::collections::BTreeMap;

use super::*;
use sortie_store::audit::MAX_SEAL_BATCH;

/// The most entries one pass seals.
pub const AUDIT_SEALS: u32 = 500;

/// The most organisations one pass exports.
pub const AUDIT_EXPORTS: u32 = 25;

impl Engine {
    /// Seals the settled entries ([`SweepSettings::audit_settle`]) of every organisation, counting them in
    /// [`SweepReport::audit_sealed`] and each failure in `errors`.
    pub(super) async fn sweep_audit(&self, now: DateTime<Utc>, report: &mut SweepReport) {
        let before = sortie_core::audit::id_bound(now - self.settings.audit_settle);
        let unsealed = match self.jobs.store.unsealed_audit(&before, AUDIT_SEALS).await {
            Ok(u) => u,
            Err(e) => {
                warn!(error = %e, "unsealed audit entries could not be listed; next pass tries again");
                report.errors += 1;
                return;
            }
        };
        let mut by_org: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (org, id) in unsealed {
            by_org.entry(org).or_default().push(id);
        }
        for (org, mut ids) in by_org {
            ids.sort();
            for batch in ids.chunks(MAX_SEAL_BATCH) {
                match self.jobs.store.seal_audit(&org, batch).await {
                    Ok(n) => report.audit_sealed += n,
                    Err(e) => {
                        warn!(org, error = %e, "audit entries not sealed; next pass tries again");
                        report.errors += 1;
                        break;
                    }
                }
            }
        }
        match self
            .jobs
            .store
            .export_audit(now, self.settings.audit_export_every, AUDIT_EXPORTS)
            .await
        {
            Ok(done) => {
                report.audit_exported += done.entries;
                report.errors += done.errors;
            }
            Err(e) => {
                warn!(error = %e, "audit exports could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
    }
}
