//! Notifications in one process (`sortie dev`): [`TeeBus`] hands every event published to
//! [`Worker`] as well as to the bus, and the worker fans each out and carries every delivery
//! through its attempts, as the `notify` function and its queue do on AWS.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;
use sortie_store::{JobRecord, StoreError};
use tokio::sync::mpsc;

use crate::deliveries::{Event, PendingDelivery, Sender};
use crate::{Bus, LifecycleError, NotificationRefusal, Notifications};

/// Where [`TeeBus`] hands events, and the [`Worker`] reads them.
pub type EventSink = mpsc::UnboundedSender<Event>;

/// A bus that also hands each event to the in-process [`Worker`].
pub struct TeeBus {
    /// The bus events go to.
    pub inner: Arc<dyn Bus>,
    /// Where the worker reads them.
    pub events: EventSink,
}

impl TeeBus {
    fn tee(&self, detail_type: &str, detail: &Value) {
        let event = Event {
            id: sortie_core::tokens::random_hex(16),
            detail_type: detail_type.to_string(),
            time: Utc::now(),
            detail: detail.clone(),
        };
        // The worker ends only with the process.
        let _ = self.events.send(event);
    }
}

#[async_trait]
impl Bus for TeeBus {
    async fn job_ended(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        self.tee(crate::JOB_ENDED, &crate::ended_detail(record));
        self.inner.job_ended(record).await
    }

    async fn publish(
        &self,
        detail_type: &str,
        resource: &str,
        detail: Value,
    ) -> Result<(), LifecycleError> {
        self.tee(detail_type, &detail);
        self.inner.publish(detail_type, resource, detail).await
    }
}

/// The most times one attempt is tried again after the store or Secrets Manager failed
/// (not the receiver: its failures follow the retry rule).
const PLANE_TRIES: u32 = 5;

/// Fans events out and carries each delivery through its attempts, in process.
#[derive(Clone)]
pub struct Worker {
    /// The notification service.
    pub notifications: Notifications,
    /// Sends one delivery (the SSRF-guarded client).
    pub sender: Arc<dyn Sender>,
    /// The console Slack messages link to.
    pub console_url: String,
    /// The longest wait before a retry (`None`: the retry rule's own, up to an hour);
    /// `sortie dev --notify-retry-cap` shortens it for tests.
    pub longest_wait: Option<Duration>,
}

impl Worker {
    /// Runs until `events` closes: each event fanned out, each delivery on its own task.
    pub async fn run(self, mut events: mpsc::UnboundedReceiver<Event>) {
        while let Some(event) = events.recv().await {
            match self.notifications.fan_out(&event).await {
                Ok(deliveries) => {
                    for pending in deliveries {
                        tokio::spawn(self.clone().deliver(pending));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, event = %event.detail_type, "could not fan the event out to its destinations")
                }
            }
        }
    }

    /// One delivery, attempt after attempt, until it is delivered or given up on (the
    /// retry rule ends within 24 hours) or its destination is gone.
    pub async fn deliver(self, mut pending: PendingDelivery) {
        let mut plane_failures = 0;
        loop {
            let now = Utc::now();
            match self
                .notifications
                .attempt(&pending, self.sender.as_ref(), &self.console_url, now)
                .await
            {
                Ok(done) => match done.next {
                    sortie_core::notify::delivery::Next::RetryAt(at) => {
                        let wait = (at - Utc::now()).to_std().unwrap_or_default();
                        let wait = self.longest_wait.map_or(wait, |cap| wait.min(cap));
                        tokio::time::sleep(wait).await;
                        pending = done.pending;
                    }
                    _ => return,
                },
                Err(NotificationRefusal::Store(StoreError::NotFound { .. })) => {
                    tracing::info!(delivery = %pending.id, "the destination is gone: its delivery is dropped");
                    return;
                }
                Err(e) if plane_failures + 1 < PLANE_TRIES => {
                    plane_failures += 1;
                    tracing::warn!(error = %e, delivery = %pending.id, "the delivery could not be attempted; trying again");
                    tokio::time::sleep(Duration::from_secs(1 << plane_failures)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, delivery = %pending.id, "the delivery could not be attempted: dropped");
                    return;
                }
            }
        }
    }
}
