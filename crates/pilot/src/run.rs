//! One job from spec to exit: the orchestration of every other module.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sortie_core::runner::LocalStorage;
use sortie_core::{ChangeSummary, JobPhase, Operation, Source, StateStorageConfiguration};
use sortie_core::protocol::pilot::{JobSpec, PilotExit, UploadKind, PILOT_EXIT_REASON_MAX};
use tracing::Instrument;

use crate::api::{without_query, ApiClient, ExitReported};
use crate::backend::{backend_setup, check_storage_version, BACKEND_FILE};
use crate::env::{check_env_name, PilotEnv, PRIVATE_VARS};
use crate::error::PilotError;
use crate::guard;
use crate::log::{LogShipper, LogSink, FLUSH_INTERVAL};
use crate::objects::{ObjectRef, ObjectStore};
use crate::source;
use crate::summary;
use crate::terraform::{self, Finished, Step, ToolEnv, ToolRequest, PLAN_FILE};
use crate::upload::{ApiUploader, Uploader};
use crate::version::ToolVersion;

/// Every line the runner writes itself starts with this.
pub const PREFIX: &str = "sortie-pilot:";

/// The process exit code of a failed run (a successful one exits 0).
pub const FAILURE_EXIT_CODE: u8 = 1;

/// The process exit code for `result`: 0, or [`FAILURE_EXIT_CODE`].
pub fn exit_code<T>(result: &Result<T, PilotError>) -> u8 {
    match result {
        Ok(_) => 0,
        Err(_) => FAILURE_EXIT_CODE,
    }
}

/// The final callback's body for `result`: the exit code the process is about to
/// return and, on failure, the reason on one line (no control characters), cut to
/// [`RUNNER_EXIT_REASON_MAX`] bytes, ending with `…` when cut.
pub fn runner_exit<T>(result: &Result<T, PilotError>) -> PilotExit {
    PilotExit {
        exit_code: i32::from(exit_code(result)),
        reason: result.as_ref().err().map(|e| {
            let reason: String = e.reason().chars().filter(|c| !c.is_control()).collect();
            if reason.len() <= RUNNER_EXIT_REASON_MAX {
                reason
            } else {
                format!(
                    "{}…",
                    clip(&reason, RUNNER_EXIT_REASON_MAX - '…'.len_utf8())
                )
            }
        }),
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last line of a failed job's log.
pub fn failure_line(error: &PilotError) -> String {
    format!("{PREFIX} {}", error.reason())
}

/// Prints a failure that happened before the job's log exists (bad environment,
/// the spec refused) as the last line of stdout.
pub fn report_early_failure(error: &PilotError) {
    tracing::error!(reason = %error.reason(), "job failed before it started");
    LogSink::new(true).line(&failure_line(error));
}

/// Runs the job described by `env`: fetch the spec, lay out the source, run
/// terraform, ship the log, upload and report the summary.
///
/// On failure the reason has already been written as the log's (and stdout's)
/// last line when this returns. When the spec's `report_exit` is set, the last thing
/// done is `POST /v1/jobs/{id}/events` with [`runner_exit`] of the result (whatever
/// the outcome, once the spec is in hand); its failure is logged and changes nothing.
pub async fn run(
    env: &PilotEnv,
    objects: Arc<dyn ObjectStore>,
) -> Result<ChangeSummary, PilotError> {
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

    // A second phase continues the job's log where the first phase's ended.
    let sink = LogSink::starting_at(true, spec.log_offset);
    let uploader: Arc<dyn Uploader> = Arc::new(ApiUploader::new(api.clone()));
    let shipper = LogShipper::spawn(sink.clone(), uploader.clone(), FLUSH_INTERVAL);
    let mut problems = Vec::new();
    let result = execute(
        env,
        &spec,
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
        if let Err(e) = api.report_upload_problems(&problems).await {
            tracing::error!(error = %e.reason(), ?problems, "could not report the upload problems");
        }
    }
    report_exit(&api, &spec, &result).await;
    result
}

/// The final callback, when `spec` asks for it. Its failure is logged (the platform's
/// own view of the pod, polled by the sweeper, still ends the job), never returned.
async fn report_exit(api: &ApiClient, spec: &JobSpec, result: &Result<ChangeSummary, PilotError>) {
    if !spec.report_exit {
        return;
    }
    let exit = runner_exit(result);
    match api.report_exit(&exit).await {
        Ok(ExitReported::Recorded) => {
            tracing::info!(exit_code = exit.exit_code, "exit reported to the API")
        }
        Ok(ExitReported::Conflict(detail)) => tracing::info!(
            exit_code = exit.exit_code,
            detail,
            "the API answered the exit report with 409 Conflict: the job is not running (its launch is not recorded yet); the sweeper ends it from the pod's status"
        ),
        Err(e) => tracing::error!(
            exit_code = exit.exit_code,
            error = %e.reason(),
            "could not report the exit to the API; the job ends when the platform reports the pod"
        ),
    }
}

async fn fetch_spec(env: &PilotEnv) -> Result<(ApiClient, JobSpec), PilotError> {
    let api = ApiClient::new(env)?;
    let spec = api.job_spec().await?;
    Ok((api, spec))
}

/// Runs a blocking step on a blocking thread, inside the current span.
async fn blocking<T, F>(f: F) -> Result<T, PilotError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, PilotError> + Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| PilotError::Tool(format!("a worker thread failed: {e}")))?
}

/// The job's directory: removed at the end when the runner made it up itself.
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

async fn execute(
    env: &PilotEnv,
    spec: &JobSpec,
    sink: &LogSink,
    objects: &dyn ObjectStore,
    api: &ApiClient,
    uploader: &dyn Uploader,
    problems: &mut Vec<String>,
) -> Result<ChangeSummary, PilotError> {
    let tf_env = ToolEnv::for_terraform();

    // What the spec asks for, checked before anything is chosen, fetched or run.
    if let Some(reason) = guard::spec_refusal(spec) {
        return Err(PilotError::Refused(reason));
    }
    let steps = terraform::job_steps(spec.operation, spec.phase, spec.detailed_exitcode)?;
    let saved_plan_url = saved_plan_url(spec)?;
    let request = ToolRequest::new(spec.tool, spec.version.as_deref())?;

    // The tool and its version: the one the spec asks for, else the runner's default.
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
    let root = work.path.join("src");
    let source_path = fetch_source(env, spec, sink, objects, &work.path, &root).await?;
    let dir = source::config_dir(&root, &source_path)?;
    source::write_files(&dir, &spec.files)?;
    // The configuration's own files, before the runner adds its backend file.
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

    // Sensitive variables: fetched with the job token, given to terraform as
    // `TF_VAR_<name>` in its environment only (never a file, an argument or a log line).
    let mut tf_env = tf_env;
    if !spec.sensitive_variables.is_empty() {
        let values = api.sensitive_variables().await?;
        for (name, value) in values.iter() {
            tf_env
                .set
                .push((sortie_core::sensitive::env_name(name), value.to_string()));
        }
        sink.line(&format!(
            "{PREFIX} sensitive variables in terraform's environment: {} (values never printed)",
            values.names().join(", ")
        ));
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
    tool.run(sink, terraform::init_args(&setup.init_args), &[])
        .await?;
    if let Some(url) = saved_plan_url {
        download_saved_plan(api, sink, url, &dir.join(PLAN_FILE)).await?;
    }
    let mut summary = ChangeSummary::default();
    for step in &steps {
        let finished = tool
            .run(sink, step.args(), step.also_succeeds_with())
            .await?;
        summary = match step {
            Step::Plan {
                detailed_exitcode, ..
            } => {
                let mut plan = summarize_plan(&tool, &finished, sink).await;
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
        if let Some(outputs) = outputs(&tool).await {
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
    drop(work);
    Ok(summary)
}

/// The job as the log names it: `apply`, `apply (plan phase)`, `plan (drift check)`.
pub fn job_label(spec: &JobSpec) -> String {
    let operation = spec.operation.as_str();
    match (spec.phase, spec.detailed_exitcode) {
        (Some(phase), _) => format!("{operation} ({} phase)", phase.as_str()),
        (None, true) => format!("{operation} (drift check)"),
        (None, false) => operation.to_string(),
    }
}

/// The log's last line of a successful job (after the prefix): what it did and the counts,
/// as a plan's (`1 to add, ...`) when it only planned.
pub fn success_line(spec: &JobSpec, summary: &ChangeSummary) -> String {
    let planned_only = spec.operation == Operation::Plan || spec.phase == Some(JobPhase::Plan);
    let counted_as = if planned_only {
        Operation::Plan
    } else {
        spec.operation
    };
    let changes = match summary.has_changes {
        Some(true) => "; changes present",
        Some(false) => "; no changes",
        None => "",
    };
    format!(
        "{} succeeded: {}{changes}",
        job_label(spec),
        summary::describe(summary, counted_as)
    )
}

/// The saved plan's URL for an apply phase (required there), `None` otherwise.
fn saved_plan_url(spec: &JobSpec) -> Result<Option<&str>, PilotError> {
    match (spec.phase, spec.saved_plan_url.as_deref()) {
        (Some(JobPhase::Apply), Some(url)) if !url.trim().is_empty() => Ok(Some(url.trim())),
        (Some(JobPhase::Apply), _) => Err(PilotError::Spec(format!(
            "the apply phase of job {} has no saved_plan_url: there is no saved plan to apply",
            spec.job_id
        ))),
        _ => Ok(None),
    }
}

/// Reports the tool and version to the API. Best effort: a failure is a warning, in the
/// runner's own log and the job's, and never fails the job.
async fn report_tool(api: &ApiClient, sink: &LogSink, version: &ToolVersion) {
    let used = version.used();
    match api.report_tool(&used).await {
        Ok(()) => {
            tracing::info!(tool = used.tool.as_str(), version = %used.version, "tool reported to the API")
        }
        Err(e) => {
            tracing::warn!(error = %e.reason(), "could not report the tool and version");
            sink.line(&format!(
                "{PREFIX} warning: could not report the tool and version ({} {}) to the API: {}",
                used.tool,
                used.version,
                e.reason()
            ));
        }
    }
}

/// Downloads the saved plan of an apply phase to `dest`.
async fn download_saved_plan(
    api: &ApiClient,
    sink: &LogSink,
    url: &str,
    dest: &Path,
) -> Result<(), PilotError> {
    sink.line(&format!(
        "{PREFIX} downloading the saved plan {}",
        without_query(url)
    ));
    let bytes = api
        .download_presigned(url)
        .await
        .map_err(|e| PilotError::SavedPlan(format!("could not download the saved plan: {e}")))?;
    if bytes.is_empty() {
        return Err(PilotError::SavedPlan(
            "the saved plan is empty: there is nothing to apply".into(),
        ));
    }
    std::fs::write(dest, &bytes).map_err(|e| {
        PilotError::SavedPlan(format!(
            "could not write the saved plan to {PLAN_FILE}: {e}"
        ))
    })?;
    sink.line(&format!(
        "{PREFIX} saved plan: {} bytes, sha256 {}",
        bytes.len(),
        source::sha256_hex(&bytes)
    ));
    Ok(())
}

/// Terraform or OpenTofu, ready to run in the configuration directory.
struct Tool {
    bin: PathBuf,
    version: ToolVersion,
    dir: PathBuf,
    env: ToolEnv,
}

impl Tool {
    /// Runs one command with its output in the log; an exit code other than 0 and those in
    /// `also_success` is an error.
    async fn run(
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
async fn upload_artifact(
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

/// `output -json` after an apply, with every sensitive value redacted; `None` when the
/// tool prints none (no outputs, or a version that cannot).
async fn outputs(tool: &Tool) -> Option<Vec<u8>> {
    let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
    let args: Vec<String> = ["output", "-no-color", "-json"].map(String::from).to_vec();
    match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
        Ok((true, json)) => summary::redact_outputs(&json),
        _ => None,
    }
}

/// How many managed resources the state holds (`state list`); `None` when it could not
/// tell.
async fn state_resources(tool: &Tool) -> Option<usize> {
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

/// A plan's counts: from `show -json` where the version has it, else from the plan text.
async fn summarize_plan(tool: &Tool, finished: &Finished, sink: &LogSink) -> ChangeSummary {
    if tool.version.has_show_json() {
        let (bin, dir, env) = (tool.bin.clone(), tool.dir.clone(), tool.env.clone());
        let args: Vec<String> = ["show", "-no-color", "-json", PLAN_FILE]
            .map(String::from)
            .to_vec();
        match blocking(move || terraform::run_captured(&bin, &args, &dir, &env)).await {
            Ok((true, json)) => {
                if let Some(summary) = summary::from_plan_json(&json) {
                    return summary;
                }
                tracing::warn!("show -json printed no plan; reading the plan text instead");
            }
            Ok((false, _)) => tracing::warn!("show -json failed; reading the plan text instead"),
            Err(e) => {
                tracing::warn!(error = %e.reason(), "show -json could not run; reading the plan text instead")
            }
        }
    }
    summarize_text(Operation::Plan, finished, sink)
}

/// The counts from `operation`'s text output; zeros, with a note, when it has none.
fn summarize_text(operation: Operation, finished: &Finished, sink: &LogSink) -> ChangeSummary {
    summary::from_text(&finished.output, operation).unwrap_or_else(|| {
        sink.line(&format!(
            "{PREFIX} note: no change summary in the output; reporting zeros"
        ));
        ChangeSummary::default()
    })
}

/// The names of the job's secrets, checked, split into those the environment holds
/// (`is_set`) and those it does not.
fn secret_names(
    spec: &JobSpec,
    is_set: impl Fn(&str) -> bool,
) -> Result<(Vec<String>, Vec<String>), PilotError> {
    let mut present = vec![];
    let mut missing = vec![];
    for name in spec.secret_refs.keys() {
        check_env_name(name).map_err(PilotError::Config)?;
        if is_set(name) {
            present.push(name.clone());
        } else {
            missing.push(name.clone());
        }
    }
    Ok((present, missing))
}

/// The storage with a relative `local` directory made absolute (terraform runs
/// in the configuration directory, not where the runner started).
fn absolute_storage(
    storage: &StateStorageConfiguration,
) -> Result<StateStorageConfiguration, PilotError> {
    match storage {
        StateStorageConfiguration::Local(local) if Path::new(&local.directory).is_relative() => {
            let cwd = std::env::current_dir().map_err(|e| {
                PilotError::Workspace(format!("could not read the current directory: {e}"))
            })?;
            Ok(StateStorageConfiguration::Local(LocalStorage {
                directory: cwd.join(&local.directory).to_string_lossy().into_owned(),
            }))
        }
        other => Ok(other.clone()),
    }
}

/// Fetches the source into `root` and returns the configuration's path inside it.
async fn fetch_source(
    env: &PilotEnv,
    spec: &JobSpec,
    sink: &LogSink,
    objects: &dyn ObjectStore,
    work: &Path,
    root: &Path,
) -> Result<String, PilotError> {
    match &spec.source {
        Source::Inline { .. } => {
            std::fs::create_dir_all(root).map_err(|e| {
                PilotError::Workspace(format!("could not create {}: {e}", root.display()))
            })?;
            sink.line(&format!(
                "{PREFIX} inline source: {} file(s)",
                spec.files.len()
            ));
            Ok(String::new())
        }
        Source::S3 {
            bucket,
            key,
            sha256,
            path,
        } => {
            let object = ObjectRef::new(None, bucket, key);
            sink.line(&format!("{PREFIX} fetching {object}"));
            let bytes = objects.get(&object).await.map_err(|e| {
                PilotError::Source(format!("could not fetch the source archive: {e}"))
            })?;
            source::verify_checksum(&bytes, sha256, bucket, key)?;
            sink.line(&format!(
                "{PREFIX} sha256 {} verified; extracting",
                sha256.trim().to_ascii_lowercase()
            ));
            let dest = root.to_path_buf();
            blocking(move || source::extract_tar_gz(&bytes, &dest)).await?;
            Ok(path.clone())
        }
        Source::Git {
            url,
            git_ref,
            path,
            credentials_secret,
        } => {
            let credentials = match (credentials_secret, &env.git_credentials) {
                (Some(_), Some(value)) => Some(value.expose().to_string()),
                (Some(arn), None) => {
                    sink.line(&format!(
                        "{PREFIX} note: source.credentials_secret {arn} is set but {} is not; cloning without credentials",
                        crate::env::GIT_CREDENTIALS
                    ));
                    None
                }
                (None, _) => None,
            };
            let askpass = work.join(".sortie-askpass");
            if credentials.is_some() {
                write_askpass(&askpass)?;
            }
            let git_env = ToolEnv {
                set: source::git_env(credentials.as_deref(), &askpass),
                remove: PRIVATE_VARS.iter().map(|v| v.to_string()).collect(),
            };
            let dest = root.to_string_lossy().into_owned();
            for args in source::git_steps(url, git_ref.as_deref(), &dest) {
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| {
                        if a == url {
                            source::redact_url(a)
                        } else {
                            a.clone()
                        }
                    })
                    .collect();
                sink.line(&format!("{PREFIX} $ git {}", shown.join(" ")));
                let subcommand = args
                    .iter()
                    .find(|a| *a == "clone" || *a == "checkout")
                    .cloned()
                    .unwrap_or_else(|| "command".into());
                let (work, env, sink) = (work.to_path_buf(), git_env.clone(), sink.clone());
                let finished = blocking(move || {
                    terraform::run_logged(Path::new("git"), &args, &work, &env, &sink)
                })
                .await?;
                if !finished.success {
                    let detail = terraform::first_error(&finished.output)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default();
                    return Err(PilotError::Source(format!(
                        "git {subcommand} of {} failed with exit code {}{detail}",
                        source::redact_url(url),
                        finished.code
                    )));
                }
            }
            Ok(path.clone())
        }
    }
}

fn write_askpass(path: &Path) -> Result<(), PilotError> {
    std::fs::write(path, source::ASKPASS_SCRIPT).map_err(|e| {
        PilotError::Workspace(format!("could not write the git askpass helper: {e}"))
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
            PilotError::Workspace(format!(
                "could not make the git askpass helper executable: {e}"
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_report_carries_the_exit_code_and_a_one_line_reason() {
        let ok: Result<ChangeSummary, PilotError> = Ok(ChangeSummary::default());
        assert_eq!(
            runner_exit(&ok),
            PilotExit {
                exit_code: 0,
                reason: None
            }
        );
        let failed: Result<(), PilotError> = Err(PilotError::Source(
            "git clone failed:\n  fatal: not found".into(),
        ));
        assert_eq!(
            runner_exit(&failed),
            PilotExit {
                exit_code: i32::from(FAILURE_EXIT_CODE),
                reason: Some("git clone failed: fatal: not found".into())
            }
        );
        assert_eq!(exit_code(&failed), 1);
        let colored: Result<(), PilotError> = Err(PilotError::Source(
            "\u{1b}[31mError\u{1b}[0m: bad\u{7}".into(),
        ));
        assert_eq!(
            runner_exit(&colored).reason.as_deref(),
            Some("[31mError[0m: bad")
        );
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        // 'é' is two bytes: 1023 bytes of 'x' then 'é' would straddle the limit.
        let reason = format!("{}é and more", "x".repeat(RUNNER_EXIT_REASON_MAX - 1));
        let failed: Result<(), PilotError> = Err(PilotError::Workspace(reason));
        let exit = runner_exit(&failed);
        let cut = exit.reason.unwrap();
        assert_eq!(cut, format!("{}…", "x".repeat(RUNNER_EXIT_REASON_MAX - 3)));
        assert_eq!(cut.len(), RUNNER_EXIT_REASON_MAX);
        assert_eq!(clip("ééé", 5), "éé");
        assert_eq!(clip("short", RUNNER_EXIT_REASON_MAX), "short");
        assert_eq!(clip("", 0), "");
    }
}
