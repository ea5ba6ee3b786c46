//! State history: an environment's state versions with the job that wrote each, one
//! version redacted, and a restore (a job that writes a version back, then plans).
//!
//! The versions are read through [`StateHistory`] (S3 object versions, in the runner's
//! account); the rules (facts, redaction, the writer match) are
//! [`sortie_core::state_version`]'s. Only `s3` state storage has a history.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sortie_core::state_version::{self, JobWindow, MatchedBy, StateRestore, RESTORE_REASON_MAX};
use sortie_core::{EnvPath, Environment, JobId, Operation, Runner};
use sortie_launch::state_history::{StateAt, StateHistory, StateObjectVersion};
use sortie_launch::LaunchError;
use sortie_store::{StoreError, Submitted};

use crate::submit::{JobOrder, SubmitError};
use crate::JobService;

/// How many pages of an environment's jobs are read to find the writers of one page of
/// versions (each [`JOBS_PAGE`] jobs).
const JOB_PAGES: usize = 5;
/// Jobs per page read for the writer match.
const JOBS_PAGE: u32 = 100;

/// One state version, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct StateVersionInfo {
    /// The S3 object version.
    pub object: StateObjectVersion,
    /// The state's serial, lineage and Terraform version (empty when unreadable).
    pub facts: state_version::StateFacts,
    /// The job that wrote it (`None`: written outside Sortie, or by a job older than the
    /// jobs read).
    pub job_id: Option<JobId>,
    /// How the job was found: by the serial and lineage it recorded ending with, or by
    /// time alone.
    pub matched_by: MatchedBy,
}

/// One page of state versions, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct StateVersionList {
    /// The versions.
    pub versions: Vec<StateVersionInfo>,
    /// The cursor of the next page.
    pub next: Option<String>,
}

/// Why a state history request was refused.
#[derive(Debug, thiserror::Error)]
pub enum HistoryRefusal {
    /// The environment's runner keeps its state somewhere without versions.
    #[error("environment `{environment}` keeps its state in `{storage}` state storage, which has no history: only `s3` state storage keeps state versions")]
    NoHistory {
        /// The environment.
        environment: EnvPath,
        /// Its storage type.
        storage: &'static str,
    },
    /// No such version of the environment's state.
    #[error("the state of environment `{environment}` has no version `{version}`")]
    NoSuchVersion {
        /// The environment.
        environment: EnvPath,
        /// The version asked for.
        version: String,
    },
    /// The version is too large to read here.
    #[error("state version `{0}` is larger than {max} bytes", max = state_version::STATE_VERSION_MAX_BYTES)]
    TooLarge(String),
    /// The version is not a JSON state.
    #[error("state version `{0}` is not a JSON state file")]
    Unreadable(String),
    /// A field of the request is wrong.
    #[error("{field}: {problem}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// The problem.
        problem: String,
    },
    /// A restore needs a configuration to plan with: the environment's latest apply's.
    #[error("environment `{0}` has no successful apply to take the configuration of a restore's plan from")]
    NoConfiguration(EnvPath),
    /// Reading the state bucket failed.
    #[error("reading the state bucket failed: {0}")]
    Bucket(#[from] LaunchError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The restore's job was not submitted.
    #[error(transparent)]
    Submit(#[from] SubmitError),
}

impl JobService {
    /// The environment and its runner, with the runner's `s3` storage checked.
    async fn with_history(&self, path: &EnvPath) -> Result<(Environment, Runner), HistoryRefusal> {
        let env = self.store.get_environment(path).await?.item.environment;
        let runner = self.store.get_runner(&env.runner.runner_id).await?.item;
        let storage = &runner.spec.state_storage_configuration;
        if storage.type_name() != "s3" {
            return Err(HistoryRefusal::NoHistory {
                environment: path.clone(),
                storage: storage.type_name(),
            });
        }
        Ok((env, runner))
    }

    /// One page of environment `path`'s state versions, newest first, each with its serial,
    /// lineage and size, and the job that wrote it.
    pub async fn state_versions(
        &self,
        history: &dyn StateHistory,
        path: &EnvPath,
        after: Option<&str>,
        limit: u32,
    ) -> Result<StateVersionList, HistoryRefusal> {
        let (env, runner) = self.with_history(path).await?;
        let runner_id = runner.id.to_string();
        let at = StateAt {
            environment: path,
            runner_id: &runner_id,
            runner: &runner.spec,
        };
        let page = history.list(at, after, limit).await?;
        let oldest = page.versions.last().map(|v| v.last_modified);
        let windows = self.writer_windows(&env.path, oldest).await?;
        let mut read = Vec::with_capacity(page.versions.len());
        for object in page.versions {
            let facts = match history.get(at, &object.version_id).await? {
                Some(bytes) if bytes.len() <= state_version::STATE_VERSION_MAX_BYTES => {
                    serde_json::from_slice::<Value>(&bytes)
                        .ok()
                        .and_then(|v| state_version::facts(&v))
                        .unwrap_or_default()
                }
                _ => Default::default(),
            };
            read.push((object, facts));
        }
        let stamped: Vec<_> = read
            .iter()
            .map(|(object, facts)| (facts, object.last_modified))
            .collect();
        let writers = state_version::match_writers(&stamped, &windows);
        let versions = read
            .into_iter()
            .zip(writers)
            .map(|((object, facts), (job_id, matched_by))| StateVersionInfo {
                object,
                facts,
                job_id,
                matched_by,
            })
            .collect();
        Ok(StateVersionList {
            versions,
            next: page.next,
        })
    }

    /// One state version of environment `path`, every sensitive value redacted.
    pub async fn state_version(
        &self,
        history: &dyn StateHistory,
        path: &EnvPath,
        version: &str,
    ) -> Result<Value, HistoryRefusal> {
        if let Some(problem) = state_version::version_id_problem(version) {
            return Err(HistoryRefusal::Invalid {
                field: "version",
                problem,
            });
        }
        let (_, runner) = self.with_history(path).await?;
        let runner_id = runner.id.to_string();
        let at = StateAt {
            environment: path,
            runner_id: &runner_id,
            runner: &runner.spec,
        };
        let bytes =
            history
                .get(at, version)
                .await?
                .ok_or_else(|| HistoryRefusal::NoSuchVersion {
                    environment: path.clone(),
                    version: version.to_string(),
                })?;
        if bytes.len() > state_version::STATE_VERSION_MAX_BYTES {
            return Err(HistoryRefusal::TooLarge(version.to_string()));
        }
        let state: Value = serde_json::from_slice(&bytes)
            .map_err(|_| HistoryRefusal::Unreadable(version.to_string()))?;
        Ok(state_version::redact(&state))
    }

    /// Submits a restore of environment `path` to state `version` for `by`, because
    /// `reason`: a job (queued behind the environment's lock like any other) that writes the
    /// version back as the current state, then plans with the environment's latest apply's
    /// configuration, so its plan shows what the restore changed.
    pub async fn restore_state(
        &self,
        history: &dyn StateHistory,
        path: &EnvPath,
        version: &str,
        reason: &str,
        by: &str,
    ) -> Result<Submitted, HistoryRefusal> {
        if let Some(problem) = state_version::version_id_problem(version) {
            return Err(HistoryRefusal::Invalid {
                field: "version",
                problem,
            });
        }
        if sortie_core::problems::is_blank(reason) || reason.len() > RESTORE_REASON_MAX {
            return Err(HistoryRefusal::Invalid {
                field: "reason",
                problem: format!("is required: 1 to {RESTORE_REASON_MAX} bytes saying why"),
            });
        }
        let (env, runner) = self.with_history(path).await?;
        let runner_id = runner.id.to_string();
        let at = StateAt {
            environment: path,
            runner_id: &runner_id,
            runner: &runner.spec,
        };
        // The version must exist now (a later lifecycle rule may still expire it).
        if history.get(at, version).await?.is_none() {
            return Err(HistoryRefusal::NoSuchVersion {
                environment: path.clone(),
                version: version.to_string(),
            });
        }
        let record = self.store.get_environment(path).await?.item;
        let last = record
            .last_apply
            .ok_or_else(|| HistoryRefusal::NoConfiguration(path.clone()))?;
        let template = self.store.get_job(&last.job_id).await?;
        let mut order = JobOrder::again(&template.job.request, Operation::Plan, by, Utc::now());
        order.restore = Some(StateRestore {
            version_id: version.to_string(),
            reason: reason.to_string(),
        });
        Ok(self.submit_for(&env, order).await?)
    }

    /// The windows of the environment's state-writing jobs (applies, destroys, restores),
    /// newest first, reading back until a job older than `oldest` (bounded).
    async fn writer_windows(
        &self,
        env: &EnvPath,
        oldest: Option<DateTime<Utc>>,
    ) -> Result<Vec<JobWindow>, StoreError> {
        let mut windows = vec![];
        let Some(oldest) = oldest else {
            return Ok(windows);
        };
        let mut cursor: Option<String> = None;
        for _ in 0..JOB_PAGES {
            let page = self
                .store
                .list_jobs(env, JOBS_PAGE, cursor.as_deref())
                .await?;
            let mut older = false;
            for r in &page.jobs {
                let job = &r.job;
                let created = job
                    .transitions
                    .first()
                    .map(|t| t.at)
                    .unwrap_or(r.updated_at);
                older |= created < oldest;
                let writes = job.restore.is_some()
                    || (!job.drift_check
                        && matches!(job.request.operation, Operation::Apply | Operation::Destroy));
                if writes {
                    windows.push(JobWindow {
                        id: job.id.clone(),
                        from: r.started_at.unwrap_or(created),
                        until: job
                            .state
                            .is_terminal()
                            .then(|| job.transitions.last().map(|t| t.at))
                            .flatten(),
                        wrote: r.state_written.clone(),
                    });
                }
            }
            cursor = page.next;
            if older || cursor.is_none() {
                break;
            }
        }
        Ok(windows)
    }
}
