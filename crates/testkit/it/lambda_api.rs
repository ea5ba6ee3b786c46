//! The real `api` Lambda binary under the Runtime API double, against moto:
//! the API Gateway HTTP API (payload v2) samples in `events/` go in, API
//! Gateway v2 responses (`statusCode`, `headers`, `body`) come out.

use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use sortie_core::{Grantee, GroupPath, Membership, Role};
use sortie_store::{DynamoStore, MembershipRecord, MembershipStore};
use sortie_testkit::runtime::{event, function_binary, FunctionProcess, RuntimeDouble};
use sortie_testkit::{endpoint, sdk_config, unique, REGION, TEST_CREDENTIAL};

const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);

/// An API Gateway v2 response, its body parsed as JSON.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Value,
    body: Value,
}

async fn call(runtime: &RuntimeDouble, function: &FunctionProcess, name: &str) -> Answer {
    let response = runtime
        .invoke(event(name), INVOKE_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}\n--- api logs:\n{}", function.logs()));
    let status = response["statusCode"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}: no statusCode in {response}")) as u16;
    assert_eq!(
        response["isBase64Encoded"], false,
        "{name}: JSON bodies are text"
    );
    let text = response["body"].as_str().unwrap_or_default();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("{name}: body is not JSON ({e}): {text}"))
    };
    Answer {
        status,
        headers: response["headers"].clone(),
        body,
    }
}

#[tokio::test]
async fn the_api_binary_answers_api_gateway_events() {
    sortie_testkit::require_aws!();
    // Resources on moto: the table (with a system administrator) and the jobs queue.
    let config = sdk_config().await;
    let table = unique("sortie-lambda-api");
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table.clone());
    store.ensure_table().await.expect("create the table");
    store
        .put_membership(&MembershipRecord {
            id: sortie_core::tokens::new_id(),
            membership: Membership {
                group: GroupPath::parse("").unwrap(),
                role: Role::Owner,
                grantee: Grantee::Subject {
                    subject: "admin".into(),
                    issuer: None,
                },
            },
            granted_by: "lambda_api test".into(),
            granted_at: Utc::now(),
        })
        .await
        .expect("seed the administrator");
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue_url = sortie_testkit::standard_queue(&sqs, "sortie-lambda-jobs").await;

    // The real binary, as Lambda would run it.
    let binary = function_binary("api");
    let runtime = RuntimeDouble::start();
    let endpoint = endpoint();
    let api = runtime.spawn_function(
        &binary,
        &[
            ("SORTIE_TABLE", table.as_str()),
            ("SORTIE_JOBS_QUEUE_URL", queue_url.as_str()),
            ("SORTIE_BUCKET", "sortie-lambda-api-artifacts"),
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", TEST_CREDENTIAL),
            ("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIAL),
            ("AWS_REGION", REGION),
            ("AWS_DEFAULT_REGION", REGION),
            ("RUST_LOG", "info"),
        ],
    );

    let health = call(&runtime, &api, "apigw-health.json").await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.body["status"], "ok");
    assert!(
        health.headers["content-type"]
            .as_str()
            .is_some_and(|t| t.starts_with("application/json")),
        "{health:?}"
    );

    let anonymous = call(&runtime, &api, "apigw-unauthenticated.json").await;
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert_eq!(anonymous.body["error"]["code"], "unauthenticated");

    let runner = call(&runtime, &api, "apigw-create-runner.json").await;
    assert_eq!(runner.status, 201, "{runner:?}");
    assert_eq!(runner.body["id"], "acme/local", "{runner:?}");
    assert_eq!(runner.headers["etag"], "\"1\"", "{runner:?}");

    let listed = call(&runtime, &api, "apigw-list-runners.json").await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let ids: Vec<&str> = listed.body["runners"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, ["acme/local"], "{listed:?}");

    let rule = call(&runtime, &api, "apigw-create-rule.json").await;
    assert_eq!(rule.status, 201, "{rule:?}");

    let env = call(&runtime, &api, "apigw-create-environment.json").await;
    assert_eq!(env.status, 201, "{env:?}");
    assert_eq!(env.body["runner"]["runner_id"], "acme/local", "{env:?}");
    assert_eq!(env.body["resolution"]["rule"]["id"], "default", "{env:?}");

    let got = call(&runtime, &api, "apigw-get-environment.json").await;
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(got.body["path"], "acme/payments/prod", "{got:?}");

    let job = call(&runtime, &api, "apigw-submit-job.json").await;
    assert_eq!(job.status, 201, "{job:?}");
    let job_id = job.body["id"].as_str().expect("a job id").to_string();
    assert_eq!(job.body["environment"], "acme/payments/prod", "{job:?}");

    let replay = call(&runtime, &api, "apigw-submit-job.json").await;
    assert_eq!(replay.status, 200, "an idempotent replay: {replay:?}");
    assert_eq!(replay.body["id"], job_id.as_str(), "{replay:?}");
    assert_eq!(replay.headers["idempotent-replayed"], "true", "{replay:?}");

    // The first submit took the environment's lock, so the job was sent to the queue once.
    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    let sent: Vec<Value> = received
        .messages()
        .iter()
        .map(|m| serde_json::from_str(m.body().unwrap()).unwrap())
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["job_id"], job_id.as_str());

    let bad = call(&runtime, &api, "apigw-bad-json.json").await;
    assert_eq!(bad.status, 400, "{bad:?}");
    assert_eq!(bad.body["error"]["code"], "invalid_request", "{bad:?}");
    assert!(
        bad.body["error"]["fields"]
            .as_array()
            .is_some_and(|f| !f.is_empty()),
        "{bad:?}"
    );

    // Every invocation was answered as a response, none as a function error.
    let completions = runtime.completions();
    assert_eq!(completions.len(), 10, "{completions:?}");
    assert!(
        completions
            .iter()
            .all(|c| matches!(c, sortie_testkit::runtime::Completion::Response { .. })),
        "{completions:?}"
    );
    assert!(runtime.init_errors().is_empty());
}

/// One raw HTTP exchange with the double: (status, headers and body text).
fn exchange(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).unwrap();
    out
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response
        .split("\r\n\r\n")
        .next()?
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

#[tokio::test]
async fn the_runtime_double_long_polls_and_relays_responses_and_errors() {
    sortie_testkit::require_aws!();
    let runtime = RuntimeDouble::start();
    let addr = runtime.addr();

    // Nobody polls: the invocation times out and is withdrawn.
    let err = runtime
        .invoke(serde_json::json!({"n": 0}), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(err, sortie_testkit::runtime::InvokeError::Timeout(_)),
        "{err}"
    );

    // A poller that answers the first event and fails the second.
    let poller = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let next = "GET /2018-06-01/runtime/invocation/next HTTP/1.1\r\nHost: x\r\n\r\n";
            let mut seen = vec![];
            for answer in ["response", "error"] {
                let got = exchange(&addr, next);
                assert!(got.starts_with("HTTP/1.1 200"), "{got}");
                let id = header(&got, "lambda-runtime-aws-request-id")
                    .unwrap()
                    .to_string();
                let deadline: u128 = header(&got, "lambda-runtime-deadline-ms")
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(deadline > 1_600_000_000_000);
                assert!(header(&got, "lambda-runtime-invoked-function-arn")
                    .unwrap()
                    .starts_with("arn:aws:lambda:"));
                assert!(header(&got, "lambda-runtime-trace-id")
                    .unwrap()
                    .starts_with("Root=1-"));
                let event: Value =
                    serde_json::from_str(got.split("\r\n\r\n").nth(1).unwrap()).unwrap();
                seen.push(event["n"].as_i64().unwrap());
                let body = if answer == "response" {
                    serde_json::json!({"statusCode": 200}).to_string()
                } else {
                    serde_json::json!({"errorType": "&alloc::string::String", "errorMessage": "boom"}).to_string()
                };
                let post = format!(
                    "POST /2018-06-01/runtime/invocation/{id}/{answer} HTTP/1.1\r\nHost: x\r\nLambda-Runtime-Function-Error-Type: Unhandled\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let ack = exchange(&addr, &post);
                assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
            }
            seen
        })
    };
    let ok = runtime
        .invoke(serde_json::json!({"n": 1}), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(ok, serde_json::json!({"statusCode": 200}));
    let err = runtime
        .invoke(serde_json::json!({"n": 2}), Duration::from_secs(30))
        .await
        .unwrap_err();
    match err {
        sortie_testkit::runtime::InvokeError::Function { error_type, body } => {
            assert_eq!(error_type, "Unhandled");
            assert_eq!(body["errorMessage"], "boom");
        }
        other => panic!("{other}"),
    }
    assert_eq!(
        poller.join().unwrap(),
        [1, 2],
        "the timed-out event was never handed out"
    );
    assert_eq!(runtime.completions().len(), 2);
    assert_eq!(runtime.polls(), 2);

    // An init error fails what waits and everything after.
    let init =
        "POST /2018-06-01/runtime/init/error HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    assert!(exchange(&addr, init).starts_with("HTTP/1.1 202"));
    let err = runtime
        .invoke(serde_json::json!({"n": 3}), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(
        matches!(err, sortie_testkit::runtime::InvokeError::Init(_)),
        "{err}"
    );
}
