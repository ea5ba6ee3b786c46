//! `sortie_policy_set`: Rego modules a job's plan is checked against, in a group.

use serde_json::{json, Map, Value};

use super::{text, version};
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, string_list, string_map, Block, Mode, Ty};
use sortie_client::{endpoints, Call};

/// Its schema: `modules` maps each module's name to its Rego source.
pub fn block() -> Block {
    use Mode::*;
    let s = Ty::String;
    Block {
        attrs: vec![
            attr("id", s.clone(), Computed, "`<group>/<name>`."),
            attr(
                "group",
                s.clone(),
                Required,
                "The group whose environments' plans it checks.",
            )
            .force_new(),
            attr(
                "name",
                s.clone(),
                Required,
                "The set's name, unique within its group.",
            )
            .force_new(),
            attr("description", s.clone(), Optional, "A sentence for people."),
            attr(
                "modules",
                string_map(),
                Required,
                "The Rego modules: each module's name (such as `tags.rego`) to its source.",
            ),
            attr(
                "enforcement",
                s.clone(),
                Required,
                "What a deny does: `mandatory`, `review` or `advisory`.",
            ),
            attr(
                "env_types",
                string_list(),
                Optional,
                "Only environments of these types (all when unset).",
            ),
            attr(
                "labels",
                string_map(),
                Optional,
                "Only environments with every one of these labels.",
            ),
            attr(
                "on_unavailable",
                s,
                OptionalComputed,
                "When a plan has no data to check: `fail` (default) or `skip`.",
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
        description: "A Sortie policy set.",
    }
}

fn body(planned: &Value) -> Value {
    let modules: Vec<Value> = planned["modules"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, rego)| json!({ "name": name, "rego": rego }))
        .collect();
    let mut criteria = Map::new();
    for c in ["env_types", "labels"] {
        if let Some(v) = planned.get(c).filter(|v| !v.is_null()) {
            criteria.insert(c.into(), v.clone());
        }
    }
    let mut b = json!({
        "name": planned["name"],
        "modules": modules,
        "enforcement": planned["enforcement"],
    });
    if !criteria.is_empty() {
        b["criteria"] = Value::Object(criteria);
    }
    for o in ["description", "on_unavailable"] {
        if !planned[o].is_null() {
            b[o] = planned[o].clone();
        }
    }
    b
}

fn state_of(group: &str, view: &Value, version: Option<&str>) -> Value {
    let modules: Map<String, Value> = view["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| (text(m, "name").to_string(), m["rego"].clone()))
        .collect();
    json!({
        "id": format!("{group}/{}", text(view, "name")),
        "group": group,
        "name": view["name"],
        "description": view["description"],
        "modules": modules,
        "enforcement": view["enforcement"],
        "env_types": view["criteria"]["env_types"],
        "labels": view["criteria"]["labels"],
        "on_unavailable": view["on_unavailable"],
        "version": version.and_then(|v| v.parse::<u64>().ok()),
    })
}

fn at(endpoint: fn(&str, &str) -> Call, state: &Value) -> Call {
    endpoint(
        sortie_client::group(text(state, "group")),
        text(state, "name"),
    )
}

/// Creates it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let a = api
        .send(
            &at(endpoints::create_policy_set, planned),
            Some(&body(planned)),
            None,
        )
        .await?;
    Ok(state_of(text(planned, "group"), &a.body, a.etag.as_deref()))
}

/// Reads it.
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    let a = api.get(&at(endpoints::get_policy_set, state)).await?;
    Ok(state_of(text(state, "group"), &a.body, a.etag.as_deref()))
}

/// Replaces its content in place (`PUT` with `If-Match`).
pub async fn update(api: &Api, prior: &Value, planned: &Value) -> Result<Value, Error> {
    let a = api
        .send(
            &at(endpoints::update_policy_set, prior),
            Some(&body(planned)),
            Some(version(prior)),
        )
        .await?;
    Ok(state_of(text(prior, "group"), &a.body, a.etag.as_deref()))
}

/// Deletes it (with `If-Match`: a set changed since it was read is not deleted).
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    api.send(
        &at(endpoints::delete_policy_set, state),
        None,
        Some(version(state)),
    )
    .await?;
    Ok(())
}

/// An import id `<group>/<name>`.
pub fn import_state(id: &str) -> Result<Value, Error> {
    match id.rsplit_once('/') {
        Some((group, name)) if !name.is_empty() => {
            Ok(json!({ "id": id, "group": group, "name": name }))
        }
        _ => Err(Error::Invalid {
            attribute: "id".into(),
            problem: format!("`{id}` is not `<group>/<name>`"),
        }),
    }
}

/// `modules[0].rego` → `modules`, `criteria.labels` → `labels`.
pub fn attribute_of(api_path: &str) -> Option<String> {
    let head = api_path.split(['.', '[']).next()?;
    Some(match head {
        "criteria" => api_path.split('.').nth(1)?.to_string(),
        "modules" | "name" | "description" | "enforcement" | "on_unavailable" => head.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_round_trips_through_the_api_shape() {
        let planned = json!({
            "group": "acme", "name": "tags",
            "modules": {"a.rego": "package a", "b.rego": "package b"},
            "enforcement": "review", "env_types": ["production"], "labels": {"tier": "1"},
            "description": null, "on_unavailable": null,
        });
        let b = body(&planned);
        assert_eq!(
            b["modules"][1],
            json!({"name": "b.rego", "rego": "package b"})
        );
        assert_eq!(b["criteria"]["labels"]["tier"], "1");
        assert!(b.get("description").is_none());
        let s = state_of("acme", &b, Some("3"));
        for k in [
            "group",
            "name",
            "modules",
            "enforcement",
            "env_types",
            "labels",
        ] {
            assert_eq!(s[k], planned[k], "{k}");
        }
        assert_eq!(s["version"], 3);
        assert_eq!(s["id"], "acme/tags");
        assert_eq!(import_state("acme/x/tags").unwrap()["group"], "acme/x");
    }

    #[test]
    fn api_paths_name_attributes() {
        assert_eq!(attribute_of("modules[0].rego").as_deref(), Some("modules"));
        assert_eq!(attribute_of("criteria.labels").as_deref(), Some("labels"));
        assert_eq!(attribute_of("enforcement").as_deref(), Some("enforcement"));
    }
}
