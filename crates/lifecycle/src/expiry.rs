//! Expiry, enforced at write time: an environment's `expires_at` / `ttl` is checked against
//! the limits inherited from its groups on create and update, and `extend` moves its end
//! up to the maximum. The rules are [`sortie_core::expiry`]'s; this reads the group
//! settings they need and writes the result.

use chrono::{DateTime, Utc};
use sortie_core::expiry::{self, Destroyed, Expiry, ExpiryLimits, ExtendRefusal};
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

/// The expiry limits of `path`'s group and of every group above it.
pub(crate) async fn limits_for(
    store: &dyn Store,
    path: &EnvPath,
) -> Result<GroupLimits, StoreError> {
    let settings = store.group_settings_over(path.group()).await?;
    Ok(settings.into_iter().map(|(g, s)| (g, s.expiry)).collect())
}

/// Each group's own expiry limits, from an environment's group up.
pub type GroupLimits = Vec<(GroupPath, ExpiryLimits)>;

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

/// When `record`'s environment expires under its groups' `limits`, and where that end
/// comes from (`None`: never). Its creation is its stored `created_at` (a record from
/// before that was stored: its runner link's time).
pub fn expiry_of(
    record: &EnvironmentRecord,
    limits: &[(GroupPath, ExpiryLimits)],
) -> Option<Expiry> {
    expiry::expiry_of(
        &record.environment.settings.expiry(),
        limits,
        record.created(),
        record.last_apply.as_ref().map(|a| a.at),
    )
}

/// When `record`'s environment expires under its groups' `limits` (`None`: never).
pub fn end_of(
    record: &EnvironmentRecord,
    limits: &[(GroupPath, ExpiryLimits)],
) -> Option<DateTime<Utc>> {
    expiry_of(record, limits).map(|e| e.at)
}

/// What a change of a group's expiry limits does to the environments below it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryChange {
    /// Environments that expire with the change and did not before, or expire earlier:
    /// each with its new end, earliest first (at most [`MAX_REFRESHED_UNDER_GROUP`] read).
    pub sooner: Vec<(EnvPath, DateTime<Utc>)>,
    /// How many environments expire later with the change, or no longer expire.
    pub later: usize,
    /// How many existing environments a new default would reach with `apply_to_existing`
    /// and does not without it (they keep their ends).
    pub kept: usize,
    /// How many environments' due-list entries were written (0 for a dry run).
    pub written: usize,
    /// True when more environments were below the group than one change reads.
    pub truncated: bool,
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
        check_setting(
            settings,
            &expiry::inherited(&limits),
            min_ttl_seconds(),
            Utc::now(),
        )
    }

    /// Sets group `group`'s expiry limits (checked against the shortest TTL and each other:
    /// an input error names the field), then writes again the due-list entries of the
    /// environments below it, whose ends may move. A new default reaches the environments
    /// that exist now only with `apply_to_existing` (else those created from now on); a
    /// changed one governs whom it did. With `dry_run` nothing is written. Answers what
    /// the change does to the environments below.
    pub async fn set_group_expiry(
        &self,
        group: &GroupPath,
        limits: &ExpiryLimits,
        apply_to_existing: bool,
        dry_run: bool,
    ) -> Result<ExpiryChange, StoreError> {
        if let Some((field, problem)) = expiry::limits_problems(limits, min_ttl_seconds())
            .into_iter()
            .next()
        {
            return Err(invalid(field, problem));
        }
        let (own, _) = self.group_expiry(group).await?;
        let now = Utc::now();
        let limits = own.changed_to(*limits, apply_to_existing, now);
        let mut change = self
            .expiry_change(group, limits, own.changed_to(limits, true, now))
            .await?;
        if dry_run {
            return Ok(change);
        }
        self.store.set_group_expiry(group, &limits).await?;
        change.written = refresh_under(self.store.as_ref(), group).await?;
        Ok(change)
    }

    /// The ends that `limits` (and, had it been applied to existing environments,
    /// `everyone`) would give the environments below `group`, against their ends now.
    async fn expiry_change(
        &self,
        group: &GroupPath,
        limits: ExpiryLimits,
        everyone: ExpiryLimits,
    ) -> Result<ExpiryChange, StoreError> {
        let under = self
            .store
            .list_environments_under(group, MAX_REFRESHED_UNDER_GROUP)
            .await?;
        // Groups between `group` and each environment keep their limits: read once each.
        let mut below: std::collections::HashMap<GroupPath, GroupLimits> = Default::default();
        let mut change = ExpiryChange {
            truncated: under.truncated,
            ..Default::default()
        };
        for env in &under.environments {
            let record = &env.item;
            if record.destroyed.is_some() {
                continue;
            }
            let path = &record.environment.path;
            let now_limits = match below.get(path.group()) {
                Some(l) => l.clone(),
                None => {
                    let l = limits_for(self.store.as_ref(), path).await?;
                    below.insert(path.group().clone(), l.clone());
                    l
                }
            };
            let with = |new: ExpiryLimits| -> GroupLimits {
                let mut l = now_limits.clone();
                match l.iter_mut().find(|(g, _)| g == group) {
                    Some((_, own)) => *own = new,
                    None => l.push((group.clone(), new)),
                }
                l
            };
            let before = end_of(record, &now_limits);
            let after = end_of(record, &with(limits));
            match (before, after) {
                (b, Some(a)) if b.is_none_or(|b| a < b) => change.sooner.push((path.clone(), a)),
                (Some(b), a) if a.is_none_or(|a| a > b) => change.later += 1,
                _ => {}
            }
            if after.is_none() && end_of(record, &with(everyone)).is_some() {
                change.kept += 1;
            }
        }
        change.sooner.sort_by_key(|(p, at)| (*at, p.to_string()));
        Ok(change)
    }

    /// When environment `record` expires and where that end comes from (`None`: it does
    /// not expire, or its expiry destroyed it).
    pub async fn expiry(&self, record: &EnvironmentRecord) -> Result<Option<Expiry>, StoreError> {
        if record.destroyed.is_some() {
            return Ok(None);
        }
        let limits = limits_for(self.store.as_ref(), &record.environment.path).await?;
        Ok(expiry_of(record, &limits))
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
            expiry::inherited(&limits).max_ttl_seconds,
        )?;
        let mut env = current.item.environment;
        let own = env.settings.expiry();
        if own.expires_at.is_none() && own.ttl_seconds.is_none() {
            // The end is a group default's: the extension goes with that default.
            env.settings.extended_to = Some(end);
        } else {
            env.settings.expires_at = Some(end);
        }
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
            max_ttl_seconds: Some(7 * 86_400),
            ..Default::default()
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
        let limits: GroupLimits = vec![];
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
