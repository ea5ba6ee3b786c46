//! `notify`: the notify queue's batches: events of the bus fanned out to the destinations
//! that want them, and each delivery attempted, signed, and retried as the rule says.
//!
//! Wiring plus one handler; the logic is `sortie_lambda_adapters::notify_batch`.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use sortie_lambda_adapters::NotifyParts;
use sortie_wiring::{compose, Resources};

/// Handles one batch: the records to try again are its batch item failures.
async fn handler(
    parts: &NotifyParts,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    Ok(sortie_lambda_adapters::notify_batch(parts, event.payload).await)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    sortie_telemetry::init();
    let config = sortie_wiring::function_sdk_config().await;
    let resources = Resources::for_function("notify")?;
    let queue_url = sortie_settings::required(sortie_settings::NOTIFY_QUEUE_URL)?;
    let console_url = resources.api_url.clone();
    let composition = compose(&config, resources, None);
    let parts = NotifyParts {
        notifications: composition.notifications(),
        queue: sortie_store::SqsDeliveryQueue::new(aws_sdk_sqs::Client::new(&config), queue_url),
        // Public HTTPS only, every address checked after resolution (no loopback here).
        sender: Arc::new(sortie_http::deliver::GuardedClient::system(false)),
        console_url,
    };
    run(service_fn(|event| handler(&parts, event))).await
}
