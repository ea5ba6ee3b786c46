use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::json;

use super::address::{address_refusal, address_refusal_local, checked_addresses, destination_url};
use super::delivery::*;
use super::message::{slack_escape, slack_message, webhook_body};
use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn internal_addresses_are_refused_and_public_ones_are_not() {
    for refused in [
        "169.254.169.254",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "127.0.0.1",
        "127.1.2.3",
        "0.0.0.0",
        "100.64.0.1",
        "198.18.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "::",
        "::1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "2002:a9fe:a9fe::1",
        "2001::1",
        "2001:db8::1",
        "fd00:ec2::254",
        "fc00::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "::10.0.0.1",
    ] {
        assert!(
            address_refusal(ip(refused)).is_some(),
            "{refused} is allowed"
        );
    }
    for public in [
        "8.8.8.8",
        "1.1.1.1",
        "52.94.76.10",
        "172.32.0.1",
        "100.128.0.1",
        "192.169.0.1",
        "2606:4700:4700::1111",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "::ffff:8.8.8.8",
    ] {
        assert_eq!(address_refusal(ip(public)), None, "{public} is refused");
    }
    // Locally (`sortie dev`) only loopback is let through.
    assert_eq!(address_refusal_local(ip("127.0.0.1")), None);
    assert_eq!(address_refusal_local(ip("::1")), None);
    assert!(address_refusal_local(ip("169.254.169.254")).is_some());
    assert!(address_refusal_local(ip("10.0.0.1")).is_some());
}

proptest! {
    /// Every address the standard library calls private, loopback, link-local, multicast,
    /// broadcast, documentation or unspecified is refused, in IPv4 and IPv4-mapped IPv6
    /// alike.
    #[test]
    fn what_std_calls_internal_is_refused_in_both_forms(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let internal = v4.is_private() || v4.is_loopback() || v4.is_link_local()
            || v4.is_multicast() || v4.is_broadcast() || v4.is_documentation()
            || v4.is_unspecified();
        if internal {
            prop_assert!(address_refusal(IpAddr::V4(v4)).is_some(), "{v4}");
        }
        prop_assert_eq!(
            address_refusal(IpAddr::V4(v4)),
            address_refusal(IpAddr::V6(v4.to_ipv6_mapped()))
        );
        // NAT64's well-known prefix carries the same verdict.
        let nat64 = Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(bits));
        prop_assert_eq!(
            address_refusal(IpAddr::V4(v4)).is_some(),
            address_refusal(IpAddr::V6(nat64)).is_some()
        );
    }

    /// Every IPv6 address std calls loopback, unspecified or multicast, or that is unique
    /// local or link-local, is refused.
    #[test]
    fn internal_ipv6_is_refused(bits in any::<u128>()) {
        let v6 = Ipv6Addr::from(bits);
        let first = v6.segments()[0];
        let internal = v6.is_loopback() || v6.is_unspecified() || v6.is_multicast()
            || first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfe80;
        if internal {
            prop_assert!(address_refusal(IpAddr::V6(v6)).is_some(), "{v6}");
        }
    }
}

#[test]
fn a_destination_url_is_https_to_a_public_host() {
    for (url, local) in [
        ("https://hooks.example.com/sortie", false),
        ("https://203.0.114.7:8443/x", false),
        ("http://127.0.0.1:8080/hook", true),
        ("http://localhost:9/x", true),
        ("https://[::1]:8443/x", true),
    ] {
        assert!(destination_url(url, local).is_ok(), "{url} (local {local})");
    }
    for (url, local, said) in [
        ("http://hooks.example.com/", false, "https://"),
        ("http://hooks.example.com/", true, "https://"),
        ("http://127.0.0.1:8080/", false, "https://"),
        (
            "https://169.254.169.254/latest/meta-data",
            false,
            "link-local",
        ),
        (
            "https://169.254.169.254/latest/meta-data",
            true,
            "link-local",
        ),
        ("https://10.0.0.1/", false, "private"),
        ("https://[::ffff:10.0.0.1]/", false, "private"),
        ("https://[fd00:ec2::254]/", false, "unique local"),
        ("https://localhost/", false, "localhost"),
        ("https://127.0.0.1/", false, "loopback"),
        ("https://user:pw@hooks.example.com/", false, "user name"),
        ("hooks.example.com/x", false, "not a URL"),
    ] {
        let problem = destination_url(url, local).unwrap_err();
        assert!(problem.contains(said), "{url}: {problem}");
    }
}

#[test]
fn a_name_is_refused_when_any_address_it_resolves_to_is() {
    let public = [ip("8.8.8.8"), ip("2606:4700::1111")];
    assert_eq!(
        checked_addresses("hooks.example.com", &public, false).unwrap(),
        public.to_vec()
    );
    let mixed = [ip("8.8.8.8"), ip("10.0.0.1")];
    let problem = checked_addresses("rebind.example.com", &mixed, false).unwrap_err();
    assert!(
        problem.contains("10.0.0.1") && problem.contains("private"),
        "{problem}"
    );
    assert!(checked_addresses("none.example.com", &[], false).is_err());
    assert!(checked_addresses("localhost", &[ip("127.0.0.1")], true).is_ok());
    assert!(checked_addresses("metadata", &[ip("169.254.169.254")], true).is_err());
}

proptest! {
    /// A delivery signed at a time verifies at that time with its own body and secret, and
    /// with nothing else: another body, secret or timestamp fails.
    #[test]
    fn a_signature_verifies_only_its_own_body_secret_and_time(
        secret in proptest::collection::vec(any::<u8>(), 1..64),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        timestamp in 1_000_000_000i64..3_000_000_000,
        flip in any::<usize>(),
    ) {
        let signed = signature(&secret, timestamp, &body);
        let ts = timestamp.to_string();
        prop_assert_eq!(
            verify(&secret, Some(&ts), Some(&signed), &body, timestamp, 300),
            Ok(())
        );
        let mut other = body.clone();
        if other.is_empty() {
            other.push(0);
        } else {
            let at = flip % other.len();
            other[at] ^= 1;
        }
        prop_assert_eq!(
            verify(&secret, Some(&ts), Some(&signed), &other, timestamp, 300),
            Err(VerifyError::Signature)
        );
        let later = (timestamp + 1).to_string();
        prop_assert_eq!(
            verify(&secret, Some(&later), Some(&signed), &body, timestamp, 300),
            Err(VerifyError::Signature)
        );
        let mut wrong = secret.clone();
        wrong[0] ^= 1;
        prop_assert_eq!(
            verify(&wrong, Some(&ts), Some(&signed), &body, timestamp, 300),
            Err(VerifyError::Signature)
        );
    }
}

#[test]
fn a_replay_outside_the_tolerance_and_a_missing_header_are_refused() {
    let body = br#"{"type":"sortie.job.ended"}"#;
    let signed = signature(b"s3cret", 1_700_000_000, body);
    assert_eq!(
        verify(
            b"s3cret",
            Some("1700000000"),
            Some(&signed),
            body,
            1_700_000_301,
            300
        ),
        Err(VerifyError::Stale(301))
    );
    assert_eq!(
        verify(b"s3cret", None, Some(&signed), body, 1_700_000_000, 300),
        Err(VerifyError::Timestamp)
    );
    assert_eq!(
        verify(
            b"s3cret",
            Some("1700000000"),
            None,
            body,
            1_700_000_000,
            300
        ),
        Err(VerifyError::Signature)
    );
    assert!(
        signed.starts_with("sha256=") && signed.len() == 7 + 64,
        "{signed}"
    );
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0).unwrap()
}

fn answered(status: u16) -> Attempt {
    Attempt::Answered {
        status,
        retry_after: None,
    }
}

#[test]
fn what_follows_an_attempt() {
    let first = at(0);
    assert_eq!(next(&answered(204), 1, first, first, 7), Next::Delivered);
    for final_status in [400, 401, 403, 404, 410, 422] {
        match next(&answered(final_status), 1, first, first, 7) {
            Next::GaveUp(why) => assert!(why.contains(&final_status.to_string()), "{why}"),
            other => panic!("{final_status}: {other:?}"),
        }
    }
    match next(&answered(301), 1, first, first, 7) {
        Next::GaveUp(why) => assert!(why.contains("redirects are not followed"), "{why}"),
        other => panic!("301: {other:?}"),
    }
    for retried in [
        answered(408),
        answered(429),
        answered(500),
        answered(503),
        Attempt::TimedOut,
        Attempt::Unreachable("connection refused".into()),
    ] {
        match next(&retried, 1, first, first, 7) {
            Next::RetryAt(when) => {
                let wait = (when - first).num_seconds();
                assert!((15..=30).contains(&wait), "{retried:?}: {wait}");
            }
            other => panic!("{retried:?}: {other:?}"),
        }
    }
    // A 429's Retry-After is honoured.
    let slow_down = Attempt::Answered {
        status: 429,
        retry_after: Some(120),
    };
    assert_eq!(
        next(&slow_down, 3, first, at(100), 7),
        Next::RetryAt(at(220))
    );
    // The guard's refusal is final.
    assert!(matches!(
        next(&Attempt::Refused("10.0.0.1".into()), 1, first, first, 7),
        Next::GaveUp(_)
    ));
    // Nothing is retried past the window.
    match next(
        &answered(503),
        40,
        first,
        first + RETRY_WINDOW - Duration::seconds(10),
        7,
    ) {
        Next::GaveUp(why) => assert!(why.contains("24 hours"), "{why}"),
        other => panic!("{other:?}"),
    }
}

proptest! {
    /// A receiver that always fails is given up on within the window, after a bounded
    /// number of attempts, each retry later than the last attempt and inside the window.
    #[test]
    fn a_failing_receiver_is_given_up_on_within_a_day(seed in any::<u64>(), status in 500u16..600) {
        let first = at(0);
        let mut now = first;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            prop_assert!(attempts <= 60, "more than 60 attempts");
            match next(&answered(status), attempts, first, now, seed ^ u64::from(attempts)) {
                Next::RetryAt(when) => {
                    prop_assert!(when > now);
                    prop_assert!(when <= first + RETRY_WINDOW);
                    now = when;
                }
                Next::GaveUp(_) => break,
                Next::Delivered => prop_assert!(false, "delivered by a {}", status),
            }
        }
        prop_assert!(now > first + RETRY_WINDOW - Duration::seconds(MAX_RETRY_SECONDS));
    }

    /// Each wait is between half its ceiling and the ceiling, and never over an hour.
    #[test]
    fn the_backoff_doubles_up_to_an_hour(attempt in 1u32..100, seed in any::<u64>()) {
        let wait = backoff_seconds(attempt, seed);
        let ceiling = (FIRST_RETRY_SECONDS << (attempt.min(20) - 1)).min(MAX_RETRY_SECONDS);
        prop_assert!(wait >= ceiling / 2 && wait <= ceiling, "{wait} for ceiling {ceiling}");
    }
}

#[test]
fn retry_after_is_read_as_seconds_or_a_date() {
    let now = Utc.with_ymd_and_hms(2015, 10, 21, 7, 27, 0).unwrap();
    assert_eq!(retry_after_seconds("120", now), Some(120));
    assert_eq!(
        retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now),
        Some(60)
    );
    assert_eq!(retry_after_seconds("soon", now), None);
    assert_eq!(retry_after_seconds("-5", now), Some(0));
}

#[test]
fn the_history_keeps_a_kilobyte_of_an_answer_cut_between_characters() {
    let answer = "é".repeat(2000);
    let kept = kept_answer(answer.as_bytes());
    assert!(kept.len() <= ANSWER_KEPT_BYTES && kept.len() >= ANSWER_KEPT_BYTES - 1);
    assert!(kept.chars().all(|c| c == 'é'));
    assert_eq!(kept_answer(b"ok"), "ok");
}

#[test]
fn published_events_map_to_the_kinds_a_destination_subscribes_to() {
    let state = |s: &str| json!({ "state": s });
    assert_eq!(
        kind_of("sortie.job.ended", &state("succeeded")),
        Some(EventKind::JobCompleted)
    );
    assert_eq!(
        kind_of("sortie.job.ended", &state("timed_out")),
        Some(EventKind::JobFailed)
    );
    assert_eq!(
        kind_of("sortie.job.policy_checked", &json!({"violation": true})),
        Some(EventKind::PolicyViolation)
    );
    assert_eq!(
        kind_of("sortie.job.policy_checked", &json!({"violation": false})),
        None
    );
    assert_eq!(kind_of(NOTIFICATION_FAILED, &json!({})), None);
    assert_eq!(kind_of("sortie.job.dispatched", &json!({})), None);
    // The end's old name, published beside it for one release, is never notified: a
    // destination is sent each end once.
    assert_eq!(kind_of("sortie.job.completed", &state("failed")), None);
    for kind in EventKind::ALL {
        let name = serde_json::to_value(kind).unwrap();
        assert_eq!(name, kind.as_str());
    }
}

#[test]
fn filters_pick_kinds_and_environments() {
    let all = Filters::default();
    assert!(all.wants(EventKind::JobFailed, Some("acme/web/prod")));
    assert!(all.wants(EventKind::ConfigurationChanged, None));
    let prod_failures = Filters {
        events: vec![EventKind::JobFailed, EventKind::AwaitingApproval],
        environments: "acme/**/prod".into(),
    };
    assert!(prod_failures.wants(EventKind::JobFailed, Some("acme/web/prod")));
    assert!(!prod_failures.wants(EventKind::JobFailed, Some("acme/web/dev")));
    assert!(!prod_failures.wants(EventKind::JobCompleted, Some("acme/web/prod")));
    let bad = Filters {
        events: vec![EventKind::JobFailed, EventKind::JobFailed],
        environments: "acme/[".into(),
    };
    let paths: Vec<String> = bad
        .problems("filters")
        .into_iter()
        .map(|p| p.path)
        .collect();
    assert_eq!(paths, ["filters.environments", "filters.events"]);
}

#[test]
fn slack_messages_say_what_happened_and_cannot_be_hijacked() {
    let hostile = json!({
        "environment": "acme/web/<!channel>",
        "operation": "apply",
        "state": "failed",
        "reason": "Error: <https://evil.example|click> & more\nsecond line",
        "job_id": "01jnx6v4k2m8q9r3s5t7w0y1za",
        "requested_by": "mallory <@U123>",
    });
    let text = slack_message(
        EventKind::JobFailed,
        &hostile,
        "https://sortie.example.com/",
    )["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains("(<https://sortie.example.com/jobs/01jnx6v4k2m8q9r3s5t7w0y1za|job 01jnx6v4k2m8q9r3s5t7w0y1za>)"),
        "{text}"
    );
    // The only `<` is the job's link.
    assert_eq!(text.matches('<').count(), 1, "{text}");
    assert!(
        text.contains("&lt;!channel&gt;") && text.contains("&amp; more second line"),
        "{text}"
    );
    let waiting = slack_message(EventKind::AwaitingApproval, &hostile, "https://c")["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        waiting.contains("requested by mallory &lt;@U123&gt; awaits approval")
            && waiting.contains("`acme/web/&lt;!channel&gt;`"),
        "{waiting}"
    );
    // A job id that is not a ULID is not linked.
    let odd = slack_message(
        EventKind::JobCompleted,
        &json!({"job_id": "x|y>", "environment": "e", "operation": "plan", "state": "succeeded"}),
        "https://c",
    );
    assert!(!odd["text"].as_str().unwrap().contains('<'), "{odd}");
    assert_eq!(slack_escape("a<b>&\u{7}"), "a&lt;b&gt;&amp; ");
}

#[test]
fn a_webhook_receives_the_event_as_published() {
    let detail = json!({"job_id": "j", "state": "succeeded"});
    assert_eq!(
        webhook_body("d-1", "sortie.job.ended", "2026-11-30T00:00:00Z", &detail),
        json!({"id": "d-1", "type": "sortie.job.ended", "time": "2026-11-30T00:00:00Z", "detail": detail})
    );
}

#[test]
fn a_destination_is_read_with_every_problem_named() {
    let webhook = DestinationInput::from_value(
        &json!({"type": "webhook", "url": "https://hooks.example.com/sortie",
            "events": ["job_failed", "awaiting_approval"], "environments": "acme/**/prod"}),
        false,
    )
    .unwrap();
    assert_eq!(
        webhook.spec.target,
        Target::Webhook {
            url: "https://hooks.example.com/sortie".into()
        }
    );
    assert_eq!(webhook.spec.filters.events.len(), 2);
    assert_eq!(webhook.slack_webhook_url, None);
    // Stored and shown without any secret, and read back the same.
    let stored = serde_json::to_value(&webhook.spec).unwrap();
    assert_eq!(stored["type"], "webhook");
    assert_eq!(
        serde_json::from_value::<DestinationSpec>(stored).unwrap(),
        webhook.spec
    );

    let secret = "https://hooks.slack.com/services/T000/B000/XXXXXXXX";
    let slack = DestinationInput::from_value(
        &json!({"type": "slack", "slack_webhook_url": secret}),
        false,
    )
    .unwrap();
    assert_eq!(slack.spec.target, Target::Slack {});
    assert!(
        !format!("{slack:?}").contains("hooks.slack.com"),
        "Debug shows the secret"
    );
    assert_eq!(slack.slack_webhook_url.as_deref(), Some(secret));
    assert!(!serde_json::to_string(&slack.spec)
        .unwrap()
        .contains("hooks.slack.com"));
    assert_eq!(slack.spec.filters, Filters::default());

    let problems = |body: serde_json::Value, local: bool| -> Vec<(String, String)> {
        DestinationInput::from_value(&body, local)
            .unwrap_err()
            .problems
            .into_iter()
            .map(|p| (p.path, p.problem))
            .collect()
    };
    let paths = |found: Vec<(String, String)>| -> Vec<String> {
        found.into_iter().map(|(path, _)| path).collect()
    };
    assert_eq!(paths(problems(json!({}), false)), ["type"]);
    assert_eq!(
        paths(problems(
            json!({"type": "webhook", "url": "https://169.254.169.254/x", "events": ["job_exploded"]}),
            false
        )),
        ["events", "url"]
    );
    assert_eq!(paths(problems(json!({"type": "webhook"}), false)), ["url"]);
    assert_eq!(
        paths(problems(
            json!({"type": "slack", "url": "https://hooks.example.com/", "colour": "red"}),
            false
        )),
        ["colour", "url"]
    );
    let bad_slack = problems(
        json!({"type": "slack", "slack_webhook_url": "https://evil.example.com/services/x"}),
        false,
    );
    assert_eq!(bad_slack[0].0, "slack_webhook_url");
    assert!(
        !bad_slack[0].1.contains("evil.example.com"),
        "the secret is quoted"
    );
    // Locally, a loopback receiver stands in for a webhook and for Slack.
    assert!(DestinationInput::from_value(
        &json!({"type": "webhook", "url": "http://127.0.0.1:9000/hook"}),
        true
    )
    .is_ok());
    assert!(DestinationInput::from_value(
        &json!({"type": "slack", "slack_webhook_url": "http://127.0.0.1:9000/slack"}),
        true
    )
    .is_ok());
    assert_eq!(
        paths(problems(
            json!({"type": "webhook", "url": "http://127.0.0.1:9000/hook"}),
            false
        )),
        ["url"]
    );
}

/// The README's Python receiver computes this with `hmac.new(secret, f"{ts}.".encode() +
/// body, hashlib.sha256)`: the same signature, so its few lines verify a real delivery.
#[test]
fn the_signature_is_the_one_the_readme_receiver_computes() {
    assert_eq!(
        delivery::signature(b"whsec_x", 1_700_000_000, br#"{"a":1}"#),
        "sha256=b3438763ab46d9634b9844c8722818eaf523f803db1327484c6067462a5fd6d1"
    );
}

/// The rule's list is exactly the detail types a kind is read from: every listed one gives a
/// kind (with the detail that makes it one), and every kind comes from a listed one.
#[test]
fn the_notified_detail_types_are_exactly_those_a_kind_is_read_from() {
    let detail = json!({"state": "failed", "violation": true});
    let mut kinds = std::collections::BTreeSet::new();
    for detail_type in NOTIFIED_DETAIL_TYPES {
        let kind =
            kind_of(detail_type, &detail).unwrap_or_else(|| panic!("{detail_type} gives no kind"));
        kinds.insert(kind);
    }
    kinds.insert(kind_of("sortie.job.ended", &json!({"state": "succeeded"})).unwrap());
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        EventKind::ALL.to_vec()
    );
    for other in [
        "sortie.job.dispatched",
        "sortie.job.approved",
        NOTIFICATION_FAILED,
        "sortie.environment.expiry_waiting",
    ] {
        assert_eq!(kind_of(other, &detail), None, "{other}");
    }
}

/// A lock's message names the environment, or the group a freeze holds, who and why.
#[test]
fn a_lock_change_names_its_environment_or_group_who_and_why() {
    let env = slack_message(
        EventKind::LockChanged,
        &json!({"environment": "acme/web/prod", "action": "locked", "by": "bob", "reason": "incident <42>"}),
        "https://console",
    );
    assert_eq!(
        env["text"],
        ":lock: `acme/web/prod` was locked by bob: incident &lt;42&gt;"
    );
    let group = slack_message(
        EventKind::LockChanged,
        &json!({"group": "acme/payments", "action": "frozen", "by": "dave", "reason": "release"}),
        "https://console",
    );
    assert_eq!(
        group["text"],
        ":lock: group `acme/payments` was frozen by dave: release"
    );
}
