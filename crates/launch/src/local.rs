//! The `local` launcher: `sortie-pilot` as a child process of this host, for
//! `sortie dev`, the demo and tests (like Tharsis's `local` dispatcher).
//!
//! The child runs in its own process group, so a cancel or a timeout stops the
//! runner and everything it started (terraform, providers). Its exit is reported
//! as an ECS-shaped "Task State Change" STOPPED event, so completion takes the
//! same path as on Fargate.
//!
//! **Orphans survive a restart of `sortie dev`.** Like ECS's `startedBy`, every launch
//! leaves a record in the work directory (`<job id>.<attempt>.task.json`), and the
//! runner runs under a small `sh` supervisor that writes the runner's exit code to
//! `<job id>.<attempt>.exit` whoever its parent is by then. After a restart,
//! [`LocalLauncher::adopt_orphans`] reads the records: `find` and `describe` know the
//! tasks again, a runner still running is watched until it exits, and an exit that
//! happened while `sortie dev` was down, or was still queued in memory at the kill,
//! is reported again from its recorded exit code. A record is settled
//! ([`LocalLauncher::acknowledge`]) once its STOPPED event was handled.
//!
//! A job's secret references (`secret_refs`, a git source's `credentials_secret`) are
//! resolved here with Secrets Manager or SSM ([`SecretValues`]) and put into the child's
//! environment by name, as ECS injects a task definition's `secrets`: the runner sees the
//! same variables in both modes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use sortie_core::{Job, RunnerConfiguration, TaskRef, TaskStop};
use tokio::sync::{mpsc, Mutex};

use crate::secrets::SecretValues;
use crate::{started_by, LaunchError, LaunchSpec, Launcher, TaskStatus};

/// The container name local tasks report, as the runner container of a task definition would.
pub const LOCAL_CONTAINER: &str = "runner";

#[derive(Debug, Clone)]
struct LocalTask {
    job_id: String,
    pid: u32,
    /// `<job id>.<attempt>`: the name of the launch's files in the work directory.
    stem: String,
    stop_reason: Option<String>,
    stopped: Option<TaskStop>,
}

/// What a launch leaves in the work directory, read back after a restart.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LaunchRecord {
    task_arn: String,
    job_id: String,
    pid: u32,
}

/// Runs the runner (`$0`) as a child, forwards SIGTERM to it, and writes its exit code to
/// `$SORTIE_EXIT_FILE` (atomically), so the code survives the death of `sortie dev`.
const SUPERVISOR: &str = r#""$0" & child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM
while :; do
  wait "$child"; code=$?
  kill -0 "$child" 2>/dev/null || break
done
printf '%s\n' "$code" > "$SORTIE_EXIT_FILE.tmp" && mv "$SORTIE_EXIT_FILE.tmp" "$SORTIE_EXIT_FILE"
exit "$code""#;

fn pid_alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Launches `sortie-pilot` processes and reports their state changes on a channel, as the
/// `detail` JSON of ECS "Task State Change" events.
#[derive(Clone)]
pub struct LocalLauncher {
    runner_binary: PathBuf,
    logs_dir: PathBuf,
    events: mpsc::UnboundedSender<serde_json::Value>,
    tasks: Arc<Mutex<HashMap<String, LocalTask>>>,
    secrets: Option<Arc<dyn SecretValues>>,
    /// Chaos for the soak (`sortie dev`'s `SORTIE_DEV_CHAOS_THROTTLE_PERCENT`): this share
    /// of launches, in percent, answers as a throttled ECS RunTask would.
    throttle_percent: u64,
    launches: Arc<std::sync::atomic::AtomicU64>,
}

impl LocalLauncher {
    /// A launcher running `runner_binary` (unless a runner names its own), writing each
    /// child's stdout and stderr to `<logs_dir>/<job id>.log`, and sending task events to `events`.
    pub fn new(
        runner_binary: PathBuf,
        logs_dir: PathBuf,
        events: mpsc::UnboundedSender<serde_json::Value>,
    ) -> Self {
        Self {
            runner_binary,
            logs_dir,
            events,
            tasks: Arc::new(Mutex::new(HashMap::new())),
            secrets: None,
            throttle_percent: 0,
            launches: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Answers `percent` of launches (spread evenly, not in a run) with a retryable
    /// throttling error, as ECS RunTask answers `ThrottlingException`: chaos for the soak.
    pub fn with_throttle_percent(mut self, percent: u8) -> Self {
        self.throttle_percent = u64::from(percent.min(100));
        self
    }

    /// Whether this launch is one the chaos throttle refuses.
    fn throttled(&self) -> bool {
        if self.throttle_percent == 0 {
            return false;
        }
        let n = self
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A multiplicative hash of the call number spreads the refusals evenly.
        n.wrapping_mul(2_654_435_761) % 100 < self.throttle_percent
    }

    fn path(&self, stem: &str, suffix: &str) -> PathBuf {
        self.logs_dir.join(format!("{stem}.{suffix}"))
    }

    /// The runner's recorded exit code, once its supervisor wrote it.
    fn recorded_exit(&self, stem: &str) -> Option<i32> {
        std::fs::read_to_string(self.path(stem, "exit"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    }

    /// How a runner that exited on its own ended: its recorded code, else the wait status.
    fn exit_stop(&self, job_id: &str, code: Option<i32>) -> TaskStop {
        let log = self.logs_dir.join(format!("{job_id}.log"));
        TaskStop {
            stop_code: Some("EssentialContainerExited".into()),
            stopped_reason: Some("Essential container in task exited".into()),
            exit_code: code.or(Some(137)),
            // The pilot ends a failure with one `sortie-pilot: <reason>` line: the container's reason.
            container_reason: if code == Some(0) {
                None
            } else {
                last_pilot_line(&log).or_else(|| {
                    code.is_none()
                        .then(|| "the runner's exit code was not recorded".to_string())
                })
            },
        }
    }

    /// Reads the launch records left in the work directory by an earlier `sortie dev`, and
    /// takes their tasks back: known to `find` and `describe`, watched until they exit, and
    /// reported (STOPPED) if they exited while nobody was listening. Returns how many
    /// launches were adopted.
    pub async fn adopt_orphans(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.logs_dir) else {
            return 0;
        };
        let mut adopted = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".task.json") else {
                continue;
            };
            if self.path(stem, "done").exists() {
                continue;
            }
            let Some(record) = std::fs::read(entry.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<LaunchRecord>(&b).ok())
            else {
                continue;
            };
            let mut tasks = self.tasks.lock().await;
            if tasks.contains_key(&record.task_arn) {
                continue;
            }
            tasks.insert(
                record.task_arn.clone(),
                LocalTask {
                    job_id: record.job_id.clone(),
                    pid: record.pid,
                    stem: stem.to_string(),
                    stop_reason: None,
                    stopped: None,
                },
            );
            drop(tasks);
            adopted += 1;
            let me = self.clone();
            let stem = stem.to_string();
            tokio::spawn(async move {
                // Watch the orphan: its supervisor writes the exit code when the runner ends.
                let code = loop {
                    if let Some(code) = me.recorded_exit(&stem) {
                        break Some(code);
                    }
                    if !pid_alive(record.pid) {
                        break me.recorded_exit(&stem);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                };
                let stop = me.exit_stop(&record.job_id, code);
                if let Some(t) = me.tasks.lock().await.get_mut(&record.task_arn) {
                    t.stopped = Some(stop.clone());
                }
                let _ = me.events.send(Self::event(
                    &record.task_arn,
                    &record.job_id,
                    "STOPPED",
                    Some(&stop),
                ));
            });
        }
        adopted
    }

    /// Settles a launch whose STOPPED event was handled: it is not reported again after a
    /// restart.
    pub async fn acknowledge(&self, task_arn: &str) {
        let stem = self
            .tasks
            .lock()
            .await
            .get(task_arn)
            .map(|t| t.stem.clone());
        if let Some(stem) = stem {
            let _ = std::fs::write(self.path(&stem, "done"), b"");
        }
    }

    /// Resolves jobs' secret references with `secrets` and puts the values into the
    /// runner's environment, as ECS does with a task definition's `secrets`.
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretValues>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// The job's secrets by environment variable name, resolved: its `secret_refs` and a
    /// git source's `credentials_secret` (as `SORTIE_GIT_CREDENTIALS`).
    async fn secret_env(&self, job: &Job) -> Result<Vec<(String, String)>, LaunchError> {
        let mut wanted: Vec<(String, String)> = job
            .request
            .secret_refs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(arn) = crate::ecs::git_credentials_secret(job) {
            wanted.push((crate::ecs::GIT_CREDENTIALS.to_string(), arn.to_string()));
        }
        if wanted.is_empty() {
            return Ok(vec![]);
        }
        let Some(secrets) = &self.secrets else {
            return Err(LaunchError::Fatal(
                "job has secret references but this local launcher resolves none".into(),
            ));
        };
        let mut out = Vec::with_capacity(wanted.len());
        for (name, arn) in wanted {
            let value = secrets.value(&arn).await.map_err(|e| {
                LaunchError::Fatal(format!("could not resolve the secret {name} ({arn}): {e}"))
            })?;
            out.push((name, value));
        }
        Ok(out)
    }

    fn event(
        task_arn: &str,
        job_id: &str,
        status: &str,
        stop: Option<&TaskStop>,
    ) -> serde_json::Value {
        let mut detail = json!({
            "taskArn": task_arn,
            "clusterArn": "arn:sortie:local:cluster/local",
            "lastStatus": status,
            "desiredStatus": if status == "STOPPED" { "STOPPED" } else { "RUNNING" },
            "startedBy": started_by(job_id),
            "launchType": "LOCAL",
            "containers": [{"name": LOCAL_CONTAINER, "lastStatus": status}],
        });
        if let Some(stop) = stop {
            detail["stopCode"] = json!(stop.stop_code);
            detail["stoppedReason"] = json!(stop.stopped_reason);
            detail["containers"][0]["exitCode"] = json!(stop.exit_code);
            detail["containers"][0]["reason"] = json!(stop.container_reason);
        }
        detail
    }
}

/// Removes from `command`'s environment each of `host`'s variable names that a job does not
/// inherit from the host (`sortie_core::container_env::withheld_from_host`). Call it before
/// setting the job's own variables: a later `env` of the same name wins.
fn withhold_host_settings(
    command: &mut tokio::process::Command,
    host: impl IntoIterator<Item = std::ffi::OsString>,
) {
    for name in host {
        if name
            .to_str()
            .is_some_and(sortie_core::container_env::withheld_from_host)
        {
            command.env_remove(&name);
        }
    }
}

/// Sends `signal` to the whole process group of `pid` (the runner and its children).
fn signal_group(pid: u32, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[async_trait]
impl Launcher for LocalLauncher {
    async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
        if self.throttled() {
            return Err(LaunchError::Retryable(
                "ThrottlingException: Rate exceeded (chaos: a throttled launch)".into(),
            ));
        }
        let job = spec.job;
        let runner = match job.runner_spec.as_ref().map(|s| &s.runner_configuration) {
            Some(RunnerConfiguration::Local(c)) => c,
            _ => {
                return Err(LaunchError::Fatal(
                    "the local launcher runs only `local` runners".into(),
                ))
            }
        };
        let binary = runner
            .runner_binary
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| self.runner_binary.clone());
        std::fs::create_dir_all(&self.logs_dir).map_err(|e| {
            LaunchError::Fatal(format!("cannot create {}: {e}", self.logs_dir.display()))
        })?;
        let log_path = self.logs_dir.join(format!("{}.log", job.id));
        let log = std::fs::File::create(&log_path).map_err(|e| {
            LaunchError::Fatal(format!("cannot create {}: {e}", log_path.display()))
        })?;
        let log_err = log
            .try_clone()
            .map_err(|e| LaunchError::Fatal(e.to_string()))?;
        let stem = format!("{}.{}", job.id, spec.attempt);
        let _ = std::fs::remove_file(self.path(&stem, "exit"));
        let secret_env = self.secret_env(job).await?;
        let mut command = tokio::process::Command::new("sh");
        // The host's Terraform settings stay with the host (`withheld_from_host`); the
        // runner's declared variables and the job's secrets, set below, may set them.
        withhold_host_settings(&mut command, std::env::vars_os().map(|(name, _)| name));
        command
            .arg("-c")
            .arg(SUPERVISOR)
            .arg(&binary)
            .env("SORTIE_EXIT_FILE", self.path(&stem, "exit"))
            .env("SORTIE_JOB_ID", job.id.as_str())
            .env("SORTIE_JOB_TOKEN", spec.token)
            .env("SORTIE_API_URL", spec.api_url)
            .envs(&runner.env)
            .envs(secret_env)
            .envs(sortie_core::container_env::builtin(job))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .process_group(0)
            .kill_on_drop(false);
        let mut child = command
            .spawn()
            .map_err(|e| LaunchError::Fatal(format!("cannot start {}: {e}", binary.display())))?;
        let pid = child.id().unwrap_or_default();
        let task_arn = format!("arn:sortie:local:task/local/{}-{pid}", job.id);
        let record = LaunchRecord {
            task_arn: task_arn.clone(),
            job_id: job.id.to_string(),
            pid,
        };
        std::fs::write(
            self.path(&stem, "task.json"),
            serde_json::to_vec(&record).unwrap_or_default(),
        )
        .map_err(|e| LaunchError::Fatal(format!("cannot record the launch of {}: {e}", job.id)))?;
        self.tasks.lock().await.insert(
            task_arn.clone(),
            LocalTask {
                job_id: job.id.to_string(),
                pid,
                stem: stem.clone(),
                stop_reason: None,
                stopped: None,
            },
        );
        let _ = self
            .events
            .send(Self::event(&task_arn, &job.id, "RUNNING", None));
        let (me, arn, job_id) = (self.clone(), task_arn.clone(), job.id.clone());
        tokio::spawn(async move {
            let status = child.wait().await;
            let mut tasks = me.tasks.lock().await;
            let Some(task) = tasks.get_mut(&arn) else {
                return;
            };
            let recorded = me.recorded_exit(&stem);
            let stop = match (&task.stop_reason, status) {
                (Some(reason), s) => TaskStop {
                    stop_code: Some("UserInitiated".into()),
                    stopped_reason: Some(reason.clone()),
                    exit_code: recorded.or(s.ok().and_then(|s| s.code())).or(Some(143)),
                    container_reason: None,
                },
                (None, Ok(s)) => me.exit_stop(&job_id, recorded.or(s.code())),
                (None, Err(e)) => TaskStop {
                    stop_code: Some("TaskFailedToStart".into()),
                    stopped_reason: Some(e.to_string()),
                    exit_code: None,
                    container_reason: None,
                },
            };
            task.stopped = Some(stop.clone());
            let _ = me
                .events
                .send(Self::event(&arn, &job_id, "STOPPED", Some(&stop)));
        });
        Ok(TaskRef::new(task_arn))
    }

    async fn stop(&self, _job: &Job, task: &TaskRef, reason: &str) -> Result<(), LaunchError> {
        let pid = {
            let mut tasks = self.tasks.lock().await;
            let Some(t) = tasks.get_mut(task.as_str()) else {
                return Err(LaunchError::Fatal(format!("no local task {task}")));
            };
            if t.stopped.is_some() {
                return Ok(());
            }
            t.stop_reason = Some(reason.to_string());
            t.pid
        };
        signal_group(pid, "TERM");
        let tasks = self.tasks.clone();
        let task = task.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            if tasks
                .lock()
                .await
                .get(&task)
                .is_some_and(|t| t.stopped.is_none())
            {
                signal_group(pid, "KILL");
            }
        });
        Ok(())
    }

    async fn describe(&self, _job: &Job, task: &TaskRef) -> Result<TaskStatus, LaunchError> {
        Ok(match self.tasks.lock().await.get(task.as_str()) {
            None => TaskStatus::Missing,
            Some(t) => match &t.stopped {
                Some(stop) => TaskStatus::Stopped(stop.clone()),
                None => TaskStatus::Running,
            },
        })
    }

    async fn find(&self, job: &Job) -> Result<Option<TaskRef>, LaunchError> {
        Ok(self
            .tasks
            .lock()
            .await
            .iter()
            .find(|(_, t)| t.job_id == job.id)
            .map(|(arn, _)| TaskRef::new(arn.clone())))
    }
}

/// The last `sortie-pilot: …` line of a pilot's output, without the prefix.
fn last_pilot_line(log: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("sortie-pilot: "))
        .map(|l| l.chars().take(1000).collect())
}

#[cfg(test)]
mod env_tests {
    use super::*;

    /// What `command` would hand its child for `name`: `Some(None)` removed, `Some(value)`
    /// set, `None` inherited.
    fn op(command: &tokio::process::Command, name: &str) -> Option<Option<String>> {
        command
            .as_std()
            .get_envs()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn the_hosts_terraform_settings_are_withheld_and_the_runners_declared_ones_win() {
        let mut command = tokio::process::Command::new("sh");
        let host = [
            "TF_CLI_CONFIG_FILE",
            "TF_VAR_region",
            "TF_LOG",
            "PATH",
            "HOME",
        ];
        withhold_host_settings(&mut command, host.map(std::ffi::OsString::from));
        command.env("TF_LOG", "INFO");
        assert_eq!(op(&command, "TF_CLI_CONFIG_FILE"), Some(None));
        assert_eq!(op(&command, "TF_VAR_region"), Some(None));
        assert_eq!(
            op(&command, "TF_LOG"),
            Some(Some("INFO".into())),
            "declared wins"
        );
        assert_eq!(op(&command, "PATH"), None, "inherited");
        assert_eq!(op(&command, "HOME"), None, "inherited");
    }
}

#[cfg(test)]
mod throttle_tests {
    use super::*;

    fn launcher(percent: u8) -> LocalLauncher {
        let (tx, _rx) = mpsc::unbounded_channel();
        LocalLauncher::new("/bin/true".into(), std::env::temp_dir(), tx)
            .with_throttle_percent(percent)
    }

    #[test]
    fn the_chaos_throttle_refuses_its_share_of_every_hundred_launches_spread_out() {
        for percent in [0u8, 1, 30, 99, 100] {
            let l = launcher(percent);
            let refused: Vec<bool> = (0..1000).map(|_| l.throttled()).collect();
            for hundred in refused.chunks(100) {
                let n = hundred.iter().filter(|r| **r).count();
                assert_eq!(n, usize::from(percent), "{percent}% of each hundred");
            }
            if percent == 30 {
                let longest = refused.split(|r| !*r).map(<[bool]>::len).max().unwrap_or(0);
                assert!(longest <= 2, "refusals are spread, not in a run: {longest}");
            }
        }
        assert!(!launcher(0).throttled(), "off by default");
    }
}
