//! Local mode: the runner as a child process group through `LocalLauncher`, with scripts
//! standing in for `sortie-pilot`; and one whole agent (fake pool API, real executor).

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sortie_agent::agent::Backoff;
use sortie_agent::executor::{Executor, LocalExecutor, RunExit};
use sortie_agent::{Agent, AgentError, AgentSettings, Phase};
use support::{claim, claim_of, eventually, job, FakeApi, API_URL, JOB_TOKEN};

fn work_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sortie-agent-local-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("fake-runner");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .unwrap();
    path
}

async fn exit_of(started: sortie_agent::executor::Started) -> RunExit {
    tokio::time::timeout(Duration::from_secs(20), started.exited)
        .await
        .expect("the runner ends")
        .expect("its exit is reported")
}

#[tokio::test]
async fn the_runner_gets_the_job_and_its_exit_and_last_line_are_reported() {
    let dir = work_dir("exit");
    let seen = dir.join("seen");
    let runner = script(
        &dir,
        &format!(
            "printf '%s|%s|%s|%s|%s\\n' \"$SORTIE_JOB_ID\" \"$SORTIE_API_URL\" \"$SORTIE_JOB_TOKEN\" \"$TF_VAR_region\" \"$PATH\" > {}\necho 'terraform output'\necho 'sortie-pilot: terraform apply failed'\nexit 3",
            seen.display()
        ),
    );
    let executor = LocalExecutor::new(runner, dir.join("work"));
    let c = claim_of(
        job("job-local-1", "  env: { TF_VAR_region: eu-west-1 }\n"),
        10,
    );
    let started = executor.start(&c).await.unwrap();
    assert!(started.handle.task.starts_with("arn:sortie:local:task/"));
    let exit = exit_of(started).await;
    assert_eq!(
        exit,
        RunExit {
            exit_code: Some(3),
            reason: Some("terraform apply failed".into())
        }
    );
    let seen = std::fs::read_to_string(seen).unwrap();
    let fields: Vec<&str> = seen.trim().split('|').collect();
    assert_eq!(
        fields[..4],
        ["job-local-1", API_URL, JOB_TOKEN, "eu-west-1"]
    );
    assert!(!fields[4].is_empty(), "the agent's PATH is inherited");
    let log = std::fs::read_to_string(dir.join("work/job-local-1.log")).unwrap();
    assert!(log.contains("terraform output"), "{log}");
}

#[tokio::test]
async fn a_stop_signals_the_process_group() {
    let dir = work_dir("stop");
    let runner = script(&dir, "sleep 60 & wait");
    let executor = LocalExecutor::new(runner, dir.join("work"));
    let started = executor.start(&claim("job-local-2", 10)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let handle = started.handle.clone();
    executor
        .stop(&handle, "sortie: canceled by alice")
        .await
        .unwrap();
    let begun = std::time::Instant::now();
    let exit = exit_of(started).await;
    assert!(
        begun.elapsed() < Duration::from_secs(8),
        "SIGTERM ends it before the SIGKILL"
    );
    assert_eq!(exit.exit_code, Some(143), "{exit:?}");
    executor.finished(&handle).await;
    assert!(dir.join("work/job-local-2.1.done").exists());
}

#[tokio::test]
async fn a_missing_runner_binary_fails_the_start_with_the_reason() {
    let dir = work_dir("missing");
    let executor = LocalExecutor::new(dir.join("no-such-runner"), dir.join("work"));
    let e = executor.start(&claim("job-local-3", 10)).await.unwrap_err();
    assert!(matches!(e, AgentError::Launch(_)));
    assert!(e.to_string().contains("was not found"), "{e}");
}

#[tokio::test]
async fn a_whole_agent_runs_a_claimed_job_and_reports_its_exit() {
    let dir = work_dir("agent");
    let runner = script(&dir, "echo 'sortie-pilot: no such workspace'\nexit 1");
    let api = Arc::new(FakeApi::default());
    api.offer(claim("job-local-4", 10));
    let executor = Arc::new(LocalExecutor::new(runner, dir.join("work")));
    let mut settings = AgentSettings::new("agent-local", 1, 20, Duration::from_secs(60));
    settings.backoff = Backoff {
        first: Duration::from_millis(20),
        max: Duration::from_millis(80),
    };
    settings.min_claim_interval = Duration::from_millis(10);
    let (phase, watched) = tokio::sync::watch::channel(Phase::Run);
    let agent = Agent::new(settings, api.clone(), executor);
    let task = tokio::spawn(async move { agent.run(watched).await });
    eventually("reported", Duration::from_secs(20), || {
        api.exits().len() == 1
    })
    .await;
    let (job, report) = &api.exits()[0];
    assert_eq!(job.as_str(), "job-local-4");
    assert_eq!(report.exit_code, Some(1));
    assert_eq!(report.reason.as_deref(), Some("no such workspace"));
    assert_eq!(report.agent, "agent-local");
    phase.send(Phase::Drain).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
