//! Builds the engine from the environment, as the Lambda functions do.

use std::sync::Arc;

use aws_config::SdkConfig;
use sortie_launch::{ByRunnerType, EcsLauncher};
use sortie_store::{DynamoStore, SqsJobQueue};

use crate::{Engine, EventBridgeBus, SweepSettings};

/// What a function needs besides the engine: the concrete queue (for redelivery delays).
pub struct Wired {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The jobs queue.
    pub queue: Arc<SqsJobQueue>,
}

/// Builds the engine from `SORTIE_*` variables: the table, the queue, the bus and,
/// when set, the API URL; launchers for `ecs-fargate` runners.
pub fn from_env(config: &SdkConfig) -> Result<Wired, sortie_settings::Missing> {
    use sortie_settings::{required, API_URL, BUS_NAME, JOBS_QUEUE_URL, TABLE};
    let store = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(config),
        required(TABLE)?,
    ));
    let queue = Arc::new(SqsJobQueue::new(
        aws_sdk_sqs::Client::new(config),
        required(JOBS_QUEUE_URL)?,
    ));
    let bus = Arc::new(EventBridgeBus::new(
        aws_sdk_eventbridge::Client::new(config),
        std::env::var(BUS_NAME).unwrap_or_else(|_| "default".into()),
    ));
    let launcher = ByRunnerType {
        ecs: Some(Arc::new(EcsLauncher::new(config.clone()))),
        ..Default::default()
    };
    let engine = Engine {
        store,
        launcher: Arc::new(launcher),
        queue: queue.clone(),
        bus,
        api_url: std::env::var(API_URL).unwrap_or_default(),
        settings: SweepSettings::default(),
    };
    Ok(Wired {
        engine: Arc::new(engine),
        queue,
    })
}
