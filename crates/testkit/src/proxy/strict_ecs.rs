//! ECS rules the strict double applies where moto is lenient (issue 25, items 2, 3 and 6).
//!
//! - **RegisterTaskDefinition**: ECS refuses concurrent new revisions of one family with
//!   `ClientException: Too many concurrent attempts to create a new revision of the
//!   specified family.` The double holds every registration for [`HOLD`] before it
//!   forwards it, and refuses another registration of the same family while one is in
//!   progress or for [`BUSY_AFTER`] after it ended; so of several registrations of one
//!   family that overlap, exactly one gets through.
//! - **StopTask**: a `reason` over 255 characters is refused (`InvalidParameterException`).
//! - **RunTask**: a `startedBy` over 36 characters or with a character other than letters,
//!   digits, `-`, `/` and `_`; a tag key outside 1–128 characters or value over 256; a
//!   container's `memory` override above the task's `memory` override (or the sum of the
//!   containers' memory above it), or a container's `memoryReservation` above its `memory`,
//!   are refused as ECS refuses them.

use std::time::Instant;

use super::*;

/// How long the double holds a registration before it forwards it, so that registrations
/// sent together overlap as they do in ECS.
pub(super) const HOLD: Duration = Duration::from_millis(200);
/// How long a family stays busy after a registration of it ended.
pub(super) const BUSY_AFTER: Duration = Duration::from_millis(300);
/// ECS's words for concurrent registrations of one family.
pub const CONCURRENT_REVISIONS: &str =
    "Too many concurrent attempts to create a new revision of the specified family.";
/// ECS's limit on a StopTask `reason` (API_StopTask: "Up to 255 characters are allowed").
const STOP_REASON_MAX: usize = 255;
/// ECS's limit on RunTask's `startedBy` (API_RunTask: "Up to 36 letters ...").
const STARTED_BY_MAX: usize = 36;

/// An ECS JSON error answer.
fn refusal(code: &str, message: &str) -> wire::Response {
    let body = serde_json::json!({"__type": code, "message": message}).to_string();
    wire::Response {
        status: 400,
        reason: wire::reason(400).to_string(),
        headers: vec![
            ("Content-Type".into(), "application/x-amz-json-1.1".into()),
            ("x-amzn-ErrorType".into(), code.into()),
            ("x-amzn-RequestId".into(), "strict-ecs-double".into()),
        ],
        body: body.into_bytes(),
    }
}

/// RegisterTaskDefinition: one new revision of a family at a time (see the module doc).
pub(super) fn register_task_definition(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
    shared: &Shared,
) -> io::Result<wire::Response> {
    let family = recorded
        .json()
        .and_then(|v| v["family"].as_str().map(str::to_string));
    let Some(family) = family else {
        return forward(upstream, request, &recorded.body);
    };
    {
        let mut busy = lock(&shared.registering);
        let now = Instant::now();
        if busy.get(&family).is_some_and(|until| *until > now) {
            return Ok(refusal("ClientException", CONCURRENT_REVISIONS));
        }
        // In progress: busy until it ends (then for BUSY_AFTER more).
        busy.insert(family.clone(), now + Duration::from_secs(3600));
    }
    std::thread::sleep(HOLD);
    let answer = forward(upstream, request, &recorded.body);
    lock(&shared.registering).insert(family, Instant::now() + BUSY_AFTER);
    answer
}

/// StopTask: a `reason` ECS would refuse is refused; anything else reaches moto.
pub(super) fn stop_task(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
) -> io::Result<wire::Response> {
    let params = recorded.json().unwrap_or_default();
    if let Some(reason) = params["reason"].as_str() {
        if reason.chars().count() > STOP_REASON_MAX {
            return Ok(refusal(
                "InvalidParameterException",
                "Reason must be at most 255 characters.",
            ));
        }
    }
    forward(upstream, request, &recorded.body)
}

/// RunTask parameters ECS refuses and moto accepts: the refusal to answer, if any.
pub(super) fn run_task_refusal(params: &serde_json::Value) -> Option<wire::Response> {
    let invalid = |m: &str| Some(refusal("InvalidParameterException", m));
    if let Some(by) = params["startedBy"].as_str() {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_');
        if by.chars().count() > STARTED_BY_MAX || !by.chars().all(ok_char) {
            return invalid("startedBy: up to 36 letters (uppercase and lowercase), numbers, hyphens (-), forward slash (/), and underscores (_) are allowed.");
        }
    }
    for tag in params["tags"].as_array().into_iter().flatten() {
        let key = tag["key"].as_str().unwrap_or_default().chars().count();
        let value = tag["value"].as_str().unwrap_or_default().chars().count();
        if !(1..=128).contains(&key) || value > 256 {
            return invalid("Tag keys must be 1 to 128 characters and values at most 256.");
        }
    }
    let overrides = &params["overrides"];
    let number = |v: &serde_json::Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    let mut sum = 0;
    for c in overrides["containerOverrides"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let memory = number(&c["memory"]);
        if let (Some(m), Some(r)) = (memory, number(&c["memoryReservation"])) {
            if r > m {
                return invalid(
                    "The memory reservation of a container must be lower than its memory.",
                );
            }
        }
        sum += memory
            .or_else(|| number(&c["memoryReservation"]))
            .unwrap_or(0);
    }
    if let Some(task) = number(&overrides["memory"]) {
        if sum > task {
            return invalid(&format!(
                "The total amount of memory of the containers ({sum} MiB) must not exceed the task memory ({task} MiB)."
            ));
        }
    }
    None
}

/// ECS's `clientToken` rules for RunTask, which moto ignores (the strict double).
///
/// - The same token with the same parameters answers what the first request got: the
///   same task, and no second launch.
/// - The same token with different parameters is refused with `ConflictException`,
///   naming the first request's tasks in `resourceIds`.
/// - A request without a token, or whose first answer was an error, is forwarded.
///
/// Requests with a token are serialised, so two racing ones cannot both launch.
pub(super) fn strict_run_task(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
    shared: &Shared,
) -> io::Result<wire::Response> {
    let Some(mut params) = recorded.json() else {
        return forward(upstream, request, &recorded.body);
    };
    if let Some(refusal) = strict_ecs::run_task_refusal(&params) {
        return Ok(refusal);
    }
    if let Some(message) = ecs_tags::run_task_tags_problem(&params) {
        let fault = Fault {
            op: "RunTask".into(),
            skip: 0,
            remaining: 1,
            status: 400,
            code: "InvalidParameterException".into(),
            message,
        };
        return Ok(synthetic_error(recorded, &fault));
    }
    let token = params
        .as_object_mut()
        .and_then(|o| o.remove("clientToken"))
        .and_then(|t| t.as_str().map(str::to_string));
    let Some(token) = token else {
        return forward(upstream, request, &recorded.body);
    };
    let mut tokens = lock(&shared.run_task_tokens);
    if let Some((first, answer)) = tokens.get(&token) {
        if *first == params {
            return Ok(answer.clone());
        }
        let tasks: Vec<serde_json::Value> =
            serde_json::from_slice::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|v| v["tasks"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .map(|t| t["taskArn"].clone())
                .collect();
        let body = serde_json::json!({
            "__type": "ConflictException",
            "message": "The specified client token has already been used with different parameters.",
            "resourceIds": tasks,
        })
        .to_string();
        return Ok(wire::Response {
            status: 400,
            reason: wire::reason(400).to_string(),
            headers: vec![
                ("Content-Type".into(), "application/x-amz-json-1.1".into()),
                ("x-amzn-ErrorType".into(), "ConflictException".into()),
                ("x-amzn-RequestId".into(), "strict-ecs-double".into()),
            ],
            body: body.into_bytes(),
        });
    }
    let answer = forward(upstream, request, &recorded.body)?;
    if answer.status == 200 {
        tokens.insert(token, (params, answer.clone()));
    }
    Ok(answer)
}

/// ECS's rule for ListTasks, which moto ignores (the strict double): "When you
/// specify startedBy as the filter, it must be the only filter that you use."
/// (ECS API Reference, ListTasks). A `startedBy` with `containerInstance`,
/// `family`, `serviceName`, `desiredStatus` or `launchType` is refused with
/// `InvalidParameterException`; `cluster` names where to look and may go with it.
pub(super) fn strict_list_tasks(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
) -> io::Result<wire::Response> {
    const OTHER_FILTERS: [&str; 5] = [
        "containerInstance",
        "family",
        "serviceName",
        "desiredStatus",
        "launchType",
    ];
    let params = recorded.json().unwrap_or_default();
    let given = |k: &str| !params[k].is_null();
    if given("startedBy") && OTHER_FILTERS.iter().any(|k| given(k)) {
        let body = serde_json::json!({
            "__type": "InvalidParameterException",
            "message": "When you specify startedBy as the filter, it must be the only filter that you use.",
        })
        .to_string();
        return Ok(wire::Response {
            status: 400,
            reason: wire::reason(400).to_string(),
            headers: vec![
                ("Content-Type".into(), "application/x-amz-json-1.1".into()),
                (
                    "x-amzn-ErrorType".into(),
                    "InvalidParameterException".into(),
                ),
                ("x-amzn-RequestId".into(), "strict-ecs-double".into()),
            ],
            body: body.into_bytes(),
        });
    }
    forward(upstream, request, &recorded.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_task_parameters_ecs_refuses_are_refused() {
        let ok = serde_json::json!({
            "startedBy": "sortie/01jnx6v4k2m8q9r3s5t7w0y1za",
            "tags": [{"key": "sortie:job", "value": "x"}],
            "overrides": {"memory": "8192", "containerOverrides": [{"name": "runner", "memory": 8192}]},
        });
        assert!(run_task_refusal(&ok).is_none());
        let mut over = ok.clone();
        over["overrides"]["containerOverrides"][0]["memory"] = 8193.into();
        assert!(run_task_refusal(&over).is_some());
        let mut by = ok.clone();
        by["startedBy"] = "sortie:job".into();
        assert!(run_task_refusal(&by).is_some());
        let mut tag = ok;
        tag["tags"][0]["value"] = "v".repeat(257).into();
        assert!(run_task_refusal(&tag).is_some());
    }
}
