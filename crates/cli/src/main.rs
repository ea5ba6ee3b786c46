//! `sortie`: the command line. Resource verbs over the public HTTP API (kubectl- and
//! canyon-style), `run ... --wait` and `job logs -f` to follow a job live, named contexts,
//! and `sortie dev`, which runs the whole control plane locally.

mod args;
mod client;
mod config;
mod dev;
mod exit;
mod follow;
mod output;
mod resources;

use std::process::ExitCode;

use args::{Cli, Command, Global};
use clap::{CommandFactory, Parser};
use exit::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sortie: could not start: {e}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Command::Dev(args) => {
            sortie_telemetry::init();
            match runtime.block_on(dev::run(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sortie dev: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "sortie", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        command => match runtime.block_on(execute(&cli.global, command)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                output::print_error(&e);
                ExitCode::from(e.exit_code())
            }
        },
    }
}

/// Runs one API command: resolves the context (flags, then environment, then the config
/// file), then calls the API.
async fn execute(global: &Global, command: Command) -> Result<(), CliError> {
    if let Command::Context(c) = command {
        return config::context_command(global, c);
    }
    let resolved = config::resolve(global)?;
    let api = client::Api::new(&resolved)?;
    let out = global.output;
    match command {
        Command::Create(c) => resources::create(&api, c.resource, out).await,
        Command::Get(g) => resources::get(&api, g.resource, out).await,
        Command::List(l) => resources::list(&api, l.resource, out).await,
        Command::Update(u) => resources::update(&api, u.resource, out).await,
        Command::Delete(d) => resources::delete(&api, d.resource, out).await,
        Command::Env(e) => resources::env(&api, e, out).await,
        Command::Members(m) => resources::members(&api, m, out).await,
        Command::Runner(r) => resources::runner(&api, r, out).await,
        Command::Run(r) => follow::run(&api, r, out).await,
        Command::Jobs(j) => follow::jobs_list(&api, &j.env, out).await,
        Command::Job(j) => follow::job(&api, j, out).await,
        // Handled before: no API call.
        Command::Context(_) | Command::Completion { .. } | Command::Dev(_) => Ok(()),
    }
}
