//! The store's contract: every test here runs against both stores, through the traits.
//!
//! A test target includes this module and calls [`contract_suite!`] with an expression
//! that makes a fresh, empty store; the macro writes one `#[tokio::test]` per contract
//! test. DynamoDB on moto is the reference: when the two stores disagree, the memory
//! store is the one to fix.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use sortie_core::{
    EnvPath, EnvSettings, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink,
    RunnerSpec,
};
use sortie_store::{JobUpdate, Store, StoreError};

/// Writes one `#[tokio::test]` per contract test, each on a fresh store made by `$make`.
macro_rules! contract_suite {
    ($make:expr) => {
        $crate::contract::contract_suite!(@each $make;
            runner_crud_with_versions_and_conflicts,
            a_runner_linked_to_environments_cannot_be_deleted_and_says_by_whom,
            runners_count_their_links_and_versions_guard_changes,
            rules_are_created_listed_read_in_one_batch_and_deleted,
            rules_are_updated_in_place_checking_the_rule_set_version,
            two_thousand_rules_in_one_scope_list_back_and_resolve,
            rule_versions_move_per_scope_and_per_org,
            environments_crud_relink_and_conflicts,
            submit_takes_the_lock_then_queues_fifo_and_release_hands_it_on,
            twenty_waiting_jobs_get_the_lock_in_submit_order,
            a_released_lock_is_taken_again_by_the_next_submit,
            environments_lock_independently,
            idempotent_submit_returns_the_same_job_and_refuses_a_changed_body,
            an_idempotency_key_binds_until_it_expires_then_counts_as_absent,
            two_concurrent_submits_to_an_idle_environment_take_the_lock_once,
            the_same_job_submitted_twice_is_a_conflict_whether_the_environment_is_idle_or_busy,
            job_transitions_are_conditional_and_recorded,
            racing_claims_on_one_job_succeed_exactly_once,
            a_waiting_job_is_canceled_at_once_and_leaves_the_queue,
            a_waiting_job_is_canceled_and_leaves_the_queue_but_the_holder_is_not,
            jobs_list_newest_first_with_an_opaque_cursor,
            launched_jobs_are_listed_for_the_sweeper_and_can_be_marked,
            pending_sends_and_active_jobs_follow_the_sparse_index,
            environment_settings_round_trip_and_clear_through_create_get_and_update,
            a_runners_tool_and_tool_version_round_trip,
            next_drift_at_follows_the_schedule_and_due_drift_checks_lists_only_due_environments_in_order,
            advance_drift_is_conditional_on_the_fire_time_and_records_a_skip,
            record_drift_sets_the_result_and_an_older_apply_never_replaces_a_newer,
            a_job_awaiting_approval_is_due_after_its_deadline_and_leaves_the_list_when_decided,
            an_awaiting_jobs_decision_is_written_once_without_moving_it,
            plan_phase_review_tool_used_and_clear_summary_round_trip,
            submit_if_idle_takes_an_idle_lock_and_writes_nothing_when_busy,
            a_speculative_plan_takes_no_lock_joins_no_queue_and_is_a_pending_send,
            connections_deliveries_bindings_and_pull_requests_round_trip,
            memberships_are_granted_listed_scoped_to_org_and_revoked,
            an_offered_job_is_claimed_once_by_one_agent_and_heartbeats_only_for_that_claim,
            agent_pools_are_created_listed_updated_with_versions_and_deleted,
            a_pools_last_claim_only_moves_forward_and_keeps_the_version,
            environments_under_a_group_are_its_own_and_its_descendants_by_path,
            many_refused_launches_fold_into_a_bounded_history,
            an_environment_is_locked_once_and_unlocked_without_a_version_bump,
            a_group_freeze_is_held_once_and_read_from_every_group_below,
            a_submit_to_a_locked_or_frozen_environment_writes_nothing,
            policy_sets_are_created_read_listed_updated_and_deleted_with_versions,
            policy_sets_for_a_group_are_its_own_and_its_ancestors,
            policy_sets_version_moves_on_every_write_in_its_org_and_the_root,
            an_expiry_entry_is_set_kept_for_the_same_end_and_listed_when_due,
            due_expiries_page_to_the_end_in_due_order,
            an_environment_is_marked_destroyed_and_cleared_without_a_version_bump,
            a_destroyed_environment_takes_no_job_by_any_way_of_writing_one,
            a_subjects_organisations_follow_its_grants_and_revokes,
            an_issuer_bound_grant_lists_only_for_its_issuer,
            notification_destinations_are_created_listed_updated_and_deleted_with_versions,
            a_destinations_history_is_a_ring_of_a_hundred_slots,
        );
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::contract::$name(std::sync::Arc::new($make)).await;
            }
        )*
    };
}
pub(crate) use contract_suite;

mod agent_pools;
pub use agent_pools::*;
pub mod artifacts;
mod drift;
pub use drift::*;
mod environments;
pub use environments::*;
mod expiry;
pub use expiry::*;
mod idempotency;
pub use idempotency::*;
mod jobs;
pub use jobs::*;
mod launch_history;
pub use launch_history::*;
mod locks;
pub use locks::*;
mod memberships;
pub use memberships::*;
mod notifications;
pub use notifications::*;
mod policy_sets;
pub use policy_sets::*;
mod queue;
pub use queue::*;
mod reviews;
pub use reviews::*;
mod rules;
pub use rules::*;
mod runners;
pub use runners::*;
mod vcs;
pub use vcs::*;

const ENV: &str = "acme/payments/prod";

fn env() -> EnvPath {
    EnvPath::parse(ENV).unwrap()
}

fn runner(id: &str) -> Runner {
    Runner {
        id: RunnerId::parse(id).unwrap(),
        spec: RunnerSpec::parse("description: test\nrunner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/s}").unwrap(),
    }
}

fn environment(path: &str, runner: &str) -> Environment {
    Environment {
        settings: Default::default(),
        path: EnvPath::parse(path).unwrap(),
        env_type: "development".into(),
        labels: BTreeMap::from([("tier".into(), "gold".into())]),
        tags: BTreeSet::new(),
        runner: RunnerLink {
            runner_id: RunnerId::parse(runner).unwrap(),
            rule_id: "r1".into(),
            linked_by: "alice".into(),
            linked_at: Utc::now(),
        },
    }
}

fn job(env: &str) -> Job {
    let req = JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":"output \"x\" { value = 1 }"},"variables":{"n":3,"s":"x"}}"#).unwrap();
    Job::new(
        sortie_core::tokens::new_id(),
        EnvPath::parse(env).unwrap(),
        RunnerId::parse("acme/local").unwrap(),
        req,
        "alice".into(),
        Utc::now(),
    )
}

/// The runner `acme/local` (if not there yet) and an environment linked to it.
pub(crate) async fn setup_env<S: Store>(s: &S, path: &str) {
    match s.create_runner(&runner("acme/local")).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    s.create_environment(&environment(path, "acme/local"))
        .await
        .unwrap();
}

async fn step<S: Store>(s: &S, id: &str, from: JobState, to: JobState) -> sortie_store::JobRecord {
    s.transition_job(
        &id.into(),
        from,
        to,
        Utc::now(),
        "step",
        JobUpdate::default(),
    )
    .await
    .unwrap()
}

async fn pending_ids<S: Store>(s: &S, before: DateTime<Utc>) -> Vec<String> {
    s.pending_sends(before, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id.to_string())
        .collect()
}

/// An environment at `path` (linked to `acme/local`) with `settings`.
async fn setup_env_with<S: Store>(s: &S, path: &str, settings: EnvSettings) -> Environment {
    match s.create_runner(&runner("acme/local")).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    let mut env = environment(path, "acme/local");
    env.settings = settings;
    s.create_environment(&env).await.unwrap();
    env
}
