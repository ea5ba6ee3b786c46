use super::tests::{any_env, bare_ats, env, hostile_text, planned, without_code_spans, HOSTILE};
use super::*;
use proptest::prelude::*;

const SHA: &str = "5d6e7f8a9b0c1d2e3f405162738495a6b7c8d9e0";

fn input(environments: Vec<EnvReport>) -> CommentInput {
    CommentInput {
        head_sha: SHA.into(),
        environments,
        notes: Vec::new(),
    }
}

/// The comment with every `<details>` block's plan removed: what is Markdown, not code.
fn outside_code(comment: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<usize> = None;
    for line in comment.split('\n') {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match fence {
            Some(len) if ticks >= len && line.trim_start_matches('`').trim().is_empty() => {
                fence = None
            }
            Some(_) => {}
            None if ticks >= 3 => fence = Some(ticks),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn the_comment_has_the_marker_a_table_the_apply_hint_and_the_plans() {
    let comment = render_comment(&input(vec![
        planned("prod", "+ resource \"aws_s3_bucket\" \"logs\""),
        env("dev", EnvStatus::NoChanges),
    ]));
    assert!(comment.starts_with(&format!("{COMMENT_MARKER}\n")));
    for words in [
        "### Sortie: plans of `5d6e7f8`",
        "| environment | status | changes | policy |",
        "| prod | 📝 planned | `+2 ~1 -0` | ⚠️ 1 warned |",
        "| dev | ✅ no changes | — | — |",
        "**To apply**, comment:\n\n- prod: `/sortie apply prod`\n",
        "`/sortie plan` to plan again",
        "<details><summary>prod: planned (+2 ~1 -0)</summary>\n\n",
        "```\n+ resource \"aws_s3_bucket\" \"logs\"\n```\n",
        "[job 01J0B](https://sortie.example/jobs/01J0B)",
        "</details>",
    ] {
        assert!(comment.contains(words), "{words:?} not in\n{comment}");
    }
}

#[test]
fn no_environment_says_so() {
    let comment = render_comment(&input(Vec::new()));
    assert!(comment.starts_with(COMMENT_MARKER));
    assert!(comment.contains("changes no environment"));
    assert!(!comment.contains("| environment |"));
}

#[test]
fn notes_are_shown_escaped_and_bounded() {
    let mut i = input(vec![planned("prod", "x")]);
    i.notes = (0..30).map(|n| format!("note {n} {HOSTILE}")).collect();
    let comment = render_comment(&i);
    assert!(comment.contains("> note 9 "));
    assert!(!comment.contains("note 10 "));
    assert_eq!(bare_ats(&comment), 0);
}

#[test]
fn big_plans_are_shortened_fairly_and_every_environment_stays() {
    let big: String = (0..40_000).map(|i| format!("+ line {i}\n")).collect();
    let comment = render_comment(&input(vec![
        planned("a", &big),
        planned("b", "+ small"),
        planned("c", &big),
    ]));
    assert!(comment.len() <= COMMENT_MAX_CHARS);
    assert!(
        comment.contains("```\n+ small\n```\n"),
        "the small plan is whole"
    );
    let shown = |name: &str| {
        let start = comment.find(&format!("<summary>{name}:")).unwrap_or(0);
        let end = comment[start..].find("</details>").unwrap_or(0);
        comment[start..start + end].matches("+ line").count()
    };
    let (a, c) = (shown("a"), shown("c"));
    assert!(a > 1000 && c > 1000, "a {a}, c {c}");
    assert!(a.abs_diff(c) * 20 <= a.max(c), "a {a}, c {c}: not fair");
    assert_eq!(comment.matches("more lines: [see the job]").count(), 2);
}

#[test]
fn past_the_limit_the_last_environments_are_cut_with_a_count() {
    let envs: Vec<EnvReport> = (0..3_000)
        .map(|i| planned(&format!("env-{i}"), "x"))
        .collect();
    let comment = render_comment(&input(envs));
    assert!(comment.len() <= COMMENT_MAX_CHARS);
    assert!(comment.contains("| env\\-0 |"));
    let shown = comment.matches("<details>").count();
    assert!(shown > 50, "{shown}");
    assert!(
        comment.contains(&format!(
            "\nand {} more environments: see their check runs.\n",
            3_000 - shown
        )),
        "{}",
        &comment[..2000]
    );
}

#[test]
fn hostile_text_never_breaks_out_of_the_comment() {
    let mut e = planned(
        HOSTILE,
        &format!("{HOSTILE}\n````````\n</details>\n@octocat"),
    );
    e.status = EnvStatus::PlanFailed {
        reason: format!("{HOSTILE}\n# heading\n</details>"),
    };
    e.policy[0].messages = vec![HOSTILE.into()];
    e.policy[0].set = HOSTILE.into();
    e.job_id = Some(HOSTILE.into());
    let mut i = input(vec![e, env("next", EnvStatus::Planning)]);
    i.notes = vec![HOSTILE.into()];
    let comment = render_comment(&i);
    // The plan is in a fence longer than its longest backtick run (8).
    assert!(comment.contains(&format!(
        "`````````\n{HOSTILE}\n````````\n</details>\n@octocat\n`````````\n"
    )));
    // Code spans (the apply command names the environment) show their text as is.
    let markdown = without_code_spans(&outside_code(&comment));
    // Outside code, the only HTML is Sortie's own, and nobody is mentioned.
    assert!(
        markdown.contains("<summary>x&#60;/details&#62;"),
        "{markdown}"
    );
    let ours = markdown
        .replace(COMMENT_MARKER, "")
        .replace("<details><summary>", "")
        .replace("</summary>", "")
        .replace("</details>", "");
    assert!(!ours.contains('<'), "{ours}");
    assert_eq!(bare_ats(&markdown), 0, "{markdown}");
    assert_eq!(markdown.matches("</details>").count(), 2);
    assert!(!markdown.contains("\n# heading"));
    assert!(!markdown.contains("](https://evil"));
    // Every table row has its five cell borders: an escaped `|` is not one.
    for row in markdown
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
    {
        let borders = row
            .match_indices('|')
            .filter(|(i, _)| *i == 0 || &row[i - 1..*i] != "\\")
            .count();
        assert_eq!(borders, 5, "{row}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_comment_always_fits_and_starts_with_the_marker(
        envs in prop::collection::vec(any_env(), 0..12),
        notes in prop::collection::vec(hostile_text(20), 0..14),
        sha in hostile_text(3),
        copies in 1usize..24,
    ) {
        // Copies make many environments, and many big plans, cheaply.
        let environments: Vec<EnvReport> =
            envs.iter().cycle().take(envs.len() * copies).cloned().collect();
        let comment = render_comment(&CommentInput { head_sha: sha, environments, notes });
        prop_assert!(comment.len() <= COMMENT_MAX_CHARS);
        prop_assert!(comment.chars().count() <= COMMENT_MAX_CHARS);
        let first_line = format!("{COMMENT_MARKER}\n");
        prop_assert!(comment.starts_with(&first_line));
        let markdown = without_code_spans(&outside_code(&comment));
        prop_assert_eq!(bare_ats(&markdown), 0);
        prop_assert_eq!(
            markdown.matches("<details>").count(),
            markdown.matches("</details>").count()
        );
    }
}
