//! `sortie`: the command line. Resource verbs over the public HTTP API (kubectl- and
//! canyon-style), `run ... --wait` and `job logs -f` to follow a job live, named contexts,
//! and `sortie dev`, which runs the whole control plane locally.

mod args;
mod client;
mod config;
mod dev;
mod exit;
mod follow;
mod interrupt;
mod output;
mod plan;
mod policy_test;
mod resources;
mod source;
mod whoami;

use std::process::ExitCode;

use args::{Cli, Command, GetAny, Global, JobCommand, JobsGet, JobsListed, ListAny, PolicyCommand};
use clap::{CommandFactory, FromArgMatches, Parser};
use exit::CliError;

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    // `sortie dev ...` alone, so its help lists only its own flags.
    if std::env::args_os().nth(1).is_some_and(|a| a == "dev") {
        let args::DevOnly::Dev(dev) = args::DevCli::parse().command;
        return run_dev(dev);
    }
    let cli = match Cli::from_arg_matches(&args::command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
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
            drop(runtime);
            run_dev(args)
        }
        Command::Completion { shell } => {
            // Generated into memory, then written: a closed pipe (`| head`) ends quietly.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "sortie", &mut script);
            output::print_text(&String::from_utf8_lossy(&script));
            ExitCode::SUCCESS
        }
        command => match runtime.block_on(execute(&cli.global, command)) {
            Ok(()) => ExitCode::SUCCESS,
            // What happened and what to do were printed when it happened.
            Err(e @ (CliError::Interrupted | CliError::AwaitingApproval)) => {
                ExitCode::from(e.exit_code())
            }
            Err(e) => {
                output::print_error(&e);
                ExitCode::from(e.exit_code())
            }
        },
    }
}

/// `sortie dev`: the whole control plane in this process.
fn run_dev(args: dev::DevArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sortie dev: could not start: {e}");
            return ExitCode::from(1);
        }
    };
    dev::init_logs(&args);
    match runtime.block_on(dev::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sortie dev: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Output to a closed pipe (`sortie completion bash | head`) ends the process quietly
/// with exit 0, instead of a panic of `println!`: Rust ignores SIGPIPE, so a write fails
/// with EPIPE, and `print!` panics on it. Every other panic keeps its message.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Runs one API command: resolves the context (flags, then environment, then the config
/// file), then calls the API.
async fn execute(global: &Global, command: Command) -> Result<(), CliError> {
    if let Command::Context(c) = command {
        return config::context_command(global, c);
    }
    if let Command::Policy(PolicyCommand::Test {
        file,
        plan,
        env: None,
        operation,
    }) = &command
    {
        return policy_test::run(None, file, plan, None, operation, global.output).await;
    }
    let resolved = config::resolve(global)?;
    if global.verbose {
        eprintln!(
            "sortie: API {} (from {})",
            resolved.api_url,
            resolved.url_source()
        );
        eprintln!("sortie: credential: {}", resolved.credential());
        for note in resolved.overrides() {
            eprintln!("sortie: note: {note}");
        }
    }
    let api = client::Api::new(&resolved)?;
    let out = global.output;
    match command {
        Command::Create(c) => resources::create(&api, c.resource, out).await,
        Command::Get(g) => match g.resource {
            GetAny::Resource(r) => resources::get(&api, r, out).await,
            GetAny::Jobs(JobsGet::Job { id }) => {
                follow::job(&api, JobCommand::Get { id }, out).await
            }
            GetAny::Jobs(JobsGet::Jobs { env }) => follow::jobs_list(&api, &env, out).await,
        },
        Command::List(l) => match l.resource {
            ListAny::Resource(r) => resources::list(&api, r, out).await,
            ListAny::Jobs(JobsListed::Jobs { env }) => follow::jobs_list(&api, &env, out).await,
        },
        Command::Whoami(w) => whoami::whoami(&api, w, out).await,
        Command::Update(u) => resources::update(&api, u.resource, out).await,
        Command::Delete(d) => resources::delete(&api, d.resource, out).await,
        Command::Env(e) => resources::env(&api, e, out).await,
        Command::Group(g) => resources::group(&api, g, out).await,
        Command::Members(m) => resources::members(&api, m, out).await,
        Command::Runner(r) => resources::runner(&api, r, out).await,
        Command::Vcs(v) => resources::vcs(&api, v, out).await,
        Command::Notify(n) => resources::notify(&api, n, out).await,
        Command::Audit(a) => resources::audit(&api, a, out).await,
        Command::Policy(PolicyCommand::Test {
            file,
            plan,
            env,
            operation,
        }) => policy_test::run(Some(&api), &file, &plan, env.as_deref(), &operation, out).await,
        Command::Run(r) => follow::run(&api, r, out).await,
        Command::Jobs(j) => follow::jobs_list(&api, &j.env, out).await,
        Command::Job(j) => follow::job(&api, j, out).await,
        // Handled before: no API call.
        Command::Context(_) | Command::Completion { .. } | Command::Dev(_) => Ok(()),
    }
}
