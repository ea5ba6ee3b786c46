//! Environments: `create`, `get`, `list`, `update` and `delete` of an environment (with
//! its approval, drift and tool settings), `env refresh-runner` and `env outputs`.

use std::collections::BTreeMap;

use serde_json::Value;
use sortie_api::model::{
    EnvironmentCreate, EnvironmentCreated, EnvironmentList, EnvironmentPatch, EnvironmentView,
    OutputsView, RefreshRunnerAnswer,
};
use sortie_client::endpoints;
use sortie_core::{Approval, DriftRemediation, ToolName};

use super::env_text::{
    env_table, env_text, outputs_text, refresh_text, resolution_details, settings_details,
};
use super::shared::{changed_meanwhile, env_param, if_match, shown_group};
use crate::args::{
    ApprovalArg, Clearable, EnvCommand, EnvSettingArgs, Output, RemediationArg, ToolArg,
};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{details, emit};

/// `sortie create env GROUP/NAME --type TYPE [...]`: the environment and the rule that
/// picked its runner.
pub(super) async fn create(
    api: &Api,
    path: String,
    env_type: String,
    labels: Vec<String>,
    tags: Vec<String>,
    settings: EnvSettingArgs,
    out: Output,
) -> Result<(), CliError> {
    let (group, name) = split_env(&path)?;
    let settings_given = !settings.is_empty();
    let vcs = settings.binding(None).map_err(CliError::Usage)?;
    let body = EnvironmentCreate {
        name: name.to_string(),
        env_type,
        labels: (!labels.is_empty())
            .then(|| parse_pairs("--label", &labels))
            .transpose()?,
        tags: (!tags.is_empty()).then(|| tags.into_iter().collect()),
        approval: settings.approval.map(approval),
        approval_timeout_seconds: to_set("--approval-timeout", settings.approval_timeout)?,
        four_eyes: settings.four_eyes,
        drift_schedule: to_set("--drift-schedule", settings.drift_schedule)?,
        drift_remediation: settings.drift_remediation.map(remediation),
        tool: to_set("--tool", settings.tool)?.map(tool),
        tool_version: to_set("--tool-version", settings.tool_version)?,
        triggers: settings.triggers.map(|l| l.0),
        trigger_operation: settings.trigger_operation.map(trigger_operation),
        trigger_inputs: settings.trigger_inputs.map(|l| l.0),
        expires_at: None,
        ttl: settings.ttl,
        ttl_from: None,
        vcs: None,
    };
    let mut body = serde_json::to_value(&body)
        .map_err(|e| CliError::Other(format!("could not encode the environment: {e}")))?;
    if let Some(vcs) = vcs {
        body["vcs"] = vcs;
    }
    let answer = api
        .send(
            &endpoints::create_environment(sortie_client::group(group)),
            Some(&body),
            &[],
        )
        .await?;
    let created: EnvironmentCreated = decode(answer.body.clone())?;
    emit(&answer.body, out, || {
        let mut text = env_table(std::slice::from_ref(&created.environment));
        text.push('\n');
        text.push_str(&resolution_details(&created.resolution));
        // The settings only when some were given, so a plain environment reads
        // as before.
        if !settings_given {
            return text;
        }
        text.push('\n');
        text.push_str(&details(&settings_details(&created.environment)));
        text
    })
}

fn trigger_operation(
    arg: crate::args::TriggerOperationArg,
) -> sortie_core::triggers::TriggerOperation {
    match arg {
        crate::args::TriggerOperationArg::Plan => sortie_core::triggers::TriggerOperation::Plan,
        crate::args::TriggerOperationArg::Apply => sortie_core::triggers::TriggerOperation::Apply,
    }
}

/// `sortie get env GROUP/NAME`.
pub(super) async fn get(api: &Api, path: String, out: Output) -> Result<(), CliError> {
    let (group, _) = split_env(&path)?;
    let answer = api
        .send(&endpoints::get_environment(env_param(&path)), None, &[])
        .await
        .map_err(|e| env_hint(e, group))?;
    let env: EnvironmentView = decode(answer.body.clone())?;
    let triggers = super::env_history::triggers_text(api, &path).await;
    emit(&answer.body, out, || env_text(&env) + &triggers)
}

/// `sortie list envs --group GROUP [--recursive]`.
pub(super) async fn list(
    api: &Api,
    group: String,
    recursive: bool,
    out: Output,
) -> Result<(), CliError> {
    // Without --recursive, the group's own are shown and the API counts the ones below.
    let call = endpoints::list_environments(sortie_client::group(&group))
        .query([("recursive", recursive.then_some("true"))]);
    let answer = api.send(&call, None, &[]).await?;
    let list: EnvironmentList = decode(answer.body.clone())?;
    emit(&answer.body, out, || {
        let mut t = if list.environments.is_empty() && !recursive {
            format!("no environments in group `{}`\n", shown_group(&group))
        } else {
            env_table(&list.environments)
        };
        if let Some(n) = list.in_subgroups.filter(|n| *n > 0) {
            t.push_str(&format!(
                "({n} environment{} in subgroups not shown; use --recursive)\n",
                if n == 1 { "" } else { "s" }
            ));
        }
        if list.truncated {
            t.push_str(&format!(
                "(only the first {} environments by path are shown: list a subgroup)\n",
                list.environments.len()
            ));
        }
        t
    })
}

/// `sortie update env GROUP/NAME [...]`.
pub(super) async fn update(
    api: &Api,
    path: String,
    env_type: Option<String>,
    labels: Vec<String>,
    tags: Vec<String>,
    settings: EnvSettingArgs,
    out: Output,
) -> Result<(), CliError> {
    let (group, _) = split_env(&path)?;
    let binding_flags = settings.clone();
    if env_type.is_none() && labels.is_empty() && tags.is_empty() && settings.is_empty() {
        return Err(CliError::Usage(
                "nothing to change: give --type, --label KEY=VALUE, --tag or a setting (--approval, --approval-timeout, --four-eyes, --drift-schedule, --drift-remediation, --tool, --tool-version, --repository, --directory, --apply)".into(),
            ));
    }
    // A cleared setting is sent as `null`, which the patch type cannot say.
    let mut cleared = Vec::new();
    let approval_timeout_seconds = or_clear(
        &mut cleared,
        "approval_timeout_seconds",
        settings.approval_timeout,
    );
    let drift_schedule = or_clear(&mut cleared, "drift_schedule", settings.drift_schedule);
    let tool = or_clear(&mut cleared, "tool", settings.tool).map(tool);
    let tool_version = or_clear(&mut cleared, "tool_version", settings.tool_version);
    let patch = EnvironmentPatch {
        env_type,
        labels: (!labels.is_empty())
            .then(|| parse_pairs("--label", &labels))
            .transpose()?,
        tags: (!tags.is_empty()).then(|| tags.into_iter().collect()),
        approval: settings.approval.map(approval),
        approval_timeout_seconds,
        four_eyes: settings.four_eyes,
        drift_schedule,
        drift_remediation: settings.drift_remediation.map(remediation),
        tool,
        tool_version,
        triggers: settings.triggers.map(|l| l.0),
        trigger_operation: settings.trigger_operation.map(trigger_operation),
        trigger_inputs: settings.trigger_inputs.map(|l| l.0),
        expires_at: None,
        ttl: settings.ttl,
        ttl_from: None,
        vcs: None,
    };
    let mut body = serde_json::to_value(&patch)
        .map_err(|e| CliError::Other(format!("could not encode the change: {e}")))?;
    if let Some(fields) = body.as_object_mut() {
        for field in cleared {
            fields.insert(field.to_string(), Value::Null);
        }
    }
    let current = api
        .send(&endpoints::get_environment(env_param(&path)), None, &[])
        .await
        .map_err(|e| env_hint(e, group))?;
    let if_match = if_match(&current);
    // The binding's flags change the current binding; the API takes it whole.
    if let Some(vcs) = binding_flags
        .binding(current.body.get("vcs"))
        .map_err(CliError::Usage)?
    {
        body["vcs"] = vcs;
    }
    let answer = api
        .send(
            &endpoints::update_environment(env_param(&path)),
            Some(&body),
            &if_match,
        )
        .await
        .map_err(|e| {
            changed_meanwhile(
                e,
                &format!("environment `{path}`"),
                &format!("sortie get env {path}"),
            )
        })?;
    let env: EnvironmentView = decode(answer.body.clone())?;
    emit(&answer.body, out, || env_text(&env))
}

/// `sortie delete env GROUP/NAME`: what was deleted, in words.
pub(super) async fn delete(api: &Api, path: String) -> Result<String, CliError> {
    let (group, _) = split_env(&path)?;
    api.send(&endpoints::delete_environment(env_param(&path)), None, &[])
        .await
        .map_err(|e| env_hint(e, group))?;
    Ok(format!("environment `{path}`"))
}

/// `sortie env refresh-runner PATH [--dry-run]`: the previous and the chosen runner, the
/// winning rule and why, and every rule's fate (`explain=full`, every page). `sortie env
/// outputs PATH`: the outputs of its latest successful apply.
pub async fn env(api: &Api, command: EnvCommand, out: Output) -> Result<(), CliError> {
    let (path, dry_run) = match command {
        EnvCommand::RefreshRunner { path, dry_run } => (path, dry_run),
        EnvCommand::Outputs { path } => {
            split_env(&path)?;
            let answer = api
                .send(
                    &endpoints::get_environment_outputs(env_param(&path)),
                    None,
                    &[],
                )
                .await?;
            return show_outputs(&answer.body, out, true);
        }
        EnvCommand::StateVersions {
            path,
            limit,
            cursor,
        } => return super::env_history::state_versions(api, &path, limit, cursor, out).await,
        EnvCommand::Restore {
            path,
            version,
            reason,
        } => return super::env_history::restore(api, &path, &version, &reason, out).await,
        EnvCommand::Lock { path, reason } => {
            split_env(&path)?;
            let call = endpoints::lock_environment(env_param(&path));
            return super::locks::lock(api, &call, Some(&reason), out).await;
        }
        EnvCommand::Unlock { path } => {
            split_env(&path)?;
            let call = endpoints::unlock_environment(env_param(&path));
            return super::locks::lock(api, &call, None, out).await;
        }
        EnvCommand::Extend { path, by } => {
            split_env(&path)?;
            let call = endpoints::extend_environment(env_param(&path));
            return super::locks::extend(api, &call, &by, out).await;
        }
    };
    let (group, _) = split_env(&path)?;
    let refresh = || endpoints::refresh_runner(env_param(&path));
    let call = refresh().query([
        ("explain", Some("full")),
        ("dry_run", dry_run.then_some("true")),
    ]);
    let answer = api
        .send(&call, None, &[])
        .await
        .map_err(|e| env_hint(e, group))?;
    let mut body = answer.body;
    let mut refreshed: RefreshRunnerAnswer = decode(body.clone())?;
    // Further pages of the explanation are read without changing anything again.
    while let Some(offset) = refreshed.resolution.explanation_next {
        let offset = offset.to_string();
        let call = refresh().query([
            ("explain", Some("full")),
            ("dry_run", Some("true")),
            ("explain_offset", Some(offset.as_str())),
        ]);
        let page = api.send(&call, None, &[]).await?;
        let page: RefreshRunnerAnswer = decode(page.body)?;
        let more = page.resolution.explanation.unwrap_or_default();
        if more.is_empty() {
            break;
        }
        refreshed
            .resolution
            .explanation
            .get_or_insert_with(Vec::new)
            .extend(more);
        refreshed.resolution.explanation_next = page.resolution.explanation_next;
    }
    if let Some(resolution) = body.get_mut("resolution") {
        if let Some(explanation) = &refreshed.resolution.explanation {
            resolution["explanation"] = serde_json::to_value(explanation)
                .map_err(|e| CliError::Other(format!("could not encode: {e}")))?;
        }
        if let Some(r) = resolution.as_object_mut() {
            r.remove("explanation_next");
        }
    }
    emit(&body, out, || refresh_text(&path, &refreshed))
}

/// The outputs of an apply: `NAME  VALUE`, each value as compact JSON, a sensitive one as
/// `(sensitive)`. With `of_env`, a last line names the apply they come from.
pub fn show_outputs(raw: &Value, out: Output, of_env: bool) -> Result<(), CliError> {
    let view: OutputsView = decode(raw.clone())?;
    emit(raw, out, || outputs_text(&view, of_env))
}

/// An environment path, `GROUP/NAME`: it never lives in the root group.
pub(super) fn split_env(path: &str) -> Result<(&str, &str), CliError> {
    match path.rsplit_once('/') {
        Some((group, name)) if !group.is_empty() && !name.is_empty() => Ok((group, name)),
        _ => Err(CliError::Usage(format!(
            "`{path}` is not an environment path: it is GROUP/NAME, such as acme/payments/prod"
        ))),
    }
}

pub(super) fn env_hint(e: CliError, group: &str) -> CliError {
    match e {
        CliError::NotFound(m) => CliError::NotFound(format!(
            "{m}\nhint: see the environments with `sortie list envs --group {group}`"
        )),
        other => other,
    }
}

/// `KEY=VALUE` pairs (labels).
pub(super) fn parse_pairs(
    flag: &str,
    pairs: &[String],
) -> Result<BTreeMap<String, String>, CliError> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!("{flag} `{p}` is not KEY=VALUE"))),
        })
        .collect()
}

/// A setting of `create env`: an empty value, which clears, has nothing to clear there.
pub(super) fn to_set<T>(flag: &str, value: Option<Clearable<T>>) -> Result<Option<T>, CliError> {
    match value {
        Some(Clearable::Set(v)) => Ok(Some(v)),
        Some(Clearable::Clear) => Err(CliError::Usage(format!(
            "{flag} '': an empty value clears a setting, which only `sortie update env` does; leave the flag out for the default"
        ))),
        None => Ok(None),
    }
}

/// A setting of `update env`: its new value, or `None` with `field` noted in `cleared`
/// (to be sent as `null`) when it is cleared.
pub(super) fn or_clear<T>(
    cleared: &mut Vec<&'static str>,
    field: &'static str,
    value: Option<Clearable<T>>,
) -> Option<T> {
    match value {
        Some(Clearable::Set(v)) => Some(v),
        Some(Clearable::Clear) => {
            cleared.push(field);
            None
        }
        None => None,
    }
}

pub(super) fn approval(a: ApprovalArg) -> Approval {
    match a {
        ApprovalArg::Auto => Approval::Auto,
        ApprovalArg::Required => Approval::Required,
    }
}

pub(super) fn remediation(r: RemediationArg) -> DriftRemediation {
    match r {
        RemediationArg::Off => DriftRemediation::Off,
        RemediationArg::Apply => DriftRemediation::Apply,
    }
}

pub(super) fn tool(t: ToolArg) -> ToolName {
    match t {
        ToolArg::Terraform => ToolName::Terraform,
        ToolArg::Opentofu => ToolName::Opentofu,
    }
}
