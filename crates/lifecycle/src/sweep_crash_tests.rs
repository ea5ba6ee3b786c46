//! Issue 41 item 5: a job whose end kills the sweep pass (out of memory, out of time) is
//! quarantined after [`MAX_END_TRIES`] passes and ended with its reason, and never blocks
//! the others; a pass that dies is resumed where it was, from the cursor kept in the table.
//!
//! A pass "dies" here as a function does when Lambda kills it: its future is dropped
//! mid-way (the gate's read of the plan never answers, and the pass is cut by a timeout).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::json;
use sortie_core::end_retry::{INTERRUPTED, MAX_END_TRIES};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{GroupPath, Job, JobId, JobRequest, JobState, TaskRef, TaskStop};
use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
use sortie_store::{
    Artifacts, EnvironmentStore, JobStore, JobUpdate, ObjectInfo, PresignedPut, StoreError,
};

use crate::testing::World;
use crate::{Engine, JobOrder, PolicySets, SweepResume, SweepSettings};

/// A bucket whose reads never answer: the gate's read is where the pass dies.
struct Hanging;

#[async_trait]
impl Artifacts for Hanging {
    async fn presign_put(&self, _: &str, _: &str, _: Duration) -> Result<PresignedPut, StoreError> {
        std::future::pending().await
    }
    async fn list(&self, _: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        std::future::pending().await
    }
    async fn get(&self, _: &str) -> Result<Vec<u8>, StoreError> {
        std::future::pending().await
    }
    async fn head(&self, _: &str) -> Result<ObjectInfo, StoreError> {
        std::future::pending().await
    }
}

/// Every task runs, but `stopped`'s exited 0; the jobs described are recorded in order.
struct Platform {
    stopped: JobId,
    described: Mutex<Vec<JobId>>,
}

#[async_trait]
impl Launcher for Platform {
    async fn launch(&self, _: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        Err(LaunchError::Fatal("not in this test".into()))
    }
    async fn stop(&self, _: &Job, _: &TaskRef, _: &str) -> Result<(), LaunchError> {
        Ok(())
    }
    async fn describe(&self, job: &Job, _: &TaskRef) -> Result<TaskStatus, LaunchError> {
        self.described.lock().unwrap().push(job.id.clone());
        if job.id == self.stopped {
            return Ok(TaskStatus::Stopped(TaskStop {
                stop_code: Some("EssentialContainerExited".into()),
                exit_code: Some(0),
                ..Default::default()
            }));
        }
        Ok(TaskStatus::Running)
    }
    async fn find(&self, _: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(None)
    }
}

/// Submits an apply to `path` and runs it, its task launched at `at`.
async fn running(w: &World, path: &str, at: chrono::DateTime<Utc>) -> JobId {
    let env = w.environment(path).await;
    let request: JobRequest = serde_json::from_value(json!({
        "operation": "apply",
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap();
    let order = JobOrder::submit(request, SensitiveValues::default(), "alice", None);
    let id = w.jobs.submit_for(&env, order).await.unwrap().job.id;
    let task = TaskRef::new(format!(
        "arn:aws:ecs:us-east-1:123456789012:task/runners/{id}"
    ));
    w.store
        .transition_job(
            &id,
            JobState::Queued,
            JobState::Dispatching,
            at,
            "t",
            JobUpdate::default(),
        )
        .await
        .unwrap();
    let update = JobUpdate {
        task: Some(task),
        ..Default::default()
    };
    w.store
        .transition_job(
            &id,
            JobState::Dispatching,
            JobState::Running,
            at,
            "t",
            update,
        )
        .await
        .unwrap();
    id
}

/// One pass in a fresh process (no resume point of its own), cut after half a second: `true` when
/// it finished.
async fn pass(engine: &Engine) -> bool {
    let resume = SweepResume::default();
    tokio::time::timeout(
        Duration::from_millis(500),
        engine.sweep_resuming(Utc::now(), &resume),
    )
    .await
    .is_ok()
}

#[tokio::test]
async fn a_job_that_kills_every_pass_is_quarantined_and_a_dead_pass_resumes_where_it_was() {
    let mut w = World::new().await;
    w.jobs.gate.artifacts = Some(Arc::new(Hanging) as Arc<dyn Artifacts>);
    let rego = "package tf\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  msg := rc.address\n}\n";
    PolicySets::new(w.store.clone())
        .create(
            &GroupPath::parse("acme/gated").unwrap(),
            Some("strict"),
            json!({"enforcement": "mandatory", "on_unavailable": "fail",
                   "modules": [{"name": "tf", "rego": rego}]}),
        )
        .await
        .unwrap();
    // Six running jobs, oldest first; the fifth (on the third page of two) is gated, and its
    // task stopped: its end reads the plan, and that read kills the pass.
    let start = Utc::now() - chrono::Duration::minutes(30);
    let mut ids = vec![];
    for i in 0..6 {
        let path = if i == 4 {
            format!("acme/gated/e{i}")
        } else {
            format!("acme/free/e{i}")
        };
        ids.push(running(&w, &path, start + chrono::Duration::seconds(i)).await);
    }
    let killer = ids[4].clone();
    let platform = Arc::new(Platform {
        stopped: killer.clone(),
        described: Mutex::new(vec![]),
    });
    let engine = Engine {
        jobs: w.jobs.clone(),
        launcher: platform.clone(),
        api_url: "https://api.sortie.example.com".into(),
        settings: SweepSettings {
            batch: 2,
            silence: chrono::Duration::zero(),
            ..Default::default()
        },
    };
    let described = |from: usize| platform.described.lock().unwrap()[from..].to_vec();

    // The first pass looks at the oldest four, then dies on the fifth.
    assert!(!pass(&engine).await, "the pass dies on the gated job");
    assert_eq!(described(0), ids[..5].to_vec());
    // The next pass, in a new process, starts in the page where the last one died.
    let seen = platform.described.lock().unwrap().len();
    assert!(!pass(&engine).await);
    assert_eq!(
        described(seen),
        vec![killer.clone()],
        "resumed at the dead pass's page, not at the oldest job"
    );
    // Each pass that dies on it counts a try; at the bound the job is ended, saying why,
    // and the same pass goes on to the others.
    let mut passes: u32 = 2;
    while !pass(&engine).await {
        passes += 1;
        assert!(
            passes <= MAX_END_TRIES + 1,
            "still killing passes after {passes}"
        );
    }
    assert_eq!(passes, MAX_END_TRIES, "given up at the bound");
    let ended = w.store.get_job(&killer).await.unwrap();
    assert_eq!(ended.job.state, JobState::Failed);
    assert!(
        ended.job.reason().contains(INTERRUPTED),
        "the reason says why: {}",
        ended.job.reason()
    );
    let env = w
        .store
        .get_environment(&ended.job.environment)
        .await
        .unwrap()
        .item;
    assert!(env.active_job.is_none(), "its environment is released");
    assert!(
        described(0).contains(&ids[5]),
        "the job after it is swept once it is quarantined"
    );
    // And the pass after starts from the oldest again, every job looked at.
    let seen = platform.described.lock().unwrap().len();
    assert!(pass(&engine).await);
    let mut all = described(seen);
    all.sort();
    let mut others: Vec<JobId> = ids.iter().filter(|i| **i != killer).cloned().collect();
    others.sort();
    assert_eq!(all, others);
}
