//! The best-effort reports to the API: the tool and version used, and the serial and
//! lineage of the state the job wrote. A failure is a warning, never a failed job.

use super::tool::{state_stamp, Tool};
use super::PREFIX;
use crate::api::ApiClient;
use crate::log::LogSink;
use crate::version::ToolVersion;

/// Reports the tool and version to the API. Best effort: a failure is a warning, in the
/// pilot's own log and the job's, and never fails the job.
pub(super) async fn report_tool(api: &ApiClient, sink: &LogSink, version: &ToolVersion) {
    let used = version.used();
    match api.report_tool(&used).await {
        Ok(()) => {
            tracing::info!(tool = used.tool.as_str(), version = %used.version, "tool reported to the API")
        }
        Err(e) => {
            tracing::warn!(error = %e.reason(), "could not report the tool and version");
            sink.line(&format!(
                "{PREFIX} warning: could not report the tool and version ({} {}) to the API: {}",
                used.tool,
                used.version,
                e.reason()
            ));
        }
    }
}

/// Reports the serial and lineage of the state the job wrote (what matches a state version
/// to its writer). Best effort, like the tool report: a failure is a warning.
pub(super) async fn report_state(api: &ApiClient, sink: &LogSink, tool: &Tool) {
    let Some(stamp) = state_stamp(tool).await else {
        tracing::warn!("could not read the state's serial and lineage");
        return;
    };
    match api.report_state(&stamp).await {
        Ok(()) => tracing::info!(serial = stamp.serial, lineage = %stamp.lineage, "state reported"),
        Err(e) => {
            tracing::warn!(error = %e.reason(), "could not report the state's serial");
            sink.line(&format!(
                "{PREFIX} warning: could not report the state's serial to the API: {}",
                e.reason()
            ));
        }
    }
}
