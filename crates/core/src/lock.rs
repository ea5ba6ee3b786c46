//! Environment locks and group freezes: a person stops new jobs on one environment (a
//! lock) or on every environment below a group (a freeze), naming why. A job already
//! running finishes; a locked environment refuses new jobs, skips its drift checks and
//! its expiry waits.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::names::{EnvPath, GroupPath};
use crate::problems::{is_blank, refuse_control, Problems};
use crate::ValidationError;

/// The longest lock reason accepted, in bytes.
pub const LOCK_REASON_MAX: usize = 500;

/// Who locked an environment (or froze a group), when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvLock {
    /// The subject of the principal who locked it.
    pub by: String,
    /// When it was locked.
    pub at: DateTime<Utc>,
    /// Why, in the locker's words.
    pub reason: String,
}

impl EnvLock {
    /// A lock by `by` at `at` for `reason`: the reason must be non-blank, at most
    /// [`LOCK_REASON_MAX`] bytes, without control characters (its problem names `reason`).
    pub fn new(
        by: impl Into<String>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        if is_blank(reason) {
            p.push(
                "reason",
                "must say why (a lock without a reason helps nobody)",
            );
        } else if reason.len() > LOCK_REASON_MAX {
            p.push("reason", format!("must be at most {LOCK_REASON_MAX} bytes"));
        } else {
            refuse_control(&mut p, "reason", reason);
        }
        p.finish(Self {
            by: by.into(),
            at,
            reason: reason.trim().to_string(),
        })
    }

    /// `alice at 2026-11-26T10:00:00Z: "incident 42"`.
    pub fn describe(&self) -> String {
        format!(
            "{} at {}: \"{}\"",
            self.by,
            self.at.to_rfc3339_opts(SecondsFormat::Secs, true),
            self.reason
        )
    }
}

/// Where the lock that holds an environment was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum LockScope {
    /// On the environment itself.
    Environment,
    /// A freeze of this group (the environment's own group or an ancestor).
    Group {
        /// The frozen group.
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        group: GroupPath,
    },
}

/// The lock that stops new jobs on an environment: where it was taken, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Held {
    /// The environment's own lock, or a group's freeze.
    #[serde(flatten)]
    pub scope: LockScope,
    /// Who, when, why.
    #[serde(flatten)]
    pub lock: EnvLock,
}

impl Held {
    /// The sentence a refused job (or a skipped drift check) shows.
    pub fn refusal(&self, env: &EnvPath) -> String {
        match &self.scope {
            LockScope::Environment => {
                format!("environment `{env}` is locked by {}", self.lock.describe())
            }
            LockScope::Group { group } => format!(
                "environment `{env}` is frozen: group `{group}` was locked by {}",
                self.lock.describe()
            ),
        }
    }
}

/// What holds an environment, if anything: its own lock first, else the freeze of the
/// outermost frozen group among `freezes` (its group and ancestors, in any order; only
/// those that contain the environment count). `None` when new jobs may run.
pub fn holding(
    env: &EnvPath,
    own: Option<&EnvLock>,
    freezes: &[(GroupPath, EnvLock)],
) -> Option<Held> {
    if let Some(lock) = own {
        return Some(Held {
            scope: LockScope::Environment,
            lock: lock.clone(),
        });
    }
    freezes
        .iter()
        .filter(|(g, _)| g.contains(env.group()))
        .min_by_key(|(g, _)| g.depth())
        .map(|(g, lock)| Held {
            scope: LockScope::Group { group: g.clone() },
            lock: lock.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 26, 10, 0, 0).unwrap()
    }

    fn lock(by: &str) -> EnvLock {
        EnvLock::new(by, at(), "incident 42").unwrap()
    }

    #[test]
    fn a_reason_is_required_bounded_and_plain() {
        for bad in ["", "   ", "two\nlines"] {
            let e = EnvLock::new("alice", at(), bad).unwrap_err();
            assert_eq!(e.problems[0].path, "reason", "{bad:?}");
        }
        let long = "x".repeat(LOCK_REASON_MAX + 1);
        assert!(EnvLock::new("alice", at(), &long).is_err());
        assert_eq!(EnvLock::new("alice", at(), " why ").unwrap().reason, "why");
    }

    #[test]
    fn the_refusal_names_who_when_and_why() {
        let env = EnvPath::parse("acme/pay/prod").unwrap();
        let held = holding(&env, Some(&lock("alice")), &[]).unwrap();
        let text = held.refusal(&env);
        assert!(text.contains("alice"), "{text}");
        assert!(text.contains("2026-11-26T10:00:00Z"), "{text}");
        assert!(text.contains("incident 42"), "{text}");
        let frozen = holding(
            &env,
            None,
            &[(GroupPath::parse("acme").unwrap(), lock("bob"))],
        )
        .unwrap();
        assert!(frozen.refusal(&env).contains("group `acme`"));
        assert!(frozen.refusal(&env).contains("bob"));
    }

    fn group() -> impl Strategy<Value = GroupPath> {
        prop::collection::vec(prop::sample::select(vec!["acme", "pay", "ops", "eu"]), 1..4)
            .prop_map(|s| GroupPath::parse(&s.join("/")).unwrap())
    }

    proptest! {
        /// A lock holds exactly when the environment has its own lock or some containing
        /// group is frozen; the own lock wins, else the outermost freeze.
        #[test]
        fn holding_is_own_lock_then_outermost_containing_freeze(
            env_group in group(),
            own in any::<bool>(),
            frozen in prop::collection::vec(group(), 0..5),
        ) {
            let env = EnvPath::new(env_group.clone(), "e").unwrap();
            let freezes: Vec<_> = frozen.iter().map(|g| (g.clone(), lock(g.as_str()))).collect();
            let own_lock = lock("owner");
            let held = holding(&env, own.then_some(&own_lock), &freezes);
            let containing: Vec<_> = frozen.iter().filter(|g| g.contains(&env_group)).collect();
            prop_assert_eq!(held.is_some(), own || !containing.is_empty());
            if let Some(held) = held {
                if own {
                    prop_assert_eq!(held.scope, LockScope::Environment);
                } else {
                    let LockScope::Group { group } = &held.scope else {
                        return Err(TestCaseError::fail("a freeze holds"));
                    };
                    prop_assert!(group.contains(&env_group));
                    prop_assert!(containing.iter().all(|g| g.depth() >= group.depth()));
                    prop_assert_eq!(&held.lock.by, group.as_str());
                }
            }
        }
    }
}
