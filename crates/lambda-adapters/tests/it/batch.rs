//! The dispatch adapter on a real SQS batch shape: one bad record never fails the rest,
//! and a poison message reaches the dead-letter queue after 5 receives (moto's redrive).

#[path = "../../../lifecycle/tests/it/common/mod.rs"]
pub(crate) mod common;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::QueueAttributeName;
use common::World;
use sortie_core::JobState;
use sortie_store::{JobStore, SqsJobQueue};

fn sample_batch(first: &str, second: &str) -> SqsEvent {
    let text =
        std::fs::read_to_string(sortie_testkit::repo_root().join("events/sqs-batch.json")).unwrap();
    let text = text
        .replace("01jnx6v4k2m8q9r3s5t7w0y1za", first)
        .replace("01jnx6v7b3c4d5e6f7g8h9j0kb", second);
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn an_unparsable_record_is_the_only_batch_item_failure_and_the_rest_launch() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let a = w.environment("acme/payments/prod", "").await;
    let b = w.environment("acme/payments/eu", "").await;
    let (ja, _) = w.submit(&a, "plan", "").await;
    let (jb, _) = w.submit(&b, "apply", "").await;
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&w.direct), w.queue_url.clone());
    let response =
        sortie_lambda_adapters::dispatch_batch(&w.engine, &queue, sample_batch(&ja.id, &jb.id))
            .await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        vec!["c80e8021-a70a-42c7-a470-796e1186f753"],
        "only the record whose body is `not json`"
    );
    assert_eq!(w.state(&ja.id).await, JobState::Running);
    assert_eq!(w.state(&jb.id).await, JobState::Running);
    // The response serialises as Lambda expects for ReportBatchItemFailures.
    let json = serde_json::to_value(&response).unwrap();
    assert_eq!(
        json["batchItemFailures"][0]["itemIdentifier"],
        "c80e8021-a70a-42c7-a470-796e1186f753"
    );
}

#[tokio::test]
async fn a_poison_message_reaches_the_dead_letter_queue_after_five_receives() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let sqs = aws_sdk_sqs::Client::new(&w.direct);
    let dlq_url = sortie_testkit::standard_queue(&sqs, "dlq").await;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    let url = sqs
        .create_queue()
        .queue_name(sortie_testkit::unique("jobs"))
        .attributes(QueueAttributeName::VisibilityTimeout, "0")
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"5"}}"#),
        )
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue = SqsJobQueue::new(sqs.clone(), url.clone());
    sqs.send_message()
        .queue_url(&url)
        .message_body("not json")
        .send()
        .await
        .unwrap();
    let mut receives = 0;
    for _ in 0..10 {
        let got = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await
            .unwrap();
        let messages = got.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        receives += 1;
        let mut event = SqsEvent::default();
        for m in &messages {
            let mut r = aws_lambda_events::event::sqs::SqsMessage::default();
            r.message_id = m.message_id.clone();
            r.receipt_handle = m.receipt_handle.clone();
            r.body = m.body.clone();
            event.records.push(r);
        }
        let response = sortie_lambda_adapters::dispatch_batch(&w.engine, &queue, event).await;
        assert_eq!(
            response.batch_item_failures.len(),
            1,
            "poison is reported, so SQS keeps it"
        );
    }
    assert_eq!(receives, 5, "received five times, then moved");
    let dead = sqs
        .receive_message()
        .queue_url(&dlq_url)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body(), Some("not json"));
    let _ = w.store.active_jobs(1).await.unwrap();
}

#[tokio::test]
async fn a_record_for_an_unreadable_job_is_the_only_batch_item_failure_and_the_rest_launch() {
    sortie_testkit::require_aws!();
    use aws_sdk_dynamodb::types::AttributeValue;
    let w = World::new().await;
    let a = w.environment("acme/payments/prod", "").await;
    let b = w.environment("acme/payments/eu", "").await;
    let (ja, _) = w.submit(&a, "plan", "").await;
    let (jb, _) = w.submit(&b, "apply", "").await;
    // The first job's item can no longer be decoded (its state is not one Sortie knows).
    aws_sdk_dynamodb::Client::new(&w.direct)
        .update_item()
        .table_name(w.store.table())
        .key("pk", AttributeValue::S(format!("JOB#{}", ja.id)))
        .key("sk", AttributeValue::S("JOB".into()))
        .update_expression("SET #state = :x")
        .expression_attribute_names("#state", "state")
        .expression_attribute_values(":x", AttributeValue::S("exploded".into()))
        .send()
        .await
        .unwrap();
    let mut batch = sample_batch(&ja.id, &jb.id);
    // Keep the two job records only.
    batch
        .records
        .retain(|r| r.body.as_deref().is_some_and(|b| b.contains("job_id")));
    assert_eq!(batch.records.len(), 2);
    let first = batch.records[0].message_id.clone().unwrap();
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&w.direct), w.queue_url.clone());
    let response = sortie_lambda_adapters::dispatch_batch(&w.engine, &queue, batch).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        vec![first.as_str()],
        "only the unreadable job's record"
    );
    assert_eq!(w.state(&jb.id).await, JobState::Running);
    // The sweeper (once the job is older than the re-send delay) fails the unreadable job
    // and frees its environment.
    let later = chrono::Utc::now() + chrono::Duration::minutes(2);
    for _ in 0..2 {
        let _ = w.engine.sweep(later).await;
    }
    let rec = w.store.get_job(&ja.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::Failed);
    assert!(
        rec.job.reason().contains("unreadable"),
        "{}",
        rec.job.reason()
    );
    assert!(
        sortie_store::EnvironmentStore::get_environment(&*w.store, &a)
            .await
            .unwrap()
            .item
            .active_job
            .is_none()
    );
}

#[tokio::test]
async fn a_task_event_from_another_account_or_cluster_changes_nothing() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    let genuine = World::event("ecs-task-stopped-exit0.json", &job.id, &task);
    let cluster = genuine.cluster_arn.clone();
    let forged = [
        cluster.replace("123456789012", "999999999999"),
        cluster.replace("us-east-1", "eu-west-1"),
        format!("{}-other", cluster),
        "arn:aws:s3:::not-a-cluster".to_string(),
    ];
    for cluster_arn in forged {
        let mut event = genuine.clone();
        event.cluster_arn = cluster_arn.clone();
        assert_eq!(
            w.engine.task_event(&event).await.unwrap(),
            sortie_lifecycle::EventEffect::Ignored("not from the job's runner"),
            "{cluster_arn}"
        );
        assert_eq!(w.state(&job.id).await, JobState::Running, "{cluster_arn}");
    }
    // The adapter also refuses an envelope whose account is not the cluster's.
    let mut envelope: aws_lambda_events::event::eventbridge::EventBridgeEvent<
        sortie_lifecycle::EcsTaskStateChange,
    > = serde_json::from_str(
        &std::fs::read_to_string(
            sortie_testkit::repo_root().join("events/ecs-task-stopped-exit0.json"),
        )
        .unwrap(),
    )
    .unwrap();
    envelope.detail = genuine.clone();
    envelope.account = Some("999999999999".into());
    let outcome = sortie_lambda_adapters::task_state_change(&w.engine, envelope.clone())
        .await
        .unwrap();
    assert!(
        matches!(outcome, sortie_lifecycle::EventEffect::Ignored(_)),
        "{outcome:?}"
    );
    assert_eq!(w.state(&job.id).await, JobState::Running);
    // The genuine event finishes the job.
    envelope.account = Some("123456789012".into());
    assert_eq!(
        sortie_lambda_adapters::task_state_change(&w.engine, envelope)
            .await
            .unwrap(),
        sortie_lifecycle::EventEffect::Moved(JobState::Succeeded)
    );
}
