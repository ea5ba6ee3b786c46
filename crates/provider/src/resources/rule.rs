//! `sortie_runner_rule`: at a scope, environments meeting the criteria use a runner.

use serde_json::{json, Value};

use super::{text, version};
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_map, string_set, Block, Mode, Ty};
use sortie_client::{endpoints, Call};

/// Its schema.
pub fn block() -> Block {
    use Mode::*;
    Block {
        attrs: vec![
            attr("id", Ty::String, Computed, "`<scope>/<rule_id>`."),
            attr(
                "scope",
                Ty::String,
                Required,
                "The group the rule applies in (and below).",
            )
            .force_new(),
            attr(
                "rule_id",
                Ty::String,
                Required,
                "The rule's id, unique within its scope.",
            )
            .force_new(),
            attr("runner_id", Ty::String, Required, "The runner it picks."),
            attr(
                "priority",
                Ty::Number,
                OptionalComputed,
                "Breaks ties; higher wins (0 when unset).",
            ),
            attr(
                "env_type",
                Ty::String,
                Optional,
                "Criterion: the environment's type equals this.",
            ),
            attr(
                "env_path",
                Ty::String,
                Optional,
                "Criterion: a glob over the environment's path.",
            ),
            attr(
                "labels",
                string_map(),
                Optional,
                "Criterion: every label here is on the environment.",
            ),
            attr(
                "tags",
                string_set(),
                Optional,
                "Criterion: every tag here is among the environment's.",
            ),
            attr(
                "version",
                Ty::Number,
                Computed,
                "The version (the API's ETag).",
            )
            .volatile(),
        ],
        blocks: vec![],
        description: "A Sortie runner rule.",
    }
}

fn body(planned: &Value) -> Value {
    let mut criteria = serde_json::Map::new();
    for c in ["env_type", "env_path", "labels", "tags"] {
        if let Some(v) = planned.get(c).filter(|v| !v.is_null()) {
            criteria.insert(c.into(), v.clone());
        }
    }
    let mut b = json!({
        "id": planned["rule_id"],
        "runner_id": planned["runner_id"],
        "criteria": criteria,
    });
    if !planned["priority"].is_null() {
        b["priority"] = planned["priority"].clone();
    }
    b
}

fn state_of(view: &Value, version: Option<&str>) -> Value {
    let c = &view["criteria"];
    json!({
        "id": format!("{}/{}", text(view, "scope"), text(view, "id")),
        "scope": view["scope"],
        "rule_id": view["id"],
        "runner_id": view["runner_id"],
        "priority": view["priority"],
        "env_type": c["env_type"],
        "env_path": c["env_path"],
        "labels": c["labels"],
        "tags": c["tags"],
        "version": version.and_then(|v| v.parse::<u64>().ok()),
    })
}

fn at(endpoint: fn(&str, &str) -> Call, state: &Value) -> Call {
    endpoint(
        sortie_client::group(text(state, "scope")),
        text(state, "rule_id"),
    )
}

/// Creates it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let p = endpoints::create_rule(sortie_client::group(text(planned, "scope")));
    let a = api.send(&p, Some(&body(planned)), None).await?;
    Ok(state_of(&a.body, a.etag.as_deref()))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    let a = api.get(&at(endpoints::get_rule, state)).await?;
    Ok(state_of(&a.body, a.etag.as_deref()))
}

/// Replaces it in place (`PUT` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let a = api
        .send(
            &at(endpoints::update_rule, prior),
            Some(&body(planned)),
            Some(version(prior)),
        )
        .await?;
    Ok(state_of(&a.body, a.etag.as_deref()))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(&at(endpoints::delete_rule, state), None, None)
        .await?;
    Ok(())
}

/// An import id `<scope>/<rule_id>`.
pub fn import_state(id: &str) -> Result<Value, Error> {
    match id.rsplit_once('/') {
        Some((scope, rule)) if !rule.is_empty() => {
            Ok(json!({ "id": id, "scope": scope, "rule_id": rule }))
        }
        _ => Err(Error::Invalid {
            attribute: "id".into(),
            problem: format!("`{id}` is not `<scope>/<rule_id>`"),
        }),
    }
}

/// `criteria.labels.x` → `labels`, `id` → `rule_id`.
pub fn attribute_of(api_path: &str) -> Option<String> {
    let mut parts = api_path.split('.');
    let head = parts.next()?;
    Some(match head {
        "criteria" => parts.next()?.to_string(),
        "id" => "rule_id".into(),
        "scope" | "runner_id" | "priority" => head.to_string(),
        _ => return None,
    })
}
