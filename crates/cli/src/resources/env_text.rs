//! The text renderers of environments: their table, settings and drift, a rule
//! resolution and a refresh of the runner, and an apply's outputs.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sortie_api::model::{EnvironmentView, OutputsView, RefreshRunnerAnswer, ResolutionAnswer};
use sortie_core::drift::DriftStatus;
use sortie_core::environment::APPROVAL_TIMEOUT_DEFAULT_SECONDS;
use sortie_core::{Considered, RuleVerdict};

use super::shared::{json_word, or_dash};
use crate::output::{change_summary, details, table, when};

pub(super) fn outputs_text(view: &OutputsView, of_env: bool) -> String {
    if view.outputs.is_empty() {
        return format!(
            "no outputs (apply job {} on {})\n",
            view.job_id, view.environment
        );
    }
    let rows = view
        .outputs
        .iter()
        .map(|(name, o)| {
            let value = if o.sensitive {
                "(sensitive)".to_string()
            } else {
                o.value
                    .as_ref()
                    .map_or_else(|| "null".to_string(), Value::to_string)
            };
            vec![name.clone(), value]
        })
        .collect();
    let mut text = table(&["NAME", "VALUE"], rows);
    if of_env {
        text.push_str(&format!(
            "(from apply job {}, the latest successful apply of {})\n",
            view.job_id, view.environment
        ));
    }
    text
}

/// One environment: its row, then its settings and what drift detection and applies
/// recorded.
pub(super) fn env_text(e: &EnvironmentView) -> String {
    let mut text = env_table(std::slice::from_ref(e));
    text.push('\n');
    text.push_str(&details(&settings_details(e)));
    text
}

/// An environment's approval, drift and tool settings, and what they recorded.
pub(super) fn settings_details(e: &EnvironmentView) -> Vec<(&'static str, String)> {
    let r = &e.record;
    let s = &r.environment.settings;
    let timeout = match s.approval_timeout_seconds {
        Some(t) => span(t),
        None => format!("{} (the default)", span(APPROVAL_TIMEOUT_DEFAULT_SECONDS)),
    };
    let runners = || "- (the runner's)".to_string();
    vec![
        ("approval", s.approval.as_str().to_string()),
        ("approval timeout", timeout),
        (
            "four eyes",
            if s.four_eyes { "yes" } else { "no" }.to_string(),
        ),
        (
            "drift schedule",
            s.drift_schedule
                .as_ref()
                .map_or_else(|| "-".to_string(), |c| format!("{c} (UTC)")),
        ),
        ("drift remediation", json_word(&s.drift_remediation)),
        (
            "next drift check",
            r.next_drift_at.map_or_else(|| "-".to_string(), when),
        ),
        (
            "drift",
            r.drift
                .as_ref()
                .map_or_else(|| "- (not checked yet)".to_string(), drift_text),
        ),
        (
            "last skipped check",
            r.drift_skipped.as_ref().map_or_else(
                || "-".to_string(),
                |k| format!("{}: {}", when(k.at), k.reason),
            ),
        ),
        (
            "last apply",
            r.last_apply.as_ref().map_or_else(
                || "-".to_string(),
                |a| format!("job {} at {}", a.job_id, when(a.at)),
            ),
        ),
        (
            "tool",
            s.tool.map_or_else(runners, |t| t.as_str().to_string()),
        ),
        (
            "tool version",
            s.tool_version.clone().unwrap_or_else(runners),
        ),
        (
            "repository",
            s.vcs.as_ref().map_or_else(|| "-".to_string(), binding_text),
        ),
        (
            "lock",
            r.lock.as_ref().map_or_else(
                || "-".to_string(),
                |l| format!("locked by {} at {}: \"{}\"", l.by, when(l.at), l.reason),
            ),
        ),
        ("expiry", expiry_of(e)),
    ]
}

/// The environment's expiry: its end and where it comes from (its own end, its own TTL,
/// or a group's default TTL, maybe extended); when its expiry's destroy ran, that; `-`
/// when it does not expire. A view without the computed end (a list's) shows its own
/// setting.
fn expiry_of(e: &EnvironmentView) -> String {
    use sortie_core::expiry::ExpirySource;
    let r = &e.record;
    let s = &r.environment.settings;
    if let Some(d) = &r.destroyed {
        return format!("destroyed at {} (extend it to use it again)", when(d.at));
    }
    if let Some(x) = &e.expiry {
        let ttl = x.ttl.as_deref().unwrap_or("?");
        let why = match x.source {
            ExpirySource::ExpiresAt => "its own end".to_string(),
            ExpirySource::Ttl => format!("its own ttl {ttl} from {}", json_word(&s.ttl_from)),
            ExpirySource::GroupDefault => format!(
                "the default ttl {ttl} of group {}{}",
                x.group.as_ref().map_or("?", |g| g.as_str()),
                if x.extended { ", extended" } else { "" }
            ),
        };
        return format!("{} ({why})", when(x.at));
    }
    match (&s.expires_at, &s.ttl) {
        (Some(at), Some(ttl)) => {
            format!("{} (ttl {ttl} from {})", when(*at), json_word(&s.ttl_from))
        }
        (Some(at), None) => when(*at),
        (None, Some(ttl)) => format!("ttl {ttl} from {}", json_word(&s.ttl_from)),
        (None, None) => "-".to_string(),
    }
}

/// `acme/infra web/dev (base main, globs web/dev/**; apply after_merge; needs 2 approvals,
/// mergeable)`: an environment's binding in one line; a repository on another host than
/// GitHub (the default) is named with it, `gitlab:acme/platform/infra`.
pub(super) fn binding_text(b: &sortie_core::vcs::VcsBinding) -> String {
    let dir = if b.directory.is_empty() {
        "/"
    } else {
        &b.directory
    };
    let mut needs = Vec::new();
    if let Some(n) = b.requirements.approved {
        needs.push(format!("{n} approval{}", if n == 1 { "" } else { "s" }));
    }
    if b.requirements.mergeable {
        needs.push("mergeable".to_string());
    }
    if b.requirements.undiverged {
        needs.push("up to date with the base".to_string());
    }
    let repository = match b.provider {
        sortie_core::vcs::VcsProvider::Github => b.repository.clone(),
        other => format!("{}:{}", other.as_str(), b.repository),
    };
    let mut text = format!(
        "{} {dir} (base {}, changes {}; apply {}",
        repository,
        b.branch,
        b.globs().join(","),
        b.apply.as_str()
    );
    if !needs.is_empty() {
        text.push_str(&format!("; needs {}", needs.join(", ")));
    }
    text.push(')');
    text
}

/// `drifted (+0 ~1 -0) at <time> by job <id>`, with the reason of an `error` and the
/// remediating apply when there is one.
pub(super) fn drift_text(d: &DriftStatus) -> String {
    let mut text = d.status.as_str().to_string();
    if let Some(s) = &d.summary {
        text.push_str(&format!(" ({})", change_summary(s)));
    }
    text.push_str(&format!(" at {} by job {}", when(d.checked_at), d.job_id));
    if let Some(reason) = &d.reason {
        text.push_str(&format!(": {reason}"));
    }
    if let Some(job) = &d.remediation_job_id {
        text.push_str(&format!("; remediated by apply job {job}"));
    }
    text
}

/// Seconds in the largest whole unit: `86400` is `24h`, `5400` is `90m`.
pub(super) fn span(seconds: u32) -> String {
    match seconds {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

pub(super) fn labels_text(labels: &BTreeMap<String, String>) -> String {
    or_dash(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

pub(super) fn tags_text(tags: &BTreeSet<String>) -> String {
    or_dash(tags.iter().cloned().collect::<Vec<_>>().join(","))
}

pub(super) fn env_table(envs: &[EnvironmentView]) -> String {
    let rows = envs
        .iter()
        .map(|e| {
            let env = &e.record.environment;
            let lock = match &e.record.active_job {
                Some(job) => format!("{job} (+{} queued)", e.record.queued_count),
                None => "-".into(),
            };
            vec![
                env.path.to_string(),
                env.env_type.clone(),
                env.runner.runner_id.to_string(),
                env.runner.rule_id.clone(),
                labels_text(&env.labels),
                tags_text(&env.tags),
                lock,
                e.version.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "PATH",
            "TYPE",
            "RUNNER",
            "RULE",
            "LABELS",
            "TAGS",
            "ACTIVE JOB",
            "VERSION",
        ],
        rows,
    )
}

/// The winning rule and why, and how many other rules there were.
pub(super) fn resolution_details(r: &ResolutionAnswer) -> String {
    let others = r.counts.total().saturating_sub(r.counts.won as usize);
    details(&[
        ("runner", r.rule.runner_id.to_string()),
        ("rule", format!("{} (scope {})", r.rule.id, r.rule.scope)),
        ("why", r.why.clone()),
        ("other rules", others.to_string()),
    ])
}

pub(super) fn fate(c: &Considered) -> String {
    match &c.verdict {
        RuleVerdict::Won => "won".into(),
        RuleVerdict::Lost { to, because } => format!("lost to {to}: {because}"),
        RuleVerdict::OutOfScope => "out of scope".into(),
        RuleVerdict::RunnerNotVisible => "runner not visible at its scope".into(),
        RuleVerdict::NotMatched { reason } => format!("not matched: {reason}"),
    }
}

pub(super) fn refresh_text(path: &str, a: &RefreshRunnerAnswer) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut text = details(&[
        ("environment", path.to_string()),
        ("previous runner", a.previous_runner_id.clone()),
        ("chosen runner", a.runner_id.clone()),
        ("changed", yes_no(a.changed).to_string()),
        (
            "dry run",
            if a.dry_run {
                "yes (nothing was changed)".to_string()
            } else {
                "no".to_string()
            },
        ),
        (
            "rule",
            format!(
                "{} (scope {})",
                a.resolution.rule.id, a.resolution.rule.scope
            ),
        ),
        ("why", a.resolution.why.clone()),
    ]);
    let rows: Vec<Vec<String>> = a
        .resolution
        .explanation
        .iter()
        .flatten()
        .map(|c| {
            vec![
                c.rule_id.clone(),
                c.scope.to_string(),
                c.runner_id.to_string(),
                c.priority.to_string(),
                fate(c),
            ]
        })
        .collect();
    if !rows.is_empty() {
        text.push('\n');
        text.push_str(&table(
            &["RULE", "SCOPE", "RUNNER", "PRIORITY", "FATE"],
            rows,
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_binding_names_its_host_unless_it_is_github() {
        let binding = |provider: &str, repository: &str| {
            serde_json::from_value::<sortie_core::vcs::VcsBinding>(json!({
                "provider": provider, "repository": repository, "directory": "web/dev",
            }))
            .unwrap()
        };
        let gitlab = binding_text(&binding("gitlab", "acme/platform/infra"));
        assert!(
            gitlab.starts_with("gitlab:acme/platform/infra web/dev (base main"),
            "{gitlab}"
        );
        let github = binding_text(&binding("github", "acme/infra"));
        assert!(
            github.starts_with("acme/infra web/dev (base main"),
            "{github}"
        );
    }

    #[test]
    fn outputs_are_compact_json_and_sensitive_ones_are_hidden() {
        let view: OutputsView = serde_json::from_value(json!({
            "job_id": "j1", "environment": "acme/prod",
            "outputs": {
                "url": {"sensitive": false, "value": "https://x", "type": "string"},
                "ports": {"sensitive": false, "value": [80, 443]},
                "password": {"sensitive": true}
            }
        }))
        .unwrap();
        assert_eq!(
            outputs_text(&view, false),
            "NAME      VALUE\npassword  (sensitive)\nports     [80,443]\nurl       \"https://x\"\n"
        );
        assert!(outputs_text(&view, true)
            .ends_with("(from apply job j1, the latest successful apply of acme/prod)\n"));
        let none: OutputsView = serde_json::from_value(
            json!({"job_id": "j1", "environment": "acme/prod", "outputs": {}}),
        )
        .unwrap();
        assert_eq!(
            outputs_text(&none, true),
            "no outputs (apply job j1 on acme/prod)\n"
        );
    }

    #[test]
    fn a_drift_reads_as_one_line() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .to_utc();
        let mut d = DriftStatus {
            status: sortie_core::drift::DriftVerdict::Drifted,
            checked_at: at,
            job_id: "j9".into(),
            summary: Some(sortie_core::ChangeSummary {
                add: 0,
                change: 1,
                destroy: 0,
                has_changes: Some(true),
            }),
            reason: None,
            remediation_job_id: None,
        };
        assert_eq!(
            drift_text(&d),
            "drifted (+0 ~1 -0) at 2026-01-02 03:04:05 UTC by job j9"
        );
        d.status = sortie_core::drift::DriftVerdict::Error;
        d.summary = None;
        d.reason = Some("the plan failed".into());
        assert_eq!(
            drift_text(&d),
            "error at 2026-01-02 03:04:05 UTC by job j9: the plan failed"
        );
        assert_eq!(span(86400), "24h");
        assert_eq!(span(5400), "90m");
        assert_eq!(span(301), "301s");
    }
}
