//! What a pull request is shown: one sticky comment for all its environments
//! ([`render_comment`]) and one check run per environment ([`render_check`]).
//!
//! Everything from a plan is hostile text written by the pull request's author: it is
//! escaped where it is inline ([`escape`]) and fenced where it is a diff, so that it can
//! never break out of its place (no HTML, no `</details>`, no link, no mention). Both
//! renderings always fit GitHub's limits: a diff is shortened first, and the comment cuts
//! environments last. Lengths are counted in UTF-8 bytes, which is never fewer than
//! characters: GitHub documents its limits in characters, but its checks API measures some
//! in bytes (<https://github.com/github/rest-api-description/issues/5399>), so bytes is the
//! reading that holds both ways.

use serde::{Deserialize, Serialize};

mod comment;
mod markdown;

pub use comment::render_comment;
pub use markdown::{escape, escape_within};

use markdown::{
    code_span, code_text, fence_for, fence_over, link, longest_backtick_run, whole_lines_within,
    ELLIPSIS,
};

/// What every Sortie check run's name starts with; [`check_name`] adds the environment.
pub const CHECK_NAME_PREFIX: &str = "sortie: ";
/// The first line of Sortie's one comment on a pull request: how Sortie finds it again to
/// edit it rather than add another.
pub const COMMENT_MARKER: &str = "<!-- sortie:pull-request -->";
/// The longest issue comment body GitHub takes: "Body is too long (maximum is 65536
/// characters)", the 422 of
/// <https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>.
pub const COMMENT_MAX_CHARS: usize = 65_536;
/// The longest check run `output.summary`: "Maximum length: 65535 characters"
/// (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>).
pub const CHECK_SUMMARY_MAX_CHARS: usize = 65_535;
/// The longest check run `output.text`: "Maximum length: 65535 characters" (same page).
pub const CHECK_TEXT_MAX_CHARS: usize = 65_535;
/// The longest check run `output.title` Sortie writes. GitHub documents no limit for it;
/// it is one line on the checks page, so Sortie keeps it short.
pub const CHECK_TITLE_MAX_CHARS: usize = 255;
/// The most annotations one check run request carries: "The Checks API limits the number
/// of annotations to a maximum of 50 per API request"
/// (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>).
pub const CHECK_ANNOTATIONS_MAX: usize = 50;
/// The most changed resources a check run's summary lists, then "and N more".
pub const CHANGED_LINES_MAX: usize = 50;

/// The longest environment name shown, in escaped bytes.
const ENV_NAME_MAX: usize = 300;
/// The longest reason (a failure, why it was not planned) shown, in escaped bytes.
const REASON_MAX: usize = 2_000;
/// The longest address shown, in escaped bytes.
const ADDRESS_MAX: usize = 600;
/// The longest action shown, in escaped bytes.
const ACTION_MAX: usize = 40;
/// The longest policy set name shown, in escaped bytes.
const POLICY_SET_MAX: usize = 200;
/// The longest policy message shown, in escaped bytes.
const POLICY_MESSAGE_MAX: usize = 500;
/// The most messages shown per policy set.
const POLICY_MESSAGES_MAX: usize = 10;
/// The most bytes of policy results per environment, then "and N more policy sets".
const POLICY_BLOCK_MAX: usize = 6_000;
/// The longest apply command shown, in bytes.
const APPLY_COMMAND_MAX: usize = 300;
/// The most bytes a diff's "more lines" note takes (its number and link included).
const MORE_NOTE_MAX: usize = 620;

/// What a report shows of a plan: its changed resources (every resource change but the
/// no-ops, in the plan's order, with the action's word: `create`, `update`, `delete`,
/// `replace`, `read`) and its text as `terraform show` prints it, without colour. The text
/// is whole: [`render_check`] and [`render_comment`] cut it to GitHub's limits.
pub fn plan_shown(view: &crate::plan::PlanView) -> (Vec<ChangedResource>, String) {
    use crate::plan::ChangeAction;
    let changed = view
        .resource_changes
        .iter()
        .filter(|r| r.action != ChangeAction::NoOp)
        .map(|r| ChangedResource {
            address: r.address.clone(),
            action: match r.action {
                ChangeAction::Create => "create",
                ChangeAction::Update => "update",
                ChangeAction::Delete => "delete",
                ChangeAction::Replace => "replace",
                ChangeAction::Read => "read",
                ChangeAction::NoOp => "no-op",
            }
            .to_string(),
        })
        .collect();
    let whole = crate::plan::PlanPage {
        available: true,
        reason: None,
        resource_changes: view.resource_changes.clone(),
        output_changes: view.output_changes.clone(),
        counts: view.counts,
        total_resources: view.resource_changes.len(),
        next_cursor: None,
    };
    (
        changed,
        crate::plan::render(&whole, crate::plan::Palette::PLAIN),
    )
}

/// The check run name of an environment: `sortie: <environment>`.
pub fn check_name(environment: &str) -> String {
    format!("{CHECK_NAME_PREFIX}{environment}")
}

/// Where an environment is, for a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EnvStatus {
    /// Its plan waits for the environment's lock.
    Queued {
        /// The job it waits behind, when known.
        behind: Option<String>,
    },
    /// Its plan is running.
    Planning,
    /// Planned, with changes.
    Planned,
    /// Planned: nothing to change.
    NoChanges,
    /// The plan failed.
    PlanFailed {
        /// Why (hostile text: it may quote the configuration).
        reason: String,
    },
    /// A policy set denied the plan.
    PolicyDenied,
    /// The plan waits for a person's approval before its apply.
    AwaitingApproval,
    /// Its apply is running.
    Applying,
    /// Applied.
    Applied,
    /// The apply failed.
    ApplyFailed {
        /// Why (hostile text).
        reason: String,
    },
    /// The job was cancelled.
    Cancelled,
    /// Sortie did not plan it.
    NotPlanned {
        /// Why, in Sortie's words.
        why: String,
    },
}

/// A plan's resource counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Resources to add.
    pub add: u32,
    /// Resources to change in place.
    pub change: u32,
    /// Resources to destroy (a replacement counts here and in `add`).
    pub destroy: u32,
}

/// One changed resource of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedResource {
    /// Its address, such as `module.net.aws_subnet.a[0]` (hostile text).
    pub address: String,
    /// What the plan does to it, such as `create`, `update`, `delete`, `replace`.
    pub action: String,
}

/// One policy set's result on a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyLine {
    /// The set's name.
    pub set: String,
    /// `pass`, `warn` or `deny`.
    pub outcome: String,
    /// Its messages (hostile text: they may quote the plan).
    pub messages: Vec<String>,
}

/// One environment's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvReport {
    /// The environment's name.
    pub environment: String,
    /// Where it is.
    pub status: EnvStatus,
    /// The plan's counts, once planned.
    pub counts: Option<Counts>,
    /// The changed resources, once planned.
    pub changed: Vec<ChangedResource>,
    /// The policy sets' results.
    pub policy: Vec<PolicyLine>,
    /// The plan as text, redacted (hostile text).
    pub diff: Option<String>,
    /// The job's id.
    pub job_id: Option<String>,
    /// The job's page.
    pub job_url: Option<String>,
    /// The comment that applies this plan, such as `/sortie apply prod`, when one may.
    pub apply_command: Option<String>,
}

/// Everything the sticky comment shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommentInput {
    /// The head commit the plans are of.
    pub head_sha: String,
    /// One report per environment the pull request touches, in the order shown.
    pub environments: Vec<EnvReport>,
    /// Sentences for the whole pull request (escaped when shown).
    pub notes: Vec<String>,
}

/// A check run's status, in GitHub's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Not started.
    Queued,
    /// Running.
    InProgress,
    /// Done: see the conclusion.
    Completed,
}

/// A completed check run's conclusion, in GitHub's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// Passed.
    Success,
    /// Failed.
    Failure,
    /// Neither: shown grey.
    Neutral,
    /// Cancelled.
    Cancelled,
    /// Waits for someone to act.
    ActionRequired,
    /// Not run.
    Skipped,
}

/// A check run's content, ready for the client to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutput {
    /// The check run's name ([`check_name`]).
    pub name: String,
    /// Its status.
    pub status: CheckStatus,
    /// Its conclusion, when completed.
    pub conclusion: Option<Conclusion>,
    /// `output.title`: one line.
    pub title: String,
    /// `output.summary`: Markdown.
    pub summary: String,
    /// `output.text`: the plan, fenced.
    pub text: Option<String>,
}

/// The status word and icon of an environment, for the comment's table and a check title.
fn status_words(status: &EnvStatus) -> (&'static str, &'static str) {
    match status {
        EnvStatus::Queued { .. } => ("⏳", "queued"),
        EnvStatus::Planning => ("⏳", "planning"),
        EnvStatus::Planned => ("📝", "planned"),
        EnvStatus::NoChanges => ("✅", "no changes"),
        EnvStatus::PlanFailed { .. } => ("❌", "plan failed"),
        EnvStatus::PolicyDenied => ("⛔", "denied by policy"),
        EnvStatus::AwaitingApproval => ("✋", "awaiting approval"),
        EnvStatus::Applying => ("⏳", "applying"),
        EnvStatus::Applied => ("✅", "applied"),
        EnvStatus::ApplyFailed { .. } => ("❌", "apply failed"),
        EnvStatus::Cancelled => ("⚪", "cancelled"),
        EnvStatus::NotPlanned { .. } => ("⚪", "not planned"),
    }
}

/// `+a ~c -d`.
fn counts_text(c: &Counts) -> String {
    format!("+{} ~{} -{}", c.add, c.change, c.destroy)
}

/// An apply command (Sortie's, at most [`APPLY_COMMAND_MAX`] bytes) as a code span.
fn apply_span(command: &str) -> String {
    code_span(crate::limits::prefix_within_bytes(
        command,
        APPLY_COMMAND_MAX,
    ))
}

/// The line linking the environment's job, when it has one, with a blank line before.
fn job_line(env: &EnvReport) -> Option<String> {
    let id = env.job_id.as_deref()?;
    let label = format!("job {}", escape_within(id, ENV_NAME_MAX));
    Some(format!("\n{}\n", link(&label, env.job_url.as_deref())))
}

/// A plan's text as it goes in a code block: line ends as `\n`, no trailing line end.
fn plan_text(diff: &str) -> String {
    code_text(diff.trim_end_matches(['\n', '\r']))
}

/// A plan's text (from [`plan_text`]) as one whole fenced block.
fn whole_block(text: &str) -> String {
    format!("{0}\n{text}\n{0}\n", fence_for(text))
}

/// What the environment waits for, or what happened, in Sortie's words (safe Markdown).
fn status_sentence(env: &EnvReport) -> String {
    let apply = env
        .apply_command
        .as_deref()
        .map(|c| format!(" To apply it, comment {}.", apply_span(c)))
        .unwrap_or_default();
    match &env.status {
        EnvStatus::Queued { behind: Some(job) } => format!(
            "Queued: the plan waits for job {} to end.",
            escape_within(job, ENV_NAME_MAX)
        ),
        EnvStatus::Queued { behind: None } => {
            "Queued: the plan waits for the environment's earlier jobs.".into()
        }
        EnvStatus::Planning => "Planning.".into(),
        EnvStatus::Planned => format!("Planned.{apply}"),
        EnvStatus::NoChanges => "Planned: no changes.".into(),
        EnvStatus::PlanFailed { reason } => {
            format!("The plan failed: {}", escape_within(reason, REASON_MAX))
        }
        EnvStatus::PolicyDenied => {
            "A policy set denied the plan: it cannot be applied until the plan changes.".into()
        }
        EnvStatus::AwaitingApproval => {
            format!("The plan waits for approval before it is applied.{apply}")
        }
        EnvStatus::Applying => "Applying.".into(),
        EnvStatus::Applied => "Applied.".into(),
        EnvStatus::ApplyFailed { reason } => {
            format!("The apply failed: {}", escape_within(reason, REASON_MAX))
        }
        EnvStatus::Cancelled => "The job was cancelled.".into(),
        EnvStatus::NotPlanned { why } => {
            format!("Not planned: {}", escape_within(why, REASON_MAX))
        }
    }
}

/// The policy results as Markdown list lines, at most [`POLICY_BLOCK_MAX`] bytes.
fn policy_lines(policy: &[PolicyLine]) -> String {
    let mut out = String::new();
    for (i, line) in policy.iter().enumerate() {
        let icon = match line.outcome.as_str() {
            "pass" => "✅",
            "warn" => "⚠️",
            "deny" => "⛔",
            _ => "❔",
        };
        let mut item = format!(
            "- {icon} **{}**: {}\n",
            escape_within(&line.set, POLICY_SET_MAX),
            escape_within(&line.outcome, ACTION_MAX)
        );
        for message in line.messages.iter().take(POLICY_MESSAGES_MAX) {
            item.push_str(&format!(
                "  - {}\n",
                escape_within(message, POLICY_MESSAGE_MAX)
            ));
        }
        if line.messages.len() > POLICY_MESSAGES_MAX {
            item.push_str(&format!(
                "  - and {} more messages\n",
                line.messages.len() - POLICY_MESSAGES_MAX
            ));
        }
        if out.len() + item.len() > POLICY_BLOCK_MAX {
            out.push_str(&format!("- and {} more policy sets\n", policy.len() - i));
            break;
        }
        out.push_str(&item);
    }
    out
}

/// A short word for the policy column: the worst outcome and how many sets had it.
fn policy_cell(policy: &[PolicyLine]) -> String {
    let count = |o: &str| policy.iter().filter(|p| p.outcome == o).count();
    let (deny, warn) = (count("deny"), count("warn"));
    if policy.is_empty() {
        "—".into()
    } else if deny > 0 {
        format!("⛔ {deny} denied")
    } else if warn > 0 {
        format!("⚠️ {warn} warned")
    } else {
        "✅ passed".into()
    }
}

/// A plan as a fenced code block of at most `max` bytes: all of it when it fits, or else
/// its first lines (the first line cut if even it is too long) and "… N more lines: see the
/// job", linked; when not even that fits, that note alone. The note is at most
/// [`MORE_NOTE_MAX`] bytes, so the block is at most `max.max(MORE_NOTE_MAX)` bytes.
fn diff_block(diff: &str, max: usize, job_url: Option<&str>) -> String {
    let text = plan_text(diff);
    let whole = whole_block(&text);
    if whole.len() <= max {
        return whole;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let note = |more: usize| {
        format!(
            "{ELLIPSIS} {more} more line{}: {}\n",
            if more == 1 { "" } else { "s" },
            link("see the job", job_url)
        )
    };
    let room = max.saturating_sub(MORE_NOTE_MAX);
    let (mut kept, mut run, mut shown) = (0usize, 0usize, 0usize);
    for line in &lines {
        let next_run = run.max(longest_backtick_run(line));
        if kept + line.len() + 1 + 2 * (fence_over(next_run).len() + 1) > room {
            break;
        }
        kept += line.len() + 1;
        run = next_run;
        shown += 1;
    }
    let body = if shown > 0 {
        let mut body = lines[..shown].join("\n");
        body.push('\n');
        body
    } else {
        // One long first line: as much of it as fits, when that is anything at all.
        let first = lines.first().copied().unwrap_or_default();
        let fence_room = room.saturating_sub(2 * (fence_for(first).len() + 1) + 1);
        let part = crate::limits::prefix_within_bytes(first, fence_room);
        if part.is_empty() {
            return note(lines.len());
        }
        format!("{part}\n")
    };
    let fence = fence_for(&body);
    format!("{fence}\n{body}{fence}\n{}", note(lines.len() - shown))
}

/// The check run for one environment: its status and conclusion, a title, a summary with
/// the counts, the changed resources (at most [`CHANGED_LINES_MAX`], then "and N more"),
/// the policy results and what it waits for, and the plan as its text; always within
/// GitHub's limits.
///
/// Status and conclusion: queued is `queued`; planning and applying are `in_progress`;
/// planned, no changes and applied are `success`; a failed plan or apply and a policy
/// denial are `failure`; cancelled is `cancelled`; awaiting approval is `action_required`
/// (GitHub asks for a `details_url` with it: the client sets the job's page); not planned
/// is `neutral`.
pub fn render_check(env: &EnvReport) -> CheckOutput {
    let (status, conclusion) = match &env.status {
        EnvStatus::Queued { .. } => (CheckStatus::Queued, None),
        EnvStatus::Planning | EnvStatus::Applying => (CheckStatus::InProgress, None),
        EnvStatus::Planned | EnvStatus::NoChanges | EnvStatus::Applied => {
            (CheckStatus::Completed, Some(Conclusion::Success))
        }
        EnvStatus::PlanFailed { .. } | EnvStatus::PolicyDenied | EnvStatus::ApplyFailed { .. } => {
            (CheckStatus::Completed, Some(Conclusion::Failure))
        }
        EnvStatus::Cancelled => (CheckStatus::Completed, Some(Conclusion::Cancelled)),
        EnvStatus::AwaitingApproval => (CheckStatus::Completed, Some(Conclusion::ActionRequired)),
        EnvStatus::NotPlanned { .. } => (CheckStatus::Completed, Some(Conclusion::Neutral)),
    };
    let (_, word) = status_words(&env.status);
    let mut title = match &env.counts {
        Some(c) => format!("{word}: {}", counts_text(c)),
        None => word.to_string(),
    };
    title = crate::limits::prefix_within_bytes(&title, CHECK_TITLE_MAX_CHARS).to_string();

    let mut summary = String::new();
    if let Some(c) = &env.counts {
        summary.push_str(&format!(
            "**{}**: {} to add, {} to change, {} to destroy.\n\n",
            code_span(&counts_text(c)),
            c.add,
            c.change,
            c.destroy
        ));
    }
    summary.push_str(&status_sentence(env));
    summary.push('\n');
    if let Some(line) = job_line(env) {
        summary.push_str(&line);
    }
    if !env.changed.is_empty() {
        summary.push_str("\n### Changes\n\n");
        for r in env.changed.iter().take(CHANGED_LINES_MAX) {
            summary.push_str(&format!(
                "- {}: {}\n",
                escape_within(&r.action, ACTION_MAX),
                escape_within(&r.address, ADDRESS_MAX)
            ));
        }
        if env.changed.len() > CHANGED_LINES_MAX {
            summary.push_str(&format!(
                "- and {} more\n",
                env.changed.len() - CHANGED_LINES_MAX
            ));
        }
    }
    if !env.policy.is_empty() {
        summary.push_str("\n### Policy\n\n");
        summary.push_str(&policy_lines(&env.policy));
    }
    // Each line above is self-contained, so whole lines are a safe last guard.
    let summary = whole_lines_within(&summary, CHECK_SUMMARY_MAX_CHARS).to_string();
    let text = env
        .diff
        .as_deref()
        .map(|d| diff_block(d, CHECK_TEXT_MAX_CHARS, env.job_url.as_deref()));
    CheckOutput {
        name: check_name(&env.environment),
        status,
        conclusion,
        title,
        summary,
        text,
    }
}

#[cfg(test)]
mod comment_tests;
#[cfg(test)]
mod tests;
