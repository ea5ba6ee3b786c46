//! The sweep's expiry step on the in-memory world, the pass's `now` as the clock: reminders
//! exactly once under repeated and concurrent passes, a busy environment waits, a failing
//! destroy backs off and is published, and a successful `sortie:expiry` destroy marks the
//! environment destroyed.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use sortie_core::expiry::EXPIRY_PRINCIPAL;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{EnvPath, JobRequest, JobState, Outcome};
use sortie_store::{EnvironmentStore, ExpiryStore, JobRecord, JobStore, LastApply};

use crate::testing::World;
use crate::{
    Bus, EndCause, JobOrder, LifecycleError, ENVIRONMENT_EXPIRING, ENVIRONMENT_EXPIRY_FAILED,
    ENVIRONMENT_EXPIRY_WAITING,
};

/// Keeps every event published.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, Value)>>);

#[async_trait]
impl Bus for Recorder {
    async fn job_ended(&self, _record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(())
    }
    async fn publish(
        &self,
        kind: &str,
        _resource: &str,
        detail: Value,
    ) -> Result<(), LifecycleError> {
        self.0.lock().unwrap().push((kind.to_string(), detail));
        Ok(())
    }
}

impl Recorder {
    fn of(&self, kind: &str) -> Vec<Value> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, d)| d.clone())
            .collect()
    }
}

struct Expiring {
    w: World,
    bus: Arc<Recorder>,
    env: sortie_core::Environment,
    end: DateTime<Utc>,
}

/// Environment `acme/app/dev` expiring in 3 minutes, on the due list.
async fn expiring() -> Expiring {
    let mut w = World::new().await;
    let bus = Arc::new(Recorder::default());
    w.jobs.bus = bus.clone();
    let mut env = w.environment("acme/app/dev").await;
    let end = Utc::now() + Duration::minutes(3);
    env.settings.expires_at = Some(end);
    w.store.update_environment(&env, None).await.unwrap();
    let got = crate::expiry::refresh_due(w.jobs.store.as_ref(), &env.path)
        .await
        .unwrap();
    assert_eq!(got, Some(end));
    Expiring { w, bus, env, end }
}

fn envs(w: &World) -> crate::Environments {
    crate::Environments {
        store: w.jobs.store.clone(),
        rule_indexes: Default::default(),
    }
}

fn request(operation: &str) -> JobRequest {
    serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap()
}

fn succeeded() -> EndCause {
    EndCause::Decided {
        from: JobState::Running,
        outcome: Outcome {
            state: JobState::Succeeded,
            reason: "the runner exited with code 0".into(),
        },
    }
}

/// Runs the job holding `path`'s lock to `running`.
async fn run(w: &World, id: &sortie_core::JobId) -> JobRecord {
    let now = Utc::now();
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        w.store
            .transition_job(id, from, to, now, "test", Default::default())
            .await
            .unwrap();
    }
    w.store.get_job(id).await.unwrap()
}

#[tokio::test]
async fn every_reminder_goes_out_exactly_once_under_repeated_and_concurrent_passes() {
    let x = expiring().await;
    let engine = x.w.engine();
    let now = Utc::now();
    // Two passes at once, then two more, then one a minute later: still three reminders.
    let (a, b) = tokio::join!(engine.sweep(now), engine.sweep(now));
    let sent = a.unwrap().expiry_reminders + b.unwrap().expiry_reminders;
    assert_eq!(sent, 3);
    for later in [0, 0, 60] {
        let r = engine.sweep(now + Duration::seconds(later)).await.unwrap();
        assert_eq!(r.expiry_reminders, 0, "{r:?}");
    }
    let events = x.bus.of(ENVIRONMENT_EXPIRING);
    let leads: Vec<_> = events.iter().map(|e| e["lead"].clone()).collect();
    assert_eq!(leads, vec![json!("2d"), json!("2h"), json!("30m")]);
    for e in &events {
        assert_eq!(e["environment"], "acme/app/dev");
        let at: DateTime<Utc> = serde_json::from_value(e["expires_at"].clone()).unwrap();
        assert_eq!(at, x.end);
        let left = e["left"].as_str().unwrap();
        assert!(left == "3m" || left.ends_with('s'), "{left}");
    }
    let entry = x.w.store.get_expiry(&x.env.path).await.unwrap().unwrap();
    assert_eq!(entry.item.sent.len(), 3);
    assert_eq!(entry.item.due, x.end, "next looked at when it expires");
    // An extension moves the end: the reminders start afresh for it, once each.
    let (_, new_end) = envs(&x.w).extend(&x.env.path, 3600).await.unwrap();
    let entry = x.w.store.get_expiry(&x.env.path).await.unwrap().unwrap();
    assert_eq!((entry.item.expires_at, entry.item.sent.len()), (new_end, 0));
    engine.sweep(now).await.unwrap();
    let r = engine.sweep(now).await.unwrap();
    assert_eq!(r.expiry_reminders, 0);
    // 63 minutes left: the 2-day and 2-hour reminders now, the 30-minute one at its time.
    assert_eq!(x.bus.of(ENVIRONMENT_EXPIRING).len(), 5);
    let r = engine.sweep(new_end - Duration::minutes(29)).await.unwrap();
    assert_eq!(r.expiry_reminders, 1);
    assert_eq!(x.bus.of(ENVIRONMENT_EXPIRING)[5]["lead"], "30m");
}

#[tokio::test]
async fn a_busy_environment_waits_says_so_once_and_is_destroyed_when_idle() {
    let x = expiring().await;
    let engine = x.w.engine();
    let order = JobOrder::submit(request("apply"), SensitiveValues::default(), "alice", None);
    let apply = x.w.jobs.submit_for(&x.env, order).await.unwrap().job.id;
    let after = x.end + Duration::seconds(1);
    for _ in 0..3 {
        let r = engine.sweep(after).await.unwrap();
        assert_eq!((r.expiry_waiting, r.expiry_destroys), (1, 0), "{r:?}");
    }
    let waits = x.bus.of(ENVIRONMENT_EXPIRY_WAITING);
    assert_eq!(waits.len(), 1, "said once, not every pass: {waits:?}");
    assert!(
        waits[0]["reason"]
            .as_str()
            .unwrap()
            .contains(apply.as_str()),
        "{waits:?}"
    );
    // The apply succeeds: idle, with something to destroy.
    let running = run(&x.w, &apply).await;
    x.w.jobs.end(&running, succeeded()).await.unwrap();
    let r = engine.sweep(after).await.unwrap();
    assert_eq!(r.expiry_destroys, 1, "{r:?}");
    let entry = x.w.store.get_expiry(&x.env.path).await.unwrap().unwrap();
    let destroy = sortie_core::JobId::from(entry.item.destroy_job.clone().unwrap());
    let job = x.w.store.get_job(&destroy).await.unwrap().job;
    assert_eq!(job.request.operation, sortie_core::Operation::Destroy);
    assert_eq!(job.requested_by, EXPIRY_PRINCIPAL);
    // The expiry's decision is in the audit trail, by the expiry, with the destroy.
    let entries = x.w.audit_entries(x.env.path.group().org().unwrap()).await;
    let destroys: Vec<_> = entries
        .iter()
        .filter(|e| e.action == "expiry_destroy")
        .collect();
    assert_eq!(destroys.len(), 1, "{entries:?}");
    assert_eq!(destroys[0].actor.subject, EXPIRY_PRINCIPAL);
    assert_eq!(
        destroys[0].target,
        format!("/v1/environments/{}", x.env.path)
    );
    // A pass while it runs submits nothing more.
    let r = engine.sweep(after + Duration::minutes(1)).await.unwrap();
    assert_eq!(r.expiry_destroys, 0);
    // It succeeds: the environment is marked destroyed and leaves the due list.
    let running = run(&x.w, &destroy).await;
    x.w.jobs.end(&running, succeeded()).await.unwrap();
    let record = x.w.store.get_environment(&x.env.path).await.unwrap().item;
    let mark = record.destroyed.expect("marked destroyed");
    assert_eq!(mark.job_id.as_deref(), Some(destroy.as_str()));
    assert_eq!(mark.expired_at, x.end);
    assert!(x.w.store.get_expiry(&x.env.path).await.unwrap().is_none());
    assert!(record.last_apply.is_none(), "nothing left applied");
}

#[tokio::test]
async fn a_failing_destroy_backs_off_is_published_and_is_never_dropped() {
    let x = expiring().await;
    let engine = x.w.engine();
    // The latest apply names a job that is gone: the destroy cannot be built.
    let gone = LastApply {
        job_id: sortie_core::JobId::from("01gonegonegonegonegonegone".to_string()),
        at: Utc::now(),
    };
    x.w.store
        .record_last_apply(&x.env.path, &gone)
        .await
        .unwrap();
    let mut now = x.end + Duration::seconds(1);
    let mut last_due = now;
    for failures in 1..=4u32 {
        let r = engine.sweep(now).await.unwrap();
        assert_eq!(r.expiry_failures, 1, "{r:?}");
        let entry =
            x.w.store
                .get_expiry(&x.env.path)
                .await
                .unwrap()
                .unwrap()
                .item;
        assert_eq!(entry.failures, failures);
        assert!(entry.due > now && entry.due - now <= Duration::seconds(300));
        assert!(entry.due - now >= last_due - now - Duration::seconds(300));
        // Not due again before its backoff.
        let r = engine.sweep(now).await.unwrap();
        assert_eq!(r.expiry_failures, 0);
        last_due = entry.due;
        now = entry.due;
    }
    let failed = x.bus.of(ENVIRONMENT_EXPIRY_FAILED);
    assert_eq!(failed.len(), 4);
    assert_eq!(failed[3]["failures"], 4);
    assert!(failed[0]["reason"]
        .as_str()
        .unwrap()
        .contains("could not be submitted"));
    // Still on the list, still not destroyed.
    assert!(x.w.store.get_expiry(&x.env.path).await.unwrap().is_some());
    let record = x.w.store.get_environment(&x.env.path).await.unwrap().item;
    assert!(record.destroyed.is_none());
}

#[tokio::test]
async fn an_environment_with_nothing_applied_is_marked_destroyed_at_once_and_extend_revives_it() {
    let x = expiring().await;
    let engine = x.w.engine();
    engine.sweep(x.end + Duration::seconds(1)).await.unwrap();
    let record = x.w.store.get_environment(&x.env.path).await.unwrap().item;
    let mark = record
        .destroyed
        .expect("nothing to destroy: marked at once");
    assert_eq!(mark.job_id, None);
    assert!(x.w.sent().is_empty(), "no job");
    assert!(x.w.store.get_expiry(&x.env.path).await.unwrap().is_none());
    // A deleted environment's entry is dropped by the sweep.
    let other = EnvPath::parse("acme/app/gone").unwrap();
    x.w.store.set_expiry(&other, x.end).await.unwrap();
    engine.sweep(x.end + Duration::seconds(1)).await.unwrap();
    assert!(x.w.store.get_expiry(&other).await.unwrap().is_none());
    // An extension brings it back: unmarked, on the list again.
    envs(&x.w).extend(&x.env.path, 3600).await.unwrap();
    let record = x.w.store.get_environment(&x.env.path).await.unwrap().item;
    assert!(record.destroyed.is_none());
    assert!(x.w.store.get_expiry(&x.env.path).await.unwrap().is_some());
}
