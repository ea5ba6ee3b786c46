//! `sortie_policy_set`: Rego modules a job's plan is checked against, in a group.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{etag_version, split_id, text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model, set_only};
use sortie_client::{endpoints, Call};

model! {
    /// Its attributes: `modules` maps each module's name to its Rego source.
    pub struct PolicySetModel ("A Sortie policy set.") {
        id: String [Computed] "`<group>/<name>`.",
        group: String [Required, force_new, check(checks::url_group)] "The group whose environments' plans it checks.",
        name: String [Required, force_new, check(checks::segment)] "The set's name, unique within its group.",
        description: String [Optional] "A sentence for people.",
        modules: BTreeMap<String, String> [Required] "The Rego modules: each module's name (such as `tags.rego`) to its source.",
        enforcement: String [Required] "What a deny does: `mandatory`, `review` or `advisory`.",
        env_types: Vec<String> [Optional] "Only environments of these types (all when unset).",
        labels: BTreeMap<String, String> [Optional] "Only environments with every one of these labels.",
        on_unavailable: String [OptionalComputed] "When a plan has no data to check: `fail` (default) or `skip`.",
        version: u64 [Computed, volatile] "The version (the API's ETag).",
    }
}

/// `sortie_policy_set`.
pub struct PolicySetResource;

fn body(planned: &PolicySetModel) -> Value {
    let modules: Vec<Value> = planned
        .modules
        .iter()
        .flatten()
        .map(|(name, rego)| json!({ "name": name, "rego": rego }))
        .collect();
    let criteria = set_only(json!({
        "env_types": planned.env_types,
        "labels": planned.labels,
    }));
    let mut b = json!({
        "name": planned.name,
        "modules": modules,
        "enforcement": planned.enforcement,
    });
    if !criteria.is_empty() {
        b["criteria"] = Value::Object(criteria);
    }
    if let Some(o) = b.as_object_mut() {
        o.extend(set_only(json!({
            "description": planned.description,
            "on_unavailable": planned.on_unavailable,
        })));
    }
    b
}

fn state_of(group: &str, view: &Value, version: Option<&str>) -> PolicySetModel {
    let modules: BTreeMap<String, String> = view["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((field(&m["name"])?, field(&m["rego"])?)))
        .collect();
    let name = field::<String>(&view["name"]);
    PolicySetModel {
        id: Some(format!("{group}/{}", text(&name))),
        group: Some(group.into()),
        name,
        description: field(&view["description"]),
        modules: Some(modules),
        enforcement: field(&view["enforcement"]),
        env_types: field(&view["criteria"]["env_types"]),
        labels: field(&view["criteria"]["labels"]),
        on_unavailable: field(&view["on_unavailable"]),
        version: etag_version(version),
    }
}

fn at(endpoint: fn(&str, &str) -> Call, state: &PolicySetModel) -> Call {
    endpoint(sortie_client::group(text(&state.group)), text(&state.name))
}

#[tonic::async_trait]
impl Resource for PolicySetResource {
    type Model = PolicySetModel;

    fn type_name(&self) -> &'static str {
        "sortie_policy_set"
    }

    async fn create(&self, api: &Api, planned: &PolicySetModel) -> Result<PolicySetModel, Error> {
        let a = api
            .send(
                &at(endpoints::create_policy_set, planned),
                Some(&body(planned)),
                None,
            )
            .await?;
        Ok(state_of(text(&planned.group), &a.body, a.etag.as_deref()))
    }

    async fn read(&self, api: &Api, state: &PolicySetModel) -> Result<PolicySetModel, Error> {
        let a = api.get(&at(endpoints::get_policy_set, state)).await?;
        Ok(state_of(text(&state.group), &a.body, a.etag.as_deref()))
    }

    /// Replaces its content in place (`PUT` with `If-Match`).
    async fn update(
        &self,
        api: &Api,
        prior: &PolicySetModel,
        planned: &PolicySetModel,
    ) -> Result<PolicySetModel, Error> {
        let a = api
            .send(
                &at(endpoints::update_policy_set, prior),
                Some(&body(planned)),
                Some(prior.version.unwrap_or_default()),
            )
            .await?;
        Ok(state_of(text(&prior.group), &a.body, a.etag.as_deref()))
    }

    /// Deletes it (with `If-Match`: a set changed since it was read is not deleted).
    async fn delete(&self, api: &Api, state: &PolicySetModel) -> Result<(), Error> {
        api.send(
            &at(endpoints::delete_policy_set, state),
            None,
            Some(state.version.unwrap_or_default()),
        )
        .await?;
        Ok(())
    }

    /// An import id `<group>/<name>`.
    fn import(&self, id: &str) -> Result<PolicySetModel, Error> {
        let (group, name) = split_id(id, "<group>/<name>", false)?;
        Ok(PolicySetModel {
            id: Some(id.into()),
            group: Some(group.into()),
            name: Some(name.into()),
            ..Default::default()
        })
    }

    /// `modules[0].rego` → `modules`, `criteria.labels` → `labels`.
    fn attribute_of(&self, api_path: &str) -> Option<String> {
        let head = api_path.split(['.', '[']).next()?;
        Some(match head {
            "criteria" => api_path.split('.').nth(1)?.to_string(),
            "modules" | "name" | "description" | "enforcement" | "on_unavailable" => {
                head.to_string()
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    #[test]
    fn a_set_round_trips_through_the_api_shape() {
        let planned = PolicySetModel::from_json(&json!({
            "group": "acme", "name": "tags",
            "modules": {"a.rego": "package a", "b.rego": "package b"},
            "enforcement": "review", "env_types": ["production"], "labels": {"tier": "1"},
            "description": null, "on_unavailable": null,
        }))
        .unwrap();
        let b = body(&planned);
        assert_eq!(
            b["modules"][1],
            json!({"name": "b.rego", "rego": "package b"})
        );
        assert_eq!(b["criteria"]["labels"]["tier"], "1");
        assert!(b.get("description").is_none());
        let s = state_of("acme", &b, Some("3"));
        assert_eq!(
            (&s.group, &s.name, &s.modules, &s.enforcement),
            (
                &planned.group,
                &planned.name,
                &planned.modules,
                &planned.enforcement
            )
        );
        assert_eq!(
            (&s.env_types, &s.labels),
            (&planned.env_types, &planned.labels)
        );
        assert_eq!(s.version, Some(3));
        assert_eq!(s.id.as_deref(), Some("acme/tags"));
        let imported = PolicySetResource.import("acme/x/tags").unwrap();
        assert_eq!(imported.group.as_deref(), Some("acme/x"));
    }

    #[test]
    fn api_paths_name_attributes() {
        let r = PolicySetResource;
        assert_eq!(
            r.attribute_of("modules[0].rego").as_deref(),
            Some("modules")
        );
        assert_eq!(r.attribute_of("criteria.labels").as_deref(), Some("labels"));
        assert_eq!(
            r.attribute_of("enforcement").as_deref(),
            Some("enforcement")
        );
    }
}
