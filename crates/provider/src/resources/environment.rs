//! `sortie_environment`: an environment, its type, labels, tags, tool settings, expiry
//! (`ttl`, `ttl_from`, `expires_at`) and triggers (`triggers`, `trigger_operation`,
//! `trigger_inputs`) and its binding to a repository (the `vcs` block: which pull requests
//! plan it, when they apply, what an apply requires); Sortie links it to the runner its
//! rules pick (`runner_id`, `rule_id`). A person's lock is not an attribute: locks are operational (an incident, a
//! release freeze), not configuration (docs/decisions/provider.md).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Number, Value};
use sortie_core::EnvPath;

use super::{text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model, set_only};
use sortie_client::{endpoints, Call};

model! {
    /// Its attributes and its `vcs` block.
    pub struct EnvironmentModel ("A Sortie environment. Created, it is linked to the runner Sortie's rules pick.") {
        id: String [Computed] "The environment's path, `<group>/<name>`.",
        group: String [Required, force_new, check(checks::url_group)] "The group the environment belongs to.",
        name: String [Required, force_new, check(checks::segment)] "The environment's name within its group.",
        env_type: String [Required] "The environment's type (rules may match on it).",
        labels: BTreeMap<String, String> [Optional] "Labels, key to value (rules may match on them).",
        tags: BTreeSet<String> [Optional] "Tags (rules may match on them).",
        tool: String [Optional] "`terraform` or `opentofu`; the runner's when unset.",
        tool_version: String [Optional] "The tool version, exact or a constraint.",
        ttl: String [Optional] "How long it lives: a whole number and one unit of `s`, `m`, `h`, `d` (`72h`), from `ttl_from`. When it expires Sortie destroys it.",
        ttl_from: String [OptionalComputed] "`created` (the default) or `last_apply`: what `ttl` counts from.",
        expires_at: String [OptionalComputed] "When it expires (RFC 3339). `sortie env extend` writes it too, and a plan keeps the extended end.",
        triggers: Vec<String> [Optional] "Upstream environments (paths): a successful apply of one whose outputs changed runs `trigger_operation` here.",
        trigger_operation: String [OptionalComputed] "`plan` (the default) or `apply`: what an upstream's apply runs here.",
        trigger_inputs: Vec<String> [Optional] "Upstream outputs given to this environment's runs as Terraform variables, by name.",
        runner_id: String [Computed, volatile] "The runner the rules linked it to.",
        rule_id: String [Computed, volatile] "The rule that picked the runner.",
        version: u64 [Computed, volatile] "The version (the API's ETag).",
    }
    blocks {
        vcs: VcsModel,
    }
}

model! {
    /// The `vcs` block: the environment's binding to a repository directory.
    pub struct VcsModel ("The environment's binding to a repository: its pull requests are planned here, and applied as `apply` says.") {
        provider: String [OptionalComputed] "The repository's host: `github` (the default) or `gitlab`.",
        repository: String [Required] "The repository, `owner/name`. Its pull requests are planned once its owner has a connection (`sortie vcs connect`).",
        directory: String [Optional] "The environment's directory, relative to the repository root; unset for the root.",
        branch: String [OptionalComputed] "The base branch whose pull requests are planned (`main` when unset).",
        when_modified: Vec<String> [Optional] "Globs relative to the repository root: a pull request changing a matching path plans here. Unset, `<directory>/**`.",
        apply: String [OptionalComputed] "`after_merge` (the default: the merge commit is applied), `before_merge` (`/sortie apply` on the pull request, once the requirements hold) or `none` (plans only).",
    }
    blocks {
        requirements: RequirementsModel,
    }
}

model! {
    /// The `vcs` block's `requirements` block.
    pub struct RequirementsModel ("What an apply from a pull request requires, beyond a plan of its head commit and green required checks.") {
        approved: Number [Optional] "This many approvals (1 to 10) of the head commit, by people other than the author.",
        mergeable: bool [Optional] "The host says the pull request can be merged, and it is not a draft.",
        undiverged: bool [Optional] "The head holds every commit of the base branch.",
    }
}

/// `sortie_environment`.
pub struct EnvironmentResource;

fn at(endpoint: fn(&str) -> Call, state: &EnvironmentModel) -> Call {
    endpoint(text(&state.id))
}

/// `v` as a string, or `default` when the API's view leaves it out (the default).
fn or(v: &Value, default: &str) -> Option<String> {
    Some(field(v).unwrap_or_else(|| default.to_string()))
}

/// The API's view as state; `reference` (the planned or prior state) keeps its spelling of
/// a `ttl` the API stores in another (`72h` is stored as `3d`).
fn state_of(view: &Value, reference: &EnvironmentModel) -> EnvironmentModel {
    let ttl = match (view["ttl"].as_str(), reference.ttl.as_deref()) {
        (Some(api), Some(ours)) if seconds(api).is_some() && seconds(api) == seconds(ours) => {
            Some(ours.to_string())
        }
        _ => field(&view["ttl"]),
    };
    EnvironmentModel {
        id: field(&view["path"]),
        group: field(&view["group"]),
        name: field(&view["name"]),
        env_type: field(&view["env_type"]),
        labels: field(&view["labels"]),
        tags: field(&view["tags"]),
        tool: field(&view["tool"]),
        tool_version: field(&view["tool_version"]),
        ttl,
        ttl_from: or(&view["ttl_from"], "created"),
        expires_at: field(&view["expires_at"]),
        triggers: field(&view["triggers"]),
        trigger_operation: or(&view["trigger_operation"], "plan"),
        trigger_inputs: field(&view["trigger_inputs"]),
        runner_id: field(&view["runner"]["runner_id"]),
        rule_id: field(&view["runner"]["rule_id"]),
        version: field(&view["version"]),
        vcs: vcs_state(&view["vcs"], reference.vcs.as_ref()),
    }
}

/// The binding as state. The API's view leaves out what is the default; the state spells
/// `provider`, `branch` and `apply` (computed when unset), keeps the reference's spelling of
/// a `directory` the API trimmed (`envs/prod/` is stored as `envs/prod`), and holds the
/// `requirements` block when the reference has one or the API holds one.
fn vcs_state(view: &Value, reference: Option<&VcsModel>) -> Option<VcsModel> {
    if view.is_null() {
        return None;
    }
    let ours = reference.and_then(|r| r.directory.as_deref());
    let directory = match (view["directory"].as_str(), ours) {
        (api, Some(ours)) if ours.trim_end_matches('/') == api.unwrap_or_default() => {
            Some(ours.to_string())
        }
        _ => or(&view["directory"], ""),
    };
    let held = &view["requirements"];
    let requirements =
        if held.is_null() && reference.and_then(|r| r.requirements.as_ref()).is_none() {
            None
        } else {
            Some(RequirementsModel {
                approved: field(&held["approved"]),
                mergeable: Some(held["mergeable"].as_bool().unwrap_or(false)),
                undiverged: Some(held["undiverged"].as_bool().unwrap_or(false)),
            })
        };
    Some(VcsModel {
        provider: or(&view["provider"], "github"),
        repository: field(&view["repository"]),
        directory,
        branch: or(&view["branch"], "main"),
        when_modified: Some(field(&view["when_modified"]).unwrap_or_default()),
        apply: or(&view["apply"], "after_merge"),
        requirements,
    })
}

/// The binding's body: the planned block's set values (`null` when there is no block,
/// which clears a binding on update).
fn vcs_body(planned: Option<&VcsModel>) -> Value {
    let Some(vcs) = planned else {
        return Value::Null;
    };
    let mut b = set_only(json!({
        "provider": vcs.provider,
        "repository": vcs.repository,
        "directory": vcs.directory,
        "branch": vcs.branch,
        "when_modified": vcs.when_modified,
        "apply": vcs.apply,
    }));
    if let Some(r) = &vcs.requirements {
        let requirements = json!({
            "approved": r.approved,
            "mergeable": r.mergeable,
            "undiverged": r.undiverged,
        });
        b.insert("requirements".into(), Value::Object(set_only(requirements)));
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

fn body(planned: &EnvironmentModel) -> Map<String, Value> {
    let mut b = set_only(json!({
        "env_type": planned.env_type,
        "tool": planned.tool,
        "tool_version": planned.tool_version,
        "ttl": planned.ttl,
        "ttl_from": planned.ttl_from,
        "expires_at": planned.expires_at,
        "trigger_operation": planned.trigger_operation,
    }));
    // The collections are sent empty when unset, so an update clears them.
    b.extend(
        json!({
            "triggers": planned.triggers.clone().unwrap_or_default(),
            "trigger_inputs": planned.trigger_inputs.clone().unwrap_or_default(),
            "labels": planned.labels.clone().unwrap_or_default(),
            "tags": planned.tags.clone().unwrap_or_default(),
            "vcs": vcs_body(planned.vcs.as_ref()),
        })
        .as_object()
        .cloned()
        .unwrap_or_default(),
    );
    b
}

#[tonic::async_trait]
impl Resource for EnvironmentResource {
    type Model = EnvironmentModel;

    fn type_name(&self) -> &'static str {
        "sortie_environment"
    }

    /// A path (`<group>/<name>`) the API takes: in an organisation, not too long.
    fn validate(&self, config: &EnvironmentModel) -> Result<(), Error> {
        let (Some(group), Some(name)) = (&config.group, &config.name) else {
            return Ok(());
        };
        checks::url_group_path(group)
            .map_err(|e| sortie_core::ValidationError::single("", e))
            .and_then(|group| EnvPath::new(group, name))
            .map(drop)
            .map_err(|e| Error::Invalid {
                attribute: "name".into(),
                problem: e.first_problem(),
            })
    }

    async fn create(
        &self,
        api: &Api,
        planned: &EnvironmentModel,
    ) -> Result<EnvironmentModel, Error> {
        let mut b = body(planned);
        b.insert("name".into(), json!(planned.name));
        if b.get("vcs").is_some_and(Value::is_null) {
            b.remove("vcs");
        }
        let group = sortie_client::group(text(&planned.group));
        let answer = api
            .send(
                &endpoints::create_environment(group),
                Some(&Value::Object(b)),
                None,
            )
            .await?;
        Ok(state_of(&answer.body, planned))
    }

    async fn read(&self, api: &Api, state: &EnvironmentModel) -> Result<EnvironmentModel, Error> {
        Ok(state_of(
            &api.get(&at(endpoints::get_environment, state)).await?.body,
            state,
        ))
    }

    /// Updates it in place (`PATCH` with `If-Match`); an unset `tool`, `tool_version` or
    /// `ttl` is sent as null, which clears it.
    async fn update(
        &self,
        api: &Api,
        prior: &EnvironmentModel,
        planned: &EnvironmentModel,
    ) -> Result<EnvironmentModel, Error> {
        let mut b = body(planned);
        for clearable in ["tool", "tool_version", "ttl"] {
            b.entry(clearable).or_insert(Value::Null);
        }
        let answer = api
            .send(
                &at(endpoints::update_environment, prior),
                Some(&Value::Object(b)),
                Some(prior.version.unwrap_or_default()),
            )
            .await?;
        Ok(state_of(&answer.body, planned))
    }

    async fn delete(&self, api: &Api, state: &EnvironmentModel) -> Result<(), Error> {
        api.send(&at(endpoints::delete_environment, state), None, None)
            .await?;
        Ok(())
    }

    /// An import id: the environment's path, `<group>/<name>`.
    fn import(&self, id: &str) -> Result<EnvironmentModel, Error> {
        checks::env_path(id).map_err(|problem| Error::Invalid {
            attribute: "id".into(),
            problem,
        })?;
        Ok(EnvironmentModel {
            id: Some(id.into()),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    #[test]
    fn a_state_keeps_its_spelling_of_what_the_api_normalises() {
        let planned = EnvironmentModel::from_json(&json!({"group": "acme", "name": "dev",
            "env_type": "dev", "ttl": "72h",
            "vcs": {"repository": "acme/infra", "directory": "envs/dev/",
                "requirements": {"approved": 1}}}))
        .unwrap();
        let b = body(&planned);
        assert_eq!(b["labels"], json!({}));
        assert_eq!(b["vcs"]["requirements"], json!({"approved": 1}));
        assert!(b.get("tool").is_none());
        let view = json!({"path": "acme/dev", "group": "acme", "name": "dev",
            "env_type": "dev", "ttl": "3d", "version": 4,
            "runner": {"runner_id": "acme/local", "rule_id": "default"},
            "vcs": {"repository": "acme/infra", "directory": "envs/dev",
                "requirements": {"approved": 1}}});
        let s = state_of(&view, &planned);
        assert_eq!(s.ttl.as_deref(), Some("72h"));
        assert_eq!(
            (s.ttl_from.as_deref(), s.trigger_operation.as_deref()),
            (Some("created"), Some("plan"))
        );
        let vcs = s.vcs.unwrap();
        assert_eq!(vcs.directory.as_deref(), Some("envs/dev/"));
        assert_eq!(
            (vcs.branch.as_deref(), vcs.apply.as_deref()),
            (Some("main"), Some("after_merge"))
        );
        assert_eq!(vcs.requirements.unwrap().mergeable, Some(false));
        assert_eq!(
            (s.version, s.runner_id.as_deref()),
            (Some(4), Some("acme/local"))
        );
    }

    #[test]
    fn a_path_the_api_refuses_is_refused_on_name() {
        let config = |group: &str| {
            EnvironmentModel::from_json(&json!({"group": group, "name": "dev"})).unwrap()
        };
        assert!(EnvironmentResource.validate(&config("acme")).is_ok());
        match EnvironmentResource.validate(&config("")) {
            Err(Error::Invalid { attribute, .. }) => assert_eq!(attribute, "name"),
            other => panic!("{other:?}"),
        }
        assert!(EnvironmentResource.import("dev").is_err());
    }
}
