//! The store's contract: every test here runs against both stores, through the traits.
//!
//! A test target includes this module and calls [`contract_suite!`] with an expression
//! that makes a fresh, empty store; the macro writes one `#[tokio::test]` per contract
//! test. DynamoDB on moto is the reference: when the two stores disagree, the memory
//! store is the one to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Timelike, Utc};
use sortie_core::drift::{DriftSkipped, DriftStatus, DriftVerdict};
use sortie_core::{
    Approval, ChangeSummary, DriftRemediation, EnvPath, EnvSettings, Environment, Grantee,
    GroupPath, Job, JobPhase, JobRequest, JobState, Membership, Review, ReviewDecision,
    ReviewVerdict, Role, Runner, RunnerId, RunnerLink, RunnerRule, RunnerSpec, ToolName, ToolUsed,
};
use sortie_store::{
    IdempotencyKey, JobUpdate, LastApply, MembershipRecord, PhaseRecord, Released, Store,
    StoreError,
};

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

pub mod artifacts;
mod expiry;
pub use expiry::*;
mod locks;
pub use locks::*;
mod memberships;
pub use memberships::*;
mod notifications;
pub use notifications::*;
mod policy_sets;
pub use policy_sets::*;

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

fn rule(id: &str, scope: &str, runner: &str) -> RunnerRule {
    RunnerRule {
        id: id.into(),
        scope: GroupPath::parse(scope).unwrap(),
        runner_id: RunnerId::parse(runner).unwrap(),
        criteria: Default::default(),
        priority: 0,
    }
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

// ---------------------------------------------------------------- runners

pub async fn runner_crud_with_versions_and_conflicts<S: Store + 'static>(s: Arc<S>) {
    let created = s.create_runner(&runner("acme/payments/r1")).await.unwrap();
    assert_eq!(created.version, 1);
    assert!(matches!(
        s.create_runner(&runner("acme/payments/r1")).await,
        Err(StoreError::AlreadyExists { kind: "runner", .. })
    ));
    let got = s
        .get_runner(&RunnerId::parse("acme/payments/r1").unwrap())
        .await
        .unwrap();
    assert_eq!(got.item, created.item, "round-trips through the store");
    s.create_runner(&runner("acme/payments/r2")).await.unwrap();
    s.create_runner(&runner("acme/other")).await.unwrap();
    let listed = s
        .list_runners(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| r.item.id.to_string())
            .collect::<Vec<_>>(),
        vec!["acme/payments/r1", "acme/payments/r2"]
    );

    let mut changed = runner("acme/payments/r1");
    changed.spec.description = "changed".into();
    assert!(matches!(
        s.update_runner(&changed, Some(7)).await,
        Err(StoreError::VersionMismatch {
            expected: 7,
            actual: 1,
            ..
        })
    ));
    let updated = s.update_runner(&changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(
        s.get_runner(&changed.id)
            .await
            .unwrap()
            .item
            .spec
            .description,
        "changed"
    );
    assert!(matches!(
        s.delete_runner(&changed.id, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_runner(&changed.id, Some(2)).await.unwrap();
    assert!(matches!(
        s.get_runner(&changed.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.update_runner(&changed, None).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn a_runner_linked_to_environments_cannot_be_deleted_and_says_by_whom<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    s.create_runner(&runner("acme/local")).await.unwrap();
    s.create_environment(&environment("acme/payments/prod", "acme/local"))
        .await
        .unwrap();
    s.create_environment(&environment("acme/web/dev", "acme/local"))
        .await
        .unwrap();
    let id = RunnerId::parse("acme/local").unwrap();
    match s.delete_runner(&id, None).await {
        Err(StoreError::InUse { by, .. }) => {
            assert_eq!(by, vec!["acme/payments/prod", "acme/web/dev"])
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    s.delete_environment(&EnvPath::parse("acme/payments/prod").unwrap(), None)
        .await
        .unwrap();
    s.delete_environment(&EnvPath::parse("acme/web/dev").unwrap(), None)
        .await
        .unwrap();
    s.delete_runner(&id, None).await.unwrap();
}

pub async fn runners_count_their_links_and_versions_guard_changes<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, "acme/payments/a").await;
    setup_env(&*s, "acme/payments/b").await;
    let id = RunnerId::parse("acme/local").unwrap();
    assert!(matches!(
        s.create_runner(&runner("acme/local")).await,
        Err(StoreError::AlreadyExists { kind: "runner", .. })
    ));
    assert!(matches!(
        s.delete_runner(&id, None).await,
        Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a", "acme/payments/b"]
    ));
    assert!(matches!(
        s.update_runner(&runner("acme/local"), Some(7)).await,
        Err(StoreError::VersionMismatch {
            expected: 7,
            actual: 1,
            ..
        })
    ));
    assert_eq!(
        s.update_runner(&runner("acme/local"), Some(1))
            .await
            .unwrap()
            .version,
        2
    );
    s.create_runner(&runner("acme/other")).await.unwrap();
    let link = environment(ENV, "acme/other").runner;
    let a = EnvPath::parse("acme/payments/a").unwrap();
    assert!(matches!(
        s.relink_environment(&a, &link, Some(3)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    assert_eq!(
        s.relink_environment(&a, &link, Some(1))
            .await
            .unwrap()
            .version,
        2
    );
    s.delete_environment(&EnvPath::parse("acme/payments/b").unwrap(), None)
        .await
        .unwrap();
    s.delete_runner(&id, Some(2)).await.unwrap();
    assert!(matches!(
        s.delete_runner(&RunnerId::parse("acme/other").unwrap(), None)
            .await,
        Err(StoreError::InUse { by, .. }) if by == vec!["acme/payments/a"]
    ));
    let names: Vec<String> = s
        .list_runners(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.item.id.to_string())
        .collect();
    assert_eq!(names, vec!["acme/other"]);
}

// ---------------------------------------------------------------- rules

pub async fn rules_are_created_listed_read_in_one_batch_and_deleted<S: Store + 'static>(s: Arc<S>) {
    s.create_rule(&rule("shared", "", "fargate-shared"))
        .await
        .unwrap();
    s.create_rule(&rule("org", "acme", "acme/r")).await.unwrap();
    let v = s
        .create_rule(&rule("team", "acme/payments", "acme/r"))
        .await
        .unwrap();
    assert_eq!(v.version, 1);
    s.create_rule(&rule("team-2", "acme/payments", "acme/r"))
        .await
        .unwrap();
    s.create_rule(&rule("elsewhere", "globex", "globex/r"))
        .await
        .unwrap();
    assert!(matches!(
        s.create_rule(&rule("team", "acme/payments", "acme/r"))
            .await,
        Err(StoreError::AlreadyExists { kind: "rule", .. })
    ));
    let listed = s
        .list_rules(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.version, 2);
    assert_eq!(listed.item.len(), 2);
    let mut ids: Vec<String> = s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        vec!["org", "shared", "team", "team-2"],
        "ancestors' rules, never a sibling's"
    );
    assert!(matches!(
        s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", Some(1))
            .await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", Some(2))
        .await
        .unwrap();
    assert!(matches!(
        s.delete_rule(&GroupPath::parse("acme/payments").unwrap(), "team", None)
            .await,
        Err(StoreError::NotFound { kind: "rule", .. })
    ));
}

/// Rules are stored one per item: no number of rules in a scope reaches DynamoDB's 400 KB
/// item limit (2,000 rules with labels were about 500 KB as one rule-set item).
pub async fn two_thousand_rules_in_one_scope_list_back_and_resolve<S: Store + 'static>(s: Arc<S>) {
    const N: usize = 2000;
    let make = |i: usize| {
        let mut r = rule(&format!("rule-{i:04}"), "acme/payments", "acme/r");
        r.priority = i as i32;
        r.criteria.labels = BTreeMap::from([
            (
                "team".to_string(),
                format!("team-{i:04}-{}", "x".repeat(160)),
            ),
            ("cost-center".to_string(), format!("cc-{i}")),
        ]);
        r
    };
    let mut last = 0;
    for i in 0..N {
        last = s.create_rule(&make(i)).await.unwrap().version;
    }
    assert_eq!(last, N as u64, "one version per create");
    let scope = GroupPath::parse("acme/payments").unwrap();
    let listed = s.list_rules(&scope).await.unwrap();
    assert_eq!(listed.version, N as u64);
    assert_eq!(listed.item.len(), N);
    let mut got = listed.item.clone();
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got, (0..N).map(make).collect::<Vec<_>>());
    let all = s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap();
    assert_eq!(all.len(), N);
    // They resolve: the environment labelled like rule 1234 picks it.
    let index = sortie_core::RuleIndex::compile(all);
    let path = EnvPath::parse("acme/payments/eu/prod").unwrap();
    let labels = make(1234).criteria.labels;
    let pick = index
        .resolve(&sortie_core::EnvFacts {
            path: &path,
            env_type: "production",
            labels: &labels,
            tags: &BTreeSet::new(),
        })
        .unwrap();
    assert_eq!(pick.rule.id, "rule-1234");
    // And they are still changed one by one under the scope's version.
    let v = s
        .update_rule(&make(7), Some(N as u64))
        .await
        .unwrap()
        .version;
    assert_eq!(v, N as u64 + 1);
    s.delete_rule(&scope, "rule-0008", Some(v)).await.unwrap();
    assert_eq!(s.list_rules(&scope).await.unwrap().item.len(), N - 1);
}

/// Each change bumps its scope's rule-set version and its organisation's rule version; a
/// root (shared) rule moves every organisation's; another organisation's never does.
pub async fn rule_versions_move_per_scope_and_per_org<S: Store + 'static>(s: Arc<S>) {
    assert_eq!(s.rules_version(Some("acme")).await.unwrap(), 0);
    assert_eq!(s.rules_version(None).await.unwrap(), 0);
    s.create_rule(&rule("a", "acme", "acme/r")).await.unwrap();
    let v1 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v1 > 0);
    s.create_rule(&rule("b", "acme/payments", "acme/r"))
        .await
        .unwrap();
    let v2 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v2 > v1, "a deeper scope of the org moves it");
    let globex = s.rules_version(Some("globex")).await.unwrap();
    s.create_rule(&rule("g", "globex", "globex/r"))
        .await
        .unwrap();
    assert_eq!(
        s.rules_version(Some("acme")).await.unwrap(),
        v2,
        "another org's rule"
    );
    assert!(s.rules_version(Some("globex")).await.unwrap() > globex);
    // Update and delete move it too, and the scope's own version goes 1, 2, 3.
    let scope = GroupPath::parse("acme/payments").unwrap();
    let up = s
        .update_rule(&rule("b", "acme/payments", "acme/other"), Some(1))
        .await
        .unwrap();
    assert_eq!(up.version, 2);
    let v3 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v3 > v2);
    s.delete_rule(&scope, "b", Some(2)).await.unwrap();
    let v4 = s.rules_version(Some("acme")).await.unwrap();
    assert!(v4 > v3);
    assert_eq!(
        s.list_rules(&scope).await.unwrap().version,
        3,
        "kept after the last delete"
    );
    // A refused change moves nothing.
    assert!(s.delete_rule(&scope, "b", None).await.is_err());
    assert_eq!(s.rules_version(Some("acme")).await.unwrap(), v4);
    // A shared rule can apply in every org: every org's version moves.
    let root = s.rules_version(None).await.unwrap();
    s.create_rule(&rule("shared", "", "fargate-shared"))
        .await
        .unwrap();
    assert!(s.rules_version(None).await.unwrap() > root);
    assert!(s.rules_version(Some("acme")).await.unwrap() > v4);
    assert!(s.rules_version(Some("globex")).await.unwrap() > globex + 1);
}

pub async fn rules_are_updated_in_place_checking_the_rule_set_version<S: Store + 'static>(
    s: Arc<S>,
) {
    let scope = GroupPath::parse("acme/payments").unwrap();
    s.create_rule(&rule("team", "acme/payments", "acme/r"))
        .await
        .unwrap();
    let other = s
        .create_rule(&rule("team-2", "acme/payments", "acme/r"))
        .await
        .unwrap();
    assert_eq!(other.version, 2);

    // An update replaces the rule, keeps its place, and bumps the rule-set version.
    let mut changed = rule("team", "acme/payments", "acme/payments/fast");
    changed.priority = 5;
    changed.criteria.env_type = Some("production".into());
    let updated = s.update_rule(&changed, Some(2)).await.unwrap();
    assert_eq!(updated.version, 3);
    assert_eq!(updated.item, changed);
    let listed = s.list_rules(&scope).await.unwrap();
    assert_eq!(listed.version, 3);
    assert_eq!(listed.item, vec![changed.clone(), other.item.clone()]);
    assert!(s
        .rules_for(&GroupPath::parse("acme/payments/eu").unwrap())
        .await
        .unwrap()
        .contains(&changed));
    // Without an expected version it still writes on the version it read.
    changed.priority = 6;
    assert_eq!(s.update_rule(&changed, None).await.unwrap().version, 4);

    // A stale version is refused, as delete_rule refuses it, and changes nothing.
    let mut stale = changed.clone();
    stale.priority = 99;
    match s.update_rule(&stale, Some(3)).await {
        Err(StoreError::VersionMismatch {
            kind: "rule",
            id,
            expected: 3,
            actual: 4,
        }) => assert_eq!(id, "acme/payments:team"),
        other => panic!("expected VersionMismatch, got {other:?}"),
    }
    let after = s.list_rules(&scope).await.unwrap();
    assert_eq!(after.version, 4);
    assert_eq!(after.item, vec![changed.clone(), other.item.clone()]);

    // A rule that is not there, in a scope with rules or in one without, is NotFound.
    match s
        .update_rule(&rule("ghost", "acme/payments", "acme/r"), None)
        .await
    {
        Err(StoreError::NotFound { kind: "rule", id }) => assert_eq!(id, "acme/payments:ghost"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    match s
        .update_rule(&rule("team", "globex", "globex/r"), None)
        .await
    {
        Err(StoreError::NotFound { kind: "rule", id }) => assert_eq!(id, "globex:team"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(s.list_rules(&scope).await.unwrap().version, 4);
    assert_eq!(
        s.list_rules(&GroupPath::parse("globex").unwrap())
            .await
            .unwrap()
            .version,
        0,
        "a refused update creates no rule set"
    );
}

// ---------------------------------------------------------------- environments

pub async fn environments_crud_relink_and_conflicts<S: Store + 'static>(s: Arc<S>) {
    s.create_runner(&runner("acme/local")).await.unwrap();
    s.create_runner(&runner("acme/second")).await.unwrap();
    let path = EnvPath::parse("acme/payments/prod").unwrap();
    assert!(matches!(
        s.create_environment(&environment("acme/payments/prod", "acme/missing"))
            .await,
        Err(StoreError::NotFound { kind: "runner", .. })
    ));
    let before = Utc::now();
    let created = s
        .create_environment(&environment("acme/payments/prod", "acme/local"))
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    // The creation time is set once, by the create, and kept by every later write.
    let born = created
        .item
        .created_at
        .expect("a created environment has created_at");
    assert!(born >= before && born <= Utc::now(), "{born}");
    assert_eq!(
        s.get_environment(&path).await.unwrap().item.created_at,
        Some(born)
    );
    assert!(matches!(
        s.create_environment(&environment("acme/payments/prod", "acme/local"))
            .await,
        Err(StoreError::AlreadyExists { .. })
    ));
    let listed = s
        .list_environments(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].item.environment.path, path);

    let mut changed = created.item.environment.clone();
    changed.env_type = "production".into();
    changed.labels.insert("team".into(), "blue".into());
    changed.runner.runner_id = RunnerId::parse("acme/second").unwrap(); // ignored: updates never relink
    let updated = s.update_environment(&changed, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.item.environment.env_type, "production");
    assert_eq!(
        updated.item.created_at,
        Some(born),
        "an update keeps created_at"
    );
    assert_eq!(
        updated.item.environment.runner.runner_id.to_string(),
        "acme/local",
        "an update never relinks"
    );
    assert!(matches!(
        s.update_environment(&changed, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));

    let link = RunnerLink {
        runner_id: RunnerId::parse("acme/second").unwrap(),
        rule_id: "r2".into(),
        linked_by: "bob".into(),
        linked_at: Utc::now(),
    };
    let relinked = s.relink_environment(&path, &link, Some(2)).await.unwrap();
    assert_eq!(relinked.version, 3);
    let stored = s.get_environment(&path).await.unwrap().item;
    assert_eq!(stored.created_at, Some(born), "a relink keeps created_at");
    assert_eq!(
        stored.created(),
        born,
        "and creation is not the new link's time"
    );
    assert_eq!(
        s.get_environment(&path)
            .await
            .unwrap()
            .item
            .environment
            .runner
            .linked_by,
        "bob"
    );
    // The old runner is free now, the new one is not.
    s.delete_runner(&RunnerId::parse("acme/local").unwrap(), None)
        .await
        .unwrap();
    assert!(matches!(
        s.delete_runner(&RunnerId::parse("acme/second").unwrap(), None)
            .await,
        Err(StoreError::InUse { .. })
    ));
    s.delete_environment(&path, Some(3)).await.unwrap();
    assert!(matches!(
        s.get_environment(&path).await,
        Err(StoreError::NotFound { .. })
    ));
}

// ---------------------------------------------------------------- the environment lock

pub async fn submit_takes_the_lock_then_queues_fifo_and_release_hands_it_on<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let (a, b, c) = (job(ENV), job(ENV), job(ENV));
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&b, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&c, None).await.unwrap().took_lock);
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(rec.active_job.as_deref(), Some(a.id.as_str()));
    assert_eq!(rec.queued_count, 2);
    assert!(matches!(
        s.delete_environment(&env, None).await,
        Err(StoreError::InUse { .. })
    ));
    // The lock holder is a pending send until it is claimed.
    let pending = s
        .pending_sends(Utc::now() + Duration::seconds(1), 100)
        .await
        .unwrap();
    assert!(pending.iter().any(|j| j.id == a.id) && !pending.iter().any(|j| j.id == b.id));

    assert_eq!(
        s.release_environment(&env, &b.id).await.unwrap(),
        Released::NotHeld,
        "only the holder releases"
    );
    match s.release_environment(&env, &a.id).await.unwrap() {
        Released::HandedTo(next) => assert_eq!(next.id, b.id, "FIFO"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.release_environment(&env, &a.id).await.unwrap(),
        Released::NotHeld,
        "a second release is harmless"
    );
    match s.release_environment(&env, &b.id).await.unwrap() {
        Released::HandedTo(next) => assert_eq!(next.id, c.id),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.release_environment(&env, &c.id).await.unwrap(),
        Released::Idle
    );
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!((rec.active_job, rec.queued_count), (None, 0));
}

pub async fn twenty_waiting_jobs_get_the_lock_in_submit_order<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let jobs: Vec<Job> = (0..20).map(|_| job(ENV)).collect();
    let mut took = vec![];
    for j in &jobs {
        took.push(s.submit_job(j, None).await.unwrap().took_lock);
    }
    assert!(took[0] && took[1..].iter().all(|t| !t));
    let rec = s.get_environment(&env()).await.unwrap();
    assert_eq!(rec.item.active_job.as_deref(), Some(jobs[0].id.as_str()));
    assert_eq!((rec.item.queued_count, rec.item.queue_seq), (19, 19));
    assert_eq!(rec.version, 1, "the lock never bumps the version");
    assert!(matches!(
        s.delete_environment(&env(), None).await,
        Err(StoreError::InUse { by, .. }) if by == vec![jobs[0].id.clone()]
    ));

    let mut order = vec![jobs[0].id.clone()];
    let mut holder = jobs[0].id.clone();
    assert_eq!(
        s.release_environment(&env(), &jobs[5].id).await.unwrap(),
        Released::NotHeld,
        "only the holder releases"
    );
    while let Released::HandedTo(next) = s.release_environment(&env(), &holder).await.unwrap() {
        assert_eq!(
            s.release_environment(&env(), &holder).await.unwrap(),
            Released::NotHeld,
            "a second release is harmless"
        );
        holder = next.id.clone();
        order.push(next.id);
    }
    assert_eq!(
        order,
        jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>(),
        "strict FIFO, even within one millisecond"
    );
    let rec = s.get_environment(&env()).await.unwrap().item;
    assert_eq!((rec.active_job, rec.queued_count), (None, 0));
    s.delete_environment(&env(), Some(1)).await.unwrap();
}

pub async fn a_released_lock_is_taken_again_by_the_next_submit<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let a = job(ENV);
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert_eq!(
        s.release_environment(&env(), &a.id).await.unwrap(),
        Released::Idle
    );
    assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
    assert!(matches!(
        s.submit_job(&job("acme/payments/ghost"), None).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    assert!(matches!(
        s.submit_job(&a, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
}

pub async fn environments_lock_independently<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    setup_env(&*s, "acme/payments/eu").await;
    assert!(s.submit_job(&job(ENV), None).await.unwrap().took_lock);
    assert!(
        s.submit_job(&job("acme/payments/eu"), None)
            .await
            .unwrap()
            .took_lock
    );
    assert!(!s.submit_job(&job(ENV), None).await.unwrap().took_lock);
}

pub async fn idempotent_submit_returns_the_same_job_and_refuses_a_changed_body<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let key = IdempotencyKey {
        key: "deploy-42".into(),
        request_hash: "h1".into(),
    };
    let first = s.submit_job(&job(ENV), Some(&key)).await.unwrap();
    let retry = s.submit_job(&job(ENV), Some(&key)).await.unwrap();
    assert!(retry.replayed && !retry.took_lock);
    assert_eq!(retry.job.id, first.job.id);
    let changed = IdempotencyKey {
        key: "deploy-42".into(),
        request_hash: "h2".into(),
    };
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&changed)).await,
        Err(StoreError::IdempotencyMismatch { job_id, .. }) if job_id == first.job.id
    ));
    let page = s.list_jobs(&env(), 10, None).await.unwrap();
    assert_eq!(page.jobs.len(), 1, "a replay writes no second job");
}

/// Back-dates an idempotency key, as each store allows (DynamoDB's TTL deletes an
/// expired item only days later; until then the store itself must ignore it).
#[allow(async_fn_in_trait)]
pub trait ExpireKey {
    /// Sets when `key` of `env` stops binding.
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>);
}

impl ExpireKey for sortie_store::MemoryStore {
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>) {
        self.expire_idempotency_key_at(env, key, at).unwrap();
    }
}

impl ExpireKey for sortie_store::DynamoStore {
    async fn expire_key_at(&self, env: &EnvPath, key: &str, at: DateTime<Utc>) {
        self.expire_idempotency_key_at(env, key, at).await.unwrap();
    }
}

/// Issue 25, item 11: a key binds for 24 hours. Past its `expires_at` it is treated as
/// absent (and overwritten) even though its item is still there.
pub async fn an_idempotency_key_binds_until_it_expires_then_counts_as_absent<
    S: Store + ExpireKey + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let key = |hash: &str| IdempotencyKey {
        key: "deploy-7".into(),
        request_hash: hash.into(),
    };
    let first = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    // Still binding a minute before it expires.
    s.expire_key_at(&env(), "deploy-7", Utc::now() + Duration::minutes(1))
        .await;
    let retry = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    assert!(retry.replayed, "{retry:?}");
    assert_eq!(retry.job.id, first.job.id);
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&key("h2"))).await,
        Err(StoreError::IdempotencyMismatch { .. })
    ));
    // Expired, its item not yet deleted: absent. Another body makes a new job.
    s.expire_key_at(&env(), "deploy-7", Utc::now() - Duration::seconds(1))
        .await;
    let second = s.submit_job(&job(ENV), Some(&key("h2"))).await.unwrap();
    assert!(!second.replayed, "{second:?}");
    assert_ne!(second.job.id, first.job.id);
    // The key now binds to the new job, for another 24 hours.
    let again = s.submit_job(&job(ENV), Some(&key("h2"))).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.job.id, second.job.id);
    assert!(matches!(
        s.submit_job(&job(ENV), Some(&key("h1"))).await,
        Err(StoreError::IdempotencyMismatch { job_id, .. }) if job_id == second.job.id
    ));
    // The same holds for the first body once expired again.
    s.expire_key_at(&env(), "deploy-7", Utc::now() - Duration::hours(1))
        .await;
    let third = s.submit_job(&job(ENV), Some(&key("h1"))).await.unwrap();
    assert!(!third.replayed);
    assert_eq!(s.list_jobs(&env(), 10, None).await.unwrap().jobs.len(), 3);
}

pub async fn two_concurrent_submits_to_an_idle_environment_take_the_lock_once<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    for _ in 0..5 {
        let env = env();
        let (a, b) = (job(ENV), job(ENV));
        let (s1, s2) = (s.clone(), s.clone());
        let (ra, rb) = tokio::join!(async move { s1.submit_job(&a, None).await }, async move {
            s2.submit_job(&b, None).await
        });
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(
            ra.took_lock ^ rb.took_lock,
            "exactly one takes the lock (took: {}, {})",
            ra.took_lock,
            rb.took_lock
        );
        let holder = if ra.took_lock { &ra.job } else { &rb.job };
        let waiter = if ra.took_lock { &rb.job } else { &ra.job };
        assert_eq!(
            s.get_environment(&env)
                .await
                .unwrap()
                .item
                .active_job
                .as_deref(),
            Some(holder.id.as_str())
        );
        assert_eq!(
            s.get_job(&waiter.id).await.unwrap().job.state,
            JobState::Queued
        );
        // Drain: the waiter gets the lock, then the environment is idle again.
        assert!(
            matches!(s.release_environment(&env, &holder.id).await.unwrap(), Released::HandedTo(j) if j.id == waiter.id)
        );
        assert_eq!(
            s.release_environment(&env, &waiter.id).await.unwrap(),
            Released::Idle
        );
    }
}

pub async fn the_same_job_submitted_twice_is_a_conflict_whether_the_environment_is_idle_or_busy<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let (a, b) = (job(ENV), job(ENV));
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    assert!(!s.submit_job(&b, None).await.unwrap().took_lock);
    // `b` again while the environment is busy: refused at once, not retried into a timeout.
    assert!(matches!(
        s.submit_job(&b, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.queued_count,
        1,
        "queued once"
    );
    // `a` again once the environment is idle.
    s.release_environment(&env(), &a.id).await.unwrap();
    s.release_environment(&env(), &b.id).await.unwrap();
    assert!(matches!(
        s.submit_job(&a, None).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
}

// ---------------------------------------------------------------- jobs

pub async fn job_transitions_are_conditional_and_recorded<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let now = Utc::now();
    let claimed = s
        .transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            now,
            "claimed by dispatch",
            JobUpdate::default(),
        )
        .await
        .unwrap();
    assert_eq!(claimed.job.state, JobState::Dispatching);
    // A second claim (a duplicate delivery) loses: the write is conditional.
    match s
        .transition_job(
            &j.id,
            JobState::Queued,
            JobState::Dispatching,
            now,
            "again",
            JobUpdate::default(),
        )
        .await
    {
        Err(StoreError::StateConflict {
            expected: JobState::Queued,
            actual: JobState::Dispatching,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let update = JobUpdate {
        task: Some("arn:aws:ecs:us-east-1:123456789012:task/c/abc".into()),
        token_hash: Some("0f".repeat(32)),
        ..Default::default()
    };
    let running = s
        .transition_job(
            &j.id,
            JobState::Dispatching,
            JobState::Running,
            now,
            "launched",
            update,
        )
        .await
        .unwrap();
    assert_eq!(
        running.task.as_deref(),
        Some("arn:aws:ecs:us-east-1:123456789012:task/c/abc")
    );
    let states: Vec<JobState> = running.job.transitions.iter().map(|t| t.to).collect();
    assert_eq!(
        states,
        vec![JobState::Queued, JobState::Dispatching, JobState::Running]
    );
    assert_eq!(
        s.get_job(&j.id).await.unwrap(),
        running,
        "the stored record equals the returned one"
    );
    // The core state machine refuses an illegal transition before any write.
    assert!(matches!(
        s.transition_job(
            &j.id,
            JobState::Running,
            JobState::Dispatching,
            now,
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::StateConflict {
            expected: JobState::Running,
            actual: JobState::Running,
            ..
        })
    ));
    let done = s
        .transition_job(
            &j.id,
            JobState::Running,
            JobState::Succeeded,
            now,
            "exit code 0",
            JobUpdate::default(),
        )
        .await
        .unwrap();
    let states: Vec<JobState> = done.job.transitions.iter().map(|t| t.to).collect();
    assert_eq!(
        states,
        vec![
            JobState::Queued,
            JobState::Dispatching,
            JobState::Running,
            JobState::Succeeded
        ]
    );
    let read = s.get_job(&j.id).await.unwrap();
    assert_eq!(read.job, done.job, "the stored job equals the returned one");
    assert_eq!(read.job.request.variables["n"], serde_json::json!(3));
    assert!(s
        .pending_sends(Utc::now() + Duration::seconds(1), 100)
        .await
        .unwrap()
        .iter()
        .all(|p| p.id != j.id));
    assert!(matches!(
        s.transition_job(
            &"ghost".into(),
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::NotFound { kind: "job", .. })
    ));
}

pub async fn racing_claims_on_one_job_succeed_exactly_once<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, id) = (s.clone(), j.id.clone());
            tokio::spawn(async move {
                s.transition_job(
                    &id,
                    JobState::Queued,
                    JobState::Dispatching,
                    Utc::now(),
                    "claimed",
                    JobUpdate::default(),
                )
                .await
                .is_ok()
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
}

pub async fn a_waiting_job_is_canceled_at_once_and_leaves_the_queue<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let env = env();
    let (a, b) = (job(ENV), job(ENV));
    s.submit_job(&a, None).await.unwrap();
    s.submit_job(&b, None).await.unwrap();
    let canceled = s
        .cancel_waiting_job(&b.id, Utc::now(), "canceled by alice")
        .await
        .unwrap();
    assert_eq!(canceled.job.state, JobState::Canceled);
    assert_eq!(
        s.get_job(&b.id).await.unwrap().job.state,
        JobState::Canceled
    );
    assert_eq!(s.get_environment(&env).await.unwrap().item.queued_count, 0);
    assert_eq!(
        s.release_environment(&env, &a.id).await.unwrap(),
        Released::Idle,
        "the canceled job never gets the lock"
    );
    assert!(s
        .cancel_waiting_job(&b.id, Utc::now(), "again")
        .await
        .is_err());
}

pub async fn a_waiting_job_is_canceled_and_leaves_the_queue_but_the_holder_is_not<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let (a, b, c) = (job(ENV), job(ENV), job(ENV));
    for j in [&a, &b, &c] {
        s.submit_job(j, None).await.unwrap();
    }
    let canceled = s
        .cancel_waiting_job(&b.id, Utc::now(), "canceled by alice")
        .await
        .unwrap();
    assert_eq!(canceled.job.state, JobState::Canceled);
    assert_eq!(s.get_job(&b.id).await.unwrap(), canceled);
    assert_eq!(
        s.get_environment(&env()).await.unwrap().item.queued_count,
        1
    );
    assert!(matches!(
        s.cancel_waiting_job(&b.id, Utc::now(), "again").await,
        Err(StoreError::StateConflict {
            actual: JobState::Canceled,
            ..
        })
    ));
    assert!(
        matches!(
            s.cancel_waiting_job(&a.id, Utc::now(), "holder").await,
            Err(StoreError::StateConflict {
                actual: JobState::Queued,
                ..
            })
        ),
        "the lock holder is not waiting"
    );
    assert!(
        matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == c.id),
        "the canceled job never gets the lock"
    );
    assert_eq!(
        s.release_environment(&env(), &c.id).await.unwrap(),
        Released::Idle
    );
}

pub async fn jobs_list_newest_first_with_an_opaque_cursor<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let env = env();
    let mut ids = vec![];
    for _ in 0..5 {
        let j = job(ENV);
        ids.push(j.id.clone());
        s.submit_job(&j, None).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    ids.reverse();
    let p1 = s.list_jobs(&env, 2, None).await.unwrap();
    let p2 = s.list_jobs(&env, 2, p1.next.as_deref()).await.unwrap();
    let p3 = s.list_jobs(&env, 2, p2.next.as_deref()).await.unwrap();
    let got: Vec<String> = [p1.jobs, p2.jobs, p3.jobs]
        .concat()
        .into_iter()
        .map(|j| j.job.id.to_string())
        .collect();
    assert_eq!(got, ids);
    // A short last page has no cursor (DynamoDB may give one after a full last page).
    assert!(p3.next.is_none());
    assert!(matches!(
        s.list_jobs(&env, 2, Some("zz-not-a-cursor")).await,
        Err(StoreError::NotFound { kind: "cursor", .. })
    ));
    assert!(matches!(
        s.list_jobs(&env, 2, Some("zz")).await,
        Err(StoreError::NotFound { kind: "cursor", .. })
    ));
}

pub async fn launched_jobs_are_listed_for_the_sweeper_and_can_be_marked<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    assert!(
        matches!(
            s.mark_job(&j.id, Utc::now(), JobUpdate::default()).await,
            Err(StoreError::StateConflict { .. })
        ),
        "a queued job is not launched"
    );
    step(&*s, &j.id, JobState::Queued, JobState::Dispatching).await;
    let active: Vec<String> = s
        .active_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect();
    assert_eq!(active, vec![j.id.clone()]);
    let marked = s
        .mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                cancel_requested_by: Some("alice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (marked.job.state, marked.cancel_requested_by.as_deref()),
        (JobState::Dispatching, Some("alice"))
    );
    // Upload problems: recorded, read back, replaced by the next report.
    let problems = vec![
        "could not upload the summary: 403 Forbidden".to_string(),
        "log from offset 12 not uploaded".to_string(),
    ];
    let marked = s
        .mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                upload_problems: Some(problems.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(marked.upload_problems, problems);
    assert_eq!(s.get_job(&j.id).await.unwrap().upload_problems, problems);
    assert_eq!(
        marked.cancel_requested_by.as_deref(),
        Some("alice"),
        "other attributes are kept"
    );
    // Back to queued (a retryable launch failure): a pending send again, not active.
    step(&*s, &j.id, JobState::Dispatching, JobState::Queued).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty());
    assert!(s
        .pending_sends(Utc::now() + Duration::seconds(1), 10)
        .await
        .unwrap()
        .iter()
        .any(|p| p.id == j.id));
    step(&*s, &j.id, JobState::Queued, JobState::Dispatching).await;
    step(&*s, &j.id, JobState::Dispatching, JobState::Failed).await;
    assert!(
        s.active_jobs(10).await.unwrap().is_empty(),
        "terminal jobs leave the index"
    );
    assert!(matches!(
        s.transition_job(
            &"ghost".into(),
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "x",
            JobUpdate::default()
        )
        .await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn pending_sends_and_active_jobs_follow_the_sparse_index<S: Store + 'static>(s: Arc<S>) {
    setup_env(&*s, ENV).await;
    let (a, b) = (job(ENV), job(ENV));
    s.submit_job(&a, None).await.unwrap();
    s.submit_job(&b, None).await.unwrap();
    let later = Utc::now() + Duration::seconds(1);
    assert_eq!(
        pending_ids(&*s, later).await,
        vec![a.id.clone()],
        "only the lock holder"
    );
    assert!(s
        .pending_sends(a.transitions[0].at, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(matches!(
        s.mark_job(&a.id, Utc::now(), JobUpdate::default()).await,
        Err(StoreError::StateConflict {
            actual: JobState::Queued,
            ..
        })
    ));
    step(&*s, &a.id, JobState::Queued, JobState::Dispatching).await;
    assert!(pending_ids(&*s, later).await.is_empty());
    let active: Vec<String> = s
        .active_jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id.to_string())
        .collect();
    assert_eq!(active, vec![a.id.clone()]);
    let marked = s
        .mark_job(
            &a.id,
            Utc::now(),
            JobUpdate {
                cancel_requested_by: Some("alice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (marked.job.state, marked.cancel_requested_by.as_deref()),
        (JobState::Dispatching, Some("alice"))
    );
    // A retryable launch failure: a pending send again, no longer active.
    step(&*s, &a.id, JobState::Dispatching, JobState::Queued).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty());
    assert_eq!(pending_ids(&*s, later).await, vec![a.id.clone()]);
    step(&*s, &a.id, JobState::Queued, JobState::Dispatching).await;
    step(&*s, &a.id, JobState::Dispatching, JobState::Running).await;
    step(&*s, &a.id, JobState::Running, JobState::Succeeded).await;
    assert!(s.active_jobs(10).await.unwrap().is_empty(), "terminal");
    assert!(pending_ids(&*s, later).await.is_empty());
    // The hand-over makes the next job a pending send.
    assert!(
        matches!(s.release_environment(&env(), &a.id).await.unwrap(), Released::HandedTo(n) if n.id == b.id)
    );
    assert_eq!(pending_ids(&*s, later).await, vec![b.id.clone()]);
    // An ended job stays on the ended list until the sweeper settles it.
    let ended = |s: Arc<S>| async move {
        s.ended_jobs(Utc::now() + Duration::seconds(2), 10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.job.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ended(s.clone()).await, vec![a.id.clone()]);
    assert!(
        s.ended_jobs(Utc::now() - Duration::seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "only those that ended before the cut-off"
    );
    s.settle_ended_job(&a.id).await.unwrap();
    s.settle_ended_job(&a.id).await.unwrap();
    assert!(ended(s.clone()).await.is_empty(), "settled, idempotently");
    assert!(s.active_jobs(10).await.unwrap().is_empty());
}

// ---------------------------------------------------------------- reviewed applies and drift

/// Every setting set to something other than its default.
fn full_settings(schedule: &str) -> EnvSettings {
    EnvSettings {
        approval: Approval::Required,
        approval_timeout_seconds: Some(600),
        four_eyes: true,
        drift_schedule: Some(schedule.into()),
        drift_remediation: DriftRemediation::Apply,
        tool: Some(ToolName::Opentofu),
        tool_version: Some("1.8.0".into()),
        triggers: vec![sortie_core::EnvPath::parse("acme/payments/db").unwrap()],
        trigger_operation: sortie_core::triggers::TriggerOperation::Apply,
        trigger_inputs: vec!["db_host".into()],
        expires_at: Some(Utc.timestamp_opt(1_900_000_000, 0).unwrap()),
        ttl: Some("72h".into()),
        ttl_from: sortie_core::expiry::TtlFrom::LastApply,
        vcs: Some(
            serde_json::from_value(serde_json::json!({
                "repository": "acme/infra",
                "directory": "payments/prod",
                "apply": "before_merge",
                "requirements": {"approved": 2, "mergeable": true},
            }))
            .unwrap(),
        ),
        extended_to: Some(Utc.timestamp_opt(1_900_100_000, 0).unwrap()),
    }
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

fn schedule(cron: &str) -> EnvSettings {
    EnvSettings {
        drift_schedule: Some(cron.into()),
        ..Default::default()
    }
}

async fn due_paths<S: Store>(s: &S, now: DateTime<Utc>, limit: u32) -> Vec<String> {
    s.due_drift_checks(now, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.environment.path.to_string())
        .collect()
}

async fn next_drift_at<S: Store>(s: &S, path: &str) -> Option<DateTime<Utc>> {
    s.get_environment(&EnvPath::parse(path).unwrap())
        .await
        .unwrap()
        .item
        .next_drift_at
}

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

pub async fn environment_settings_round_trip_and_clear_through_create_get_and_update<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let env = setup_env_with(&*s, ENV, full_settings("0 */6 * * *")).await;
    let got = s.get_environment(&env.path).await.unwrap();
    assert_eq!(got.version, 1);
    assert_eq!(got.item.environment, env, "every setting round-trips");
    let listed = s
        .list_environments(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed[0].item.environment, env);

    // Cleared: every setting back to its default, the optional ones absent.
    let mut cleared = env.clone();
    cleared.settings = EnvSettings::default();
    let updated = s.update_environment(&cleared, Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.item.environment, cleared);
    let got = s.get_environment(&env.path).await.unwrap();
    assert_eq!((got.version, &got.item.environment), (2, &cleared));
    assert_eq!(got.item.next_drift_at, None, "no schedule, no next check");

    // Set again, one at a time.
    let mut versioned = cleared.clone();
    versioned.settings.tool_version = Some("~> 1.6".into());
    versioned.settings.approval_timeout_seconds = Some(3600);
    let updated = s.update_environment(&versioned, Some(2)).await.unwrap();
    assert_eq!(updated.version, 3);
    assert_eq!(updated.item.environment.settings, versioned.settings);
    assert_eq!(
        s.get_environment(&env.path).await.unwrap().item.environment,
        versioned
    );
    // The version check still guards an update.
    assert!(matches!(
        s.update_environment(&env, Some(2)).await,
        Err(StoreError::VersionMismatch {
            expected: 2,
            actual: 3,
            ..
        })
    ));
}

pub async fn a_runners_tool_and_tool_version_round_trip<S: Store + 'static>(s: Arc<S>) {
    let mut r = runner("acme/pinned");
    r.spec.tool = Some(ToolName::Terraform);
    r.spec.tool_version = Some("1.5.7".into());
    assert_eq!(s.create_runner(&r).await.unwrap().version, 1);
    let got = s.get_runner(&r.id).await.unwrap();
    assert_eq!((got.version, &got.item), (1, &r));
    r.spec.tool_version = Some("~> 1.9".into());
    assert_eq!(s.update_runner(&r, Some(1)).await.unwrap().version, 2);
    let listed = s
        .list_runners(&GroupPath::parse("acme").unwrap())
        .await
        .unwrap();
    assert_eq!((listed[0].version, &listed[0].item), (2, &r));
    r.spec.tool_version = None;
    assert_eq!(s.update_runner(&r, Some(2)).await.unwrap().version, 3);
    assert_eq!(s.get_runner(&r.id).await.unwrap().item, r);
}

pub async fn next_drift_at_follows_the_schedule_and_due_drift_checks_lists_only_due_environments_in_order<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let (a, b, c) = ("acme/payments/a", "acme/payments/b", "acme/payments/c");
    let before = Utc::now();
    let env_a = setup_env_with(&*s, a, EnvSettings::default()).await;
    setup_env_with(&*s, b, schedule("*/15 * * * *")).await;
    let env_c = setup_env_with(&*s, c, schedule("0 */6 * * *")).await;
    let after = Utc::now();
    assert_eq!(next_drift_at(&*s, a).await, None, "no schedule");
    let next_b = next_drift_at(&*s, b).await.expect("scheduled");
    let next_c = next_drift_at(&*s, c).await.expect("scheduled");
    assert!(
        next_b > before && next_b <= after + Duration::minutes(15),
        "{next_b}"
    );
    assert!(
        next_c > before && next_c <= after + Duration::hours(6),
        "{next_c}"
    );
    assert!(next_b <= next_c, "every fire time of c is one of b's");

    // Nothing is due before its time; each is due from its time on, earliest first.
    assert!(due_paths(&*s, after, 10).await.is_empty());
    assert!(due_paths(&*s, next_b - Duration::milliseconds(1), 10)
        .await
        .is_empty());
    let at_b = due_paths(&*s, next_b, 10).await;
    assert_eq!(at_b[0], b, "due at its fire time");
    assert_eq!(at_b.len(), if next_c == next_b { 2 } else { 1 });
    let later = next_c + Duration::minutes(1);
    assert_eq!(due_paths(&*s, later, 10).await, vec![b, c]);
    assert_eq!(due_paths(&*s, later, 1).await, vec![b], "at most `limit`");
    let due = s.due_drift_checks(later, 10).await.unwrap();
    assert_eq!(due[1].environment, env_c, "the whole record");
    assert_eq!(due[1].next_drift_at, Some(next_c));

    // An update that sets a schedule schedules; one that clears it unschedules; one that
    // keeps it keeps the next fire time.
    let mut scheduled_a = env_a.clone();
    scheduled_a.settings = schedule("@hourly");
    s.update_environment(&scheduled_a, Some(1)).await.unwrap();
    let next_a = next_drift_at(&*s, a)
        .await
        .expect("scheduled by the update");
    assert!(next_a > after && next_a <= Utc::now() + Duration::hours(1));
    let mut cleared_b = environment(b, "acme/local");
    cleared_b.settings = EnvSettings::default();
    let updated = s.update_environment(&cleared_b, Some(1)).await.unwrap();
    assert_eq!(updated.item.next_drift_at, None);
    assert_eq!(next_drift_at(&*s, b).await, None);
    let mut relabelled_c = env_c.clone();
    relabelled_c.labels.insert("team".into(), "blue".into());
    s.update_environment(&relabelled_c, Some(1)).await.unwrap();
    assert_eq!(next_drift_at(&*s, c).await, Some(next_c), "same schedule");
    let far = Utc::now() + Duration::days(1);
    let mut expected = vec![(next_a, a), (next_c, c)];
    expected.sort();
    assert_eq!(
        due_paths(&*s, far, 10).await,
        expected.into_iter().map(|(_, p)| p).collect::<Vec<_>>()
    );
    // A relink keeps it too.
    let link = environment(c, "acme/local").runner;
    s.relink_environment(&env_c.path, &link, Some(2))
        .await
        .unwrap();
    assert_eq!(next_drift_at(&*s, c).await, Some(next_c));
    assert!(due_paths(&*s, far, 10).await.contains(&c.to_string()));
    // A deleted environment is no longer due.
    s.delete_environment(&env_c.path, None).await.unwrap();
    assert_eq!(due_paths(&*s, far, 10).await, vec![a]);
}

pub async fn advance_drift_is_conditional_on_the_fire_time_and_records_a_skip<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    let env = setup_env_with(&*s, ENV, schedule("*/15 * * * *")).await;
    let fired = next_drift_at(&*s, ENV).await.unwrap();
    let next = fired + Duration::minutes(15);
    let skipped = DriftSkipped {
        at: fired + Duration::seconds(3),
        reason: "the environment was busy".into(),
    };
    assert!(s
        .advance_drift(&env.path, fired, Some(next), Some(&skipped))
        .await
        .unwrap());
    let rec = s.get_environment(&env.path).await.unwrap();
    assert_eq!(rec.item.next_drift_at, Some(next));
    assert_eq!(rec.item.drift_skipped.as_ref(), Some(&skipped));
    assert_eq!(
        rec.version, 1,
        "the schedule's moves never bump the version"
    );
    // Another sweep that saw the same fire time loses, and changes nothing.
    assert!(!s
        .advance_drift(&env.path, fired, Some(next + Duration::hours(1)), None)
        .await
        .unwrap());
    assert_eq!(next_drift_at(&*s, ENV).await, Some(next));
    // The index moved with it.
    assert!(due_paths(&*s, next - Duration::seconds(1), 10)
        .await
        .is_empty());
    assert_eq!(due_paths(&*s, next, 10).await, vec![ENV]);
    // Without a next fire time it leaves the index; the skip recorded stays.
    assert!(s.advance_drift(&env.path, next, None, None).await.unwrap());
    let rec = s.get_environment(&env.path).await.unwrap().item;
    assert_eq!(rec.next_drift_at, None);
    assert_eq!(rec.drift_skipped, Some(skipped));
    assert!(due_paths(&*s, next + Duration::days(30), 10)
        .await
        .is_empty());
    assert!(!s.advance_drift(&env.path, next, None, None).await.unwrap());
    assert!(matches!(
        s.advance_drift(
            &EnvPath::parse("acme/payments/ghost").unwrap(),
            fired,
            None,
            None
        )
        .await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
}

pub async fn record_drift_sets_the_result_and_an_older_apply_never_replaces_a_newer<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let ghost = EnvPath::parse("acme/payments/ghost").unwrap();
    let a = job(ENV);
    assert!(s.submit_job(&a, None).await.unwrap().took_lock);
    let status = DriftStatus {
        status: DriftVerdict::Drifted,
        checked_at: Utc::now(),
        job_id: a.id.clone(),
        summary: Some(ChangeSummary {
            add: 1,
            change: 2,
            destroy: 0,
            has_changes: Some(true),
        }),
        reason: None,
        remediation_job_id: Some("01remediation".into()),
    };
    s.record_drift(&env, &status).await.unwrap();
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(rec.item.drift.as_ref(), Some(&status));
    assert_eq!(
        rec.item.active_job.as_ref(),
        Some(&a.id),
        "the lock is untouched"
    );
    assert_eq!(rec.version, 1);
    assert!(matches!(
        s.record_drift(&ghost, &status).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));

    // A whole second, and half a second after it: the later one wins whatever the order.
    let base = Utc.with_ymd_and_hms(2026, 5, 4, 3, 2, 1).unwrap();
    let apply = |id: &str, at: DateTime<Utc>| LastApply {
        job_id: id.into(),
        at,
    };
    let newer = apply("01newer", base + Duration::milliseconds(1500));
    s.record_last_apply(&env, &newer).await.unwrap();
    let last = |s: Arc<S>| async move {
        s.get_environment(&EnvPath::parse(ENV).unwrap())
            .await
            .unwrap()
            .item
            .last_apply
    };
    assert_eq!(last(s.clone()).await, Some(newer.clone()));
    for older in [
        apply("01older", base + Duration::seconds(1)),
        apply("01older-frac", base + Duration::nanoseconds(1_499_999_999)),
        apply("01same", newer.at),
    ] {
        s.record_last_apply(&env, &older).await.unwrap();
        assert_eq!(
            last(s.clone()).await,
            Some(newer.clone()),
            "{} never replaces the newer one",
            older.job_id
        );
    }
    let newest = apply("01newest", base + Duration::seconds(2));
    s.record_last_apply(&env, &newest).await.unwrap();
    assert_eq!(last(s.clone()).await, Some(newest.clone()));
    // A destroy before the newest apply forgets nothing; one after it forgets it.
    s.forget_last_apply(&env, base + Duration::milliseconds(1999))
        .await
        .unwrap();
    assert_eq!(last(s.clone()).await, Some(newest.clone()));
    s.forget_last_apply(&env, base + Duration::seconds(3))
        .await
        .unwrap();
    assert_eq!(last(s.clone()).await, None, "destroyed: no latest apply");
    s.forget_last_apply(&env, base + Duration::seconds(4))
        .await
        .unwrap();
    assert!(matches!(
        s.forget_last_apply(&ghost, base).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    s.record_last_apply(&env, &newest).await.unwrap();
    assert_eq!(last(s.clone()).await, Some(newest));
    assert!(matches!(
        s.record_last_apply(&ghost, &newer).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    assert!(
        s.get_environment(&ghost).await.is_err(),
        "a record on a missing environment creates nothing"
    );
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(
        (rec.version, rec.item.drift.as_ref()),
        (1, Some(&status)),
        "each attribute is written alone"
    );
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

pub async fn submit_if_idle_takes_an_idle_lock_and_writes_nothing_when_busy<S: Store + 'static>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let a = job(ENV);
    let submitted = s.submit_if_idle(&a).await.unwrap().expect("idle");
    assert!(submitted.took_lock && !submitted.replayed);
    assert_eq!(submitted.job, a);
    let rec = s.get_environment(&env).await.unwrap();
    assert_eq!(rec.item.active_job.as_ref(), Some(&a.id));
    assert_eq!(rec.version, 1);
    assert_eq!(s.get_job(&a.id).await.unwrap().job, a);
    assert_eq!(
        pending_ids(&*s, Utc::now() + Duration::seconds(1)).await,
        vec![a.id.clone()],
        "a pending send, like any lock holder"
    );

    // Busy: nothing written, the job id stays unknown, the queue unchanged.
    let b = job(ENV);
    assert_eq!(s.submit_if_idle(&b).await.unwrap(), None);
    assert!(matches!(
        s.get_job(&b.id).await,
        Err(StoreError::NotFound { kind: "job", .. })
    ));
    let c = job(ENV);
    assert!(!s.submit_job(&c, None).await.unwrap().took_lock);
    let d = job(ENV);
    assert_eq!(s.submit_if_idle(&d).await.unwrap(), None);
    assert!(matches!(
        s.get_job(&d.id).await,
        Err(StoreError::NotFound { .. })
    ));
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(
        (rec.active_job.as_ref(), rec.queued_count, rec.queue_seq),
        (Some(&a.id), 1, 1)
    );
    let listed: BTreeSet<String> = s
        .list_jobs(&env, 10, None)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.job.id.to_string())
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from([a.id.to_string(), c.id.to_string()]),
        "only the jobs written"
    );

    // A taken id, a missing environment.
    assert!(matches!(
        s.submit_if_idle(&a).await,
        Err(StoreError::AlreadyExists { kind: "job", .. })
    ));
    assert!(matches!(
        s.submit_if_idle(&job("acme/payments/ghost")).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));

    // The queue goes on as before; once idle, the lock is taken again.
    assert!(
        matches!(s.release_environment(&env, &a.id).await.unwrap(), Released::HandedTo(n) if n.id == c.id)
    );
    assert_eq!(
        s.release_environment(&env, &c.id).await.unwrap(),
        Released::Idle
    );
    let e = job(ENV);
    assert!(s.submit_if_idle(&e).await.unwrap().unwrap().took_lock);
    assert_eq!(
        s.get_environment(&env).await.unwrap().item.active_job,
        Some(e.id.clone())
    );
}

// ---------------------------------------------------------------- memberships

pub async fn memberships_are_granted_listed_scoped_to_org_and_revoked<S: Store + 'static>(
    s: Arc<S>,
) {
    let m = |group: &str, subject: &str| MembershipRecord {
        id: sortie_core::tokens::new_id(),
        membership: Membership {
            group: GroupPath::parse(group).unwrap(),
            role: Role::Deployer,
            grantee: Grantee::Subject {
                subject: subject.into(),
                issuer: None,
            },
        },
        granted_by: "root".into(),
        granted_at: Utc::now(),
    };
    let a = m("acme/payments", "alice");
    s.put_membership(&a).await.unwrap();
    s.put_membership(&m("acme", "bob")).await.unwrap();
    s.put_membership(&m("acme/pay", "carol")).await.unwrap();
    s.put_membership(&m("globex", "mallory")).await.unwrap();
    s.put_membership(&m("", "admin")).await.unwrap();
    assert!(matches!(
        s.put_membership(&a).await,
        Err(StoreError::AlreadyExists {
            kind: "membership",
            ..
        })
    ));
    let listed = s
        .list_memberships(&GroupPath::parse("acme/pay").unwrap())
        .await
        .unwrap();
    assert_eq!(
        listed.len(),
        1,
        "acme/pay is not a prefix match for acme/payments"
    );
    assert_eq!(
        s.list_memberships(&GroupPath::parse("acme/payments").unwrap())
            .await
            .unwrap()[0],
        a
    );
    let for_acme = s.memberships_for(Some("acme")).await.unwrap();
    assert_eq!(
        for_acme.len(),
        4,
        "acme's three plus the root's one, never globex's"
    );
    assert_eq!(
        s.memberships_for(None).await.unwrap().len(),
        1,
        "outside any org, only the root's"
    );
    s.delete_membership(&GroupPath::parse("acme/payments").unwrap(), &a.id)
        .await
        .unwrap();
    assert!(matches!(
        s.delete_membership(&GroupPath::parse("acme/payments").unwrap(), &a.id)
            .await,
        Err(StoreError::NotFound { .. })
    ));
}

const POOL: &str = "apool-01jnx6v4k2m8q9r3s5t7w0y1za";

pub async fn an_offered_job_is_claimed_once_by_one_agent_and_heartbeats_only_for_that_claim<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::{agent_task, AgentHold, AgentStop};
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let now = Utc::now();
    s.transition_job(
        &j.id,
        JobState::Queued,
        JobState::Dispatching,
        now,
        "claimed by dispatch",
        JobUpdate {
            next_attempt: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        s.offered_jobs(POOL, 10).await.unwrap().is_empty(),
        "not offered yet"
    );
    let offer = JobUpdate {
        offer_to: Some(POOL.into()),
        ..Default::default()
    };
    s.mark_job(&j.id, now, offer).await.unwrap();
    let offered = s.offered_jobs(POOL, 10).await.unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].offered_to.as_deref(), Some(POOL));
    assert!(
        s.offered_jobs("apool-other", 10).await.unwrap().is_empty(),
        "offers are per pool"
    );
    // Eight agents race for it: one claim wins.
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (s, id) = (s.clone(), j.id.clone());
            tokio::spawn(async move {
                let agent = format!("a{i}");
                let at = Utc::now();
                s.transition_job(
                    &id,
                    JobState::Dispatching,
                    JobState::Running,
                    at,
                    "claimed by an agent",
                    JobUpdate {
                        claim_from: Some(POOL.into()),
                        task: Some(agent_task(POOL, &agent, 1)),
                        agent: Some(AgentHold {
                            pool: POOL.into(),
                            agent: agent.clone(),
                            claimed_at: at,
                            heartbeat_at: at,
                            stop: None,
                        }),
                        ..Default::default()
                    },
                )
                .await
                .ok()
                .map(|_| agent)
            })
        })
        .collect();
    let mut winners = vec![];
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = &winners[0];
    assert!(
        s.offered_jobs(POOL, 10).await.unwrap().is_empty(),
        "a claimed job is no longer offered"
    );
    let record = s.get_job(&j.id).await.unwrap();
    assert_eq!(record.offered_to, None);
    assert_eq!(
        record.agent.as_ref().map(|a| a.agent.as_str()),
        Some(winner.as_str())
    );
    // Heartbeats: the holder's move its clock; anyone else's is a conflict.
    let later = Utc::now() + Duration::seconds(5);
    let beat = s
        .heartbeat_job(&j.id, &agent_task(POOL, winner, 1), later)
        .await
        .unwrap();
    assert_eq!(beat.agent.unwrap().heartbeat_at, later);
    assert!(matches!(
        s.heartbeat_job(&j.id, &agent_task(POOL, "intruder", 1), later)
            .await,
        Err(StoreError::StateConflict { .. })
    ));
    assert!(
        matches!(
            s.heartbeat_job(&j.id, &agent_task(POOL, winner, 2), later)
                .await,
            Err(StoreError::StateConflict { .. })
        ),
        "an earlier or later attempt's claim does not hold the job"
    );
    // A stop order: the first wins.
    for reason in ["sortie: canceled by alice", "sortie: timed out after 60s"] {
        s.mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                agent_stop: Some(AgentStop {
                    reason: reason.into(),
                    at: Utc::now(),
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    let stop = s.get_job(&j.id).await.unwrap().agent.unwrap().stop.unwrap();
    assert_eq!(stop.reason, "sortie: canceled by alice");
    // A requeue forgets the agent; a claim of a job not offered to the pool is refused.
    s.transition_job(
        &j.id,
        JobState::Running,
        JobState::Queued,
        Utc::now(),
        "agent lost",
        JobUpdate {
            clear_task: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(s.get_job(&j.id).await.unwrap().agent, None);
    s.transition_job(
        &j.id,
        JobState::Queued,
        JobState::Dispatching,
        Utc::now(),
        "claimed by dispatch",
        JobUpdate::default(),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            s.transition_job(
                &j.id,
                JobState::Dispatching,
                JobState::Running,
                Utc::now(),
                "claim",
                JobUpdate {
                    claim_from: Some(POOL.into()),
                    ..Default::default()
                }
            )
            .await,
            Err(StoreError::StateConflict { .. })
        ),
        "not offered: no claim"
    );
}

pub async fn agent_pools_are_created_listed_updated_with_versions_and_deleted<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::AgentPool;
    use sortie_store::{AgentPoolRecord, PoolToken};
    let record = AgentPoolRecord {
        pool: AgentPool {
            id: POOL.into(),
            group: GroupPath::parse("acme/payments").unwrap(),
            name: "onprem".into(),
            description: String::new(),
            oidc: None,
        },
        tokens: vec![PoolToken {
            id: "tok-1".into(),
            hash: "ab".repeat(32),
            created_at: Utc::now(),
            created_by: "alice".into(),
        }],
        created_at: Utc::now(),
        created_by: "alice".into(),
        last_claim_at: None,
    };
    assert_eq!(s.create_pool(&record).await.unwrap().version, 1);
    assert!(matches!(
        s.create_pool(&record).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(s.get_pool(POOL).await.unwrap().item, record);
    let listed = s
        .list_pools(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        s.list_pools(&GroupPath::parse("acme").unwrap())
            .await
            .unwrap()
            .is_empty(),
        "exactly this group"
    );
    let mut rotated = record.clone();
    rotated.tokens.push(PoolToken {
        id: "tok-2".into(),
        hash: "cd".repeat(32),
        created_at: Utc::now(),
        created_by: "alice".into(),
    });
    assert_eq!(s.update_pool(&rotated, Some(1)).await.unwrap().version, 2);
    assert!(
        matches!(
            s.update_pool(&record, Some(1)).await,
            Err(StoreError::VersionMismatch { .. })
        ),
        "a stale rotation never loses a token"
    );
    assert_eq!(s.get_pool(POOL).await.unwrap().item.tokens.len(), 2);
    assert!(matches!(
        s.delete_pool(POOL, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_pool(POOL, Some(2)).await.unwrap();
    assert!(matches!(
        s.get_pool(POOL).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn a_pools_last_claim_only_moves_forward_and_keeps_the_version<S: Store + 'static>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::AgentPool;
    use sortie_store::AgentPoolRecord;
    let record = AgentPoolRecord {
        pool: AgentPool {
            id: POOL.into(),
            group: GroupPath::parse("acme/payments").unwrap(),
            name: "onprem".into(),
            description: String::new(),
            oidc: None,
        },
        tokens: vec![],
        created_at: Utc::now(),
        created_by: "alice".into(),
        last_claim_at: None,
    };
    s.create_pool(&record).await.unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, None);
    let t1 = Utc.with_ymd_and_hms(2026, 11, 25, 14, 2, 0).unwrap();
    s.record_pool_claim(POOL, t1).await.unwrap();
    let read = s.get_pool(POOL).await.unwrap();
    assert_eq!(read.item.last_claim_at, Some(t1));
    assert_eq!(read.version, 1, "a claim is not an edit: the ETag stays");
    // An older claim (a slow request) never moves it back.
    s.record_pool_claim(POOL, t1 - Duration::seconds(40))
        .await
        .unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, Some(t1));
    let t2 = t1 + Duration::seconds(31);
    s.record_pool_claim(POOL, t2).await.unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, Some(t2));
    // An edit made with the version read keeps working after claims.
    let mut edited = s.get_pool(POOL).await.unwrap().item;
    edited.pool.description = "on premises".into();
    assert_eq!(s.update_pool(&edited, Some(1)).await.unwrap().version, 2);
    assert!(matches!(
        s.record_pool_claim("apool-missing", t2).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn environments_under_a_group_are_its_own_and_its_descendants_by_path<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    for path in [
        "acme/web/prod",
        "acme/web/eu/prod",
        "acme/web/eu/dev",
        "acme/webshop/prod",
        "acme/api/prod",
        "acme/pay/prod",
        "acme/payments/eu/prod",
        "acmecorp/web/prod",
        "other/web/prod",
    ] {
        setup_env(&*s, path).await;
    }
    let under_at_most = |g: &str, limit: usize| {
        let s = s.clone();
        let g = GroupPath::parse(g).unwrap();
        async move {
            let listed = s.list_environments_under(&g, limit).await.unwrap();
            let paths = listed
                .environments
                .into_iter()
                .map(|e| e.item.environment.path.to_string())
                .collect::<Vec<_>>();
            (paths, listed.truncated)
        }
    };
    let under = |g: &'static str| {
        let listed = under_at_most(g, 10_000);
        async move {
            let (paths, truncated) = listed.await;
            assert!(!truncated, "{g}: nothing to cut");
            paths
        }
    };
    let count = |g: &str| {
        let s = s.clone();
        let g = GroupPath::parse(g).unwrap();
        async move { s.count_environments_under(&g).await.unwrap() }
    };
    assert_eq!(
        under("acme/web").await,
        ["acme/web/eu/dev", "acme/web/eu/prod", "acme/web/prod"],
        "its own and its descendants', never a sibling whose name starts alike"
    );
    assert_eq!(
        under("acme/pay").await,
        ["acme/pay/prod"],
        "`acme/pay` is not a prefix of `acme/payments/...`"
    );
    assert_eq!(
        under("acme").await,
        [
            "acme/api/prod",
            "acme/pay/prod",
            "acme/payments/eu/prod",
            "acme/web/eu/dev",
            "acme/web/eu/prod",
            "acme/web/prod",
            "acme/webshop/prod",
        ],
        "an organisation lists only its own, by path: never `acmecorp`'s nor `other`'s"
    );
    assert_eq!(under("other").await, ["other/web/prod"]);
    assert_eq!(under("acme/web/eu").await.len(), 2);
    assert!(under("acme/nothing").await.is_empty());
    assert!(under("nobody").await.is_empty());

    // A bounded listing says when it was cut, and keeps the first by path.
    assert_eq!(
        under_at_most("acme", 3).await,
        (
            vec![
                "acme/api/prod".to_string(),
                "acme/pay/prod".to_string(),
                "acme/payments/eu/prod".to_string()
            ],
            true
        )
    );
    assert!(!under_at_most("acme/web", 3).await.1, "exactly the limit");
    assert!(under_at_most("acme/web", 2).await.1);
    assert_eq!(under_at_most("acme/web", 0).await, (vec![], true));

    // The counts come from the same index.
    assert_eq!(count("acme").await, 7);
    assert_eq!(count("acme/web").await, 3);
    assert_eq!(count("acme/pay").await, 1);
    assert_eq!(count("acmecorp").await, 1);
    assert_eq!(count("acme/nothing").await, 0);

    // An update keeps the environment listed (and rewrites its index entry).
    let mut env = s
        .get_environment(&EnvPath::parse("acme/pay/prod").unwrap())
        .await
        .unwrap()
        .item
        .environment;
    env.labels.insert("tier".into(), "gold".into());
    s.update_environment(&env, None).await.unwrap();
    assert_eq!(under("acme/pay").await, ["acme/pay/prod"]);

    // The root group spans every organisation: refused, never a listing of all tenants.
    let root = GroupPath::root();
    assert!(matches!(
        s.list_environments_under(&root, 10).await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(matches!(
        s.count_environments_under(&root).await,
        Err(StoreError::Invalid { .. })
    ));
}

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

pub async fn a_speculative_plan_takes_no_lock_joins_no_queue_and_is_a_pending_send<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    setup_env(&*s, ENV).await;
    let env = env();
    let holder = job(ENV);
    assert!(s.submit_job(&holder, None).await.unwrap().took_lock);
    // A person's lock does not stop a plan that writes nothing.
    let lock = sortie_core::lock::EnvLock::new("dave", Utc::now(), "audit").unwrap();
    s.lock_environment(&env, &lock).await.unwrap();
    let key = IdempotencyKey {
        key: "pr:acme/infra#7@1a2b".into(),
        request_hash: "h1".into(),
    };
    let plan = job(ENV);
    let submitted = s.submit_speculative(&plan, Some(&key)).await.unwrap();
    assert!(!submitted.took_lock && !submitted.replayed);
    let rec = s.get_environment(&env).await.unwrap().item;
    assert_eq!(
        (rec.active_job.as_ref(), rec.queued_count),
        (Some(&holder.id), 0),
        "neither the lock nor the queue moved"
    );
    let pending = pending_ids(&*s, Utc::now() + Duration::seconds(1)).await;
    assert!(
        pending.contains(&plan.id.to_string()),
        "a pending send at once"
    );
    // The same key answers the first job; another body under it is refused.
    let again = s.submit_speculative(&job(ENV), Some(&key)).await.unwrap();
    assert!(again.replayed && again.job.id == plan.id);
    let changed = IdempotencyKey {
        request_hash: "h2".into(),
        ..key.clone()
    };
    assert!(matches!(
        s.submit_speculative(&job(ENV), Some(&changed)).await,
        Err(StoreError::IdempotencyMismatch { .. })
    ));
    assert!(matches!(
        s.submit_speculative(&plan, None).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        s.submit_speculative(&job("acme/payments/gone"), None).await,
        Err(StoreError::NotFound {
            kind: "environment",
            ..
        })
    ));
    // The holder's release hands nothing to the plan: it was never queued.
    s.unlock_environment(&env).await.unwrap();
    assert_eq!(
        s.release_environment(&env, &holder.id).await.unwrap(),
        Released::Idle
    );
    assert_eq!(
        s.release_environment(&env, &plan.id).await.unwrap(),
        Released::NotHeld,
        "a speculative plan holds nothing to release"
    );
}

pub async fn connections_deliveries_bindings_and_pull_requests_round_trip<S: Store + 'static>(
    s: Arc<S>,
) {
    use sortie_core::vcs::connection::VcsConnection;
    use sortie_core::vcs::pull::{PullEnvironment, PullRequestRecord};
    use sortie_core::vcs::VcsProvider::Github;

    // A connection: absent, written, replaced, deleted.
    assert!(matches!(
        s.get_connection("acme", Github).await,
        Err(StoreError::NotFound {
            kind: "connection",
            ..
        })
    ));
    let mut c = VcsConnection {
        org: "acme".into(),
        provider: Github,
        app_id: 7,
        api_url: "https://api.github.com".into(),
        private_key_secret: "arn:aws:secretsmanager:us-east-1:1:secret:k".into(),
        webhook_secret: "arn:aws:secretsmanager:us-east-1:1:secret:w".into(),
        created_by: "alice".into(),
        created_at: Utc::now().with_nanosecond(0).unwrap(),
    };
    s.put_connection(&c).await.unwrap();
    c.app_id = 8;
    s.put_connection(&c).await.unwrap();
    assert_eq!(s.get_connection("acme", Github).await.unwrap(), c);
    assert!(s.get_connection("other", Github).await.is_err());
    // The reconcile's list: each connected organisation once.
    let mut beta = c.clone();
    beta.org = "beta".into();
    s.put_connection(&beta).await.unwrap();
    let mut connected = s.connected_organisations(Github).await.unwrap();
    connected.sort();
    assert_eq!(connected, vec!["acme".to_string(), "beta".to_string()]);
    s.delete_connection("beta", Github).await.unwrap();
    s.delete_connection("acme", Github).await.unwrap();
    assert!(s.connected_organisations(Github).await.unwrap().is_empty());
    assert!(matches!(
        s.delete_connection("acme", Github).await,
        Err(StoreError::NotFound { .. })
    ));

    // A delivery is new once, until it expires.
    let later = Utc::now() + Duration::hours(1);
    assert!(s.claim_delivery(Github, "d-1", later).await.unwrap());
    assert!(!s.claim_delivery(Github, "d-1", later).await.unwrap());
    assert!(s
        .claim_delivery(Github, "d-2", Utc::now() - Duration::seconds(1))
        .await
        .unwrap());
    assert!(
        s.claim_delivery(Github, "d-2", later).await.unwrap(),
        "an expired delivery counts as absent"
    );
    s.forget_delivery(Github, "d-1").await.unwrap();
    s.forget_delivery(Github, "d-1").await.unwrap();
    assert!(
        s.claim_delivery(Github, "d-1", later).await.unwrap(),
        "a forgotten delivery is new again"
    );

    // The bindings index: repository names compare without case; idempotent; paged.
    let envs: Vec<EnvPath> = (0..30)
        .map(|i| EnvPath::parse(&format!("acme/web/e{i:02}")).unwrap())
        .collect();
    for e in &envs {
        s.index_binding(Github, "Acme/Infra", e).await.unwrap();
    }
    s.index_binding(Github, "acme/infra", &envs[0])
        .await
        .unwrap();
    s.index_binding(Github, "acme/other", &envs[1])
        .await
        .unwrap();
    let mut bound = s.bound_environments(Github, "ACME/infra").await.unwrap();
    bound.sort();
    assert_eq!(bound, envs);
    s.unindex_binding(Github, "acme/infra", &envs[3])
        .await
        .unwrap();
    s.unindex_binding(Github, "acme/infra", &envs[3])
        .await
        .unwrap();
    assert_eq!(
        s.bound_environments(Github, "acme/infra")
            .await
            .unwrap()
            .len(),
        29
    );
    assert!(s
        .bound_environments(Github, "acme/none")
        .await
        .unwrap()
        .is_empty());

    // An organisation's bound environments: its own only, whatever the repository; an
    // environment unindexed from one repository stays listed while another holds it.
    let other_org = EnvPath::parse("beta/web/prod").unwrap();
    s.index_binding(Github, "beta/infra", &other_org)
        .await
        .unwrap();
    let of_acme = s.bound_environments_of("acme", Github).await.unwrap();
    assert_eq!(of_acme.len(), 29, "{of_acme:?}");
    assert!(of_acme.contains(&envs[1]) && !of_acme.contains(&envs[3]));
    assert_eq!(
        s.bound_environments_of("beta", Github).await.unwrap(),
        vec![other_org.clone()]
    );
    s.unindex_binding(Github, "beta/infra", &other_org)
        .await
        .unwrap();
    assert!(s
        .bound_environments_of("beta", Github)
        .await
        .unwrap()
        .is_empty());

    // What the last reconcile saw open, per organisation, repository (without case) and base.
    let seen = sortie_core::vcs::reconcile::OpenPulls {
        etag: Some("W/\"abc\"".into()),
        numbers: vec![3, 7, 11],
    };
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "main")
            .await
            .unwrap(),
        Default::default()
    );
    s.put_open_pulls("acme", Github, "Acme/Infra", "main", &seen)
        .await
        .unwrap();
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "main")
            .await
            .unwrap(),
        seen
    );
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "develop")
            .await
            .unwrap(),
        Default::default()
    );

    // A pull request's record, written on condition of its version.
    assert!(s
        .get_pull_request(Github, "acme/infra", 7)
        .await
        .unwrap()
        .is_none());
    let mut pr = PullRequestRecord {
        provider: Github,
        org: "acme".into(),
        repository: "acme/Infra".into(),
        number: 7,
        head_sha: "a".repeat(40),
        base: "main".into(),
        author: "octocat".into(),
        fork: false,
        open: true,
        merged: false,
        notes: vec![],
        plans_allowed_by: None,
        comment_id: None,
        comment_digest: None,
        environments: Default::default(),
        over_limit: 0,
        updated_at: Utc::now().with_nanosecond(0).unwrap(),
    };
    assert_eq!(s.put_pull_request(&pr, None).await.unwrap(), 1);
    assert!(matches!(
        s.put_pull_request(&pr, None).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    pr.comment_id = Some(99);
    pr.environments.insert(
        "acme/web/e01".into(),
        PullEnvironment {
            sha: "a".repeat(40),
            plan_job: Some("01job".into()),
            ..Default::default()
        },
    );
    assert_eq!(s.put_pull_request(&pr, Some(1)).await.unwrap(), 2);
    assert!(matches!(
        s.put_pull_request(&pr, Some(1)).await,
        Err(StoreError::VersionMismatch {
            expected: 1,
            actual: 2,
            ..
        })
    ));
    let read = s
        .get_pull_request(Github, "ACME/infra", 7)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.item, read.version), (pr, 2));
}
