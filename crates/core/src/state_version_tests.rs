use super::*;
use proptest::prelude::*;
use serde_json::json;

fn contains_text(v: &Value, needle: &str) -> bool {
    v.to_string().contains(needle)
}

#[test]
fn a_v4_state_loses_its_sensitive_values_and_keeps_the_rest() {
    let state = json!({
        "version": 4, "serial": 7, "lineage": "abc", "terraform_version": "1.11.4",
        "outputs": {
            "ip": {"value": "10.0.0.1", "type": "string"},
            "plain": {"value": "shown", "type": "string", "sensitive": false},
            "password": {"value": "hunter2", "type": "string", "sensitive": true},
        },
        "resources": [{
            "mode": "managed", "type": "terraform_data", "name": "x",
            "instances": [{
                "attributes": {"id": "i-1", "input": {"user": "bob", "pw": "s3cret"}, "list": ["a", "tok"]},
                "sensitive_attributes": [
                    [{"type": "get_attr", "value": "input"}, {"type": "get_attr", "value": "pw"}],
                    [{"type": "get_attr", "value": "list"}, {"type": "index", "value": {"value": 1, "type": "number"}}]
                ],
                "private": "c2VjcmV0"
            }]
        }]
    });
    let r = redact(&state);
    for secret in ["hunter2", "s3cret", "tok", "c2VjcmV0"] {
        assert!(!contains_text(&r, secret), "{secret} in {r}");
    }
    assert_eq!(
        r["outputs"]["ip"]["value"], "10.0.0.1",
        "an output with no `sensitive` flag is plain (state v4 omits it): {r}"
    );
    assert!(contains_text(&r, "shown") && contains_text(&r, "bob") && contains_text(&r, "i-1"));
    assert_eq!(
        facts(&r).unwrap(),
        StateFacts {
            serial: Some(7),
            lineage: Some("abc".into()),
            terraform_version: Some("1.11.4".into())
        }
    );
}

/// Terraform 1.11's `terraform_data` lists only `input.token` as sensitive; its computed
/// `output` mirrors the input unmarked, and a plain output or attribute may embed it.
#[test]
fn a_secret_copied_into_an_unmarked_place_is_redacted_there_too() {
    let state = json!({
        "version": 4, "serial": 2, "lineage": "l", "terraform_version": "1.11.4",
        "outputs": {
            "size": {"value": "small", "type": "string"},
            "url": {"value": "https://u:tok-SECRET-1@host", "type": "string"},
            "token": {"value": "out-SECRET-2", "type": "string", "sensitive": true},
        },
        "resources": [{
            "mode": "managed", "type": "terraform_data", "name": "app",
            "instances": [{
                "attributes": {
                    "id": "b1c2",
                    "input": {"value": {"size": "small", "token": "tok-SECRET-1"}, "type": ["object", {}]},
                    "output": {"value": {"size": "small", "token": "tok-SECRET-1"}, "type": ["object", {}]},
                    "triggers_replace": ["out-SECRET-2", "on", "o"],
                },
                "sensitive_attributes": [[
                    {"type": "get_attr", "value": "input"},
                    {"type": "get_attr", "value": "value"},
                    {"type": "get_attr", "value": "token"}
                ], [{"type": "get_attr", "value": "short"}]],
            }]
        }, {
            "mode": "managed", "type": "terraform_data", "name": "other",
            "instances": [{"attributes": {"id": "x", "input": "on", "note": "one"}, "sensitive_attributes": [
                [{"type": "get_attr", "value": "input"}]
            ]}]
        }]
    });
    let r = redact(&state);
    assert!(!contains_text(&r, "SECRET"), "{r:#}");
    let app = &r["resources"][0]["instances"][0]["attributes"];
    assert_eq!(app["output"]["value"]["token"], REDACTED);
    assert_eq!(app["output"]["value"]["size"], "small");
    assert_eq!(
        r["outputs"]["url"]["value"], REDACTED,
        "holds a secret inside"
    );
    assert_eq!(r["outputs"]["size"]["value"], "small");
    assert_eq!(app["triggers_replace"], json!([REDACTED, REDACTED, "o"]));
    // A short secret ("on") is redacted where a whole string equals it, not inside others.
    assert_eq!(
        r["resources"][1]["instances"][0]["attributes"]["note"],
        "one"
    );
    assert_eq!(app["id"], "b1c2");
    assert_eq!(facts(&r), facts(&state));
}

#[test]
fn an_old_state_keeps_only_its_shape() {
    let state = json!({"version": 3, "serial": 2, "modules": [{
        "outputs": {"o": {"value": "v1", "sensitive": false}},
        "resources": {"null_resource.x": {"primary": {"id": "x", "attributes": {"secret": "abc"}}}}
    }]});
    let r = redact(&state);
    assert!(!contains_text(&r, "abc") && !contains_text(&r, "v1"));
    assert!(contains_text(&r, "null_resource.x"));
}

#[test]
fn the_writer_is_the_job_whose_window_holds_the_write() {
    let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0).unwrap();
    let jobs = vec![
        JobWindow {
            id: "j1".into(),
            from: t(0),
            until: Some(t(60)),
            wrote: None,
        },
        JobWindow {
            id: "j2".into(),
            from: t(600),
            until: Some(t(660)),
            wrote: None,
        },
        JobWindow {
            id: "j3".into(),
            from: t(1200),
            until: None,
            wrote: None,
        },
    ];
    assert_eq!(writer(t(30), &jobs), Some("j1".into()));
    assert_eq!(writer(t(700), &jobs), Some("j2".into()), "within the slack");
    assert_eq!(writer(t(900), &jobs), None, "nobody wrote then");
    assert_eq!(writer(t(5000), &jobs), Some("j3".into()), "still running");
    assert_eq!(writer(t(-5), &jobs), None);
    // A stamp is truncated to its second: a job started within it may have written it.
    let ms = |s: i64, m: i64| t(s) + Duration::milliseconds(m);
    let quick = vec![
        JobWindow {
            id: "apply".into(),
            from: ms(10, 100),
            until: Some(ms(12, 200)),
            wrote: None,
        },
        JobWindow {
            id: "restore".into(),
            from: ms(12, 600),
            until: Some(ms(14, 0)),
            wrote: None,
        },
    ];
    assert_eq!(writer(t(11), &quick), Some("apply".into()));
    assert_eq!(writer(t(12), &quick), Some("restore".into()), "{quick:?}");
    assert_eq!(writer(t(13), &quick), Some("restore".into()));
    assert_eq!(writer(t(9), &quick), None, "before either started");
}

/// Every string leaf of `v`, in order.
fn strings_of(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings_of(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings_of(v, out)),
        _ => {}
    }
}

/// Any JSON leaf, with strings from a small alphabet so secrets can be searched for.
fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{1,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Whatever an attribute holds, a value under a sensitive path and every sensitive
    /// output's value never survive redaction (marked with a secret no generated string
    /// can contain: upper case).
    #[test]
    fn nothing_under_a_sensitive_path_survives(
        attrs in proptest::collection::btree_map("[a-z]{1,4}", arb_value(), 1..5),
        pick in any::<prop::sample::Index>(),
        secret_out in arb_value(),
    ) {
        let names: Vec<String> = attrs.keys().cloned().collect();
        let name = pick.get(&names).clone();
        let mut attrs: serde_json::Map<String, Value> = attrs.into_iter().collect();
        attrs.insert(name.clone(), json!({"deep": ["SECRETVALUE", {"k": "SECRETVALUE"}]}));
        let state = json!({
            "version": 4, "serial": 1, "lineage": "LINEAGE",
            "outputs": {"o": {"value": {"x": "SECRETOUT", "y": secret_out}, "sensitive": true}},
            "resources": [{"instances": [{
                "attributes": attrs,
                "sensitive_attributes": [[{"type": "get_attr", "value": name}]]
            }]}]
        });
        let r = redact(&state);
        prop_assert!(!contains_text(&r, "SECRETVALUE"));
        prop_assert!(!contains_text(&r, "SECRETOUT"));
        prop_assert_eq!(facts(&r), facts(&state));
    }

    /// Any string that was under a sensitive path appears nowhere in the redacted state:
    /// not where a whole string equals it, and (from [`SECRET_INSIDE_MIN`] bytes) not
    /// inside another, wherever the provider copied it (an unmarked attribute, a plain
    /// output, deep in a list). Strings holding no secret are kept.
    #[test]
    fn no_sensitive_value_appears_anywhere(
        secret in arb_value(),
        attrs in proptest::collection::btree_map("[a-z]{1,4}", arb_value(), 0..5),
        prefix in "[a-z]{0,3}",
    ) {
        let mut strings = vec![];
        strings_of(&secret, &mut strings);
        let embedded: Vec<Value> = strings.iter().map(|s| Value::from(format!("{prefix}:{s}"))).collect();
        let mut all: serde_json::Map<String, Value> = attrs.clone().into_iter().collect();
        all.insert("SECRETPATH".into(), secret.clone());
        all.insert("COPY".into(), json!({"deep": [secret.clone()], "embedded": embedded}));
        let state = json!({
            "version": 4, "serial": 1, "lineage": "LINEAGE",
            "outputs": {"plain": {"value": [secret.clone(), embedded]}},
            "resources": [{"instances": [{
                "attributes": all,
                "sensitive_attributes": [[{"type": "get_attr", "value": "SECRETPATH"}]]
            }]}]
        });
        let r = redact(&state);
        let mut left = vec![];
        strings_of(&r, &mut left);
        for s in strings.iter().filter(|s| !s.is_empty()) {
            prop_assert!(!left.contains(s), "{s} survived: {r}");
            if s.len() >= SECRET_INSIDE_MIN {
                prop_assert!(!left.iter().any(|l| l.contains(s.as_str())), "{s} inside: {r}");
            }
        }
        // An attribute string that neither equals nor holds a secret is kept.
        let holds = |l: &str| strings.iter().any(|s| {
            !s.is_empty() && (l == s || (s.len() >= SECRET_INSIDE_MIN && l.contains(s.as_str())))
        });
        for (k, v) in &attrs {
            let mut before = vec![];
            strings_of(v, &mut before);
            let mut after = vec![];
            strings_of(&r["resources"][0]["instances"][0]["attributes"][k], &mut after);
            for (b, a) in before.iter().zip(&after) {
                if !holds(b) {
                    prop_assert_eq!(a, b);
                }
            }
        }
    }

    /// A state with nothing sensitive comes back unchanged.
    #[test]
    fn nothing_sensitive_is_unchanged(attrs in proptest::collection::btree_map("[a-z]{1,4}", arb_value(), 0..5)) {
        let state = json!({"version": 4, "serial": 3, "outputs": {}, "resources": [{"instances": [{"attributes": attrs, "sensitive_attributes": []}]}]});
        prop_assert_eq!(redact(&state), state);
    }
}

fn stamp(serial: u64, lineage: &str) -> StateStamp {
    StateStamp {
        serial,
        lineage: lineage.into(),
    }
}

fn facts_of(serial: u64, lineage: &str) -> StateFacts {
    StateFacts {
        serial: Some(serial),
        lineage: Some(lineage.into()),
        terraform_version: None,
    }
}

#[test]
fn two_writes_in_one_second_are_told_apart_by_serial() {
    let t = |ms: i64| {
        DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap() + Duration::milliseconds(ms)
    };
    let jobs = vec![
        JobWindow {
            id: "first".into(),
            from: t(100),
            until: Some(t(400)),
            wrote: Some(stamp(1, "l")),
        },
        JobWindow {
            id: "second".into(),
            from: t(500),
            until: Some(t(900)),
            wrote: Some(stamp(2, "l")),
        },
    ];
    let second = t(0);
    assert_eq!(
        match_writer(&facts_of(1, "l"), second, &jobs),
        (Some("first".into()), MatchedBy::Serial)
    );
    assert_eq!(
        match_writer(&facts_of(2, "l"), second, &jobs),
        (Some("second".into()), MatchedBy::Serial)
    );
    // Time alone credits both to the later job.
    assert_eq!(writer(second, &jobs), Some("second".into()));
    // A version no job ended with: by time, among jobs not ruled out by their serial.
    assert_eq!(
        match_writer(&facts_of(2, "other"), second, &jobs),
        (None, MatchedBy::None),
        "another lineage rules both out"
    );
    let mut legacy = jobs.clone();
    legacy[1].wrote = None;
    assert_eq!(
        match_writer(&facts_of(7, "l"), second, &legacy),
        (Some("second".into()), MatchedBy::Time),
        "a job with no recorded end is matched by time"
    );
    assert_eq!(
        match_writer(&StateFacts::default(), second + Duration::hours(1), &legacy),
        (None, MatchedBy::None)
    );
}

#[test]
fn a_restored_serial_goes_to_the_job_whose_window_holds_it() {
    let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0).unwrap();
    let jobs = vec![
        JobWindow {
            id: "apply".into(),
            from: t(0),
            until: Some(t(10)),
            wrote: Some(stamp(3, "l")),
        },
        JobWindow {
            id: "restore".into(),
            from: t(1000),
            until: Some(t(1010)),
            wrote: Some(stamp(3, "l")),
        },
    ];
    assert_eq!(
        match_writer(&facts_of(3, "l"), t(5), &jobs).0,
        Some("apply".into())
    );
    assert_eq!(
        match_writer(&facts_of(3, "l"), t(1005), &jobs).0,
        Some("restore".into())
    );
}

#[test]
fn a_stamp_with_a_strange_lineage_is_refused() {
    assert_eq!(
        stamp(1, "8d6c3a7e-1b2c-4d5e-9f00-0123456789ab").problem(),
        None
    );
    assert!(stamp(1, "").problem().is_some());
    assert!(stamp(1, "a b").problem().is_some());
    assert!(stamp(1, &"a".repeat(LINEAGE_MAX + 1)).problem().is_some());
}

/// Jobs on one environment, one after another (each starts after the previous ends), each
/// writing one version at its end, with gaps of 0 to 1500 ms: many in one second.
fn arb_runs() -> impl Strategy<Value = Vec<(i64, i64, bool)>> {
    proptest::collection::vec((0i64..1500, 1i64..1500, proptest::bool::ANY), 1..12)
}

proptest! {
    /// Whatever the timing, a version that is a job's recorded end is credited to that job
    /// by serial; a version of a job with no record is credited by time to a job that
    /// could have written it (its window holds the stamp).
    #[test]
    fn every_recorded_end_is_credited_to_its_job(runs in arb_runs(), lineage in "[a-f0-9]{8}") {
        let base = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let mut now = base;
        let mut jobs = vec![];
        let mut versions = vec![];
        for (i, (gap, length, recorded)) in runs.iter().enumerate() {
            let from = now + Duration::milliseconds(*gap);
            let until = from + Duration::milliseconds(*length);
            let serial = i as u64 + 1;
            // S3's stamp: the write's time truncated to its second.
            let written = until - Duration::milliseconds(1);
            let stamped = DateTime::<Utc>::from_timestamp(written.timestamp(), 0).unwrap();
            jobs.push(JobWindow {
                id: format!("j{i}").into(),
                from,
                until: Some(until),
                wrote: recorded.then(|| stamp(serial, &lineage)),
            });
            versions.push((serial, stamped, *recorded));
            now = until;
        }
        for (i, (serial, stamped, recorded)) in versions.iter().enumerate() {
            let (who, how) = match_writer(&facts_of(*serial, &lineage), *stamped, &jobs);
            if *recorded {
                prop_assert_eq!(who, Some(jobs[i].id.clone()));
                prop_assert_eq!(how, MatchedBy::Serial);
            } else {
                prop_assert_eq!(how, MatchedBy::Time);
                let w = jobs.iter().find(|j| Some(&j.id) == who.as_ref()).unwrap();
                prop_assert!(w.from < *stamped + Duration::seconds(1));
                prop_assert!(w.wrote.as_ref().is_none_or(|s| s.serial >= *serial));
            }
        }
    }
}

#[test]
fn a_restore_ending_with_the_serial_of_the_apply_before_it_in_one_second_credits_each_its_own_version(
) {
    // Seen in e2e `env_life::two_applies_make_two_versions_and_a_restore_plans_the_difference`:
    // the second apply wrote serial 2 at 03:34:39, the restore (started in that second)
    // pushed the first state back, also as serial 2, at 03:34:40.
    let t = |ms: i64| {
        DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap() + Duration::milliseconds(ms)
    };
    let jobs = vec![
        JobWindow {
            id: "second".into(),
            from: t(-600),
            until: Some(t(300)),
            wrote: Some(stamp(2, "l")),
        },
        JobWindow {
            id: "restore".into(),
            from: t(600),
            until: Some(t(1_800)),
            wrote: Some(stamp(2, "l")),
        },
    ];
    let (apply_write, restore_write) = (facts_of(2, "l"), facts_of(2, "l"));
    let page = [(&restore_write, t(1_000)), (&apply_write, t(0))];
    // Each alone, both go to the later job: the stamp's second holds both starts.
    assert_eq!(
        match_writer(&apply_write, t(0), &jobs).0,
        Some("restore".into())
    );
    assert_eq!(
        match_writers(&page, &jobs),
        vec![
            (Some("restore".into()), MatchedBy::Serial),
            (Some("second".into()), MatchedBy::Serial)
        ]
    );
    // Alone on its page, the restore's version is still the restore's.
    assert_eq!(
        match_writers(&page[..1], &jobs),
        vec![(Some("restore".into()), MatchedBy::Serial)]
    );
}
