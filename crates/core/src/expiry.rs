//! Expiry: an environment that goes away on time. Its end is a time (`expires_at`) or a
//! duration (`ttl`, such as `72h`) counted from its creation or from its last apply
//! (`ttl_from`); a group sets a default and a maximum for everything below it. Reminders
//! (`sortie.environment.expiring`) go out 2 days, 2 hours and 30 minutes before, each once.
//!
//! Every rule here is a pure function: time is passed in, and so is the shortest TTL
//! allowed (the normal [`TTL_MIN_SECONDS`], lowered only by a test setting).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::names::GroupPath;

/// The principal that requests the destroy of an expired environment.
pub const EXPIRY_PRINCIPAL: &str = "sortie:expiry";

/// The shortest TTL (and the nearest `expires_at`) normally accepted: 1 hour.
pub const TTL_MIN_SECONDS: u64 = 3600;

/// The longest TTL accepted anywhere: 5 years.
pub const TTL_MAX_SECONDS: u64 = 5 * 365 * 24 * 3600;

/// Where a `ttl` is counted from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TtlFrom {
    /// From the environment's creation (the default).
    #[default]
    Created,
    /// From its latest successful apply (from its creation until the first).
    LastApply,
}

/// Parses a duration such as `90s`, `30m`, `72h` or `7d` (one whole number and one unit)
/// into seconds. The error is the problem, for the field that held it.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    // The unit is the last character (any character: a multi-byte one is refused below,
    // never split).
    let unit_at = t.char_indices().last().map_or(0, |(i, _)| i);
    let (number, unit) = t.split_at(unit_at);
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
            "`{}` is not a duration: write a whole number and a unit (s, m, h or d), such as `72h`",
            t.escape_debug()
        ))
        }
    };
    let n: u64 = number.parse().map_err(|_| {
        format!(
            "`{}` is not a duration: write a whole number and a unit (s, m, h or d), such as `72h`",
            t.escape_debug()
        )
    })?;
    n.checked_mul(per)
        .filter(|s| *s <= TTL_MAX_SECONDS)
        .ok_or_else(|| format!("`{}` is longer than 5 years", t.escape_debug()))
}

/// Writes seconds as the largest whole unit: `259200` is `3d`, `5400` is `90m`.
pub fn format_duration(seconds: u64) -> String {
    for (per, unit) in [(86_400, "d"), (3600, "h"), (60, "m")] {
        if seconds >= per && seconds.is_multiple_of(per) {
            return format!("{}{unit}", seconds / per);
        }
    }
    format!("{seconds}s")
}

/// Checks a TTL (in seconds) against the shortest allowed and a group's maximum.
pub fn ttl_problem(seconds: u64, min_seconds: u64, max_seconds: Option<u64>) -> Option<String> {
    if seconds < min_seconds {
        return Some(format!(
            "must be at least {} (the shortest TTL)",
            format_duration(min_seconds)
        ));
    }
    match max_seconds {
        Some(max) if seconds > max => Some(format!(
            "must be at most {} (the maximum TTL set on the environment's groups)",
            format_duration(max)
        )),
        _ => None,
    }
}

/// A group's expiry settings: the TTL its environments get when they set none, and the
/// longest they may have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExpiryLimits {
    /// The TTL of an environment that sets neither `ttl` nor `expires_at`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl_seconds: Option<u64>,
    /// The longest an environment may live from now on, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl_seconds: Option<u64>,
    /// Since when the default applies: to environments created from then on. Absent, it
    /// applies to every environment below the group, those that existed before it too
    /// (set with `apply_to_existing`, or before this was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_since: Option<DateTime<Utc>>,
}

impl ExpiryLimits {
    /// These limits as they are after a change to `new` at `now`: a default that applies
    /// to existing environments has no `default_since`; one that does not keeps the
    /// group's earlier one when it already had a default (changing it keeps who it
    /// governs), else starts now.
    pub fn changed_to(
        &self,
        new: ExpiryLimits,
        apply_to_existing: bool,
        now: DateTime<Utc>,
    ) -> Self {
        let default_since = match new.default_ttl_seconds {
            None => None,
            Some(_) if apply_to_existing => None,
            Some(_) if self.default_ttl_seconds.is_some() => self.default_since,
            Some(_) => Some(now),
        };
        ExpiryLimits {
            default_since,
            ..new
        }
    }

    /// True when the default applies to an environment created at `created`.
    pub fn default_applies(&self, created: DateTime<Utc>) -> bool {
        self.default_ttl_seconds.is_some()
            && self.default_since.is_none_or(|since| created >= since)
    }
}

/// The limits in force for an environment, from its group and the groups above it (any
/// order): the default of the deepest group that sets one (a team overrides its
/// organisation's default), and the smallest maximum of all (no group raises the maximum
/// set above it). A default above the maximum is cut to it.
pub fn inherited(limits: &[(GroupPath, ExpiryLimits)]) -> ExpiryLimits {
    inherited_default(limits, |_| true).0
}

/// [`inherited`] for one environment, created at `created`: a group's default counts only
/// when it applies to it ([`ExpiryLimits::default_applies`]). Also answers the group whose
/// default it is.
pub fn inherited_for(
    limits: &[(GroupPath, ExpiryLimits)],
    created: DateTime<Utc>,
) -> (ExpiryLimits, Option<GroupPath>) {
    inherited_default(limits, |l| l.default_applies(created))
}

fn inherited_default(
    limits: &[(GroupPath, ExpiryLimits)],
    counts: impl Fn(&ExpiryLimits) -> bool,
) -> (ExpiryLimits, Option<GroupPath>) {
    let deepest = limits
        .iter()
        .filter(|(_, l)| l.default_ttl_seconds.is_some() && counts(l))
        .max_by_key(|(g, _)| g.depth());
    let max_ttl_seconds = limits.iter().filter_map(|(_, l)| l.max_ttl_seconds).min();
    let limits = ExpiryLimits {
        default_ttl_seconds: match (
            deepest.and_then(|(_, l)| l.default_ttl_seconds),
            max_ttl_seconds,
        ) {
            (Some(d), Some(m)) => Some(d.min(m)),
            (d, _) => d,
        },
        max_ttl_seconds,
        default_since: deepest.and_then(|(_, l)| l.default_since),
    };
    (limits, deepest.map(|(g, _)| g.clone()))
}

/// An environment's own expiry setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpirySetting {
    /// A fixed end.
    pub expires_at: Option<DateTime<Utc>>,
    /// A duration, in seconds.
    pub ttl_seconds: Option<u64>,
    /// Where `ttl_seconds` counts from.
    pub ttl_from: TtlFrom,
    /// An extension of the end a group's default gives (counts only with that default).
    pub extended_to: Option<DateTime<Utc>>,
}

/// Where an environment's end comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExpirySource {
    /// Its own fixed end (`expires_at`).
    ExpiresAt,
    /// Its own `ttl`.
    Ttl,
    /// The default TTL of a group it is below.
    GroupDefault,
}

/// An environment's end and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Expiry {
    /// When it is destroyed.
    pub at: DateTime<Utc>,
    /// Where that end comes from.
    pub source: ExpirySource,
    /// The TTL that gives it (its own or the default), as `3d`; absent for a fixed end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// The group whose default it is (for `group_default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub group: Option<GroupPath>,
    /// True when an extension moved a group default's end later.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extended: bool,
}

/// An environment's end and its source, under its groups' limits (`groups`: its group and
/// every group above it): its own `expires_at`, else its own TTL, else the default of the
/// deepest group whose default applies to it ([`inherited_for`]), moved later by an
/// extension. `None`: it never expires.
pub fn expiry_of(
    setting: &ExpirySetting,
    groups: &[(GroupPath, ExpiryLimits)],
    created: DateTime<Utc>,
    last_apply: Option<DateTime<Utc>>,
) -> Option<Expiry> {
    let (limits, group) = inherited_for(groups, created);
    let at = expires_at(setting, &limits, created, last_apply)?;
    if setting.expires_at.is_some() {
        return Some(Expiry {
            at,
            source: ExpirySource::ExpiresAt,
            ttl: None,
            group: None,
            extended: false,
        });
    }
    if let Some(ttl) = setting.ttl_seconds {
        return Some(Expiry {
            at,
            source: ExpirySource::Ttl,
            ttl: Some(format_duration(ttl)),
            group: None,
            extended: false,
        });
    }
    let extended = setting.extended_to.filter(|e| *e > at);
    Some(Expiry {
        at: extended.unwrap_or(at),
        source: ExpirySource::GroupDefault,
        ttl: limits.default_ttl_seconds.map(format_duration),
        group,
        extended: extended.is_some(),
    })
}

/// When an environment expires: its `expires_at`, else its TTL (or the inherited default)
/// from its creation or its last apply. `None`: it never expires.
pub fn expires_at(
    setting: &ExpirySetting,
    limits: &ExpiryLimits,
    created: DateTime<Utc>,
    last_apply: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    if let Some(at) = setting.expires_at {
        return Some(at);
    }
    let ttl = setting.ttl_seconds.or(limits.default_ttl_seconds)?;
    let from = match setting.ttl_from {
        TtlFrom::Created => created,
        TtlFrom::LastApply => last_apply.map_or(created, |a| a.max(created)),
    };
    Some(from + seconds(ttl))
}

fn seconds(s: u64) -> Duration {
    Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX / 1000))
}

/// Why an extension was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtendRefusal {
    /// The environment has no expiry to extend.
    #[error("the environment does not expire; there is nothing to extend")]
    NoExpiry,
    /// The extension is shorter than a minute.
    #[error("`by` must be at least 1 minute")]
    TooShort,
    /// The new end would be later than the maximum allows.
    #[error("extending by {by} would end it at {wanted}, later than the maximum TTL of {max} from now allows (at most {latest})")]
    OverMaximum {
        /// The extension asked for.
        by: String,
        /// The end it would give.
        wanted: DateTime<Utc>,
        /// The maximum TTL.
        max: String,
        /// The latest end allowed now.
        latest: DateTime<Utc>,
    },
}

/// The new end after extending `current` by `by_seconds` at `now`: counted from the later
/// of the current end and now (an overdue environment gets `by` from now), never past
/// `now + max`.
pub fn extend(
    current: Option<DateTime<Utc>>,
    by_seconds: u64,
    now: DateTime<Utc>,
    max_ttl_seconds: Option<u64>,
) -> Result<DateTime<Utc>, ExtendRefusal> {
    let current = current.ok_or(ExtendRefusal::NoExpiry)?;
    if by_seconds < 60 {
        return Err(ExtendRefusal::TooShort);
    }
    let wanted = current.max(now) + seconds(by_seconds.min(TTL_MAX_SECONDS));
    match max_ttl_seconds {
        Some(max) if wanted > now + seconds(max) => Err(ExtendRefusal::OverMaximum {
            by: format_duration(by_seconds),
            wanted,
            max: format_duration(max),
            latest: now + seconds(max),
        }),
        _ => Ok(wanted),
    }
}

/// A reminder before expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Reminder {
    /// 2 days before.
    #[serde(rename = "2d")]
    TwoDays,
    /// 2 hours before.
    #[serde(rename = "2h")]
    TwoHours,
    /// 30 minutes before.
    #[serde(rename = "30m")]
    ThirtyMinutes,
}

impl Reminder {
    /// Every reminder, earliest first.
    pub const ALL: [Reminder; 3] = [Self::TwoDays, Self::TwoHours, Self::ThirtyMinutes];

    /// How long before expiry it goes out.
    pub fn before(self) -> Duration {
        match self {
            Self::TwoDays => Duration::days(2),
            Self::TwoHours => Duration::hours(2),
            Self::ThirtyMinutes => Duration::minutes(30),
        }
    }

    /// `2d`, `2h` or `30m`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TwoDays => "2d",
            Self::TwoHours => "2h",
            Self::ThirtyMinutes => "30m",
        }
    }
}

/// The reminders due at `now` for an end at `expires_at` that are not in `sent`: every
/// one whose time has come, while the environment has not expired. An environment whose
/// whole life is shorter than a reminder's lead gets that reminder on the first sweep
/// (each says how long is left), so every reminder goes out once, none twice.
pub fn reminders_due(
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
    sent: &[Reminder],
) -> Vec<Reminder> {
    if now >= expires_at {
        return vec![];
    }
    Reminder::ALL
        .into_iter()
        .filter(|r| !sent.contains(r) && now >= expires_at - r.before())
        .collect()
}

/// When the sweep must next look at an environment expiring at `expires_at` with `sent`
/// reminders out: the earliest unsent reminder's time, else the expiry itself.
pub fn next_due(expires_at: DateTime<Utc>, sent: &[Reminder]) -> DateTime<Utc> {
    Reminder::ALL
        .into_iter()
        .filter(|r| !sent.contains(r))
        .map(|r| expires_at - r.before())
        .min()
        .map_or(expires_at, |t| t.min(expires_at))
}

/// True once the environment's time is up.
pub fn is_expired(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= expires_at
}

/// The mark of an environment whose expiry destroy succeeded: its history and state
/// versions stay readable; it refuses new jobs until a person extends it (or changes its
/// expiry settings), which clears the mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Destroyed {
    /// When the destroy succeeded.
    pub at: DateTime<Utc>,
    /// The `sortie:expiry` destroy job (absent when nothing had been applied, so there was
    /// nothing to destroy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The end that was reached.
    pub expired_at: DateTime<Utc>,
}

impl Destroyed {
    /// The refusal of a new job on environment `env` while it is marked destroyed.
    pub fn refusal(&self, env: &impl std::fmt::Display) -> String {
        format!(
            "environment `{env}` expired at {} and was destroyed at {}{}; extend it (`sortie env extend {env} --by 24h`) or change its expiry settings to use it again",
            self.expired_at.to_rfc3339(),
            self.at.to_rfc3339(),
            self.job_id
                .as_deref()
                .map(|j| format!(" by job {j}"))
                .unwrap_or_default()
        )
    }
}

/// Checks a group's new expiry limits against the shortest TTL: each problem with its
/// field (`default_ttl`, `max_ttl`). A default above the maximum is refused (the rules
/// would cut it; a person setting both means something else).
pub fn limits_problems(limits: &ExpiryLimits, min_seconds: u64) -> Vec<(&'static str, String)> {
    let mut out = vec![];
    for (field, value) in [
        ("default_ttl", limits.default_ttl_seconds),
        ("max_ttl", limits.max_ttl_seconds),
    ] {
        if let Some(problem) = value.and_then(|v| ttl_problem(v, min_seconds, None)) {
            out.push((field, problem));
        }
    }
    if let (Some(d), Some(m)) = (limits.default_ttl_seconds, limits.max_ttl_seconds) {
        if d > m {
            out.push((
                "default_ttl",
                format!(
                    "{} is longer than the group's own maximum, {}",
                    format_duration(d),
                    format_duration(m)
                ),
            ));
        }
    }
    out
}

/// How long the sweep waits before trying again an expiry whose destroy failed for the
/// `failures`-th time in a row: the launch backoff of [`crate::backoff`] (2 s doubling up to
/// 5 minutes, with jitter seeded by the environment and the count). Never given up: an
/// expiry is retried until it succeeds or the environment is extended.
pub fn retry_after(environment: &str, failures: u32) -> Duration {
    let seed = crate::backoff::jitter_seed(environment, failures);
    Duration::seconds(i64::from(crate::backoff::launch_retry_delay_seconds(
        failures.max(1),
        seed,
    )))
}

#[cfg(test)]
#[path = "expiry_tests.rs"]
mod tests;
