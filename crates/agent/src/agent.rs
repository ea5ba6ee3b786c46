//! The agent's loop: claim while fewer than `max_jobs` run, run each claimed job with the
//! [`Executor`], heartbeat it, obey a stop, report its exit; and drain on a signal.
//!
//! - **Claims** long-poll (`wait_seconds`). No job: claim again. A 401 (the credential may
//!   be rotated), a 404 (the pool is unknown to this credential), a 429, a 5xx or a
//!   transport failure: log and claim again after a backoff of 1, 2, 4, … 30 s.
//! - **Each job** runs in its own task, on a span carrying its `job_id`. A job that cannot
//!   be started is reported at once (`exit_code` none, the reason why). While it runs, it is
//!   heartbeaten every `heartbeat_seconds`: `stop` stops it and reports its exit with the
//!   stop's reason; `409` means the agent no longer holds it: its runner is killed and
//!   nothing is reported. Its exit report is retried on transport errors, 5xx and 401; a
//!   409 (already ended) is fine.
//! - **Draining** ([`Phase::Drain`], the first SIGTERM or SIGINT): the in-flight claim is
//!   abandoned and no other is made; running jobs go on (heartbeats too) for up to
//!   `drain_timeout`, then each is stopped and reported `handed_back`. [`Phase::HandBack`]
//!   (a second signal) hands them back at once. Then [`Agent::run`] returns.

use std::sync::Arc;
use std::time::Duration;

use sortie_core::protocol::agent::{AgentAction, AgentExit, Claim, ClaimRequest, HeartbeatRequest};
use sortie_core::JobId;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, Instant};
use tracing::Instrument;

use crate::api::{ExitReply, Heartbeat, PoolApi};
use crate::executor::{truncate_reason, Executor, RunHandle};
use crate::AgentError;

/// Where the agent is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Claiming and running jobs.
    Run,
    /// No more claims; running jobs finish, up to the drain timeout.
    Drain,
    /// No more claims; running jobs are stopped and handed back now.
    HandBack,
}

/// How long to wait after failures: `first`, doubled after each, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The delay after `delay`.
    pub fn next(&self, delay: Duration) -> Duration {
        delay.saturating_mul(2).min(self.max).max(self.first)
    }
}

/// What the loop needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    /// The agent's id.
    pub name: String,
    /// How many jobs it runs at once.
    pub max_jobs: u32,
    /// How long each claim waits, in seconds.
    pub wait_seconds: u32,
    /// How long a drain waits for running jobs.
    pub drain_timeout: Duration,
    /// The claim loop's backoff.
    pub backoff: Backoff,
    /// How many times an exit report is tried.
    pub exit_attempts: u32,
    /// The exit report's backoff.
    pub exit_backoff: Backoff,
    /// The least time between the starts of two claims that found no job.
    pub min_claim_interval: Duration,
    /// How long a handed-back job's runner has to end after its stop (SIGTERM, then
    /// SIGKILL 10 s later) before it is reported anyway.
    pub kill_grace: Duration,
}

impl AgentSettings {
    /// Settings with the default backoffs: claims 1 to 30 s; exit reports 5 tries, 1 to 8 s;
    /// a kill grace of 20 s; at least 1 s between two claims that found no job.
    pub fn new(name: &str, max_jobs: u32, wait_seconds: u32, drain_timeout: Duration) -> Self {
        Self {
            name: name.to_string(),
            max_jobs: max_jobs.max(1),
            wait_seconds,
            drain_timeout,
            backoff: Backoff::default(),
            exit_attempts: 5,
            exit_backoff: Backoff {
                first: Duration::from_secs(1),
                max: Duration::from_secs(8),
            },
            kill_grace: Duration::from_secs(20),
            min_claim_interval: Duration::from_secs(1),
        }
    }
}

struct Shared {
    settings: AgentSettings,
    api: Arc<dyn PoolApi>,
    executor: Arc<dyn Executor>,
}

/// The agent: one pool, one API, one executor.
pub struct Agent {
    shared: Arc<Shared>,
}

impl Agent {
    /// An agent with these settings, calling `api` and running jobs with `executor`.
    pub fn new(
        settings: AgentSettings,
        api: Arc<dyn PoolApi>,
        executor: Arc<dyn Executor>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                settings,
                api,
                executor,
            }),
        }
    }

    /// Runs until `phase` leaves [`Phase::Run`] (or its sender is dropped) and every job is
    /// finished or handed back.
    pub async fn run(&self, mut phase: watch::Receiver<Phase>) -> Result<(), AgentError> {
        let settings = &self.shared.settings;
        let (hand_back, hand_back_rx) = watch::channel(None::<String>);
        let mut jobs: JoinSet<()> = JoinSet::new();
        let mut delay = Duration::ZERO;
        let mut next_claim = Instant::now();
        let mut phase_open = true;
        while phase_open && *phase.borrow() == Phase::Run {
            while let Some(done) = jobs.try_join_next() {
                log_join(done);
            }
            let running = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
            if running >= settings.max_jobs {
                tokio::select! {
                    changed = phase.changed() => phase_open = changed.is_ok(),
                    Some(done) = jobs.join_next() => log_join(done),
                }
                continue;
            }
            if next_claim > Instant::now() {
                tokio::select! {
                    changed = phase.changed() => { phase_open = changed.is_ok(); continue; }
                    _ = sleep_until(next_claim) => {}
                }
            }
            let claimed_at = Instant::now();
            let request = ClaimRequest {
                agent: settings.name.clone(),
                running,
                wait_seconds: Some(settings.wait_seconds),
            };
            // A drain abandons the claim in flight: no job is taken after the signal.
            let answer = tokio::select! {
                changed = phase.changed() => { phase_open = changed.is_ok(); continue; }
                answer = self.shared.api.claim(&request) => answer,
            };
            match answer {
                Ok(Some(claim)) => {
                    delay = Duration::ZERO;
                    next_claim = Instant::now();
                    let span =
                        tracing::info_span!("job", job_id = %claim.job_id, attempt = claim.attempt);
                    let shared = Arc::clone(&self.shared);
                    let hand_back = hand_back_rx.clone();
                    jobs.spawn(run_job(shared, claim, hand_back).instrument(span));
                }
                Ok(None) => {
                    // An empty answer well before the wait is up (a proxy, a server that
                    // does not long-poll) must not make the agent spin.
                    delay = Duration::ZERO;
                    next_claim = claimed_at + settings.min_claim_interval;
                }
                Err(e) => {
                    delay = settings.backoff.next(delay);
                    next_claim = Instant::now() + delay;
                    match &e {
                        AgentError::Unauthorized(_) => {
                            tracing::error!(error = %e, retry_in_s = delay.as_secs_f32(), "Sortie refused the agent's credential; trying again (it may be rotated)")
                        }
                        AgentError::PoolNotFound(_) => {
                            tracing::error!(error = %e, retry_in_s = delay.as_secs_f32(), "the agent pool is unknown to this credential; trying again")
                        }
                        _ => {
                            tracing::warn!(error = %e, retry_in_s = delay.as_secs_f32(), "claim failed; trying again")
                        }
                    }
                }
            }
        }
        self.drain(&mut phase, phase_open, jobs, hand_back).await;
        Ok(())
    }

    async fn drain(
        &self,
        phase: &mut watch::Receiver<Phase>,
        mut phase_open: bool,
        mut jobs: JoinSet<()>,
        hand_back: watch::Sender<Option<String>>,
    ) {
        let timeout = self.shared.settings.drain_timeout;
        if !jobs.is_empty() {
            tracing::info!(
                running = jobs.len(),
                drain_timeout_s = timeout.as_secs(),
                "draining: no more claims; waiting for the running jobs"
            );
        }
        let deadline = Instant::now() + timeout;
        let mut why = None;
        while !jobs.is_empty() {
            if *phase.borrow() == Phase::HandBack {
                why = Some("the agent was told to stop at once".to_string());
                break;
            }
            tokio::select! {
                Some(done) = jobs.join_next() => log_join(done),
                _ = sleep_until(deadline) => {
                    why = Some(format!("the agent's drain timeout ({timeout:?}) passed"));
                    break;
                }
                changed = phase.changed(), if phase_open => phase_open = changed.is_ok(),
            }
        }
        if let Some(why) = why {
            if !jobs.is_empty() {
                tracing::warn!(running = jobs.len(), reason = %why, "handing the running jobs back");
                let _ = hand_back.send(Some(why));
            }
            while let Some(done) = jobs.join_next().await {
                log_join(done);
            }
        }
        tracing::info!("drained: no job is running");
    }
}

fn log_join(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "a job's task failed");
    }
}

/// What the heartbeats said.
#[derive(Debug)]
enum Beat {
    Stop(String),
    NotHeld,
}

/// How a job's run is ending.
#[derive(Debug)]
enum Ending {
    /// On its own.
    Exited,
    /// Stopped as Sortie asked, for this reason.
    Stopped(String),
    /// Handed back by a drain, for this reason.
    HandedBack(String),
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one claimed job to its exit report.
async fn run_job(
    shared: Arc<Shared>,
    claim: Claim,
    mut hand_back: watch::Receiver<Option<String>>,
) {
    let job_id = claim.job_id.clone();
    let attempt = claim.attempt;
    let period = Duration::from_secs(u64::from(claim.heartbeat_seconds.max(1)));
    tracing::info!("claimed a job");
    let started = match shared.executor.start(&claim).await {
        Ok(started) => started,
        Err(e) => {
            tracing::warn!(error = %e, "could not start the job's runner; reporting its exit");
            let report = exit_report(&shared, attempt, None, Some(e.to_string()), false);
            report_exit(&shared, &job_id, report).await;
            return;
        }
    };
    drop(claim);
    let handle = started.handle;
    let mut exited = started.exited;
    tracing::info!(task = %handle.task, "started the runner");

    let (beats_tx, mut beats) = mpsc::channel(4);
    let heartbeating = AbortOnDrop(tokio::spawn(
        heartbeats(
            Arc::clone(&shared),
            job_id.clone(),
            attempt,
            period,
            beats_tx,
        )
        .instrument(tracing::Span::current()),
    ));
    let mut ending = Ending::Exited;
    let mut kill_deadline: Option<Instant> = None;
    let mut hand_back_open = true;
    let exit = loop {
        tokio::select! {
            exit = &mut exited => break exit.ok(),
            Some(beat) = beats.recv() => match beat {
                Beat::Stop(reason) => {
                    if matches!(ending, Ending::Exited) {
                        tracing::info!(%reason, "Sortie asked to stop the job");
                        stop(&shared, &handle, &reason).await;
                        ending = Ending::Stopped(reason);
                    }
                }
                Beat::NotHeld => {
                    tracing::warn!("Sortie says this agent no longer holds the job: killing its runner, reporting nothing");
                    stop(&shared, &handle, "sortie: the job is no longer held by this agent").await;
                    shared.executor.finished(&handle).await;
                    return;
                }
            },
            changed = hand_back.changed(), if hand_back_open && kill_deadline.is_none() => {
                let why = hand_back.borrow().clone();
                match (changed, why) {
                    (Ok(()), Some(why)) => {
                        if matches!(ending, Ending::Exited) {
                            stop(&shared, &handle, &format!("sortie-agent: {why}")).await;
                            ending = Ending::HandedBack(why);
                        }
                        kill_deadline = Some(Instant::now() + shared.settings.kill_grace);
                    }
                    (Ok(()), None) => {}
                    (Err(_), _) => hand_back_open = false,
                }
            }
            _ = sleep_until(kill_deadline.unwrap_or_else(Instant::now)), if kill_deadline.is_some() => {
                tracing::warn!("the runner did not end within the kill grace; reporting it anyway");
                break None;
            }
        }
    };
    // The exit report is the last word about this claim.
    drop(heartbeating);
    let exit = exit.unwrap_or_default();
    let report = match ending {
        Ending::Exited => {
            tracing::info!(
                exit_code = exit.exit_code,
                reason = exit.reason.as_deref().unwrap_or(""),
                "the runner exited"
            );
            exit_report(&shared, attempt, exit.exit_code, exit.reason, false)
        }
        Ending::Stopped(reason) => {
            tracing::info!(exit_code = exit.exit_code, "the runner was stopped");
            exit_report(&shared, attempt, exit.exit_code, Some(reason), false)
        }
        Ending::HandedBack(why) => {
            tracing::info!(
                exit_code = exit.exit_code,
                "the runner was stopped; handing the job back"
            );
            exit_report(&shared, attempt, exit.exit_code, Some(why), true)
        }
    };
    report_exit(&shared, &job_id, report).await;
    shared.executor.finished(&handle).await;
}

fn exit_report(
    shared: &Shared,
    attempt: u32,
    exit_code: Option<i32>,
    reason: Option<String>,
    handed_back: bool,
) -> AgentExit {
    AgentExit {
        agent: shared.settings.name.clone(),
        attempt,
        exit_code,
        reason: reason.map(|r| truncate_reason(&r)),
        handed_back,
    }
}

async fn stop(shared: &Shared, handle: &RunHandle, reason: &str) {
    if let Err(e) = shared.executor.stop(handle, reason).await {
        tracing::error!(error = %e, "could not stop the runner");
    }
}

/// Heartbeats the job every `period` (the claim was the first), telling the job's task when
/// Sortie says stop, or that the job is no longer held (then it ends).
async fn heartbeats(
    shared: Arc<Shared>,
    job_id: JobId,
    attempt: u32,
    period: Duration,
    beats: mpsc::Sender<Beat>,
) {
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let request = HeartbeatRequest {
        agent: shared.settings.name.clone(),
        attempt,
    };
    loop {
        ticker.tick().await;
        match shared.api.heartbeat(&job_id, &request).await {
            Ok(Heartbeat::Answer(answer)) if answer.action == AgentAction::Stop => {
                let reason = answer
                    .reason
                    .unwrap_or_else(|| "sortie: stopped".to_string());
                if beats.send(Beat::Stop(reason)).await.is_err() {
                    return;
                }
            }
            Ok(Heartbeat::Answer(_)) => tracing::debug!("heartbeat: run"),
            Ok(Heartbeat::NotHeld) => {
                let _ = beats.send(Beat::NotHeld).await;
                return;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; the next one tries again"),
        }
    }
}

/// Reports the exit, trying again on transport errors, 5xx and 401.
async fn report_exit(shared: &Shared, job_id: &JobId, report: AgentExit) {
    let settings = &shared.settings;
    let attempts = settings.exit_attempts.max(1);
    let mut delay = Duration::ZERO;
    for attempt in 1..=attempts {
        match shared.api.exit(job_id, &report).await {
            Ok(ExitReply::Recorded(answer)) => {
                tracing::info!(state = ?answer.state, handed_back = report.handed_back, "reported the exit");
                return;
            }
            Ok(ExitReply::NotHeld) => {
                tracing::info!(
                    "the exit report found the job already ended or not held by this agent"
                );
                return;
            }
            Err(e) if e.is_retryable() && attempt < attempts => {
                delay = settings.exit_backoff.next(delay);
                tracing::warn!(error = %e, attempt, retry_in_s = delay.as_secs_f32(), "exit report failed; trying again");
                sleep(delay).await;
            }
            Err(e) => {
                tracing::error!(error = %e, attempt, "could not report the exit; Sortie's sweeper will end the job when its heartbeat stops");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_maximum() {
        let b = Backoff::default();
        let mut d = Duration::ZERO;
        let mut seen = vec![];
        for _ in 0..7 {
            d = b.next(d);
            seen.push(d.as_secs());
        }
        assert_eq!(seen, vec![1, 2, 4, 8, 16, 30, 30]);
    }
}
