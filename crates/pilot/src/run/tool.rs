//! Terraform or OpenTofu in the job's configuration directory, and what it made: the
//! plan's counts, the outputs, the state's size, the artifacts.

use std::path::PathBuf;

use serde_json::Value;
use sortie_core::plan::{self, PlanData};
use sortie_core::protocol::pilot::UploadKind;
use sortie_core::{ChangeSummary, Operation};

use super::{blocking, PREFIX};
use crate::error::PilotError;
use crate::guard;
use crate::log::LogSink;
use crate::scrub::{Patterns, Secrets};
use crate::summary;
use crate::terraform::{self, Finished, ToolEnv, PLAN_FILE};
use crate::upload::Uploader;
use crate::version::ToolVersion;

/// Terraform or OpenTofu, ready to run in the configuration directory.
#[derive(Clone)]
pub(super) struct Tool {
    pub(super) bin: PathBuf,
    pub(super) version: ToolVersion,
    pub(super) dir: PathBuf,
    pub(super) env: ToolEnv,
}

impl Tool {
    /// Runs one command with its output in the log; an exit code other than 0 and those in
    /// `also_success` is an error.
    pub(super) async fn run(
        &self,
        sink: &LogSink,
        args: Vec<String>,
        also_success: &[i32],
    ) -> Result<Finished, PilotError> {
        let tool = self.version.tool();
        let command = args.first().cloned().unwrap_or_default();
        sink.line(&format!("{PREFIX} $ {tool} {}", args.join(" ")));
        let (bin, dir, env, sink) = (
            self.bin.clone(),
            self.dir.clone(),
            self.env.clone(),
            sink.clone(),
        );
        let finished =
            blocking(move || terraform::run_logged(&bin, &args, &dir, &env, &sink)).await?;
        if finished.success
            || finished
                .exit_code
                .is_some_and(|c| also_success.contains(&c))
        {
            Ok(finished)
        } else {
            Err(PilotError::Terraform {
                tool: tool.to_string(),
                command,
                code: finished.code.clone(),
                // Paths inside the job's directory read better relative to it.
                first_error: terraform::first_error(&finished.output).map(|error| {
                    let dir = self.dir.to_string_lossy();
                    error.replace(&format!("{}/", dir.trim_end_matches('/')), "")
                }),
            })
        }
    }
}

/// Uploads one artifact; a failure is written to the log and kept in `problems`.
pub(super) async fn upload_artifact(
    uploader: &dyn Uploader,
    sink: &LogSink,
    problems: &mut Vec<String>,
    kind: UploadKind,
    body: Result<Vec<u8>, String>,
) {
    let result = match body {
        Ok(body) => uploader.upload(kind, None, body).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => sink.line(&format!(
            "{PREFIX} uploaded {}",
            kind.file_name().unwrap_or(kind.as_str())
        )),
        Err(e) => {
            sink.line(&format!("{PREFIX} warning: {e}"));
            problems.push(e);
        }
    }
}

/// `output -json` after an apply, with every sensitive value redacted and every secret
/// replaced inside the others ([`summary::redact_outputs`]); `None` when the tool prints
/// none (no outputs, or a version that cannot), or not a document of outputs.
pub(super) async fn outputs(tool: &Tool, secrets: &Secrets) -> Option<Vec<u8>> {
    let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
    let args: Vec<String> = ["output", "-no-color", "-json"].map(String::from).to_vec();
    match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
        Ok((true, json)) => summary::redact_outputs(&json, &secrets.read()),
        _ => None,
    }
}

/// The serial and lineage of the state as it is now (`state pull`); `None` when it could
/// not tell (no state yet, or the tool failed).
pub(super) async fn state_stamp(tool: &Tool) -> Option<sortie_core::state_version::StateStamp> {
    let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
    let args: Vec<String> = ["state", "pull"].map(String::from).to_vec();
    match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
        Ok((true, state)) => serde_json::from_str::<Value>(&state)
            .ok()
            .and_then(|v| sortie_core::state_version::facts(&v))
            .and_then(|f| sortie_core::state_version::StateStamp::of(&f)),
        _ => None,
    }
}

/// How many managed resources the state holds (`state list`); `None` when it could not
/// tell.
pub(super) async fn state_resources(tool: &Tool) -> Option<usize> {
    let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
    let args: Vec<String> = ["state", "list"].map(String::from).to_vec();
    match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
        Ok((true, list)) => Some(guard::managed_resources(&list)),
        Ok((false, _)) => {
            tracing::warn!("state list failed; taking the plan's destroys as every resource");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e.reason(), "state list could not run; taking the plan's destroys as every resource");
            None
        }
    }
}

/// What the plan's JSON is redacted of: the names of the job's sensitive variables, and
/// every secret value terraform's environment holds (scrubbed wherever they appear).
#[derive(Default)]
pub(super) struct Redaction {
    /// The job's sensitive variables, by name.
    pub(super) names: Vec<String>,
    /// The values of the sensitive variables and of the platform's secrets.
    pub(super) values: Vec<String>,
}

impl std::fmt::Debug for Redaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redaction")
            .field("names", &self.names)
            .field("values", &self.values.len())
            .finish()
    }
}

/// A plan's counts and its `plan.json` body. The counts come from `show -json` where the
/// version has it, else from the plan text; the body is the redacted document
/// ([`plan_json_body`]), or `{"unavailable": "<reason>"}` when there is none (Terraform
/// 0.11, or `show -json` failed).
pub(super) async fn summarize_plan(
    tool: &Tool,
    finished: &Finished,
    sink: &LogSink,
    redaction: &Redaction,
) -> (ChangeSummary, Vec<u8>) {
    if !tool.version.has_show_json() {
        let body = PlanData::unavailable_artifact(plan::TERRAFORM_011);
        return (summarize_text(Operation::Plan, finished, sink), body);
    }
    let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
    let args: Vec<String> = ["show", "-no-color", "-json", PLAN_FILE]
        .map(String::from)
        .to_vec();
    let reason = match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
        Ok((true, json)) => {
            let body = plan_json_body(&json, redaction, &sink.secrets().read());
            if let Some(summary) = summary::from_plan_json(&json) {
                return (summary, body);
            }
            tracing::warn!("show -json printed no plan; reading the plan text instead");
            return (summarize_text(Operation::Plan, finished, sink), body);
        }
        Ok((false, _)) => {
            tracing::warn!("show -json failed; reading the plan text instead");
            format!("`{} show -json` failed", tool.version.tool())
        }
        Err(e) => {
            tracing::warn!(error = %e.reason(), "show -json could not run; reading the plan text instead");
            format!("`{} show -json` could not run", tool.version.tool())
        }
    };
    let body = PlanData::unavailable_artifact(&reason);
    (summarize_text(Operation::Plan, finished, sink), body)
}

/// The `plan.json` body of `show -json`'s output: the document redacted
/// ([`sortie_core::plan::redact`]) and scrubbed of every secret value, or an unavailable
/// body when it is not a JSON object or is over [`plan::PLAN_JSON_MAX_BYTES`].
///
/// Then, fail closed, the encoded body is scanned for every form of every secret of
/// `secrets` ([`Patterns`]: also those `plan::scrub` leaves, such as a value shorter than
/// its minimum, or one in a structural field): any left is replaced in the bytes, and a
/// body that is no longer JSON after that is an unavailable body.
pub(super) fn plan_json_body(json: &str, redaction: &Redaction, secrets: &Patterns) -> Vec<u8> {
    let mut doc: Value = match serde_json::from_str(json) {
        Ok(doc @ Value::Object(_)) => doc,
        Ok(_) => return PlanData::unavailable_artifact("`show -json` printed no JSON object"),
        Err(e) => {
            return PlanData::unavailable_artifact(&format!("`show -json` printed no JSON: {e}"))
        }
    };
    plan::redact(&mut doc, &redaction.names);
    plan::scrub(&mut doc, redaction.values.iter().map(String::as_str));
    match serde_json::to_vec(&doc).map(|body| scrub_encoded(body, secrets)) {
        Ok(None) => PlanData::unavailable_artifact(SECRET_LEFT),
        Ok(Some(body)) if body.len() <= plan::PLAN_JSON_MAX_BYTES => body,
        Ok(_) => PlanData::unavailable_artifact(plan::TOO_LARGE),
        Err(e) => PlanData::unavailable_artifact(&format!("could not encode the plan: {e}")),
    }
}

/// Why a plan has no data when a secret could not be taken out of its JSON.
const SECRET_LEFT: &str =
    "a secret value was left in `show -json`'s document where it could not be replaced";

/// `body` (a JSON document) with every secret replaced in its bytes; `None` when that
/// made it something other than JSON.
fn scrub_encoded(body: Vec<u8>, secrets: &Patterns) -> Option<Vec<u8>> {
    let scrubbed = secrets.scrub(&body);
    if scrubbed == body {
        return Some(body);
    }
    serde_json::from_slice::<Value>(&scrubbed).ok()?;
    Some(scrubbed)
}

/// The counts from `operation`'s text output; zeros, with a note, when it has none.
pub(super) fn summarize_text(
    operation: Operation,
    finished: &Finished,
    sink: &LogSink,
) -> ChangeSummary {
    summary::from_text(&finished.output, operation).unwrap_or_else(|| {
        sink.line(&format!(
            "{PREFIX} note: no change summary in the output; reporting zeros"
        ));
        ChangeSummary::default()
    })
}
