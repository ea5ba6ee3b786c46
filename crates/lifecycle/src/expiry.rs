//! Expiry, enforced at write time: an environment's `expires_at` / `ttl` is checked against
//! the limits inherited from its groups on create and update, and `extend` moves its end
//! up to the maximum. The rules are [`sortie_core::expiry`]'s; this reads the group
//! settings they need and writes the result.

use chrono::{DateTime, Utc};
use sortie_core::expiry::{self, ExpiryLimits, ExtendRefusal};
use sortie_core::EnvPath;
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
/// counted from its runner link's time, the first write of the environment.
pub fn end_of(record: &EnvironmentRecord, limits: &ExpiryLimits) -> Option<DateTime<Utc>> {
    let env = &record.environment;
    expiry::expires_at(
        &env.settings.expiry(),
        limits,
        env.runner.linked_at,
        record.last_apply.as_ref().map(|a| a.at),
    )
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
}
