//! The routes under `/repos/{owner}/{repo}/`: who may see the repository, the permission
//! each route needs, and the pull requests, comments, statuses, branch rules and
//! tarball links they answer with.

use std::collections::BTreeMap;

use axum::http::Method;
use serde_json::{json, Value};

use super::auth::allows;
use super::check_runs::{create_check_run, update_check_run};
use super::json::{check_run_json, comment_json, pull_json, timestamp, user_json};
use super::paging::{paged, paged_object, query_pairs};
use super::{hex, sha256, Caller, Reply};
use crate::github::rules;
use crate::github::{CheckRunRecord, CommentRecord, Download, PullState, Repo, TokenKind, World};

#[allow(clippy::too_many_arguments)]
pub(super) fn repository_route(
    world: &mut World,
    method: &Method,
    caller: &Caller,
    owner: &str,
    repo: &str,
    rest: &[&str],
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Reply {
    let key = format!("{owner}/{repo}").to_ascii_lowercase();
    // Every repository of the double is private: a caller that cannot see it gets 404.
    let grant = match (&caller.kind, &caller.grant) {
        (TokenKind::Installation(id), Some(grant)) => {
            let covered = world
                .repos
                .get(&key)
                .is_some_and(|r| r.installation == Some(*id));
            if !covered || !grant.repositories.contains(&key) {
                return Reply::error(404, "Not Found");
            }
            grant.clone()
        }
        (TokenKind::User(_), Some(grant)) => {
            if !world.repos.contains_key(&key) || !grant.repositories.contains(&key) {
                return Reply::error(404, "Not Found");
            }
            grant.clone()
        }
        (TokenKind::AppJwt, _) => return Reply::error(403, rules::NOT_ACCESSIBLE),
        _ => return Reply::error(404, "Not Found"),
    };
    let need = |alternatives: &[(&str, &str)]| -> Result<(), Reply> {
        if alternatives.iter().any(|(n, l)| allows(&grant, n, l)) {
            Ok(())
        } else {
            Err(Reply::error(403, rules::NOT_ACCESSIBLE))
        }
    };
    let result = (|| -> Result<Reply, Reply> {
        match (method.as_str(), rest) {
            ("GET", ["pulls"]) => {
                need(&[("pull_requests", "read")])?;
                Ok(list_pulls(world, &key, path, query))
            }
            ("GET", ["pulls", number]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                Ok(Reply::json(200, &pull_json(&world.base_url, repo, pull)))
            }
            ("GET", ["pulls", number, "files"]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                let files: Vec<Value> = pull
                    .spec
                    .files
                    .iter()
                    .take(rules::MAX_PULL_FILES)
                    .map(|f| {
                        let mut file = json!({
                            "sha": format!("{:0>40}", hex(&sha256(f.filename.as_bytes()))[..12].to_string()),
                            "filename": f.filename,
                            "status": f.status,
                            "additions": 1, "deletions": 0, "changes": 1,
                        });
                        if let Some(previous) = &f.previous_filename {
                            file["previous_filename"] = json!(previous);
                        }
                        file
                    })
                    .collect();
                Ok(paged(&world.base_url, path, query, files))
            }
            ("GET", ["pulls", number, "reviews"]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                let reviews: Vec<Value> = pull
                    .reviews
                    .iter()
                    .map(|r| {
                        json!({"id": r.id, "user": user_json(&r.user, "User"), "state": r.state,
                               "commit_id": r.commit_id, "body": "", "submitted_at": timestamp(world.now())})
                    })
                    .collect();
                Ok(paged(&world.base_url, path, query, reviews))
            }
            ("GET", ["compare", basehead]) => {
                need(&[("contents", "read")])?;
                compare(&world.repos[&key], basehead)
            }
            ("GET", ["branches", branch, "protection", "required_status_checks"]) => {
                need(&[("administration", "read")])?;
                let repo = &world.repos[&key];
                let contexts = repo
                    .protection
                    .get(*branch)
                    .ok_or_else(|| Reply::error(404, "Branch not protected"))?;
                Ok(Reply::json(
                    200,
                    &json!({
                        "url": format!("{}{path}", world.base_url),
                        "strict": false,
                        "contexts": contexts,
                        "checks": contexts.iter().map(|c| json!({"context": c, "app_id": null})).collect::<Vec<_>>(),
                    }),
                ))
            }
            ("GET", ["rules", "branches", branch]) => {
                need(&[("metadata", "read")])?;
                let repo = &world.repos[&key];
                let rules: Vec<Value> = repo
                    .rulesets
                    .get(*branch)
                    .map(|contexts| {
                        vec![json!({
                            "type": "required_status_checks",
                            "ruleset_source_type": "Repository",
                            "ruleset_source": repo.full_name(),
                            "ruleset_id": 1,
                            "parameters": {
                                "strict_required_status_checks_policy": false,
                                "do_not_enforce_on_create": false,
                                "required_status_checks": contexts.iter().map(|c| json!({"context": c})).collect::<Vec<_>>(),
                            }
                        })]
                    })
                    .unwrap_or_default();
                Ok(paged(&world.base_url, path, query, rules))
            }
            ("GET", ["commits", reference, "check-runs"]) => {
                need(&[("checks", "read")])?;
                let repo = &world.repos[&key];
                let sha = repo.resolve(reference).ok_or_else(not_found)?;
                // `filter` defaults to `latest`: the newest run of each name.
                let mut latest: BTreeMap<&str, &CheckRunRecord> = BTreeMap::new();
                for run in repo.check_runs.iter().filter(|r| r.head_sha == sha) {
                    latest.insert(run.name.as_str(), run);
                }
                let runs: Vec<Value> = latest
                    .values()
                    .map(|r| check_run_json(&world.base_url, repo, r))
                    .collect();
                Ok(paged_object(
                    &world.base_url,
                    path,
                    query,
                    runs,
                    "check_runs",
                    json!({}),
                ))
            }
            ("GET", ["commits", reference, "status"]) => {
                need(&[("statuses", "read")])?;
                let repo = &world.repos[&key];
                let sha = repo.resolve(reference).ok_or_else(not_found)?;
                let statuses = repo.statuses.get(&sha).cloned().unwrap_or_default();
                let state = if statuses.iter().any(|(_, s)| s == "failure" || s == "error") {
                    "failure"
                } else if statuses.is_empty() || statuses.iter().any(|(_, s)| s == "pending") {
                    "pending"
                } else {
                    "success"
                };
                let items: Vec<Value> = statuses
                    .iter()
                    .map(|(c, s)| json!({"context": c, "state": s, "description": null, "target_url": null}))
                    .collect();
                Ok(paged_object(
                    &world.base_url,
                    path,
                    query,
                    items,
                    "statuses",
                    json!({"state": state, "sha": sha}),
                ))
            }
            ("POST", ["check-runs"]) => {
                need(&[("checks", "write")])?;
                app_only(caller)?;
                create_check_run(world, &key, body)
            }
            ("PATCH", ["check-runs", id]) => {
                need(&[("checks", "write")])?;
                app_only(caller)?;
                update_check_run(world, &key, id, body)
            }
            ("GET", ["issues", number, "comments"]) => {
                need(&[("issues", "read"), ("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let number = number_of(number)
                    .filter(|n| repo.pulls.contains_key(n))
                    .ok_or_else(not_found)?;
                let comments: Vec<Value> = repo
                    .comments
                    .iter()
                    .filter(|c| c.issue_number == number)
                    .map(|c| comment_json(&world.base_url, repo, c))
                    .collect();
                Ok(paged(&world.base_url, path, query, comments))
            }
            ("POST", ["issues", number, "comments"]) => {
                need(&[("issues", "write"), ("pull_requests", "write")])?;
                let number = number_of(number)
                    .filter(|n| world.repos[&key].pulls.contains_key(n))
                    .ok_or_else(not_found)?;
                let text = comment_body(body)?;
                let (author, author_type) = author_of(world, caller);
                let id = world.id();
                let comment = CommentRecord {
                    id,
                    issue_number: number,
                    body: text,
                    author,
                    author_type,
                    history: Vec::new(),
                };
                let repo = world.repos.get_mut(&key).ok_or_else(not_found)?;
                repo.comments.push(comment.clone());
                let repo = &world.repos[&key];
                Ok(Reply::json(
                    201,
                    &comment_json(&world.base_url, repo, &comment),
                ))
            }
            ("PATCH", ["issues", "comments", id]) => {
                need(&[("issues", "write"), ("pull_requests", "write")])?;
                let text = comment_body(body)?;
                let id = number_of(id).ok_or_else(not_found)?;
                let repo = world.repos.get_mut(&key).ok_or_else(not_found)?;
                let comment = repo
                    .comments
                    .iter_mut()
                    .find(|c| c.id == id)
                    .ok_or_else(not_found)?;
                let before = std::mem::replace(&mut comment.body, text);
                crate::github::push_bounded(
                    &mut comment.history,
                    before,
                    crate::github::MAX_HISTORY,
                );
                let comment = comment.clone();
                let repo = &world.repos[&key];
                Ok(Reply::json(
                    200,
                    &comment_json(&world.base_url, repo, &comment),
                ))
            }
            ("GET", ["tarball", reference @ ..]) if !reference.is_empty() => {
                need(&[("contents", "read")])?;
                let reference = reference.join("/");
                let sha = world.repos[&key]
                    .resolve(&reference)
                    .ok_or_else(not_found)?;
                let token = world.new_token("dl");
                let expires_at =
                    world.now() + chrono::Duration::seconds(rules::DOWNLOAD_LINK_LIFETIME_SECS);
                world.downloads.insert(
                    token.clone(),
                    Download {
                        repo: key.clone(),
                        sha: sha.clone(),
                        expires_at,
                    },
                );
                let repo = &world.repos[&key];
                let location = format!(
                    "{}/codeload/{}/{}/legacy.tar.gz/{sha}?token={token}",
                    world.base_url, repo.owner, repo.name
                );
                let mut reply = Reply::error(302, "Found").header("location", location);
                reply.body.clear();
                Ok(reply)
            }
            _ => Err(not_found()),
        }
    })();
    result.unwrap_or_else(|refusal| refusal)
}

pub(super) fn not_found() -> Reply {
    Reply::error(404, "Not Found")
}

fn pull_of<'a>(repo: &'a Repo, number: &str) -> Result<&'a PullState, Reply> {
    number_of(number)
        .and_then(|n| repo.pulls.get(&n))
        .ok_or_else(not_found)
}

pub(super) fn number_of(text: &str) -> Option<u64> {
    text.parse().ok()
}

/// Check runs are written only with an app's installation token: "OAuth apps and
/// authenticated users are not able to create a check suite" ([`rules::MAX_ANNOTATIONS_PER_REQUEST`]'s page).
fn app_only(caller: &Caller) -> Result<(), Reply> {
    match caller.kind {
        TokenKind::Installation(_) => Ok(()),
        _ => Err(Reply::error(403, "You must authenticate via a GitHub App.")),
    }
}

fn author_of(world: &World, caller: &Caller) -> (String, String) {
    match &caller.kind {
        TokenKind::User(login) => (login.clone(), "User".into()),
        _ => (format!("{}[bot]", world.app_slug), "Bot".into()),
    }
}

fn comment_body(body: &[u8]) -> Result<String, Reply> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Reply::error(400, "Problems parsing JSON"))?;
    let text = value["body"].as_str().ok_or_else(|| {
        Reply::invalid("IssueComment", "body", "missing_field", "body is missing")
    })?;
    if text.chars().count() > rules::MAX_COMMENT_CHARS {
        return Err(Reply::invalid(
            "IssueComment",
            "body",
            "custom",
            "body is too long (maximum is 65536 characters)",
        ));
    }
    Ok(text.to_string())
}

fn compare(repo: &Repo, basehead: &str) -> Result<Reply, Reply> {
    let (base, head) = basehead.split_once("...").ok_or_else(not_found)?;
    let base_sha = repo.resolve(base).ok_or_else(not_found)?;
    let head_sha = repo.resolve(head).ok_or_else(not_found)?;
    let (status, ahead, behind) = if base_sha == head_sha {
        ("identical", 0, 0)
    } else if repo
        .pulls
        .values()
        .any(|p| p.spec.head_sha == head_sha && p.base_sha == base_sha)
    {
        // A pull request's head is one commit ahead of the base it was opened on.
        ("ahead", 1, 0)
    } else if repo.pulls.values().any(|p| p.spec.head_sha == head_sha) {
        // Its base moved on since: the head is behind the new base too.
        ("diverged", 1, 1)
    } else {
        return Err(Reply::error(
            404,
            &format!("No common ancestor between {base} and {head}."),
        ));
    };
    Ok(Reply::json(
        200,
        &json!({
            "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
            "base_commit": {"sha": base_sha}, "merge_base_commit": {"sha": base_sha},
            "commits": [], "files": [],
        }),
    ))
}

fn list_pulls(world: &World, key: &str, path: &str, query: Option<&str>) -> Reply {
    let repo = &world.repos[key];
    let params = query_pairs(query);
    let state = params
        .iter()
        .find(|(k, _)| k == "state")
        .map_or("open", |(_, v)| v.as_str());
    let base = params
        .iter()
        .find(|(k, _)| k == "base")
        .map(|(_, v)| v.as_str());
    let pulls: Vec<Value> = repo
        .pulls
        .values()
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| base.is_none_or(|b| p.spec.base_ref == b))
        .map(|p| pull_json(&world.base_url, repo, p))
        .collect();
    paged(&world.base_url, path, query, pulls)
}
