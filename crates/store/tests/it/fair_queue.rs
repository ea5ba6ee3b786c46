//! The jobs queue is an SQS fair queue (issue 27): every send carries the job's tenant (its
//! organisation) as `MessageGroupId`, and a burst from one tenant does not hold back
//! another's messages. On moto through the real SDK; moto's receive is patched to deliver
//! as AWS documents fair queues (scripts/moto_server.py, patch 7).

use std::collections::HashSet;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use chrono::Utc;
use sortie_core::{EnvPath, Job, JobRequest, RunnerId};
use sortie_store::{JobMessage, JobQueue, SqsJobQueue};

fn job_of(env: &str) -> Job {
    let env = EnvPath::parse(env).unwrap();
    let request =
        JobRequest::from_value(&serde_json::json!({"operation": "plan", "files": {"main.tf": ""}}))
            .unwrap();
    Job::new(
        sortie_core::tokens::new_id(),
        env.clone(),
        RunnerId::parse(&format!("{}/local", env.org())).unwrap(),
        request,
        "alice".into(),
        Utc::now(),
    )
}

/// Receives up to 10, held in flight for 5 minutes: (job id, group id) of each.
async fn receive(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, String)> {
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(300)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .send()
        .await
        .unwrap();
    got.messages()
        .iter()
        .map(|m| {
            let body: JobMessage = serde_json::from_str(m.body().unwrap()).unwrap();
            let group = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default();
            (body.job_id.to_string(), group)
        })
        .collect()
}

/// A new standard queue on moto, and the jobs queue over it.
async fn fresh_queue() -> (aws_sdk_sqs::Client, String, SqsJobQueue) {
    let sqs = aws_sdk_sqs::Client::new(&sortie_testkit::sdk_config().await);
    let url = sortie_testkit::standard_queue(&sqs, "fair").await;
    let queue = SqsJobQueue::new(sqs.clone(), url.clone());
    (sqs, url, queue)
}

#[tokio::test]
async fn a_quiet_tenants_jobs_are_delivered_before_a_noisy_tenants_backlog() {
    sortie_testkit::require_aws!();
    let (sqs, url, queue) = fresh_queue().await;
    // Tenant "acme" bursts 200 jobs over its environments.
    for n in 0..200 {
        queue
            .send(&job_of(&format!("acme/burst/e{n}")), 0)
            .await
            .unwrap();
    }
    // A consumer holds 40 of acme's in flight (>= 30, and all of the in-flight ones).
    let mut held = Vec::new();
    for _ in 0..4 {
        held.extend(receive(&sqs, &url).await);
    }
    assert_eq!(held.len(), 40);
    assert!(
        held.iter().all(|(_, g)| g == "acme"),
        "each send carries its tenant: {held:?}"
    );
    // Tenant "beta" submits 5 jobs behind acme's 160 still waiting.
    let mut beta = HashSet::new();
    for n in 0..5 {
        let job = job_of(&format!("beta/team/e{n}"));
        beta.insert(job.id.to_string());
        queue.send(&job, 0).await.unwrap();
    }
    let next = receive(&sqs, &url).await;
    let got: HashSet<String> = next
        .iter()
        .filter(|(_, g)| g == "beta")
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(
        got, beta,
        "beta's 5 come in the next receive, ahead of acme's backlog: {next:?}"
    );
    assert_eq!(
        next.iter().take(5).filter(|(_, g)| g == "beta").count(),
        5,
        "quiet tenants' messages first: {next:?}"
    );
}

#[tokio::test]
async fn a_cancel_and_a_send_carry_the_tenant_and_no_deduplication_id() {
    sortie_testkit::require_aws!();
    let (sqs, url, queue) = fresh_queue().await;
    let job = job_of("acme/team/app");
    queue.send(&job, 0).await.unwrap();
    queue
        .send_message(&JobMessage::cancel(&job, "alice"), 0)
        .await
        .unwrap();
    let got = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    assert_eq!(got.messages().len(), 2);
    for m in got.messages() {
        let attributes = m.attributes().unwrap();
        assert_eq!(
            attributes
                .get(&MessageSystemAttributeName::MessageGroupId)
                .map(String::as_str),
            Some("acme")
        );
        assert!(
            !attributes.contains_key(&MessageSystemAttributeName::MessageDeduplicationId),
            "a standard queue takes no deduplication id"
        );
        let body: serde_json::Value = serde_json::from_str(m.body().unwrap()).unwrap();
        assert!(
            body.get("tenant").is_none(),
            "the tenant is the group id, not in the body"
        );
    }
}

/// `sortie dev`'s hand-over tag travels as a message attribute, which a receive gets only
/// when it names it (as `sortie dev`'s poller does); an untagged send carries none.
#[tokio::test]
async fn a_tagged_send_carries_its_tag_as_a_message_attribute_beside_its_tenant() {
    sortie_testkit::require_aws!();
    let (sqs, url, queue) = fresh_queue().await;
    let (tagged, plain) = (job_of("acme/web/a"), job_of("acme/web/b"));
    let message = JobMessage::launch(&tagged);
    queue
        .send_tagged(&message, 0, Some("7f3a9c"))
        .await
        .unwrap();
    queue.send(&plain, 0).await.unwrap();
    let got = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .message_attribute_names(sortie_store::DISPATCHED_HERE_ATTRIBUTE)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .send()
        .await
        .unwrap();
    let mut seen: Vec<(String, Option<String>, String)> = got
        .messages()
        .iter()
        .map(|m| {
            let body: JobMessage = serde_json::from_str(m.body().unwrap()).unwrap();
            let tag = m
                .message_attributes()
                .and_then(|a| a.get(sortie_store::DISPATCHED_HERE_ATTRIBUTE))
                .and_then(|v| v.string_value().map(str::to_string));
            let group = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default();
            (body.job_id.to_string(), tag, group)
        })
        .collect();
    seen.sort();
    let mut want = vec![
        (
            tagged.id.to_string(),
            Some("7f3a9c".to_string()),
            "acme".to_string(),
        ),
        (plain.id.to_string(), None, "acme".to_string()),
    ];
    want.sort();
    assert_eq!(seen, want);
}
