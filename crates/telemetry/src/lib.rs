//! Log set-up shared by every Sortie binary.
//!
//! By default every line is one JSON object, with the span fields flattened in, so that a
//! `job_id` recorded on a job's span appears on every line logged for that job.
//! [`LogFormat::Human`] is the compact, one-line-per-event form for a person at a terminal
//! (`sortie dev` on a TTY).

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (Lambda, CloudWatch, scripts).
    Json,
    /// One compact human-readable line per event, with its time and level.
    Human,
}

impl LogFormat {
    /// The format to use: the one asked for, else human on a terminal and JSON otherwise.
    pub fn pick(requested: Option<LogFormat>, is_terminal: bool) -> LogFormat {
        match requested {
            Some(format) => format,
            None if is_terminal => LogFormat::Human,
            None => LogFormat::Json,
        }
    }
}

/// Installs the global JSON subscriber on stdout (where Lambda sends it to CloudWatch),
/// filtered by `RUST_LOG` (default `info`).
///
/// Calling it twice is harmless: the second call keeps the first subscriber.
pub fn init() {
    init_with_writer(std::io::stdout);
}

/// Installs the same subscriber writing to `writer`: `sortie-pilot` logs to stderr,
/// because its stdout is the job's log and must end with the job's reason.
pub fn init_with_writer<W>(writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    init_with_format(LogFormat::Json, writer);
}

/// Installs the global subscriber in `format`, writing to `writer`, filtered by `RUST_LOG`
/// (default `info`). Calling it twice is harmless: the second call keeps the first.
pub fn init_with_format<W>(format: LogFormat, writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = match format {
        // Each line carries its own `timestamp` (on Lambda too: the event's time, where
        // CloudWatch's is when the line arrived).
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .with_target(false)
            .with_writer(writer)
            .try_init(),
        LogFormat::Human => tracing_subscriber::fmt()
            .compact()
            .with_env_filter(filter)
            .with_target(false)
            .with_writer(writer)
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_gets_human_lines_and_anything_else_json_unless_asked() {
        assert_eq!(LogFormat::pick(None, true), LogFormat::Human);
        assert_eq!(LogFormat::pick(None, false), LogFormat::Json);
        assert_eq!(
            LogFormat::pick(Some(LogFormat::Json), true),
            LogFormat::Json
        );
        assert_eq!(
            LogFormat::pick(Some(LogFormat::Human), false),
            LogFormat::Human
        );
    }
}
