//! The real `pulls` Lambda binary under the Runtime API double, against moto: the
//! schedule's tick (`events/schedule-tick.json`) queues one reconcile per connected
//! organisation on the pull queue, and a batch (`events/sqs-batch.json` with pull-queue
//! bodies) answers exactly its record that is not pull-request work as a batch item
//! failure, while work for an organisation with no connection is dropped, not retried.

use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::work::PullWork;
use sortie_core::vcs::VcsProvider;
use sortie_store::{DynamoStore, VcsStore};
use sortie_testkit::runtime::{event, function_binary, RuntimeDouble};
use sortie_testkit::{endpoint, sdk_config, unique, REGION, TEST_CREDENTIAL};

const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);

fn connection(org: &str) -> VcsConnection {
    VcsConnection {
        org: org.into(),
        provider: VcsProvider::Github,
        app_id: 1,
        api_url: "https://api.github.com".into(),
        credential_secret: format!(
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:sortie/vcs/{org}/github/key"
        ),
        webhook_secret: format!(
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:sortie/vcs/{org}/github/hook"
        ),
        created_by: "lambda_pulls test".into(),
        created_at: Utc::now(),
    }
}

#[tokio::test]
async fn the_pulls_binary_queues_reconciles_on_a_tick_and_fails_only_the_junk_of_a_batch() {
    sortie_testkit::require_aws!();
    let config = sdk_config().await;
    let table = unique("sortie-lambda-pulls");
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table.clone());
    store.ensure_table().await.expect("create the table");
    for org in ["acme", "beta"] {
        store.put_connection(&connection(org)).await.unwrap();
    }
    let sqs = aws_sdk_sqs::Client::new(&config);
    let jobs_url = sortie_testkit::standard_queue(&sqs, "sortie-lambda-jobs").await;
    let pulls_url = sortie_testkit::standard_queue(&sqs, "sortie-lambda-pulls").await;

    let binary = function_binary("pulls");
    let runtime = RuntimeDouble::start();
    let endpoint = endpoint();
    let pulls = runtime.spawn_function(
        &binary,
        &[
            ("SORTIE_TABLE", table.as_str()),
            ("SORTIE_JOBS_QUEUE_URL", jobs_url.as_str()),
            ("SORTIE_PULL_QUEUE_URL", pulls_url.as_str()),
            ("SORTIE_API_URL", "https://sortie.example.com"),
            ("SORTIE_BUS_NAME", "default"),
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", TEST_CREDENTIAL),
            ("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIAL),
            ("AWS_REGION", REGION),
            ("AWS_DEFAULT_REGION", REGION),
            ("RUST_LOG", "info"),
        ],
    );

    // The tick: one reconcile per connected organisation, on the pull queue.
    runtime
        .invoke(event("schedule-tick.json"), INVOKE_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("tick: {e}\n--- logs:\n{}", pulls.logs()));
    let mut orgs = Vec::new();
    for _ in 0..5 {
        let got = sqs
            .receive_message()
            .queue_url(&pulls_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in got.messages.unwrap_or_default() {
            let work: PullWork = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
            match work {
                PullWork::Reconcile { org, .. } => orgs.push(org),
                other => panic!("{other:?}"),
            }
        }
        if orgs.len() >= 2 {
            break;
        }
    }
    orgs.sort();
    assert_eq!(orgs, ["acme", "beta"], "--- logs:\n{}", pulls.logs());

    // A batch: junk, work for an organisation with no connection, and a pull-request job's
    // sortie.job.ended as the rule sends it (also for no connection).
    let mut batch = event("sqs-batch.json");
    let completed = json!({
        "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "sortie.job.ended", "source": "sortie",
        "account": "123456789012", "time": "2026-11-28T22:00:00Z", "region": "us-east-1",
        "resources": ["sortie:job/01jnx6v4k2m8q9r3s5t7w0y1za"],
        "detail": {"job_id": "01jnx6v4k2m8q9r3s5t7w0y1za", "org": "nobody", "environment": "nobody/web",
                   "pull_request": {"provider": "github", "repository": "nobody/infra", "number": 7, "head_sha": "a".repeat(40)}}
    });
    let bodies = [
        "not json".to_string(),
        serde_json::to_string(&PullWork::Report {
            org: "nobody".into(),
            provider: sortie_core::vcs::VcsProvider::Github,
            repository: "nobody/infra".into(),
            number: 7,
        })
        .unwrap(),
        completed.to_string(),
    ];
    let records = batch["Records"].as_array_mut().unwrap();
    records.truncate(3);
    for (record, body) in records.iter_mut().zip(&bodies) {
        record["body"] = Value::from(body.as_str());
        record["eventSourceARN"] = Value::from("arn:aws:sqs:us-east-1:123456789012:sortie-pulls");
    }
    let junk_id = records[0]["messageId"].as_str().unwrap().to_string();
    let answer = runtime
        .invoke(batch, INVOKE_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("batch: {e}\n--- logs:\n{}", pulls.logs()));
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": junk_id}]),
        "--- logs:\n{}",
        pulls.logs()
    );
}
