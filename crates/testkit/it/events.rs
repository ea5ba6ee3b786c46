//! The sample events in `events/` decode into the `aws_lambda_events` types the
//! functions use, and carry the fields the tests and `sam local invoke` rely on.
//! A sample broken by an edit fails here, not in a confusing function test.

use std::collections::BTreeSet;
use std::path::PathBuf;

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::Value;

fn events_dir() -> PathBuf {
    sortie_testkit::repo_root().join("events")
}

fn text(name: &str) -> String {
    let path = events_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn apigw(name: &str) -> ApiGatewayV2httpRequest {
    serde_json::from_str(&text(name))
        .unwrap_or_else(|e| panic!("{name} is not an API Gateway v2 request: {e}"))
}

fn eventbridge(name: &str) -> EventBridgeEvent<Value> {
    serde_json::from_str(&text(name))
        .unwrap_or_else(|e| panic!("{name} is not an EventBridge event: {e}"))
}

const APIGW: &[&str] = &[
    "apigw-health.json",
    "apigw-create-runner.json",
    "apigw-list-runners.json",
    "apigw-create-rule.json",
    "apigw-create-environment.json",
    "apigw-get-environment.json",
    "apigw-submit-job.json",
    "apigw-unauthenticated.json",
    "apigw-bad-json.json",
];

const ECS: &[&str] = &[
    "ecs-task-running.json",
    "ecs-task-stopped-exit0.json",
    "ecs-task-stopped-exit1.json",
    "ecs-task-failed-to-start.json",
    "ecs-task-spot-interruption.json",
    "ecs-task-oom.json",
    "ecs-task-stopped-by-user.json",
    "ecs-task-timed-out.json",
];

#[test]
fn every_sample_is_json_and_is_checked_here() {
    let mut known: BTreeSet<&str> = APIGW.iter().chain(ECS).copied().collect();
    known.insert("sqs-batch.json");
    known.insert("schedule-tick.json");
    known.insert(ARRAY_CLAIM);
    known.insert(CONSOLE_INDEX);
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(events_dir()).expect("events/ exists") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") {
            continue;
        }
        serde_json::from_str::<Value>(&text(&name))
            .unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        found.insert(name);
    }
    let known: BTreeSet<String> = known.into_iter().map(String::from).collect();
    assert_eq!(
        found, known,
        "every sample in events/ is decoded by a test here (add new ones to the lists)"
    );
}

#[test]
fn api_gateway_samples_are_http_api_v2_requests() {
    for name in APIGW {
        let raw: Value = serde_json::from_str(&text(name)).unwrap();
        let req = apigw(name);
        assert_eq!(req.version.as_deref(), Some("2.0"), "{name}");
        assert_eq!(req.route_key.as_deref(), Some("$default"), "{name}");
        assert_eq!(
            req.request_context.stage.as_deref(),
            Some("$default"),
            "{name}"
        );
        let path = req.raw_path.as_deref().unwrap_or_default();
        assert!(path.starts_with("/v1/"), "{name}: {path}");
        assert!(
            !path.contains('%'),
            "{name}: HTTP APIs deliver rawPath decoded"
        );
        assert_eq!(
            req.request_context.http.path.as_deref(),
            Some(path),
            "{name}"
        );
        assert!(!req.is_base64_encoded, "{name}");
        assert!(req.headers.contains_key("host"), "{name}");
        // Every POST carries a body whose content-length header is right.
        if req.request_context.http.method.as_str() == "POST" {
            let body = req
                .body
                .as_deref()
                .unwrap_or_else(|| panic!("{name}: no body"));
            assert_eq!(
                req.headers["content-length"].to_str().unwrap(),
                body.len().to_string(),
                "{name}"
            );
        } else {
            assert!(raw.get("body").is_none(), "{name}: a GET has no body");
        }
        let claims = req
            .request_context
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| jwt.claims.clone());
        let anonymous = ["apigw-health.json", "apigw-unauthenticated.json"].contains(name);
        match claims {
            Some(claims) => {
                assert!(!anonymous, "{name} must have no authorizer");
                assert_eq!(claims["sub"], "admin", "{name}");
                assert_eq!(claims["iss"], "https://idp.example.com", "{name}");
                assert!(req.headers.contains_key("authorization"), "{name}");
            }
            None => {
                assert!(anonymous, "{name} must carry JWT claims");
                assert!(!req.headers.contains_key("authorization"), "{name}");
            }
        }
    }
}

#[test]
fn api_gateway_samples_carry_the_requests_the_api_test_sends() {
    let runner = apigw("apigw-create-runner.json");
    assert_eq!(
        runner.raw_path.as_deref(),
        Some("/v1/groups/acme/-/runners/local")
    );
    let spec: Value = serde_norway::from_str(runner.body.as_deref().unwrap()).unwrap();
    assert_eq!(spec["runner_configuration"]["type"], "local");
    assert_eq!(spec["state_storage_configuration"]["type"], "local");
    assert_eq!(
        spec["state_storage_configuration"]["directory"],
        "/tmp/sortie-state"
    );

    let rule = apigw("apigw-create-rule.json");
    let body: Value = serde_json::from_str(rule.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"id": "default", "runner_id": "acme/local"})
    );

    let env = apigw("apigw-create-environment.json");
    assert_eq!(
        env.raw_path.as_deref(),
        Some("/v1/groups/acme/payments/-/environments")
    );
    let body: Value = serde_json::from_str(env.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"name": "prod", "env_type": "production"})
    );

    let job = apigw("apigw-submit-job.json");
    assert_eq!(job.request_context.http.method.as_str(), "POST");
    assert!(job.headers.contains_key("idempotency-key"));
    let body: Value = serde_json::from_str(job.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["operation"], "plan");
    assert!(body["files"]["main.tf"]
        .as_str()
        .unwrap()
        .contains("output \"hello\""));

    let bad = apigw("apigw-bad-json.json");
    assert!(serde_json::from_str::<Value>(bad.body.as_deref().unwrap()).is_err());

    let health = apigw("apigw-health.json");
    assert_eq!(health.request_context.http.method.as_str(), "GET");
    assert_eq!(health.raw_path.as_deref(), Some("/v1/health"));
    assert_eq!(
        apigw("apigw-unauthenticated.json").raw_path,
        apigw("apigw-list-runners.json").raw_path
    );
    assert_eq!(
        apigw("apigw-get-environment.json").raw_path.as_deref(),
        Some("/v1/environments/acme/payments/prod")
    );
}

#[test]
fn sqs_batch_has_three_records_one_unparsable() {
    let event: SqsEvent = serde_json::from_str(&text("sqs-batch.json")).unwrap();
    assert_eq!(event.records.len(), 3);
    let mut ids = BTreeSet::new();
    let mut unparsable = 0;
    for r in &event.records {
        assert!(
            ids.insert(r.message_id.clone().unwrap()),
            "message ids differ"
        );
        assert!(r.receipt_handle.as_deref().is_some_and(|h| !h.is_empty()));
        assert_eq!(r.event_source.as_deref(), Some("aws:sqs"));
        assert_eq!(r.aws_region.as_deref(), Some("us-east-1"));
        assert!(r
            .event_source_arn
            .as_deref()
            .is_some_and(|a| a.starts_with("arn:aws:sqs:us-east-1:")));
        let count: u32 = r.attributes["ApproximateReceiveCount"].parse().unwrap();
        assert!(count >= 1);
        let _sent: u64 = r.attributes["SentTimestamp"].parse().unwrap();
        assert!(r.message_attributes.is_empty());
        let body = r.body.as_deref().unwrap();
        assert_eq!(r.md5_of_body.as_deref().map(str::len), Some(32));
        match serde_json::from_str::<Value>(body) {
            Ok(v) => {
                let id = v["job_id"].as_str().unwrap();
                assert_eq!(id.len(), 26, "a job id is a ULID: {id}");
                assert_eq!(id, id.to_lowercase());
            }
            Err(_) => {
                assert_eq!(body, "not json");
                unparsable += 1;
            }
        }
    }
    assert_eq!(unparsable, 1);
}

#[test]
fn ecs_samples_are_task_state_changes_of_sortie_runners() {
    for name in ECS {
        let event = eventbridge(name);
        assert_eq!(event.detail_type, "ECS Task State Change", "{name}");
        assert_eq!(event.source, "aws.ecs", "{name}");
        assert_eq!(event.version.as_deref(), Some("0"), "{name}");
        assert!(event.time.is_some(), "{name}");
        let d = &event.detail;
        let task = d["taskArn"].as_str().unwrap();
        assert_eq!(
            event.resources.as_deref(),
            Some(&[task.to_string()][..]),
            "{name}"
        );
        assert_eq!(d["group"], "family:sortie-runner", "{name}");
        assert_eq!(d["launchType"], "FARGATE", "{name}");
        assert_eq!(
            d["startedBy"],
            sortie_launch::started_by("01jexample0000000000000000"),
            "{name}"
        );
        assert!(
            d["clusterArn"]
                .as_str()
                .unwrap()
                .starts_with("arn:aws:ecs:"),
            "{name}"
        );
        assert!(d["version"].is_u64(), "{name}");
        let containers = d["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{name}");
        let c = &containers[0];
        assert_eq!(c["name"], "runner", "{name}");
        assert_eq!(c["taskArn"], task, "{name}");
        let stopped = d["lastStatus"] == "STOPPED";
        assert_eq!(stopped, name != &"ecs-task-running.json", "{name}");
        if stopped {
            assert_eq!(d["desiredStatus"], "STOPPED", "{name}");
            for key in ["stopCode", "stoppedReason", "stoppingAt", "stoppedAt"] {
                assert!(d[key].is_string(), "{name}: {key}");
            }
        } else {
            assert!(d.get("stopCode").is_none(), "{name}");
            assert!(c.get("exitCode").is_none(), "{name}");
        }
    }

    let expect = |name: &str, stop_code: &str, exit: Option<i64>| {
        let d = eventbridge(name).detail;
        assert_eq!(d["stopCode"], stop_code, "{name}");
        assert_eq!(d["containers"][0]["exitCode"].as_i64(), exit, "{name}");
        d
    };
    expect(
        "ecs-task-stopped-exit0.json",
        "EssentialContainerExited",
        Some(0),
    );
    expect(
        "ecs-task-stopped-exit1.json",
        "EssentialContainerExited",
        Some(1),
    );
    let d = expect("ecs-task-failed-to-start.json", "TaskFailedToStart", None);
    assert!(d["stoppedReason"]
        .as_str()
        .unwrap()
        .starts_with("CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref"));
    assert!(d.get("startedAt").is_none());
    let d = expect(
        "ecs-task-spot-interruption.json",
        "SpotInterruption",
        Some(143),
    );
    assert_eq!(d["stoppedReason"], "Your Spot Task was interrupted.");
    assert_eq!(d["capacityProviderName"], "FARGATE_SPOT");
    let d = expect("ecs-task-oom.json", "EssentialContainerExited", Some(137));
    assert_eq!(
        d["containers"][0]["reason"],
        "OutOfMemoryError: Container killed due to memory usage"
    );
    let d = expect("ecs-task-stopped-by-user.json", "UserInitiated", Some(143));
    assert_eq!(d["stoppedReason"], "sortie: canceled by alice");
    let d = expect("ecs-task-timed-out.json", "UserInitiated", Some(143));
    assert_eq!(d["stoppedReason"], "sortie: timed out after 7200s");
    assert_eq!(
        eventbridge("ecs-task-running.json").detail["capacityProviderName"],
        "FARGATE"
    );
}

#[test]
fn schedule_tick_is_a_scheduled_event() {
    let event = eventbridge("schedule-tick.json");
    assert_eq!(event.detail_type, "Scheduled Event");
    assert_eq!(event.source, "aws.events");
    assert_eq!(event.detail, serde_json::json!({}));
    let resources = event.resources.unwrap();
    assert_eq!(resources.len(), 1);
    assert!(resources[0].starts_with("arn:aws:events:us-east-1:123456789012:rule/"));
}

/// A request whose JWT carries an array claim, as API Gateway hands it on (issue 25 item 7).
const ARRAY_CLAIM: &str = "apigw-whoami-array-claim.json";

#[test]
fn the_array_claim_sample_is_an_http_api_request_with_a_bracketed_claim() {
    let req = apigw(ARRAY_CLAIM);
    assert_eq!(req.version.as_deref(), Some("2.0"));
    let claims = req
        .request_context
        .authorizer
        .as_ref()
        .and_then(|a| a.jwt.as_ref())
        .map(|jwt| jwt.claims.clone())
        .expect("JWT claims");
    let bracketed = claims
        .values()
        .find(|v| v.starts_with('[') && v.ends_with(']'))
        .unwrap_or_else(|| panic!("an array claim in its bracketed form: {claims:?}"));
    assert!(bracketed.contains(' '), "{bracketed}");
}

/// A browser opening the console: `GET /` on its own route, without the JWT authorizer.
const CONSOLE_INDEX: &str = "apigw-console-index.json";

#[test]
fn the_console_sample_is_an_anonymous_get_of_the_console_route() {
    let req = apigw(CONSOLE_INDEX);
    assert_eq!(req.version.as_deref(), Some("2.0"));
    assert_eq!(req.route_key.as_deref(), Some("GET /"));
    assert_eq!(req.raw_path.as_deref(), Some("/"));
    assert_eq!(req.request_context.http.method.as_str(), "GET");
    assert!(sortie_api::console::GATEWAY_ROUTES.contains(&("GET", "/")));
    assert!(req.request_context.authorizer.is_none());
    assert!(!req.headers.contains_key("authorization"));
}
