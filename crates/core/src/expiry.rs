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
mod tests {
    use super::*;

    #[test]
    fn a_duration_ending_in_a_multi_byte_character_is_refused_not_split() {
        for text in ["\u{ce}", "1\u{ce}", "\u{ce}h", "72\u{1f600}", ""] {
            assert!(parse_duration(text).is_err(), "{text:?}");
        }
        assert_eq!(parse_duration("72h"), Ok(72 * 3600));
    }
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 0).unwrap()
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration("72h"), Ok(72 * 3600));
        assert_eq!(parse_duration("3m"), Ok(180));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        for bad in ["", "h", "72", "1.5h", "-1h", "3w", "99999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_duration(259_200), "3d");
        assert_eq!(format_duration(5400), "90m");
        assert_eq!(format_duration(61), "61s");
    }

    #[test]
    fn ttl_limits_name_the_limit() {
        assert!(ttl_problem(60, TTL_MIN_SECONDS, None)
            .unwrap()
            .contains("1h"));
        assert!(ttl_problem(7200, 60, Some(3600)).unwrap().contains("1h"));
        assert_eq!(ttl_problem(3600, 60, Some(3600)), None);
    }

    #[test]
    fn a_three_minute_ttl_gets_every_reminder_once_then_expires() {
        let end = t0() + Duration::minutes(3);
        let mut sent = vec![];
        let first = reminders_due(end, t0(), &sent);
        assert_eq!(first, Reminder::ALL.to_vec());
        sent.extend(first);
        assert!(reminders_due(end, t0() + Duration::minutes(1), &sent).is_empty());
        assert_eq!(next_due(end, &sent), end);
        assert!(is_expired(end, end));
    }

    #[test]
    fn group_limits_are_checked_against_the_minimum_and_each_other() {
        let l = |d: Option<u64>, m: Option<u64>| ExpiryLimits {
            default_ttl_seconds: d,
            max_ttl_seconds: m,
            default_since: None,
        };
        assert!(limits_problems(&l(Some(3 * 86_400), Some(14 * 86_400)), 3600).is_empty());
        assert!(limits_problems(&l(None, None), 3600).is_empty());
        let p = limits_problems(&l(Some(60), None), 3600);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "default_ttl");
        let p = limits_problems(&l(Some(7200), Some(3600)), 60);
        assert_eq!(p[0].0, "default_ttl");
        assert!(p[0].1.contains("1h"), "{p:?}");
        let p = limits_problems(&l(None, Some(10)), 60);
        assert_eq!(p[0].0, "max_ttl");
    }

    proptest! {
        #[test]
        fn an_expiry_retry_backs_off_within_the_launch_bounds(failures in 0u32..100) {
            let d = retry_after("acme/app/dev", failures).num_seconds();
            prop_assert!((2..=300).contains(&d), "{d}");
            // The ceiling never shrinks as failures grow.
            let later = retry_after("acme/app/dev", failures.saturating_add(8)).num_seconds();
            prop_assert!(later * 2 >= d.min(300));
        }
    }

    #[test]
    fn extension_stops_at_the_maximum() {
        let now = t0();
        let current = now + Duration::hours(1);
        assert_eq!(
            extend(Some(current), 86_400, now, None),
            Ok(current + Duration::days(1))
        );
        let refused = extend(Some(current), 86_400, now, Some(86_400)).unwrap_err();
        assert!(refused.to_string().contains("1d"), "{refused}");
        assert_eq!(extend(None, 3600, now, None), Err(ExtendRefusal::NoExpiry));
    }

    fn groups() -> impl Strategy<Value = Vec<(GroupPath, ExpiryLimits)>> {
        let names = ["acme", "acme/pay", "acme/pay/eu", "acme/ops"];
        prop::collection::vec(
            (
                prop::sample::select(names.to_vec()),
                prop::option::of(3600u64..1_000_000),
                prop::option::of(3600u64..1_000_000),
            ),
            0..4,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(g, d, m)| {
                    (
                        GroupPath::parse(g).unwrap(),
                        ExpiryLimits {
                            default_ttl_seconds: d,
                            max_ttl_seconds: m,
                            default_since: None,
                        },
                    )
                })
                .collect()
        })
    }

    fn default_of(ttl: u64) -> ExpiryLimits {
        ExpiryLimits {
            default_ttl_seconds: Some(ttl),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_default_reaches_existing_environments_only_when_asked() {
        let acme = GroupPath::parse("acme").unwrap();
        let created = t0();
        let set_at = t0() + Duration::days(10);
        let none = ExpiryLimits::default();
        let own = ExpirySetting::default();
        for (apply_to_existing, expected) in [
            (false, None),
            (true, Some(set_at - Duration::days(10) + Duration::days(3))),
        ] {
            let limits = none.changed_to(default_of(3 * 86_400), apply_to_existing, set_at);
            let got = expiry_of(&own, &[(acme.clone(), limits)], created, None).map(|e| e.at);
            assert_eq!(got, expected, "apply_to_existing {apply_to_existing}");
            // An environment created after the default was set gets it either way.
            let later = set_at + Duration::hours(1);
            let e = expiry_of(&own, &[(acme.clone(), limits)], later, None).unwrap();
            assert_eq!(e.at, later + Duration::days(3));
            assert_eq!(e.source, ExpirySource::GroupDefault);
            assert_eq!(e.group.as_ref(), Some(&acme));
            assert_eq!(e.ttl.as_deref(), Some("3d"));
        }
    }

    #[test]
    fn changing_a_default_keeps_whom_it_governs_and_removing_it_ends_its_extensions() {
        let acme = GroupPath::parse("acme").unwrap();
        let first = ExpiryLimits::default().changed_to(default_of(86_400), false, t0());
        assert_eq!(first.default_since, Some(t0()));
        let later = t0() + Duration::days(5);
        let changed = first.changed_to(default_of(2 * 86_400), false, later);
        assert_eq!(
            changed.default_since,
            Some(t0()),
            "a change is not a new default"
        );
        let everyone = changed.changed_to(default_of(2 * 86_400), true, later);
        assert_eq!(everyone.default_since, None);
        let removed = changed.changed_to(ExpiryLimits::default(), false, later);
        assert_eq!(removed, ExpiryLimits::default());
        // An extension of the default's end counts with the default, and goes with it.
        let created = t0() + Duration::days(1);
        let extended = ExpirySetting {
            extended_to: Some(created + Duration::days(9)),
            ..Default::default()
        };
        let e = expiry_of(&extended, &[(acme.clone(), changed)], created, None).unwrap();
        assert_eq!((e.at, e.extended), (created + Duration::days(9), true));
        assert_eq!(
            expiry_of(&extended, &[(acme.clone(), removed)], created, None),
            None
        );
        // An own TTL or end wins over both.
        let own = ExpirySetting {
            ttl_seconds: Some(3600),
            ..extended
        };
        let e = expiry_of(&own, &[(acme, changed)], created, None).unwrap();
        assert_eq!(
            (e.at, e.source, e.extended),
            (created + Duration::hours(1), ExpirySource::Ttl, false)
        );
    }

    proptest! {
        /// An environment's end never comes from a default set after it was created without
        /// `apply_to_existing`: the deepest default that applies to it gives it, or none.
        #[test]
        fn a_default_never_reaches_back_unasked(
            limits in groups(),
            sinces in prop::collection::vec(prop::option::of(-100i64..100), 4),
            created in -100i64..100,
        ) {
            let limits: Vec<_> = limits
                .into_iter()
                .zip(sinces)
                .map(|((g, l), s)| (g, ExpiryLimits { default_since: s.map(|d| t0() + Duration::days(d)), ..l }))
                .collect();
            let created = t0() + Duration::days(created);
            let got = expiry_of(&ExpirySetting::default(), &limits, created, None);
            let applying: Vec<_> = limits.iter().filter(|(_, l)| l.default_applies(created)).collect();
            prop_assert_eq!(got.is_some(), !applying.is_empty());
            if let Some(e) = got {
                let g = e.group.clone().unwrap();
                let (_, l) = applying.iter().find(|(ag, _)| *ag == g).unwrap();
                prop_assert!(l.default_since.is_none_or(|s| created >= s));
                prop_assert!(applying.iter().all(|(ag, _)| ag.depth() <= g.depth()));
            }
        }
    }

    proptest! {
        /// The inherited maximum is the smallest set, and the default never exceeds it.
        #[test]
        fn inheritance_keeps_the_smallest_maximum(limits in groups()) {
            let got = inherited(&limits);
            let smallest = limits.iter().filter_map(|(_, l)| l.max_ttl_seconds).min();
            prop_assert_eq!(got.max_ttl_seconds, smallest);
            if let (Some(d), Some(m)) = (got.default_ttl_seconds, got.max_ttl_seconds) {
                prop_assert!(d <= m);
            }
            prop_assert_eq!(
                got.default_ttl_seconds.is_some(),
                limits.iter().any(|(_, l)| l.default_ttl_seconds.is_some())
            );
        }

        /// Sweeping at any sequence of times sends each reminder at most once, never after
        /// expiry, never before its time; and once the sweep has passed a reminder's time
        /// before expiry, it has been sent.
        #[test]
        fn reminders_go_out_once_each(
            ttl in 60i64..400_000,
            steps in prop::collection::vec(1i64..20_000, 1..60),
        ) {
            let end = t0() + Duration::seconds(ttl);
            let mut sent: Vec<Reminder> = vec![];
            let mut now = t0();
            for step in steps {
                for r in reminders_due(end, now, &sent) {
                    prop_assert!(!sent.contains(&r));
                    prop_assert!(now >= end - r.before() && now < end);
                    sent.push(r);
                }
                for r in Reminder::ALL {
                    if now >= end - r.before() && now < end {
                        prop_assert!(sent.contains(&r));
                    }
                }
                prop_assert!(next_due(end, &sent) <= end);
                now += Duration::seconds(step);
            }
        }

        /// An extension never shortens the life, and is refused exactly when it would pass
        /// the maximum.
        #[test]
        fn extension_is_bounded(
            left in -10_000i64..1_000_000,
            by in 60u64..1_000_000,
            max in prop::option::of(3600u64..2_000_000),
        ) {
            let now = t0();
            let current = now + Duration::seconds(left);
            match extend(Some(current), by, now, max) {
                Ok(end) => {
                    prop_assert!(end > current && end > now);
                    if let Some(m) = max {
                        prop_assert!(end <= now + Duration::seconds(m as i64));
                    }
                }
                Err(ExtendRefusal::OverMaximum { latest, wanted, .. }) => {
                    prop_assert!(max.is_some());
                    prop_assert!(wanted > latest);
                }
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }

        /// A TTL counted from the last apply never ends before one counted from creation.
        #[test]
        fn last_apply_never_ends_earlier(ttl in 60u64..1_000_000, applied in 0i64..1_000_000) {
            let created = t0();
            let last = Some(created + Duration::seconds(applied));
            let limits = ExpiryLimits::default();
            let from_created = ExpirySetting { ttl_seconds: Some(ttl), ..Default::default() };
            let from_apply = ExpirySetting { ttl_from: TtlFrom::LastApply, ..from_created };
            prop_assert!(
                expires_at(&from_apply, &limits, created, last) >= expires_at(&from_created, &limits, created, last)
            );
        }
    }
}
