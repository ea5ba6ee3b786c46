//! `sortie_runner_rule`: at a scope, environments meeting the criteria use a runner.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Number, Value};

use super::{etag_version, split_id, text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model, set_only};
use sortie_client::{endpoints, Call};

model! {
    /// Its attributes.
    pub struct RuleModel ("A Sortie runner rule.") {
        id: String [Computed] "`<scope>/<rule_id>`.",
        scope: String [Required, force_new, check(checks::url_group)] "The group the rule applies in (and below).",
        rule_id: String [Required, force_new, check(checks::segment)] "The rule's id, unique within its scope.",
        runner_id: String [Required, check(checks::runner_id)] "The runner it picks.",
        priority: Number [OptionalComputed] "Breaks ties; higher wins (0 when unset).",
        env_type: String [Optional] "Criterion: the environment's type equals this.",
        env_path: String [Optional] "Criterion: a glob over the environment's path.",
        labels: BTreeMap<String, String> [Optional] "Criterion: every label here is on the environment.",
        tags: BTreeSet<String> [Optional] "Criterion: every tag here is among the environment's.",
        version: u64 [Computed, volatile] "The version (the API's ETag).",
    }
}

/// `sortie_runner_rule`.
pub struct RuleResource;

fn body(planned: &RuleModel) -> Value {
    let criteria = set_only(json!({
        "env_type": planned.env_type,
        "env_path": planned.env_path,
        "labels": planned.labels,
        "tags": planned.tags,
    }));
    let mut b = json!({
        "id": planned.rule_id,
        "runner_id": planned.runner_id,
        "criteria": criteria,
    });
    if let Some(priority) = &planned.priority {
        b["priority"] = json!(priority);
    }
    b
}

fn state_of(view: &Value, version: Option<&str>) -> RuleModel {
    let c = &view["criteria"];
    let (scope, rule_id) = (field::<String>(&view["scope"]), field(&view["id"]));
    RuleModel {
        id: Some(format!("{}/{}", text(&scope), text(&rule_id))),
        scope,
        rule_id,
        runner_id: field(&view["runner_id"]),
        priority: field(&view["priority"]),
        env_type: field(&c["env_type"]),
        env_path: field(&c["env_path"]),
        labels: field(&c["labels"]),
        tags: field(&c["tags"]),
        version: etag_version(version),
    }
}

fn at(endpoint: fn(&str, &str) -> Call, state: &RuleModel) -> Call {
    endpoint(
        sortie_client::group(text(&state.scope)),
        text(&state.rule_id),
    )
}

#[tonic::async_trait]
impl Resource for RuleResource {
    type Model = RuleModel;

    fn type_name(&self) -> &'static str {
        "sortie_runner_rule"
    }

    async fn create(&self, api: &Api, planned: &RuleModel) -> Result<RuleModel, Error> {
        let p = endpoints::create_rule(sortie_client::group(text(&planned.scope)));
        let a = api.send(&p, Some(&body(planned)), None).await?;
        Ok(state_of(&a.body, a.etag.as_deref()))
    }

    async fn read(&self, api: &Api, state: &RuleModel) -> Result<RuleModel, Error> {
        let a = api.get(&at(endpoints::get_rule, state)).await?;
        Ok(state_of(&a.body, a.etag.as_deref()))
    }

    /// Replaces it in place (`PUT` with `If-Match`).
    async fn update(
        &self,
        api: &Api,
        prior: &RuleModel,
        planned: &RuleModel,
    ) -> Result<RuleModel, Error> {
        let a = api
            .send(
                &at(endpoints::update_rule, prior),
                Some(&body(planned)),
                Some(prior.version.unwrap_or_default()),
            )
            .await?;
        Ok(state_of(&a.body, a.etag.as_deref()))
    }

    async fn delete(&self, api: &Api, state: &RuleModel) -> Result<(), Error> {
        api.send(&at(endpoints::delete_rule, state), None, None)
            .await?;
        Ok(())
    }

    /// An import id `<scope>/<rule_id>`.
    fn import(&self, id: &str) -> Result<RuleModel, Error> {
        let (scope, rule_id) = split_id(id, "<scope>/<rule_id>", false)?;
        Ok(RuleModel {
            id: Some(id.into()),
            scope: Some(scope.into()),
            rule_id: Some(rule_id.into()),
            ..Default::default()
        })
    }

    /// `criteria.labels.x` → `labels`, `id` → `rule_id`.
    fn attribute_of(&self, api_path: &str) -> Option<String> {
        let mut parts = api_path.split('.');
        let head = parts.next()?;
        Some(match head {
            "criteria" => parts.next()?.to_string(),
            "id" => "rule_id".into(),
            "scope" | "runner_id" | "priority" => head.to_string(),
            _ => return None,
        })
    }
}
