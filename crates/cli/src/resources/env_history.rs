//! An environment over its life: `env state-versions`, `env restore`, and the upstream and
//! downstream environments `get env` shows.

use serde_json::{json, Value};
use sortie_client::endpoints;

use super::environments::split_env;
use super::shared::env_param;
use crate::args::Output;
use crate::client::Api;
use crate::exit::CliError;
use crate::output::{emit, table};

/// `sortie env state-versions PATH [--limit N] [--cursor C]`.
pub(super) async fn state_versions(
    api: &Api,
    path: &str,
    limit: u32,
    cursor: Option<String>,
    out: Output,
) -> Result<(), CliError> {
    split_env(path)?;
    let limit = limit.to_string();
    let call = endpoints::list_state_versions(env_param(path)).query([
        ("limit", Some(limit.as_str())),
        ("cursor", cursor.as_deref()),
    ]);
    let answer = api.send(&call, None, &[]).await?;
    let body = answer.body;
    emit(&body, out, || {
        let text = |v: &Value, k: &str| match v.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "-".into(),
            Some(other) => other.to_string(),
        };
        let rows = body["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let mut id = text(v, "version_id");
                if v["is_latest"].as_bool() == Some(true) {
                    id.push_str(" (current)");
                }
                vec![
                    id,
                    text(v, "last_modified"),
                    text(v, "serial"),
                    text(v, "size"),
                    text(v, "job_id"),
                    text(v, "lineage"),
                ]
            })
            .collect();
        let mut t = table(
            &["VERSION", "WRITTEN", "SERIAL", "BYTES", "JOB", "LINEAGE"],
            rows,
        );
        if let Some(next) = body["next"].as_str() {
            t.push_str(&format!("(more: --cursor {next})\n"));
        }
        t
    })
}

/// `sortie env restore PATH VERSION --reason TEXT`.
pub(super) async fn restore(
    api: &Api,
    path: &str,
    version: &str,
    reason: &str,
    out: Output,
) -> Result<(), CliError> {
    split_env(path)?;
    let call = endpoints::restore_state_version(env_param(path), version);
    let body = json!({ "reason": reason });
    let answer = api.send(&call, Some(&body), &[]).await?;
    let body = answer.body;
    emit(&body, out, || {
        format!(
            "restore of `{path}` to state version {version} queued as job {}: it writes the version back, then plans (see `sortie job logs {}`)\n",
            body["job_id"].as_str().unwrap_or("?"),
            body["job_id"].as_str().unwrap_or("?"),
        )
    })
}

/// The `upstream:` and `downstream:` lines of `get env` (empty when it has neither, or
/// when they cannot be read: `get env` still shows the environment).
pub(super) async fn triggers_text(api: &Api, path: &str) -> String {
    let call = endpoints::get_environment_triggers(env_param(path)).query([("limit", Some("100"))]);
    let Ok(answer) = api.send(&call, None, &[]).await else {
        return String::new();
    };
    let list = |k: &str| -> Vec<String> {
        answer.body[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let (up, down) = (list("upstream"), list("downstream"));
    if up.is_empty() && down.is_empty() {
        return String::new();
    }
    let shown = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut t = format!("upstream:     {}\n", shown(&up));
    if !up.is_empty() {
        t.push_str(&format!(
            "triggers run: {}{}\n",
            answer.body["trigger_operation"].as_str().unwrap_or("plan"),
            match list("trigger_inputs") {
                i if i.is_empty() => String::new(),
                i => format!(" with TF_VAR_ from {}", i.join(", ")),
            }
        ));
    }
    t.push_str(&format!("downstream:   {}", shown(&down)));
    if answer.body["next"].is_string() {
        t.push_str(", ...");
    }
    t.push('\n');
    t
}
