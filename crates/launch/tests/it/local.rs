//! The local launcher: a child process group per job, stopped from outside, reported as
//! ECS-shaped STOPPED events that map to the job's outcome.

use std::time::Duration;

use chrono::Utc;
use sortie_core::{
    task_outcome, EnvPath, Job, JobRequest, JobState, RunnerId, RunnerSpec, TaskStop,
};
use sortie_launch::{LaunchSpec, Launcher, LocalLauncher, TaskStatus};

fn job(runner_binary: &std::path::Path) -> Job {
    let mut j = Job::new(
        "01localtest000000000000000",
        EnvPath::parse("acme/dev").unwrap(),
        RunnerId::parse("acme/local").unwrap(),
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".into(),
        Utc::now(),
    );
    j.runner_spec = Some(
        RunnerSpec::parse(&format!(
            "runner_configuration: {{type: local, runner_binary: {}, timeout_seconds: 60}}\nstate_storage_configuration: {{type: local, directory: /tmp/x}}",
            runner_binary.display()
        ))
        .unwrap(),
    );
    j
}

fn script(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .unwrap();
    path
}

async fn next_event(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("an event in time")
        .expect("the channel is open")
}

#[tokio::test]
async fn a_timeout_stop_kills_the_process_group_and_the_stopped_event_maps_to_timed_out() {
    let dir = std::env::temp_dir().join(format!("sortie-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let slow = script(&dir, "slow.sh", "sleep 300 &\nwait");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let launcher = LocalLauncher::new(slow.clone(), dir.join("logs"), tx);
    let j = job(&slow);
    let task = launcher
        .launch(&LaunchSpec {
            job: &j,
            token: "secret-token",
            api_url: "http://127.0.0.1:1",
            attempt: 1,
        })
        .await
        .unwrap();
    assert_eq!(next_event(&mut rx).await["lastStatus"], "RUNNING");
    assert_eq!(
        launcher.describe(&j, &task).await.unwrap(),
        TaskStatus::Running
    );
    assert_eq!(
        launcher.find(&j).await.unwrap().as_deref(),
        Some(task.as_str()),
        "found by job, like startedBy"
    );
    launcher
        .stop(&j, &task, "sortie: timed out after 60s")
        .await
        .unwrap();
    let stopped = next_event(&mut rx).await;
    assert_eq!(stopped["lastStatus"], "STOPPED");
    assert_eq!(stopped["startedBy"], format!("sortie/{}", j.id));
    assert_eq!(stopped["stoppedReason"], "sortie: timed out after 60s");
    let detail: sortie_lifecycle_shape::Detail = serde_json::from_value(stopped).unwrap();
    let stop = TaskStop {
        stop_code: detail.stop_code,
        stopped_reason: detail.stopped_reason,
        exit_code: detail.containers[0].exit_code,
        container_reason: None,
    };
    assert_eq!(
        task_outcome(j.request.operation, &stop).state,
        JobState::TimedOut
    );
    assert!(matches!(
        launcher.describe(&j, &task).await.unwrap(),
        TaskStatus::Stopped(_)
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_failing_runner_reports_its_exit_code_and_last_line() {
    let dir = std::env::temp_dir().join(format!("sortie-local-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let failing = script(&dir, "fail.sh", "echo 'Error: something broke'\necho 'sortie-pilot: terraform apply failed with exit code 1: Error: something broke'\nexit 1");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let launcher = LocalLauncher::new(failing.clone(), dir.join("logs"), tx);
    let j = job(&failing);
    launcher
        .launch(&LaunchSpec {
            job: &j,
            token: "t",
            api_url: "http://127.0.0.1:1",
            attempt: 1,
        })
        .await
        .unwrap();
    next_event(&mut rx).await;
    let stopped = next_event(&mut rx).await;
    assert_eq!(stopped["containers"][0]["exitCode"], 1);
    assert_eq!(
        stopped["containers"][0]["reason"],
        "terraform apply failed with exit code 1: Error: something broke"
    );
    assert_eq!(stopped["stopCode"], "EssentialContainerExited");
    std::fs::remove_dir_all(&dir).ok();
}

/// The fields of the event detail this test reads (the lifecycle crate owns the full type).
mod sortie_lifecycle_shape {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Detail {
        pub stop_code: Option<String>,
        pub stopped_reason: Option<String>,
        pub containers: Vec<Container>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Container {
        pub exit_code: Option<i32>,
    }
}

/// Secret references reach the child as values under their names (as ECS `secrets`
/// would), resolved through `SecretValues` (here the in-memory fake; `sortie dev`'s
/// moto test uses the real Secrets Manager); without a resolver the launch fails at once.
#[tokio::test]
async fn secret_references_reach_the_child_as_values_and_never_as_arns() {
    let dir = std::env::temp_dir().join(format!("sortie-local-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("env.txt");
    let dump = script(&dir, "dump.sh", &format!("env > {}", out.display()));
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf";
    let git = "arn:aws:ssm:us-east-1:123456789012:parameter/acme/git-token";
    let mut j = job(&dump);
    j.request = JobRequest::parse(&format!(
        r#"{{"operation":"plan","source":{{"type":"git","url":"https://git.example.com/a.git","credentials_secret":"{git}"}},"secret_refs":{{"TF_VAR_db":"{arn}"}}}}"#
    ))
    .unwrap();
    let spec = LaunchSpec {
        job: &j,
        token: "t",
        api_url: "http://127.0.0.1:1",
        attempt: 1,
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let bare = LocalLauncher::new(dump.clone(), dir.join("logs"), tx.clone());
    assert!(!bare.launch(&spec).await.unwrap_err().is_retryable());

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let values = sortie_launch::StaticSecretValues(
        [(arn, "db-value-1"), (git, "user:git-value-2")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let launcher = LocalLauncher::new(dump.clone(), dir.join("logs"), tx)
        .with_secrets(std::sync::Arc::new(values));
    launcher.launch(&spec).await.unwrap();
    assert_eq!(next_event(&mut rx).await["lastStatus"], "RUNNING");
    assert_eq!(next_event(&mut rx).await["lastStatus"], "STOPPED");
    let env = std::fs::read_to_string(&out).unwrap();
    assert!(env.contains("TF_VAR_db=db-value-1"), "{env}");
    assert!(
        env.contains("SORTIE_GIT_CREDENTIALS=user:git-value-2"),
        "{env}"
    );
    assert!(!env.contains(arn) && !env.contains(git), "no ARN: {env}");
    assert!(!env.contains("SORTIE_SECRET_REFS"), "{env}");
    for line in [
        "SORTIE_GROUP=acme",
        "SORTIE_ENVIRONMENT=acme/dev",
        "SORTIE_OPERATION=plan",
        "SORTIE_REQUESTED_BY=alice",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in {env}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
