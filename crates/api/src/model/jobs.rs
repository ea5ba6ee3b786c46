//! The job bodies: a job as the API shows it, pages of jobs and of a log, and the
//! runner's sensitive variables.

use super::*;
/// A job as the API shows it: the job, its transitions and what the control plane
/// recorded about it (never its token's hash).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The task ARN or Kubernetes Job name, once launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub task_arn: Option<TaskRef>,
    /// When the task was seen running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// Who asked for a cancel, while the stop is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_requested_by: Option<String>,
    /// When Sortie stopped the task for exceeding its timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_requested_at: Option<DateTime<Utc>>,
    /// The change summary the runner reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ChangeSummary>,
    /// The last change.
    pub updated_at: DateTime<Utc>,
    /// What the runner reported it could not upload (log, plan, summary, outputs); absent
    /// when everything arrived. The job's outcome does not depend on it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upload_problems: Vec<String>,
    /// The launch attempt (1 for the first launch; one more for each relaunch). Absent
    /// before the first launch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt: u32,
    /// How many times a Spot interruption requeued the job (at most 3).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spot_requeues: u32,
    /// A reviewed job's plan phase, once it ended (`task_arn`, `summary` and `attempt`
    /// above then describe the apply phase). Both phases write one log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_phase: Option<PhaseRecord>,
    /// The tool and exact version the runner reported it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_used: Option<ToolUsed>,
    /// The state (serial and lineage) the job ended with, as its runner reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_written: Option<sortie_core::state_version::StateStamp>,
    /// A reviewed job's apply phase: where its lines start in the job's one log
    /// (`GET /v1/jobs/{id}/logs?offset=<this>`); the plan phase's lines are before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_log_offset: Option<u64>,
    /// The agent holding the job (an `agent` runner's): its id, pool, last heartbeat and
    /// any stop ordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentHold>,
    /// The result of checking the job's plan against its environment's policy sets (the
    /// policy gate): status, when, and each set's deny and warn messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<sortie_core::policy::PolicyResult>,
    /// What the job waits for, while it is neither running nor ended: its kind and one line
    /// of text (`queued behind 01m8… (awaiting approval since 12:03 UTC)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// In a list of jobs only: the names of the job's inline files, whose contents
    /// `GET /v1/jobs/{id}` alone serves (`files` is then absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_names: Option<Vec<String>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl From<JobRecord> for JobView {
    fn from(r: JobRecord) -> Self {
        // `token_hash` is deliberately dropped: it is nobody's business.
        let mut job = r.job;
        // A sensitive variable is shown by name alone, never by its secret's ARN.
        job.request.sensitive_variables =
            sortie_core::sensitive::shown(&job.request.sensitive_variables);
        job.request.sensitive_secret = None;
        Self {
            job,
            task_arn: r.task,
            started_at: r.started_at,
            cancel_requested_by: r.cancel_requested_by,
            timeout_requested_at: r.timeout_requested_at,
            summary: r.summary,
            updated_at: r.updated_at,
            upload_problems: r.upload_problems,
            attempt: r.attempt,
            spot_requeues: r.spot_requeues,
            plan_phase: r.plan_phase,
            tool_used: r.tool_used,
            state_written: r.state_written,
            apply_log_offset: r.apply_log_offset,
            agent: r.agent,
            policy: r.policy,
            waiting: None,
            file_names: None,
        }
    }
}

impl JobView {
    /// The view a list of jobs serves: the job's inline files by name only
    /// ([`JobView::file_names`]), never their contents; the rest as `GET /v1/jobs/{id}`.
    pub fn listed(mut self) -> Self {
        let files = std::mem::take(&mut self.job.request.files);
        self.file_names = Some(files.into_keys().collect());
        self
    }
}

/// The answer of `GET /v1/jobs/{id}/sensitive-variables`: the values of the job's
/// sensitive variables, for its runner only (job token). It has no `Debug`: a value is
/// never formatted into a log.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct SensitiveVariables {
    /// Each value by its Terraform variable name; the runner sets `TF_VAR_<name>` in
    /// terraform's environment.
    #[schema(value_type = BTreeMap<String, String>, format = Password)]
    pub variables: BTreeMap<String, String>,
}

/// One page of an environment's jobs, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobListPage {
    /// The jobs, each with its change summary and, while it waits, why.
    pub jobs: Vec<JobView>,
    /// The cursor of the next page; null on the last page.
    pub next: Option<String>,
}

/// A page of a job's log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LogsPage {
    /// The offset read from.
    pub offset: u64,
    /// The offset to read from next.
    pub next_offset: u64,
    /// The log text from `offset` (invalid UTF-8 replaced).
    pub data: String,
    /// Whether more may come: the job has not ended, or the page was full.
    pub more: bool,
    /// While the job runs, and when the log has a live bucket (S3 Express One Zone): a
    /// presigned GET of the job's live object, the log's bytes not yet in this API's
    /// pages. A follower may read it directly between calls (`sortie logs -f` does); its
    /// body is a line `sortie-live 1 <start offset> <ended 0|1>` and then those bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveLogUrl>,
}

/// A presigned GET of a job's live object.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
pub struct LiveLogUrl {
    /// The URL, signature included.
    pub url: String,
    /// When it stops working: ask this API again for a fresh one (a directory bucket's URL
    /// ends with the session that signed it, after four to five minutes).
    pub expires_at: DateTime<Utc>,
}
