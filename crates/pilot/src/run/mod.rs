//! One job from spec to exit: the orchestration of every other module.
//!
//! - this module: [`run`], the job's directory and the steps in order;
//! - `downloads`: what a phase fetches before it runs (an apply phase's saved plan, a
//!   restore's state version);
//! - `exit`: how a run ends (the exit code, the exit report, the log's last line);
//! - `reports`: the best-effort reports to the API (the tool and version, the state's
//!   serial);
//! - `tool`: Terraform or OpenTofu in the configuration directory, and what it made
//!   (the plan's counts, outputs, artifacts);
//! - `workspace`: the source, the job's secrets and the state storage's directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sortie_core::identity::Phase;
use sortie_core::protocol::pilot::{JobSpec, UploadKind};
use sortie_core::{ChangeSummary, Operation};
use tracing::Instrument;

use crate::api::ApiClient;
use crate::backend::{backend_setup, check_storage_version, BACKEND_FILE};
use crate::declarations;
use crate::env::PilotEnv;
use crate::error::PilotError;
use crate::guard;
use crate::identity::JobIdentity;
use crate::log::{LogShipper, LogSink, Pace};
use crate::objects::ObjectStore;
use crate::scrub::{Secrets, MARKER, SHORT_VALUE_CHARS};
use crate::source;
use crate::terraform::{self, Step, ToolEnv, ToolRequest, PLAN_FILE};
use crate::upload::{ApiUploader, Uploader};

mod downloads;
mod exit;
mod reports;
mod tool;
mod workspace;

use downloads::{download_saved_plan, restore_state, saved_plan_url};
use exit::report_exit;
pub use exit::{
    clip, exit_code, failure_line, job_label, pilot_exit, report_early_failure, success_line,
    FAILURE_EXIT_CODE, PREFIX,
};
use reports::{report_state, report_tool};
use tool::{
    outputs, state_resources, summarize_plan, summarize_text, upload_artifact, Redaction, Tool,
};
use workspace::{
    absolute_storage, add_runner_secrets, add_source_secrets, fetch_source, secret_names,
    RunnerSecrets,
};

/// Runs the job described by `env`: fetch the spec, lay out the source, run
/// terraform, ship the log, upload and report the summary.
///
/// On failure the reason has already been written as the log's (and stdout's)
/// last line when this returns. When the spec's `report_exit` is set, the last thing
/// done is `POST /v1/jobs/{id}/events` with [`pilot_exit`] of the result (whatever
/// the outcome, once the spec is in hand); its failure is logged and changes nothing.
pub async fn run(
    env: &PilotEnv,
    objects: Arc<dyn ObjectStore>,
) -> Result<ChangeSummary, PilotError> {
    // The secrets known from the start, before anything could print them: the job token
    // and the git credential (whole, and its token after `user:`).
    let secrets = Secrets::process();
    secrets.add([env.token.expose()]);
    if let Some(credentials) = &env.git_credentials {
        let value = credentials.expose();
        secrets.add([
            value,
            value.split_once(':').map_or(value, |(_, token)| token),
        ]);
    }
    let span = tracing::info_span!("job", job_id = %env.job_id);
    run_job(env, objects).instrument(span).await
}

async fn run_job(
    env: &PilotEnv,
    objects: Arc<dyn ObjectStore>,
) -> Result<ChangeSummary, PilotError> {
    let (api, spec) = match fetch_spec(env).await {
        Ok(pair) => pair,
        Err(e) => {
            report_early_failure(&e);
            return Err(e);
        }
    };
    let api = Arc::new(api);
    if spec.job_id != env.job_id {
        let e = PilotError::Api(format!(
            "the API answered the spec of job {} when asked for job {}",
            spec.job_id, env.job_id
        ));
        report_early_failure(&e);
        let result = Err(e);
        report_exit(&api, &spec, &result).await;
        return result;
    }
    tracing::info!(operation = spec.operation.as_str(), environment = %spec.environment, "job spec fetched");
    // The runner's own secrets (an ECS container's `secrets`, an eks runner's secret
    // variables): their values are in this process's environment under the names the spec
    // gives; into the secret set before anything could print them.
    let runner_secrets =
        add_runner_secrets(&spec, |name| std::env::var(name).ok(), &Secrets::process());
    // A `github` source's token too.
    add_source_secrets(&spec, &Secrets::process());

    // A second phase continues the job's log where the first phase's ended.
    let sink = LogSink::starting_at(true, spec.log_offset);
    let uploader: Arc<dyn Uploader> = Arc::new(ApiUploader::new(api.clone()));
    let shipper = LogShipper::spawn(sink.clone(), uploader.clone(), Pace::default());
    let mut problems = Vec::new();
    let result = execute(
        env,
        &spec,
        &runner_secrets,
        &sink,
        objects.as_ref(),
        &api,
        uploader.as_ref(),
        &mut problems,
    )
    .await;
    match &result {
        Ok(summary) => {
            tracing::info!(
                add = summary.add,
                change = summary.change,
                destroy = summary.destroy,
                "job succeeded"
            );
            sink.line(&format!("{PREFIX} {}", success_line(&spec, summary)));
        }
        Err(e) => {
            tracing::error!(reason = %e.reason(), "job failed");
            sink.line(&failure_line(e));
        }
    }
    if let Some(problem) = shipper.finish().await {
        problems.push(problem);
    }
    // What did not arrive is recorded on the job; it never changes the job's outcome.
    if !problems.is_empty() {
        let problems: Vec<String> = problems
            .iter()
            .map(|p| sink.secrets().scrub_str(p))
            .collect();
        if let Err(e) = api.report_upload_problems(&problems).await {
            tracing::error!(error = %e.reason(), ?problems, "could not report the upload problems");
        }
    }
    report_exit(&api, &spec, &result).await;
    result
}

async fn fetch_spec(env: &PilotEnv) -> Result<(ApiClient, JobSpec), PilotError> {
    let api = ApiClient::new(env)?;
    let spec = api.job_spec().await?;
    Ok((api, spec))
}

/// Runs a blocking step on a blocking thread, inside the current span.
pub(super) async fn blocking<T, F>(f: F) -> Result<T, PilotError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, PilotError> + Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| PilotError::Tool(format!("a worker thread failed: {e}")))?
}

/// The job's directory: removed at the end when the pilot made it up itself.
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl WorkDir {
    fn create(base: Option<&Path>, job_id: &str) -> Result<Self, PilotError> {
        let (path, remove) = match base {
            Some(base) => (base.join(format!("job-{job_id}")), false),
            None => (
                std::env::temp_dir().join(format!("sortie-pilot-{job_id}-{}", std::process::id())),
                true,
            ),
        };
        if path.exists() {
            // A leftover of an earlier attempt at the same job.
            std::fs::remove_dir_all(&path).map_err(|e| {
                PilotError::Workspace(format!("could not clear {}: {e}", path.display()))
            })?;
        }
        std::fs::create_dir_all(&path).map_err(|e| {
            PilotError::Workspace(format!("could not create {}: {e}", path.display()))
        })?;
        Ok(Self { path, remove })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    env: &PilotEnv,
    spec: &JobSpec,
    runner_secrets: &RunnerSecrets,
    sink: &LogSink,
    objects: &dyn ObjectStore,
    api: &Arc<ApiClient>,
    uploader: &dyn Uploader,
    problems: &mut Vec<String>,
) -> Result<ChangeSummary, PilotError> {
    let tf_env = ToolEnv::for_terraform();

    // What the spec asks for, checked before anything is chosen, fetched or run.
    if let Some(reason) = guard::spec_refusal(spec) {
        return Err(PilotError::Refused(reason));
    }
    let steps = terraform::job_steps(
        spec.operation,
        spec.phase,
        spec.detailed_exitcode,
        spec.speculative,
    )?;
    let saved_plan_url = saved_plan_url(spec)?;
    let request = ToolRequest::new(spec.tool, spec.version.as_deref())?;

    // The tool and its version: the one the spec asks for, else the pilot's default.
    let choice = {
        let path_var = std::env::var_os("PATH");
        let (explicit, tools_dir, tf_env) =
            (env.terraform.clone(), env.tools_dir.clone(), tf_env.clone());
        blocking(move || {
            terraform::choose(
                &request,
                explicit.as_deref(),
                &tools_dir,
                path_var.as_deref(),
                &tf_env,
            )
        })
        .await?
    };
    let (bin, version) = (choice.bin, choice.version);
    sink.line(&format!(
        "{PREFIX} job {}: {} of {} with {version} ({})",
        spec.job_id,
        job_label(spec),
        spec.environment,
        bin.display()
    ));
    for note in &choice.notes {
        sink.line(&format!("{PREFIX} note: {note}"));
    }
    report_tool(api, sink, &version).await;
    // A storage this version cannot use fails the job before anything is fetched.
    check_storage_version(&version, &spec.state_storage)?;

    // The source, then the job's files and variables.
    let work = WorkDir::create(env.work_dir.as_deref(), &spec.job_id)?;
    // The job's own cloud identity, when its runner has one: a token per phase, kept fresh.
    let identity = JobIdentity::start(
        api.clone(),
        spec.identity.as_ref(),
        &spec.job_id,
        &work.path,
        sink,
    )?;
    let root = work.path.join("src");
    let source_path = fetch_source(env, spec, sink, objects, &work.path, &root).await?;
    let dir = source::config_dir(&root, &source_path)?;
    source::write_files(&dir, &spec.files)?;
    // The configuration's own files, before the pilot adds its backend file.
    let own_config = source::own_config_files(&dir)?;
    if own_config.is_empty() {
        return Err(PilotError::Refused(guard::no_config_reason(&source_path)));
    }
    let declares_resources = guard::declares_resources(
        own_config
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str())),
    );
    if source::write_variables(&dir, &spec.variables)? {
        sink.line(&format!(
            "{PREFIX} wrote {} variable(s) to {}",
            spec.variables.len(),
            source::TFVARS_FILE
        ));
    }

    // Secrets: the platform put each value into this process's environment under its
    // name (ECS `secrets`, or the local launcher as ECS would); terraform inherits them.
    // Only the names are ever printed.
    let (present, missing) = secret_names(spec, |name| std::env::var_os(name).is_some())?;
    // What the plan's JSON is redacted of: the sensitive variables (by name, and their
    // values) and the platform's secret values (the job's and the runner's), wherever
    // terraform copied them.
    let mut redaction = Redaction {
        names: spec.sensitive_variables.clone(),
        values: present
            .iter()
            .chain(&runner_secrets.present)
            .filter_map(|name| std::env::var(name).ok())
            .collect(),
    };
    sink.secrets()
        .add(redaction.values.iter().map(String::as_str));
    warn_short(sink, &present, |name| std::env::var(name).ok());
    if !present.is_empty() {
        sink.line(&format!(
            "{PREFIX} secrets in terraform's environment: {} (values injected by the platform, never printed)",
            present.join(", ")
        ));
    }
    if !missing.is_empty() {
        sink.line(&format!(
            "{PREFIX} warning: secrets not delivered to this runner: {}",
            missing.join(", ")
        ));
    }
    note_runner_secrets(sink, runner_secrets);

    // Sensitive variables: fetched with the job token, given to terraform as
    // `TF_VAR_<name>` in its environment only (never a file, an argument or a log line).
    let mut tf_env = tf_env;
    if !spec.sensitive_variables.is_empty() {
        let values = api.sensitive_variables().await?;
        sink.secrets().add(values.iter().map(|(_, value)| value));
        for (name, value) in values.iter() {
            tf_env
                .set
                .push((sortie_core::sensitive::env_name(name), value.to_string()));
            redaction.values.push(value.to_string());
        }
        sink.line(&format!(
            "{PREFIX} sensitive variables in terraform's environment: {} (values never printed)",
            values.names().join(", ")
        ));
        let names: Vec<String> = values.names().into_iter().map(String::from).collect();
        warn_short(sink, &names, |name| {
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        });
    }
    // Variables given a secret value, by name, that the configuration does not declare
    // `sensitive`: Terraform then prints their values in plans, outputs and errors.
    for warning in declarations::undeclared_sensitive_warnings(
        own_config
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str())),
        &secret_variables(
            spec,
            &[present.as_slice(), &runner_secrets.present].concat(),
        ),
    ) {
        sink.line(&format!("{PREFIX} warning: {warning}"));
    }

    // The backend.
    let storage = absolute_storage(&spec.state_storage)?;
    let setup = backend_setup(
        &version,
        &storage,
        &spec.environment,
        spec.state_key.as_deref(),
        env.aws_endpoint.as_deref(),
    )?;
    for note in &setup.notes {
        sink.line(&format!("{PREFIX} note: {note}"));
    }
    if let Some(state_dir) = &setup.create_dir {
        std::fs::create_dir_all(state_dir).map_err(|e| {
            PilotError::Workspace(format!(
                "could not create the state directory {}: {e}",
                state_dir.display()
            ))
        })?;
    }
    std::fs::write(dir.join(BACKEND_FILE), &setup.file)
        .map_err(|e| PilotError::Workspace(format!("could not write {BACKEND_FILE}: {e}")))?;

    // init, the saved plan of an apply phase, then the steps.
    let tool = Tool {
        bin: bin.clone(),
        version,
        dir: dir.clone(),
        env: tf_env,
    };
    tool_in(&tool, identity.as_ref(), Phase::Plan)
        .await?
        .run(sink, terraform::init_args(&setup.init_args), &[])
        .await?;
    if let Some(url) = saved_plan_url {
        download_saved_plan(api, sink, url, &dir.join(PLAN_FILE)).await?;
    }
    if let Some(url) = spec.restore_state_url.as_deref() {
        restore_state(api, sink, &tool, url, &dir).await?;
        report_state(api, sink, &tool).await;
    }
    let mut summary = ChangeSummary::default();
    for step in &steps {
        let phase = match step {
            Step::Plan { .. } => Phase::Plan,
            Step::ApplyPlan => Phase::Apply,
        };
        let step_tool = tool_in(&tool, identity.as_ref(), phase).await?;
        let finished = match step_tool
            .run(sink, step.args(), step.also_succeeds_with())
            .await
        {
            Ok(finished) => finished,
            Err(e) => {
                // A failed apply may still have written some of its state.
                if *step == Step::ApplyPlan {
                    report_state(api, sink, &tool).await;
                }
                return Err(e);
            }
        };
        summary = match step {
            Step::Plan {
                detailed_exitcode, ..
            } => {
                let (mut plan, plan_json) =
                    summarize_plan(&tool, &finished, sink, &redaction).await;
                // The plan as data, before anything else: the control plane reads it when
                // the plan ends (a reviewed apply's plan phase, the policy gate).
                upload_artifact(
                    uploader,
                    sink,
                    problems,
                    UploadKind::PlanJson,
                    Ok(plan_json),
                )
                .await;
                if *detailed_exitcode {
                    plan.has_changes = Some(finished.exit_code == Some(2));
                }
                if spec.operation == Operation::Apply {
                    let state_resources = if guard::may_empty(&plan) {
                        state_resources(&tool).await
                    } else {
                        None
                    };
                    let facts = guard::PlanFacts {
                        operation: spec.operation,
                        implicit: spec.source.is_implicit(),
                        declares_resources,
                        plan,
                        state_resources,
                    };
                    if let Some(reason) = guard::apply_refusal(&facts) {
                        return Err(PilotError::Refused(reason));
                    }
                }
                plan
            }
            Step::ApplyPlan => summarize_text(spec.operation, &finished, sink),
        };
    }
    let applied = steps.contains(&Step::ApplyPlan);
    if applied {
        report_state(api, sink, &tool).await;
    }

    // The artifacts. Uploads are best effort: a failure is written to the log and
    // reported to the API, and never turns a successful run into a failure.
    if !applied {
        let plan = std::fs::read(dir.join(PLAN_FILE))
            .map_err(|e| format!("could not read the plan file {PLAN_FILE}: {e}"));
        upload_artifact(uploader, sink, problems, UploadKind::Plan, plan).await;
    }
    let summary_json = serde_json::to_vec_pretty(&summary)
        .map_err(|e| format!("could not encode the summary: {e}"));
    upload_artifact(uploader, sink, problems, UploadKind::Summary, summary_json).await;
    if applied && spec.operation == Operation::Apply {
        if let Some(outputs) = outputs(&tool, sink.secrets()).await {
            upload_artifact(uploader, sink, problems, UploadKind::Outputs, Ok(outputs)).await;
        }
    }
    if let Err(e) = api.report_summary(&summary).await {
        tracing::warn!(error = %e.reason(), "could not report the summary");
        sink.line(&format!(
            "{PREFIX} warning: could not report the summary to the API: {}",
            e.reason()
        ));
    }
    drop(identity);
    drop(work);
    Ok(summary)
}

/// `tool` with the variables of the job's identity for `phase` (its token written first),
/// or `tool` as it is when the runner has no identity. Only Terraform's `init`, plan and
/// apply act as the job: the pilot's own reads and writes of the state use the runner's
/// credentials.
async fn tool_in(
    tool: &Tool,
    identity: Option<&JobIdentity>,
    phase: Phase,
) -> Result<Tool, PilotError> {
    let mut tool = tool.clone();
    if let Some(identity) = identity {
        let (set, remove) = identity.enter(phase).await?;
        tool.env.remove.extend(remove);
        tool.env.set.extend(set);
    }
    Ok(tool)
}

/// Warns, by name, of each secret whose value (`value_of`) is shorter than
/// [`SHORT_VALUE_CHARS`]: it is scrubbed everywhere it appears, which may erase ordinary
/// text from the log.
fn warn_short(sink: &LogSink, names: &[String], value_of: impl Fn(&str) -> Option<String>) {
    let short: Vec<&str> = names
        .iter()
        .filter(|name| {
            value_of(name).is_some_and(|v| !v.is_empty() && v.chars().count() < SHORT_VALUE_CHARS)
        })
        .map(String::as_str)
        .collect();
    if !short.is_empty() {
        sink.line(&format!(
            "{PREFIX} warning: the value of {} is shorter than {SHORT_VALUE_CHARS} characters; it is still replaced by {MARKER} wherever it appears, which may hide ordinary text in this log",
            short.join(", ")
        ));
    }
}

/// Says, by name, which of the runner's own secrets this process holds (their values are
/// in the secret set since the spec arrived), which it does not, and which are short.
fn note_runner_secrets(sink: &LogSink, runner: &RunnerSecrets) {
    warn_short(sink, &runner.present, |name| std::env::var(name).ok());
    if !runner.present.is_empty() {
        sink.line(&format!(
            "{PREFIX} the runner's own secrets in this environment: {} (scrubbed from this log and every artifact, never printed)",
            runner.present.join(", ")
        ));
    }
    if !runner.missing.is_empty() {
        sink.line(&format!(
            "{PREFIX} note: the runner names secrets this environment does not hold: {}",
            runner.missing.join(", ")
        ));
    }
}

/// The Terraform variables given a secret value: the job's sensitive variables, and each
/// platform secret named `TF_VAR_<name>` that the environment holds.
fn secret_variables(spec: &JobSpec, present: &[String]) -> Vec<String> {
    let mut names = spec.sensitive_variables.clone();
    names.extend(
        present
            .iter()
            .filter_map(|env| env.strip_prefix("TF_VAR_"))
            .map(String::from),
    );
    names.sort();
    names.dedup();
    names
}
