//! `sortie-pilot`: runs one Sortie job, described by its environment
//! (see the library's `env` module), and exits 0 on success, 1 on failure.

use std::process::ExitCode;
use std::sync::Arc;

use sortie_pilot::objects::S3Objects;
use sortie_pilot::run::{exit_code, report_early_failure, FAILURE_EXIT_CODE};
use sortie_pilot::PilotEnv;

const HELP: &str = "sortie-pilot: runs one Sortie job (Terraform or OpenTofu) and exits.

It takes no arguments; it reads its job from the environment:
  SORTIE_API_URL, SORTIE_JOB_ID, SORTIE_JOB_TOKEN      (required)
  SORTIE_WORK_DIR, SORTIE_TERRAFORM, SORTIE_TOOLS_DIR,
  SORTIE_GIT_CREDENTIALS, AWS_ENDPOINT_URL             (optional)
Terraform output goes to stdout and to S3; its own diagnostics go to stderr as JSON.";

fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        return match arg.as_str() {
            "--version" | "-V" => {
                println!("sortie-pilot {}", env!("CARGO_PKG_VERSION"));
                ExitCode::SUCCESS
            }
            "--help" | "-h" => {
                println!("{HELP}");
                ExitCode::SUCCESS
            }
            other => {
                eprintln!("sortie-pilot: unexpected argument `{other}`\n\n{HELP}");
                ExitCode::from(2)
            }
        };
    }
    // Diagnostics go to stderr scrubbed of every secret the run learns.
    sortie_telemetry::init_with_writer(|| sortie_pilot::log::ScrubbedStderr);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            println!("sortie-pilot: could not start the async runtime: {e}");
            return ExitCode::from(FAILURE_EXIT_CODE);
        }
    };
    // On failure the reason is already the last line of stdout and of the log, and the
    // exit code already reported to the API when the job asked for it.
    ExitCode::from(runtime.block_on(real_main()))
}

/// The process exit code: the one `run` reports in its final callback.
async fn real_main() -> u8 {
    let env = match PilotEnv::from_env() {
        Ok(env) => env,
        Err(e) => {
            report_early_failure(&e);
            return exit_code(&Err::<(), _>(e));
        }
    };
    let objects = Arc::new(S3Objects::from_env().await);
    exit_code(&sortie_pilot::run(&env, objects).await)
}
