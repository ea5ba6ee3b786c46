//! The pull protocol's server side: an agent claims an offered job, heartbeats it, and
//! reports its runner's exit. Every move is one conditional write, so two agents never hold
//! one job, and a late heartbeat or report from an agent that lost its job changes nothing.

use std::time::Duration as StdDuration;

use chrono::Utc;
use sortie_core::agent_pool::{agent_task, AgentHold};
use sortie_core::outcome::{CANCELED_BY, TIMED_OUT_AFTER};
use sortie_core::protocol::agent::{
    AgentAction, AgentExit, Claim, ClaimRequest, HeartbeatAnswer, HeartbeatRequest,
    MAX_CLAIM_WAIT_SECONDS,
};
use sortie_core::{JobId, JobState, RunnerConfiguration};
use sortie_store::{JobRecord, JobUpdate, StoreError};
use tracing::{info, warn};

use crate::end::{EndCause, EndReport};
use crate::JobService;

/// How often a waiting claim looks at the pool's offers again.
pub const CLAIM_POLL: StdDuration = StdDuration::from_millis(250);
/// At most this many offers are looked at per look.
const OFFERS_PER_LOOK: u32 = 25;

/// Why a heartbeat or an exit report was refused.
#[derive(Debug, thiserror::Error)]
pub enum AgentRefusal {
    /// The agent does not hold the job (another claim does, or it ended or was requeued).
    #[error("the job is {state} and not held by this claim")]
    NotHeld {
        /// The job's state now.
        state: JobState,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobService {
    /// Waits up to `request.wait_seconds` (at most [`MAX_CLAIM_WAIT_SECONDS`]) for a job
    /// offered to `pool` that the agent may run, and claims the oldest: one conditional write
    /// `dispatching → running` that requires the offer, with a new job token whose hash is
    /// stored. `None` when nothing came in time. The claim tells the agent to heartbeat every
    /// `heartbeat_seconds`.
    pub async fn claim(
        &self,
        pool: &str,
        request: &ClaimRequest,
        api_url: &str,
        heartbeat_seconds: u32,
    ) -> Result<Option<Claim>, StoreError> {
        let wait = request
            .wait_seconds
            .unwrap_or(MAX_CLAIM_WAIT_SECONDS)
            .min(MAX_CLAIM_WAIT_SECONDS);
        let deadline = tokio::time::Instant::now() + StdDuration::from_secs(u64::from(wait));
        loop {
            if let Some(claim) = self
                .claim_once(pool, request, api_url, heartbeat_seconds)
                .await?
            {
                return Ok(Some(claim));
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(CLAIM_POLL.min(deadline - now)).await;
        }
    }

    async fn claim_once(
        &self,
        pool: &str,
        request: &ClaimRequest,
        api_url: &str,
        heartbeat_seconds: u32,
    ) -> Result<Option<Claim>, StoreError> {
        let offers = self.store.offered_jobs(pool, OFFERS_PER_LOOK).await?;
        for u in &offers.unreadable {
            warn!(key = %u.key, message = %u.message, "an offered job is unreadable; the sweeper fails it");
        }
        for record in offers {
            let max = match record
                .job
                .runner_spec
                .as_ref()
                .map(|s| &s.runner_configuration)
            {
                Some(RunnerConfiguration::Agent(c)) => c.max_concurrent_jobs,
                _ => continue,
            };
            if request.running >= max {
                continue;
            }
            let now = Utc::now();
            let token = crate::engine::new_token();
            let task = agent_task(pool, &request.agent, record.attempt);
            let update = JobUpdate {
                claim_from: Some(pool.to_string()),
                task: Some(task.clone()),
                token_hash: Some(sortie_core::tokens::sha256_hex(token.as_bytes())),
                started_at: Some(now),
                agent: Some(AgentHold {
                    pool: pool.to_string(),
                    agent: request.agent.clone(),
                    claimed_at: now,
                    heartbeat_at: now,
                    stop: None,
                }),
                ..Default::default()
            };
            match self
                .store
                .transition_job(
                    &record.job.id,
                    JobState::Dispatching,
                    JobState::Running,
                    now,
                    &format!("claimed by agent {} of pool {pool}", request.agent),
                    update,
                )
                .await
            {
                Ok(claimed) => {
                    info!(job_id = %claimed.job.id, agent = %request.agent, %pool, attempt = claimed.attempt, "claimed by an agent");
                    return Ok(Some(Claim {
                        job_id: claimed.job.id.clone(),
                        attempt: claimed.attempt,
                        job_token: token,
                        api_url: api_url.to_string(),
                        job: claimed.job,
                        heartbeat_seconds,
                    }));
                }
                // Another agent was first, or a cancel came: the next offer.
                Err(StoreError::StateConflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Records an agent's heartbeat for a job of `pool` it holds, and answers with what to do:
    /// run on, or stop (a cancel, or the timeout enforced from outside).
    pub async fn heartbeat(
        &self,
        pool: &str,
        id: &JobId,
        beat: &HeartbeatRequest,
    ) -> Result<HeartbeatAnswer, AgentRefusal> {
        let task = agent_task(pool, &beat.agent, beat.attempt);
        let record = match self.store.heartbeat_job(id, &task, Utc::now()).await {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                // Its state is told only to the pool whose job it is.
                let record = self.store.get_job(id).await?;
                if !is_pools(&record, pool) {
                    return Err(missing(id));
                }
                return Err(AgentRefusal::NotHeld { state: actual });
            }
            Err(e) => return Err(e.into()),
        };
        Ok(stop_order(&record).map_or(
            HeartbeatAnswer {
                action: AgentAction::Run,
                reason: None,
            },
            |reason| HeartbeatAnswer {
                action: AgentAction::Stop,
                reason: Some(reason),
            },
        ))
    }

    /// An agent's report that the runner of a job of `pool` it holds exited (or that it hands
    /// the job back): the job ends ([`EndCause::Exited`]: a cancel or timeout Sortie asked for
    /// names the end, and a handed-back plan is requeued), then a drift check's drift is
    /// answered ([`JobService::remediate_drift`]). Whichever comes first,
    /// this or the pilot's own final callback, wins; the second changes nothing.
    pub async fn agent_exited(
        &self,
        pool: &str,
        id: &JobId,
        report: &AgentExit,
    ) -> Result<EndReport, AgentRefusal> {
        let record = self.store.get_job(id).await?;
        if !is_pools(&record, pool) {
            return Err(missing(id));
        }
        let task = agent_task(pool, &report.agent, report.attempt);
        if record.task.as_ref() != Some(&task) {
            return Err(AgentRefusal::NotHeld {
                state: record.job.state,
            });
        }
        if record.job.state.is_terminal() {
            return Ok(EndReport::AlreadyEnded(record));
        }
        if record.job.state != JobState::Running {
            return Err(AgentRefusal::NotHeld {
                state: record.job.state,
            });
        }
        let ended = self
            .end(&record, EndCause::Exited(report.to_stop()))
            .await?;
        if let Some(r) = ended.ended() {
            self.remediate_drift(r).await;
        }
        Ok(ended)
    }
}

/// True when the job is `pool`'s business ([`sortie_core::agent_pool::job_of_pool`]).
fn is_pools(record: &JobRecord, pool: &str) -> bool {
    sortie_core::agent_pool::job_of_pool(
        &record.job,
        record.offered_to.as_deref(),
        record.agent.as_ref(),
        pool,
    )
}

/// The refusal for a job that does not exist, or is another pool's: the store's own
/// `NotFound`, so that both are answered alike.
fn missing(id: &JobId) -> AgentRefusal {
    AgentRefusal::Store(StoreError::NotFound {
        kind: "job",
        id: id.to_string(),
    })
}

/// The stop a claimed job's agent must carry out, if any: a cancel, the stop Sortie
/// ordered, or the timeout.
fn stop_order(record: &JobRecord) -> Option<String> {
    if let Some(by) = &record.cancel_requested_by {
        return Some(format!("{CANCELED_BY}{by}"));
    }
    if let Some(stop) = record.agent.as_ref().and_then(|a| a.stop.as_ref()) {
        return Some(stop.reason.clone());
    }
    record.timeout_requested_at.map(|_| {
        let seconds = record
            .job
            .runner_spec
            .as_ref()
            .map(|s| s.runner_configuration.timeout_seconds())
            .unwrap_or_default();
        format!("{TIMED_OUT_AFTER}{seconds}s")
    })
}
