//! `sortie_environment`: an environment, its type, labels, tags and tool settings; Sortie
//! links it to the runner its rules pick (`runner_id`, `rule_id`).

use http::Method;
use serde_json::{json, Value};

use super::{pick, text, version};
use crate::api::{segment, Api};
use crate::error::Error;
use crate::schema::{attr, string_map, string_set, Block, Mode, Ty};

/// Its schema.
pub fn block() -> Block {
    use Mode::*;
    Block {
        attrs: vec![
            attr(
                "id",
                Ty::String,
                Computed,
                "The environment's path, `<group>/<name>`.",
            ),
            attr(
                "group",
                Ty::String,
                Required,
                "The group the environment belongs to.",
            )
            .force_new(),
            attr(
                "name",
                Ty::String,
                Required,
                "The environment's name within its group.",
            )
            .force_new(),
            attr(
                "env_type",
                Ty::String,
                Required,
                "The environment's type (rules may match on it).",
            ),
            attr(
                "labels",
                string_map(),
                Optional,
                "Labels, key to value (rules may match on them).",
            ),
            attr(
                "tags",
                string_set(),
                Optional,
                "Tags (rules may match on them).",
            ),
            attr(
                "tool",
                Ty::String,
                Optional,
                "`terraform` or `opentofu`; the runner's when unset.",
            ),
            attr(
                "tool_version",
                Ty::String,
                Optional,
                "The tool version, exact or a constraint.",
            ),
            attr(
                "runner_id",
                Ty::String,
                Computed,
                "The runner the rules linked it to.",
            )
            .volatile(),
            attr(
                "rule_id",
                Ty::String,
                Computed,
                "The rule that picked the runner.",
            )
            .volatile(),
            attr(
                "version",
                Ty::Number,
                Computed,
                "The version (the API's ETag).",
            )
            .volatile(),
        ],
        blocks: vec![],
        description:
            "A Sortie environment. Created, it is linked to the runner Sortie's rules pick.",
    }
}

fn path(state: &Value) -> String {
    format!("/v1/environments/{}", segment(text(state, "id")))
}

/// The API's view as state.
pub fn state_of(view: &Value) -> Value {
    json!({
        "id": view["path"],
        "group": view["group"],
        "name": view["name"],
        "env_type": view["env_type"],
        "labels": view["labels"],
        "tags": view["tags"],
        "tool": view["tool"],
        "tool_version": view["tool_version"],
        "runner_id": view["runner"]["runner_id"],
        "rule_id": view["runner"]["rule_id"],
        "version": view["version"],
    })
}

fn body(planned: &Value) -> serde_json::Map<String, Value> {
    let mut b = pick(planned, &["env_type", "tool", "tool_version"]);
    b.insert(
        "labels".into(),
        planned
            .get("labels")
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(json!({})),
    );
    b.insert(
        "tags".into(),
        planned
            .get("tags")
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(json!([])),
    );
    b
}

/// Creates it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let mut b = body(planned);
    b.insert("name".into(), planned["name"].clone());
    let group = crate::api::group_param(text(planned, "group"));
    let answer = api
        .send(
            Method::POST,
            &format!("/v1/groups/{group}/-/environments"),
            Some(&Value::Object(b)),
            None,
        )
        .await?;
    Ok(state_of(&answer.body))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    Ok(state_of(&api.get(&path(state)).await?.body))
}

/// Updates it in place (`PATCH` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let mut b = body(planned);
    for clearable in ["tool", "tool_version"] {
        b.entry(clearable).or_insert(Value::Null);
    }
    let answer = api
        .send(
            Method::PATCH,
            &path(prior),
            Some(&Value::Object(b)),
            Some(version(prior)),
        )
        .await?;
    Ok(state_of(&answer.body))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(Method::DELETE, &path(state), None, None).await?;
    Ok(())
}
