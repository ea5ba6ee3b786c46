//! The job lifecycle on an `eks` runner, against moto (DynamoDB, SQS, EventBridge, STS,
//! EKS) and the Kubernetes API double (`sortie_testkit::kube`, not Kubernetes: exactly the
//! endpoints Sortie calls). Kubernetes sends no task event: the sweeper polls every running
//! `eks` job, and the pilot's own final callback ends it at once; whichever comes first
//! wins, and the second changes nothing.

use crate::common;

use chrono::{Duration, Utc};
use common::{World, EXTERNAL_ID, ROLE};
use serde_json::json;
use sortie_core::protocol::pilot::PilotExit;
use sortie_core::{JobId, JobState, RunnerSpec};
use sortie_lifecycle::{EndReport, MessageDisposition};
use sortie_store::{EnvironmentStore, JobStore};
use sortie_testkit::kube::KubeDouble;

const NAMESPACE: &str = "sortie-jobs";

struct Eks {
    w: World,
    double: KubeDouble,
    spec: RunnerSpec,
}

async fn eks_world() -> Eks {
    let w = World::new().await;
    let double = KubeDouble::start();
    let cluster = sortie_testkit::unique("eks");
    sortie_testkit::kube::create_eks_cluster(&w.direct, &cluster, &double.url(), &double.ca_data())
        .await;
    let spec = RunnerSpec::parse(&format!(
        "runner_configuration:\n  type: eks\n  role_arn: {ROLE}\n  external_id: {EXTERNAL_ID}\n  region: us-east-1\n  cluster: {cluster}\n  timeout_seconds: 600\n  job:\n    namespace: {NAMESPACE}\n    service_account: terraform\n    image: sortie-runner:test\nstate_storage_configuration: {{ type: kubernetes }}\n"
    ))
    .unwrap();
    Eks { w, double, spec }
}

impl Eks {
    /// A running job on a fresh environment: submitted, dispatched, its Kubernetes Job made.
    async fn running(&self, operation: &str) -> (JobId, String) {
        let path = format!("acme/{}/prod", sortie_testkit::unique("team"));
        let env = self
            .w
            .environment_on(&path, "acme/eks", self.spec.clone())
            .await;
        let (job, took) = self
            .w
            .submit_on(&env, "acme/eks", self.spec.clone(), operation)
            .await;
        assert!(took);
        assert_eq!(
            self.w.engine.dispatch(&World::body(&job.id), 1).await,
            MessageDisposition::Done
        );
        let record = self.w.store.get_job(&job.id).await.unwrap();
        assert_eq!(
            record.job.state,
            JobState::Running,
            "{}",
            record.job.reason()
        );
        let task = record.task.unwrap().to_string();
        let name = task.split_once('/').unwrap().1.to_string();
        (job.id, name)
    }

    async fn lock_of(&self, id: &JobId) -> Option<String> {
        let record = self.w.store.get_job(id).await.unwrap();
        self.w
            .store
            .get_environment(&record.job.environment)
            .await
            .unwrap()
            .item
            .active_job
            .map(|j| j.to_string())
    }
}

#[tokio::test]
async fn the_sweeper_polls_a_running_eks_job_and_ends_it_from_the_jobs_status() {
    sortie_testkit::require_aws!();
    let e = eks_world().await;
    let (id, name) = e.running("apply").await;
    assert_eq!(e.double.jobs(NAMESPACE).len(), 1);
    let before = e.w.store.get_job(&id).await.unwrap().updated_at;

    // Within the silence period an ECS job is left alone; an eks job is described, and
    // seeing it run writes nothing.
    e.double.clear();
    let report = e.w.engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(report.errors, 0, "{report:?}");
    let gets = e
        .double
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&format!("/jobs/{name}")))
        .count();
    assert_eq!(gets, 1, "described on this pass");
    let after = e.w.store.get_job(&id).await.unwrap();
    assert_eq!(after.job.state, JobState::Running);
    assert_eq!(after.updated_at, before, "a running Job costs no write");

    e.double.add_pod(
        NAMESPACE,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-x"), "labels": {"sortie.dev/job-id": id.as_str(), "job-name": name}},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "sortie-runner", "image": "i", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}),
    );
    e.double.set_job_status(
        NAMESPACE,
        &name,
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    );
    let report = e.w.engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(report.resolved, 1, "{report:?}");
    let ended = e.w.store.get_job(&id).await.unwrap();
    assert_eq!(ended.job.state, JobState::Failed);
    assert!(
        ended.job.reason().contains("out of memory") && ended.job.reason().contains("OOMKilled"),
        "{}",
        ended.job.reason()
    );
    assert_eq!(e.lock_of(&id).await, None, "the environment is released");
}

#[tokio::test]
async fn the_runners_callback_ends_the_job_at_once_and_the_later_poll_changes_nothing() {
    sortie_testkit::require_aws!();
    let e = eks_world().await;
    let (id, name) = e.running("apply").await;
    let record = e.w.store.get_job(&id).await.unwrap();
    let reported =
        e.w.engine
            .jobs
            .pilot_exited(
                &record,
                &PilotExit {
                    exit_code: 0,
                    reason: None,
                },
            )
            .await
            .unwrap();
    let EndReport::Ended(ended) = reported else {
        panic!("{reported:?}")
    };
    assert_eq!(ended.job.state, JobState::Succeeded);
    assert_eq!(e.lock_of(&id).await, None);
    let transitions = ended.job.transitions.len();

    // The Job completes; the sweeper no longer looks at an ended job.
    e.double.set_job_status(
        NAMESPACE,
        &name,
        json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    e.w.engine.sweep(Utc::now()).await.unwrap();
    // A duplicate callback is a no-op.
    let again =
        e.w.engine
            .jobs
            .pilot_exited(
                &ended,
                &PilotExit {
                    exit_code: 1,
                    reason: Some("late".into()),
                },
            )
            .await
            .unwrap();
    assert!(matches!(again, EndReport::AlreadyEnded(_)), "{again:?}");
    let last = e.w.store.get_job(&id).await.unwrap();
    assert_eq!(last.job.state, JobState::Succeeded);
    assert_eq!(last.job.transitions.len(), transitions);

    // The other order: the poll first, then the callback, which changes nothing.
    let (id2, name2) = e.running("plan").await;
    e.double.set_job_status(
        NAMESPACE,
        &name2,
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]}),
    );
    e.w.engine.sweep(Utc::now()).await.unwrap();
    let polled = e.w.store.get_job(&id2).await.unwrap();
    assert_eq!(polled.job.state, JobState::Failed);
    assert!(
        polled.job.reason().contains("DeadlineExceeded"),
        "{}",
        polled.job.reason()
    );
    let late =
        e.w.engine
            .jobs
            .pilot_exited(
                &e.w.store.get_job(&id2).await.unwrap(),
                &PilotExit {
                    exit_code: 0,
                    reason: None,
                },
            )
            .await
            .unwrap();
    assert!(matches!(late, EndReport::AlreadyEnded(_)), "{late:?}");
    assert_eq!(
        e.w.store.get_job(&id2).await.unwrap().job.state,
        JobState::Failed
    );
}

#[tokio::test]
async fn cancel_and_timeout_delete_the_job_and_end_it_once_it_is_gone() {
    sortie_testkit::require_aws!();
    let e = eks_world().await;
    let (id, name) = e.running("apply").await;
    let record = e.w.store.get_job(&id).await.unwrap();
    e.w.engine.jobs.cancel(&record, "bob").await.unwrap();
    let msg = serde_json::json!({"job_id": id.as_str(), "cancel_by": "bob"}).to_string();
    assert_eq!(e.w.engine.dispatch(&msg, 1).await, MessageDisposition::Done);
    let deletes: Vec<_> = e
        .double
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert!(deletes[0].path.ends_with(&format!("/jobs/{name}")));
    assert_eq!(deletes[0].propagation_policy(), Some("Background"));
    // The Job is gone: the next pass ends the job as the cancel says.
    e.w.engine.sweep(Utc::now()).await.unwrap();
    let canceled = e.w.store.get_job(&id).await.unwrap();
    assert_eq!(canceled.job.state, JobState::Canceled);
    assert_eq!(canceled.job.reason(), "canceled by bob");

    // A timeout, enforced from outside: past 600 s the Job is deleted, then the job ends.
    let (id, name) = e.running("plan").await;
    let later = Utc::now() + Duration::seconds(700);
    let report = e.w.engine.sweep(later).await.unwrap();
    assert_eq!(report.timed_out, 1, "{report:?}");
    assert!(e
        .double
        .jobs(NAMESPACE)
        .iter()
        .all(|j| j["metadata"]["name"] != name.as_str()));
    e.w.engine.sweep(later).await.unwrap();
    let timed_out = e.w.store.get_job(&id).await.unwrap();
    assert_eq!(timed_out.job.state, JobState::TimedOut);
    assert_eq!(timed_out.job.reason(), "timed out after 600s");
}
