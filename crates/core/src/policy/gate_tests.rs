//! The policy gate's rules, each proven on small results.

use super::*;
use proptest::prelude::*;

fn set(enforcement: Enforcement, deny: &[&str], warn: &[&str]) -> SetResult {
    SetResult {
        set: "tags".into(),
        group: "acme".into(),
        enforcement,
        deny: deny.iter().map(|s| s.to_string()).collect(),
        warn: warn.iter().map(|s| s.to_string()).collect(),
        error: None,
    }
}

fn checked(sets: Vec<SetResult>) -> PolicyResult {
    result(sets, None, Utc::now())
}

#[test]
fn a_mandatory_deny_fails_quoting_the_first_messages() {
    let r = checked(vec![
        set(Enforcement::Review, &["r1"], &[]),
        set(Enforcement::Mandatory, &["m1", "m2", "m3", "m4"], &[]),
    ]);
    assert_eq!(r.status, PolicyStatus::Denied);
    let GateVerdict::Fail { reason } = verdict(&r) else {
        panic!("not a fail: {:?}", verdict(&r));
    };
    assert_eq!(
        reason,
        "policy_denied: acme/tags: m1; acme/tags: m2; acme/tags: m3 (and 1 more)"
    );
}

#[test]
fn a_review_deny_or_a_warning_sends_to_review_and_advisory_is_recorded_only() {
    let r = checked(vec![set(Enforcement::Review, &["no tags"], &[])]);
    assert_eq!(
        verdict(&r),
        GateVerdict::Review(vec!["acme/tags denied: no tags".into()])
    );
    assert!(approval_overrides_policy(Some(&r)));
    let w = checked(vec![set(Enforcement::Mandatory, &[], &["big change"])]);
    assert_eq!(w.status, PolicyStatus::Warned);
    assert_eq!(
        verdict(&w),
        GateVerdict::Review(vec!["acme/tags warns: big change".into()])
    );
    assert!(!approval_overrides_policy(Some(&w)));
    let a = checked(vec![set(Enforcement::Advisory, &["d"], &["w"])]);
    assert_eq!(a.status, PolicyStatus::Warned);
    assert_eq!(verdict(&a), GateVerdict::Proceed);
    assert!(!approval_overrides_policy(Some(&a)));
    assert!(!approval_overrides_policy(None));
}

#[test]
fn an_evaluation_error_is_a_deny_of_its_set() {
    let mut s = set(Enforcement::Mandatory, &[], &[]);
    s.error = Some("evaluation timed out".into());
    let GateVerdict::Fail { reason } = verdict(&checked(vec![s])) else {
        panic!("an error must deny");
    };
    assert!(reason.contains("evaluation timed out"), "{reason}");
}

fn policy_set(enforcement: Enforcement, on_unavailable: OnUnavailable) -> PolicySet {
    PolicySet {
        name: "s".into(),
        description: None,
        modules: vec![],
        enforcement,
        criteria: None,
        on_unavailable,
    }
}

#[test]
fn unavailable_plan_data_applies_each_sets_rule() {
    let fail = policy_set(Enforcement::Mandatory, OnUnavailable::Fail);
    let skip = policy_set(Enforcement::Mandatory, OnUnavailable::Skip);
    let reason = crate::plan::TERRAFORM_011;
    let skipped = result(
        unavailable_sets([("acme", &skip)], reason),
        Some(reason),
        Utc::now(),
    );
    assert_eq!(skipped.status, PolicyStatus::Unavailable);
    assert_eq!(skipped.reason.as_deref(), Some(reason));
    assert_eq!(verdict(&skipped), GateVerdict::Proceed);
    let failed = result(
        unavailable_sets([("acme", &fail)], reason),
        Some(reason),
        Utc::now(),
    );
    let GateVerdict::Fail { reason: why } = verdict(&failed) else {
        panic!("on_unavailable fail must fail a mandatory set");
    };
    assert!(
        why.starts_with("policy_denied: acme/s: no plan data"),
        "{why}"
    );
    assert!(why.contains(reason), "{why}");
    let review = policy_set(Enforcement::Review, OnUnavailable::Fail);
    let held = result(
        unavailable_sets([("acme", &review)], reason),
        Some(reason),
        Utc::now(),
    );
    assert!(matches!(verdict(&held), GateVerdict::Review(_)));
}

#[test]
fn long_messages_are_cut_on_a_character_boundary() {
    let long = "é".repeat(MAX_MESSAGE_BYTES);
    let many: Vec<String> = (0..50).map(|_| long.clone()).collect();
    let mut s = set(Enforcement::Advisory, &[], &[]);
    s.deny = many;
    let r = checked(vec![s]);
    assert_eq!(r.sets[0].deny.len(), MAX_MESSAGES);
    assert!(r.sets[0]
        .deny
        .iter()
        .all(|m| m.len() <= MAX_MESSAGE_BYTES && m.ends_with('…')));
}

fn any_enforcement() -> impl Strategy<Value = Enforcement> {
    prop_oneof![
        Just(Enforcement::Mandatory),
        Just(Enforcement::Review),
        Just(Enforcement::Advisory)
    ]
}

fn any_set() -> impl Strategy<Value = SetResult> {
    (
        any_enforcement(),
        proptest::collection::vec("[a-z ]{1,12}", 0..3),
        proptest::collection::vec("[a-z ]{1,12}", 0..3),
        proptest::option::of("[a-z ]{1,12}"),
    )
        .prop_map(|(enforcement, deny, warn, error)| SetResult {
            set: "s".into(),
            group: "g".into(),
            enforcement,
            deny,
            warn,
            error,
        })
}

proptest! {
    /// The verdict follows the strictest set: any mandatory deny fails; else any review
    /// deny or non-advisory warning holds for a person; else the job proceeds. Advisory
    /// sets never change the verdict.
    #[test]
    fn the_verdict_follows_the_strictest_set(sets in proptest::collection::vec(any_set(), 0..6)) {
        let r = checked(sets.clone());
        let mandatory = sets.iter().any(|s| s.enforcement == Enforcement::Mandatory && s.denied());
        let review = sets.iter().any(|s| s.enforcement == Enforcement::Review && s.denied());
        let warned = sets.iter().any(|s| s.enforcement != Enforcement::Advisory && !s.warn.is_empty());
        match verdict(&r) {
            GateVerdict::Fail { reason } => {
                prop_assert!(mandatory);
                prop_assert!(reason.starts_with("policy_denied: "));
            }
            GateVerdict::Review(m) => {
                prop_assert!(!mandatory && (review || warned));
                prop_assert!(!m.is_empty());
            }
            GateVerdict::Proceed => prop_assert!(!mandatory && !review && !warned),
        }
        let without_advisory: Vec<SetResult> = sets
            .iter()
            .filter(|s| s.enforcement != Enforcement::Advisory)
            .cloned()
            .collect();
        prop_assert_eq!(verdict(&r), verdict(&checked(without_advisory)));
        prop_assert_eq!(approval_overrides_policy(Some(&r)), review);
        prop_assert_eq!(violated(&r), mandatory || review);
        // A verdict that fails or holds always comes with a denied or warned status.
        if verdict(&r) != GateVerdict::Proceed {
            prop_assert!(matches!(r.status, PolicyStatus::Denied | PolicyStatus::Warned));
        }
    }

    /// Unavailable plan data: a `fail` set denies at its level, a `skip` set passes.
    #[test]
    fn unavailable_follows_on_unavailable(rules in proptest::collection::vec(
        (any_enforcement(), prop_oneof![Just(OnUnavailable::Fail), Just(OnUnavailable::Skip)]), 0..6)) {
        let sets: Vec<PolicySet> = rules.iter().map(|(e, o)| policy_set(*e, *o)).collect();
        let results = unavailable_sets(sets.iter().map(|s| ("g", s)), "why");
        prop_assert_eq!(results.len(), sets.len());
        for (r, s) in results.iter().zip(&sets) {
            prop_assert_eq!(r.denied(), s.on_unavailable == OnUnavailable::Fail);
            prop_assert_eq!(r.enforcement, s.enforcement);
        }
        let fails = rules.iter().any(|(e, o)| *e == Enforcement::Mandatory && *o == OnUnavailable::Fail);
        let r = result(results, Some("why"), Utc::now());
        prop_assert_eq!(matches!(verdict(&r), GateVerdict::Fail { .. }), fails);
    }

    /// Bounding keeps the status and never grows a message.
    #[test]
    fn bounding_keeps_the_status(sets in proptest::collection::vec(any_set(), 0..6), long in ".{0,700}") {
        let mut sets = sets;
        if let Some(s) = sets.first_mut() { s.deny.push(long); }
        let r = checked(sets.clone());
        prop_assert_eq!(r.status, overall_status(&sets));
        prop_assert!(r.sets.iter().all(|s| s.deny.iter().chain(&s.warn).all(|m| m.len() <= MAX_MESSAGE_BYTES)));
    }
}

/// DynamoDB's item size of `v` stored as a map under `name`: attribute names and
/// UTF-8 values, 3 bytes per list or map plus 1 per element, numbers at their digits
/// plus 1 (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
fn dynamodb_size(name: &str, v: &serde_json::Value) -> usize {
    use serde_json::Value;
    let value = match v {
        Value::Null | Value::Bool(_) => 1,
        Value::Number(n) => n.to_string().len() + 1,
        Value::String(s) => s.len(),
        Value::Array(a) => 3 + a.iter().map(|e| 1 + dynamodb_size("", e)).sum::<usize>(),
        Value::Object(o) => {
            3 + o
                .iter()
                .map(|(k, e)| 1 + dynamodb_size(k, e))
                .sum::<usize>()
        }
    };
    name.len() + value
}

/// The largest result `bounded` lets through: [`MAX_SETS`] sets, [`MAX_MESSAGES`]
/// messages per list, every message and error at [`MAX_MESSAGE_BYTES`] of `text`.
fn worst(text: &str) -> PolicyResult {
    let message: String = text.chars().cycle().take(MAX_MESSAGE_BYTES).collect();
    let messages: Vec<&str> = vec![message.as_str(); MAX_MESSAGES + 5];
    let mut sets: Vec<SetResult> = (0..MAX_SETS + 5)
        .map(|_| set(Enforcement::Advisory, &messages, &messages))
        .collect();
    sets[0].enforcement = Enforcement::Mandatory;
    sets[1].error = Some(message.clone());
    result(sets, None, Utc::now())
}

const DYNAMODB_ITEM_BYTES: usize = 400 * 1024;
const EVENTBRIDGE_ENTRY_BYTES: usize = 256 * 1024;

#[test]
fn the_bounded_worst_case_fits_neither_an_item_nor_an_event_but_its_summary_does() {
    let full = worst("\"\\é");
    let json = serde_json::to_vec(&full).unwrap();
    assert!(json.len() > EVENTBRIDGE_ENTRY_BYTES, "{} bytes", json.len());
    let item = dynamodb_size("policy", &serde_json::to_value(&full).unwrap());
    assert!(item > DYNAMODB_ITEM_BYTES, "{item} bytes");
    let s = summary(&full, SUMMARY_MAX_BYTES, Some("jobs/j/policy.json"));
    assert!(serde_json::to_vec(&s).unwrap().len() <= SUMMARY_MAX_BYTES);
    let t = s.truncated.as_ref().expect("truncated");
    assert_eq!(t.full_result_key.as_deref(), Some("jobs/j/policy.json"));
    let kept: usize = s.sets.iter().map(|s| s.deny.len() + s.warn.len()).sum();
    assert_eq!(
        kept + t.omitted_messages as usize,
        2 * MAX_SETS * MAX_MESSAGES
    );
    assert!(
        kept > 2 * MAX_SETS,
        "more than the first messages fit: {kept}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Whatever the text (quotes, backslashes, multi-byte), the worst case's summary
    /// is within budget as the event's JSON and as DynamoDB counts it, and keeps every
    /// set's name, enforcement, verdict and counts.
    #[test]
    fn the_worst_case_summary_fits_the_item_and_the_event(
        text in "[\"\\\\é€😀a\n]{1,16}",
        name in "[\"\\\\é€😀a]{1,32}",
    ) {
        let mut full = worst(&text);
        for s in &mut full.sets {
            s.set = name.clone();
        }
        let s = summary(&full, SUMMARY_MAX_BYTES, Some("jobs/j/policy.json"));
        let json = serde_json::to_vec(&s).unwrap();
        prop_assert!(json.len() <= SUMMARY_MAX_BYTES, "{} bytes", json.len());
        let item = dynamodb_size("policy", &serde_json::to_value(&s).unwrap());
        prop_assert!(item <= SUMMARY_MAX_BYTES, "{} item bytes", item);
        prop_assert_eq!(s.status, full.status);
        prop_assert_eq!(s.sets.len(), full.sets.len());
        let t = s.truncated.as_ref().unwrap();
        for ((a, b), c) in s.sets.iter().zip(&full.sets).zip(&t.counts) {
            prop_assert_eq!(&a.set, &b.set);
            prop_assert_eq!(a.enforcement, b.enforcement);
            prop_assert_eq!(a.denied(), b.denied());
            prop_assert_eq!(a.warn.is_empty(), b.warn.is_empty());
            prop_assert_eq!(*c, [b.deny.len() as u32, b.warn.len() as u32]);
        }
        prop_assert_eq!(std::mem::discriminant(&verdict(&s)), std::mem::discriminant(&verdict(&full)));
    }
}
