//! Retries: a refused launch goes back to `queued` after the backoff of
//! [`sortie_core::retry::after_launch_refusal`], or fails the job; a message whose handling failed (the store could
//! not be reached) is delivered again after [`redelivery_delay_seconds`].

use super::*;

pub use sortie_core::retry::redelivery_delay_seconds;

impl Engine {
    /// The one path of a refused launch (issue 25 item 1), as
    /// [`sortie_core::retry::after_launch_refusal`] decides: back to `queued` with its next
    /// launch due after the backoff, carried by exactly one new message sent with that delay
    /// (the current one is deleted); or, refused for good or past the cap on attempts and
    /// time, the job fails through the one end of a job, which releases its environment.
    pub(super) async fn after_refusal(
        &self,
        claimed: &JobRecord,
        retryable: bool,
        reason: &str,
        now: DateTime<Utc>,
    ) -> MessageDisposition {
        use sortie_core::retry::{after_launch_refusal, LaunchRetry, LAUNCH_RETRY_PREFIX};
        let id = &claimed.job.id;
        let backoff = |e: String| MessageDisposition::Retry {
            delay_seconds: redelivery_delay_seconds(claimed.attempt),
            reason: e,
        };
        let decided = after_launch_refusal(&claimed.job, claimed.attempt, retryable, reason, now);
        let (delay, at) = match decided {
            LaunchRetry::Retry { delay_seconds, at } => (delay_seconds, at),
            LaunchRetry::GiveUp(reason) => {
                let step = Oversight::End(sortie_core::Outcome {
                    state: JobState::Failed,
                    reason,
                });
                return match self.carry_out(claimed, step, None).await {
                    Ok(_) => MessageDisposition::Done,
                    Err(e) => backoff(e.to_string()),
                };
            }
        };
        let update = JobUpdate {
            clear_task: true,
            retry_at: Some(at),
            ..Default::default()
        };
        match self
            .jobs
            .store
            .transition_job(
                id,
                JobState::Dispatching,
                JobState::Queued,
                now,
                &format!("{LAUNCH_RETRY_PREFIX}: {reason}"),
                update,
            )
            .await
        {
            Ok(_) => {}
            // Canceled (or moved on) meanwhile: nothing to retry.
            Err(StoreError::StateConflict { .. }) => return MessageDisposition::Done,
            Err(e) => return backoff(e.to_string()),
        }
        let delay = i32::try_from(delay).unwrap_or(i32::MAX);
        info!(
            delay_seconds = delay,
            attempt = claimed.attempt,
            "requeued; launch retried after the backoff"
        );
        match self.jobs.queue.send(&claimed.job, delay).await {
            Ok(()) => MessageDisposition::Done,
            // Not sent: the current message carries the next attempt instead, after the same
            // delay (and the sweeper re-sends it should that be lost too).
            Err(e) => MessageDisposition::Retry {
                delay_seconds: delay,
                reason: format!("requeue send failed: {e}"),
            },
        }
    }
}
