//! AWS calls per job on the dispatch hot path (claim → running), counted at the request
//! level by the fault proxy over 100 jobs, or `SORTIE_CALLS_PER_JOB_JOBS` (issue 4,
//! "Measure"; recorded in BENCHMARKS.md; `make bench` counts over 1,000).
//!
//! Each environment gets one job, so every job takes its environment's lock and is a
//! fresh claim. The proxy is cleared after the setup, then the queue messages are
//! dispatched one after the other, as one warm Lambda container would. Goal: at most 3
//! calls per job, amortised.
//!
//! `scripts/bench-calls.sh` runs it and prints the table.

use crate::common;

use std::collections::BTreeMap;

use common::World;
use sortie_core::JobState;
use sortie_lifecycle::MessageDisposition;
use sortie_store::{EnvironmentStore, JobStore};

const GOAL: f64 = 3.0;

#[tokio::test]
async fn aws_calls_per_job_on_the_hot_path_are_at_most_three_amortised() {
    sortie_testkit::require_aws!();
    let job_count: usize = std::env::var("SORTIE_CALLS_PER_JOB_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let w = World::new().await;
    let mut jobs = Vec::with_capacity(job_count);
    for i in 0..job_count {
        let env = w.environment(&format!("acme/bench/env-{i:04}"), "").await;
        let (job, took) = w.submit(&env, "apply", "").await;
        assert!(took, "one job per environment takes its lock");
        jobs.push(job.id);
    }

    w.proxy.clear();
    for id in &jobs {
        assert_eq!(
            w.engine.dispatch(&World::body(id), 1).await,
            MessageDisposition::Done
        );
    }
    let requests = w.proxy.requests();

    for id in &jobs {
        assert_eq!(
            w.store.get_job(id).await.unwrap().job.state,
            JobState::Running
        );
    }

    let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
    for r in &requests {
        let op = match (&r.service, &r.operation) {
            (Some(s), Some(o)) => format!("{s}.{o}"),
            (None, Some(o)) => o.clone(),
            (Some(s), None) => format!("{s} {} {}", r.method, r.path),
            (None, None) => format!("{} {}", r.method, r.path),
        };
        *by_op.entry(op).or_default() += 1;
    }
    let total = requests.len();
    let count = |op: &str| requests.iter().filter(|r| r.is(op)).count();
    let named = ["UpdateItem", "RunTask", "AssumeRole", "GetItem"];
    let other = requests
        .iter()
        .filter(|r| !named.iter().any(|n| r.is(n)))
        .count();
    // AssumeRole is paid once per (role, ExternalId, organisation, runner) per Lambda container and
    // again only when the 15-minute session is 5 minutes from expiry: a fixed cost, not a
    // per-job one. Amortised over the jobs a warm container dispatches it tends to zero.
    let assume_role = count("AssumeRole");
    let per_job = total as f64 / job_count as f64;
    let amortised = (total - assume_role) as f64 / job_count as f64;

    println!();
    println!("AWS requests while dispatching {job_count} jobs (claim -> running)");
    println!();
    println!("| operation | requests | per job |");
    println!("|---|---:|---:|");
    for (op, n) in &by_op {
        println!("| {op} | {n} | {:.2} |", *n as f64 / job_count as f64);
    }
    println!("| **total** | **{total}** | **{per_job:.2}** |");
    println!();
    println!(
        "UpdateItem {}, RunTask {}, AssumeRole {assume_role}, GetItem {}, other {other}",
        count("UpdateItem"),
        count("RunTask"),
        count("GetItem"),
    );
    println!(
        "per job: {per_job:.2} over {job_count} jobs; {amortised:.2} per job plus {assume_role} AssumeRole per container (goal: at most {GOAL:.1} amortised)"
    );

    assert!(
        assume_role <= 1,
        "one role, one ExternalId, one organisation, one runner: one AssumeRole, then the cache: {by_op:?}"
    );
    assert!(
        amortised <= GOAL,
        "{amortised:.2} AWS calls per job on the hot path, over the goal of {GOAL}: {by_op:?}"
    );
}

/// AWS calls per submit (`JobService::submit_for`), counted by the fault proxy: a submit
/// to an unlocked environment reads no lock nor freeze before its conditional write (the
/// write refuses a locked or frozen environment itself); a refused one reads them after,
/// to name who locked it. Measured on 20 environments (docs/decisions/environment-life.md).
#[tokio::test]
async fn a_submit_reads_the_lock_only_after_its_write_is_refused() {
    sortie_testkit::require_aws!();
    const SUBMITS: usize = 20;
    let w = World::new().await;
    let mut envs = Vec::with_capacity(SUBMITS);
    for i in 0..SUBMITS {
        let path = w.environment(&format!("acme/submit/env-{i:02}"), "").await;
        envs.push(
            w.store
                .get_environment(&path)
                .await
                .unwrap()
                .item
                .environment,
        );
    }
    let order = || {
        let request =
            sortie_core::JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#)
                .unwrap();
        sortie_lifecycle::JobOrder::submit(request, Default::default(), "alice", None)
    };
    let by_op = |requests: &[sortie_testkit::proxy::Recorded]| {
        let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
        for r in requests {
            let op = r.operation.clone().or(r.target.clone()).unwrap_or_default();
            *by_op.entry(op).or_default() += 1;
        }
        by_op
    };

    w.proxy.clear();
    for env in &envs {
        let submitted = w.engine.jobs.submit_for(env, order()).await.unwrap();
        assert!(submitted.took_lock);
    }
    let requests = w.proxy.requests();
    let per_submit = requests.len() as f64 / SUBMITS as f64;
    println!(
        "AWS requests per submit: {per_submit:.2} ({:?})",
        by_op(&requests)
    );
    assert!(
        !requests.iter().any(|r| r.is("BatchGetItem")),
        "a submit that is not refused reads no freeze: {:?}",
        by_op(&requests)
    );

    // What the pre-read (before this change, every submit did it) costs on its own.
    w.proxy.clear();
    assert!(w
        .engine
        .jobs
        .lock_holding(&envs[0].path)
        .await
        .unwrap()
        .is_none());
    let pre_read = w.proxy.requests();
    println!(
        "a lock and freeze read, saved per submit: {} ({:?})",
        pre_read.len(),
        by_op(&pre_read)
    );

    // A locked environment: refused, and named (who, why) by the reads after the refusal.
    let other = &envs[1];
    w.engine
        .jobs
        .lock_environment(&other.path, "bob", "incident 42", chrono::Utc::now())
        .await
        .unwrap();
    w.proxy.clear();
    let e = w.engine.jobs.submit_for(other, order()).await.unwrap_err();
    let requests = w.proxy.requests();
    println!(
        "AWS requests per refused submit: {} ({:?})",
        requests.len(),
        by_op(&requests)
    );
    assert!(
        matches!(e, sortie_lifecycle::SubmitError::Locked { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("bob") && e.to_string().contains("incident 42"),
        "{e}"
    );
}
