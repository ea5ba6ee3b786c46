use chrono::TimeZone;
use proptest::prelude::*;

use super::*;
use crate::job::{JobRequest, Review};
use crate::names::{EnvPath, RunnerId};

fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 25, h, m, s).unwrap()
}

fn job(id: &str) -> Job {
    Job::new(
        id,
        EnvPath::parse("acme/web/prod").unwrap(),
        RunnerId::parse("acme/local").unwrap(),
        JobRequest::from_value(
            &serde_json::json!({"operation": "apply", "files": {"main.tf": "x"}}),
        )
        .unwrap(),
        "alice".into(),
        t(12, 0, 0),
    )
}

fn facts(job: &Job) -> WaitFacts<'_> {
    WaitFacts {
        job,
        holds_lock: true,
        holder: None,
        offered_to: None,
        pool_last_claim: None,
    }
}

#[test]
fn a_job_queued_behind_a_reviewed_job_names_it_and_since_when_it_awaits() {
    let mut holder = job("01m8zzabcdefghijklmnopqrst");
    holder
        .transition(JobState::Dispatching, t(12, 0, 1), "claimed")
        .unwrap();
    holder
        .transition(JobState::Running, t(12, 0, 2), "launched")
        .unwrap();
    holder
        .transition(JobState::AwaitingApproval, t(12, 3, 0), "planned")
        .unwrap();
    holder.review = Some(Review {
        four_eyes: false,
        timeout_seconds: 3600,
        phase: crate::job::JobPhase::Plan,
        awaiting_since: Some(t(12, 3, 0)),
        decision: None,
        policy_only: false,
    });
    let holder = LockHolder::of(&holder);
    let waiter = job("01m9waiter");
    let w = waiting(
        &WaitFacts {
            holds_lock: false,
            holder: Some(&holder),
            ..facts(&waiter)
        },
        t(12, 10, 0),
    )
    .unwrap();
    assert_eq!(w.kind, WaitingKind::QueuedBehind);
    assert_eq!(
        w.text,
        "queued behind 01m8zzab… (awaiting approval since 12:03 UTC)"
    );
    assert_eq!(w.behind.as_deref(), Some("01m8zzabcdefghijklmnopqrst"));
    assert_eq!(w.behind_state, Some(JobState::AwaitingApproval));
}

#[test]
fn a_speculative_plan_never_waits_behind_the_lock_holder() {
    let mut holder = job("01aaaaaaaaaa");
    holder
        .transition(JobState::Dispatching, t(9, 0, 0), "claimed")
        .unwrap();
    let holder = LockHolder::of(&holder);
    let mut plan = job("01b");
    plan.speculative = true;
    let f = WaitFacts {
        holds_lock: false,
        holder: Some(&holder),
        ..facts(&plan)
    };
    let w = waiting(&f, t(9, 5, 0)).unwrap();
    assert_ne!(w.kind, WaitingKind::QueuedBehind, "{}", w.text);
    assert_eq!(w.behind, None);
}

#[test]
fn a_running_holder_reads_running_since_its_launch_and_another_day_carries_the_date() {
    let mut holder = job("01aaaaaaaaaa");
    holder
        .transition(JobState::Dispatching, t(9, 0, 0), "claimed")
        .unwrap();
    holder
        .transition(JobState::Running, t(9, 1, 0), "launched")
        .unwrap();
    let holder = LockHolder::of(&holder);
    let waiter = job("01b");
    let f = WaitFacts {
        holds_lock: false,
        holder: Some(&holder),
        ..facts(&waiter)
    };
    assert_eq!(
        waiting(&f, t(9, 5, 0)).unwrap().text,
        "queued behind 01aaaaaa… (running since 09:01 UTC)"
    );
    let tomorrow = t(9, 5, 0) + Duration::days(1);
    assert_eq!(
        waiting(&f, tomorrow).unwrap().text,
        "queued behind 01aaaaaa… (running since 2026-11-25 09:01 UTC)"
    );
}

#[test]
fn an_offered_job_says_which_pool_and_how_long_no_agent_claimed() {
    let mut j = job("01c");
    j.transition(JobState::Dispatching, t(14, 0, 0), "claimed by dispatch")
        .unwrap();
    let mut f = WaitFacts {
        offered_to: Some("apool-01x"),
        pool_last_claim: Some(t(13, 50, 0)),
        ..facts(&j)
    };
    let w = waiting(&f, t(14, 2, 10)).unwrap();
    assert_eq!(w.kind, WaitingKind::Agent);
    assert_eq!(
        w.text,
        "waiting for an agent of pool apool-01x: none has claimed for 2m10s (last claim 13:50 UTC)"
    );
    assert_eq!(w.pool.as_deref(), Some("apool-01x"));
    assert_eq!(w.last_claim_at, Some(t(13, 50, 0)));
    f.pool_last_claim = None;
    assert!(waiting(&f, t(14, 2, 10))
        .unwrap()
        .text
        .ends_with("none has claimed for 2m10s (no agent has ever asked for work)"));
    f.pool_last_claim = Some(t(14, 2, 0));
    assert!(waiting(&f, t(14, 2, 10))
        .unwrap()
        .text
        .contains("its agents are polling"));
    // Not offered: dispatch is launching its task.
    f.offered_to = None;
    assert_eq!(
        waiting(&f, t(14, 2, 10)).unwrap().kind,
        WaitingKind::Launching
    );
}

#[test]
fn refused_launches_in_a_row_count_and_say_when_the_next_try_is() {
    let mut j = job("01d");
    for (i, at) in [t(14, 0, 0), t(14, 0, 3), t(14, 0, 8)]
        .into_iter()
        .enumerate()
    {
        j.transition(JobState::Dispatching, at, "claimed by dispatch")
            .unwrap();
        j.transition(
            JobState::Queued,
            at + Duration::seconds(1),
            format!("launch will be retried: no capacity ({i})"),
        )
        .unwrap();
    }
    // The third refusal at 14:00:09; the third refusal's backoff is 4 to 8 s, the same
    // jittered delay dispatch chose.
    let delay = crate::retry::launch_retry_delay_seconds(3, crate::retry::jitter_seed("01d", 3));
    assert!((4..=8).contains(&delay), "{delay}");
    let w = waiting(&facts(&j), t(14, 0, 9)).unwrap();
    assert_eq!(w.kind, WaitingKind::Capacity);
    assert_eq!(
        w.text,
        format!("waiting for capacity: the launch refused 3 times, next try in {delay}s")
    );
    assert_eq!(w.refusals, Some(3));
    assert_eq!(
        w.next_try_at,
        Some(t(14, 0, 9) + Duration::seconds(i64::from(delay)))
    );
    assert_eq!(w.since, t(14, 0, 1));
    assert!(waiting(&facts(&j), t(14, 1, 0))
        .unwrap()
        .text
        .ends_with("next try due now"));
    // A requeue for another reason ends the run of refusals.
    j.transition(JobState::Dispatching, t(14, 2, 0), "claimed by dispatch")
        .unwrap();
    j.transition(
        JobState::Queued,
        t(14, 2, 1),
        "no task after the dispatch lease; launching again",
    )
    .unwrap();
    assert_eq!(
        waiting(&facts(&j), t(14, 3, 0)).unwrap().kind,
        WaitingKind::Dispatch
    );
}

#[test]
fn running_and_ended_jobs_do_not_wait_and_awaiting_approval_names_the_command() {
    let mut j = job("01e");
    j.transition(JobState::Dispatching, t(1, 0, 0), "c")
        .unwrap();
    j.transition(JobState::Running, t(1, 0, 1), "l").unwrap();
    assert_eq!(waiting(&facts(&j), t(1, 1, 0)), None);
    j.transition(JobState::AwaitingApproval, t(1, 2, 0), "planned")
        .unwrap();
    let w = waiting(&facts(&j), t(1, 3, 0)).unwrap();
    assert_eq!(w.kind, WaitingKind::Approval);
    assert_eq!(
        w.text,
        "awaiting approval since 01:02 UTC: sortie job approve 01e"
    );
    j.transition(JobState::Discarded, t(1, 4, 0), "d").unwrap();
    assert_eq!(waiting(&facts(&j), t(1, 5, 0)), None);
}

#[test]
fn the_pool_claim_is_recorded_at_most_every_thirty_seconds_and_checked() {
    assert!(claim_worth_recording(None, t(1, 0, 0)));
    assert!(!claim_worth_recording(Some(t(1, 0, 0)), t(1, 0, 29)));
    assert!(claim_worth_recording(Some(t(1, 0, 0)), t(1, 0, 30)));
    let never = agent_seen_check("apool-1", None, t(1, 0, 0));
    assert!(!never.is_passed() && never.detail.contains("no agent of pool apool-1"));
    let live = agent_seen_check("apool-1", Some(t(1, 0, 0)), t(1, 1, 0));
    assert!(live.is_passed(), "{live:?}");
    assert!(
        live.detail.contains("1m00s ago (01:00 UTC)"),
        "{}",
        live.detail
    );
    let stale = agent_seen_check("apool-1", Some(t(1, 0, 0)), t(1, 30, 0));
    assert!(!stale.is_passed());
    assert!(
        stale.detail.contains("last saw an agent 30m00s ago"),
        "{}",
        stale.detail
    );
}

proptest! {
    #[test]
    fn only_live_states_wait_and_the_text_is_one_line(
        steps in proptest::collection::vec(0usize..9, 0..8),
        holds in any::<bool>(),
        offered in any::<bool>(),
    ) {
        let mut j = job("01p");
        let mut at = t(10, 0, 0);
        for s in steps {
            at += Duration::seconds(7);
            let _ = j.transition(crate::job::ALL_STATES[s], at, "launch will be retried: x");
        }
        let f = WaitFacts { holds_lock: holds, offered_to: offered.then_some("apool-1"), ..facts(&j) };
        let w = waiting(&f, at + Duration::seconds(1));
        prop_assert_eq!(w.is_some(), !(j.state.is_terminal() || j.state == JobState::Running));
        if let Some(w) = w {
            prop_assert!(!w.text.contains('\n') && !w.text.is_empty());
        }
    }
}
