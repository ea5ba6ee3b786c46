//! The JSON GitLab answers with: users, projects, merge requests, notes, statuses and
//! approvals, with the fields its API pages document; and the objects webhook payloads
//! embed.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::gitlab::{MergeRequest, NoteRecord, Project, StatusRecord, Version, World};

pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub(crate) fn user_json(world: &World, username: &str) -> Value {
    json!({
        "id": world.users.get(username).copied().unwrap_or(0),
        "username": username,
        "name": username,
        "state": "active",
        "locked": false,
        "avatar_url": null,
        "web_url": format!("{}/{username}", world.base_url),
    })
}

pub(crate) fn project_json(world: &World, project_id: u64) -> Value {
    let p = &world.projects[&project_id];
    let (namespace, _) = p
        .path_with_namespace
        .rsplit_once('/')
        .unwrap_or(("", &p.path_with_namespace));
    let web_url = format!("{}/{}", world.base_url, p.path_with_namespace);
    json!({
        "id": p.id,
        "description": null,
        "name": p.path(),
        "name_with_namespace": p.path_with_namespace.replace('/', " / "),
        "path": p.path(),
        "path_with_namespace": p.path_with_namespace,
        "default_branch": p.default_branch,
        "visibility": "private",
        "web_url": web_url,
        "http_url_to_repo": format!("{web_url}.git"),
        "namespace": {
            "name": namespace.rsplit('/').next().unwrap_or(namespace),
            "path": namespace.rsplit('/').next().unwrap_or(namespace),
            "kind": "group",
            "full_path": namespace,
        },
        "archived": false,
        "merge_method": p.settings.merge_method,
        "only_allow_merge_if_pipeline_succeeds": p.settings.pipeline_must_succeed,
        "approvals_before_merge": p.settings.approvals_required,
    })
}

/// A merge request as `GET .../merge_requests/:iid` answers (`single`), or as lists do.
pub(crate) fn mr_json(world: &World, project: &Project, mr: &MergeRequest, single: bool) -> Value {
    let web_url = format!(
        "{}/{}/-/merge_requests/{}",
        world.base_url, project.path_with_namespace, mr.iid
    );
    let merge_status = mr.merge_status();
    let mut value = json!({
        "id": mr.id,
        "iid": mr.iid,
        "project_id": project.id,
        "title": mr.spec.title,
        "description": "",
        "state": mr.state,
        "created_at": timestamp(mr.created_at),
        "updated_at": timestamp(mr.updated_at),
        "target_branch": mr.spec.target_branch,
        "source_branch": mr.spec.source_branch,
        "source_project_id": mr.source_project_id,
        "target_project_id": project.id,
        "author": user_json(world, &mr.spec.author),
        "assignees": [],
        "reviewers": [],
        "labels": [],
        "draft": mr.spec.draft,
        "work_in_progress": mr.spec.draft,
        "merge_when_pipeline_succeeds": false,
        "merge_status": merge_status,
        "detailed_merge_status": mr.detailed_merge_status(project),
        "sha": mr.head(),
        "merge_commit_sha": mr.merge_commit_sha,
        "squash_commit_sha": null,
        "has_conflicts": merge_status == "cannot_be_merged",
        "blocking_discussions_resolved": mr.discussions_resolved,
        "reference": format!("!{}", mr.iid),
        "references": {
            "short": format!("!{}", mr.iid),
            "relative": format!("!{}", mr.iid),
            "full": format!("{}!{}", project.path_with_namespace, mr.iid),
        },
        "web_url": web_url,
        "user_notes_count": project.notes.iter().filter(|n| n.merge_request_iid == mr.iid).count(),
    });
    if single {
        value["diff_refs"] = json!({
            "base_sha": mr.base_sha(),
            "head_sha": mr.head(),
            "start_sha": mr.start_sha(),
        });
        value["changes_count"] = json!(mr.spec.changes.len().to_string());
    }
    value
}

pub(crate) fn note_json(world: &World, project: &Project, note: &NoteRecord) -> Value {
    json!({
        "id": note.id,
        "type": null,
        "body": note.body,
        "attachment": null,
        "author": user_json(world, &note.author),
        "created_at": timestamp(world.now()),
        "updated_at": timestamp(world.now()),
        "system": false,
        "noteable_id": project.merge_requests.get(&note.merge_request_iid).map_or(0, |m| m.id),
        "noteable_type": "MergeRequest",
        "project_id": project.id,
        "noteable_iid": note.merge_request_iid,
        "resolvable": false,
        "confidential": false,
        "internal": false,
    })
}

pub(crate) fn status_json(world: &World, status: &StatusRecord) -> Value {
    let finished = !matches!(status.status.as_str(), "pending" | "running" | "created");
    json!({
        "id": status.id,
        "sha": status.sha,
        "ref": status.git_ref,
        "status": status.status,
        "name": status.name,
        "target_url": status.target_url,
        "description": status.description,
        "created_at": timestamp(world.now()),
        "started_at": null,
        "finished_at": if finished { json!(timestamp(world.now())) } else { Value::Null },
        "allow_failure": false,
        "coverage": null,
        "author": user_json(world, &status.author),
    })
}

pub(crate) fn approvals_json(world: &World, project: &Project, mr: &MergeRequest) -> Value {
    let required = project.settings.approvals_required;
    let left = mr.approvals_left(project);
    let approved = if required == 0 {
        !mr.approvals.is_empty()
    } else {
        left == 0
    };
    json!({
        "id": mr.id,
        "iid": mr.iid,
        "project_id": project.id,
        "title": mr.spec.title,
        "description": "",
        "state": mr.state,
        "created_at": timestamp(mr.created_at),
        "updated_at": timestamp(mr.updated_at),
        "merge_status": mr.merge_status(),
        "approved": approved,
        "approvals_required": required,
        "approvals_left": left,
        "approved_by": mr.approvals.iter().map(|a| json!({
            "user": user_json(world, &a.username),
            "approved_at": timestamp(a.approved_at),
        })).collect::<Vec<_>>(),
    })
}

/// A diff version as `GET .../merge_requests/:iid/versions` lists it. `patch_id_sha` (the
/// `git patch-id` of the diff) is a stand-in made from the version's id: the double keeps no
/// diff text to hash.
pub(crate) fn version_json(mr: &MergeRequest, version: &Version) -> Value {
    json!({
        "id": version.id,
        "head_commit_sha": version.head_sha,
        "base_commit_sha": version.base_sha,
        "start_commit_sha": version.start_sha,
        "created_at": timestamp(version.created_at),
        "merge_request_id": mr.id,
        "state": "collected",
        "real_size": version.real_size.to_string(),
        "patch_id_sha": format!("{:0>40x}", version.id),
    })
}

/// The `project` object of a webhook payload.
pub(crate) fn project_hook_json(world: &World, project: &Project) -> Value {
    let web_url = format!("{}/{}", world.base_url, project.path_with_namespace);
    let namespace = project
        .path_with_namespace
        .rsplit_once('/')
        .map_or("", |(n, _)| n);
    json!({
        "id": project.id,
        "name": project.path(),
        "description": "",
        "web_url": web_url,
        "avatar_url": null,
        "git_ssh_url": format!("git@127.0.0.1:{}.git", project.path_with_namespace),
        "git_http_url": format!("{web_url}.git"),
        "namespace": namespace,
        "visibility_level": 0,
        "path_with_namespace": project.path_with_namespace,
        "default_branch": project.default_branch,
        "ci_config_path": null,
        "homepage": web_url,
        "url": format!("{web_url}.git"),
        "ssh_url": format!("git@127.0.0.1:{}.git", project.path_with_namespace),
        "http_url": format!("{web_url}.git"),
    })
}

/// The `user` object of a webhook payload.
pub(crate) fn user_hook_json(world: &World, username: &str) -> Value {
    json!({
        "id": world.users.get(username).copied().unwrap_or(0),
        "name": username,
        "username": username,
        "avatar_url": null,
        "email": "[REDACTED]",
    })
}

/// A merge request's `object_attributes` in a Merge Request Hook (and its `merge_request`
/// object in a Note Hook).
pub(crate) fn mr_hook_attributes(world: &World, project: &Project, mr: &MergeRequest) -> Value {
    let source = world
        .projects
        .get(&mr.source_project_id)
        .map_or(Value::Null, |p| project_hook_json(world, p));
    json!({
        "id": mr.id,
        "iid": mr.iid,
        "target_branch": mr.spec.target_branch,
        "source_branch": mr.spec.source_branch,
        "source_project_id": mr.source_project_id,
        "target_project_id": project.id,
        "author_id": world.users.get(&mr.spec.author).copied().unwrap_or(0),
        "title": mr.spec.title,
        "description": "",
        "created_at": timestamp(mr.created_at),
        "updated_at": timestamp(mr.updated_at),
        "state": mr.state,
        "blocking_discussions_resolved": mr.discussions_resolved,
        "work_in_progress": mr.spec.draft,
        "draft": mr.spec.draft,
        "merge_status": mr.merge_status(),
        "detailed_merge_status": mr.detailed_merge_status(project),
        "merge_commit_sha": mr.merge_commit_sha,
        "url": format!("{}/{}/-/merge_requests/{}", world.base_url, project.path_with_namespace, mr.iid),
        "source": source,
        "target": project_hook_json(world, project),
        "last_commit": {
            "id": mr.head(),
            "message": mr.spec.title,
            "title": mr.spec.title,
            "timestamp": timestamp(mr.updated_at),
            "url": format!("{}/{}/-/commit/{}", world.base_url, project.path_with_namespace, mr.head()),
            "author": {"name": mr.spec.author, "email": "[REDACTED]"},
        },
        "labels": [],
    })
}
