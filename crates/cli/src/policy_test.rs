//! `sortie policy test -f set.yaml --plan plan.json [--env PATH]`: a policy set evaluated
//! locally against a saved plan, with the input the control plane builds, so a team can
//! test its policies in CI before uploading them.

use std::path::Path;

use serde_json::{json, Value};
use sortie_api::model::EnvironmentView;
use sortie_client::endpoints;
use sortie_core::policy::{overall_status, PolicySet, PolicyStatus, SetResult};
use sortie_policy::{build_input, check_plan_size, compile, evaluate, JobInput, Limits};

use crate::args::Output;
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{emit, table};
use crate::resources::env_param;

/// What `policy test` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestReport {
    /// `passed`, `warned` or `denied`; `skipped` when the criteria leave the environment out.
    pub status: String,
    /// The set's result.
    pub result: Option<SetResult>,
    /// The resource types the set is evaluated over when it is indexed by type (its every
    /// read of `input.plan.resource_changes` filtered by a literal `type`); `None`: every
    /// resource.
    pub resource_types: Option<Vec<String>>,
}

/// Runs `policy test`. `api` is only used with `--env`.
pub async fn run(
    api: Option<&Api>,
    file: &Path,
    plan: &Path,
    env: Option<&str>,
    operation: &str,
    out: Output,
) -> Result<(), CliError> {
    let set_text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Usage(format!("could not read {}: {e}", file.display())))?;
    let set = PolicySet::parse(&set_text).map_err(|e| CliError::Invalid(e.to_string()))?;
    let compiled = compile(&set).map_err(|e| {
        CliError::Invalid(format!(
            "module `{}` does not compile: line {} column {}: {}",
            e.module, e.line, e.column, e.message
        ))
    })?;
    let plan_len = std::fs::metadata(plan)
        .map_err(|e| CliError::Usage(format!("could not read {}: {e}", plan.display())))?
        .len();
    check_plan_size(usize::try_from(plan_len).unwrap_or(usize::MAX)).map_err(CliError::Usage)?;
    let plan_text = std::fs::read_to_string(plan)
        .map_err(|e| CliError::Usage(format!("could not read {}: {e}", plan.display())))?;
    let plan_doc: Value = serde_json::from_str(&plan_text)
        .map_err(|e| CliError::Usage(format!("{} is not a JSON plan: {e}", plan.display())))?;
    // The group the set is tested under: the environment's, with `--env`; none otherwise
    // (the set is a file, held by no group yet). It read `local`, a name no group has.
    let group = env
        .and_then(|path| sortie_core::EnvPath::parse(path).ok())
        .map(|path| path.group().as_str().to_string())
        .unwrap_or_default();
    let (job, runner, applies) = match (env, api) {
        (Some(path), Some(api)) => {
            let answer = api
                .send(&endpoints::get_environment(env_param(path)), None, &[])
                .await?;
            let view: EnvironmentView = decode(answer.body)?;
            let e = &view.record.environment;
            (
                JobInput::for_env(e, operation, "sortie-policy-test"),
                json!({"id": e.runner.runner_id.to_string()}),
                set.applies_to(e),
            )
        }
        _ => (
            JobInput {
                operation: operation.to_string(),
                requested_by: "sortie-policy-test".into(),
                environment: String::new(),
                env_type: String::new(),
                labels: Default::default(),
                tags: Default::default(),
                drift_check: false,
            },
            json!({}),
            true,
        ),
    };
    let resource_types = compiled
        .resource_types()
        .map(|t| t.iter().cloned().collect::<Vec<_>>());
    let report = if applies {
        let input = build_input(&plan_doc, &job, &runner);
        let result = evaluate(&[(group.clone(), &compiled)], &input, Limits::default())
            .pop()
            .ok_or_else(|| CliError::Other("no result".into()))?;
        let status = match overall_status(std::slice::from_ref(&result)) {
            PolicyStatus::Passed => "passed",
            PolicyStatus::Warned => "warned",
            PolicyStatus::Denied | PolicyStatus::Unavailable => "denied",
        };
        TestReport {
            status: status.into(),
            result: Some(result),
            resource_types,
        }
    } else {
        TestReport {
            status: "skipped".into(),
            result: None,
            resource_types,
        }
    };
    let raw = serde_json::to_value(&report).map_err(|e| CliError::Other(e.to_string()))?;
    emit(&raw, out, || text(&set, &report))?;
    if report.status == "denied" {
        return Err(CliError::PolicyDenied(format!(
            "policy set `{}` ({}) denied the plan",
            set.name,
            set.enforcement.as_str()
        )));
    }
    Ok(())
}

fn text(set: &PolicySet, report: &TestReport) -> String {
    let mut out = format!(
        "policy set `{}` ({}): {}\n",
        set.name,
        set.enforcement.as_str(),
        report.status
    );
    out.push_str(&match &report.resource_types {
        Some(types) if types.is_empty() => {
            "evaluated over no resource change (it never reads them)\n".to_string()
        }
        Some(types) => format!(
            "evaluated over resource types {} only (indexed by type)\n",
            types.join(", ")
        ),
        None => "evaluated over every resource change (not indexed by type)\n".to_string(),
    });
    let Some(r) = &report.result else {
        out.push_str("its criteria leave this environment out\n");
        return out;
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    rows.extend(r.error.iter().map(|e| vec!["error".to_string(), e.clone()]));
    rows.extend(r.deny.iter().map(|m| vec!["deny".to_string(), m.clone()]));
    rows.extend(r.warn.iter().map(|m| vec!["warn".to_string(), m.clone()]));
    if !rows.is_empty() {
        out.push_str(&table(&["RULE", "MESSAGE"], rows));
    }
    out
}
