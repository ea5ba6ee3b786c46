//! `sortie_environment`: an environment, its type, labels, tags, tool settings, expiry
//! (`ttl`, `ttl_from`, `expires_at`) and triggers (`triggers`, `trigger_operation`,
//! `trigger_inputs`) and its binding to a repository (the `vcs` block: which pull requests
//! plan it, when they apply, what an apply requires); Sortie links it to the runner its
//! rules pick (`runner_id`, `rule_id`). A person's lock is not an attribute: locks are operational (an incident, a
//! release freeze), not configuration (docs/decisions/provider.md).

use serde_json::{json, Value};

use super::{pick, text, version};
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_list, string_map, string_set, Block, Mode, Nested, Ty};
use sortie_client::{endpoints, Call};

/// The `vcs` block: the environment's binding to a repository directory.
fn vcs_block() -> Nested {
    use Mode::*;
    Nested {
        name: "vcs",
        block: Block {
            attrs: vec![
                attr(
                    "provider",
                    Ty::String,
                    OptionalComputed,
                    "The repository's host: `github` (the default).",
                ),
                attr(
                    "repository",
                    Ty::String,
                    Required,
                    "The repository, `owner/name`. Its pull requests are planned once its owner has a connection (`sortie vcs connect`).",
                ),
                attr(
                    "directory",
                    Ty::String,
                    Optional,
                    "The environment's directory, relative to the repository root; unset for the root.",
                ),
                attr(
                    "branch",
                    Ty::String,
                    OptionalComputed,
                    "The base branch whose pull requests are planned (`main` when unset).",
                ),
                attr(
                    "when_modified",
                    string_list(),
                    Optional,
                    "Globs relative to the repository root: a pull request changing a matching path plans here. Unset, `<directory>/**`.",
                ),
                attr(
                    "apply",
                    Ty::String,
                    OptionalComputed,
                    "`after_merge` (the default: the merge commit is applied), `before_merge` (`/sortie apply` on the pull request, once the requirements hold) or `none` (plans only).",
                ),
            ],
            blocks: vec![Nested {
                name: "requirements",
                block: Block {
                    attrs: vec![
                        attr(
                            "approved",
                            Ty::Number,
                            Optional,
                            "This many approvals (1 to 10) of the head commit, by people other than the author.",
                        ),
                        attr(
                            "mergeable",
                            Ty::Bool,
                            Optional,
                            "The host says the pull request can be merged, and it is not a draft.",
                        ),
                        attr(
                            "undiverged",
                            Ty::Bool,
                            Optional,
                            "The head holds every commit of the base branch.",
                        ),
                    ],
                    blocks: vec![],
                    description: "What an apply from a pull request requires, beyond a plan of its head commit and green required checks.",
                },
            }],
            description: "The environment's binding to a repository: its pull requests are planned here, and applied as `apply` says.",
        },
    }
}

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
        blocks: vec![vcs_block()],
        description:
            "A Sortie environment. Created, it is linked to the runner Sortie's rules pick.",
    }
}

fn at(endpoint: fn(&str) -> Call, state: &Value) -> Call {
    endpoint(text(state, "id"))
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
        "vcs": vcs_state(&view["vcs"], &reference["vcs"]),
        "runner_id": view["runner"]["runner_id"],
        "rule_id": view["runner"]["rule_id"],
        "version": view["version"],
    })
}

/// The binding as state. The API's view leaves out what is the default; the state spells
/// `provider`, `branch` and `apply` (computed when unset), keeps the reference's spelling of
/// a `directory` the API trimmed (`envs/prod/` is stored as `envs/prod`), and holds the
/// `requirements` block when the reference has one or the API holds one.
fn vcs_state(view: &Value, reference: &Value) -> Value {
    if view.is_null() {
        return Value::Null;
    }
    let or = |v: &Value, default: &str| {
        if v.is_null() {
            Value::String(default.into())
        } else {
            v.clone()
        }
    };
    let directory = match (view["directory"].as_str(), reference["directory"].as_str()) {
        (api, Some(ours)) if ours.trim_end_matches('/') == api.unwrap_or_default() => {
            Value::String(ours.to_string())
        }
        _ => or(&view["directory"], ""),
    };
    let held = &view["requirements"];
    let requirements = if held.is_null() && reference["requirements"].is_null() {
        Value::Null
    } else {
        json!({
            "approved": held["approved"],
            "mergeable": held["mergeable"].as_bool().unwrap_or(false),
            "undiverged": held["undiverged"].as_bool().unwrap_or(false),
        })
    };
    json!({
        "provider": or(&view["provider"], "github"),
        "repository": view["repository"],
        "directory": directory,
        "branch": or(&view["branch"], "main"),
        "when_modified": if view["when_modified"].is_null() { json!([]) } else { view["when_modified"].clone() },
        "apply": or(&view["apply"], "after_merge"),
        "requirements": requirements,
    })
}

/// The binding's body: the planned block's set values (`null` when there is no block,
/// which clears a binding on update).
fn vcs_body(planned: &Value) -> Value {
    if planned.is_null() {
        return Value::Null;
    }
    let mut b = pick(
        planned,
        &[
            "provider",
            "repository",
            "directory",
            "branch",
            "when_modified",
            "apply",
        ],
    );
    let requirements = &planned["requirements"];
    if !requirements.is_null() {
        b.insert(
            "requirements".into(),
            Value::Object(pick(requirements, &["approved", "mergeable", "undiverged"])),
        );
    }
    Value::Object(b)
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
    b.insert("vcs".into(), vcs_body(&planned["vcs"]));
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
    if b.get("vcs").is_some_and(Value::is_null) {
        b.remove("vcs");
    }
    let group = sortie_client::group(text(planned, "group"));
    let answer = api
        .send(
            &endpoints::create_environment(group),
            Some(&Value::Object(b)),
            None,
        )
        .await?;
    Ok(state_of(&answer.body, planned))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    Ok(state_of(
        &api.get(&at(endpoints::get_environment, state)).await?.body,
        state,
    ))
}

/// Updates it in place (`PATCH` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let mut b = body(planned);
    for clearable in ["tool", "tool_version", "ttl"] {
        b.entry(clearable).or_insert(Value::Null);
    }
    let answer = api
        .send(
            &at(endpoints::update_environment, prior),
            Some(&Value::Object(b)),
            Some(version(prior)),
        )
        .await?;
    Ok(state_of(&answer.body, planned))
}

/// Deletes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(&at(endpoints::delete_environment, state), None, None)
        .await?;
    Ok(())
}
