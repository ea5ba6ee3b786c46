//! Poison isolation: one tenant's unreadable job item never stops the sweeper for the others,
//! and never keeps its own environment locked. Moto, through the real SDK.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration, Utc};
use common::World;
use sortie_core::{EnvPath, JobId, JobState};
use sortie_lifecycle::{MessageDisposition, SweepSettings};
use sortie_store::{EnvironmentStore, JobStore};

/// Breaks a job item with the raw SDK so that it can no longer be decoded.
async fn corrupt(w: &World, id: &str, expr: &str, values: &[(&str, &str)]) {
    let raw = aws_sdk_dynamodb::Client::new(&w.direct);
    let mut u = raw
        .update_item()
        .table_name(w.store.table())
        .key("pk", AttributeValue::S(format!("JOB#{id}")))
        .key("sk", AttributeValue::S("JOB".into()))
        .update_expression(expr);
    for (k, v) in values {
        u = u.expression_attribute_values(*k, AttributeValue::S((*v).into()));
    }
    if expr.contains("#state") {
        u = u.expression_attribute_names("#state", "state");
    }
    u.send().await.unwrap();
    assert!(
        w.store.get_job(&JobId::from(id)).await.is_err(),
        "the planted item is unreadable"
    );
}

async fn holder(w: &World, env: &EnvPath) -> Option<String> {
    w.store
        .get_environment(env)
        .await
        .unwrap()
        .item
        .active_job
        .map(|j| j.to_string())
}

#[tokio::test]
async fn an_unreadable_job_is_failed_and_its_environment_released_while_every_other_tenant_is_swept(
) {
    sortie_testkit::require_aws!();
    let w = World::with_settings(SweepSettings {
        resend_after: Duration::zero(),
        silence: Duration::zero(),
        ..Default::default()
    })
    .await;
    let timeout = "  timeout_seconds: 60\n";
    let a = w.environment("tenant-a/app/prod", "").await;
    let b = w.environment("tenant-b/app/prod", "").await;
    let c = w.environment("tenant-c/app/prod", "").await;
    let d = w.environment("tenant-d/app/prod", "").await;

    // A: the lock holder's item is corrupt (and in the sweeper's PENDING list); one waits.
    let (a1, took) = w.submit(&a, "apply", "").await;
    assert!(took);
    let (a2, took) = w.submit(&a, "plan", "").await;
    assert!(!took);
    corrupt(&w, &a1.id, "SET #state = :x", &[(":x", "exploded")]).await;
    // B: running past its timeout.
    let (jb, _) = w.submit(&b, "apply", timeout).await;
    assert_eq!(
        w.engine.dispatch(&World::body(&jb.id), 1).await,
        MessageDisposition::Done
    );
    // D: running, its task stopped and the STOPPED event lost.
    let (jd, _) = w.submit(&d, "plan", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&jd.id), 1).await,
        MessageDisposition::Done
    );
    let task_d = w.store.get_job(&jd.id).await.unwrap().task.unwrap();
    w.ecs
        .stop_task()
        .cluster(&w.cluster)
        .task(&task_d)
        .reason("Essential container in task exited")
        .send()
        .await
        .unwrap();
    // C: holds its lock, still queued, its send lost.
    let (jc, _) = w.submit(&c, "plan", "").await;
    let _ = w.queued_ids().await;

    let later = Utc::now() + Duration::seconds(61);
    let mut reports = vec![];
    for _ in 0..2 {
        reports.push(w.engine.sweep(later).await);
    }
    eprintln!("{reports:?}");

    // B timed out, C re-sent, D resolved.
    let rb = w.store.get_job(&jb.id).await.unwrap();
    assert!(
        rb.timeout_requested_at.is_some(),
        "B was stopped for its timeout"
    );
    assert!(w
        .proxy
        .requests_for("StopTask")
        .iter()
        .any(|r| r.json().unwrap()["reason"] == "sortie: timed out after 60s"));
    let sent = w.queued_ids().await;
    assert!(sent.contains(&jc.id), "C re-sent: {sent:?}");
    assert!(w.state(&jd.id).await.is_terminal(), "D resolved");
    assert_eq!(holder(&w, &d).await, None);

    // A: the corrupt job is failed with a clear reason, and the lock went to the next job.
    let ra1 = w.store.get_job(&a1.id).await.unwrap();
    assert_eq!(ra1.job.state, JobState::Failed);
    assert!(
        ra1.job.reason().contains("unreadable"),
        "{}",
        ra1.job.reason()
    );
    assert_eq!(holder(&w, &a).await.as_deref(), Some(a2.id.as_str()));
    assert!(
        sent.contains(&a2.id),
        "the next job in A was sent: {sent:?}"
    );
    // It runs.
    assert_eq!(
        w.engine.dispatch(&World::body(&a2.id), 1).await,
        MessageDisposition::Done
    );
    assert_eq!(w.state(&a2.id).await, JobState::Running);
    // The sweep itself reports what it skipped, and carries on.
    let last = reports.last().unwrap().as_ref().unwrap();
    assert_eq!(last.errors, 0, "{last:?}");
}

#[tokio::test]
async fn an_unreadable_launched_job_and_an_unreadable_waiting_job_never_keep_the_lock() {
    sortie_testkit::require_aws!();
    let w = World::with_settings(SweepSettings {
        resend_after: Duration::zero(),
        ..Default::default()
    })
    .await;
    let a = w.environment("tenant-a/app/prod", "").await;
    let (a1, _) = w.submit(&a, "apply", "").await;
    let (a2, _) = w.submit(&a, "plan", "").await;
    let (a3, _) = w.submit(&a, "plan", "").await;
    assert_eq!(
        w.engine.dispatch(&World::body(&a1.id), 1).await,
        MessageDisposition::Done
    );
    // The running holder loses its transitions; the first waiting job its operation.
    corrupt(&w, &a1.id, "REMOVE transitions", &[]).await;
    corrupt(&w, &a2.id, "SET operation = :x", &[(":x", "explode")]).await;
    for _ in 0..2 {
        let _ = w.engine.sweep(Utc::now()).await;
    }
    let r1 = w.store.get_job(&a1.id).await.unwrap();
    assert_eq!(r1.job.state, JobState::Failed);
    // The unreadable waiting job is skipped (taken out of the queue), and a3 gets the lock.
    assert_eq!(holder(&w, &a).await.as_deref(), Some(a3.id.as_str()));
    let env = w.store.get_environment(&a).await.unwrap().item;
    assert_eq!(env.queued_count, 0);
    assert_eq!(
        w.engine.dispatch(&World::body(&a3.id), 1).await,
        MessageDisposition::Done
    );
    assert_eq!(w.state(&a3.id).await, JobState::Running);
}
