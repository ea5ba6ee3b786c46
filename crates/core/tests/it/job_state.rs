//! The job state machine: allowed transitions, terminal states, recorded history.

use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use sortie_core::job::ALL_STATES;
use sortie_core::{EnvPath, Job, JobRequest, JobState, RunnerId};

fn job() -> Job {
    let req = JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap();
    Job::new(
        "01JOB",
        EnvPath::parse("acme/payments/prod").unwrap(),
        RunnerId::parse("acme/r").unwrap(),
        req,
        "alice".into(),
        Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
    )
}

#[test]
fn the_happy_path_records_every_transition_with_time_and_reason() {
    let mut j = job();
    let t = |s: i64| Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap();
    j.transition(JobState::Dispatching, t(1), "claimed")
        .unwrap();
    j.transition(JobState::Running, t(2), "task arn:aws:ecs:...:task/c/1")
        .unwrap();
    j.transition(JobState::Succeeded, t(60), "exit code 0")
        .unwrap();
    let states: Vec<JobState> = j.transitions.iter().map(|t| t.to).collect();
    assert_eq!(
        states,
        vec![
            JobState::Queued,
            JobState::Dispatching,
            JobState::Running,
            JobState::Succeeded
        ]
    );
    assert_eq!(j.transitions[0].from, None);
    assert_eq!(j.transitions[3].from, Some(JobState::Running));
    assert_eq!(j.transitions[3].at, t(60));
    assert_eq!(j.reason(), "exit code 0");
}

#[test]
fn an_illegal_transition_is_an_error_value_and_changes_nothing() {
    let mut j = job();
    let before = j.clone();
    let err = j
        .transition(JobState::Succeeded, Utc::now(), "skip ahead")
        .unwrap_err();
    assert_eq!((err.from, err.to), (JobState::Queued, JobState::Succeeded));
    assert!(err
        .to_string()
        .contains("cannot go from queued to succeeded"));
    assert_eq!(j, before);
}

#[test]
fn the_transition_table_is_exactly_the_documented_one() {
    use JobState::*;
    let allowed: Vec<(JobState, JobState)> = ALL_STATES
        .iter()
        .flat_map(|a| ALL_STATES.iter().map(move |b| (*a, *b)))
        .filter(|(a, b)| a.can_become(*b))
        .collect();
    assert_eq!(
        allowed,
        vec![
            (Queued, Dispatching),
            (Queued, Canceled),
            (Dispatching, Queued),
            (Dispatching, Running),
            (Dispatching, Failed),
            (Dispatching, Canceled),
            (Running, Queued),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Canceled),
            (Running, TimedOut),
            (Running, AwaitingApproval),
            (AwaitingApproval, Queued),
            (AwaitingApproval, Canceled),
            (AwaitingApproval, Discarded),
        ]
    );
    for s in ALL_STATES {
        assert_eq!(
            s.is_terminal(),
            matches!(s, Succeeded | Failed | Canceled | TimedOut | Discarded)
        );
        assert_eq!(s.is_active(), matches!(s, Dispatching | Running));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_sequence_of_events_leaves_a_terminal_job_non_terminal(events in prop::collection::vec(0..ALL_STATES.len(), 0..40)) {
        let mut j = job();
        let mut was_terminal: Option<JobState> = None;
        let mut applied = 0u32;
        for (i, e) in events.iter().enumerate() {
            let to = ALL_STATES[*e];
            let before = j.clone();
            let result = j.transition(to, Utc.timestamp_opt(1_700_000_000 + i as i64, 0).unwrap(), "event");
            match was_terminal {
                Some(terminal) => {
                    prop_assert!(result.is_err());
                    prop_assert_eq!(j.state, terminal);
                    prop_assert_eq!(&j, &before);
                }
                None => {
                    prop_assert_eq!(result.is_ok(), before.state.can_become(to));
                    if result.is_err() { prop_assert_eq!(&j, &before); } else { applied += 1; }
                }
            }
            if j.state.is_terminal() { was_terminal = Some(j.state); }
            // The history always ends in the current state, and every entry is a legal step.
            prop_assert_eq!(j.transitions.last().unwrap().to, j.state);
            for t in &j.transitions[1..] {
                prop_assert!(t.from.is_some_and(|f| f.can_become(t.to)), "{t:?}");
            }
            // Nothing is lost: the counts and the dropped entries add up to every transition
            // taken (the creation included).
            let taken = 1 + applied;
            let kept: u32 = j.transitions.iter().map(|t| t.count).sum();
            prop_assert_eq!(kept + j.transitions_dropped, taken);
            // Unfolded, the history chains from→to (folding moves a repeated step to the end).
            if j.transitions.iter().all(|t| t.count == 1) && j.transitions_dropped == 0 {
                for w in j.transitions.windows(2) {
                    prop_assert_eq!(w[1].from, Some(w[0].to));
                }
            }
        }
    }
}

/// A reviewed job: `approval: required` on the environment, `four_eyes` as given.
fn reviewed(operation: &str, four_eyes: bool) -> Job {
    use sortie_core::{Approval, EnvSettings, Environment, RunnerLink, RunnerSpec};
    let env = Environment {
        path: EnvPath::parse("acme/payments/prod").unwrap(),
        env_type: "production".into(),
        labels: Default::default(),
        tags: Default::default(),
        runner: RunnerLink {
            runner_id: RunnerId::parse("acme/r").unwrap(),
            rule_id: "default".into(),
            linked_by: "admin".into(),
            linked_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        },
        settings: EnvSettings {
            approval: Approval::Required,
            four_eyes,
            tool_version: Some("~> 1.0".into()),
            ..Default::default()
        },
    };
    let runner = RunnerSpec::parse(
        "tool: opentofu\ntool_version: 1.6.0\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/s\n",
    )
    .unwrap();
    let req = JobRequest::parse(&format!(
        r#"{{"operation":"{operation}","files":{{"main.tf":""}}}}"#
    ))
    .unwrap();
    Job::for_environment(
        "01JOB",
        &env,
        runner,
        req,
        "alice".into(),
        Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
    )
}

#[test]
fn only_a_state_writing_job_on_a_reviewed_environment_is_reviewed_and_the_environment_picks_the_version(
) {
    let apply = reviewed("apply", true);
    let review = apply.review.as_ref().expect("an apply is reviewed");
    assert_eq!(review.phase, sortie_core::JobPhase::Plan);
    assert_eq!(review.timeout_seconds, 24 * 3600);
    assert!(review.four_eyes);
    assert!(reviewed("destroy", false).review.is_some());
    assert!(
        reviewed("plan", true).review.is_none(),
        "a plan is never reviewed"
    );
    // The environment's version wins; the runner's tool fills the gap.
    assert_eq!(apply.tool_version.as_deref(), Some("~> 1.0"));
    assert_eq!(apply.tool, Some(sortie_core::ToolName::Opentofu));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A decision is allowed exactly when the job awaits approval, an approval is the first
    /// decision, and, under four eyes, an approval does not come from the requester; a
    /// discard never meets four eyes, and can follow an approval still waiting.
    #[test]
    fn a_decision_is_refused_exactly_when_the_state_or_four_eyes_forbid_it(
        state in 0..ALL_STATES.len(),
        four_eyes in any::<bool>(),
        by_requester in any::<bool>(),
        approve in any::<bool>(),
        approved_before in any::<bool>(),
    ) {
        use sortie_core::{review_refusal, ReviewDecision, ReviewRefusal, ReviewVerdict};
        let mut job = reviewed("apply", four_eyes);
        job.state = ALL_STATES[state];
        if approved_before {
            // An approval that waits for its pull request's requirements.
            job.review.as_mut().unwrap().decision = Some(ReviewDecision {
                verdict: ReviewVerdict::Approved,
                by: "carol".into(),
                at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
                comment: None,
                overrode_policy: false,
            });
        }
        let by = if by_requester { "alice" } else { "bob" };
        let verdict = if approve { ReviewVerdict::Approved } else { ReviewVerdict::Discarded };
        let expected = if job.state != JobState::AwaitingApproval {
            Some(ReviewRefusal::NotAwaiting(job.state))
        } else if approved_before && approve {
            Some(ReviewRefusal::AlreadyApproved)
        } else if four_eyes && by_requester && approve {
            Some(ReviewRefusal::OwnJob)
        } else {
            None
        };
        prop_assert_eq!(review_refusal(&job, by, verdict), expected);
    }
}
