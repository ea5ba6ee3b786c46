//! Secrets Manager's request quota, through the HTTP API on moto (issue 41, item 9):
//! CreateSecret, DeleteSecret and the other control-plane calls are limited to 50 per
//! second per account and Region, not adjustable
//! (https://docs.aws.amazon.com/secretsmanager/latest/userguide/reference_limits.html);
//! scripts/moto_secrets_throttle.py makes moto answer `ThrottlingException` past it, as AWS
//! does. A CI burst of submits must all pass, and a burst of job ends must leave no secret
//! holding a value: one secret per job, and every call retried with backoff.

use std::io::{Read, Write};

use crate::common;

use common::{seed_org, Api};
use futures_util::future::join_all;
use serde_json::{json, Value};
use sortie_client::{endpoints, Call};
use sortie_core::JobId;

/// The calls moto's quota double answered and throttled for `operation` so far.
fn throttle_counts(operation: &str) -> (u64, u64) {
    let endpoint = sortie_testkit::endpoint();
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = std::net::TcpStream::connect(host).expect("moto answers");
    write!(
        conn,
        "GET /_sortie/secrets-throttle HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let body = answer.split_once("\r\n\r\n").expect("an HTTP answer").1;
    let counts: Value = serde_json::from_str(body).expect("the double's counts (patch 8)");
    let n = |how: &str| counts[operation][how].as_u64().unwrap_or(0);
    (n("answered"), n("throttled"))
}

/// A neighbour in the same account and Region: a thread that sends GetRandomPassword (a
/// control-plane call, in the same 50-per-second budget, and one moto answers without
/// reading its store, so its pace holds on a loaded moto where ListSecrets, which walks
/// every secret, fell behind) at a steady `per_second` until dropped, so the calls under
/// test meet the quota however fast or slow this machine is, while the rest of the budget
/// stays theirs.
struct Neighbour {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Neighbour {
    fn start(per_second: u32) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let endpoint = sortie_testkit::endpoint();
        let host = endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let every = std::time::Duration::from_secs(1) / per_second;
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut next = std::time::Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    next += every;
                    // Each call on its own thread: the pace holds however slowly a loaded
                    // moto answers (one call after another fell below the pace there, and
                    // then the ends never met the quota).
                    let host = host.clone();
                    std::thread::spawn(move || {
                        if let Ok(mut conn) = std::net::TcpStream::connect(&host) {
                            let body = "{}";
                            let _ = write!(
                                conn,
                                "POST / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
                                 X-Amz-Target: secretsmanager.GetRandomPassword\r\n\
                                 Content-Type: application/x-amz-json-1.1\r\n\
                                 Authorization: AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=0\r\n\
                                 Content-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = conn.read_to_end(&mut Vec::new());
                        }
                    });
                    std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
                }
            })
        };
        Self {
            stop,
            threads: vec![thread],
        }
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs `calls` while a neighbour's burst spends the account's whole budget (50 a second)
/// for its first 3 seconds, then stops: every call under test that reaches Secrets Manager
/// in those seconds is throttled, however slowly a loaded machine sends them (a steady
/// neighbour of 30 or 40 left room enough that the calls of a loaded CI run never met the
/// quota), and the rest of the budget is theirs afterwards, to retry in.
async fn beside_a_neighbours_burst<T>(calls: impl std::future::Future<Output = T>) -> T {
    let neighbour = Neighbour::start(50);
    let stop = async move {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        drop(neighbour);
    };
    let (answers, ()) = tokio::join!(calls, stop);
    answers
}

/// A job with `count` sensitive variables, unique to this test run.
fn job(count: usize, tag: &str) -> Value {
    let sensitive: serde_json::Map<String, Value> = (0..count)
        .map(|i| (format!("v{i}"), json!(format!("s3cret-{tag}-{i}"))))
        .collect();
    json!({"operation": "plan", "files": {"main.tf": ""}, "sensitive_variables": sensitive})
}

async fn submit(api: &Api, env: &str, body: &Value) -> common::Reply {
    let env = format!("acme/{env}");
    api.admin(endpoints::submit_job(&env), Some(&body.to_string()))
        .await
}

#[tokio::test]
async fn a_burst_of_submits_with_five_sensitive_variables_each_all_pass_the_50_per_second_quota() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    // One submit per environment: concurrent submits to one environment race for its lock
    // (a store-level retry the quota has nothing to do with), and a CI burst spans many.
    let envs: Vec<String> = (0..150).map(|i| format!("burst{i}")).collect();
    for chunk in envs.chunks(25) {
        join_all(
            chunk
                .iter()
                .map(|env| api.create_env("acme", env, "development")),
        )
        .await;
    }
    let tag = sortie_testkit::unique("b");
    let body = job(5, &tag);
    let (_, throttled_before) = throttle_counts("CreateSecret");
    let answers =
        beside_a_neighbours_burst(join_all(envs.iter().map(|env| submit(&api, env, &body)))).await;
    let failed: Vec<String> = answers
        .iter()
        .filter(|r| r.status != 201)
        .map(|r| format!("{} {}", r.status, r.body))
        .collect();
    let (_, throttled_after) = throttle_counts("CreateSecret");
    assert!(
        failed.is_empty(),
        "{} of 150 submits failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    assert!(
        throttled_after > throttled_before,
        "the burst met the quota (else this test proves nothing)"
    );
    // Every job's values are kept, in one secret each, and read back whole.
    let ids: Vec<&str> = answers
        .iter()
        .map(|r| r.body["id"].as_str().unwrap())
        .collect();
    for id in ids.iter().take(5) {
        let record = api.store.get_job(&JobId::from(*id)).await.unwrap();
        let arn = record.job.request.sensitive_secret.clone().unwrap();
        let kept: Value = serde_json::from_str(&api.secrets.value(&arn).await.unwrap()).unwrap();
        assert_eq!(kept.as_object().unwrap().len(), 5, "{id}");
        assert_eq!(kept["v4"], format!("s3cret-{tag}-4"));
    }
}

#[tokio::test]
async fn two_hundred_jobs_ending_at_once_leave_no_secret_behind() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    let envs: Vec<String> = (0..20).map(|i| format!("end{i}")).collect();
    for env in &envs {
        api.create_env("acme", env, "development").await;
    }
    let tag = sortie_testkit::unique("e");
    let body = job(1, &tag);
    // 200 jobs, submitted a few at a time (this test is about their end).
    let mut ids = vec![];
    for wave in 0..10 {
        let answers = join_all(envs.iter().map(|env| submit(&api, env, &body))).await;
        for r in answers {
            assert_eq!(r.status, 201, "wave {wave}: {}", r.body);
            ids.push(r.body["id"].as_str().unwrap().to_string());
        }
    }
    let mut arns = vec![];
    for id in &ids {
        let record = api.store.get_job(&JobId::from(id.as_str())).await.unwrap();
        arns.push(record.job.request.sensitive_secret.clone().unwrap());
    }
    // All 200 end at once: a cancel ends a job that has not started, through the one end
    // of a job (its secret's deletion with it).
    // A neighbour spends 45 of the account's 50 calls a second until every cancel has
    // answered, as another deployment's calls would: the ends meet the quota on any
    // machine, however loaded (each cancel writes to DynamoDB before its deletion, so on
    // a loaded moto the deletions arrive slowly and late: with a neighbour of 30 they never
    // met it, and a burst of the neighbour's first 3 seconds was over before they came).
    let (_, throttled_before) = throttle_counts("DeleteSecret");
    let calls: Vec<Call> = ids.iter().map(|id| endpoints::cancel_job(id)).collect();
    let neighbour = Neighbour::start(45);
    let mut cancels = join_all(calls.iter().map(|c| api.admin(c.clone(), None))).await;
    drop(neighbour);
    // A 503 (the store unreachable for a moment: 200 connections at once to a local AWS
    // that other tests load too) is the API's retryable answer, and a client tries it
    // again, as these do (3 times at most).
    for (call, r) in calls.iter().zip(cancels.iter_mut()) {
        for _ in 0..3 {
            if r.status != 503 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            *r = api.admin(call.clone(), None).await;
        }
    }
    for (id, r) in ids.iter().zip(&cancels) {
        if r.status == 409 {
            // A retried cancel whose first try ended the job before its answer failed.
            let record = api.store.get_job(&JobId::from(id.as_str())).await.unwrap();
            assert_eq!(record.job.state.as_str(), "canceled", "{id}: {}", r.body);
            continue;
        }
        assert_eq!(r.status, 200, "{id}: {}", r.body);
        assert_eq!(r.body["state"], "canceled", "{id}: {}", r.body);
    }
    let (_, throttled_after) = throttle_counts("DeleteSecret");
    assert!(
        throttled_after > throttled_before,
        "the ends met the quota (else this test proves nothing)"
    );
    // The end path's retries have a time budget (20 s, proven on its own by
    // `sortie-launch job_secrets::tests::a_throttled_call_is_tried_again_until_it_passes_within_its_bounds`):
    // on a loaded machine some can outrun it, and the sweeper (every
    // minute) takes the rest by their job tag. Nothing holding a value outlives both.
    let by_the_ends = 200 - still_holding(&api, &arns).await.len();
    println!("the ends deleted {by_the_ends} of 200 secrets under the quota; the sweep the rest");
    for _ in 0..10 {
        if still_holding(&api, &arns).await.is_empty() {
            break;
        }
        api.world
            .plane
            .engine
            .sweep(chrono::Utc::now())
            .await
            .unwrap();
    }
    let left = still_holding(&api, &arns).await;
    assert!(
        left.is_empty(),
        "{} of 200 secrets outlived their job and the sweep, holding its value: {:?}",
        left.len(),
        left.first()
    );
}

/// The secrets of `arns` that still hold a value (any other answer than not found fails).
async fn still_holding(api: &Api, arns: &[String]) -> Vec<String> {
    let mut left = vec![];
    for arn in arns {
        match api.secrets.value(arn).await {
            Ok(_) => left.push(arn.clone()),
            Err(e) => assert!(e.contains("ResourceNotFoundException"), "{e}"),
        }
    }
    left
}

#[tokio::test]
async fn the_sweep_deletes_every_ended_job_s_secret_found_by_its_tag_on_moto() {
    let aws = sortie_testkit::require_aws!();
    let api = Api::aws(&aws).await;
    seed_org(&api, "acme").await;
    api.create_env("acme", "swept", "development").await;
    let tag = sortie_testkit::unique("s");
    let r = submit(&api, "swept", &job(1, &tag)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let live = r.body["id"].as_str().unwrap().to_string();
    let r = submit(&api, "swept", &job(1, &tag)).await;
    let ended = r.body["id"].as_str().unwrap().to_string();
    let c = api.admin(endpoints::cancel_job(&ended), None).await;
    assert_eq!(c.status, 200, "{}", c.body);
    // Secrets its end did not delete (a crash between the end and the delete, say): more
    // than one ListSecrets page of them, tagged with the ended job.
    let mut orphans = vec![];
    for i in 0..120 {
        let name = format!("sortie/jobs/{ended}-left-{i:03}");
        let arn = api
            .secrets
            .create(
                &name,
                "{\"v0\":\"x\"}",
                &[(sortie_core::sensitive::JOB_TAG, ended.as_str())],
            )
            .await
            .unwrap();
        orphans.push(arn);
    }
    // A pass deletes at most `SECRET_DELETES` and lists at most `SECRET_PAGES` pages, and
    // other tests' secrets share this moto (and its 50/s quota): the sweeper runs every
    // minute, so what one pass leaves the next one takes. Five passes at most.
    let mut deleted = 0;
    for _ in 0..5 {
        let report = api
            .world
            .plane
            .engine
            .sweep(chrono::Utc::now())
            .await
            .unwrap();
        deleted += report.secrets_deleted;
        let mut left = 0;
        for arn in &orphans {
            if api.secrets.value(arn).await.is_ok() {
                left += 1;
            }
        }
        if left == 0 {
            break;
        }
    }
    assert!(deleted >= 120, "the passes deleted {deleted}");
    for arn in &orphans {
        let e = api.secrets.value(arn).await.unwrap_err();
        assert!(e.contains("ResourceNotFoundException"), "{e}");
    }
    // The live job's secret stays.
    let record = api
        .store
        .get_job(&JobId::from(live.as_str()))
        .await
        .unwrap();
    let arn = record.job.request.sensitive_secret.clone().unwrap();
    assert!(
        api.secrets.value(&arn).await.is_ok(),
        "a live job's secret was deleted"
    );
}
