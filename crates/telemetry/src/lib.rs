//! JSON log set-up shared by every Sortie binary.
//!
//! Every line is one JSON object, with the span fields flattened in, so that a
//! `job_id` recorded on a job's span appears on every line logged for that job.

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// Installs the global JSON subscriber on stdout (where Lambda sends it to CloudWatch),
/// filtered by `RUST_LOG` (default `info`).
///
/// Calling it twice is harmless: the second call keeps the first subscriber.
pub fn init() {
    init_with_writer(std::io::stdout);
}

/// Installs the same subscriber writing to `writer`: `sortie-runner` logs to stderr,
/// because its stdout is the job's log and must end with the job's reason.
pub fn init_with_writer<W>(writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .flatten_event(true)
        .with_target(false)
        .without_time()
        .with_writer(writer)
        .try_init();
}
