//! `sortie-agent`: runs an agent pool's jobs where Sortie cannot reach.
//!
//! The agent dials out over HTTPS to Sortie's API, claims the pool's jobs (a long poll),
//! runs `sortie-pilot` for each exactly as a Fargate task would (the pilot reads
//! `SORTIE_API_URL`, `SORTIE_JOB_ID` and `SORTIE_JOB_TOKEN` from its environment),
//! heartbeats each job while it runs, stops it when Sortie says so, and reports its exit.
//!
//! - [`config`]: the options and their checks;
//! - [`credential`]: the pool token or OIDC token, from a flag, a file or a command;
//! - [`api`]: the pull protocol over HTTPS ([`api::PoolApi`], [`api::HttpPoolApi`]);
//! - [`executor`]: how a job runs ([`executor::LocalExecutor`]: a child process group;
//!   [`executor::KubernetesExecutor`]: a Kubernetes Job in the agent's cluster);
//! - [`agent`]: the claim, heartbeat and exit loop, and the drain.
//!
//! [`run_agent`] wires them from an [`AgentConfig`]; the binary adds flags, logs and signals.

pub mod agent;
pub mod api;
pub mod config;
pub mod credential;
mod error;
pub mod executor;

use std::sync::Arc;

pub use agent::{Agent, AgentSettings, Phase};
pub use config::{AgentConfig, AgentOptions, Mode};
pub use error::AgentError;

use api::HttpPoolApi;
use credential::Credential;
use executor::{Executor, InCluster, KubernetesExecutor, LocalExecutor};

/// Runs the agent `config` describes until `phase` leaves [`Phase::Run`] and its jobs are
/// finished or handed back.
pub async fn run_agent(
    config: AgentConfig,
    phase: tokio::sync::watch::Receiver<Phase>,
) -> Result<(), AgentError> {
    let credential = Arc::new(Credential::new(config.credential.clone()));
    let api = Arc::new(HttpPoolApi::new(&config.api_url, &config.pool, credential)?);
    let executor: Arc<dyn Executor> = match &config.mode {
        Mode::Local {
            runner_binary,
            work_dir,
        } => {
            std::fs::create_dir_all(work_dir).map_err(|e| {
                AgentError::Config(format!(
                    "could not create the work directory {}: {e}",
                    work_dir.display()
                ))
            })?;
            if config::find_executable(runner_binary).is_none() {
                tracing::warn!(
                    runner_binary = %runner_binary.display(),
                    "the pilot binary was not found: every job will fail until it is there (--runner-binary)"
                );
            }
            tracing::info!(
                mode = "local",
                runner_binary = %runner_binary.display(),
                work_dir = %work_dir.display(),
                "jobs run as local process groups"
            );
            Arc::new(LocalExecutor::new(runner_binary.clone(), work_dir.clone()))
        }
        Mode::Kubernetes => {
            let access = InCluster::from_env()?;
            tracing::info!(mode = "kubernetes", endpoint = %access.endpoint, "jobs run as Kubernetes Jobs");
            Arc::new(KubernetesExecutor::new(&access)?)
        }
    };
    tracing::info!(
        agent = %config.name,
        pool = %config.pool,
        api_url = %config.api_url,
        credential = %config.credential.describe(),
        max_jobs = config.max_jobs,
        "sortie-agent started"
    );
    let settings = AgentSettings::new(
        &config.name,
        config.max_jobs,
        config.wait_seconds,
        config.drain_timeout,
    );
    Agent::new(settings, api, executor).run(phase).await
}
