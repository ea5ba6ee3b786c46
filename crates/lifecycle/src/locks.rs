//! Environment locks and group freezes: taking and releasing them, and what holds an
//! environment against new jobs ([`JobService::lock_holding`], read by every submit).
//!
//! A lock stops new jobs only: a job already holding the environment finishes, one
//! awaiting approval may still be approved, and the queue behind it drains. Drift checks
//! and expiry submit through [`JobService::submit_for`], so they are refused alike (a
//! drift check records the refusal as its skip; an expiry waits for the unlock).

use chrono::{DateTime, Utc};
use sortie_core::lock::{holding, EnvLock, Held};
use sortie_core::{EnvPath, GroupPath, ValidationError};
use sortie_store::{LockOutcome, StoreError};

use crate::JobService;

/// Why a lock or a freeze was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockRefusal {
    /// The reason is missing or not plain text (the problem names `reason`).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The store failed (or the environment is missing).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobService {
    /// What holds `path` against new jobs: its own lock, else the outermost freeze of its
    /// group or a group above it. One read of the environment and one batch read of its
    /// groups' settings. `NotFound` when the environment is missing.
    pub async fn lock_holding(&self, path: &EnvPath) -> Result<Option<Held>, StoreError> {
        let env = self.store.get_environment(path).await?;
        let freezes: Vec<(GroupPath, EnvLock)> = self
            .store
            .group_settings_over(path.group())
            .await?
            .into_iter()
            .filter_map(|(g, s)| Some((g, s.freeze?)))
            .collect();
        Ok(holding(path, env.item.lock.as_ref(), &freezes))
    }

    /// Locks environment `path` for `by`, giving `reason`.
    pub async fn lock_environment(
        &self,
        path: &EnvPath,
        by: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<LockOutcome, LockRefusal> {
        let lock = EnvLock::new(by, at, reason)?;
        let outcome = self.store.lock_environment(path, &lock).await?;
        if outcome == LockOutcome::Taken {
            tracing::info!(environment = %path, by, reason = %lock.reason, "environment locked");
        }
        Ok(outcome)
    }

    /// Unlocks environment `path`; answers the lock removed (`None`: it was not locked).
    pub async fn unlock_environment(
        &self,
        path: &EnvPath,
        by: &str,
    ) -> Result<Option<EnvLock>, StoreError> {
        let removed = self.store.unlock_environment(path).await?;
        if let Some(lock) = &removed {
            tracing::info!(environment = %path, by, locked_by = %lock.by, "environment unlocked");
        }
        Ok(removed)
    }

    /// Freezes group `group` (every environment below it refuses new jobs) for `by`.
    pub async fn freeze_group(
        &self,
        group: &GroupPath,
        by: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<LockOutcome, LockRefusal> {
        let lock = EnvLock::new(by, at, reason)?;
        let outcome = self.store.freeze_group(group, &lock).await?;
        if outcome == LockOutcome::Taken {
            tracing::info!(group = %group, by, reason = %lock.reason, "group frozen");
        }
        Ok(outcome)
    }

    /// Ends group `group`'s freeze; answers the freeze removed (`None`: it was not frozen).
    pub async fn unfreeze_group(
        &self,
        group: &GroupPath,
        by: &str,
    ) -> Result<Option<EnvLock>, StoreError> {
        let removed = self.store.unfreeze_group(group).await?;
        if let Some(lock) = &removed {
            tracing::info!(group = %group, by, frozen_by = %lock.by, "group unfrozen");
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use sortie_core::lock::LockScope;
    use sortie_core::sensitive::SensitiveValues;
    use sortie_core::{JobRequest, JobState};
    use sortie_store::{EnvironmentStore, JobStore};

    use super::*;
    use crate::testing::World;
    use crate::{JobOrder, SubmitError};

    fn order(operation: &str) -> JobOrder {
        let request: JobRequest = serde_json::from_value(serde_json::json!({
            "operation": operation,
            "source": {"type": "inline", "files": {"main.tf": ""}},
        }))
        .unwrap();
        JobOrder::submit(
            request,
            SensitiveValues::new(BTreeMap::new()),
            "alice",
            None,
        )
    }

    #[tokio::test]
    async fn a_locked_environment_refuses_new_jobs_naming_who_when_and_why_and_the_running_job_goes_on(
    ) {
        let w = World::new().await;
        let env = w.environment("acme/payments/prod").await;
        let running = w.jobs.submit_for(&env, order("apply")).await.unwrap();
        let at = Utc::now();
        let taken = w
            .jobs
            .lock_environment(&env.path, "bob", "incident 42", at)
            .await
            .unwrap();
        assert_eq!(taken, LockOutcome::Taken);
        let refused = w.jobs.submit_for(&env, order("plan")).await.unwrap_err();
        let SubmitError::Locked { held, .. } = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(held.scope, LockScope::Environment);
        let text = refused.to_string();
        assert!(
            text.contains("bob") && text.contains("incident 42"),
            "{text}"
        );
        assert!(
            text.contains(&at.format("%Y-%m-%dT%H:%M:%S").to_string()),
            "{text}"
        );
        // The job that held the environment before the lock is untouched.
        let job = w.store.get_job(&running.job.id).await.unwrap().job;
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(
            w.store
                .get_environment(&env.path)
                .await
                .unwrap()
                .item
                .active_job,
            Some(running.job.id)
        );
        // A blank reason is refused, naming the field.
        let Err(LockRefusal::Invalid(e)) = w.jobs.lock_environment(&env.path, "bob", " ", at).await
        else {
            panic!("a blank reason is refused");
        };
        assert_eq!(e.problems[0].path, "reason");
        assert!(w
            .jobs
            .unlock_environment(&env.path, "bob")
            .await
            .unwrap()
            .is_some());
        w.jobs.submit_for(&env, order("plan")).await.unwrap();
    }

    #[tokio::test]
    async fn a_group_freeze_refuses_jobs_on_every_environment_below_it_only() {
        let w = World::new().await;
        let below = w.environment("acme/payments/eu/prod").await;
        let beside = w.environment("acme/platform/prod").await;
        let group = GroupPath::parse("acme/payments").unwrap();
        w.jobs
            .freeze_group(&group, "carol", "release freeze", Utc::now())
            .await
            .unwrap();
        match w.jobs.submit_for(&below, order("apply")).await {
            Err(e @ SubmitError::Locked { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains("group `acme/payments`") && text.contains("release freeze"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        w.jobs.submit_for(&beside, order("apply")).await.unwrap();
        assert!(w
            .jobs
            .unfreeze_group(&group, "dave")
            .await
            .unwrap()
            .is_some());
        w.jobs.submit_for(&below, order("apply")).await.unwrap();
    }
}
