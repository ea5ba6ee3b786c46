//! The services' tests of triggers and state history, in memory: one queued trigger for
//! five quick upstream applies, no trigger for unchanged outputs, sensitive inputs kept
//! as secrets, cycles refused at write, and the state history's list, redaction and
//! restore.

use std::sync::Arc;

use chrono::Utc;
use serde_json::json;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::triggers::TRIGGER_PRINCIPAL;
use sortie_core::{EnvPath, Environment, JobRequest, JobState, Operation};
use sortie_launch::state_history::MemoryStateHistory;
use sortie_store::{EnvironmentStore, JobRecord, JobStore, LastApply, StoreError};

use crate::end::EndCause;
use crate::submit::JobOrder;
use crate::testing::{Bucket, World};
use crate::{HistoryRefusal, PolicyGate};

struct Setup {
    w: World,
    bucket: Arc<Bucket>,
    a: EnvPath,
    b: Environment,
}

fn request(operation: &str) -> JobRequest {
    serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": "variable \"ip\" {}"}},
        "variables": {"region": "eu"},
    }))
    .unwrap()
}

/// Upstream `acme/net/a`; downstream `acme/app/b` triggered by it (inputs `ip` and `pw`),
/// with an apply of its own recorded (its configuration is what a trigger plans).
async fn setup() -> Setup {
    let mut w = World::new().await;
    let bucket = Arc::new(Bucket::default());
    w.jobs.gate = PolicyGate {
        artifacts: Some(bucket.clone()),
        ..Default::default()
    };
    let a = w.environment("acme/net/a").await.path;
    let mut b = w.environment("acme/app/b").await;
    b.settings.triggers = vec![a.clone()];
    b.settings.trigger_inputs = vec!["ip".into(), "pw".into()];
    crate::triggers::check(w.store.as_ref(), &b.path, &b.settings.triggers)
        .await
        .unwrap();
    w.store.update_environment(&b, None).await.unwrap();
    let own = JobOrder::submit(request("apply"), SensitiveValues::default(), "alice", None);
    let own = w.jobs.submit_for(&b, own).await.unwrap().job;
    w.store
        .record_last_apply(
            &b.path,
            &LastApply {
                job_id: own.id.clone(),
                at: Utc::now(),
            },
        )
        .await
        .unwrap();
    Setup { w, bucket, a, b }
}

impl Setup {
    /// An apply of A that succeeds with output `ip` = `ip` (and a sensitive `pw`).
    async fn apply_a(&self, ip: &str) -> JobRecord {
        let order = JobOrder::submit(request("apply"), SensitiveValues::default(), "bob", None);
        let env = self
            .w
            .store
            .get_environment(&self.a)
            .await
            .unwrap()
            .item
            .environment;
        let job = self.w.jobs.submit_for(&env, order).await.unwrap().job;
        let key = sortie_core::protocol::pilot::upload_key(
            &job.id,
            sortie_core::protocol::pilot::UploadKind::Outputs,
            None,
        )
        .unwrap();
        let outputs = json!({
            "ip": {"value": ip, "type": "string", "sensitive": false},
            "pw": {"value": "hunter2", "type": "string", "sensitive": true},
        });
        self.bucket.put(&key, outputs.to_string().into_bytes());
        let mut record = self.w.store.get_job(&job.id).await.unwrap();
        record.job.state = JobState::Succeeded;
        self.w.jobs.end(&record, EndCause::Reached).await.unwrap();
        record
    }

    /// B's jobs, newest first (up to 100).
    async fn b_jobs(&self) -> Vec<JobRecord> {
        self.w
            .store
            .list_jobs(&self.b.path, 100, None)
            .await
            .unwrap()
            .jobs
    }

    async fn triggered(&self) -> Vec<JobRecord> {
        self.b_jobs()
            .await
            .into_iter()
            .filter(|j| j.job.requested_by == TRIGGER_PRINCIPAL)
            .collect()
    }
}

#[tokio::test]
async fn five_quick_upstream_applies_leave_one_queued_trigger_with_the_newest_outputs() {
    let s = setup().await;
    // B is busy with its own job, so every trigger waits.
    let mut last = None;
    for i in 1..=5 {
        last = Some(s.apply_a(&format!("10.0.0.{i}")).await);
    }
    let last = last.unwrap();
    let triggered = s.triggered().await;
    let queued: Vec<_> = triggered
        .iter()
        .filter(|j| j.job.state == JobState::Queued)
        .collect();
    assert_eq!(queued.len(), 1, "{triggered:#?}");
    let q = &queued[0].job;
    assert_eq!(q.request.operation, Operation::Plan);
    assert_eq!(
        q.request.variables["ip"],
        json!("10.0.0.5"),
        "the newest outputs"
    );
    assert_eq!(
        q.request.variables["region"],
        json!("eu"),
        "B's own configuration"
    );
    let context = q.trigger.as_ref().unwrap();
    assert_eq!(
        (&context.upstream, &context.upstream_job_id),
        (&s.a, &last.job.id)
    );
    // The sensitive output went to the job's secret: the record holds its ARN, never the
    // value.
    let arn = q.request.sensitive_secret.as_ref().unwrap();
    assert!(q.request.sensitive_variables.contains_key("pw"));
    let kept = s.w.jobs.secrets.value(arn).await.unwrap();
    assert_eq!(kept, serde_json::json!({"pw": "hunter2"}).to_string());
    assert!(!serde_json::to_string(q).unwrap().contains("hunter2"));
    // The others were superseded, not left queued.
    assert!(triggered
        .iter()
        .filter(|j| j.job.id != q.id)
        .all(|j| j.job.state == JobState::Canceled));
}

#[tokio::test]
async fn unchanged_outputs_trigger_nothing() {
    let s = setup().await;
    s.apply_a("10.0.0.1").await;
    assert_eq!(
        s.triggered().await.len(),
        1,
        "the first outputs are a change"
    );
    s.apply_a("10.0.0.1").await;
    assert_eq!(
        s.triggered().await.len(),
        1,
        "the same outputs again: no trigger"
    );
    s.apply_a("10.0.0.2").await;
    assert_eq!(s.triggered().await.len(), 2);
}

#[tokio::test]
async fn a_cycle_or_an_unknown_upstream_is_refused_naming_it() {
    let s = setup().await;
    let e = crate::triggers::check(s.w.store.as_ref(), &s.a, std::slice::from_ref(&s.b.path))
        .await
        .unwrap_err();
    match e {
        StoreError::Invalid { path, problem } => {
            assert_eq!(path, "triggers");
            assert_eq!(
                problem,
                "would make a cycle: acme/net/a → acme/app/b → acme/net/a"
            );
        }
        other => panic!("{other:?}"),
    }
    let gone = EnvPath::parse("acme/net/gone").unwrap();
    let e = crate::triggers::check(s.w.store.as_ref(), &s.a, &[gone])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { path, problem } if path == "triggers[0]" && problem.contains("does not exist")),
        "{e:?}"
    );
}

fn state(serial: u64, secret: &str) -> Vec<u8> {
    json!({
        "version": 4, "serial": serial, "lineage": "lin-1", "terraform_version": "1.11.4",
        "outputs": {"pw": {"value": secret, "type": "string", "sensitive": true}},
        "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{
            "attributes": {"id": format!("id-{serial}"), "input": secret},
            "sensitive_attributes": [[{"type": "get_attr", "value": "input"}]]
        }]}]
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn state_versions_name_their_writer_and_a_version_is_redacted() {
    let s = setup().await;
    let history = MemoryStateHistory::default();
    let own =
        s.w.store
            .get_environment(&s.b.path)
            .await
            .unwrap()
            .item
            .last_apply
            .unwrap();
    let v1 = history.put(&s.b.path, Utc::now(), state(1, "s3cret-one"));
    let v2 = history.put(
        &s.b.path,
        Utc::now() + chrono::Duration::hours(2),
        state(2, "s3cret-two"),
    );

    let list =
        s.w.jobs
            .state_versions(&history, &s.b.path, None, 10)
            .await
            .unwrap();
    let ids: Vec<_> = list
        .versions
        .iter()
        .map(|v| v.object.version_id.clone())
        .collect();
    assert_eq!(ids, [v2.clone(), v1.clone()], "newest first");
    assert_eq!(list.versions[1].facts.serial, Some(1));
    assert_eq!(list.versions[1].facts.lineage.as_deref(), Some("lin-1"));
    assert_eq!(
        list.versions[1].job_id.as_ref(),
        Some(&own.job_id),
        "written while B's apply ran"
    );
    assert_eq!(
        list.versions[0].job_id.as_ref(),
        Some(&own.job_id),
        "B's apply has not ended"
    );
    assert!(
        list.versions
            .iter()
            .all(|v| v.matched_by == sortie_core::state_version::MatchedBy::Time),
        "B's apply recorded no state: matched by time"
    );

    let page =
        s.w.jobs
            .state_versions(&history, &s.b.path, None, 1)
            .await
            .unwrap();
    assert_eq!(page.next.as_deref(), Some(v2.as_str()));
    let page =
        s.w.jobs
            .state_versions(&history, &s.b.path, Some(&v2), 1)
            .await
            .unwrap();
    assert_eq!(page.versions[0].object.version_id, v1);
    assert_eq!(page.next, None);

    let one =
        s.w.jobs
            .state_version(&history, &s.b.path, &v1)
            .await
            .unwrap();
    assert!(!one.to_string().contains("s3cret"), "{one}");
    assert!(one.to_string().contains("id-1"));
    assert!(matches!(
        s.w.jobs.state_version(&history, &s.b.path, "v9999").await,
        Err(HistoryRefusal::NoSuchVersion { .. })
    ));
}

#[tokio::test]
async fn a_restore_queues_a_plan_that_writes_the_version_back() {
    let s = setup().await;
    let history = MemoryStateHistory::default();
    let v1 = history.put(&s.b.path, Utc::now(), state(1, "x"));
    let e =
        s.w.jobs
            .restore_state(&history, &s.b.path, &v1, " ", "carol")
            .await
            .unwrap_err();
    assert!(
        matches!(
            e,
            HistoryRefusal::Invalid {
                field: "reason",
                ..
            }
        ),
        "{e:?}"
    );
    let submitted =
        s.w.jobs
            .restore_state(&history, &s.b.path, &v1, "bad apply", "carol")
            .await
            .unwrap();
    let job = submitted.job;
    assert_eq!(job.request.operation, Operation::Plan);
    assert_eq!(job.requested_by, "carol");
    let restore = job.restore.unwrap();
    assert_eq!(
        (restore.version_id.as_str(), restore.reason.as_str()),
        (v1.as_str(), "bad apply")
    );
    // Behind B's lock like any job.
    assert!(!submitted.took_lock);
    // A version that is not there is refused.
    assert!(matches!(
        s.w.jobs
            .restore_state(&history, &s.b.path, "v0404", "why", "carol")
            .await,
        Err(HistoryRefusal::NoSuchVersion { .. })
    ));
}

/// A destroyed environment takes no job from a trigger, a drift check or a restore, as a
/// person's submit is refused: the refusal is the submit's own (issue 43 item 2; it was the
/// API handler's alone, so the other ways in went around it). Extended, it takes them again.
#[tokio::test]
async fn a_destroyed_environment_takes_no_trigger_drift_check_or_restore() {
    use sortie_store::ExpiryStore;
    let s = setup().await;
    let history = MemoryStateHistory::default();
    let v1 = history.put(&s.b.path, Utc::now(), state(1, "x"));
    let mark = sortie_core::expiry::Destroyed {
        at: Utc::now(),
        job_id: Some("01destroy".into()),
        expired_at: Utc::now(),
    };
    s.w.store
        .mark_destroyed(&s.b.path, Some(&mark))
        .await
        .unwrap();
    let before = s.b_jobs().await.len();

    // A's changed outputs reach no destroyed downstream.
    s.apply_a("10.0.0.9").await;
    assert!(
        s.triggered().await.is_empty(),
        "a trigger reached a destroyed environment"
    );
    // A drift check (idle only) and a queued submit such as a remediation's.
    let last = s.b_jobs().await[0].clone();
    for write in [crate::WriteMode::IfIdle, crate::WriteMode::Queue(None)] {
        let mut order = JobOrder::again(
            &last.job.request,
            Operation::Plan,
            "sortie:drift",
            Utc::now(),
        );
        order.write = write;
        let e = s.w.jobs.submit_for(&s.b, order).await.unwrap_err();
        assert!(
            matches!(&e, crate::SubmitError::Destroyed { environment, destroyed } if environment == &s.b.path && destroyed == &mark),
            "{e:?}"
        );
        assert!(e.to_string().contains("was destroyed"), "{e}");
    }
    // A restore.
    let e =
        s.w.jobs
            .restore_state(&history, &s.b.path, &v1, "bad apply", "carol")
            .await
            .unwrap_err();
    assert!(
        matches!(
            e,
            HistoryRefusal::Submit(crate::SubmitError::Destroyed { .. })
        ),
        "{e:?}"
    );
    let after = s.b_jobs().await.len();
    assert_eq!(
        after, before,
        "nothing was written to the destroyed environment"
    );

    // Extended (the mark cleared): a restore is taken again.
    s.w.store.mark_destroyed(&s.b.path, None).await.unwrap();
    s.w.jobs
        .restore_state(&history, &s.b.path, &v1, "bad apply", "carol")
        .await
        .unwrap();
}
