//! The JSON shapes GitHub answers with: users, repositories, pull requests, check runs
//! and comments.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::github::{CheckRunRecord, CommentRecord, PullState, Repo};

pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(crate) fn user_json(login: &str, kind: &str) -> Value {
    json!({
        "login": login,
        "id": login.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000,
        "type": kind,
        "site_admin": false,
    })
}

pub(crate) fn repo_json(repo: &Repo) -> Value {
    json!({
        "id": repo.id,
        "node_id": format!("R_{}", repo.id),
        "name": repo.name,
        "full_name": repo.full_name(),
        "private": true,
        "owner": user_json(&repo.owner, "Organization"),
        "html_url": format!("https://github.com/{}", repo.full_name()),
        "fork": false,
        "default_branch": "main",
    })
}

fn fork_json(full_name: &str) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap_or((full_name, full_name));
    json!({
        "id": full_name.bytes().fold(11u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000_000,
        "name": name, "full_name": full_name, "private": false, "fork": true,
        "owner": user_json(owner, "User"),
    })
}

pub(crate) fn pull_json(base_url: &str, repo: &Repo, pull: &PullState) -> Value {
    let spec = &pull.spec;
    let head_repo = match &spec.fork {
        Some(fork) => fork_json(fork),
        None => repo_json(repo),
    };
    let head_owner = spec
        .fork
        .as_deref()
        .and_then(|f| f.split_once('/'))
        .map_or(repo.owner.as_str(), |(o, _)| o);
    json!({
        "url": format!("{base_url}/repos/{}/pulls/{}", repo.full_name(), pull.number),
        "id": pull.id,
        "node_id": format!("PR_{}", pull.id),
        "html_url": format!("https://github.com/{}/pull/{}", repo.full_name(), pull.number),
        "number": pull.number,
        "state": pull.state,
        "locked": false,
        "title": format!("Change {}", pull.number),
        "user": user_json(&spec.author, "User"),
        "body": null,
        "draft": spec.draft,
        "merged": pull.merged,
        "mergeable": spec.mergeable,
        "mergeable_state": match spec.mergeable { Some(true) => "clean", Some(false) => "dirty", None => "unknown" },
        "merge_commit_sha": pull.merge_commit_sha,
        "head": {
            "label": format!("{head_owner}:{}", spec.head_ref),
            "ref": spec.head_ref,
            "sha": spec.head_sha,
            "user": user_json(head_owner, "User"),
            "repo": head_repo,
        },
        "base": {
            "label": format!("{}:{}", repo.owner, spec.base_ref),
            "ref": spec.base_ref,
            "sha": pull.base_sha,
            "user": user_json(&repo.owner, "Organization"),
            "repo": repo_json(repo),
        },
        "changed_files": spec.files.len(),
        "commits": 1,
    })
}

pub(super) fn check_run_json(base_url: &str, repo: &Repo, run: &CheckRunRecord) -> Value {
    json!({
        "id": run.id,
        "name": run.name,
        "head_sha": run.head_sha,
        "status": run.status,
        "conclusion": run.conclusion,
        "external_id": run.external_id,
        "details_url": run.details_url,
        "output": run.output.clone().unwrap_or_else(|| json!({"title": null, "summary": null, "text": null})),
        "app": {"id": run.app_id},
        "url": format!("{base_url}/repos/{}/check-runs/{}", repo.full_name(), run.id),
    })
}

pub(super) fn comment_json(base_url: &str, repo: &Repo, comment: &CommentRecord) -> Value {
    json!({
        "id": comment.id,
        "node_id": format!("IC_{}", comment.id),
        "url": format!("{base_url}/repos/{}/issues/comments/{}", repo.full_name(), comment.id),
        "html_url": format!("https://github.com/{}/pull/{}#issuecomment-{}", repo.full_name(), comment.issue_number, comment.id),
        "body": comment.body,
        "user": user_json(&comment.author, &comment.author_type),
        "issue_url": format!("{base_url}/repos/{}/issues/{}", repo.full_name(), comment.issue_number),
    })
}
