//! Jobs as text: the table of a submitted or listed job, and one job's details with its
//! transitions.

use serde_json::Value;
use sortie_api::model::JobView;

use crate::output::{change_summary as summary, details, table, when};

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

pub(super) fn submitted_table(view: &JobView) -> String {
    table(
        &["ID", "ENVIRONMENT", "OPERATION", "STATE"],
        vec![vec![
            view.job.id.to_string(),
            view.job.environment.to_string(),
            view.job.request.operation.as_str().into(),
            view.job.state.to_string(),
        ]],
    )
}

pub(super) fn job_table(view: &JobView) -> String {
    let job = &view.job;
    let head = table(
        &[
            "ID",
            "ENVIRONMENT",
            "OPERATION",
            "STATE",
            "REQUESTED BY",
            "CREATED",
            "SUMMARY",
        ],
        vec![vec![
            job.id.to_string(),
            job.environment.to_string(),
            job.request.operation.as_str().into(),
            job.state.to_string(),
            job.requested_by.clone(),
            job.transitions
                .first()
                .map(|t| when(t.at))
                .unwrap_or_else(|| "-".into()),
            view.summary
                .as_ref()
                .map(summary)
                .unwrap_or_else(|| "-".into()),
        ]],
    );
    let transitions = table(&["FROM", "TO", "AT", "REASON"], transition_rows(job, when));
    let more = job_details(view);
    if more.is_empty() {
        return format!("{}\n\n{}", head.trim_end(), transitions);
    }
    format!("{}\n\n{}\n{}", head.trim_end(), details(&more), transitions)
}

/// A value's serde name (`approved`, `terraform`).
pub(super) fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// What a job has beyond its row: the tool, the review and its decision, the plan phase.
/// Empty for a plain job.
pub(super) fn job_details(view: &JobView) -> Vec<(&'static str, String)> {
    let job = &view.job;
    let mut d = Vec::new();
    if let Some(w) = &view.waiting {
        d.push(("waiting", w.text.clone()));
    }
    let asked: Vec<String> = job
        .tool
        .iter()
        .map(word)
        .chain(job.tool_version.clone())
        .collect();
    if !asked.is_empty() {
        d.push(("tool asked", asked.join(" ")));
    }
    if let Some(used) = &view.tool_used {
        d.push((
            "tool used",
            format!("{} {}", word(&used.tool), used.version),
        ));
    }
    // Sensitive variables by name only: the API never answers a value.
    for name in job.request.sensitive_variables.keys() {
        d.push((
            "variable",
            format!("{name} = {}", sortie_core::sensitive::SHOWN),
        ));
    }
    if job.drift_check {
        d.push((
            "drift check",
            "yes (a scheduled plan of the last apply)".into(),
        ));
    }
    if let Some(review) = &job.review {
        let four_eyes = if review.four_eyes {
            ", four eyes (the requester may not approve)"
        } else {
            ""
        };
        let why = if review.policy_only {
            "by the policy gate (approval auto: a plan it passes is applied at once)"
        } else {
            "required"
        };
        d.push((
            "review",
            format!("{why}, phase {}{four_eyes}", review.phase.as_str()),
        ));
        if let Some(since) = review.awaiting_since {
            d.push(("awaiting since", when(since)));
            if review.decision.is_none() {
                let deadline = since + chrono::Duration::seconds(i64::from(review.timeout_seconds));
                d.push((
                    "deadline",
                    format!("{} (then discarded, unless decided before)", when(deadline)),
                ));
            }
        }
        if let Some(decision) = &review.decision {
            let comment = decision
                .comment
                .as_ref()
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            let overrode = if decision.overrode_policy {
                " (overrode policy)"
            } else {
                ""
            };
            d.push((
                "decision",
                format!(
                    "{} by {} at {}{overrode}{comment}",
                    word(&decision.verdict),
                    decision.by,
                    when(decision.at)
                ),
            ));
        }
    }
    if let Some(policy) = &view.policy {
        policy_details(policy, &mut d);
    }
    if let Some(plan) = &view.plan_phase {
        d.push((
            "plan phase",
            format!(
                "{} (attempt {}, ended {})",
                plan.summary
                    .as_ref()
                    .map(summary)
                    .unwrap_or_else(|| "(no change summary)".into()),
                plan.attempt,
                when(plan.ended_at)
            ),
        ));
    }
    d
}

/// The policy gate's result: the status and when, then one line per set with its messages
/// (`deny`, `warn`, an evaluation error).
fn policy_details(policy: &sortie_core::policy::PolicyResult, d: &mut Vec<(&'static str, String)>) {
    let reason = policy
        .reason
        .as_ref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    d.push((
        "policy",
        format!(
            "{}{reason}, checked {}",
            word(&policy.status),
            when(policy.checked_at)
        ),
    ));
    for s in &policy.sets {
        let name = format!("{}/{} ({})", s.group, s.set, s.enforcement.as_str());
        let mut said = false;
        for m in s.error.iter().chain(&s.deny) {
            d.push(("policy deny", format!("{name}: {m}")));
            said = true;
        }
        for m in &s.warn {
            d.push(("policy warn", format!("{name}: {m}")));
            said = true;
        }
        if !said {
            d.push(("policy pass", name));
        }
    }
}

/// The rows of a job's history: a folded entry shows its last time and `(xN since <first>)`,
/// and the entries a long history dropped show as one row after the first ones kept.
pub(super) fn transition_rows(
    job: &sortie_core::Job,
    when: impl Fn(chrono::DateTime<chrono::Utc>) -> String,
) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = job
        .transitions
        .iter()
        .map(|t| {
            let reason = if t.count > 1 {
                format!("{} (x{} since {})", t.reason, t.count, when(t.at))
            } else {
                t.reason.clone()
            };
            vec![
                t.from.map_or_else(|| "-".into(), |f| f.to_string()),
                t.to.to_string(),
                when(t.latest_at()),
                reason,
            ]
        })
        .collect();
    if job.transitions_dropped > 0 {
        let at = sortie_core::retry::HISTORY_KEEP_FIRST.min(rows.len());
        rows.insert(
            at,
            vec![
                "…".into(),
                "…".into(),
                "".into(),
                format!("{} transitions not kept", job.transitions_dropped),
            ],
        );
    }
    rows
}
