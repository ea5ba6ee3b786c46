//! Properties of the stopped-task → outcome mapping.

use proptest::prelude::*;
use sortie_core::{task_outcome, JobState, Operation, TaskStop};

fn arb_stop() -> impl Strategy<Value = TaskStop> {
    (
        proptest::option::of(prop::sample::select(vec![
            "EssentialContainerExited",
            "TaskFailedToStart",
            "SpotInterruption",
            "UserInitiated",
            "TerminationNotice",
            "ServiceSchedulerInitiated",
        ])),
        proptest::option::of(prop::sample::select(vec![
            "sortie: canceled by bob",
            "sortie: timed out after 60s",
            "Essential container in task exited",
            "CannotPullContainerError: x",
            "",
        ])),
        proptest::option::of(-1i32..256),
        proptest::option::of(prop::sample::select(vec![
            "OutOfMemoryError: Container killed due to memory usage",
            "error",
            "",
        ])),
    )
        .prop_map(|(c, r, e, cr)| TaskStop {
            stop_code: c.map(Into::into),
            stopped_reason: r.map(Into::into),
            exit_code: e,
            container_reason: cr.map(Into::into),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_state_writer_is_never_requeued_and_every_outcome_is_final_or_a_plan_retry(stop in arb_stop(), op in prop::sample::select(vec![Operation::Plan, Operation::Apply, Operation::Destroy])) {
        let o = task_outcome(op, &stop);
        prop_assert!(!o.reason.is_empty());
        if o.state == JobState::Queued {
            prop_assert_eq!(op, Operation::Plan, "only a plan is re-run");
        } else {
            prop_assert!(o.state.is_terminal());
        }
        if o.state == JobState::Succeeded {
            prop_assert_eq!(stop.exit_code, Some(0));
        }
        // Running can become every outcome the mapping produces.
        prop_assert!(JobState::Running.can_become(o.state));
    }
}
