//! The pull protocol's wire types: what an agent (`sortie-agent`) and the API send each
//! other to claim a job, heartbeat it and report its exit. The pools, the agents and
//! what a heartbeat record means are domain, in [`crate::agent_pool`].

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::job::{Job, JobState};
use crate::outcome::TaskStop;
use crate::outcome::AGENT_HANDED_BACK;

/// The longest a claim waits for a job: within API Gateway's 30-second integration timeout.
pub const MAX_CLAIM_WAIT_SECONDS: u32 = 20;
/// How often an agent heartbeats each job it holds.
pub const HEARTBEAT_SECONDS: u32 = 10;

/// `POST /v1/agent-pools/{id}/claims`: an agent asks for one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The agent's id (its own choice, stable for its life; see [`crate::agent_pool::agent_id_problem`]).
    pub agent: String,
    /// How many jobs it runs now: a job is handed out only while this is below its runner's
    /// `max_concurrent_jobs`.
    #[serde(default)]
    pub running: u32,
    /// How long to wait for a job, 0 to [`MAX_CLAIM_WAIT_SECONDS`] (default: the most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
}

/// A claimed job: everything an agent needs to run `sortie-pilot` for it. Its `Debug`
/// never shows the job token.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Claim {
    /// The job.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub job_id: JobId,
    /// The launch attempt this claim is (sent back in heartbeats and the exit report).
    pub attempt: u32,
    /// The job token: `SORTIE_JOB_TOKEN` for the pilot. Scoped to this job and this claim;
    /// shown only here.
    pub job_token: String,
    /// The API URL the pilot calls (`SORTIE_API_URL`).
    pub api_url: String,
    /// The job, with its runner snapshot (its `agent` configuration: env, timeout,
    /// Kubernetes knobs).
    pub job: Job,
    /// How often to heartbeat, in seconds.
    pub heartbeat_seconds: u32,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("job_id", &self.job_id)
            .field("attempt", &self.attempt)
            .field("job_token", &"(not shown)")
            .field("api_url", &self.api_url)
            .field("heartbeat_seconds", &self.heartbeat_seconds)
            .finish_non_exhaustive()
    }
}

/// `POST /v1/agent-pools/{id}/jobs/{job}/heartbeat` and `.../exit` name the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The agent's id.
    pub agent: String,
    /// The claim's attempt.
    pub attempt: u32,
}

/// What the agent must do with a job it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AgentAction {
    /// Keep running it.
    Run,
    /// Stop it (kill its process group, or delete its Kubernetes Job) and report the exit.
    Stop,
}

/// The heartbeat's answer: run on, or stop (a cancel or the timeout, enforced from outside).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatAnswer {
    /// Run or stop.
    pub action: AgentAction,
    /// Why to stop (`sortie: canceled by …`, `sortie: timed out after …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST /v1/agent-pools/{id}/jobs/{job}/exit`: the pilot exited, or the agent hands the
/// job back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = ExitReport))]
#[serde(deny_unknown_fields)]
pub struct AgentExit {
    /// The agent's id.
    pub agent: String,
    /// The claim's attempt.
    pub attempt: u32,
    /// The pilot's exit code; absent when it was killed by a signal or never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The pilot's last `sortie-pilot: …` line, or why it could not run (at most 1 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// True when the agent gives the job back unfinished (a drain that could not wait): a
    /// plan runs again on another agent; an apply or destroy fails, never re-run blindly.
    #[serde(default)]
    pub handed_back: bool,
}

/// The longest reason an [`AgentExit`] may carry.
pub const EXIT_REASON_MAX: usize = 1024;

impl AgentExit {
    /// The task stop this report stands for.
    pub fn to_stop(&self) -> TaskStop {
        if self.handed_back {
            return TaskStop {
                stop_code: Some(AGENT_HANDED_BACK.into()),
                stopped_reason: Some(format!(
                    "agent {} handed the job back{}",
                    self.agent,
                    self.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )),
                exit_code: self.exit_code,
                container_reason: None,
            };
        }
        TaskStop {
            stop_code: Some("EssentialContainerExited".into()),
            stopped_reason: Some(format!("agent {} reported the runner's exit", self.agent)),
            exit_code: self.exit_code,
            container_reason: self.reason.clone(),
        }
    }
}

/// The answer to an exit report: the job's state after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExitAnswer {
    /// The job's state now.
    pub state: JobState,
}
