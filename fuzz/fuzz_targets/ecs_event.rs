//! The ECS "Task State Change" detail: `serde_json::from_slice::<EcsTaskStateChange>`,
//! then `task_stop` (with the runner container's name, with another name, and with
//! none, as the engine may call it) and `sortie_core::task_outcome` for each operation.
//!
//! `ecs_event.rs` is compiled in from crates/lifecycle rather than linked through
//! `sortie-lifecycle`, whose store and launchers would pull the whole AWS SDK into
//! an instrumented build; the module needs only serde and sortie-core. If it ever
//! needs more, this target stops compiling and must switch to the crate.
#![no_main]

#[allow(dead_code, missing_docs)]
#[path = "../../crates/lifecycle/src/ecs_event.rs"]
mod ecs_event;

use ecs_event::EcsTaskStateChange;
use libfuzzer_sys::fuzz_target;
use sortie_core::{task_outcome, JobState, Operation};

fuzz_target!(|data: &[u8]| {
    let Ok(change) = serde_json::from_slice::<EcsTaskStateChange>(data) else {
        return;
    };
    let back: EcsTaskStateChange =
        serde_json::from_value(serde_json::to_value(&change).expect("serialises"))
            .expect("a decoded event reads back");
    assert_eq!(back, change);
    for container in [Some("runner"), Some(""), None] {
        let stop = change.task_stop(container);
        for op in [Operation::Plan, Operation::Apply, Operation::Destroy] {
            let outcome = task_outcome(op, &stop);
            assert!(!outcome.reason.is_empty(), "an outcome with no reason");
            assert!(
                outcome.state.is_terminal() || outcome.state == JobState::Queued,
                "a stopped task moved its job to {:?}",
                outcome.state
            );
            if outcome.state == JobState::Queued {
                assert_eq!(op, Operation::Plan, "a state writer was requeued");
            }
        }
    }
});
