//! What a sweep pass is told ([`SweepSettings`]), where the next one resumes
//! ([`SweepResume`]) and what it did ([`SweepReport`]).

use chrono::Duration;

/// Timing of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSettings {
    /// A lock holder still `queued` this long after it was queued is re-sent.
    pub resend_after: Duration,
    /// A job `dispatching` this long without a recorded task is looked up by `startedBy`.
    pub dispatch_lease: Duration,
    /// A `running` job not heard from this long is looked up with DescribeTasks.
    pub silence: Duration,
    /// At most this many jobs are looked at per pass, per kind; for the active jobs, the
    /// size of each page, read to the end of the list.
    pub batch: u32,
    /// The time one pass spends on the active jobs. Beyond it the pass looks at no more of
    /// them: it counts what it left ([`SweepReport::active_left`]), and the next pass of the
    /// same process starts where it stopped ([`SweepResume`]).
    pub active_budget: Duration,
    /// A job claimed by an agent whose heartbeat stops this long is ended ("agent lost").
    pub agent_silence: Duration,
    /// A stop (cancel, timeout) delivered to an agent and not confirmed within this ends
    /// the job as the stop says, without the agent.
    pub agent_stop_grace: Duration,
    /// How old an audit entry must be before it is sealed into its chain: a change's
    /// transaction ends in seconds, so by then every entry with an earlier id is written.
    pub audit_settle: Duration,
    /// How often each organisation's sealed audit entries are exported to the archive
    /// (when the store has one).
    pub audit_export_every: Duration,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            resend_after: Duration::seconds(60),
            dispatch_lease: Duration::seconds(120),
            silence: Duration::minutes(10),
            batch: 100,
            // The sweeper ticks every minute and may run for 120 s.
            active_budget: Duration::seconds(40),
            agent_silence: Duration::seconds(
                sortie_core::agent_pool::DEFAULT_AGENT_SILENCE_SECONDS,
            ),
            agent_stop_grace: Duration::seconds(
                sortie_core::agent_pool::DEFAULT_STOP_GRACE_SECONDS,
            ),
            audit_settle: Duration::seconds(60),
            audit_export_every: Duration::minutes(15),
        }
    }
}

/// What one sweep pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Lost sends re-sent.
    pub resent: usize,
    /// Orphaned tasks adopted.
    pub adopted: usize,
    /// Dispatches with no task after the lease, requeued.
    pub requeued: usize,
    /// Tasks stopped for exceeding their timeout.
    pub timed_out: usize,
    /// Jobs finished from DescribeTasks because their event was lost.
    pub resolved: usize,
    /// Jobs whose sweep failed, and lists that could not be read (logged; tried again next
    /// pass; the rest of the pass goes on).
    pub errors: usize,
    /// Environments found still locked by an ended job (a crash between its end and its
    /// release), released and handed to their next job.
    pub released: usize,
    /// Job items that could not be decoded: failed with a clear reason, their task stopped
    /// when it could be found, and their environment released.
    pub unreadable: usize,
    /// Reviewed jobs discarded because nobody decided before their approval timeout.
    pub approvals_timed_out: usize,
    /// Drift checks submitted by their environment's schedule.
    pub drift_checks: usize,
    /// Drift checks the schedule fired but skipped (the environment busy, or no apply yet).
    pub drift_skipped: usize,
    /// Active jobs the pass did not look at because its time budget
    /// ([`SweepSettings::active_budget`]) was spent; the next pass starts with them.
    pub active_left: usize,
    /// `sortie.environment.expiring` reminders sent.
    pub expiry_reminders: usize,
    /// Job secrets deleted because their job had ended (`secret_sweep.rs`).
    pub secrets_deleted: usize,
    /// `sortie:expiry` destroys submitted.
    pub expiry_destroys: usize,
    /// Expired environments whose destroy waits (busy or locked).
    pub expiry_waiting: usize,
    /// Expiry destroys that could not be submitted or failed (retried with backoff).
    pub expiry_failures: usize,
    /// Audit entries sealed into their organisation's chain.
    pub audit_sealed: usize,
    /// Audit entries exported to the archive.
    pub audit_exported: usize,
}

impl SweepReport {
    /// What the pass did, by name, leaving out what it did not do (a count of 0).
    pub fn did(&self) -> Vec<(&'static str, usize)> {
        [
            ("resent", self.resent),
            ("adopted", self.adopted),
            ("requeued", self.requeued),
            ("timed_out", self.timed_out),
            ("resolved", self.resolved),
            ("errors", self.errors),
            ("released", self.released),
            ("unreadable", self.unreadable),
            ("approvals_timed_out", self.approvals_timed_out),
            ("drift_checks", self.drift_checks),
            ("drift_skipped", self.drift_skipped),
            ("active_left", self.active_left),
            ("expiry_reminders", self.expiry_reminders),
            ("secrets_deleted", self.secrets_deleted),
            ("expiry_destroys", self.expiry_destroys),
            ("expiry_waiting", self.expiry_waiting),
            ("expiry_failures", self.expiry_failures),
            ("audit_sealed", self.audit_sealed),
            ("audit_exported", self.audit_exported),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// `resent 1, requeued 2`: what the pass did, for a log line; `nothing` for an idle pass.
impl std::fmt::Display for SweepReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let did = self.did();
        if did.is_empty() {
            return f.write_str("nothing");
        }
        for (i, (name, n)) in did.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name} {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod report_tests {
    use super::SweepReport;

    #[test]
    fn a_report_says_what_the_pass_did_and_an_idle_one_says_nothing() {
        assert_eq!(SweepReport::default().to_string(), "nothing");
        assert!(SweepReport::default().did().is_empty());
        let r = SweepReport {
            resent: 1,
            requeued: 2,
            expiry_failures: 3,
            ..Default::default()
        };
        assert_eq!(r.to_string(), "resent 1, requeued 2, expiry_failures 3");
    }
}

/// Where a sweep pass that spent its budget stopped in the active jobs: the next pass given
/// the same `SweepResume` starts there and goes to the end of the list; the one after starts
/// again from the job longest active. Kept in memory by the sweeper's process (a new
/// process starts from the beginning).
#[derive(Debug, Default)]
pub struct SweepResume(std::sync::Mutex<Option<String>>);

impl SweepResume {
    /// Takes the cursor to start from (`None`: from the beginning), leaving none.
    pub(super) fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Records where the next pass starts.
    pub(super) fn set(&self, cursor: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = cursor;
    }

    /// True when the next pass resumes an interrupted one.
    pub fn is_pending(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}
