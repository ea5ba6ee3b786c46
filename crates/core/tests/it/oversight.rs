//! The relaunch and retry decision: property tests over every state, observation and moment.

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use sortie_core::job::ALL_STATES;
use sortie_core::oversight::{oversee, JobFacts, Oversight, Seen, Timing, MAX_SPOT_REQUEUES};
use sortie_core::retry::{after_launch_refusal, LaunchRetry, MAX_LAUNCH_ATTEMPTS};
use sortie_core::{JobState, Operation, TaskRef, TaskStop};

const TIMING: Timing = Timing {
    dispatch_lease: Duration::seconds(120),
    silence: Duration::seconds(600),
};

fn t0() -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000, 0).unwrap()
}

fn task(n: u8) -> TaskRef {
    TaskRef::new(format!(
        "arn:aws:ecs:eu-west-1:123456789012:task/runners/{n:032x}"
    ))
}

/// A job just claimed by dispatch, at `now`.
fn dispatching_job(now: DateTime<Utc>) -> sortie_core::Job {
    let mut job = sortie_core::Job::new(
        "j1",
        sortie_core::EnvPath::parse("acme/prod").unwrap(),
        sortie_core::RunnerId::parse("acme/fargate").unwrap(),
        sortie_core::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap(),
        "alice".into(),
        now,
    );
    job.transition(JobState::Dispatching, now, "claimed by dispatch")
        .unwrap();
    job
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        Just(Operation::Plan),
        Just(Operation::Apply),
        Just(Operation::Destroy)
    ]
}

fn stop() -> impl Strategy<Value = TaskStop> {
    (
        prop::option::of(prop_oneof![
            Just("EssentialContainerExited".to_string()),
            Just("TaskFailedToStart".to_string()),
            Just("SpotInterruption".to_string()),
            Just("UserInitiated".to_string()),
        ]),
        prop::option::of(prop_oneof![
            Just("Essential container in task exited".to_string()),
            Just("sortie: canceled by alice".to_string()),
            Just("sortie: timed out after 60s".to_string()),
            Just("Your Spot Task was interrupted.".to_string()),
        ]),
        prop::option::of(prop_oneof![Just(0), Just(1), Just(137)]),
    )
        .prop_map(|(stop_code, stopped_reason, exit_code)| TaskStop {
            stop_code,
            stopped_reason,
            exit_code,
            container_reason: None,
        })
}

fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![
        Just(Seen::Nothing),
        prop::option::of((0u8..4).prop_map(task)).prop_map(Seen::Found),
        Just(Seen::Running),
        stop().prop_map(Seen::Stopped),
        Just(Seen::Missing),
        "[a-z ]{1,20}".prop_map(Seen::LaunchUncertain),
        "[a-z ]{1,20}".prop_map(Seen::StopRefused),
    ]
}

prop_compose! {
    fn facts()(
        state in prop::sample::select(ALL_STATES.to_vec()),
        operation in operation(),
        entered_ago in 0i64..20_000,
        heard_ago in 0i64..20_000,
        task in prop::option::of((0u8..4).prop_map(task)),
        timeout_seconds in 60u32..10_000,
        cancel in prop::option::of(Just("alice".to_string())),
        timeout_requested in any::<bool>(),
        spot_requeues in 0u32..6,
        polled in any::<bool>(),
        offered in any::<bool>(),
    ) -> (JobFacts, DateTime<Utc>) {
        let now = t0() + Duration::seconds(30_000);
        (JobFacts {
            state,
            operation,
            entered: now - Duration::seconds(entered_ago),
            last_heard: now - Duration::seconds(heard_ago),
            task,
            timeout_seconds,
            cancel_requested_by: cancel,
            timeout_requested,
            spot_requeues,
            polled,
            offered,
        }, now)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Every state change the decision asks for is one the state machine allows.
    #[test]
    fn every_decided_change_is_a_legal_transition((f, now) in facts(), s in seen()) {
        match oversee(&f, &s, now, TIMING) {
            Oversight::End(o) => {
                prop_assert!(o.state.is_terminal(), "{o:?}");
                // A stopped task of a dispatching job is adopted first (dispatching → running).
                let from = match (&s, f.state) {
                    (Seen::Stopped(_), JobState::Dispatching) => JobState::Running,
                    (_, state) => state,
                };
                prop_assert!(from.can_become(o.state), "{:?} → {:?}", from, o.state);
            }
            Oversight::Requeue { .. } => prop_assert!(f.state.can_become(JobState::Queued)),
            Oversight::Adopt(_) => prop_assert_eq!(f.state, JobState::Dispatching),
            Oversight::Stop { .. } | Oversight::Heard => prop_assert_eq!(f.state, JobState::Running),
            Oversight::Find => prop_assert_eq!(f.state, JobState::Dispatching),
            Oversight::Describe => prop_assert_eq!(f.state, JobState::Running),
            Oversight::Wait => {}
        }
    }

    /// Queued and terminal jobs are never touched.
    #[test]
    fn only_active_jobs_are_acted_on((f, now) in facts(), s in seen()) {
        if !f.state.is_active() {
            prop_assert_eq!(oversee(&f, &s, now, TIMING), Oversight::Wait);
        }
    }

    /// A launch that may have reached the platform is never relaunched directly: only the
    /// lookup by `startedBy` after the lease decides (exactly one launch).
    #[test]
    fn an_uncertain_launch_never_requeues((mut f, now) in facts(), reason in "[a-z]{1,9}") {
        f.state = JobState::Dispatching;
        prop_assert_eq!(oversee(&f, &Seen::LaunchUncertain(reason), now, TIMING), Oversight::Wait);
    }

    /// A dispatching job is looked up only after the lease; a task found is adopted, none
    /// found is relaunched (or canceled, when a cancel was asked for).
    #[test]
    fn dispatching_waits_for_the_lease_then_finds_adopts_or_requeues((mut f, now) in facts(), n in 0u8..4) {
        f.state = JobState::Dispatching;
        // A job offered to an agent pool has its own rule (see below).
        f.offered = false;
        let within = now - f.entered < TIMING.dispatch_lease;
        let step = oversee(&f, &Seen::Nothing, now, TIMING);
        prop_assert_eq!(step, if within { Oversight::Wait } else { Oversight::Find });
        prop_assert_eq!(oversee(&f, &Seen::Found(Some(task(n))), now, TIMING), Oversight::Adopt(task(n)));
        match (oversee(&f, &Seen::Found(None), now, TIMING), &f.cancel_requested_by) {
            (Oversight::End(o), Some(_)) => prop_assert_eq!(o.state, JobState::Canceled),
            (Oversight::Requeue { spot: false, .. }, None) => {}
            (other, _) => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// A stop Sortie asked for is retried on every sweep until the task is seen stopped.
    #[test]
    fn a_requested_stop_is_retried_until_the_task_is_seen_stopped((mut f, now) in facts()) {
        f.state = JobState::Running;
        if f.cancel_requested_by.is_none() {
            f.timeout_requested = true;
        }
        prop_assert_eq!(oversee(&f, &Seen::Nothing, now, TIMING), Oversight::Describe);
        match oversee(&f, &Seen::Running, now, TIMING) {
            Oversight::Stop { reason, timeout } => {
                prop_assert!(reason.starts_with("sortie: "), "{reason}");
                prop_assert_eq!(timeout, f.cancel_requested_by.is_none());
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
        match oversee(&f, &Seen::Missing, now, TIMING) {
            Oversight::End(o) => prop_assert!(matches!(o.state, JobState::Canceled | JobState::TimedOut)),
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// A running job past its timeout is stopped from outside, whether or not it was heard from.
    #[test]
    fn past_the_timeout_the_task_is_stopped((mut f, now) in facts()) {
        f.state = JobState::Running;
        f.cancel_requested_by = None;
        f.timeout_requested = false;
        let past = now - f.entered > Duration::seconds(i64::from(f.timeout_seconds));
        for s in [Seen::Nothing, Seen::Running] {
            let step = oversee(&f, &s, now, TIMING);
            let stops = matches!(&step, Oversight::Stop { timeout: true, reason } if reason == &format!("sortie: timed out after {}s", f.timeout_seconds));
            prop_assert_eq!(stops, past, "{:?} → {:?}", s, step);
        }
    }

    /// A Spot interruption requeues a plan at most MAX_SPOT_REQUEUES times, and never a
    /// state writer; past the bound the job fails and says why.
    #[test]
    fn spot_requeues_are_bounded_and_never_rerun_a_state_writer((mut f, now) in facts()) {
        f.state = JobState::Running;
        f.cancel_requested_by = None;
        f.timeout_requested = false;
        let spot = TaskStop {
            stop_code: Some("SpotInterruption".into()),
            stopped_reason: Some("Your Spot Task was interrupted.".into()),
            exit_code: None,
            container_reason: None,
        };
        match oversee(&f, &Seen::Stopped(spot), now, TIMING) {
            Oversight::Requeue { spot: true, .. } => {
                prop_assert_eq!(f.operation, Operation::Plan);
                prop_assert!(f.spot_requeues < MAX_SPOT_REQUEUES);
            }
            Oversight::End(o) => {
                prop_assert_eq!(o.state, JobState::Failed);
                prop_assert!(o.reason.contains("Spot"), "{}", o.reason);
                prop_assert!(f.operation.writes_state() || f.spot_requeues >= MAX_SPOT_REQUEUES);
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// With a cancel asked for, a stopped task ends the job canceled unless it succeeded.
    #[test]
    fn a_cancel_names_the_end_unless_the_job_succeeded((mut f, now) in facts(), st in stop()) {
        f.state = JobState::Running;
        f.cancel_requested_by = Some("alice".into());
        match oversee(&f, &Seen::Stopped(st), now, TIMING) {
            Oversight::End(o) => prop_assert!(matches!(o.state, JobState::Canceled | JobState::Succeeded), "{o:?}"),
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// A stop or launch refused for good fails the job with the platform's words quoted;
    /// a retryable launch refusal is relaunched until the attempts run out.
    #[test]
    fn refusals_quote_the_platform((mut f, now) in facts(), words in "[a-z]{3,12}") {
        f.state = JobState::Running;
        match oversee(&f, &Seen::StopRefused(words.clone()), now, TIMING) {
            Oversight::End(o) => {
                prop_assert_eq!(o.state, JobState::Failed);
                prop_assert!(o.reason.contains(&format!("\"{words}\"")), "{}", o.reason);
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
        // A launch refusal is decided by the one retry policy, not by `oversee`.
        let job = dispatching_job(now);
        prop_assert_eq!(
            after_launch_refusal(&job, 1, false, &words, now),
            LaunchRetry::GiveUp(format!("launch failed after 1 attempt: \"{words}\""))
        );
        let retried = matches!(
            after_launch_refusal(&job, 1, true, &words, now),
            LaunchRetry::Retry { delay_seconds: 2, .. }
        );
        prop_assert!(retried);
        match after_launch_refusal(&job, MAX_LAUNCH_ATTEMPTS, true, &words, now) {
            LaunchRetry::GiveUp(reason) => {
                prop_assert!(reason.contains(&format!("\"{words}\"")), "{}", reason);
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}

#[test]
fn a_silent_running_job_is_described_and_a_missing_task_fails_it() {
    let now = t0();
    let f = JobFacts {
        state: JobState::Running,
        operation: Operation::Apply,
        entered: now - Duration::seconds(700),
        last_heard: now - Duration::seconds(601),
        task: Some(task(1)),
        timeout_seconds: 3600,
        cancel_requested_by: None,
        timeout_requested: false,
        spot_requeues: 0,
        polled: false,
        offered: false,
    };
    assert_eq!(
        oversee(&f, &Seen::Nothing, now, TIMING),
        Oversight::Describe
    );
    assert_eq!(oversee(&f, &Seen::Running, now, TIMING), Oversight::Heard);
    match oversee(&f, &Seen::Missing, now, TIMING) {
        Oversight::End(o) => {
            assert_eq!(o.state, JobState::Failed);
            assert!(o.reason.contains("vanished"), "{}", o.reason);
        }
        other => panic!("unexpected {other:?}"),
    }
    let heard = JobFacts {
        last_heard: now - Duration::seconds(5),
        ..f
    };
    assert_eq!(
        oversee(&heard, &Seen::Nothing, now, TIMING),
        Oversight::Wait
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// A job whose platform sends no task event (`eks`) is described on every sweep while it
    /// runs, whatever the silence clock says, and seeing it run costs no write; a timeout is
    /// still enforced from outside.
    #[test]
    fn a_polled_running_job_is_described_every_sweep_and_seeing_it_run_writes_nothing(
        (mut f, now) in facts()
    ) {
        f.state = JobState::Running;
        f.polled = true;
        f.cancel_requested_by = None;
        f.timeout_requested = false;
        let past = now - f.entered > Duration::seconds(i64::from(f.timeout_seconds));
        let nothing = oversee(&f, &Seen::Nothing, now, TIMING);
        let running = oversee(&f, &Seen::Running, now, TIMING);
        if past {
            prop_assert!(matches!(nothing, Oversight::Stop { timeout: true, .. }), "{:?}", nothing);
            prop_assert!(matches!(running, Oversight::Stop { timeout: true, .. }), "{:?}", running);
        } else {
            prop_assert_eq!(nothing, Oversight::Describe);
            prop_assert_eq!(running, Oversight::Wait);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// A job offered to an agent pool is never looked up, requeued or failed by the clock:
    /// it waits for an agent however long, and only a cancel ends it (as canceled).
    #[test]
    fn an_offered_job_waits_for_an_agent_and_only_a_cancel_ends_it((mut f, now) in facts()) {
        f.state = JobState::Dispatching;
        f.offered = true;
        f.task = None;
        match (oversee(&f, &Seen::Nothing, now, TIMING), &f.cancel_requested_by) {
            (Oversight::Wait, None) => {}
            (Oversight::End(o), Some(_)) => prop_assert_eq!(o.state, JobState::Canceled),
            (other, cancel) => prop_assert!(false, "{other:?} with cancel {cancel:?}"),
        }
    }

    /// A lost agent, or a job its agent handed back, is a Spot interruption by another name:
    /// a plan is requeued (within the same bound), a state writer fails naming the agent.
    #[test]
    fn a_lost_agent_requeues_a_plan_within_the_spot_bound_and_fails_a_state_writer(
        (mut f, now) in facts(),
        handed_back in any::<bool>(),
    ) {
        f.state = JobState::Running;
        f.cancel_requested_by = None;
        f.timeout_requested = false;
        let stop = TaskStop {
            stop_code: Some(if handed_back { sortie_core::outcome::AGENT_HANDED_BACK } else { sortie_core::outcome::AGENT_LOST }.into()),
            stopped_reason: Some("agent lost: no heartbeat from agent a1 for 121s".into()),
            ..Default::default()
        };
        match oversee(&f, &Seen::Stopped(stop), now, TIMING) {
            Oversight::Requeue { spot, .. } => {
                prop_assert!(spot);
                prop_assert!(!f.operation.writes_state());
                prop_assert!(f.spot_requeues < MAX_SPOT_REQUEUES);
            }
            Oversight::End(o) => {
                prop_assert_eq!(o.state, JobState::Failed);
                prop_assert!(f.operation.writes_state() || f.spot_requeues >= MAX_SPOT_REQUEUES);
                prop_assert!(o.reason.contains("agent"), "{}", o.reason);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }
}
