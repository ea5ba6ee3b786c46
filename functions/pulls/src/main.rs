//! `pulls`: the pull queue's batches (webhook work, job-end reports, reconciles) and the
//! schedule's tick that queues a reconcile per connected organisation.
//!
//! Wiring plus one handler; the logic is `sortie_lambda_adapters::pulls_event`.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lambda_adapters::{PullsError, PullsParts};
use sortie_wiring::{compose, Resources};

/// Handles one invocation: a batch answers with the records to retry; a tick that could
/// not queue every reconcile fails (the next tick queues them again).
async fn handler(
    parts: &PullsParts,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, PullsError> {
    sortie_lambda_adapters::pulls_event(parts, event.payload).await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let composition = compose(&config, Resources::for_function("pulls")?, None);
    let parts = PullsParts {
        prs: composition
            .pull_requests()
            .ok_or("SORTIE_PULL_QUEUE_URL is not set")?,
        queue: composition
            .pull_queue
            .clone()
            .ok_or("SORTIE_PULL_QUEUE_URL is not set")?,
    };
    run(service_fn(|event| handler(&parts, event))).await
}
