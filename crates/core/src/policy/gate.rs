//! The policy gate: what a policy result does to a job, as pure rules.
//!
//! A plan checked against the applicable sets gives a [`PolicyResult`]; [`verdict`] says
//! what it does to an apply or destroy: a mandatory set's deny fails the job
//! ([`GateVerdict::Fail`], reason `policy_denied: ...`), a review set's deny or a warning
//! of a mandatory or review set sends it to a person ([`GateVerdict::Review`], even with
//! approval `auto`), and an advisory set's messages are recorded only. An evaluation error
//! counts as a deny of its set. When the plan has no data (Terraform 0.11, a plan over
//! 50 MiB), [`unavailable_sets`] turns each set's `on_unavailable` into its result: `fail`
//! is a deny at the set's level, `skip` passes.

use chrono::{DateTime, Utc};

use super::{
    overall_status, Enforcement, OnUnavailable, PolicyResult, PolicySet, PolicyStatus, Truncated,
};
use super::{SetResult, MAX_MODULES};

/// The principal that approves an `auto` job's apply phase when its plan passed the gate.
pub const POLICY_PRINCIPAL: &str = "sortie:policy";

/// The reason prefix of a job failed by a mandatory deny.
pub const POLICY_DENIED: &str = "policy_denied";

/// How many messages the fail reason quotes.
pub const REASON_MESSAGES: usize = 3;

/// The most messages kept per list (deny, warn) of one set on the job record.
pub const MAX_MESSAGES: usize = 20;

/// The longest message kept on the job record, in bytes (longer ones are cut, marked `…`).
pub const MAX_MESSAGE_BYTES: usize = 512;

/// The most set results kept on the job record.
pub const MAX_SETS: usize = 10 * MAX_MODULES;

/// What the gate does with a job whose plan was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateVerdict {
    /// Nothing stops the apply: with approval `auto` it goes on at once.
    Proceed,
    /// A person must approve: the messages that say why (review denies, warnings).
    Review(Vec<String>),
    /// A mandatory set denied: the job fails with this reason (`policy_denied: ...`).
    Fail {
        /// The job's reason, quoting the first messages.
        reason: String,
    },
}

/// The set's name as people read it: `group/set`.
fn set_label(s: &SetResult) -> String {
    if s.group.is_empty() {
        s.set.clone()
    } else {
        format!("{}/{}", s.group, s.set)
    }
}

/// A set's deny messages, with its evaluation error counted as one.
fn deny_messages(s: &SetResult) -> impl Iterator<Item = &String> {
    s.error.iter().chain(s.deny.iter())
}

/// What `result` does to an apply or destroy (see the module's rules).
pub fn verdict(result: &PolicyResult) -> GateVerdict {
    let mandatory: Vec<String> = result
        .sets
        .iter()
        .filter(|s| s.enforcement == Enforcement::Mandatory && s.denied())
        .flat_map(|s| deny_messages(s).map(move |m| format!("{}: {m}", set_label(s))))
        .collect();
    if !mandatory.is_empty() {
        let quoted: Vec<&str> = mandatory
            .iter()
            .take(REASON_MESSAGES)
            .map(String::as_str)
            .collect();
        let more = mandatory.len().saturating_sub(REASON_MESSAGES);
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        return GateVerdict::Fail {
            reason: format!("{POLICY_DENIED}: {}{tail}", quoted.join("; ")),
        };
    }
    let mut messages = Vec::new();
    for s in result
        .sets
        .iter()
        .filter(|s| s.enforcement != Enforcement::Advisory)
    {
        if s.enforcement == Enforcement::Review {
            messages.extend(deny_messages(s).map(|m| format!("{} denied: {m}", set_label(s))));
        }
        messages.extend(
            s.warn
                .iter()
                .map(|m| format!("{} warns: {m}", set_label(s))),
        );
    }
    if messages.is_empty() {
        GateVerdict::Proceed
    } else {
        GateVerdict::Review(messages)
    }
}

/// True when approving a job with this result overrides policy: a review-level set
/// denied. Such an approval needs the `manage` role, not `deploy`, and is recorded as
/// an override. Warnings alone do not need it.
pub fn approval_overrides_policy(result: Option<&PolicyResult>) -> bool {
    result.is_some_and(|r| {
        r.sets
            .iter()
            .any(|s| s.enforcement == Enforcement::Review && s.denied())
    })
}

/// True when a mandatory or review set denied (an evaluation error or unavailable plan
/// data under `on_unavailable: fail` included): the plan violates policy that is enforced.
/// A drift check's `sortie.job.policy_checked` event says so as `violation`.
pub fn violated(result: &PolicyResult) -> bool {
    result
        .sets
        .iter()
        .any(|s| s.enforcement != Enforcement::Advisory && s.denied())
}

/// The results of `sets` (each with its group) for a plan without data, for `reason`:
/// a set with `on_unavailable: fail` denies (as an error naming the reason, at its own
/// level); one with `skip` passes with nothing.
pub fn unavailable_sets<'a>(
    sets: impl IntoIterator<Item = (&'a str, &'a PolicySet)>,
    reason: &str,
) -> Vec<SetResult> {
    sets.into_iter()
        .map(|(group, set)| SetResult {
            set: set.name.clone(),
            group: group.to_string(),
            enforcement: set.enforcement,
            deny: Vec::new(),
            warn: Vec::new(),
            error: (set.on_unavailable == OnUnavailable::Fail)
                .then(|| format!("no plan data to check ({reason}); on_unavailable is fail")),
        })
        .collect()
}

/// The job record's result of checking `sets` at `at`: the overall status
/// ([`overall_status`], or `unavailable` with `unavailable`'s reason when the plan had no
/// data), and every list bounded ([`bounded`]) so a chatty policy cannot outgrow the record.
pub fn result(sets: Vec<SetResult>, unavailable: Option<&str>, at: DateTime<Utc>) -> PolicyResult {
    let (status, reason) = match unavailable {
        Some(r) => (PolicyStatus::Unavailable, Some(r.to_string())),
        None => (overall_status(&sets), None),
    };
    bounded(PolicyResult {
        status,
        checked_at: at,
        sets,
        reason,
        truncated: None,
    })
}

/// `result` with at most [`MAX_SETS`] sets, [`MAX_MESSAGES`] messages per list and
/// [`MAX_MESSAGE_BYTES`] per message (cut on a character boundary, marked `…`). The
/// status is kept: it was decided on the whole result.
pub fn bounded(mut result: PolicyResult) -> PolicyResult {
    result.sets.truncate(MAX_SETS);
    for s in &mut result.sets {
        for list in [&mut s.deny, &mut s.warn] {
            list.truncate(MAX_MESSAGES);
            for m in list.iter_mut() {
                cut(m);
            }
        }
        if let Some(e) = &mut s.error {
            cut(e);
        }
    }
    if let Some(r) = &mut result.reason {
        cut(r);
    }
    result
}

/// The bytes of a policy result kept on the job item and in `sortie.job.policy_checked`.
/// DynamoDB items are limited to 400 KB and EventBridge entries to 256 KB; the result
/// gets 96 KiB of either, leaving the rest for the job's other attributes and the event's
/// other fields (docs/decisions/limits.md).
pub const SUMMARY_MAX_BYTES: usize = 96 * 1024;

/// `result` as kept on the job item and in the event: unchanged when its JSON fits in
/// `budget` bytes; else every set keeps its name, group, enforcement and verdict (the
/// first message of each non-empty list and its error, cut shorter until all sets fit),
/// then further messages in order while they fit, and [`Truncated`] says how many were
/// left out, each set's counts, and `full_key` (where the caller keeps the whole result).
pub fn summary(result: &PolicyResult, budget: usize, full_key: Option<&str>) -> PolicyResult {
    if json_len(result) <= budget {
        return result.clone();
    }
    let total: usize = result
        .sets
        .iter()
        .map(|s| s.deny.len() + s.warn.len())
        .sum();
    let counts = result
        .sets
        .iter()
        .map(|s| [s.deny.len() as u32, s.warn.len() as u32])
        .collect();
    let mut out = result.clone();
    // The largest `omitted` is counted while fitting, so the real one never adds bytes.
    out.truncated = Some(Truncated {
        omitted_messages: total as u32,
        counts,
        full_result_key: full_key.map(str::to_string),
    });
    for first in [256, 64, 16, 0] {
        for (s, full) in out.sets.iter_mut().zip(&result.sets) {
            for (list, all) in [(&mut s.deny, &full.deny), (&mut s.warn, &full.warn)] {
                list.clear();
                list.extend(all.first().map(|m| cut_json(m, first)));
            }
            s.error = full.error.as_deref().map(|e| cut_json(e, first));
        }
        if let Some(r) = &result.reason {
            out.reason = Some(cut_json(r, first));
        }
        if json_len(&out) <= budget {
            break;
        }
    }
    let mut size = json_len(&out);
    let mut kept = out.sets.iter().filter(|s| !s.deny.is_empty()).count()
        + out.sets.iter().filter(|s| !s.warn.is_empty()).count();
    for (s, full) in out.sets.iter_mut().zip(&result.sets) {
        for (list, all) in [(&mut s.deny, &full.deny), (&mut s.warn, &full.warn)] {
            for m in all.iter().skip(1) {
                let cost = json_len(m) + 1;
                if size + cost > budget {
                    continue;
                }
                size += cost;
                kept += 1;
                list.push(m.clone());
            }
        }
    }
    if let Some(t) = &mut out.truncated {
        t.omitted_messages = (total - kept) as u32;
    }
    out
}

fn json_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// `m`'s longest prefix whose JSON string is at most `max` bytes, marked `…` when cut.
fn cut_json(m: &str, max: usize) -> String {
    if json_len(m) <= max {
        return m.to_string();
    }
    let mut out = String::new();
    let mut size = 2 + '…'.len_utf8();
    for c in m.chars() {
        let mut buf = [0; 4];
        let n = json_len(c.encode_utf8(&mut buf) as &str) - 2;
        if size + n > max {
            break;
        }
        size += n;
        out.push(c);
    }
    out.push('…');
    out
}

fn cut(m: &mut String) {
    if m.len() <= MAX_MESSAGE_BYTES {
        return;
    }
    let mut end = MAX_MESSAGE_BYTES - '…'.len_utf8();
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    m.truncate(end);
    m.push('…');
}

#[cfg(test)]
mod tests {
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
}
