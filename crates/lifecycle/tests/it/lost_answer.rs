//! A lost answer to Sortie's own conditional write (issue 25, item 10). DynamoDB commits
//! the claim's UpdateItem (`queued → dispatching`), its answer is lost, and the SDK retries:
//! the retry fails its own condition. With `ReturnValuesOnConditionCheckFailure = ALL_OLD`
//! the refusal carries the item as it is; when it shows this very claim (`dispatching`, the
//! token hash the claim wrote), the claim succeeded and dispatch goes on to launch, at once.
//!
//! The moto tests need `scripts/with-moto.sh cargo test -p sortie-lifecycle --test it -- lost_answer::`.

use crate::common;

use chrono::Utc;
use common::World;
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink, RunnerSpec,
};
use sortie_lifecycle::MessageDisposition;
use sortie_store::{JobStore, JobUpdate, MemoryStore, Store, StoreError};

#[tokio::test]
async fn a_claim_whose_answer_is_lost_launches_at_once_with_one_run_task() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, took) = w.submit(&env, "plan", "").await;
    assert!(took);
    w.proxy.clear();
    // The claim is dispatch's first UpdateItem: committed, then its answer lost.
    w.proxy.lose_answer("UpdateItem", 1);

    let outcome = w.engine.dispatch(&World::body(&job.id), 1).await;

    assert_eq!(outcome, MessageDisposition::Done);
    let record = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(
        record.job.state,
        JobState::Running,
        "launched at once, not left to the dispatch lease: {:?}",
        record.job.transitions
    );
    assert!(record.task.is_some(), "its task is recorded");
    assert_eq!(w.proxy.count("RunTask"), 1, "exactly one RunTask");
    assert_eq!(record.attempt, 1, "one launch attempt");
    let claims = record
        .job
        .transitions
        .iter()
        .filter(|t| t.to == JobState::Dispatching)
        .count();
    assert_eq!(claims, 1, "the claim is recorded once");
    // The claim was sent twice (the lost answer, the SDK's retry), and the retry carried
    // ReturnValuesOnConditionCheckFailure = ALL_OLD.
    let updates = w.proxy.requests_for("UpdateItem");
    assert!(updates.len() >= 2, "{} UpdateItem", updates.len());
    for claim in &updates[..2] {
        let body = claim.json().unwrap();
        assert_eq!(
            body["ReturnValuesOnConditionCheckFailure"], "ALL_OLD",
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_claim_by_another_dispatch_is_still_a_duplicate_delivery() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "plan", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    // A second delivery: its claim (another token) is refused, and nothing is launched.
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 2).await,
        MessageDisposition::Done
    );
    assert_eq!(w.proxy.count("RunTask"), 1);
    let record = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(record.attempt, 1);
    // The store refuses a claim whose token hash is not the one written.
    let refused = w
        .store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed by dispatch",
            JobUpdate {
                token_hash: Some("another-claim".into()),
                next_attempt: true,
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(StoreError::StateConflict {
                actual: JobState::Running,
                ..
            })
        ),
        "{refused:?}"
    );
}

fn spec() -> RunnerSpec {
    RunnerSpec::parse(
        "runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: sortie-ext-7f3a
  region: us-east-1
  cluster: runners
  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1
  container_name: runner
  subnets: [subnet-0123456789abcdef0]
  security_groups: [sg-0123456789abcdef0]
state_storage_configuration:
  type: s3
  bucket: acme-state
  region: us-east-1
",
    )
    .unwrap()
}

/// What both stores answer when a claim meets its own earlier write: DynamoStore finds it
/// in the refusal's item (moto), MemoryStore in its map.
async fn own_write_is_success_and_another_is_a_conflict(store: &dyn Store) {
    let runner = RunnerId::parse("acme/fargate").unwrap();
    let spec = spec();
    let _ = store
        .create_runner(&Runner {
            id: runner.clone(),
            spec: spec.clone(),
        })
        .await;
    let path = EnvPath::parse(&format!("acme/s{}/prod", sortie_core::tokens::new_id())).unwrap();
    store
        .create_environment(&Environment {
            settings: Default::default(),
            path: path.clone(),
            env_type: "production".into(),
            labels: Default::default(),
            tags: Default::default(),
            runner: RunnerLink {
                runner_id: runner.clone(),
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: Utc::now(),
            },
        })
        .await
        .unwrap();
    let mut job = Job::new(
        sortie_core::tokens::new_id(),
        path,
        runner,
        JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap(),
        "alice".into(),
        Utc::now(),
    );
    job.runner_spec = Some(spec);
    store.submit_job(&job, None).await.unwrap();
    let at = Utc::now();
    let claim = |hash: &str| JobUpdate {
        token_hash: Some(hash.to_string()),
        next_attempt: true,
        ..Default::default()
    };
    let first = store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            at,
            "claimed by dispatch",
            claim("h1"),
        )
        .await
        .unwrap();
    let again = store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            at,
            "claimed by dispatch",
            claim("h1"),
        )
        .await
        .unwrap();
    assert_eq!(again, first, "the same claim again is the claim as written");
    assert_eq!(again.attempt, 1, "not a second attempt");
    let other = store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            at,
            "claimed by dispatch",
            claim("h2"),
        )
        .await;
    assert!(
        matches!(
            other,
            Err(StoreError::StateConflict {
                actual: JobState::Dispatching,
                ..
            })
        ),
        "{other:?}"
    );
    // Without a token hash a write is never recognised as one's own.
    let plain = store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            at,
            "claimed by dispatch",
            JobUpdate::default(),
        )
        .await;
    assert!(
        matches!(plain, Err(StoreError::StateConflict { .. })),
        "{plain:?}"
    );
}

#[tokio::test]
async fn memory_store_answers_a_claims_own_earlier_write_as_dynamodb_does() {
    own_write_is_success_and_another_is_a_conflict(&MemoryStore::new()).await;
}

#[tokio::test]
async fn dynamo_store_recognises_its_own_claim_in_the_refusals_item() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    own_write_is_success_and_another_is_a_conflict(w.store.as_ref()).await;
}
