//! Expiry, enforced at write time: an environment's `expires_at` / `ttl` is checked against
//! the limits inherited from its groups on create and update, and `extend` moves its end
//! up to the maximum. The rules are [`sortie_core::expiry`]'s; this reads the group
//! settings they need and writes the result.

use chrono::{DateTime, Utc};
use sortie_core::expiry::{self, Destroyed, ExpiryLimits, ExtendRefusal};
use sortie_core::{EnvPath, GroupPath};
use sortie_store::{EnvironmentRecord, Store, StoreError, Versioned};

use crate::Environments;

/// The variable that lowers the shortest TTL accepted (tests only; the normal minimum
/// is [`expiry::TTL_MIN_SECONDS`]).
pub const MIN_TTL_VARIABLE: &str = "SORTIE_MIN_TTL_SECONDS";

/// The shortest TTL accepted: [`expiry::TTL_MIN_SECONDS`], unless `SORTIE_MIN_TTL_SECONDS`
/// holds a smaller positive whole number (a test setting).
pub fn min_ttl_seconds() -> u64 {
    min_ttl_from(std::env::var(MIN_TTL_VARIABLE).ok().as_deref())
}

fn min_ttl_from(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v > 0)
        .map_or(expiry::TTL_MIN_SECONDS, |v| v.min(expiry::TTL_MIN_SECONDS))
}

/// The expiry limits in force for `path`, from its group and every group above it.
pub(crate) async fn limits_for(
    store: &dyn Store,
    path: &EnvPath,
) -> Result<ExpiryLimits, StoreError> {
    let settings = store.group_settings_over(path.group()).await?;
    let limits: Vec<_> = settings.into_iter().map(|(g, s)| (g, s.expiry)).collect();
    Ok(expiry::inherited(&limits))
}

fn invalid(path: &str, problem: String) -> StoreError {
    StoreError::Invalid {
        path: path.into(),
        problem,
    }
}

/// Checks an environment's `ttl` and `expires_at` at `now` against the shortest TTL and
/// the inherited maximum: an input error (400) names the field and the limit.
pub(crate) fn check_setting(
    settings: &sortie_core::EnvSettings,
    limits: &ExpiryLimits,
    min_seconds: u64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if let Some(ttl) = settings.expiry().ttl_seconds {
        if let Some(problem) = expiry::ttl_problem(ttl, min_seconds, limits.max_ttl_seconds) {
            return Err(invalid("ttl", problem));
        }
    }
    if let Some(at) = settings.expires_at {
        let left = (at - now).num_seconds().max(0).unsigned_abs();
        if let Some(problem) = expiry::ttl_problem(left, min_seconds, limits.max_ttl_seconds) {
            return Err(invalid(
                "expires_at",
                format!(
                    "is {} from now, but {problem}",
                    expiry::format_duration(left)
                ),
            ));
        }
    }
    Ok(())
}

/// Why an extension was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtendError {
    /// The rules refused it (no expiry, too short, or past the maximum: 409).
    #[error(transparent)]
    Refused(#[from] ExtendRefusal),
    /// The store failed (a missing environment is its `NotFound`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// When `record`'s environment expires under `limits` (`None`: never). Its creation is
/// its stored `created_at` (a record from before that was stored: its runner link's time).
pub fn end_of(record: &EnvironmentRecord, limits: &ExpiryLimits) -> Option<DateTime<Utc>> {
    let env = &record.environment;
    expiry::expires_at(
        &env.settings.expiry(),
        limits,
        record.created(),
        record.last_apply.as_ref().map(|a| a.at),
    )
}

/// The most environments below a group whose due-list entries a change of the group's
/// expiry limits writes again (the rest are corrected by the sweep when they come due).
pub const MAX_REFRESHED_UNDER_GROUP: usize = 1000;

/// Puts environment `path` on the expiry due list at its end as its settings and groups
/// give it now, or takes it off when it does not expire (or is gone, or destroyed).
/// Answers the end.
pub async fn refresh_due(
    store: &dyn Store,
    path: &EnvPath,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let record = match store.get_environment(path).await {
        Ok(r) => r.item,
        Err(StoreError::NotFound { .. }) => {
            store.remove_expiry(path).await?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let end = if record.destroyed.is_some() {
        None
    } else {
        end_of(&record, &limits_for(store, path).await?)
    };
    match end {
        Some(end) => store.set_expiry(path, end).await?,
        None => store.remove_expiry(path).await?,
    }
    Ok(end)
}

/// [`refresh_due`], a failure logged: the write that changed the end is already done, and
/// the environment's end shows on it; the warning names the environment.
pub(crate) async fn refresh_due_logged(store: &dyn Store, path: &EnvPath) {
    if let Err(e) = refresh_due(store, path).await {
        tracing::warn!(environment = %path, error = %e, "the expiry due list could not be updated; the environment's end is not acted on until its settings are written again");
    }
}

/// Writes again the due-list entries of the environments below `group` (at most
/// [`MAX_REFRESHED_UNDER_GROUP`]) after its expiry limits changed: a new default or maximum
/// moves their ends. Answers how many were written.
pub async fn refresh_under(store: &dyn Store, group: &GroupPath) -> Result<usize, StoreError> {
    let under = store
        .list_environments_under(group, MAX_REFRESHED_UNDER_GROUP)
        .await?;
    if under.truncated {
        tracing::warn!(%group, "more environments below the group than one refresh writes; the rest keep their ends until their settings are written");
    }
    let mut n = 0;
    for env in &under.environments {
        refresh_due_logged(store, &env.item.environment.path).await;
        n += 1;
    }
    Ok(n)
}

/// After the `sortie:expiry` destroy `job_id` of `path` succeeded: the environment is marked
/// destroyed (its history and state versions stay readable) and taken off the due list.
pub(crate) async fn mark_expired(
    store: &dyn Store,
    path: &EnvPath,
    job_id: Option<String>,
    expired_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mark = Destroyed {
        at: Utc::now(),
        job_id,
        expired_at,
    };
    store.mark_destroyed(path, Some(&mark)).await?;
    store.remove_expiry(path).await?;
    tracing::info!(environment = %path, "expired environment destroyed and marked so");
    Ok(())
}

impl crate::JobService {
    /// The end of a successful `sortie:expiry` destroy: the environment is marked destroyed
    /// and taken off the due list (best effort: the sweep does it when this fails).
    pub(crate) async fn expiry_destroy_succeeded(&self, record: &sortie_store::JobRecord) {
        let path = &record.job.environment;
        let expired_at = match self.store.get_expiry(path).await {
            Ok(Some(e)) => e.item.expires_at,
            Ok(None) => Utc::now(),
            Err(e) => {
                tracing::warn!(error = %e, "the expiry entry could not be read; the sweep marks the environment destroyed");
                return;
            }
        };
        let job = Some(record.job.id.to_string());
        if let Err(e) = mark_expired(self.store.as_ref(), path, job, expired_at).await {
            tracing::warn!(error = %e, "the expired environment could not be marked destroyed; the sweep does it");
        }
    }
}

impl Environments {
    /// Checks `settings` for environment `path` against its inherited limits now.
    pub(crate) async fn check_expiry(
        &self,
        path: &EnvPath,
        settings: &sortie_core::EnvSettings,
    ) -> Result<(), StoreError> {
        if settings.expires_at.is_none() && settings.ttl.is_none() {
            return Ok(());
        }
        let limits = limits_for(self.store.as_ref(), path).await?;
        check_setting(settings, &limits, min_ttl_seconds(), Utc::now())
    }

    /// Sets group `group`'s expiry limits (checked against the shortest TTL and each other:
    /// an input error names the field), then writes again the due-list entries of the
    /// environments below it, whose ends may move. Answers how many were written.
    pub async fn set_group_expiry(
        &self,
        group: &GroupPath,
        limits: &ExpiryLimits,
    ) -> Result<usize, StoreError> {
        if let Some((field, problem)) = expiry::limits_problems(limits, min_ttl_seconds())
            .into_iter()
            .next()
        {
            return Err(invalid(field, problem));
        }
        self.store.set_group_expiry(group, limits).await?;
        refresh_under(self.store.as_ref(), group).await
    }

    /// Group `group`'s own expiry limits, and those in force below it (its own and its
    /// ancestors', [`expiry::inherited`]).
    pub async fn group_expiry(
        &self,
        group: &GroupPath,
    ) -> Result<(ExpiryLimits, ExpiryLimits), StoreError> {
        let settings = self.store.group_settings_over(group).await?;
        let own = settings
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, s)| s.expiry)
            .unwrap_or_default();
        let all: Vec<_> = settings.into_iter().map(|(g, s)| (g, s.expiry)).collect();
        Ok((own, expiry::inherited(&all)))
    }

    /// Extends environment `path`'s life by `by_seconds` (from the later of its current end
    /// and now), up to the inherited maximum from now: the new end is written as its
    /// `expires_at`.
    pub async fn extend(
        &self,
        path: &EnvPath,
        by_seconds: u64,
    ) -> Result<(Versioned<EnvironmentRecord>, DateTime<Utc>), ExtendError> {
        let current = self.store.get_environment(path).await?;
        let limits = limits_for(self.store.as_ref(), path).await?;
        let now = Utc::now();
        let end = expiry::extend(
            end_of(&current.item, &limits),
            by_seconds,
            now,
            limits.max_ttl_seconds,
        )?;
        let mut env = current.item.environment;
        env.settings.expires_at = Some(end);
        let written = self
            .store
            .update_environment(&env, Some(current.version))
            .await?;
        // An extension brings a destroyed environment back (it accepts jobs again).
        if current.item.destroyed.is_some() {
            self.store.mark_destroyed(path, None).await?;
        }
        refresh_due_logged(self.store.as_ref(), path).await;
        Ok((written, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;
    use sortie_core::EnvSettings;

    #[test]
    fn the_minimum_is_lowered_only_by_a_positive_number() {
        assert_eq!(min_ttl_from(None), expiry::TTL_MIN_SECONDS);
        assert_eq!(min_ttl_from(Some("60")), 60);
        assert_eq!(min_ttl_from(Some("0")), expiry::TTL_MIN_SECONDS);
        assert_eq!(min_ttl_from(Some("x")), expiry::TTL_MIN_SECONDS);
        assert_eq!(min_ttl_from(Some("999999")), expiry::TTL_MIN_SECONDS);
    }

    #[test]
    fn settings_are_checked_against_the_minimum_and_the_maximum() {
        let now = Utc::now();
        let limits = ExpiryLimits {
            default_ttl_seconds: None,
            max_ttl_seconds: Some(7 * 86_400),
        };
        let ttl = |t: &str| EnvSettings {
            ttl: Some(t.into()),
            ..Default::default()
        };
        assert!(check_setting(&ttl("3d"), &limits, 3600, now).is_ok());
        match check_setting(&ttl("8d"), &limits, 3600, now) {
            Err(StoreError::Invalid { path, problem }) => {
                assert_eq!(path, "ttl");
                assert!(problem.contains("7d"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
        assert!(check_setting(&ttl("3m"), &limits, 3600, now).is_err());
        assert!(check_setting(&ttl("3m"), &limits, 60, now).is_ok());
        let at = |d: Duration| EnvSettings {
            expires_at: Some(now + d),
            ..Default::default()
        };
        assert!(check_setting(&at(Duration::days(2)), &limits, 3600, now).is_ok());
        match check_setting(&at(Duration::days(30)), &limits, 3600, now) {
            Err(StoreError::Invalid { path, problem }) => {
                assert_eq!(path, "expires_at");
                assert!(problem.contains("7d"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
        assert!(check_setting(&at(Duration::minutes(-5)), &limits, 3600, now).is_err());
    }

    #[tokio::test]
    async fn a_created_ttl_counts_from_the_creation_not_a_relink() {
        use sortie_store::EnvironmentStore;
        let w = crate::testing::World::new().await;
        let mut env = w.environment("acme/payments/review").await;
        env.settings.ttl = Some("2d".into());
        let created = w.store.update_environment(&env, None).await.unwrap();
        let born = created.item.created_at.expect("set by the create");
        // A relink (`refresh-runner`) a day later keeps the creation, and so the end.
        let mut link = env.runner.clone();
        link.linked_at = born + Duration::days(1);
        let relinked = w
            .store
            .relink_environment(&env.path, &link, None)
            .await
            .unwrap()
            .item;
        let limits = ExpiryLimits::default();
        assert_eq!(relinked.created(), born);
        assert_eq!(end_of(&relinked, &limits), Some(born + Duration::days(2)));
        // A record from before `created_at`: its runner link's time, as before.
        let old = EnvironmentRecord {
            created_at: None,
            ..relinked
        };
        assert_eq!(
            end_of(&old, &limits),
            Some(link.linked_at + Duration::days(2))
        );
    }
}
