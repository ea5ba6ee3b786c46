//! Contract case for a job's launch history: refused launches fold into a bounded history.

use std::sync::Arc;

use chrono::{Duration, Utc};
use sortie_core::JobState;
use sortie_store::{JobUpdate, Store, StoreError};

use super::{job, pending_ids, setup_env, step, ENV};

/// Issue 25 item 1: a launch refused 500 times in a row (a claim, then a requeue, each
/// time) keeps a history of three entries with the right counts; then 100 refusals that
/// each say something else keep the first and last entries and count the rest; claims stay
/// exactly-once; a job waiting out its backoff is no lost send until its retry is due.
pub async fn many_refused_launches_fold_into_a_bounded_history<S: Store + 'static>(s: Arc<S>) {
    use sortie_core::retry::HISTORY_MAX;
    // Well past the history's bound (40 entries), and quick enough on moto.
    const FOLDED: i64 = 150;
    const DISTINCT: i64 = 60;
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let t0 = Utc::now();
    let refused = "launch will be retried: RunTask failed: ThrottlingException: Rate exceeded";
    let cycle = |i: i64, reason: String| {
        let s = s.clone();
        let id = j.id.clone();
        async move {
            let at = t0 + Duration::seconds(2 * i);
            s.transition_job(
                &id,
                JobState::Queued,
                JobState::Dispatching,
                at,
                "claimed by dispatch",
                JobUpdate {
                    next_attempt: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            s.transition_job(
                &id,
                JobState::Dispatching,
                JobState::Queued,
                at + Duration::seconds(1),
                &reason,
                JobUpdate {
                    clear_task: true,
                    retry_at: Some(at + Duration::seconds(301)),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let mut last = None;
    for i in 0..FOLDED {
        last = Some(cycle(i, refused.to_string()).await);
    }
    let got = s.get_job(&j.id).await.unwrap();
    assert_eq!(
        Some(&got.job.transitions),
        last.as_ref().map(|r| &r.job.transitions)
    );
    let t = &got.job.transitions;
    assert_eq!(t.len(), 3, "{t:#?}");
    assert_eq!(t[0].reason, "submitted by alice");
    assert_eq!(
        (t[1].reason.as_str(), t[1].count),
        ("claimed by dispatch", FOLDED as u32)
    );
    assert_eq!((t[2].reason.as_str(), t[2].count), (refused, FOLDED as u32));
    assert_eq!(t[2].at, t0 + Duration::seconds(1));
    assert_eq!(
        t[2].latest_at(),
        t0 + Duration::seconds(2 * (FOLDED - 1) + 1)
    );
    assert_eq!(got.job.state, JobState::Queued);
    assert_eq!(got.attempt, FOLDED as u32);
    assert_eq!(got.job.transitions_dropped, 0);
    let bytes = serde_json::to_vec(&got).unwrap().len();
    assert!(bytes < 4096, "the item stays small: {bytes} bytes");
    // Waiting out its backoff, the job is not a lost send; once its retry is due, it is.
    let due = t0 + Duration::seconds(2 * (FOLDED - 1) + 301);
    assert!(!pending_ids(&*s, due).await.contains(&j.id.to_string()));
    assert!(pending_ids(&*s, due + Duration::seconds(1))
        .await
        .contains(&j.id.to_string()));
    // Folded or not, a claim is exactly-once.
    step(&*s, j.id.as_str(), JobState::Queued, JobState::Dispatching).await;
    assert!(matches!(
        s.transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed by dispatch",
            JobUpdate::default(),
        )
        .await,
        Err(StoreError::StateConflict { .. })
    ));
    step(&*s, j.id.as_str(), JobState::Dispatching, JobState::Queued).await;

    // Refusals that each say something else: the history keeps its first and last entries.
    for i in FOLDED..FOLDED + DISTINCT {
        last = Some(cycle(i, format!("launch will be retried: refusal {i}")).await);
    }
    let got = s.get_job(&j.id).await.unwrap();
    assert_eq!(
        Some(&got.job.transitions),
        last.as_ref().map(|r| &r.job.transitions)
    );
    let t = &got.job.transitions;
    assert_eq!(t.len(), HISTORY_MAX);
    assert_eq!(t[0].reason, "submitted by alice");
    // The first entries are kept: the folded claims and refusals among them.
    assert_eq!(
        (t[1].count, t[2].reason.as_str(), t[2].count),
        (FOLDED as u32, refused, FOLDED as u32),
        "{t:#?}"
    );
    assert_eq!(
        t.last().unwrap().reason,
        format!("launch will be retried: refusal {}", FOLDED + DISTINCT - 1)
    );
    let kept: u32 = t.iter().map(|t| t.count).sum();
    // The creation, claims and requeues, and the step's claim and requeue.
    assert_eq!(
        kept + got.job.transitions_dropped,
        1 + 2 * (FOLDED + DISTINCT) as u32 + 2
    );
    assert!(got.job.transitions_dropped > 0);
    let bytes = serde_json::to_vec(&got).unwrap().len();
    assert!(bytes < 16 * 1024, "the item stays bounded: {bytes} bytes");
}
