//! `make demo-pr` as a newcomer runs it (README, "Pull requests"): the demo program
//! (`src/bin/demo_pr.rs`) against the built `sortie` and `sortie-pilot`, on moto, with the
//! machine's Terraform 1.11. It must finish, and say what the README says it shows: two
//! plans and one comment, a refusal before the approval, the apply before merge past
//! Sortie's own required check, and development applied at the merge commit. This is also
//! the end-to-end test of an `after_merge` apply through `sortie dev`.

use std::process::Command;

use sortie_testkit::runtime::function_binary;
use sortie_testkit::{require_aws, scratch_dir, terraform111_bin};

#[test]
fn the_pull_request_demo_runs_from_setup_to_the_apply_after_merge() {
    require_aws!();
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    let _ = terraform111_bin();
    let sortie = function_binary("sortie");
    let pilot = function_binary("sortie-pilot");
    let work = scratch_dir("demo-pr").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_demo-pr"))
        .arg(&sortie)
        .arg(&pilot)
        .arg(work.join("demo"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let text: String = stdout.replace("\x1b[1m", "").replace("\x1b[0m", "");
    for expected in [
        // Setup as the README says, with a whole webhook URL.
        "$ sortie vcs connect github acme",
        "/v1/vcs/github/acme/webhook (content type application/json)",
        // Opened: both planned.
        "sortie: acme/dev         success    planned: +1 ~0 -0",
        "sortie: acme/prod        success    planned: +1 ~0 -0",
        // Refused before the approval, saying why.
        "- acme/prod: 0 of 1 approval on the head commit.",
        // Applied before merge, past its own required check.
        "sortie: acme/prod        success    applied: +1 ~0 -0",
        // Merged: development applied at the merge commit, in the one comment.
        "| acme/dev | ✅ applied | `+1 ~0 -0` | — |",
        "> This pull request is merged.",
        "name  \"prod_v2\"",
        "one comment on #1",
    ] {
        assert!(text.contains(expected), "missing {expected:?}:\n{text}");
    }
    assert!(
        text.contains("Set the App's webhook URL to http://127.0.0.1:"),
        "the webhook URL is whole:\n{text}"
    );
    // Each environment planned once and applied once, by the pull request's author.
    for env in ["acme/dev", "acme/prod"] {
        let section = text
            .split(&format!("$ sortie get jobs {env}\n"))
            .nth(1)
            .unwrap_or_default();
        let rows: Vec<&str> = section
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with('$'))
            .collect();
        assert_eq!(rows.len(), 2, "{env}: {rows:#?}");
        assert!(
            rows[0].contains(" apply ") && rows[0].contains("succeeded  github:octocat"),
            "{env}: {rows:#?}"
        );
        assert!(
            rows[1].contains(" plan ") && rows[1].contains("succeeded  github:octocat"),
            "{env}: {rows:#?}"
        );
    }
}
