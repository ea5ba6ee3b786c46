//! Merge requests: the list, one merge request, its diffs, diff versions and approvals, and
//! approving it (rules::MERGE_REQUESTS_PAGE, rules::DIFFS_PAGE, rules::VERSIONS_PAGE,
//! rules::APPROVALS_PAGE).

use serde_json::{json, Value};

use super::auth::{self, Need, Who};
use super::json::{approvals_json, mr_json, version_json};
use super::paging::paged;
use super::{iid_of, Params, Reply};
use crate::gitlab::records::{AccessLevel, ApprovalRecord};
use crate::gitlab::{rules, MergeRequest, Project, World};

/// GitLab's answer for a merge request that does not exist.
pub(crate) fn mr_not_found() -> Reply {
    Reply::message(404, "404 Not found")
}

/// The project and merge request a path names, for `need`.
pub(crate) fn find<'a>(
    world: &'a World,
    who: &Who,
    id: &str,
    iid: &str,
    need: Need,
) -> Result<(&'a Project, &'a MergeRequest), Reply> {
    let project_id = auth::project(world, who, id, need)?;
    let iid = iid_of(iid)?;
    let project = &world.projects[&project_id];
    let mr = project.merge_requests.get(&iid).ok_or_else(mr_not_found)?;
    Ok((project, mr))
}

const STATES: &[&str] = &["opened", "closed", "locked", "merged", "all"];

pub(crate) fn list(
    world: &World,
    who: &Who,
    id: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let project_id = auth::project(world, who, id, Need::read())?;
    let project = &world.projects[&project_id];
    // `state` defaults to every state; lists are newest first unless `sort=asc`.
    let state = params.text("state").unwrap_or_else(|| "all".into());
    if !STATES.contains(&state.as_str()) {
        return Err(Reply::error(400, "state does not have a valid value"));
    }
    let sort = params.text("sort").unwrap_or_else(|| "desc".into());
    if sort != "asc" && sort != "desc" {
        return Err(Reply::error(400, "sort does not have a valid value"));
    }
    let target = params.text("target_branch");
    let source = params.text("source_branch");
    let mut mrs: Vec<&MergeRequest> = project
        .merge_requests
        .values()
        .filter(|m| state == "all" || m.state == state)
        .filter(|m| target.as_deref().is_none_or(|t| m.spec.target_branch == t))
        .filter(|m| source.as_deref().is_none_or(|s| m.spec.source_branch == s))
        .collect();
    if sort == "desc" {
        mrs.reverse();
    }
    let items: Vec<Value> = mrs
        .into_iter()
        .map(|m| mr_json(world, project, m, false))
        .collect();
    paged(&world.base_url, path, params, items)
}

pub(crate) fn get(
    world: &World,
    who: &Who,
    id: &str,
    iid: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let (project, mr) = find(world, who, id, iid, Need::read())?;
    let mut value = mr_json(world, project, mr, true);
    if params.flag("include_diverged_commits_count") {
        value["diverged_commits_count"] = json!(mr.diverged_commits);
    }
    Ok(Reply::json(200, &value))
}

pub(crate) fn diffs(
    world: &World,
    who: &Who,
    id: &str,
    iid: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let (_, mr) = find(world, who, id, iid, Need::read())?;
    let items: Vec<Value> = mr
        .spec
        .changes
        .iter()
        .map(|c| {
            let mode = if c.deleted_file { "0" } else { "100644" };
            json!({
                "old_path": c.old_path,
                "new_path": c.new_path,
                "a_mode": if c.new_file { "0" } else { "100644" },
                "b_mode": mode,
                "diff": c.diff,
                "new_file": c.new_file,
                "renamed_file": c.renamed_file,
                "deleted_file": c.deleted_file,
                "generated_file": false,
            })
        })
        .collect();
    paged(&world.base_url, path, params, items)
}

/// `GET .../versions`: the merge request's diff versions, newest first, paged
/// (rules::VERSIONS_PAGE).
pub(crate) fn versions(
    world: &World,
    who: &Who,
    id: &str,
    iid: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let (_, mr) = find(world, who, id, iid, Need::read())?;
    let items: Vec<Value> = mr
        .versions
        .iter()
        .rev()
        .map(|v| version_json(mr, v))
        .collect();
    paged(&world.base_url, path, params, items)
}

pub(crate) fn approvals(world: &World, who: &Who, id: &str, iid: &str) -> Result<Reply, Reply> {
    let (project, mr) = find(world, who, id, iid, Need::read())?;
    Ok(Reply::json(200, &approvals_json(world, project, mr)))
}

/// `POST .../approve`: a member allowed to approve (Developer or above, 403 otherwise) who
/// has not approved an open merge request yet (401 otherwise), at its head if `sha` is
/// given (409 otherwise).
pub(crate) fn approve(
    world: &mut World,
    who: &Who,
    id: &str,
    iid: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let need = Need::write().role(AccessLevel::Developer);
    let (project, mr) = find(world, who, id, iid, need)?;
    let (project_id, iid) = (project.id, mr.iid);
    if let Some(sha) = params.text("sha") {
        if sha != mr.head() {
            return Err(Reply::message(
                409,
                &format!("SHA does not match HEAD of source branch: {}", mr.head()),
            ));
        }
    }
    let already = mr.approvals.iter().any(|a| a.username == who.name());
    if already || mr.state != "opened" {
        return Err(Reply::message(401, rules::UNAUTHORIZED));
    }
    let head = mr.head().to_string();
    let username = who.name().to_string();
    let approved_at = world.now();
    let project = world.projects.get_mut(&project_id).expect("found");
    let mr = project.merge_requests.get_mut(&iid).expect("found");
    mr.approvals.push(ApprovalRecord {
        username,
        sha: head,
        approved_at,
    });
    let project = &world.projects[&project_id];
    Ok(Reply::json(
        201,
        &approvals_json(world, project, &project.merge_requests[&iid]),
    ))
}
