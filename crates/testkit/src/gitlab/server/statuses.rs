//! Commit statuses: posting one through GitLab's job state machine, with the field limits it
//! validates, and listing a commit's statuses (rules::MAX_STATUS_FIELD_CHARS).

use serde_json::{Map, Value};

use super::auth::{self, Need, Who};
use super::json::status_json;
use super::paging::paged;
use super::{Params, Reply};
use crate::gitlab::records::{AccessLevel, StatusRecord};
use crate::gitlab::{rules, World};

const STATES: &[&str] = &[
    "pending", "running", "success", "failed", "canceled", "skipped",
];

/// The state an event moves a job from `from` to, as GitLab's `CommitStatus` state machine
/// allows it, or the error its `InvalidTransition` carries.
fn fire(event: &str, from: &str) -> Result<&'static str, String> {
    let (allowed, to): (&[&str], &'static str) = match event {
        "enqueue" => (&["created", "skipped"], "pending"),
        "run" => (&["pending"], "running"),
        "success" => (&["created", "pending", "running"], "success"),
        "drop" => (&["created", "pending", "running"], "failed"),
        "cancel" => (&["created", "pending", "running"], "canceled"),
        "skip" => (&["created", "pending"], "skipped"),
        _ => (&[], "created"),
    };
    if allowed.contains(&from) {
        Ok(to)
    } else {
        Err(format!(
            "Cannot transition status via :{event} from :{from} (Reason(s): Status cannot transition via \"{event}\")"
        ))
    }
}

/// Applies `state` as `Ci::CreateCommitStatusService` does: `running` enqueues first
/// (ignoring a failure) and then runs.
fn apply(state: &str, from: &str) -> Result<&'static str, String> {
    match state {
        "pending" => fire("enqueue", from),
        "running" => {
            let queued = fire("enqueue", from).unwrap_or(match from {
                "pending" => "pending",
                "running" => "running",
                _ => "created",
            });
            fire("run", queued)
        }
        "success" => fire("success", from),
        "failed" => fire("drop", from),
        "canceled" => fire("cancel", from),
        _ => fire("skip", from),
    }
}

/// The validation errors of a status's optional fields, keyed by field.
fn field_errors(git_ref: &str, params: &Params) -> Map<String, Value> {
    let mut errors = Map::new();
    let too_long = Value::String(format!(
        "is too long (maximum is {} characters)",
        rules::MAX_STATUS_FIELD_CHARS
    ));
    if git_ref.chars().count() > rules::MAX_STATUS_FIELD_CHARS {
        errors.insert("ref".into(), Value::Array(vec![too_long.clone()]));
    }
    if let Some(url) = params.text("target_url") {
        let mut problems = Vec::new();
        let host = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
        if host.is_none_or(str::is_empty) {
            problems.push(Value::String(
                "is blocked: Only allowed schemes are http, https".into(),
            ));
        }
        if url.chars().count() > rules::MAX_STATUS_FIELD_CHARS {
            problems.push(too_long.clone());
        }
        if !problems.is_empty() {
            errors.insert("target_url".into(), Value::Array(problems));
        }
    }
    if params
        .text("description")
        .is_some_and(|d| d.chars().count() > rules::MAX_STATUS_FIELD_CHARS)
    {
        errors.insert("description".into(), Value::Array(vec![too_long]));
    }
    errors
}

pub(crate) fn create(
    world: &mut World,
    who: &Who,
    id: &str,
    sha: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let need = Need::write().role(AccessLevel::Developer);
    auth::check(who, need)?;
    let state = params.required("state")?;
    if !STATES.contains(&state.as_str()) {
        return Err(Reply::error(400, "state does not have a valid value"));
    }
    let project_id = auth::project(world, who, id, need)?;
    let project = &world.projects[&project_id];
    if !project.has_commit(sha) {
        return Err(Reply::message(404, "404 Commit Not Found"));
    }
    let git_ref = params
        .text("ref")
        .or_else(|| project.branch_containing(sha))
        .ok_or_else(|| Reply::message(404, rules::FORK_STATUS))?;
    let name = params
        .text("name")
        .or_else(|| params.text("context"))
        .unwrap_or_else(|| "default".into());
    let errors = field_errors(&git_ref, params);
    if !errors.is_empty() {
        // `render_api_error!(commit_status.errors.messages, 400)`.
        return Err(Reply::json(
            400,
            &serde_json::json!({ "message": Value::Object(errors) }),
        ));
    }
    // A status of the same name, ref and author still pending or running is the same job.
    let existing = project.statuses.iter().rposition(|s| {
        s.sha == sha
            && s.name == name
            && s.git_ref == git_ref
            && s.author == who.name()
            && (s.status == "pending" || s.status == "running")
    });
    let from = existing.map_or("created", |i| project.statuses[i].status.as_str());
    let to = apply(&state, from).map_err(|message| Reply::message(400, &message))?;
    let new_id = world.id();
    let project = world.projects.get_mut(&project_id).expect("found");
    let index = match existing {
        Some(index) => index,
        None => {
            project.statuses.push(StatusRecord {
                id: new_id,
                sha: sha.to_string(),
                git_ref,
                name,
                status: "created".into(),
                description: None,
                target_url: None,
                author: who.name().to_string(),
                history: Vec::new(),
            });
            project.statuses.len() - 1
        }
    };
    let status = &mut project.statuses[index];
    status.status = to.to_string();
    crate::gitlab::push_bounded(
        &mut status.history,
        to.to_string(),
        crate::gitlab::MAX_HISTORY,
    );
    if let Some(description) = params.text("description") {
        status.description = Some(description);
    }
    if let Some(url) = params.text("target_url") {
        status.target_url = Some(url);
    }
    let status = status.clone();
    Ok(Reply::json(201, &status_json(world, &status)))
}

pub(crate) fn list(
    world: &World,
    who: &Who,
    id: &str,
    sha: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let project_id = auth::project(world, who, id, Need::read().authenticated())?;
    let project = &world.projects[&project_id];
    if !project.has_commit(sha) {
        return Err(Reply::message(404, "404 Commit Not Found"));
    }
    let mut statuses: Vec<&StatusRecord> = if params.flag("all") {
        project.statuses.iter().filter(|s| s.sha == sha).collect()
    } else {
        project.latest_statuses(sha)
    };
    if let Some(git_ref) = params.text("ref") {
        statuses.retain(|s| s.git_ref == git_ref);
    }
    if let Some(name) = params.text("name") {
        statuses.retain(|s| s.name == name);
    }
    if params.text("sort").as_deref() == Some("desc") {
        statuses.reverse();
    }
    let items: Vec<Value> = statuses.iter().map(|s| status_json(world, s)).collect();
    paged(&world.base_url, path, params, items)
}
