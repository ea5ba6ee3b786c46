//! `sortie-agent`: flags, logs, the runtime and signals; everything else is the library's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use sortie_agent::credential::Secret;
use sortie_agent::{AgentOptions, Phase};
use tokio::signal::unix::{signal, SignalKind};

/// Pulls an agent pool's jobs from Sortie over HTTPS and runs `sortie-pilot` for each.
///
/// SIGTERM or SIGINT drains: no more claims, running jobs finish (up to --drain-timeout),
/// then what remains is handed back. A second signal hands them back at once.
#[derive(Debug, Parser)]
#[command(name = "sortie-agent", version)]
struct Cli {
    /// Sortie's API URL.
    #[arg(long, env = "SORTIE_API_URL")]
    api_url: String,
    /// The agent pool's id (apool-…).
    #[arg(long, env = "SORTIE_AGENT_POOL")]
    pool: String,
    /// The pool token (prefer --token-file: a flag is visible to other processes).
    #[arg(long, env = "SORTIE_AGENT_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the pool token or an OIDC token, re-read on every call.
    #[arg(long, env = "SORTIE_AGENT_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// A shell command that prints the token (re-run after 60 s or a refusal).
    #[arg(long, env = "SORTIE_AGENT_TOKEN_COMMAND")]
    token_command: Option<String>,
    /// The agent's id [default: <host name>-<6 random hex digits>].
    #[arg(long, env = "SORTIE_AGENT_NAME")]
    name: Option<String>,
    /// How many jobs this agent runs at once.
    #[arg(long, env = "SORTIE_AGENT_MAX_JOBS", default_value_t = 1)]
    max_jobs: u32,
    /// The sortie-pilot binary [default: next to sortie-agent, else on PATH].
    #[arg(long, env = "SORTIE_RUNNER_BINARY")]
    runner_binary: Option<PathBuf>,
    /// Where per-job logs (<job id>.log) go [default: a directory under the temp dir].
    #[arg(long, env = "SORTIE_AGENT_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Run each job as a Kubernetes Job in the cluster this agent runs in.
    #[arg(long, env = "SORTIE_AGENT_KUBERNETES", value_parser = clap::builder::BoolishValueParser::new())]
    kubernetes: bool,
    /// How long a drain waits for running jobs, in seconds.
    #[arg(long, env = "SORTIE_AGENT_DRAIN_TIMEOUT", default_value_t = sortie_agent::config::DEFAULT_DRAIN_TIMEOUT_SECONDS)]
    drain_timeout: u64,
    /// How long each claim waits for a job, in seconds (1 to 20).
    #[arg(long, env = "SORTIE_AGENT_WAIT_SECONDS", default_value_t = sortie_core::protocol::agent::MAX_CLAIM_WAIT_SECONDS)]
    wait_seconds: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The runners inherit the agent's environment: never the pool token.
    std::env::remove_var("SORTIE_AGENT_TOKEN");
    sortie_telemetry::init();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "sortie-agent failed");
            eprintln!("sortie-agent: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<()> {
    let config = AgentOptions {
        api_url: cli.api_url,
        pool: cli.pool,
        token: cli.token.map(Secret::new),
        token_file: cli.token_file,
        token_command: cli.token_command,
        name: cli.name,
        max_jobs: cli.max_jobs,
        wait_seconds: cli.wait_seconds,
        drain_timeout_seconds: cli.drain_timeout,
        runner_binary: cli.runner_binary,
        work_dir: cli.work_dir,
        kubernetes: cli.kubernetes,
    }
    .resolve()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    runtime.block_on(async {
        let (phase, watched) = tokio::sync::watch::channel(Phase::Run);
        let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        tokio::spawn(async move {
            for next in [Phase::Drain, Phase::HandBack] {
                let name = tokio::select! {
                    _ = terminate.recv() => "SIGTERM",
                    _ = interrupt.recv() => "SIGINT",
                };
                tracing::info!(signal = name, phase = ?next, "signal received");
                let _ = phase.send(next);
            }
        });
        sortie_agent::run_agent(config, watched).await?;
        tracing::info!("sortie-agent stopped");
        Ok(())
    })
}
