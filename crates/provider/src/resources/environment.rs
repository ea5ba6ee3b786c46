//! `sortie_environment`: an environment, its type, labels, tags, tool settings, expiry
//! (`ttl`, `ttl_from`, `expires_at`) and triggers (`triggers`, `trigger_operation`,
//! `trigger_inputs`); Sortie links it to the runner its rules pick (`runner_id`,
//! `rule_id`). A person's lock is not an attribute: locks are operational (an incident, a
//! release freeze), not configuration (docs/decisions/provider.md).

use http::Method;
use serde_json::{json, Value};

use super::{pick, text, version};
use crate::api::{segment, Api};
use crate::error::Error;
use crate::schema::{attr, string_list, string_map, string_set, Block, Mode, Ty};

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
                "ttl",
                Ty::String,
                Optional,
                "How long it lives: a whole number and one unit of `s`, `m`, `h`, `d` (`72h`), from `ttl_from`. When it expires Sortie destroys it.",
            ),
            attr(
                "ttl_from",
                Ty::String,
                OptionalComputed,
                "`created` (the default) or `last_apply`: what `ttl` counts from.",
            ),
            attr(
                "expires_at",
                Ty::String,
                OptionalComputed,
                "When it expires (RFC 3339). `sortie env extend` writes it too, and a plan keeps the extended end.",
            ),
            attr(
                "triggers",
                string_list(),
                Optional,
                "Upstream environments (paths): a successful apply of one whose outputs changed runs `trigger_operation` here.",
            ),
            attr(
                "trigger_operation",
                Ty::String,
                OptionalComputed,
                "`plan` (the default) or `apply`: what an upstream's apply runs here.",
            ),
            attr(
                "trigger_inputs",
                string_list(),
                Optional,
                "Upstream outputs given to this environment's runs as Terraform variables, by name.",
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

/// The API's view as state; `reference` (the planned or prior state) keeps its spelling of
/// a `ttl` the API stores in another (`72h` is stored as `3d`).
pub fn state_of(view: &Value, reference: &Value) -> Value {
    let ttl = match (view["ttl"].as_str(), reference["ttl"].as_str()) {
        (Some(api), Some(ours)) if seconds(api).is_some() && seconds(api) == seconds(ours) => {
            Value::String(ours.to_string())
        }
        _ => view["ttl"].clone(),
    };
    let or = |v: &Value, default: &str| {
        if v.is_null() {
            Value::String(default.into())
        } else {
            v.clone()
        }
    };
    json!({
        "id": view["path"],
        "group": view["group"],
        "name": view["name"],
        "env_type": view["env_type"],
        "labels": view["labels"],
        "tags": view["tags"],
        "tool": view["tool"],
        "tool_version": view["tool_version"],
        "ttl": ttl,
        // Absent from the API's view when they are the default.
        "ttl_from": or(&view["ttl_from"], "created"),
        "expires_at": view["expires_at"],
        "triggers": view["triggers"],
        "trigger_operation": or(&view["trigger_operation"], "plan"),
        "trigger_inputs": view["trigger_inputs"],
        "runner_id": view["runner"]["runner_id"],
        "rule_id": view["runner"]["rule_id"],
        "version": view["version"],
    })
}

/// A duration's seconds (`72h`: 259200), as the API reads one; `None` when it is not one.
fn seconds(text: &str) -> Option<u64> {
    let unit = text.chars().last()?;
    let n: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    n.checked_mul(per)
}

fn body(planned: &Value) -> serde_json::Map<String, Value> {
    let mut b = pick(
        planned,
        &[
            "env_type",
            "tool",
            "tool_version",
            "ttl",
            "ttl_from",
            "expires_at",
            "trigger_operation",
        ],
    );
    for list in ["triggers", "trigger_inputs"] {
        b.insert(
            list.into(),
            planned
                .get(list)
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or(json!([])),
        );
    }
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
    Ok(state_of(&answer.body, planned))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    Ok(state_of(&api.get(&path(state)).await?.body, state))
}

/// Updates it in place (`PATCH` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let mut b = body(planned);
    for clearable in ["tool", "tool_version", "ttl"] {
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
    Ok(state_of(&answer.body, planned))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(Method::DELETE, &path(state), None, None).await?;
    Ok(())
}
