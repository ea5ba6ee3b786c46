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

/// `locked`, `unlocked`, `frozen` or `unfrozen`: what a person did to a lock.
fn lock_detail(target: (&str, &str), action: &str, by: &str, lock: &EnvLock) -> serde_json::Value {
    let (key, path) = target;
    serde_json::json!({
        key: path,
        "org": path.split('/').next().unwrap_or_default(),
        "action": action,
        "by": by,
        "reason": lock.reason,
        "locked_by": lock.by,
        "locked_at": lock.at,
    })
}

impl JobService {
    /// Publishes `sortie.environment.lock_changed` (best effort, as every event: the lock
    /// itself is the record).
    async fn lock_changed(&self, resource: String, detail: serde_json::Value) {
        if let Err(e) = self
            .bus
            .publish(
                sortie_core::notify::ENVIRONMENT_LOCK_CHANGED,
                &resource,
                detail,
            )
            .await
        {
            tracing::warn!(error = %e, %resource, "could not publish the lock change");
        }
    }

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
            self.lock_changed(
                format!("sortie:environment/{path}"),
                lock_detail(("environment", &path.to_string()), "locked", by, &lock),
            )
            .await;
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
            self.lock_changed(
                format!("sortie:environment/{path}"),
                lock_detail(("environment", &path.to_string()), "unlocked", by, lock),
            )
            .await;
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
            self.lock_changed(
                format!("sortie:group/{}", group.as_str()),
                lock_detail(("group", group.as_str()), "frozen", by, &lock),
            )
            .await;
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
            self.lock_changed(
                format!("sortie:group/{}", group.as_str()),
                lock_detail(("group", group.as_str()), "unfrozen", by, lock),
            )
            .await;
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

    /// Records every event published.
    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<(String, String, serde_json::Value)>>);

    #[async_trait::async_trait]
    impl crate::Bus for Recorded {
        async fn job_ended(
            &self,
            _: &sortie_store::JobRecord,
        ) -> Result<(), crate::LifecycleError> {
            Ok(())
        }
        async fn publish(
            &self,
            kind: &str,
            resource: &str,
            detail: serde_json::Value,
        ) -> Result<(), crate::LifecycleError> {
            self.0
                .lock()
                .unwrap()
                .push((kind.into(), resource.into(), detail));
            Ok(())
        }
    }

    #[tokio::test]
    async fn each_lock_and_freeze_taken_or_ended_publishes_one_lock_change_and_a_repeat_none() {
        let w = World::new().await;
        let env = w.environment("acme/payments/prod").await;
        let bus = std::sync::Arc::new(Recorded::default());
        let mut jobs = w.jobs.clone();
        jobs.bus = bus.clone();
        let group = GroupPath::parse("acme/payments").unwrap();
        let at = Utc::now();
        jobs.lock_environment(&env.path, "bob", "incident 42", at)
            .await
            .unwrap();
        // Already locked: nothing changed, nothing published.
        jobs.lock_environment(&env.path, "carol", "again", at)
            .await
            .unwrap();
        jobs.unlock_environment(&env.path, "carol").await.unwrap();
        jobs.unlock_environment(&env.path, "carol").await.unwrap();
        jobs.freeze_group(&group, "dave", "release freeze", at)
            .await
            .unwrap();
        jobs.unfreeze_group(&group, "dave").await.unwrap();
        let seen = bus.0.lock().unwrap().clone();
        let summary: Vec<(&str, &str, &str, &str)> = seen
            .iter()
            .map(|(kind, resource, d)| {
                assert_eq!(kind, sortie_core::notify::ENVIRONMENT_LOCK_CHANGED);
                (
                    resource.as_str(),
                    d["action"].as_str().unwrap(),
                    d["by"].as_str().unwrap(),
                    d["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "sortie:environment/acme/payments/prod",
                    "locked",
                    "bob",
                    "incident 42"
                ),
                (
                    "sortie:environment/acme/payments/prod",
                    "unlocked",
                    "carol",
                    "incident 42"
                ),
                (
                    "sortie:group/acme/payments",
                    "frozen",
                    "dave",
                    "release freeze"
                ),
                (
                    "sortie:group/acme/payments",
                    "unfrozen",
                    "dave",
                    "release freeze"
                ),
            ]
        );
        // A destination reads the kind and the group from it.
        assert_eq!(
            sortie_core::notify::kind_of(&seen[0].0, &seen[0].2),
            Some(sortie_core::notify::EventKind::LockChanged)
        );
        assert_eq!(seen[0].2["environment"], "acme/payments/prod");
        assert_eq!(seen[2].2["group"], "acme/payments");
    }
}
