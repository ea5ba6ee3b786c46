//! A refused launch, tried again: one backoff with jitter, a cap on attempts and time, and a
//! job history that stays bounded however often it is retried.
//!
//! Pure: the time and the jitter's seed are arguments.
//!
//! - A retryable refusal is tried again after [`launch_retry_delay_seconds`]: an exponential
//!   backoff from [`LAUNCH_BACKOFF_MIN_SECONDS`] up to [`LAUNCH_BACKOFF_MAX_SECONDS`], with
//!   jitter, from the number of refusals in a row ([`refusal_run`]).
//! - After [`MAX_LAUNCH_ATTEMPTS`] launch attempts, or [`MAX_LAUNCH_RETRY_MINUTES`] since the
//!   first refusal of the run, the job fails, quoting the last refusal and saying how many
//!   attempts were made ([`after_refusal`]). A refusal for good fails the job at once; both
//!   are decided by [`after_launch_refusal`], the one policy the dispatcher asks.
//! - A message whose handling failed for another reason (the store unreachable) is
//!   delivered again after [`redelivery_delay_seconds`], a short backoff without jitter.
//! - A transition identical to one of the last two recorded is folded into it
//!   ([`record_transition`]), and a history longer than [`HISTORY_MAX`] entries keeps its
//!   first [`HISTORY_KEEP_FIRST`] and last [`HISTORY_KEEP_LAST`], counting the rest.

use chrono::{DateTime, Duration, Utc};

pub use crate::job::history::{
    record_transition, HistoryEdit, HISTORY_KEEP_FIRST, HISTORY_KEEP_LAST, HISTORY_MAX,
};
use crate::job::{Job, JobState, Transition};

pub use crate::backoff::{
    jitter_seed, launch_retry_delay_seconds, LAUNCH_BACKOFF_MAX_SECONDS, LAUNCH_BACKOFF_MIN_SECONDS,
};

/// A job is launched at most this many times: a refusal of the last one fails the job.
pub const MAX_LAUNCH_ATTEMPTS: u32 = 20;
/// A run of refused launches is tried for at most this long before the job fails.
pub const MAX_LAUNCH_RETRY_MINUTES: i64 = 30;

/// The reason a launch was refused and will be retried, as dispatch records it on the
/// `dispatching → queued` transition.
pub const LAUNCH_RETRY_PREFIX: &str = "launch will be retried";

/// The longest delay before a failed message is delivered again, in seconds.
pub const REDELIVERY_DELAY_MAX_SECONDS: i32 = 60;

/// The delay before a jobs-queue message whose handling failed (the store or the queue
/// could not be reached, a step could not be recorded) is delivered again, after its
/// `receive_count`-th delivery: 2, 4, 8, 16, 32, then [`REDELIVERY_DELAY_MAX_SECONDS`]. It
/// is not the backoff of a refused launch, which is [`launch_retry_delay_seconds`]: the
/// launch was not refused, the message's work is simply done again.
pub fn redelivery_delay_seconds(receive_count: u32) -> i32 {
    2i32.saturating_pow(receive_count.clamp(1, 6))
        .min(REDELIVERY_DELAY_MAX_SECONDS)
}

/// The refused launches in a row that end a job's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusalRun {
    /// How many.
    pub count: u32,
    /// When the first of them was refused.
    pub first_at: DateTime<Utc>,
    /// When the last of them was refused.
    pub last_at: DateTime<Utc>,
}

/// True for a recorded retryable launch refusal.
pub fn is_refusal(t: &Transition) -> bool {
    t.from == Some(JobState::Dispatching)
        && t.to == JobState::Queued
        && t.reason.starts_with(LAUNCH_RETRY_PREFIX)
}

fn is_claim(t: &Transition) -> bool {
    t.from == Some(JobState::Queued) && t.to == JobState::Dispatching
}

/// The refused launches in a row that end `job`'s history (claims between them skipped,
/// folded entries counted as often as they happened), or `None`.
pub fn refusal_run(job: &Job) -> Option<RefusalRun> {
    let mut run: Option<RefusalRun> = None;
    for t in job.transitions.iter().rev() {
        if is_refusal(t) {
            let r = run.get_or_insert(RefusalRun {
                count: 0,
                first_at: t.at,
                last_at: t.latest_at(),
            });
            r.count += t.count;
            r.first_at = r.first_at.min(t.at);
            r.last_at = r.last_at.max(t.latest_at());
        } else if !is_claim(t) {
            break;
        }
    }
    run
}

/// What to do after a retryable launch refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchRetry {
    /// Launch again after this delay.
    Retry {
        /// The backoff, in seconds.
        delay_seconds: u32,
        /// When the next attempt is due.
        at: DateTime<Utc>,
    },
    /// Stop trying: the job fails with this reason.
    GiveUp(String),
}

/// Decides what follows a retryable refusal of launch `attempt` (1 for the first) of `job`
/// (whose history holds the refusals before this one) at `now`: try again after the
/// backoff, or give up once [`MAX_LAUNCH_ATTEMPTS`] attempts were made or
/// [`MAX_LAUNCH_RETRY_MINUTES`] passed since the run's first refusal.
pub fn after_refusal(job: &Job, attempt: u32, reason: &str, now: DateTime<Utc>) -> LaunchRetry {
    let run = refusal_run(job);
    let refusals = run.map_or(0, |r| r.count) + 1;
    let first = run.map_or(now, |r| r.first_at);
    let elapsed = now - first;
    if attempt >= MAX_LAUNCH_ATTEMPTS || elapsed >= Duration::minutes(MAX_LAUNCH_RETRY_MINUTES) {
        let attempts = attempt.max(refusals);
        return LaunchRetry::GiveUp(format!(
            "launch failed after {attempts} attempt{} over {}: \"{reason}\"",
            if attempts == 1 { "" } else { "s" },
            span(elapsed)
        ));
    }
    let delay_seconds =
        launch_retry_delay_seconds(refusals, jitter_seed(job.id.as_str(), refusals));
    LaunchRetry::Retry {
        delay_seconds,
        at: now + Duration::seconds(i64::from(delay_seconds)),
    }
}

/// What follows a refused launch: the one retry decision of a launch. A refusal for good
/// (`retryable` false) fails the job at once, quoting the platform ([`refused_for_good`]); a
/// retryable one is tried again after the backoff, or given up past the caps
/// ([`after_refusal`]).
pub fn after_launch_refusal(
    job: &Job,
    attempt: u32,
    retryable: bool,
    reason: &str,
    now: DateTime<Utc>,
) -> LaunchRetry {
    if retryable {
        after_refusal(job, attempt, reason, now)
    } else {
        LaunchRetry::GiveUp(refused_for_good(attempt, reason))
    }
}

/// The end reason of a launch refused for good at `attempt`: `launch failed after 1
/// attempt: "<the platform's words>"`.
pub fn refused_for_good(attempt: u32, reason: &str) -> String {
    let attempts = attempt.max(1);
    format!(
        "launch failed after {attempts} attempt{}: \"{reason}\"",
        if attempts == 1 { "" } else { "s" }
    )
}

/// The fold key of a transition (its from, to and reason), short: a store keeps the last
/// two keys beside the history to tell, without reading it, whether a new transition
/// would fold.
pub fn fold_key(from: Option<JobState>, to: JobState, reason: &str) -> String {
    let from = from.map_or("-", JobState::as_str);
    let mut h = jitter_seed(reason, 0);
    for b in from.bytes().chain(to.as_str().bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:016x}", crate::backoff::mix(h))
}

/// A duration as `45s`, `2m10s` or `1h05m` (never negative).
pub fn span(d: Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000 + s, 0).unwrap()
    }

    #[test]
    fn the_backoff_grows_from_two_seconds_to_five_minutes_with_jitter() {
        for seed in 0..200u64 {
            assert_eq!(launch_retry_delay_seconds(1, seed), 2);
            let d2 = launch_retry_delay_seconds(2, seed);
            assert!((2..=4).contains(&d2), "{d2}");
            let d5 = launch_retry_delay_seconds(5, seed);
            assert!((16..=32).contains(&d5), "{d5}");
            for n in [9, 10, 20, 1000, u32::MAX] {
                let d = launch_retry_delay_seconds(n, seed);
                assert!((150..=300).contains(&d), "{n}: {d}");
            }
        }
        let spread: std::collections::BTreeSet<u32> = (0..200u64)
            .map(|s| launch_retry_delay_seconds(9, jitter_seed("job", s as u32)))
            .collect();
        assert!(spread.len() > 50, "jitter spreads the delays: {spread:?}");
    }

    #[test]
    fn a_failed_message_is_redelivered_after_two_seconds_doubling_to_a_minute() {
        let delays: Vec<i32> = (0..9).map(redelivery_delay_seconds).collect();
        assert_eq!(delays, [2, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(
            redelivery_delay_seconds(u32::MAX),
            REDELIVERY_DELAY_MAX_SECONDS
        );
    }

    #[test]
    fn alternating_claims_and_refusals_fold_into_two_entries() {
        let mut h = vec![Transition::new(None, JobState::Queued, at(0), "submitted")];
        let mut dropped = 0;
        for i in 0..500 {
            record_transition(
                &mut h,
                &mut dropped,
                Transition::new(
                    Some(JobState::Queued),
                    JobState::Dispatching,
                    at(2 * i + 1),
                    "claimed",
                ),
            );
            record_transition(
                &mut h,
                &mut dropped,
                Transition::new(
                    Some(JobState::Dispatching),
                    JobState::Queued,
                    at(2 * i + 2),
                    "refused",
                ),
            );
        }
        assert_eq!(h.len(), 3);
        assert_eq!(dropped, 0);
        assert_eq!((h[1].reason.as_str(), h[1].count), ("claimed", 500));
        assert_eq!((h[2].reason.as_str(), h[2].count), ("refused", 500));
        assert_eq!((h[2].at, h[2].latest_at()), (at(2), at(1000)));
        assert_eq!(h.last().unwrap().to, JobState::Queued);
    }

    #[test]
    fn distinct_transitions_keep_the_first_and_last_entries_and_count_the_rest() {
        let mut h = vec![Transition::new(None, JobState::Queued, at(0), "submitted")];
        let mut dropped = 0;
        for i in 0..500 {
            record_transition(
                &mut h,
                &mut dropped,
                Transition::new(
                    Some(JobState::Queued),
                    JobState::Dispatching,
                    at(2 * i + 1),
                    format!("claim {i}"),
                ),
            );
            record_transition(
                &mut h,
                &mut dropped,
                Transition::new(
                    Some(JobState::Dispatching),
                    JobState::Queued,
                    at(2 * i + 2),
                    format!("refused {i}"),
                ),
            );
        }
        assert_eq!(h.len(), HISTORY_MAX);
        assert_eq!(dropped as usize, 1001 - HISTORY_MAX);
        assert_eq!(h[0].reason, "submitted");
        assert_eq!(h.last().unwrap().reason, "refused 499");
    }

    #[test]
    fn a_run_of_refusals_gives_up_at_the_attempt_cap_or_after_thirty_minutes() {
        let mut job = Job::new(
            "j1",
            crate::EnvPath::parse("acme/prod").unwrap(),
            crate::RunnerId::parse("acme/fargate").unwrap(),
            crate::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap(),
            "alice".into(),
            at(0),
        );
        job.transition(JobState::Dispatching, at(1), "claimed by dispatch")
            .unwrap();
        match after_refusal(
            &job,
            1,
            "RunTask failed: ThrottlingException: Rate exceeded",
            at(1),
        ) {
            LaunchRetry::Retry {
                delay_seconds,
                at: next,
            } => {
                assert_eq!(delay_seconds, 2);
                assert_eq!(next, at(3));
            }
            other => panic!("{other:?}"),
        }
        let reason = format!("{LAUNCH_RETRY_PREFIX}: RunTask failed: ThrottlingException");
        job.transition(JobState::Queued, at(1), &reason).unwrap();
        job.transition(JobState::Dispatching, at(60), "claimed by dispatch")
            .unwrap();
        assert_eq!(refusal_run(&job).map(|r| r.count), Some(1));
        assert_eq!(
            after_refusal(&job, MAX_LAUNCH_ATTEMPTS, "RunTask failed: x", at(61)),
            LaunchRetry::GiveUp(
                "launch failed after 20 attempts over 1m00s: \"RunTask failed: x\"".into()
            )
        );
        assert!(matches!(
            after_refusal(&job, 2, "x", at(1 + 29 * 60)),
            LaunchRetry::Retry { .. }
        ));
        assert_eq!(
            after_refusal(&job, 3, "RunTask failed: x", at(1 + 31 * 60)),
            LaunchRetry::GiveUp(
                "launch failed after 3 attempts over 31m00s: \"RunTask failed: x\"".into()
            )
        );
    }
}
