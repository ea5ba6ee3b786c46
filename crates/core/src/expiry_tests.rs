//! The expiry rules, each with its edge cases.

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
