//! Issue 25 item 6: every string Sortie shapes from user input satisfies the AWS or
//! Kubernetes rule of the field it goes to, for arbitrary input.

use proptest::prelude::*;
use sortie_core::limits::*;
use sortie_core::outcome::CANCELED_BY;

/// Any Unicode text, including controls, astral characters and long runs.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,600}",
        "[a-zA-Z0-9|@:/._-]{0,600}",
        proptest::collection::vec(any::<char>(), 0..400).prop_map(|v| v.into_iter().collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_stop_reason_is_at_most_255_bytes_and_keeps_its_start(s in text()) {
        let reason = stop_reason(&format!("{CANCELED_BY}{s}"));
        prop_assert!(is_stop_reason(&reason), "{} bytes", reason.len());
        prop_assert!(reason.chars().count() <= ECS_STOP_REASON_MAX);
        prop_assert!(reason.starts_with(CANCELED_BY));
        prop_assert!(!has_control(&reason));
    }

    #[test]
    fn a_tag_value_is_one_sts_and_ecs_accept(s in text()) {
        let v = tag_value(&s);
        prop_assert!(is_session_tag_value(&v), "{v:?}");
        prop_assert!(v.chars().count() <= ECS_TAG_VALUE_MAX);
    }

    #[test]
    fn a_tag_key_is_one_sts_and_ecs_accept(s in text()) {
        let k = tag_key(&s);
        prop_assert!(is_tag_key(&k), "{k:?}");
    }

    #[test]
    fn a_session_name_is_one_sts_accepts(s in text()) {
        let n = session_name(&s);
        prop_assert!(is_role_session_name(&n), "{n:?}");
    }

    #[test]
    fn a_started_by_is_one_ecs_accepts(s in text()) {
        let v = started_by_value(&s);
        prop_assert!(is_ecs_started_by(&v), "{v:?}");
    }

    #[test]
    fn a_label_value_is_one_kubernetes_accepts(s in text()) {
        let v = label_value(&s);
        prop_assert!(is_label_value(&v), "{v:?}");
    }

    #[test]
    fn a_dns_label_is_one_kubernetes_accepts(s in text()) {
        let v = dns_label(&s);
        prop_assert!(is_dns_label(&v), "{v:?}");
    }

    #[test]
    fn what_fits_already_is_kept_as_is(s in "[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?") {
        prop_assert_eq!(label_value(&s), s.clone());
        prop_assert_eq!(dns_label(&s), s.clone());
        prop_assert_eq!(tag_value(&s), s.clone());
        let name = session_name(&s);
        prop_assert_eq!(name.trim_end_matches('-'), s.trim_end_matches('-'));
        prop_assert_eq!(stop_reason(&s), s);
    }
}

#[test]
fn a_cancel_by_a_400_character_subject_is_cut_on_a_character_boundary() {
    // 'é' is two bytes: a cut at byte 252 would split one.
    let subject = "é".repeat(200);
    let reason = stop_reason(&format!("{CANCELED_BY}{subject}"));
    assert!(reason.len() <= ECS_STOP_REASON_MAX, "{}", reason.len());
    assert!(reason.ends_with("..."));
    assert!(reason.starts_with(CANCELED_BY));
    let short = format!("{CANCELED_BY}alice");
    assert_eq!(stop_reason(&short), short);
}

#[test]
fn long_values_that_share_a_start_stay_apart() {
    let a = format!("{}a", "x".repeat(100));
    let b = format!("{}b", "x".repeat(100));
    assert_ne!(label_value(&a), label_value(&b));
    assert_ne!(dns_label(&a), dns_label(&b));
    assert_eq!(label_value(&a).len(), LABEL_VALUE_MAX);
    assert_eq!(label_value("--"), "");
    assert_eq!(dns_label("--"), "x");
    assert_eq!(tag_key("aws:env"), "_aws:env");
    assert_eq!(session_name("a"), "a-");
    assert_eq!(
        session_name("sortie-01jnx6v4k2m8q9r3s5t7w0y1za"),
        "sortie-01jnx6v4k2m8q9r3s5t7w0y1za"
    );
}

#[test]
fn the_runner_container_gets_what_the_other_containers_leave_of_the_task_memory() {
    assert_eq!(runner_container_memory(8192, 0, None), Ok(8192));
    assert_eq!(runner_container_memory(8192, 512, Some(1024)), Ok(7680));
    let refused = runner_container_memory(2048, 1024, Some(1536)).unwrap_err();
    assert!(refused.contains("1024 MiB"), "{refused}");
    assert!(runner_container_memory(512, 510, None).is_err());
}
