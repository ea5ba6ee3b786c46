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
#[path = "gate_tests.rs"]
mod tests;
