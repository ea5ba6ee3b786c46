//! The deployed IAM, proven: a job's lifecycle with the credentials of the roles the
//! templates deploy, on a moto server that enforces IAM.
//!
//! `scripts/iam_world.py` turns `infra/template.yaml` into plain CloudFormation with
//! aws-sam-translator, and creates every role of both templates in moto from the
//! templates' own documents (intrinsics resolved to concrete ARNs). This test starts its
//! own moto server (`scripts/moto_iam_server.py`, IAM enforced after the three actions
//! that create an administrator), because `INITIAL_NO_AUTH_ACTION_COUNT` is global to a
//! server and would break every test sharing the one of `scripts/with-moto.sh`.
//! What moto cannot check, and what is asserted from the documents instead, is in
//! docs/TESTING.md ("Deployed IAM, proven").

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use chrono::Utc;
use serde_json::Value;
use sortie_core::CheckStatus;
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink, RunnerSpec,
    TaskRef,
};
use sortie_launch::{
    AwsRunnerChecker, ByRunnerType, EcsLauncher, LaunchSpec, Launcher, RunnerChecker, TaskStatus,
};
use sortie_lifecycle::{
    EcsTaskStateChange, Engine, EventBridgeBus, EventEffect, JobService, MessageDisposition,
    SweepSettings,
};
use sortie_store::{DynamoStore, SqsJobQueue};

fn root() -> PathBuf {
    sortie_testkit::repo_root()
}

/// A moto server of this test's own, with IAM enforced; killed when dropped.
struct MotoIam {
    child: Child,
    endpoint: String,
}

impl MotoIam {
    fn start() -> Self {
        let python = root().join(".tools/venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/tools.sh",
            python.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python)
            .arg(root().join("scripts/moto_iam_server.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_iam_server.py");
        let moto = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_iam_server.py did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }
}

impl Drop for MotoIam {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs scripts/iam_world.py: the roles of both templates, their stand-ins, the ECS world.
fn world(endpoint: &str) -> Value {
    let python = root().join(".tools/sam-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/tools.sh (it installs aws-sam-translator)",
        python.display()
    );
    let out = Command::new(python)
        .arg(root().join("scripts/iam_world.py"))
        .arg(endpoint)
        .output()
        .expect("run scripts/iam_world.py");
    assert!(
        out.status.success(),
        "iam_world.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("iam_world.py prints JSON")
}

async fn config(endpoint: &str, key: &Value) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new(
            key[0].as_str().unwrap(),
            key[1].as_str().unwrap(),
            None,
            None,
            "iam-test",
        ))
        .region(Region::new("us-east-1"))
        .load()
        .await
}

fn s3(config: &SdkConfig) -> aws_sdk_s3::Client {
    sortie_testkit::s3_client(config)
}

/// A job on an ecs-fargate runner of the target stack's outputs, with a secret (so the
/// launcher derives and registers a task definition).
fn job(w: &Value, env: &str, external_id: &str) -> Job {
    let spec = RunnerSpec::parse(&format!(
        "runner_configuration:\n  type: ecs-fargate\n  role_arn: {}\n  external_id: {external_id}\n  region: us-east-1\n  cluster: {}\n  task_definition: {}\n  container_name: runner\n  subnets: [{}]\n  security_groups: [{}]\n  secrets: {{ DB_PASSWORD: \"arn:aws:secretsmanager:us-east-1:123456789012:secret:sortie/db-AbCdEf\" }}\nstate_storage_configuration:\n  type: s3\n  bucket: {}\n  region: us-east-1\n",
        w["roles"]["LauncherRole"]["arn"].as_str().unwrap(),
        w["cluster"].as_str().unwrap(),
        w["family"].as_str().unwrap(),
        w["subnet"].as_str().unwrap(),
        w["security_group"].as_str().unwrap(),
        w["buckets"]["state"].as_str().unwrap(),
    ))
    .unwrap();
    let env = EnvPath::parse(env).unwrap();
    let runner = RunnerId::parse(&format!("{}/fargate", env.org())).unwrap();
    let mut job = Job::new(
        sortie_core::tokens::new_id(),
        env,
        runner,
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".into(),
        Utc::now(),
    );
    job.runner_spec = Some(spec);
    job
}

/// Creates the job's environment, linked to its runner, with `api`'s credentials.
async fn create_environment(api: &Engine, job: &Job) {
    api.jobs
        .store
        .create_environment(&Environment {
            settings: Default::default(),
            path: job.environment.clone(),
            env_type: "development".into(),
            labels: BTreeMap::new(),
            tags: Default::default(),
            runner: RunnerLink {
                runner_id: job.runner_id.clone(),
                rule_id: "default".into(),
                linked_by: "alice".into(),
                linked_at: Utc::now(),
            },
        })
        .await
        .expect("the api role writes environments");
}

/// Receives one jobs-queue message with `sqs` (the dispatch role's), dispatches it with
/// `dispatch` and deletes it.
async fn dispatch_one(dispatch: &Engine, sqs: &aws_sdk_sqs::Client, queue_url: &str) {
    let message = sqs
        .receive_message()
        .queue_url(queue_url)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("the dispatch role receives jobs")
        .messages
        .unwrap_or_default()
        .pop()
        .expect("the api sent the job");
    let outcome = dispatch.dispatch(message.body().unwrap(), 1).await;
    assert!(
        matches!(outcome, MessageDisposition::Done),
        "dispatch: {outcome:?}"
    );
    sqs.delete_message()
        .queue_url(queue_url)
        .receipt_handle(message.receipt_handle().unwrap())
        .send()
        .await
        .expect("the dispatch role deletes handled messages");
}

/// An Engine whose every AWS client has `config`'s credentials (one function's role).
fn engine(config: &SdkConfig, w: &Value) -> Engine {
    let cp = &w["control_plane"];
    let launcher = ByRunnerType {
        ecs: Some(Arc::new(EcsLauncher::new(config.clone()))),
        ..Default::default()
    };
    Engine {
        jobs: JobService {
            store: Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(config),
                cp["table"].as_str().unwrap(),
            )),
            queue: Arc::new(SqsJobQueue::new(
                aws_sdk_sqs::Client::new(config),
                cp["jobs_queue_url"].as_str().unwrap(),
            )),
            bus: Arc::new(EventBridgeBus::new(
                aws_sdk_eventbridge::Client::new(config),
                cp["bus"].as_str().unwrap(),
            )),
            secrets: Arc::new(sortie_launch::AwsJobSecrets::new(config)),
            gate: Default::default(),
        },
        launcher: Arc::new(launcher),
        api_url: "https://api.sortie.example.com".into(),
        settings: SweepSettings::default(),
    }
}

/// The sample STOPPED (exit 0) event of `events/`, for this job's task.
fn stopped_event(job: &Job, task: &TaskRef) -> EcsTaskStateChange {
    let path = root().join("events/ecs-task-stopped-exit0.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["detail"]["startedBy"] = Value::from(format!("sortie/{}", job.id));
    v["detail"]["taskArn"] = Value::from(task.as_str());
    serde_json::from_value(v["detail"].clone()).unwrap()
}

/// Presigns a PUT of `key` with `client`'s credentials, sends `body` to it, returns the answer.
async fn presigned_put(
    client: &aws_sdk_s3::Client,
    endpoint: &str,
    bucket: &str,
    key: &str,
    body: &str,
) -> (u16, Value) {
    let url = client
        .put_object()
        .bucket(bucket)
        .key(key)
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300)).unwrap())
        .await
        .unwrap()
        .uri()
        .to_string();
    let path = url.strip_prefix(endpoint).expect("presigned on moto");
    sortie_testkit::http::call(endpoint, "PUT", path, &[], Some(body))
}

/// The launcher role's trust statement for `action`, from the deployed document.
fn trust<'a>(w: &'a Value, action: &str) -> &'a Value {
    w["roles"]["LauncherRole"]["trust"]["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Action"] == action)
        .unwrap_or_else(|| panic!("the launcher trust allows {action}"))
}

/// The whole lifecycle (submit, dispatch, every end step and the sweep) nests deep futures,
/// and a debug build's frames are several times a release build's: the test runs on
/// threads with 16 MiB stacks instead of libtest's 2 MiB.
#[test]
fn a_job_lifecycle_runs_with_exactly_the_deployed_roles() {
    const STACK: usize = 16 << 20;
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .thread_stack_size(STACK)
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(a_job_lifecycle_with_the_deployed_roles())
        })
        .expect("a test thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}

async fn a_job_lifecycle_with_the_deployed_roles() {
    sortie_testkit::require_aws!();
    let started = Instant::now();
    let moto = MotoIam::start();
    let w = world(&moto.endpoint);
    let endpoint = moto.endpoint.clone();
    let external_id = w["external_id"].as_str().unwrap().to_string();
    let org = w["owner_org"].as_str().unwrap();
    assert_eq!(org, "acme");

    // What moto does not evaluate of the trust policy, asserted from the deployed document.
    let assume = trust(&w, "sts:AssumeRole");
    assert_eq!(
        assume["Condition"]["StringEquals"]["sts:ExternalId"],
        *external_id
    );
    assert_eq!(
        assume["Condition"]["StringEquals"]["aws:RequestTag/sortie:org"],
        *org
    );
    let tag = trust(&w, "sts:TagSession");
    assert_eq!(
        tag["Condition"]["StringEquals"]["aws:RequestTag/sortie:org"],
        *org
    );
    // A session is tagged with what all the jobs it serves share: the org and the runner
    // (and sortie:env = runner-check for a check session). Never the job.
    assert_eq!(
        tag["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"],
        serde_json::json!(["sortie:org", "sortie:runner", "sortie:env"])
    );
    for s in [assume, tag] {
        assert_eq!(
            s["Condition"]["Null"],
            serde_json::json!({"aws:RequestTag/sortie:runner": "false"})
        );
        assert_eq!(s["Principal"]["AWS"], "arn:aws:iam::123456789012:root");
    }
    // Tagging the task at RunTask is ecs:TagResource on the task (ECS, "Grant permission
    // to tag resources on creation"), which moto does not check: granted only as part of
    // RunTask, never on an existing task.
    let tag_on_create = w["roles"]["LauncherRole"]["policies"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p["Statement"].as_array().unwrap())
        .find(|s| s["Action"] == "ecs:TagResource")
        .expect("the launcher may tag the tasks it runs");
    assert_eq!(
        tag_on_create["Condition"]["StringEquals"]["ecs:CreateAction"],
        "RunTask"
    );

    // Dispatch: the dispatch role's credentials assume the launcher role (ExternalId and
    // session tags, through the real EcsLauncher), which describes the runner's task
    // definition, registers the derived one, runs, finds, describes and stops the task.
    let dispatch = config(&endpoint, &w["stand_ins"]["DispatchRole"]).await;
    let admin = config(&endpoint, &w["admin"]).await;
    let cp = &w["control_plane"];
    DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&admin),
        cp["table"].as_str().unwrap(),
    )
    .ensure_table()
    .await
    .unwrap();
    let j = job(&w, "acme/payments/dev", &external_id);

    // The api role: the runner, the environment, and the job submitted (table and queue).
    let api = config(&endpoint, &w["stand_ins"]["ApiRole"]).await;
    let as_api = engine(&api, &w);
    let runner_id = j.runner_id.clone();
    as_api
        .jobs
        .store
        .create_runner(&Runner {
            id: runner_id.clone(),
            spec: j.runner_spec.clone().unwrap(),
        })
        .await
        .expect("the api role writes runners");
    create_environment(&as_api, &j).await;
    let submitted = as_api
        .jobs
        .submit(&j, None)
        .await
        .expect("the api role submits");
    assert!(submitted.took_lock);

    // The dispatch role: receives the message and dispatches it through the Engine, whose
    // EcsLauncher assumes the launcher role (ExternalId, session tags), describes the
    // runner's task definition, registers the derived one and runs the task.
    let sqs = aws_sdk_sqs::Client::new(&dispatch);
    let queue_url = cp["jobs_queue_url"].as_str().unwrap();
    let as_dispatch = engine(&dispatch, &w);
    dispatch_one(&as_dispatch, &sqs, queue_url).await;
    let record = as_dispatch.jobs.store.get_job(&j.id).await.unwrap();
    assert_eq!(record.job.state, JobState::Running, "{:?}", record.job);
    let task = record.task.clone().expect("the job records its task");

    // A job of another environment, through the same cached launcher session (tagged
    // with the org and the runner only): each task carries its own job's tags.
    let admin_ecs = aws_sdk_ecs::Client::new(&admin);
    let j2 = job(&w, "acme/payments/eu", &external_id);
    create_environment(&as_api, &j2).await;
    as_api
        .jobs
        .submit(&j2, None)
        .await
        .expect("the api role submits");
    dispatch_one(&as_dispatch, &sqs, queue_url).await;
    let task2 = as_dispatch.jobs.store.get_job(&j2.id).await.unwrap().task;
    let task2 = task2.expect("the second job records its task");
    for (job, task) in [(&j, &task), (&j2, &task2)] {
        let tags: BTreeMap<String, String> = admin_ecs
            .list_tags_for_resource()
            .resource_arn(task.as_str())
            .send()
            .await
            .unwrap()
            .tags()
            .iter()
            .filter_map(|t| Some((t.key.clone()?, t.value.clone()?)))
            .filter(|(k, _)| k.starts_with("sortie:"))
            .collect();
        assert_eq!(
            tags,
            BTreeMap::from([
                ("sortie:job".to_string(), job.id.to_string()),
                ("sortie:env".to_string(), job.environment.to_string()),
                ("sortie:org".to_string(), "acme".to_string()),
                ("sortie:runner".to_string(), "acme/fargate".to_string()),
            ]),
            "the task of {} is tagged with its own job",
            job.environment
        );
    }

    // The sweeper role, an hour later: the silent running job is looked up in ECS
    // through the launcher role (its own AssumeRole), and found still running.
    let as_sweeper = engine(&config(&endpoint, &w["stand_ins"]["SweeperRole"]).await, &w);
    let report = as_sweeper
        .sweep(Utc::now() + chrono::Duration::hours(1))
        .await
        .expect("the sweeper role reads its work lists");
    assert_eq!(report.errors, 0, "sweep: {report:?}");
    assert_eq!(
        as_sweeper
            .jobs
            .store
            .get_job(&j.id)
            .await
            .unwrap()
            .job
            .state,
        JobState::Running
    );

    // A job whose launch fails for good (a wrong ExternalId) fails in dispatch, which
    // publishes its completion on Sortie's bus with the dispatch role.
    let bad = job(&w, "acme/payments/broken", "sortie-ext-wrong-000000");
    create_environment(&as_api, &bad).await;
    as_api
        .jobs
        .submit(&bad, None)
        .await
        .expect("the api role submits");
    dispatch_one(&as_dispatch, &sqs, queue_url).await;
    let failed = as_dispatch.jobs.store.get_job(&bad.id).await.unwrap();
    assert_eq!(failed.job.state, JobState::Failed);
    // Its end, and the end's old name (an alias for one release), with the same detail.
    let probe_sqs = aws_sdk_sqs::Client::new(&admin);
    let mut ends: Vec<(String, Value)> = Vec::new();
    for _ in 0..5 {
        let got = probe_sqs
            .receive_message()
            .queue_url(cp["completions_probe_url"].as_str().unwrap())
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        for m in got {
            let event: Value = serde_json::from_str(m.body().unwrap_or_default()).unwrap();
            if event["detail"]["job_id"] == bad.id.as_str() {
                ends.push((
                    event["detail-type"].as_str().unwrap().to_string(),
                    event["detail"].clone(),
                ));
            }
        }
        if ends.len() >= 2 {
            break;
        }
    }
    ends.sort_by(|a, b| a.0.cmp(&b.0));
    let types: Vec<&str> = ends.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            sortie_lifecycle::JOB_COMPLETED_ALIAS,
            sortie_lifecycle::JOB_ENDED
        ],
        "dispatch published the failed job's end and its alias: {ends:?}"
    );
    assert_eq!(ends[0].1, ends[1].1, "the alias carries the end's detail");
    assert_eq!(ends[1].1["state"], "failed");

    // The launcher role, through the dispatch role: watch, find and stop the task.
    let launcher = EcsLauncher::new(dispatch.clone());
    let spec = LaunchSpec {
        job: &j,
        token: "job-token",
        api_url: "https://api.sortie.example.com",
        attempt: 1,
    };
    assert!(
        matches!(
            launcher.describe(&j, &task).await.expect("DescribeTasks"),
            TaskStatus::Running
        ),
        "the task runs"
    );
    assert_eq!(
        launcher.find(&j).await.expect("ListTasks").as_ref(),
        Some(&task),
        "the sweeper finds it by startedBy"
    );
    launcher
        .stop(&j, &task, "sortie: canceled by alice")
        .await
        .expect("the launcher role stops the task");
    // The task-events role: the STOPPED event completes the job and releases the lock.
    let as_task_events = engine(
        &config(&endpoint, &w["stand_ins"]["TaskEventsRole"]).await,
        &w,
    );
    let event = stopped_event(&j, &task);
    assert_eq!(
        as_task_events
            .task_event(&event)
            .await
            .expect("task-events"),
        EventEffect::Moved(JobState::Succeeded)
    );

    // The task runs the derived definition: registered by the launcher role, in its family.
    let ecs = aws_sdk_ecs::Client::new(&admin);
    let described = ecs
        .describe_tasks()
        .cluster(w["cluster"].as_str().unwrap())
        .tasks(task.as_str())
        .send()
        .await
        .unwrap();
    let td = described.tasks()[0]
        .task_definition_arn()
        .unwrap()
        .to_string();
    assert!(
        td.contains(":task-definition/sortie-runner-sortie-"),
        "derived task definition: {td}"
    );

    // moto does not check iam:PassRole: the deployed launcher policy must allow passing
    // exactly the roles the task definition it ran names, and only to ECS tasks.
    let tdef = ecs
        .describe_task_definition()
        .task_definition(&td)
        .send()
        .await
        .unwrap()
        .task_definition
        .unwrap();
    let pass = w["roles"]["LauncherRole"]["policies"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p["Statement"].as_array().unwrap())
        .find(|s| s["Action"] == "iam:PassRole")
        .expect("the launcher may pass roles");
    assert_eq!(
        pass["Condition"]["StringEquals"]["iam:PassedToService"],
        "ecs-tasks.amazonaws.com"
    );
    for role in [tdef.execution_role_arn(), tdef.task_role_arn()] {
        let role = Value::from(role.expect("the runner's roles"));
        assert!(
            pass["Resource"].as_array().unwrap().contains(&role),
            "the launcher may pass {role}"
        );
    }

    // The trust policy: another org's job, or a wrong ExternalId, cannot assume the role.
    for (env, ext, what) in [
        ("globex/payments/dev", external_id.as_str(), "another org"),
        (
            "acme/payments/dev",
            "sortie-ext-wrong-000000",
            "a wrong ExternalId",
        ),
    ] {
        let other = job(&w, env, ext);
        let err = EcsLauncher::new(dispatch.clone())
            .launch(&LaunchSpec {
                job: &other,
                token: "t",
                api_url: "https://api.sortie.example.com",
                attempt: 1,
            })
            .await
            .expect_err(what);
        assert!(!err.is_retryable(), "{what}: {err}");
        assert!(err.to_string().contains("AccessDenied"), "{what}: {err}");
    }
    // The api role checks the runner: it assumes the launcher role as a check session,
    // which reads the cluster, task definition, network and role passing, all granted.
    let checker = AwsRunnerChecker::new(api.clone(), false);
    let runner = Runner {
        id: runner_id.clone(),
        spec: j.runner_spec.clone().unwrap(),
    };
    let checks = checker.check(&runner, "acme").await;
    assert_eq!(checks.len(), 6, "{checks:?}");
    for c in &checks {
        assert_eq!(
            c.status,
            CheckStatus::Passed,
            "runner check as the api role: {c:?}"
        );
    }
    // With a wrong ExternalId the trust policy refuses, and the check quotes STS.
    let wrong = Runner {
        id: runner_id.clone(),
        spec: job(&w, "acme/payments/dev", "sortie-ext-wrong-000000")
            .runner_spec
            .unwrap(),
    };
    let checks = checker.check(&wrong, "acme").await;
    assert_eq!(checks[0].status, CheckStatus::Failed, "{:?}", checks[0]);
    assert!(checks[0].detail.contains("AccessDenied"), "{:?}", checks[0]);
    // The api role never opens a launch session (its tags must say runner-check)...
    let err = EcsLauncher::new(api.clone())
        .launch(&spec)
        .await
        .expect_err("the api role cannot launch");
    assert!(err.to_string().contains("AccessDenied"), "{err}");
    // ...and a check session can only read: RunTask and StopTask are denied to it.
    let check_session = aws_config::sts::AssumeRoleProvider::builder(
        w["roles"]["LauncherRole"]["arn"].as_str().unwrap(),
    )
    .external_id(&external_id)
    .session_name("sortie-check-iam-test")
    .tags([
        ("sortie:org", "acme"),
        ("sortie:runner", "acme/fargate"),
        ("sortie:env", sortie_launch::check::CHECK_SESSION_ENV),
    ])
    .configure(&api)
    .build()
    .await;
    let as_check = aws_sdk_ecs::Client::from_conf(
        aws_sdk_ecs::config::Builder::from(&api)
            .credentials_provider(check_session)
            .build(),
    );
    let cluster = w["cluster"].as_str().unwrap();
    as_check
        .describe_clusters()
        .clusters(cluster)
        .send()
        .await
        .expect("a check session reads the cluster");
    let denied = as_check
        .run_task()
        .cluster(cluster)
        .task_definition(w["family"].as_str().unwrap())
        .send()
        .await
        .expect_err("a check session cannot run a task");
    assert!(
        format!("{}", aws_sdk_ecs::error::DisplayErrorContext(&denied)).contains("AccessDenied"),
        "{denied:?}"
    );

    // The runner's task role writes Terraform state in the state bucket, and has no
    // access to the control plane's bucket.
    let runner = s3(&config(&endpoint, &w["stand_ins"]["RunnerTaskRole"]).await);
    let state_bucket = w["buckets"]["state"].as_str().unwrap();
    let cp_bucket = w["buckets"]["control_plane"].as_str().unwrap();
    let key = "acme/payments/dev/terraform.tfstate";
    runner
        .put_object()
        .bucket(state_bucket)
        .key(key)
        .body(ByteStream::from_static(b"{\"version\": 4}"))
        .send()
        .await
        .expect("the task role writes state");
    runner
        .get_object()
        .bucket(state_bucket)
        .key(key)
        .send()
        .await
        .expect("the task role reads state");
    runner
        .delete_object()
        .bucket(state_bucket)
        .key(format!("{key}.tflock"))
        .send()
        .await
        .expect("the task role releases a lock file");
    let log_key = format!("logs/{}/000000000000.log", j.id);
    let denied = runner
        .put_object()
        .bucket(cp_bucket)
        .key(&log_key)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await;
    assert!(
        denied.is_err(),
        "the task role must not write the control plane's bucket"
    );

    // The api role presigns the runner's upload; the presigned PUT works; the api reads it.
    let api_s3 = s3(&api);
    let (status, body) = presigned_put(&api_s3, &endpoint, cp_bucket, &log_key, "hello\n").await;
    assert_eq!(status, 200, "presigned PUT: {body}");
    let got = api_s3
        .get_object()
        .bucket(cp_bucket)
        .key(&log_key)
        .send()
        .await
        .expect("the api reads job logs");
    assert_eq!(
        got.body.collect().await.unwrap().into_bytes().as_ref(),
        b"hello\n"
    );
    // A URL presigned by the runner's own task role for that bucket is refused.
    let (status, _) = presigned_put(&runner, &endpoint, cp_bucket, &log_key, "x").await;
    assert_eq!(
        status, 403,
        "the task role cannot sign uploads to the control plane's bucket"
    );
    // Outside logs/ and artifacts/ the api role may do nothing in its bucket.
    assert!(
        api_s3
            .put_object()
            .bucket(cp_bucket)
            .key("elsewhere/x")
            .body(ByteStream::from_static(b"x"))
            .send()
            .await
            .is_err(),
        "the api role writes only logs/ and artifacts/"
    );
    println!("iam lifecycle: {} ms", started.elapsed().as_millis());
    drop(moto);
}
