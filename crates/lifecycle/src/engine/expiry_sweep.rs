//! The sweep's expiry step: every due entry of the expiry due list, paged to the end (at
//! most [`MAX_EXPIRY_PAGES`] pages a pass), one environment at a time (a failure is
//! counted and the others go on). For each: its due reminders go out, each once (recorded
//! on the entry by a conditional write before it is published); once it has expired, a
//! `destroy` requested by `sortie:expiry` is submitted only when the environment is idle
//! and unlocked (else it waits for the next pass, and says so once); a destroy that cannot
//! be submitted, or fails, is retried with backoff and published, never dropped.

use serde_json::json;
use sortie_core::expiry::{self, Reminder, EXPIRY_PRINCIPAL};
use sortie_core::Operation;
use sortie_store::{ExpiryEntry, Versioned};

use super::*;
use crate::{SweepReport, ENVIRONMENT_EXPIRING, ENVIRONMENT_EXPIRY_FAILED};

/// The most due-list pages one pass reads (of [`SweepSettings::batch`] entries each).
pub const MAX_EXPIRY_PAGES: usize = 10;

/// How soon a destroy in flight is looked at again.
const DESTROY_RECHECK_SECONDS: i64 = 15;

fn resource(path: &sortie_core::EnvPath) -> String {
    format!("sortie:environment/{path}")
}

impl Engine {
    /// The expiry step of a pass (see the module).
    pub(super) async fn sweep_expiry(&self, now: DateTime<Utc>, report: &mut SweepReport) {
        let mut after: Option<String> = None;
        for _ in 0..MAX_EXPIRY_PAGES {
            let page = match self
                .jobs
                .store
                .due_expiries(now, self.settings.batch, after.as_deref())
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    warn!(error = %e, "the expiry due list could not be read; next pass tries again");
                    report.errors += 1;
                    return;
                }
            };
            for entry in page.entries {
                let path = entry.item.path.clone();
                let span = tracing::info_span!("expiry", environment = %path);
                if let Err(e) = self.expire_one(entry, now, report).instrument(span).await {
                    warn!(environment = %path, error = %e, "expiry step failed; next pass tries again");
                    report.errors += 1;
                }
            }
            after = page.next;
            if after.is_none() {
                return;
            }
        }
    }

    /// One due entry (see the module).
    async fn expire_one(
        &self,
        held: Versioned<ExpiryEntry>,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        let store = self.jobs.store.as_ref();
        let path = held.item.path.clone();
        // The entry is a pointer: the end is computed again from the environment now.
        let record = match store.get_environment(&path).await {
            Ok(r) => r.item,
            Err(StoreError::NotFound { .. }) => {
                store.remove_expiry(&path).await?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        if record.destroyed.is_some() {
            store.remove_expiry(&path).await?;
            return Ok(());
        }
        let limits = crate::expiry::limits_for(store, &path).await?;
        let Some(end) = crate::expiry::end_of(&record, &limits) else {
            store.remove_expiry(&path).await?;
            return Ok(());
        };
        if end != held.item.expires_at {
            // Moved since the entry was written: it starts afresh at the new end.
            store.set_expiry(&path, end).await?;
            return Ok(());
        }
        let mut version = held.version;
        let mut entry = held.item;
        let due = expiry::reminders_due(end, now, &entry.sent);
        let expired = expiry::is_expired(end, now);
        if !due.is_empty() || (!expired && entry.due != expiry::next_due(end, &entry.sent)) {
            let mut next = entry.clone();
            next.sent.extend(due.iter().copied());
            next.due = expiry::next_due(end, &next.sent);
            // Claimed first: a second sweep (or a retry) finds the version moved and sends
            // nothing.
            if !store.update_expiry(&next, version).await? {
                return Ok(());
            }
            version += 1;
            entry = next;
            for reminder in due {
                self.remind(&mut entry, &mut version, reminder, end, now, report)
                    .await?;
            }
        }
        if !expired {
            return Ok(());
        }
        self.expire(entry, version, record, end, now, report).await
    }

    /// Publishes one reminder recorded as sent; when the bus refuses it, the record is
    /// taken back (conditionally) so that the next pass sends it again.
    async fn remind(
        &self,
        entry: &mut ExpiryEntry,
        version: &mut u64,
        reminder: Reminder,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        let left = (end - now).num_seconds().max(0).unsigned_abs();
        let detail = json!({
            "environment": entry.path.to_string(),
            "org": entry.path.org(),
            "expires_at": end,
            "left": expiry::format_duration(left),
            "lead": reminder.as_str(),
        });
        match self
            .jobs
            .bus
            .publish(ENVIRONMENT_EXPIRING, &resource(&entry.path), detail)
            .await
        {
            Ok(()) => {
                info!(lead = reminder.as_str(), %end, "expiry reminder sent");
                report.expiry_reminders += 1;
                Ok(())
            }
            Err(e) => {
                warn!(lead = reminder.as_str(), error = %e, "expiry reminder not published; next pass sends it again");
                let mut back = entry.clone();
                back.sent.retain(|r| *r != reminder);
                back.due = expiry::next_due(end, &back.sent);
                if self.jobs.store.update_expiry(&back, *version).await? {
                    *version += 1;
                    *entry = back;
                }
                report.errors += 1;
                Ok(())
            }
        }
    }

    /// An expired environment: its destroy in flight looked at, else a new one submitted
    /// when idle and unlocked.
    async fn expire(
        &self,
        mut entry: ExpiryEntry,
        version: u64,
        record: sortie_store::EnvironmentRecord,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        let store = self.jobs.store.as_ref();
        let path = entry.path.clone();
        if let Some(job_id) = entry.destroy_job.clone() {
            let job = store.get_job(&JobId::from(job_id.clone())).await?;
            match job.job.state {
                JobState::Succeeded => {
                    // Its end was missed (the end marks it, best effort): marked here.
                    crate::expiry::mark_expired(store, &path, Some(job_id), end).await?;
                }
                s if s.is_terminal() => {
                    let why = format!(
                        "the expiry destroy {job_id} ended {}: {}",
                        s.as_str(),
                        job.job.reason()
                    );
                    entry.destroy_job = None;
                    self.expiry_failed(entry, version, why, now, report).await?;
                }
                _ => {} // Still running (or awaiting approval): looked at next pass.
            }
            return Ok(());
        }
        // Busy or locked: the destroy waits for the next pass.
        let wait = if let Some(active) = &record.active_job {
            Some(format!(
                "the environment is busy with job {active}; its expiry destroy waits for the next sweep"
            ))
        } else {
            self.jobs.lock_holding(&path).await?.map(|held| {
                format!(
                    "{}; its expiry destroy waits until it is unlocked",
                    held.refusal(&path)
                )
            })
        };
        if let Some(reason) = wait {
            return self.expiry_waits(entry, version, reason, end, report).await;
        }
        let Some(last) = record.last_apply.as_ref() else {
            // Nothing applied since it was created or last destroyed: nothing to destroy.
            crate::expiry::mark_expired(store, &path, None, end).await?;
            return Ok(());
        };
        let submitted = match store.get_job(&last.job_id).await {
            Ok(last_job) => {
                let mut order = crate::JobOrder::again(
                    &last_job.job.request,
                    Operation::Destroy,
                    EXPIRY_PRINCIPAL,
                    now,
                );
                order.write = crate::WriteMode::IfIdle;
                crate::audit::system_scope(
                    EXPIRY_PRINCIPAL,
                    "expiry_destroy",
                    format!("/v1/environments/{path}"),
                    path.group().org(),
                )
                .run(Box::pin(self.jobs.submit_for(&record.environment, order)))
                .await
            }
            Err(e) => Err(crate::SubmitError::Store(e)),
        };
        match submitted {
            Ok(s) => {
                info!(job_id = %s.job.id, "expiry destroy submitted");
                report.expiry_destroys += 1;
                entry.destroy_job = Some(s.job.id.to_string());
                entry.last_problem = None;
                entry.due = now + chrono::Duration::seconds(DESTROY_RECHECK_SECONDS);
                if !store.update_expiry(&entry, version).await? {
                    warn!(job_id = %s.job.id, "the expiry entry moved while its destroy was submitted");
                }
                Ok(())
            }
            Err(crate::SubmitError::Busy(_)) => {
                let reason =
                    "the environment became busy; its expiry destroy waits for the next sweep"
                        .to_string();
                self.expiry_waits(entry, version, reason, end, report).await
            }
            Err(e @ crate::SubmitError::Locked { .. }) => {
                let reason = format!("{e}; its expiry destroy waits until it is unlocked");
                self.expiry_waits(entry, version, reason, end, report).await
            }
            Err(e) => {
                let why = format!("the expiry destroy could not be submitted: {e}");
                self.expiry_failed(entry, version, why, now, report).await
            }
        }
    }

    /// A destroy that waits: logged each pass, recorded and published once per reason.
    async fn expiry_waits(
        &self,
        mut entry: ExpiryEntry,
        version: u64,
        reason: String,
        end: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        info!(%reason, "expiry destroy waits");
        report.expiry_waiting += 1;
        if entry.last_problem.as_deref() == Some(reason.as_str()) {
            return Ok(());
        }
        entry.last_problem = Some(reason.clone());
        if self.jobs.store.update_expiry(&entry, version).await? {
            let detail = json!({
                "environment": entry.path.to_string(),
                "org": entry.path.org(),
                "expires_at": end,
                "reason": reason,
            });
            if let Err(e) = self
                .jobs
                .bus
                .publish(
                    crate::ENVIRONMENT_EXPIRY_WAITING,
                    &resource(&entry.path),
                    detail,
                )
                .await
            {
                warn!(error = %e, "expiry wait not published");
            }
        }
        Ok(())
    }

    /// A failed expiry: counted on the entry, tried again after the backoff, published.
    async fn expiry_failed(
        &self,
        mut entry: ExpiryEntry,
        version: u64,
        why: String,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        entry.failures = entry.failures.saturating_add(1);
        entry.last_problem = Some(why.clone());
        let retry_at = now + expiry::retry_after(&entry.path.to_string(), entry.failures);
        entry.due = retry_at;
        warn!(failures = entry.failures, %retry_at, reason = %why, "expiry failed; retried with backoff");
        report.expiry_failures += 1;
        if !self.jobs.store.update_expiry(&entry, version).await? {
            return Ok(());
        }
        let detail = json!({
            "environment": entry.path.to_string(),
            "org": entry.path.org(),
            "expires_at": entry.expires_at,
            "failures": entry.failures,
            "reason": why,
            "retry_at": retry_at,
        });
        if let Err(e) = self
            .jobs
            .bus
            .publish(ENVIRONMENT_EXPIRY_FAILED, &resource(&entry.path), detail)
            .await
        {
            warn!(error = %e, "expiry failure not published");
        }
        Ok(())
    }
}
