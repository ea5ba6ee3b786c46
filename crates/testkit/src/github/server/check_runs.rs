//! Check runs: validating a create or update body as GitHub documents it, and applying
//! it to the run.

use serde_json::{Map, Value};

use super::json::check_run_json;
use super::repository::{not_found, number_of};
use super::Reply;
use crate::github::rules;
use crate::github::{CheckRunRecord, Repo, World};

const CHECK_STATUSES: &[&str] = &[
    "queued",
    "in_progress",
    "completed",
    "waiting",
    "requested",
    "pending",
];
const CHECK_CONCLUSIONS: &[&str] = &[
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
];

/// Validates a check run body as GitHub documents it; `creating` requires `name` and
/// `head_sha`.
fn check_run_fields(repo: &Repo, body: &[u8], creating: bool) -> Result<Value, Reply> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Reply::error(400, "Problems parsing JSON"))?;
    let Value::Object(fields) = &value else {
        return Err(Reply::error(400, "Problems parsing JSON"));
    };
    let string = |name: &str| -> Result<Option<&str>, Reply> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(Reply::invalid(
                "CheckRun",
                name,
                "invalid",
                &format!("{name} is not a string"),
            )),
        }
    };
    if creating {
        if string("name")?.is_none_or(str::is_empty) {
            return Err(Reply::invalid(
                "CheckRun",
                "name",
                "missing_field",
                "name is missing",
            ));
        }
        let sha = string("head_sha")?.ok_or_else(|| {
            Reply::invalid(
                "CheckRun",
                "head_sha",
                "missing_field",
                "head_sha is missing",
            )
        })?;
        if !repo.has_commit(sha) {
            return Err(Reply::error(
                422,
                &format!("No commit found for SHA: {sha}"),
            ));
        }
    }
    let status = string("status")?;
    if let Some(status) = status {
        if !CHECK_STATUSES.contains(&status) {
            return Err(Reply::invalid(
                "CheckRun",
                "status",
                "invalid",
                "status is not included in the list",
            ));
        }
    }
    let conclusion = string("conclusion")?;
    if let Some(conclusion) = conclusion {
        if !CHECK_CONCLUSIONS.contains(&conclusion) {
            return Err(Reply::invalid(
                "CheckRun",
                "conclusion",
                "invalid",
                "conclusion is not included in the list",
            ));
        }
    }
    if status == Some("completed") && conclusion.is_none() {
        return Err(Reply::invalid(
            "CheckRun",
            "conclusion",
            "missing_field",
            "conclusion is required when status is completed",
        ));
    }
    string("details_url")?;
    string("external_id")?;
    if let Some(output) = fields.get("output").filter(|o| !o.is_null()) {
        let Value::Object(output) = output else {
            return Err(Reply::invalid(
                "CheckRun",
                "output",
                "invalid",
                "output is not an object",
            ));
        };
        for required in ["title", "summary"] {
            if !output.get(required).is_some_and(Value::is_string) {
                return Err(Reply::invalid(
                    "CheckRun",
                    &format!("output.{required}"),
                    "missing_field",
                    &format!("output.{required} is missing"),
                ));
            }
        }
        for field in ["summary", "text"] {
            let chars = output
                .get(field)
                .and_then(Value::as_str)
                .map_or(0, |s| s.chars().count());
            if chars > rules::MAX_CHECK_OUTPUT_CHARS {
                return Err(Reply::error(
                    422,
                    &format!("Invalid request.\n\nOnly {} characters are allowed; {chars} were supplied.", rules::MAX_CHECK_OUTPUT_CHARS),
                ));
            }
        }
        if let Some(annotations) = output.get("annotations").and_then(Value::as_array) {
            if annotations.len() > rules::MAX_ANNOTATIONS_PER_REQUEST {
                return Err(Reply::error(
                    422,
                    &format!("Invalid request.\n\nOnly {} annotations are allowed per request; {} were supplied.", rules::MAX_ANNOTATIONS_PER_REQUEST, annotations.len()),
                ));
            }
        }
    }
    Ok(value)
}

/// Applies a validated body to a run: "Providing conclusion will automatically set the
/// status parameter to completed."
fn apply_check_run(run: &mut CheckRunRecord, fields: &Map<String, Value>) {
    let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_string);
    if let Some(name) = text("name") {
        run.name = name;
    }
    if let Some(status) = text("status") {
        run.status = status;
    }
    if let Some(conclusion) = text("conclusion") {
        run.conclusion = Some(conclusion);
        run.status = "completed".into();
    }
    if let Some(url) = text("details_url") {
        run.details_url = Some(url);
    }
    if let Some(id) = text("external_id") {
        run.external_id = Some(id);
    }
    if let Some(output) = fields.get("output").filter(|o| !o.is_null()) {
        run.output = Some(output.clone());
    }
}

pub(super) fn create_check_run(world: &mut World, key: &str, body: &[u8]) -> Result<Reply, Reply> {
    let value = check_run_fields(&world.repos[key], body, true)?;
    let fields = value.as_object().cloned().unwrap_or_default();
    let id = world.id();
    let mut run = CheckRunRecord {
        id,
        name: String::new(),
        head_sha: fields["head_sha"].as_str().unwrap_or_default().to_string(),
        status: "queued".into(),
        conclusion: None,
        external_id: None,
        details_url: None,
        output: None,
        app_id: world.app_id,
        history: vec![value.clone()],
    };
    apply_check_run(&mut run, &fields);
    let repo = world.repos.get_mut(key).ok_or_else(not_found)?;
    repo.check_runs.push(run.clone());
    Ok(Reply::json(
        201,
        &check_run_json(&world.base_url, &world.repos[key], &run),
    ))
}

pub(super) fn update_check_run(
    world: &mut World,
    key: &str,
    id: &str,
    body: &[u8],
) -> Result<Reply, Reply> {
    let id = number_of(id).ok_or_else(not_found)?;
    let value = check_run_fields(&world.repos[key], body, false)?;
    let fields = value.as_object().cloned().unwrap_or_default();
    let repo = world.repos.get_mut(key).ok_or_else(not_found)?;
    let run = repo
        .check_runs
        .iter_mut()
        .find(|r| r.id == id)
        .ok_or_else(not_found)?;
    apply_check_run(run, &fields);
    crate::github::push_bounded(&mut run.history, value, crate::github::MAX_HISTORY);
    let run = run.clone();
    Ok(Reply::json(
        200,
        &check_run_json(&world.base_url, &world.repos[key], &run),
    ))
}
