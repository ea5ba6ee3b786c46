//! The one sticky comment: every environment of the pull request, its status, counts and
//! policy in a table, how to apply, and each plan collapsed in `<details>`.

use super::markdown::{code_span, escape_html_within, escape_within};
use super::{
    apply_span, counts_text, diff_block, job_line, plan_text, policy_cell, policy_lines,
    status_sentence, status_words, whole_block, CommentInput, EnvReport, COMMENT_MARKER,
    COMMENT_MAX_CHARS, ENV_NAME_MAX, MORE_NOTE_MAX,
};

/// The most notes shown.
const NOTES_MAX: usize = 10;
/// The longest note shown, in escaped bytes.
const NOTE_MAX: usize = 1_000;
/// The bytes kept for the "and N more environments" line.
const MORE_ENVIRONMENTS_MAX: usize = 100;
/// How many characters of the head commit are shown.
const SHORT_SHA: usize = 7;

/// One environment's part of the comment, all but its diff.
struct Unit {
    /// Its table row.
    row: String,
    /// Its line in "To apply", if any.
    apply: Option<String>,
    /// Its `<details>` up to where the diff goes.
    open: String,
    /// The bytes its whole diff block takes, when it has a diff.
    diff_len: Option<usize>,
}

/// What closes an environment's `<details>`.
const CLOSE: &str = "\n</details>\n\n";

impl Unit {
    fn new(env: &EnvReport) -> Self {
        let (icon, word) = status_words(&env.status);
        let name = escape_within(&env.environment, ENV_NAME_MAX);
        let counts = env
            .counts
            .as_ref()
            .map(|c| code_span(&counts_text(c)))
            .unwrap_or_else(|| "—".into());
        let row = format!(
            "| {name} | {icon} {word} | {counts} | {} |\n",
            policy_cell(&env.policy)
        );
        let apply = env
            .apply_command
            .as_deref()
            .map(|c| format!("- {name}: {}\n", apply_span(c)));
        let summary_counts = env
            .counts
            .as_ref()
            .map(|c| format!(" ({})", counts_text(c)))
            .unwrap_or_default();
        let mut open = format!(
            "<details><summary>{}: {word}{summary_counts}</summary>\n\n{}\n",
            escape_html_within(&env.environment, ENV_NAME_MAX),
            status_sentence(env)
        );
        if let Some(line) = job_line(env) {
            open.push_str(&line);
        }
        if !env.policy.is_empty() {
            open.push('\n');
            open.push_str(&policy_lines(&env.policy));
        }
        open.push('\n');
        let diff_len = env
            .diff
            .as_deref()
            .map(|d| whole_block(&plan_text(d)).len());
        Self {
            row,
            apply,
            open,
            diff_len,
        }
    }

    /// The bytes this unit takes with its diff at its smallest (the note alone).
    fn cost(&self) -> usize {
        self.row.len()
            + self.apply.as_ref().map_or(0, String::len)
            + self.open.len()
            + self.diff_len.map_or(0, |_| MORE_NOTE_MAX)
            + CLOSE.len()
    }

    /// The bytes its diff would take beyond the smallest.
    fn demand(&self) -> usize {
        self.diff_len
            .map_or(0, |len| len.saturating_sub(MORE_NOTE_MAX))
    }
}

/// Shares `budget` among `demands` fairly: each gets its demand or an equal share of what
/// is left, whichever is smaller, the smallest demands first (so what a small one leaves
/// goes to the larger ones).
fn fair_shares(demands: &[usize], budget: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| demands[i]);
    let mut shares = vec![0; demands.len()];
    let mut left = budget;
    for (k, &i) in order.iter().enumerate() {
        let share = left / (order.len() - k);
        shares[i] = demands[i].min(share);
        left -= shares[i];
    }
    shares
}

/// The sticky comment: [`COMMENT_MARKER`] on the first line; a table of every environment
/// (status, `+a ~c -d`, policy); how to apply (`/sortie apply <environment>`); each plan
/// collapsed in `<details>`. Always at most [`COMMENT_MAX_CHARS`] (counted in bytes): the
/// diffs are shortened first, fairly across environments, each ending "… N more lines: see
/// the job" with a link; then the last environments are cut, with "and N more
/// environments".
pub fn render_comment(input: &CommentInput) -> String {
    let short: String = input.head_sha.chars().take(SHORT_SHA).collect();
    let mut head = format!(
        "{COMMENT_MARKER}\n### Sortie: plans of {}\n\n",
        code_span(&short)
    );
    if input.environments.is_empty() {
        head.push_str("This pull request changes no environment's files.\n\n");
    } else {
        head.push_str("| environment | status | changes | policy |\n| --- | --- | --- | --- |\n");
    }
    let mut tail = "\nComment `/sortie plan` to plan again, or `/sortie help` for every command.\n"
        .to_string();
    for note in input.notes.iter().take(NOTES_MAX) {
        tail.push_str(&format!("\n> {}\n", escape_within(note, NOTE_MAX)));
    }
    tail.push('\n');
    const APPLY_HEAD: &str = "\n**To apply**, comment:\n\n";

    let fixed = head.len() + MORE_ENVIRONMENTS_MAX + APPLY_HEAD.len() + tail.len();
    let mut used = fixed;
    let mut units = Vec::new();
    for env in &input.environments {
        let unit = Unit::new(env);
        if used + unit.cost() > COMMENT_MAX_CHARS {
            break;
        }
        used += unit.cost();
        units.push((unit, env));
    }
    let omitted = input.environments.len() - units.len();
    let demands: Vec<usize> = units.iter().map(|(u, _)| u.demand()).collect();
    let shares = fair_shares(&demands, COMMENT_MAX_CHARS.saturating_sub(used));

    let mut out = head;
    units.iter().for_each(|(u, _)| out.push_str(&u.row));
    if omitted > 0 {
        out.push_str(&format!(
            "\nand {omitted} more environment{}: see their check runs.\n",
            if omitted == 1 { "" } else { "s" }
        ));
    }
    if units.iter().any(|(u, _)| u.apply.is_some()) {
        out.push_str(APPLY_HEAD);
        units
            .iter()
            .filter_map(|(u, _)| u.apply.as_deref())
            .for_each(|line| out.push_str(line));
    }
    out.push_str(&tail);
    for ((unit, env), share) in units.iter().zip(shares) {
        out.push_str(&unit.open);
        if let Some(diff) = &env.diff {
            out.push_str(&diff_block(
                diff,
                MORE_NOTE_MAX + share,
                env.job_url.as_deref(),
            ));
        }
        out.push_str(CLOSE);
    }
    if out.len() > COMMENT_MAX_CHARS {
        // Not reached: every part above is bounded. Still, never send what GitHub refuses.
        return format!(
            "{COMMENT_MARKER}\nSortie's report does not fit in a comment: see each environment's check run.\n"
        );
    }
    out
}
