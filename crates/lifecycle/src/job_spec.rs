//! The job spec the pilot runs: what the job asks, what its runner snapshot says
//! (its state key, its container's secret names, its identity block), and for the apply
//! phase of a reviewed job the saved plan and where the log goes on. Assembled here; the
//! API adds what its other parts answer (a pull request's source token, a restore's state
//! version URL).

use std::time::Duration;

use sortie_core::protocol::pilot::{JobSpec, SourceAccess};
use sortie_core::{JobPhase, RunnerConfiguration, StateStorageConfiguration};
use sortie_store::{JobRecord, JobUpdate, StoreError};

use crate::{JobArtifacts, JobService, Logs};

/// What the spec takes from outside the job service.
#[derive(Debug, Clone, Default)]
pub struct SpecParts {
    /// A pull request's commit: a token that reads only its repository.
    pub source_access: Option<SourceAccess>,
    /// A restore's presigned GET of its state version.
    pub restore_state_url: Option<String>,
    /// How long the apply phase's link to its saved plan works.
    pub saved_plan_ttl: Duration,
}

/// Why there is no spec to give.
#[derive(Debug, thiserror::Error)]
pub enum SpecRefusal {
    /// The job carries no runner snapshot.
    #[error("the job has no runner configuration")]
    RunnerMissing,
    /// The apply phase's saved plan cannot be read; the problem in words.
    #[error("{0}")]
    NoSavedPlan(String),
    /// The store or the bucket failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobService {
    /// The spec of `record`'s job for its pilot. For the apply phase of a reviewed job the
    /// saved plan's URL and where the first phase's log ended (recorded on the job by the
    /// first spec fetch of that phase, so the job view says where each phase's lines are).
    pub async fn spec_for(
        &self,
        record: &JobRecord,
        artifacts: &JobArtifacts,
        logs: &Logs,
        parts: SpecParts,
    ) -> Result<JobSpec, SpecRefusal> {
        let job = &record.job;
        let runner = job.runner_spec.as_ref().ok_or(SpecRefusal::RunnerMissing)?;
        let state_key = match &runner.state_storage_configuration {
            StateStorageConfiguration::S3(s3) => Some(s3.state_key(&job.environment)),
            _ => None,
        };
        let mut state_storage = runner.state_storage_configuration.clone();
        let mut report_exit = false;
        if let RunnerConfiguration::Eks(eks) = &runner.runner_configuration {
            // No task event comes from Kubernetes: the pilot reports its own exit.
            report_exit = true;
            // `kubernetes` state lives in the runner's namespace unless the file names one.
            if let StateStorageConfiguration::Kubernetes(k) = &mut state_storage {
                k.namespace.get_or_insert_with(|| eks.job.namespace.clone());
            }
        }
        let phase = job.phase();
        let (saved_plan_url, log_offset) = if phase == Some(JobPhase::Apply) {
            let url = artifacts
                .saved_plan_url(&job.id, parts.saved_plan_ttl)
                .await
                .map_err(SpecRefusal::NoSavedPlan)?;
            let offset = logs.end(&job.id).await?;
            if record.apply_log_offset.is_none() {
                self.mark(
                    &job.id,
                    JobUpdate {
                        apply_log_offset: Some(offset),
                        ..Default::default()
                    },
                )
                .await?;
            }
            (Some(url), offset)
        } else {
            (None, 0)
        };
        Ok(JobSpec {
            job_id: job.id.clone(),
            environment: job.environment.clone(),
            operation: job.request.operation,
            source: job.request.source.clone(),
            source_access: parts.source_access,
            speculative: job.speculative,
            variables: job.request.variables.clone(),
            files: job.request.files.clone(),
            secret_refs: job.request.secret_refs.clone(),
            sensitive_variables: job.request.sensitive_variables.keys().cloned().collect(),
            // Names only, from the runner's snapshot: the pilot scrubs their values.
            runner_secret_env: runner.runner_configuration.secret_env_names(),
            state_storage,
            state_key,
            report_exit,
            phase,
            saved_plan_url,
            restore_state_url: parts.restore_state_url,
            detailed_exitcode: job.drift_check,
            tool: job.tool,
            version: job.tool_version.clone(),
            log_offset,
            // The runner's identity block. Given even when this deployment cannot sign (the
            // pilot's token request then fails the job): never a silent fall back to the
            // runner's own credentials.
            identity: runner.identity.clone(),
        })
    }
}
