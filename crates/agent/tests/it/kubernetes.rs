//! Kubernetes mode against the Kubernetes API double (`sortie_testkit::kube`: TLS from a test
//! CA, every request recorded). The double is not Kubernetes: no controller runs, so the
//! tests set a Job's status and add its pods.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use sortie_agent::executor::{
    Executor, InCluster, KubernetesExecutor, RunExit, Started, NO_KUBERNETES_BLOCK,
};
use sortie_agent::AgentError;
use sortie_testkit::kube::{KubeDouble, TOKEN_PREFIX};
use support::{claim, claim_of, job, API_URL, JOB_TOKEN};

const NAMESPACE: &str = "sortie-jobs";
const KUBERNETES: &str = "  env: { TF_VAR_region: eu-west-1, SHARED: from-runner }\n  kubernetes:\n    namespace: sortie-jobs\n    service_account: terraform\n    image: sortie-runner:test\n    env: { SHARED: from-kubernetes }\n";

struct World {
    double: KubeDouble,
    executor: KubernetesExecutor,
    token_file: PathBuf,
}

fn world(name: &str) -> World {
    let double = KubeDouble::start();
    let dir = std::env::temp_dir().join(format!("sortie-agent-kube-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, double.ca_pem()).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN_PREFIX}c2VydmljZS1hY2NvdW50\n")).unwrap();
    let access = InCluster {
        endpoint: double.url(),
        ca_file,
        token_file: token_file.clone(),
    };
    let executor = KubernetesExecutor::new(&access)
        .unwrap()
        .with_poll_interval(Duration::from_millis(100));
    World {
        double,
        executor,
        token_file,
    }
}

fn env_of(job: &Value) -> Vec<(String, String)> {
    job["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

async fn exit_of(started: Started) -> RunExit {
    tokio::time::timeout(Duration::from_secs(10), started.exited)
        .await
        .expect("the Job's end is seen")
        .expect("and reported")
}

#[tokio::test]
async fn the_agent_creates_the_job_and_a_stop_deletes_it() {
    let w = world("stop");
    let c = claim_of(job("01jobkube00000000000000001", KUBERNETES), 10);
    let started = w.executor.start(&c).await.unwrap();

    let jobs = w.double.jobs(NAMESPACE);
    assert_eq!(jobs.len(), 1);
    let created = &jobs[0];
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("sortie-00000001-"), "{name}");
    assert_eq!(started.handle.task.as_str(), format!("{NAMESPACE}/{name}"));
    assert_eq!(
        created["metadata"]["labels"]["sortie.dev/job-id"],
        "01jobkube00000000000000001"
    );
    assert_eq!(created["metadata"]["labels"]["sortie.dev/attempt"], "1");
    let pod = &created["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "terraform");
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["containers"][0]["image"], "sortie-runner:test");
    let env = env_of(created);
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in {env:?}"))
    };
    assert_eq!(get("SORTIE_JOB_ID"), "01jobkube00000000000000001");
    assert_eq!(get("SORTIE_JOB_TOKEN"), JOB_TOKEN);
    assert_eq!(get("SORTIE_API_URL"), API_URL);
    assert_eq!(get("TF_VAR_region"), "eu-west-1", "the runner's env");
    assert_eq!(
        get("SHARED"),
        "from-kubernetes",
        "the kubernetes block's env wins"
    );
    let post = w
        .double
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(
        post.path,
        format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs")
    );
    let token = std::fs::read_to_string(&w.token_file).unwrap();
    assert_eq!(post.bearer(), Some(token.trim()));

    w.executor
        .stop(&started.handle, "sortie: canceled by alice")
        .await
        .unwrap();
    assert!(w.double.jobs(NAMESPACE).is_empty(), "the Job is deleted");
    let delete = w
        .double
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .unwrap();
    assert_eq!(
        delete.path,
        format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}")
    );
    assert_eq!(delete.propagation_policy(), Some("Background"));
    let exit = exit_of(started).await;
    assert_eq!(exit.exit_code, None);
    assert!(exit.reason.unwrap().contains("was deleted"));
}

#[tokio::test]
async fn the_runner_container_s_exit_is_reported_from_the_job_and_its_pod() {
    let w = world("exit");
    let c = claim_of(job("01jobkube00000000000000002", KUBERNETES), 10);
    let started = w.executor.start(&c).await.unwrap();
    let name = started.handle.task.split_once('/').unwrap().1.to_string();
    // A pod of another Job (another attempt) is not this Job's.
    w.double.add_pod(
        NAMESPACE,
        json!({
            "metadata": {"name": "other", "labels": {"job-name": "sortie-other", "sortie.dev/job-id": "01jobkube00000000000000002"}},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "sortie-runner", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 9, "reason": "Error"}}}]},
        }),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.double.add_pod(
        NAMESPACE,
        json!({
            "metadata": {"name": format!("{name}-abcde"), "labels": {"job-name": name}},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "sortie-runner", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "terraform apply failed"}}}]},
        }),
    );
    w.double.set_job_status(
        NAMESPACE,
        &name,
        json!({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    );
    let exit = exit_of(started).await;
    assert_eq!(
        exit,
        RunExit {
            exit_code: Some(1),
            reason: Some("Error: terraform apply failed".into())
        }
    );
    let pods = w
        .double
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/pods"))
        .unwrap();
    assert_eq!(
        pods.query.get("labelSelector").map(String::as_str),
        Some(format!("job-name={name}").as_str())
    );
}

#[tokio::test]
async fn a_runner_without_a_kubernetes_block_is_refused() {
    let w = world("refused");
    let e = w
        .executor
        .start(&claim("01jobkube00000000000000003", 10))
        .await
        .unwrap_err();
    assert_eq!(e, AgentError::Launch(NO_KUBERNETES_BLOCK.into()));
    assert!(w.double.requests().is_empty(), "nothing was created");
}
