//! The `eks` launcher against moto (STS and EKS, through the real SDK and a recording
//! proxy) and the Kubernetes API double (`sortie_testkit::kube`: TLS from a test CA, every
//! request recorded). The double is not Kubernetes: it implements exactly the endpoints
//! Sortie calls.

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::check::*;
use sortie_core::{
    CheckStatus, EnvPath, Job, JobId, JobRequest, Runner, RunnerCheck, RunnerId, RunnerSpec,
    TaskRef,
};
use sortie_launch::{
    AwsRunnerChecker, EksLauncher, LaunchError, LaunchSpec, Launcher, RunnerChecker, TaskStatus,
};
use sortie_testkit::kube::KubeDouble;
use sortie_testkit::proxy::FaultProxy;

const ROLE: &str = "arn:aws:iam::123456789012:role/sortie-launcher-eks";
const EXTERNAL_ID: &str = "sortie-ext-eks";
const NAMESPACE: &str = "sortie-jobs";

struct World {
    proxy: FaultProxy,
    double: KubeDouble,
    cluster: String,
    launcher: EksLauncher,
    base: aws_config::SdkConfig,
}

/// A moto EKS cluster whose endpoint is the double and whose CA is `ca_data` (the
/// double's own when `None`), and a launcher whose AWS calls go through the proxy.
async fn world(ca_data: Option<String>) -> World {
    let endpoint = sortie_testkit::endpoint();
    let direct = sortie_testkit::sdk_config_at(&endpoint).await;
    let double = KubeDouble::start();
    let cluster = sortie_testkit::unique("eks");
    let ca = ca_data.unwrap_or_else(|| double.ca_data());
    sortie_testkit::kube::create_eks_cluster(&direct, &cluster, &double.url(), &ca).await;
    let proxy = FaultProxy::start(&endpoint);
    let base = sortie_testkit::sdk_config_at(&proxy.url()).await;
    World {
        launcher: EksLauncher::new(base.clone()),
        proxy,
        double,
        cluster,
        base,
    }
}

fn runner_yaml(cluster: &str, extra: &str) -> String {
    format!(
        "runner_configuration:\n  type: eks\n  role_arn: {ROLE}\n  external_id: {EXTERNAL_ID}\n  region: us-east-1\n  cluster: {cluster}\n  job:\n    namespace: {NAMESPACE}\n    service_account: terraform\n    image: sortie-runner:test\n{extra}state_storage_configuration: {{ type: s3, bucket: state, region: us-east-1 }}\n"
    )
}

fn job_on(cluster: &str, extra: &str) -> Job {
    let id = sortie_testkit::unique("j").replace(['_', '.'], "-");
    let mut job = Job::new(
        JobId::new(id),
        EnvPath::parse("acme/payments/prod").unwrap(),
        RunnerId::parse("acme/eks").unwrap(),
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".to_string(),
        Utc::now(),
    );
    job.runner_spec = Some(RunnerSpec::parse(&runner_yaml(cluster, extra)).unwrap());
    job
}

fn spec(job: &Job, attempt: u32) -> LaunchSpec<'_> {
    LaunchSpec {
        job,
        token: "job-token",
        api_url: "https://api.sortie.example",
        attempt,
    }
}

/// EKS DescribeCluster calls (a REST operation: `GET /clusters/<name>`).
fn describe_calls(proxy: &FaultProxy) -> Vec<sortie_testkit::proxy::Recorded> {
    proxy
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/clusters/"))
        .collect()
}

fn query(url: &str) -> BTreeMap<String, String> {
    let (_, q) = url.split_once('?').unwrap();
    q.split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.replace("%3B", ";").replace("%2F", "/"))
        })
        .collect()
}

#[tokio::test]
async fn a_job_launches_as_one_kubernetes_job_through_the_assumed_role_with_a_verified_token() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let job = job_on(&w.cluster, "");
    let task = w.launcher.launch(&spec(&job, 1)).await.expect("launched");
    let jobs = w.double.jobs(NAMESPACE);
    assert_eq!(jobs.len(), 1);
    let name = jobs[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(task, TaskRef::new(format!("{NAMESPACE}/{name}")));
    assert!(
        name.starts_with(&format!("sortie-{}-", job.id.short())),
        "{name}"
    );
    assert_eq!(
        jobs[0]["metadata"]["labels"]["sortie.dev/job-id"],
        job.id.as_str()
    );
    assert_eq!(jobs[0]["metadata"]["labels"]["sortie.dev/attempt"], "1");
    // The Job, as the Kubernetes double accepted it (it refuses labels Kubernetes
    // refuses), names its own environment, organisation and runner: the launcher-role
    // session it was created with is shared by many jobs and names none.
    let labels = &jobs[0]["metadata"]["labels"];
    assert_eq!(
        labels["sortie.dev/env"],
        job.environment.to_string().replace('/', ".")
    );
    assert_eq!(labels["sortie.dev/org"], job.environment.org());
    assert_eq!(
        labels["sortie.dev/runner"],
        job.runner_id.to_string().replace('/', ".")
    );
    let annotations = &jobs[0]["metadata"]["annotations"];
    assert_eq!(annotations["sortie.dev/env"], job.environment.to_string());
    assert_eq!(annotations["sortie.dev/runner"], job.runner_id.to_string());

    // The lookup by label came first, then the create.
    let calls: Vec<(String, String)> = w
        .double
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    let jobs_path = format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs");
    assert_eq!(
        calls,
        vec![
            ("GET".to_string(), jobs_path.clone()),
            ("POST".to_string(), jobs_path)
        ]
    );
    let list = &w.double.requests()[0];
    assert_eq!(
        list.query["labelSelector"],
        format!("sortie.dev/job-id={},sortie.dev/attempt=1", job.id)
    );

    // Every call carries an EKS token: a presigned GetCallerIdentity bound to the cluster.
    for r in w.double.requests() {
        let token = r.bearer().expect("a bearer token");
        let url = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token.strip_prefix("k8s-aws-v1.").expect("the EKS prefix"))
                .unwrap(),
        )
        .unwrap();
        assert!(
            url.starts_with("https://sts.us-east-1.amazonaws.com/?"),
            "{url}"
        );
        let q = query(&url);
        assert_eq!(q["Action"], "GetCallerIdentity");
        assert_eq!(q["X-Amz-Expires"], "60");
        let signed: Vec<&str> = q["X-Amz-SignedHeaders"].split(';').collect();
        assert!(signed.contains(&"x-k8s-aws-id"), "{signed:?}");
        let date = chrono::NaiveDateTime::parse_from_str(&q["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
            .unwrap()
            .and_utc();
        assert!(
            (Utc::now() - date).num_seconds().abs() < 120,
            "signed now: {date}"
        );
        // Signed with the assumed session, not the base credentials.
        assert!(
            !q["X-Amz-Credential"].starts_with("testing/"),
            "{}",
            q["X-Amz-Credential"]
        );
        assert!(q.contains_key("X-Amz-Security-Token"));
    }

    // AssumeRole carried the ExternalId and the session tags of the cached session: the
    // org and the runner, never the job (its Job's labels name it); DescribeCluster went
    // to moto with the assumed credentials.
    let assumed = w.proxy.requests_for("AssumeRole");
    assert_eq!(assumed.len(), 1);
    let form = assumed[0].form();
    assert_eq!(form["RoleArn"], ROLE);
    assert_eq!(form["ExternalId"], EXTERNAL_ID);
    let tags: BTreeMap<&str, &str> = (1..)
        .map_while(|i| {
            Some((
                form.get(&format!("Tags.member.{i}.Key"))?.as_str(),
                form.get(&format!("Tags.member.{i}.Value"))?.as_str(),
            ))
        })
        .collect();
    let runner = job.runner_id.to_string();
    assert_eq!(
        tags,
        BTreeMap::from([("sortie:org", "acme"), ("sortie:runner", runner.as_str())])
    );
    assert!(!form["RoleSessionName"].contains(job.id.as_str()));
    let described = describe_calls(&w.proxy);
    assert_eq!(described.len(), 1);
    let auth = described[0].header("authorization").unwrap();
    assert!(!auth.contains("Credential=testing/"), "{auth}");
}

#[tokio::test]
async fn a_retried_dispatch_adopts_its_job_and_creates_no_second() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let job = job_on(&w.cluster, "");
    let first = w.launcher.launch(&spec(&job, 1)).await.unwrap();
    let again = w.launcher.launch(&spec(&job, 1)).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(w.double.jobs(NAMESPACE).len(), 1);
    let creates = w
        .double
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(creates, 1);
    assert_eq!(w.launcher.find(&job).await.unwrap(), Some(first));
    // DescribeCluster once for the cluster, for the container's life.
    assert_eq!(describe_calls(&w.proxy).len(), 1);
    assert_eq!(w.proxy.count("AssumeRole"), 1);
    // Another job's lookup finds nothing.
    let other = job_on(&w.cluster, "");
    assert_eq!(w.launcher.find(&other).await.unwrap(), None);
}

fn pod_for(job: &Job, name: &str, phase: &str, state: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"sortie.dev/job-id": job.id.as_str(), "job-name": name}},
        "status": {"phase": phase, "containerStatuses": [{
            "name": "sortie-runner", "image": "sortie-runner:test", "imageID": "",
            "ready": false, "restartCount": 0, "state": state,
        }]},
    })
}

#[tokio::test]
async fn describe_reads_the_job_and_its_pods_and_a_pod_that_cannot_start_is_deleted() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let job = job_on(&w.cluster, "");
    let task = w.launcher.launch(&spec(&job, 1)).await.unwrap();
    let name = task.split_once('/').unwrap().1.to_string();
    assert_eq!(
        w.launcher.describe(&job, &task).await.unwrap(),
        TaskStatus::Running
    );
    w.double.add_pod(
        NAMESPACE,
        pod_for(
            &job,
            &name,
            "Pending",
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"sortie-runner:test\""}}),
        ),
    );
    match w.launcher.describe(&job, &task).await.unwrap() {
        TaskStatus::Stopped(stop) => {
            assert_eq!(stop.stop_code.as_deref(), Some("TaskFailedToStart"));
            assert!(
                stop.stopped_reason
                    .as_deref()
                    .unwrap()
                    .contains("ImagePullBackOff"),
                "{stop:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        w.double.jobs(NAMESPACE).is_empty(),
        "the stuck Job was deleted"
    );
    assert_eq!(
        w.launcher.describe(&job, &task).await.unwrap(),
        TaskStatus::Missing
    );

    // An OOM kill, read from the pod of a failed Job.
    let oom = job_on(&w.cluster, "");
    let task = w.launcher.launch(&spec(&oom, 1)).await.unwrap();
    let name = task.split_once('/').unwrap().1.to_string();
    w.double.add_pod(
        NAMESPACE,
        pod_for(
            &oom,
            &format!("{name}-p"),
            "Failed",
            json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}),
        ),
    );
    w.double.set_job_status(
        NAMESPACE,
        &name,
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    );
    match w.launcher.describe(&oom, &task).await.unwrap() {
        TaskStatus::Stopped(stop) => {
            assert_eq!(stop.exit_code, Some(137));
            assert_eq!(stop.container_reason.as_deref(), Some("OOMKilled"));
        }
        other => panic!("{other:?}"),
    }
    let pods = w
        .double
        .requests()
        .into_iter()
        .rfind(|r| r.path == format!("/api/v1/namespaces/{NAMESPACE}/pods"))
        .unwrap();
    assert_eq!(
        pods.query["labelSelector"],
        format!("sortie.dev/job-id={}", oom.id)
    );
}

#[tokio::test]
async fn cancel_deletes_the_job_in_the_background_and_a_job_already_gone_is_a_stop_done() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let job = job_on(&w.cluster, "");
    let task = w.launcher.launch(&spec(&job, 1)).await.unwrap();
    let name = task.split_once('/').unwrap().1.to_string();
    w.double.add_pod(
        NAMESPACE,
        pod_for(&job, &name, "Running", json!({"running": {}})),
    );
    w.launcher
        .stop(&job, &task, "sortie: canceled by alice")
        .await
        .expect("deleted");
    let deletes: Vec<_> = w
        .double
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(
        deletes[0].path,
        format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}")
    );
    assert_eq!(deletes[0].propagation_policy(), Some("Background"));
    assert!(w.double.jobs(NAMESPACE).is_empty());
    assert!(w.double.pods(NAMESPACE).is_empty(), "its pod went with it");
    // Retried by the sweeper until gone: a second delete of a gone Job is a stop done.
    w.launcher
        .stop(&job, &task, "sortie: canceled by alice")
        .await
        .expect("a Job already gone is stopped");
    assert_eq!(
        w.launcher.describe(&job, &task).await.unwrap(),
        TaskStatus::Missing
    );
}

#[tokio::test]
async fn refusals_quote_kubernetes_and_a_lost_create_is_uncertain() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let job = job_on(&w.cluster, "");
    let jobs_path = format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs");
    w.double.fail_next(
        "POST",
        &jobs_path,
        403,
        "jobs.batch is forbidden: User \"sortie\" cannot create resource \"jobs\"",
    );
    match w.launcher.launch(&spec(&job, 1)).await {
        Err(LaunchError::Fatal(words)) => assert!(
            words.contains("403") && words.contains("cannot create resource"),
            "{words}"
        ),
        other => panic!("{other:?}"),
    }
    w.double
        .fail_next("POST", &jobs_path, 500, "etcdserver: request timed out");
    match w.launcher.launch(&spec(&job, 2)).await {
        Err(LaunchError::Uncertain(words)) => {
            assert!(words.contains("etcdserver"), "{words}")
        }
        other => panic!("{other:?}"),
    }
    w.double
        .fail_next("GET", &jobs_path, 503, "the server is shutting down");
    match w.launcher.launch(&spec(&job, 3)).await {
        Err(LaunchError::Retryable(words)) => assert!(words.contains("503"), "{words}"),
        other => panic!("{other:?}"),
    }
    assert!(w.double.jobs(NAMESPACE).is_empty());
}

#[tokio::test]
async fn an_api_whose_certificate_the_cluster_ca_did_not_sign_fails_the_launch_in_words() {
    sortie_testkit::require_aws!();
    let w = world(Some(KubeDouble::other_ca_data())).await;
    let job = job_on(&w.cluster, "");
    match w.launcher.launch(&spec(&job, 1)).await {
        Err(LaunchError::Fatal(words)) => {
            assert!(
                words.contains(&w.double.url()) && words.to_lowercase().contains("certificate"),
                "{words}"
            )
        }
        other => panic!("a wrong CA must fail the job, not retry or hang: {other:?}"),
    }
    assert!(w.double.requests().is_empty(), "no request got past TLS");
}

fn checks(list: Vec<RunnerCheck>) -> BTreeMap<String, RunnerCheck> {
    list.into_iter().map(|c| (c.name.clone(), c)).collect()
}

#[tokio::test]
async fn an_eks_check_describes_the_cluster_and_asks_the_api_what_the_role_may_do() {
    sortie_testkit::require_aws!();
    let w = world(None).await;
    let checker = AwsRunnerChecker::new(w.base.clone(), false);
    let runner = Runner {
        id: RunnerId::parse("acme/eks").unwrap(),
        spec: RunnerSpec::parse(&runner_yaml(&w.cluster, "")).unwrap(),
    };
    let by = checks(checker.check(&runner, "acme").await);
    for name in [
        CHECK_ASSUME_ROLE,
        CHECK_JOB_TEMPLATE,
        CHECK_CLUSTER,
        CHECK_KUBERNETES_ACCESS,
    ] {
        assert_eq!(
            by[name].status,
            CheckStatus::Passed,
            "{name}: {:?}",
            by[name]
        );
    }
    assert!(by[CHECK_CLUSTER].detail.contains(&w.double.url()));
    let reviews: Vec<Value> = w
        .double
        .requests()
        .into_iter()
        .filter(|r| r.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .map(|r| r.body.unwrap()["spec"]["resourceAttributes"].clone())
        .collect();
    assert_eq!(reviews.len(), 5);
    assert!(reviews.iter().all(|r| r["namespace"] == NAMESPACE));
    assert!(reviews
        .iter()
        .any(|r| r["verb"] == "create" && r["resource"] == "jobs" && r["group"] == "batch"));
    assert_eq!(describe_calls(&w.proxy).len(), 1);
    assert!(
        w.double.jobs(NAMESPACE).is_empty(),
        "a check creates nothing"
    );

    w.double.deny("delete", "jobs");
    let by = checks(checker.check(&runner, "acme").await);
    assert_eq!(by[CHECK_KUBERNETES_ACCESS].status, CheckStatus::Failed);
    assert!(
        by[CHECK_KUBERNETES_ACCESS]
            .detail
            .contains("delete jobs.batch"),
        "{:?}",
        by[CHECK_KUBERNETES_ACCESS]
    );

    let bad = Runner {
        id: RunnerId::parse("acme/eks").unwrap(),
        spec: RunnerSpec::parse(&runner_yaml(
            &w.cluster,
            "    pod_template: { spec: { containers: 7 } }\n",
        ))
        .unwrap(),
    };
    let by = checks(checker.check(&bad, "acme").await);
    assert_eq!(by[CHECK_JOB_TEMPLATE].status, CheckStatus::Failed);
    assert!(by[CHECK_JOB_TEMPLATE].detail.contains("pod_template"));

    let missing = Runner {
        id: RunnerId::parse("acme/eks").unwrap(),
        spec: RunnerSpec::parse(&runner_yaml("no-such-cluster", "")).unwrap(),
    };
    let by = checks(checker.check(&missing, "acme").await);
    assert_eq!(by[CHECK_CLUSTER].status, CheckStatus::Failed);
    assert!(
        by[CHECK_CLUSTER]
            .detail
            .contains("DescribeCluster failed: ResourceNotFoundException"),
        "{:?}",
        by[CHECK_CLUSTER]
    );
    assert_eq!(by[CHECK_KUBERNETES_ACCESS].status, CheckStatus::Skipped);
}
