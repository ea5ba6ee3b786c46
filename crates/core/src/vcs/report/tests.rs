//! The check run and the escaping rules; the comment's own tests are in `comment_tests.rs`.

use super::markdown::{code_span, escape_html_within, link, whole_lines_within};
use super::*;
use proptest::prelude::*;

/// Text an author could put in an address, a message or a reason to break out.
pub(super) const HOSTILE: &str = "x</details><img src=x onerror=alert(1)> @octocat [a](https://evil) | # &amp; `x` ![i](j) <!-- $a$";

pub(super) fn env(name: &str, status: EnvStatus) -> EnvReport {
    EnvReport {
        environment: name.into(),
        status,
        counts: None,
        changed: Vec::new(),
        policy: Vec::new(),
        diff: None,
        job_id: None,
        job_url: None,
        apply_command: None,
    }
}

pub(super) fn planned(name: &str, diff: &str) -> EnvReport {
    EnvReport {
        counts: Some(Counts {
            add: 2,
            change: 1,
            destroy: 0,
        }),
        changed: vec![ChangedResource {
            address: "aws_s3_bucket.logs".into(),
            action: "create".into(),
        }],
        policy: vec![PolicyLine {
            set: "tags".into(),
            outcome: "warn".into(),
            messages: vec!["bucket has no owner tag".into()],
        }],
        diff: Some(diff.into()),
        job_id: Some("01J0B".into()),
        job_url: Some("https://sortie.example/jobs/01J0B".into()),
        apply_command: Some(format!("/sortie apply {name}")),
        ..env(name, EnvStatus::Planned)
    }
}

/// The `@`s of `text` outside code spans (where GitHub mentions nobody) not followed by the
/// zero-width space that keeps them from mentioning.
pub(super) fn bare_ats(text: &str) -> usize {
    let text = without_code_spans(text);
    text.match_indices('@')
        .filter(|(i, _)| !text[i + 1..].starts_with("&#8203;"))
        .count()
}

/// `text` without its inline code spans (a backtick run up to the next run of as many),
/// skipping backslash-escaped characters, as CommonMark reads them.
pub(super) fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|c| **c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                out.extend(chars[i..(i + 2).min(chars.len())].iter());
                i += 2;
            }
            '`' => {
                let n = run_at(i);
                let close = (i + n..chars.len()).find(|&j| {
                    chars[j] == '`' && run_at(j) == n && (j == 0 || chars[j - 1] != '`')
                });
                match close {
                    Some(j) => i = j + n,
                    None => {
                        out.extend(chars[i..i + n].iter());
                        i += n;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[test]
fn the_check_name_is_the_prefix_and_the_environment() {
    assert_eq!(check_name("prod"), "sortie: prod");
    assert!(check_name("x").starts_with(CHECK_NAME_PREFIX));
}

#[test]
fn status_and_conclusion_follow_the_environment() {
    use CheckStatus::*;
    use Conclusion::*;
    let reason = || "boom".to_string();
    for (status, want_status, want_conclusion) in [
        (EnvStatus::Queued { behind: None }, Queued, None),
        (EnvStatus::Planning, InProgress, None),
        (EnvStatus::Applying, InProgress, None),
        (EnvStatus::Planned, Completed, Some(Success)),
        (EnvStatus::NoChanges, Completed, Some(Success)),
        (EnvStatus::Applied, Completed, Some(Success)),
        (
            EnvStatus::PlanFailed { reason: reason() },
            Completed,
            Some(Failure),
        ),
        (EnvStatus::PolicyDenied, Completed, Some(Failure)),
        (
            EnvStatus::ApplyFailed { reason: reason() },
            Completed,
            Some(Failure),
        ),
        (EnvStatus::Cancelled, Completed, Some(Cancelled)),
        (EnvStatus::AwaitingApproval, Completed, Some(ActionRequired)),
        (
            EnvStatus::NotPlanned { why: reason() },
            Completed,
            Some(Neutral),
        ),
    ] {
        let out = render_check(&env("prod", status.clone()));
        assert_eq!(out.status, want_status, "{status:?}");
        assert_eq!(out.conclusion, want_conclusion, "{status:?}");
        assert_eq!(out.name, "sortie: prod");
    }
}

#[test]
fn statuses_and_conclusions_are_githubs_words() {
    assert_eq!(
        serde_json::to_value(CheckStatus::InProgress).ok(),
        Some(serde_json::json!("in_progress"))
    );
    assert_eq!(
        serde_json::to_value(Conclusion::ActionRequired).ok(),
        Some(serde_json::json!("action_required"))
    );
}

#[test]
fn the_summary_holds_counts_changes_policy_and_the_wait() {
    let mut e = planned("prod", "+ resource");
    e.status = EnvStatus::AwaitingApproval;
    let out = render_check(&e);
    assert_eq!(out.title, "awaiting approval: +2 ~1 -0");
    for words in [
        "`+2 ~1 -0`",
        "2 to add, 1 to change, 0 to destroy",
        "waits for approval",
        "`/sortie apply prod`",
        "aws\\_s3\\_bucket\\.logs",
        "**tags**",
        "bucket has no owner tag",
        "[job 01J0B](https://sortie.example/jobs/01J0B)",
    ] {
        assert!(
            out.summary.contains(words),
            "{words} not in {}",
            out.summary
        );
    }
    assert_eq!(out.text.as_deref(), Some("```\n+ resource\n```\n"));
}

#[test]
fn changed_resources_stop_at_fifty_lines() {
    let mut e = planned("prod", "");
    e.changed = (0..75)
        .map(|i| ChangedResource {
            address: format!("null_resource.r{i}"),
            action: "create".into(),
        })
        .collect();
    let out = render_check(&e);
    assert!(out.summary.contains("null\\_resource\\.r49"));
    assert!(!out.summary.contains("null\\_resource\\.r50"));
    assert!(out.summary.contains("- and 25 more\n"));
}

#[test]
fn a_huge_plan_is_cut_to_the_check_text_limit_with_a_link() {
    let diff: String = (0..20_000).map(|i| format!("  + line {i}\n")).collect();
    let out = render_check(&planned("prod", &diff));
    let text = out.text.unwrap_or_default();
    assert!(text.len() <= CHECK_TEXT_MAX_CHARS);
    assert!(text.starts_with("```\n  + line 0\n"));
    assert!(text.contains("more lines: [see the job](https://sortie.example/jobs/01J0B)"));
}

#[test]
fn one_enormous_line_is_cut_inside_its_fence() {
    let diff = "é".repeat(100_000);
    let text = render_check(&planned("prod", &diff))
        .text
        .unwrap_or_default();
    assert!(text.len() <= CHECK_TEXT_MAX_CHARS);
    assert!(text.starts_with("```\néé"));
    assert!(
        text.contains("\n```\n… 1 more line: "),
        "{}",
        &text[text.len() - 200..]
    );
}

#[test]
fn hostile_text_never_breaks_out_of_the_summary() {
    let mut e = env(
        HOSTILE,
        EnvStatus::PlanFailed {
            reason: format!("{HOSTILE}\n# heading\n```"),
        },
    );
    e.changed = vec![ChangedResource {
        address: HOSTILE.into(),
        action: HOSTILE.into(),
    }];
    e.policy = vec![PolicyLine {
        set: HOSTILE.into(),
        outcome: HOSTILE.into(),
        messages: vec![HOSTILE.into()],
    }];
    e.job_id = Some(HOSTILE.into());
    let out = render_check(&e);
    assert!(!out.summary.contains('<'), "{}", out.summary);
    assert_eq!(bare_ats(&out.summary), 0);
    assert!(!out.summary.contains("]("), "{}", out.summary);
    assert!(!out.summary.contains("\n# heading"));
    assert!(!out.summary.contains("```"));
    assert!(out.summary.contains("&lt;/details&gt;"));
    assert!(out.summary.contains("@&#8203;octocat"));
}

#[test]
fn a_diff_fence_is_longer_than_any_backtick_run_inside() {
    let diff = "a\n```\n````````\n~~~\n</details>\nb";
    let text = render_check(&planned("prod", diff))
        .text
        .unwrap_or_default();
    assert_eq!(text, format!("`````````\n{diff}\n`````````\n"));
}

#[test]
fn escaping_covers_markdown_html_and_mentions() {
    assert_eq!(escape("a_b*c"), "a\\_b\\*c");
    assert_eq!(escape("<b>&"), "&lt;b&gt;&amp;");
    assert_eq!(escape("@team"), "@&#8203;team");
    assert_eq!(escape("a|b"), "a\\|b");
    assert_eq!(escape("a\nb\r\tc"), "a b  c");
    assert_eq!(escape("\u{202E}x"), "\u{FFFD}x");
    assert_eq!(escape("héllo wörld"), "héllo wörld");
}

#[test]
fn html_escaping_for_summaries_uses_entities() {
    assert_eq!(
        escape_html_within("a_b <i> \"q\" @me [x](y)", 100),
        "a&#95;b &#60;i&#62; &#34;q&#34; @&#8203;me &#91;x&#93;&#40;y&#41;"
    );
    assert_eq!(escape_html_within("<<<<", 10), "&#60;…");
    assert_eq!(escape_html_within("é-é", 100), "é-é");
}

#[test]
fn code_spans_outlast_backticks_inside() {
    assert_eq!(code_span("a"), "`a`");
    assert_eq!(code_span("a ` b"), "``a ` b``");
    assert_eq!(code_span("`x`"), "`` `x` ``");
    assert_eq!(code_span("a\nb"), "`a b`");
    assert_eq!(code_span(""), "` `");
    assert_eq!(code_span("\n"), "` `");
}

#[test]
fn links_take_only_http_urls_encoded() {
    assert_eq!(
        link("see", Some("https://x.example/a b)(<>")),
        "[see](https://x.example/a%20b%29%28%3C%3E)"
    );
    assert_eq!(link("see", Some("javascript:alert(1)")), "see");
    assert_eq!(link("see", None), "see");
    let long = format!("https://x.example/{}", "a".repeat(600));
    assert_eq!(link("see", Some(&long)), "see");
}

#[test]
fn whole_lines_cut_at_a_line_end() {
    assert_eq!(whole_lines_within("ab\ncd\nef\n", 7), "ab\ncd\n");
    assert_eq!(whole_lines_within("abcdef", 3), "");
    assert_eq!(whole_lines_within("ab\n", 30), "ab\n");
}

/// Text with every character an author might use to break out, and some that are long.
pub(super) fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec![
                "<",
                ">",
                "&",
                "@",
                "`",
                "```",
                "|",
                "\n",
                "\r",
                "[",
                "]",
                "(",
                ")",
                "*",
                "_",
                "\\",
                "#",
                "é",
                "😀",
                "&#8203;",
                "</details>",
                "\u{202E}",
                "\0",
                " ",
                "a",
                "~~~",
            ])
            .prop_map(String::from),
            "[a-z0-9 .-]{0,40}",
        ],
        0..max,
    )
    .prop_map(|parts| parts.concat())
}

pub(super) fn any_status() -> impl Strategy<Value = EnvStatus> {
    prop_oneof![
        prop::option::of(hostile_text(8)).prop_map(|behind| EnvStatus::Queued { behind }),
        Just(EnvStatus::Planning),
        Just(EnvStatus::Planned),
        Just(EnvStatus::NoChanges),
        hostile_text(40).prop_map(|reason| EnvStatus::PlanFailed { reason }),
        Just(EnvStatus::PolicyDenied),
        Just(EnvStatus::AwaitingApproval),
        Just(EnvStatus::Applying),
        Just(EnvStatus::Applied),
        hostile_text(40).prop_map(|reason| EnvStatus::ApplyFailed { reason }),
        Just(EnvStatus::Cancelled),
        hostile_text(20).prop_map(|why| EnvStatus::NotPlanned { why }),
    ]
}

/// A report with hostile text everywhere, and sometimes a big plan.
pub(super) fn any_env() -> impl Strategy<Value = EnvReport> {
    (
        (
            hostile_text(6),
            any_status(),
            prop::option::of(any::<(u32, u32, u32)>()),
        ),
        prop::collection::vec((hostile_text(6), hostile_text(2)), 0..80),
        prop::collection::vec(
            (
                hostile_text(4),
                hostile_text(2),
                prop::collection::vec(hostile_text(10), 0..14),
            ),
            0..6,
        ),
        prop::option::of((hostile_text(30), 0usize..20_000)),
        (
            prop::option::of(hostile_text(4)),
            prop::option::of(hostile_text(4).prop_map(|u| format!("https://x/{u}"))),
            prop::option::of(hostile_text(4)),
        ),
    )
        .prop_map(
            |((name, status, counts), changed, policy, diff, (id, url, apply))| EnvReport {
                environment: name,
                status,
                counts: counts.map(|(add, change, destroy)| Counts {
                    add,
                    change,
                    destroy,
                }),
                changed: changed
                    .into_iter()
                    .map(|(address, action)| ChangedResource { address, action })
                    .collect(),
                policy: policy
                    .into_iter()
                    .map(|(set, outcome, messages)| PolicyLine {
                        set,
                        outcome,
                        messages,
                    })
                    .collect(),
                diff: diff.map(|(text, repeat)| format!("{text}\n{}", "+ x\n".repeat(repeat))),
                job_id: id,
                job_url: url,
                apply_command: apply,
            },
        )
}

/// The first line that closes the fence `lines[0]` opens, after it.
pub(super) fn closing_line(lines: &[&str]) -> Option<usize> {
    let fence = lines.first()?;
    lines
        .iter()
        .skip(1)
        .position(|l| {
            let l = l.trim_end();
            !l.is_empty() && l.chars().all(|c| c == '`') && l.len() >= fence.len()
        })
        .map(|i| i + 1)
}

proptest! {
    #[test]
    fn a_check_always_fits_githubs_limits(e in any_env()) {
        let out = render_check(&e);
        prop_assert!(out.summary.len() <= CHECK_SUMMARY_MAX_CHARS);
        prop_assert!(out.summary.chars().count() <= CHECK_SUMMARY_MAX_CHARS);
        prop_assert!(out.title.len() <= CHECK_TITLE_MAX_CHARS);
        let text = out.text.unwrap_or_default();
        prop_assert!(text.len() <= CHECK_TEXT_MAX_CHARS);
        prop_assert!(text.chars().count() <= CHECK_TEXT_MAX_CHARS);
        // The apply command is in a code span, which shows its text as is.
        prop_assert!(!without_code_spans(&out.summary).contains('<'));
        prop_assert_eq!(bare_ats(&out.summary), 0);
    }

    #[test]
    fn a_diff_stays_inside_its_fence(diff in hostile_text(60), repeat in 0usize..30_000) {
        let diff = format!("{diff}\n{}", "`~ a\n".repeat(repeat));
        let mut e = planned("prod", &diff);
        e.job_url = None;
        let text = render_check(&e).text.unwrap_or_default();
        let lines: Vec<&str> = text.split('\n').collect();
        prop_assert!(lines[0].chars().all(|c| c == '`') && lines[0].len() >= 3);
        let close = closing_line(&lines);
        prop_assert!(close.is_some());
        // What follows the fence is only the "more lines" note, or nothing.
        let after = lines[close.unwrap_or_default() + 1..].join("\n");
        prop_assert!(after.is_empty() || after.starts_with("… "), "{}", after);
        prop_assert!(text.len() <= CHECK_TEXT_MAX_CHARS);
    }

    #[test]
    fn a_cut_never_splits_a_character_or_an_escape(text in hostile_text(30), max in 0usize..300) {
        let cut = escape_within(&text, max);
        prop_assert!(cut.len() <= max);
        let shown = cut.strip_suffix(ELLIPSIS).unwrap_or(&cut);
        // What is shown is the escape of a whole prefix of the text.
        let prefixes: Vec<String> = (0..=text.chars().count())
            .map(|k| escape(&text.chars().take(k).collect::<String>()))
            .collect();
        prop_assert!(prefixes.iter().any(|p| p == shown), "{:?} from {:?}", cut, text);
        // The same holds inside HTML, entity by entity.
        let cut = escape_html_within(&text, max);
        prop_assert!(cut.len() <= max);
        let shown = cut.strip_suffix(ELLIPSIS).unwrap_or(&cut);
        let prefixes: Vec<String> = (0..=text.chars().count())
            .map(|k| escape_html_within(&text.chars().take(k).collect::<String>(), usize::MAX))
            .collect();
        prop_assert!(prefixes.iter().any(|p| p == shown), "{:?} from {:?}", cut, text);
    }
}

#[test]
fn a_plan_is_shown_as_its_changed_resources_and_its_text_with_sensitive_values_masked() {
    use crate::plan::{PlanView, MARKER};
    let doc = serde_json::json!({
        "resource_changes": [
            {"address": "terraform_data.a", "type": "terraform_data", "name": "a",
             "change": {"actions": ["create"], "before": null, "after": {"input": "one"}}},
            {"address": "terraform_data.same", "type": "terraform_data", "name": "same",
             "change": {"actions": ["no-op"], "before": {"input": "x"}, "after": {"input": "x"}}},
            {"address": "terraform_data.b", "type": "terraform_data", "name": "b",
             "change": {"actions": ["delete", "create"], "before": {"input": MARKER},
                        "after": {"input": MARKER}, "replace_paths": [["input"]]}}
        ]
    });
    let (changed, text) = plan_shown(&PlanView::from_document(&doc));
    assert_eq!(
        changed,
        vec![
            ChangedResource {
                address: "terraform_data.a".into(),
                action: "create".into()
            },
            ChangedResource {
                address: "terraform_data.b".into(),
                action: "replace".into()
            },
        ]
    );
    assert!(
        text.contains("# terraform_data.a will be created"),
        "{text}"
    );
    assert!(
        text.contains("# terraform_data.b must be replaced"),
        "{text}"
    );
    assert!(!text.contains("terraform_data.same"), "{text}");
    assert!(!text.contains('\x1b'), "no colour in a report: {text:?}");
    assert!(
        text.ends_with("Plan: 2 to add, 0 to change, 1 to destroy.\n"),
        "{text}"
    );
    // Shown in a check, the text is fenced whole.
    let check = render_check(&EnvReport {
        changed,
        ..planned("acme/web/dev", &text)
    });
    assert!(check.text.unwrap().contains(&text));
    let line = format!("- replace: {}", escape("terraform_data.b"));
    assert!(check.summary.contains(&line), "{}", check.summary);
}
