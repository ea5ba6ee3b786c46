//! Shared by the agent's tests: jobs and claims, a fake pool API and a fake executor.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sortie_agent::api::{ExitReply, Heartbeat, PoolApi};
use sortie_agent::executor::{Executor, RunExit, RunHandle, Started};
use sortie_agent::AgentError;
use sortie_core::protocol::agent::{
    AgentAction, AgentExit, Claim, ClaimRequest, ExitAnswer, HeartbeatAnswer, HeartbeatRequest,
};
use sortie_core::{EnvPath, Job, JobId, JobRequest, JobState, RunnerId, RunnerSpec, TaskRef};
use tokio::sync::oneshot;

/// A pool id.
pub const POOL: &str = "apool-01jnx6v4k2m8q9r3s5t7w0y1za";
/// The job token every test claim carries.
pub const JOB_TOKEN: &str = "sortie-job-secret-token";
/// The API URL every test claim carries.
pub const API_URL: &str = "https://api.sortie.example";

/// A job of an `agent` runner; `extra` is added under `runner_configuration` (indented by
/// two spaces).
pub fn job(id: &str, extra: &str) -> Job {
    let mut job = Job::new(
        JobId::new(id),
        EnvPath::parse("acme/payments/prod").unwrap(),
        RunnerId::parse("acme/agents").unwrap(),
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".to_string(),
        Utc::now(),
    );
    let yaml = format!(
        "runner_configuration:\n  type: agent\n  pool: {POOL}\n{extra}state_storage_configuration: {{ type: s3, bucket: state, region: us-east-1 }}\n"
    );
    job.runner_spec = Some(RunnerSpec::parse(&yaml).unwrap());
    job
}

/// A claim of `job`, attempt 1.
pub fn claim_of(job: Job, heartbeat_seconds: u32) -> Claim {
    Claim {
        job_id: job.id.clone(),
        attempt: 1,
        job_token: JOB_TOKEN.to_string(),
        api_url: API_URL.to_string(),
        job,
        heartbeat_seconds,
    }
}

/// A claim of a fresh job `id` with no extra configuration.
pub fn claim(id: &str, heartbeat_seconds: u32) -> Claim {
    claim_of(job(id, ""), heartbeat_seconds)
}

/// Polls `check` every 10 ms until it holds, for at most `within`.
pub async fn eventually(what: &str, within: Duration, check: impl Fn() -> bool) {
    let start = tokio::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The pool API as a test scripts it.
#[derive(Default)]
pub struct FakeApi {
    /// Claims handed out in order; an empty queue answers none after `empty_wait`.
    pub claims: Mutex<VecDeque<Claim>>,
    /// Errors answered to the next claims, before any claim.
    pub claim_errors: Mutex<VecDeque<AgentError>>,
    /// Every claim request.
    pub claim_requests: Mutex<Vec<ClaimRequest>>,
    /// How long a claim waits when none is queued (default 20 ms).
    pub empty_wait: Mutex<Option<Duration>>,
    /// Heartbeat answers by job id (default: run).
    pub heartbeat_answers: Mutex<HashMap<JobId, Heartbeat>>,
    /// Every heartbeat.
    pub heartbeats: Mutex<Vec<(JobId, HeartbeatRequest)>>,
    /// Errors answered to the next exit reports.
    pub exit_errors: Mutex<VecDeque<AgentError>>,
    /// Every exit report received, errors answered included.
    pub exit_calls: Mutex<Vec<(JobId, AgentExit)>>,
    /// The exit reports recorded.
    pub exits: Mutex<Vec<(JobId, AgentExit)>>,
}

impl FakeApi {
    /// Queues a claim.
    pub fn offer(&self, claim: Claim) {
        self.claims.lock().unwrap().push_back(claim);
    }

    /// Makes the heartbeat of `job` answer `answer`.
    pub fn answer_heartbeat(&self, job: &str, answer: Heartbeat) {
        self.heartbeat_answers
            .lock()
            .unwrap()
            .insert(JobId::new(job), answer);
    }

    /// A stop answer.
    pub fn stop(reason: &str) -> Heartbeat {
        Heartbeat::Answer(HeartbeatAnswer {
            action: AgentAction::Stop,
            reason: Some(reason.to_string()),
        })
    }

    /// The recorded exit reports.
    pub fn exits(&self) -> Vec<(JobId, AgentExit)> {
        self.exits.lock().unwrap().clone()
    }

    /// How many heartbeats `job` got.
    pub fn heartbeats_of(&self, job: &str) -> usize {
        self.heartbeats
            .lock()
            .unwrap()
            .iter()
            .filter(|(j, _)| j.as_str() == job)
            .count()
    }
}

#[async_trait]
impl PoolApi for FakeApi {
    async fn claim(&self, request: &ClaimRequest) -> Result<Option<Claim>, AgentError> {
        self.claim_requests.lock().unwrap().push(request.clone());
        if let Some(e) = self.claim_errors.lock().unwrap().pop_front() {
            return Err(e);
        }
        let next = self.claims.lock().unwrap().pop_front();
        if next.is_none() {
            let wait = self
                .empty_wait
                .lock()
                .unwrap()
                .unwrap_or(Duration::from_millis(20));
            tokio::time::sleep(wait).await;
        }
        Ok(next)
    }

    async fn heartbeat(
        &self,
        job: &JobId,
        request: &HeartbeatRequest,
    ) -> Result<Heartbeat, AgentError> {
        self.heartbeats
            .lock()
            .unwrap()
            .push((job.clone(), request.clone()));
        Ok(self
            .heartbeat_answers
            .lock()
            .unwrap()
            .get(job)
            .cloned()
            .unwrap_or(Heartbeat::Answer(HeartbeatAnswer {
                action: AgentAction::Run,
                reason: None,
            })))
    }

    async fn exit(&self, job: &JobId, report: &AgentExit) -> Result<ExitReply, AgentError> {
        self.exit_calls
            .lock()
            .unwrap()
            .push((job.clone(), report.clone()));
        if let Some(e) = self.exit_errors.lock().unwrap().pop_front() {
            return Err(e);
        }
        self.exits
            .lock()
            .unwrap()
            .push((job.clone(), report.clone()));
        Ok(ExitReply::Recorded(ExitAnswer {
            state: JobState::Failed,
        }))
    }
}

/// An executor whose runs end when the test says, or when stopped (exit 143, as a
/// SIGTERM'd runner).
#[derive(Default)]
pub struct FakeExecutor {
    runs: Mutex<HashMap<String, oneshot::Sender<RunExit>>>,
    /// Jobs started, in order.
    pub started: Mutex<Vec<JobId>>,
    /// Stops: (job id, reason).
    pub stops: Mutex<Vec<(String, String)>>,
    /// Runs finished (reported or forgotten).
    pub finished: Mutex<Vec<String>>,
    /// The next start fails with this.
    pub fail_start: Mutex<Option<String>>,
    /// When true, a stop does not end the run (a runner that ignores its signals).
    pub ignore_stops: Mutex<bool>,
}

impl FakeExecutor {
    /// Ends the run of `job` with `exit`.
    pub fn end(&self, job: &str, exit: RunExit) {
        let sender = self
            .runs
            .lock()
            .unwrap()
            .remove(job)
            .unwrap_or_else(|| panic!("no run of {job}"));
        let _ = sender.send(exit);
    }

    /// The jobs started, as strings.
    pub fn started(&self) -> Vec<String> {
        self.started
            .lock()
            .unwrap()
            .iter()
            .map(|j| j.to_string())
            .collect()
    }

    /// The stops.
    pub fn stops(&self) -> Vec<(String, String)> {
        self.stops.lock().unwrap().clone()
    }
}

#[async_trait]
impl Executor for FakeExecutor {
    async fn start(&self, claim: &Claim) -> Result<Started, AgentError> {
        if let Some(e) = self.fail_start.lock().unwrap().take() {
            return Err(AgentError::Launch(e));
        }
        assert_eq!(claim.job_token, JOB_TOKEN);
        let (sender, exited) = oneshot::channel();
        self.runs
            .lock()
            .unwrap()
            .insert(claim.job_id.to_string(), sender);
        self.started.lock().unwrap().push(claim.job_id.clone());
        Ok(Started {
            handle: RunHandle {
                job: claim.job.clone(),
                task: TaskRef::new(claim.job_id.to_string()),
            },
            exited,
        })
    }

    async fn stop(&self, run: &RunHandle, reason: &str) -> Result<(), AgentError> {
        self.stops
            .lock()
            .unwrap()
            .push((run.task.to_string(), reason.to_string()));
        if !*self.ignore_stops.lock().unwrap() {
            if let Some(sender) = self.runs.lock().unwrap().remove(run.task.as_str()) {
                let _ = sender.send(RunExit {
                    exit_code: Some(143),
                    reason: None,
                });
            }
        }
        Ok(())
    }

    async fn finished(&self, run: &RunHandle) {
        self.finished.lock().unwrap().push(run.task.to_string());
    }
}

/// Both fakes, shared.
pub fn fakes() -> (Arc<FakeApi>, Arc<FakeExecutor>) {
    (
        Arc::new(FakeApi::default()),
        Arc::new(FakeExecutor::default()),
    )
}
