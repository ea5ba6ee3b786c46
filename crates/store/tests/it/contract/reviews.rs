//! Contract cases for reviewed applies: a decision on an awaiting job, the approvals due,
//! and a plan phase's review, tool used and change summary.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sortie_core::{
    ChangeSummary, Job, JobPhase, JobState, Review, ReviewDecision, ReviewVerdict, ToolName,
    ToolUsed,
};
use sortie_store::{JobUpdate, PhaseRecord, Store, StoreError};

use super::{env, job, pending_ids, setup_env, step, ENV};

/// A job submitted to `env` and moved to `running`.
async fn running_job<S: Store>(s: &S, env: &str) -> Job {
    let j = job(env);
    assert!(s.submit_job(&j, None).await.unwrap().took_lock);
    step(s, &j.id, JobState::Queued, JobState::Dispatching).await;
    step(s, &j.id, JobState::Dispatching, JobState::Running).await;
    j
}

async fn approvals_due_ids<S: Store>(s: &S, before: DateTime<Utc>) -> Vec<String> {
    s.approvals_due(before, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect()
}

pub async fn an_awaiting_jobs_decision_is_written_once_without_moving_it<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let a = running_job(&*s, ENV).await;
    let review = sortie_core::Review {
        four_eyes: false,
        timeout_seconds: 3600,
        phase: sortie_core::JobPhase::Plan,
        awaiting_since: Some(Utc::now()),
        decision: None,
        policy_only: false,
    };
    let decision_by = |by: &str| {
        let mut decided = review.clone();
        decided.decision = Some(sortie_core::ReviewDecision {
            verdict: sortie_core::ReviewVerdict::Approved,
            by: by.into(),
            at: Utc::now(),
            comment: None,
            overrode_policy: false,
        });
        JobUpdate {
            review: Some(decided),
            ..Default::default()
        }
    };
    // Not awaiting approval: refused, nothing written.
    assert!(matches!(
        s.decide_awaiting_job(&a.id, Utc::now(), decision_by("bob"))
            .await,
        Err(StoreError::StateConflict {
            actual: JobState::Running,
            ..
        })
    ));
    s.transition_job(
        &a.id,
        JobState::Running,
        JobState::AwaitingApproval,
        Utc::now(),
        "plan succeeded; awaiting approval",
        JobUpdate {
            review: Some(review.clone()),
            approval_deadline: Some(Utc::now() + Duration::hours(1)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let before = s.get_job(&a.id).await.unwrap();
    let decided = s
        .decide_awaiting_job(&a.id, Utc::now(), decision_by("bob"))
        .await
        .unwrap();
    assert_eq!(decided.job.state, JobState::AwaitingApproval);
    assert_eq!(
        decided.job.transitions.len(),
        before.job.transitions.len(),
        "no transition"
    );
    assert_eq!(
        decided
            .job
            .review
            .as_ref()
            .unwrap()
            .decision
            .as_ref()
            .unwrap()
            .by,
        "bob"
    );
    assert_eq!(
        s.get_job(&a.id).await.unwrap().job.review,
        decided.job.review
    );
    // One decision only: a second (a racing approval) is refused and changes nothing.
    assert!(matches!(
        s.decide_awaiting_job(&a.id, Utc::now(), decision_by("carol"))
            .await,
        Err(StoreError::StateConflict { .. })
    ));
    assert_eq!(
        s.get_job(&a.id)
            .await
            .unwrap()
            .job
            .review
            .unwrap()
            .decision
            .unwrap()
            .by,
        "bob"
    );
    // Still on the approvals list, and still holding the lock, until it moves.
    let far = Utc::now() + Duration::days(2);
    assert_eq!(approvals_due_ids(&*s, far).await, vec![a.id.clone()]);
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.active_job,
        Some(a.id.clone())
    );
}

pub async fn a_job_awaiting_approval_is_due_after_its_deadline_and_leaves_the_list_when_decided<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let a = running_job(&*s, ENV).await;
    let now = Utc::now();
    let deadline = now + Duration::hours(1);
    let awaiting = s
        .transition_job(
            &a.id,
            JobState::Running,
            JobState::AwaitingApproval,
            now,
            "plan succeeded; awaiting approval",
            JobUpdate {
                approval_deadline: Some(deadline),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(awaiting.job.state, JobState::AwaitingApproval);
    assert!(approvals_due_ids(&*s, deadline - Duration::seconds(1))
        .await
        .is_empty());
    assert!(
        approvals_due_ids(&*s, deadline).await.is_empty(),
        "strictly before"
    );
    assert_eq!(
        approvals_due_ids(&*s, deadline + Duration::seconds(1)).await,
        vec![a.id.clone()]
    );
    // It holds the lock, but is neither launched, nor a pending send, nor ended.
    let far = now + Duration::days(2);
    assert!(s.active_jobs(10).await.unwrap().is_empty());
    assert!(pending_ids(&*s, far).await.is_empty());
    assert!(s.ended_jobs(far, 10).await.unwrap().is_empty());
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.active_job,
        Some(a.id.clone())
    );

    // Without a deadline the transition time stands for it; earliest deadline first.
    setup_env(&*s, "acme/payments/eu").await;
    let b = running_job(&*s, "acme/payments/eu").await;
    let b_at = Utc::now();
    step(&*s, &b.id, JobState::Running, JobState::AwaitingApproval).await;
    let due = approvals_due_ids(&*s, far).await;
    assert_eq!(due, vec![b.id.clone(), a.id.clone()]);
    assert!(!approvals_due_ids(&*s, b_at - Duration::seconds(1))
        .await
        .contains(&b.id.to_string()));
    assert_eq!(
        s.approvals_due(far, 1).await.unwrap().len(),
        1,
        "at most `limit`"
    );

    // Approved: a pending send again, off the approvals list.
    step(&*s, &a.id, JobState::AwaitingApproval, JobState::Queued).await;
    assert_eq!(approvals_due_ids(&*s, far).await, vec![b.id.clone()]);
    assert_eq!(pending_ids(&*s, far).await, vec![a.id.clone()]);
    // Discarded: terminal, on the ended list until settled (its lock released by the sweeper).
    step(&*s, &b.id, JobState::AwaitingApproval, JobState::Discarded).await;
    assert!(approvals_due_ids(&*s, far).await.is_empty());
    let ended: Vec<String> = s
        .ended_jobs(far, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect();
    assert_eq!(ended, vec![b.id.clone()]);
}

pub async fn plan_phase_review_tool_used_and_clear_summary_round_trip<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let j = running_job(&*s, ENV).await;
    let started = Utc::now();
    let plan_summary = ChangeSummary {
        add: 3,
        change: 1,
        destroy: 2,
        has_changes: None,
    };
    let tool = ToolUsed {
        tool: ToolName::Opentofu,
        version: "1.8.2".into(),
    };
    let marked = s
        .mark_job(
            &j.id,
            started,
            JobUpdate {
                summary: Some(plan_summary),
                tool_used: Some(tool.clone()),
                apply_log_offset: Some(4096),
                state_written: Some(sortie_core::state_version::StateStamp {
                    serial: 7,
                    lineage: "8d6c3a7e-1b2c".into(),
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(marked.tool_used.as_ref(), Some(&tool));
    let stamp = s.get_job(&j.id).await.unwrap().state_written;
    assert_eq!(
        stamp.map(|w| (w.serial, w.lineage)),
        Some((7, "8d6c3a7e-1b2c".into()))
    );
    assert_eq!(marked.apply_log_offset, Some(4096));
    assert_eq!(s.get_job(&j.id).await.unwrap().apply_log_offset, Some(4096));
    assert_eq!(marked.summary.as_ref(), Some(&plan_summary));

    let ended = Utc::now();
    let phase = PhaseRecord {
        task: Some("arn:aws:ecs:us-east-1:123456789012:task/c/plan".into()),
        attempt: 1,
        started_at: Some(started),
        ended_at: ended,
        summary: Some(plan_summary),
    };
    let mut review = Review {
        four_eyes: true,
        timeout_seconds: 600,
        phase: JobPhase::Plan,
        awaiting_since: Some(ended),
        decision: None,
        policy_only: true,
    };
    let policy = sortie_core::policy::gate::result(
        vec![sortie_core::policy::SetResult {
            set: "tags".into(),
            group: "acme".into(),
            enforcement: sortie_core::policy::Enforcement::Review,
            deny: vec!["bucket `logs` has no owner tag".into()],
            warn: vec!["3 resources replaced".into()],
            error: None,
        }],
        None,
        ended,
    );
    let awaiting = s
        .transition_job(
            &j.id,
            JobState::Running,
            JobState::AwaitingApproval,
            ended,
            "plan succeeded",
            JobUpdate {
                review: Some(review.clone()),
                plan_phase: Some(phase.clone()),
                clear_task: true,
                approval_deadline: Some(ended + Duration::seconds(600)),
                policy: Some(policy.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(awaiting.job.review.as_ref(), Some(&review));
    assert_eq!(awaiting.plan_phase.as_ref(), Some(&phase));
    assert_eq!(awaiting.policy.as_ref(), Some(&policy), "the gate's result");
    assert_eq!(awaiting.summary.as_ref(), Some(&plan_summary), "kept");
    assert_eq!(s.get_job(&j.id).await.unwrap(), awaiting);

    // Approved: the apply phase starts afresh, without the plan's summary.
    review.phase = JobPhase::Apply;
    review.decision = Some(ReviewDecision {
        verdict: ReviewVerdict::Approved,
        by: "bob".into(),
        at: Utc::now(),
        comment: Some("looks right".into()),
        overrode_policy: true,
    });
    let approved = s
        .transition_job(
            &j.id,
            JobState::AwaitingApproval,
            JobState::Queued,
            Utc::now(),
            "approved by bob",
            JobUpdate {
                review: Some(review.clone()),
                clear_summary: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(approved.summary, None);
    assert_eq!(approved.job.review.as_ref(), Some(&review));
    assert_eq!(approved.plan_phase.as_ref(), Some(&phase), "kept");
    assert_eq!(approved.policy.as_ref(), Some(&policy), "kept");
    assert_eq!(approved.tool_used.as_ref(), Some(&tool), "kept");
    assert_eq!(s.get_job(&j.id).await.unwrap(), approved);

    // A summary given with `clear_summary` is the new one.
    let apply_summary = ChangeSummary {
        add: 3,
        change: 1,
        destroy: 2,
        has_changes: Some(true),
    };
    let claimed = s
        .transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed",
            JobUpdate {
                summary: Some(apply_summary),
                clear_summary: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(claimed.summary.as_ref(), Some(&apply_summary));
    assert_eq!(s.get_job(&j.id).await.unwrap(), claimed);
}
