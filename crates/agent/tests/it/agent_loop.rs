//! The claim, heartbeat and exit loop and the drain, against a fake pool API and a fake
//! executor.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use sortie_agent::agent::Backoff;
use sortie_agent::api::Heartbeat;
use sortie_agent::executor::RunExit;
use sortie_agent::{Agent, AgentError, AgentSettings, Phase};
use sortie_core::protocol::agent::EXIT_REASON_MAX;
use support::{claim, eventually, fakes, FakeApi, FakeExecutor};
use tokio::sync::watch;
use tokio::task::JoinHandle;

const SOON: Duration = Duration::from_secs(5);

fn settings(max_jobs: u32, drain_timeout: Duration) -> AgentSettings {
    let mut s = AgentSettings::new("agent-1", max_jobs, 20, drain_timeout);
    s.backoff = Backoff {
        first: Duration::from_millis(20),
        max: Duration::from_millis(80),
    };
    s.exit_backoff = s.backoff;
    s.kill_grace = Duration::from_millis(300);
    s.min_claim_interval = Duration::from_millis(10);
    s
}

struct Running {
    phase: watch::Sender<Phase>,
    task: JoinHandle<Result<(), AgentError>>,
}

fn start(api: &Arc<FakeApi>, executor: &Arc<FakeExecutor>, settings: AgentSettings) -> Running {
    let (phase, watched) = watch::channel(Phase::Run);
    let agent = Agent::new(settings, api.clone(), executor.clone());
    let task = tokio::spawn(async move { agent.run(watched).await });
    Running { phase, task }
}

impl Running {
    async fn finish(self, phase: Phase, within: Duration) {
        self.phase.send(phase).unwrap();
        tokio::time::timeout(within, self.task)
            .await
            .expect("the agent returns")
            .expect("no panic")
            .expect("no error");
    }
}

#[tokio::test]
async fn a_claimed_job_runs_and_its_exit_is_reported() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("started", SOON, || executor.started() == ["job-1"]).await;
    executor.end(
        "job-1",
        RunExit {
            exit_code: Some(1),
            reason: Some("terraform apply failed".into()),
        },
    );
    eventually("reported", SOON, || api.exits().len() == 1).await;
    let (job, report) = &api.exits()[0];
    assert_eq!(job.as_str(), "job-1");
    assert_eq!(report.agent, "agent-1");
    assert_eq!(report.attempt, 1);
    assert_eq!(report.exit_code, Some(1));
    assert_eq!(report.reason.as_deref(), Some("terraform apply failed"));
    assert!(!report.handed_back);
    eventually("finished", SOON, || {
        executor.finished.lock().unwrap().as_slice() == ["job-1"]
    })
    .await;
    let first = api.claim_requests.lock().unwrap()[0].clone();
    assert_eq!(first.agent, "agent-1");
    assert_eq!(first.running, 0);
    assert_eq!(first.wait_seconds, Some(20));
    assert!(executor.stops().is_empty());
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn the_agent_claims_only_while_fewer_than_max_jobs_run() {
    let (api, executor) = fakes();
    for id in ["job-1", "job-2", "job-3"] {
        api.offer(claim(id, 10));
    }
    let agent = start(&api, &executor, settings(2, Duration::from_secs(60)));
    eventually("two started", SOON, || executor.started().len() == 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(executor.started(), ["job-1", "job-2"], "a third waits");
    let running: Vec<u32> = api
        .claim_requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.running)
        .collect();
    assert_eq!(running, [0, 1], "no claim while full");
    executor.end("job-1", RunExit::default());
    eventually("the third started", SOON, || executor.started().len() == 3).await;
    let last = api.claim_requests.lock().unwrap().last().unwrap().running;
    assert_eq!(last, 1);
    executor.end("job-2", RunExit::default());
    executor.end("job-3", RunExit::default());
    eventually("all reported", SOON, || api.exits().len() == 3).await;
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn a_stop_from_the_heartbeat_kills_the_runner_and_reports_its_reason() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 1));
    api.answer_heartbeat("job-1", FakeApi::stop("sortie: canceled by alice"));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("reported", SOON, || api.exits().len() == 1).await;
    assert_eq!(
        executor.stops(),
        [("job-1".to_string(), "sortie: canceled by alice".to_string())]
    );
    let (_, report) = &api.exits()[0];
    assert_eq!(report.exit_code, Some(143));
    assert_eq!(report.reason.as_deref(), Some("sortie: canceled by alice"));
    assert!(!report.handed_back);
    let heartbeat = api.heartbeats.lock().unwrap()[0].1.clone();
    assert_eq!(
        (heartbeat.agent.as_str(), heartbeat.attempt),
        ("agent-1", 1)
    );
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn a_job_no_longer_held_is_killed_and_not_reported() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 1));
    api.answer_heartbeat("job-1", Heartbeat::NotHeld);
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("stopped", SOON, || executor.stops().len() == 1).await;
    eventually("forgotten", SOON, || {
        executor.finished.lock().unwrap().len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        api.exit_calls.lock().unwrap().is_empty(),
        "nothing reported"
    );
    assert_eq!(api.heartbeats_of("job-1"), 1, "no heartbeat after a 409");
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn a_job_that_cannot_start_is_reported_with_the_reason() {
    let (api, executor) = fakes();
    *executor.fail_start.lock().unwrap() =
        Some("the agent's pilot binary `/nope/sortie-pilot` was not found".into());
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("reported", SOON, || api.exits().len() == 1).await;
    let (_, report) = &api.exits()[0];
    assert_eq!(report.exit_code, None);
    assert!(report.reason.as_deref().unwrap().contains("was not found"));
    assert!(!report.handed_back);
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn a_long_reason_is_cut_to_what_an_exit_report_carries() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("started", SOON, || executor.started().len() == 1).await;
    executor.end(
        "job-1",
        RunExit {
            exit_code: Some(1),
            reason: Some("ü".repeat(3000)),
        },
    );
    eventually("reported", SOON, || api.exits().len() == 1).await;
    let reason = api.exits()[0].1.reason.clone().unwrap();
    assert!(reason.len() <= EXIT_REASON_MAX && reason.len() > EXIT_REASON_MAX - 8);
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn claim_failures_back_off_and_the_agent_keeps_going() {
    let (api, executor) = fakes();
    {
        let mut errors = api.claim_errors.lock().unwrap();
        errors.push_back(AgentError::Unauthorized("401".into()));
        errors.push_back(AgentError::PoolNotFound("404".into()));
        errors.push_back(AgentError::Transient("503".into()));
    }
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("started after the errors", SOON, || {
        executor.started().len() == 1
    })
    .await;
    assert_eq!(api.claim_requests.lock().unwrap().len(), 4);
    executor.end("job-1", RunExit::default());
    eventually("reported", SOON, || api.exits().len() == 1).await;
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn an_exit_report_is_tried_again_after_a_transient_failure() {
    let (api, executor) = fakes();
    api.exit_errors
        .lock()
        .unwrap()
        .push_back(AgentError::Transient("502".into()));
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("started", SOON, || executor.started().len() == 1).await;
    executor.end(
        "job-1",
        RunExit {
            exit_code: Some(0),
            reason: None,
        },
    );
    eventually("reported", SOON, || api.exits().len() == 1).await;
    assert_eq!(api.exit_calls.lock().unwrap().len(), 2);
    agent.finish(Phase::Drain, SOON).await;
}

#[tokio::test]
async fn a_drain_claims_nothing_more_and_waits_for_the_running_jobs() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 1));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("started", SOON, || executor.started().len() == 1).await;
    api.offer(claim("job-2", 1));
    agent.phase.send(Phase::Drain).unwrap();
    // The job goes on, heartbeaten, past the drain signal.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(api.heartbeats_of("job-1") >= 1);
    assert!(!agent.task.is_finished(), "the drain waits for the job");
    assert_eq!(
        executor.started(),
        ["job-1"],
        "nothing claimed while draining"
    );
    executor.end(
        "job-1",
        RunExit {
            exit_code: Some(0),
            reason: None,
        },
    );
    tokio::time::timeout(SOON, agent.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let exits = api.exits();
    assert_eq!(exits.len(), 1);
    assert!(!exits[0].1.handed_back);
    assert_eq!(exits[0].1.exit_code, Some(0));
    assert!(executor.stops().is_empty());
    assert_eq!(api.claims.lock().unwrap().len(), 1, "job-2 still offered");
}

#[tokio::test]
async fn a_drain_abandons_the_claim_in_flight() {
    let (api, executor) = fakes();
    *api.empty_wait.lock().unwrap() = Some(Duration::from_secs(30));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(60)));
    eventually("claiming", SOON, || {
        api.claim_requests.lock().unwrap().len() == 1
    })
    .await;
    agent.finish(Phase::Drain, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn after_the_drain_timeout_the_running_jobs_are_handed_back() {
    let (api, executor) = fakes();
    api.offer(claim("job-1", 10));
    api.offer(claim("job-2", 10));
    let agent = start(&api, &executor, settings(2, Duration::from_millis(300)));
    eventually("started", SOON, || executor.started().len() == 2).await;
    executor.end(
        "job-2",
        RunExit {
            exit_code: Some(0),
            reason: None,
        },
    );
    eventually("job-2 reported", SOON, || api.exits().len() == 1).await;
    agent.finish(Phase::Drain, SOON).await;
    let stops = executor.stops();
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0].0, "job-1");
    assert!(
        stops[0].1.contains("drain timeout (300ms) passed"),
        "{}",
        stops[0].1
    );
    let exits = api.exits();
    assert_eq!(exits.len(), 2);
    let (job, report) = &exits[1];
    assert_eq!(job.as_str(), "job-1");
    assert!(report.handed_back);
    assert_eq!(report.exit_code, Some(143));
    assert!(report.reason.as_deref().unwrap().contains("drain timeout"));
}

#[tokio::test]
async fn a_second_signal_hands_back_at_once_even_a_runner_that_will_not_die() {
    let (api, executor) = fakes();
    *executor.ignore_stops.lock().unwrap() = true;
    api.offer(claim("job-1", 10));
    let agent = start(&api, &executor, settings(1, Duration::from_secs(3600)));
    eventually("started", SOON, || executor.started().len() == 1).await;
    agent.phase.send(Phase::Drain).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(executor.stops().is_empty());
    // The runner ignores its stop: it is reported after the kill grace (300 ms here).
    agent.finish(Phase::HandBack, SOON).await;
    let exits = api.exits();
    assert_eq!(exits.len(), 1);
    assert!(exits[0].1.handed_back);
    assert_eq!(exits[0].1.exit_code, None);
    assert!(exits[0]
        .1
        .reason
        .as_deref()
        .unwrap()
        .contains("told to stop at once"));
}
