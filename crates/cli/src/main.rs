//! `sortie`: the command line. `sortie dev` runs the whole control plane locally.

mod dev;

use clap::{Parser, Subcommand};

/// Sortie: Terraform and OpenTofu jobs on AWS with no always-on server.
#[derive(Parser)]
#[command(name = "sortie", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the API, dispatch, task-events and the sweeper in one process against a local AWS.
    Dev(dev::DevArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sortie_telemetry::init();
    match Cli::parse().command {
        Command::Dev(args) => dev::run(args).await,
    }
}
