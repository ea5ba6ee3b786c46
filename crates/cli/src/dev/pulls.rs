//! Pull-request work in `sortie dev`: webhook deliveries and job ends queue their work in
//! memory, and one worker hands each piece to the pull-request service, as the queue's
//! handler does on AWS; a piece the host failed is tried again later, a bounded number of
//! times. A reconcile of every connected organisation is queued each period, as AWS's
//! schedule does.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie_core::vcs::work::PullWork;
use sortie_lifecycle::pull_requests::{PullError, PullRequests};
use sortie_store::MemoryPullQueue;

/// How often the worker looks for new work.
const POLL: Duration = Duration::from_millis(100);

/// A piece of work is tried at most this many times (SQS's redrive to the DLQ on AWS).
pub(super) const TRIES: u32 = 8;

/// The wait before try `n` (1-based): 1 s, 2 s, 4 s, … at most 60 s, or what the host
/// asked for.
fn backoff(tries: u32, error: &PullError) -> Duration {
    let asked = match error {
        PullError::Host(sortie_lifecycle::pull_requests::HostError::Unavailable {
            retry_after_seconds,
            ..
        }) => Some(Duration::from_secs(*retry_after_seconds)),
        _ => None,
    };
    let doubling = Duration::from_secs(1u64 << tries.min(6)).min(Duration::from_secs(60));
    asked.unwrap_or(doubling).min(Duration::from_secs(60))
}

/// Queues a reconcile of every connected organisation each `every`, the first one period
/// after the start, until the process ends (the schedule's job on AWS).
pub(super) async fn reconcile_every(
    prs: PullRequests,
    queue: Arc<MemoryPullQueue>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = prs.queue_reconciles(queue.as_ref()).await {
            tracing::warn!(error = %e, "the reconcile could not be queued; the next period tries again");
        }
    }
}

/// Runs the worker until the process ends.
pub(super) async fn work(prs: PullRequests, queue: Arc<MemoryPullQueue>, dirty: Arc<AtomicBool>) {
    let mut later: VecDeque<(Instant, u32, PullWork)> = VecDeque::new();
    loop {
        tokio::time::sleep(POLL).await;
        let now = Instant::now();
        let mut batch: Vec<(u32, PullWork)> = queue.drain().into_iter().map(|w| (0, w)).collect();
        let (due, waiting): (Vec<_>, Vec<_>) = later.drain(..).partition(|(at, _, _)| *at <= now);
        later.extend(waiting);
        batch.extend(due.into_iter().map(|(_, tries, w)| (tries, w)));
        for (tries, work) in batch {
            match prs.handle(&work).await {
                Ok(()) => dirty.store(true, Ordering::SeqCst),
                Err(e) if e.is_retryable() && tries + 1 < TRIES => {
                    tracing::warn!(error = %e, tries = tries + 1, "pull request work failed; trying again later");
                    later.push_back((Instant::now() + backoff(tries + 1, &e), tries + 1, work));
                }
                Err(e) => {
                    tracing::error!(error = %e, work = ?work, "pull request work dropped");
                }
            }
        }
    }
}
