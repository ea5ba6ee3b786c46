//! The jobs queue (SQS): one message per job that holds its environment's lock, sent with
//! its tenant (the job's organisation) as `MessageGroupId`, so that the standard queue is
//! an SQS fair queue (docs/decisions/scale-and-soak.md, "Fairness").

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sortie_core::{Job, JobId};

use crate::StoreError;

/// The body of a jobs-queue message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobMessage {
    /// The job to dispatch.
    pub job_id: JobId,
    /// Set for a cancel: stop the launched job's task on behalf of this principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_by: Option<String>,
    /// The job's tenant, its organisation: sent as the message's `MessageGroupId` (an SQS
    /// fair queue's tenant), not in the body. Empty (a root-group environment, or a message
    /// read back from a body) sends no group id: SQS then takes the message as its own tenant.
    #[serde(skip)]
    pub tenant: String,
}

impl JobMessage {
    /// The message that dispatches `job`.
    pub fn launch(job: &Job) -> Self {
        Self {
            job_id: job.id.clone(),
            cancel_by: None,
            tenant: tenant_of(job),
        }
    }

    /// The message that stops launched `job`'s task on behalf of `by`.
    pub fn cancel(job: &Job, by: &str) -> Self {
        Self {
            cancel_by: Some(by.to_string()),
            ..Self::launch(job)
        }
    }
}

/// A job's tenant on the jobs queue: its environment's organisation (the root group of its
/// path), the unit whose burst must not hold back the others.
pub fn tenant_of(job: &Job) -> String {
    job.environment.org().to_string()
}

/// Sends jobs to the dispatcher.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Sends one message, optionally delayed (seconds, at most 900).
    async fn send_message(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
    ) -> Result<(), StoreError>;

    /// Sends one job to be dispatched, in its tenant's message group.
    async fn send(&self, job: &Job, delay_seconds: i32) -> Result<(), StoreError> {
        self.send_message(&JobMessage::launch(job), delay_seconds)
            .await
    }
}

/// The SQS jobs queue.
#[derive(Debug, Clone)]
pub struct SqsJobQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsJobQueue {
    /// A queue at `url`.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// Delays the next delivery of a received message: the retry backoff of `dispatch`.
    pub async fn delay_redelivery(
        &self,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), StoreError> {
        change_visibility(&self.client, &self.url, receipt_handle, seconds).await
    }
}

/// The message attribute that names a launch message `sortie dev` also dispatched at once,
/// in process, beside sending it (its value is that hand-over's tag): its dispatcher then
/// settles the copy it receives by that hand-over's outcome instead of claiming again.
pub const DISPATCHED_HERE_ATTRIBUTE: &str = "sortie-dispatched-here";

impl SqsJobQueue {
    /// Sends one message, optionally delayed, with `tag` as its
    /// [`DISPATCHED_HERE_ATTRIBUTE`] when given (`sortie dev`; the functions send none).
    pub async fn send_tagged(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
        tag: Option<&str>,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(message).expect("serialisable");
        let attribute = match tag {
            Some(tag) => Some(
                aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(tag)
                    .build()
                    .map_err(|e| StoreError::Aws {
                        service: "sqs",
                        message: e.to_string(),
                        retryable: false,
                    })?,
            ),
            None => None,
        };
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            // A standard queue with group ids is a fair queue; no deduplication id (FIFO only).
            .set_message_group_id((!message.tenant.is_empty()).then(|| message.tenant.clone()))
            .delay_seconds(delay_seconds.clamp(0, 900))
            .set_message_attributes(
                attribute.map(|a| [(DISPATCHED_HERE_ATTRIBUTE.to_string(), a)].into()),
            )
            .send()
            .await
            .map_err(|e| {
                use aws_sdk_sqs::error::ProvideErrorMetadata;
                let retryable = !matches!(e, aws_sdk_sqs::error::SdkError::ServiceError(ref se) if se.raw().status().as_u16() < 500);
                let message = match e.as_service_error() {
                    Some(se) => format!("{}: {}", se.code().unwrap_or("Unknown"), se.message().unwrap_or_default()),
                    None => aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
                };
                StoreError::Aws { service: "sqs", message, retryable }
            })?;
        Ok(())
    }
}

#[async_trait]
impl JobQueue for SqsJobQueue {
    async fn send_message(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
    ) -> Result<(), StoreError> {
        self.send_tagged(message, delay_seconds, None).await
    }
}

/// Makes a received message of the queue at `url` visible again after `seconds` (0 to 12
/// hours, SQS's limits): the delay before its next try. One piece for both queues.
async fn change_visibility(
    client: &aws_sdk_sqs::Client,
    url: &str,
    receipt_handle: &str,
    seconds: i32,
) -> Result<(), StoreError> {
    client
        .change_message_visibility()
        .queue_url(url)
        .receipt_handle(receipt_handle)
        .visibility_timeout(seconds.clamp(0, 43_200))
        .send()
        .await
        .map_err(|e| crate::error::aws("sqs", e))?;
    Ok(())
}

/// Sends pull-request work ([`sortie_core::vcs::work::PullWork`]) to its handler.
#[async_trait]
pub trait PullQueue: Send + Sync {
    /// Sends one piece of work, in its organisation's message group.
    async fn send_work(&self, work: &sortie_core::vcs::work::PullWork) -> Result<(), StoreError>;
}

/// The SQS queue of pull-request work (a fair queue: one message group per organisation).
#[derive(Debug, Clone)]
pub struct SqsPullQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsPullQueue {
    /// A queue at `url`.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// Makes a received message visible again after `seconds` (0 to 12 hours): the delay
    /// before its next try.
    pub async fn delay_redelivery(
        &self,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), StoreError> {
        change_visibility(&self.client, &self.url, receipt_handle, seconds).await
    }
}

#[async_trait]
impl PullQueue for SqsPullQueue {
    async fn send_work(&self, work: &sortie_core::vcs::work::PullWork) -> Result<(), StoreError> {
        let body = serde_json::to_string(work).expect("serialisable");
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .message_group_id(work.org())
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs", e))?;
        Ok(())
    }
}

/// Pull-request work kept in memory, in order: the queue of `sortie dev` and the tests.
#[derive(Debug, Default)]
pub struct MemoryPullQueue(
    std::sync::Mutex<std::collections::VecDeque<sortie_core::vcs::work::PullWork>>,
);

impl MemoryPullQueue {
    /// Takes every piece of work sent so far, oldest first.
    pub fn drain(&self) -> Vec<sortie_core::vcs::work::PullWork> {
        self.0.lock().expect("not poisoned").drain(..).collect()
    }
}

#[async_trait]
impl PullQueue for MemoryPullQueue {
    async fn send_work(&self, work: &sortie_core::vcs::work::PullWork) -> Result<(), StoreError> {
        self.0.lock().expect("not poisoned").push_back(work.clone());
        Ok(())
    }
}

/// Sends notification deliveries (each a JSON body: one delivery between two attempts) to
/// the `notify` function, in their organisation's message group.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Sends one delivery's body in `tenant`'s message group.
    async fn send_delivery(&self, body: &str, tenant: &str) -> Result<(), StoreError>;
}

/// The SQS notification queue: events from the bus, and the deliveries they fan out to
/// (a fair queue: one message group per organisation).
#[derive(Debug, Clone)]
pub struct SqsDeliveryQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsDeliveryQueue {
    /// A queue at `url`.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// Makes a received message visible again after `seconds` (0 to 12 hours): the wait
    /// before a delivery's next attempt.
    pub async fn delay_redelivery(
        &self,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), StoreError> {
        change_visibility(&self.client, &self.url, receipt_handle, seconds).await
    }
}

#[async_trait]
impl DeliveryQueue for SqsDeliveryQueue {
    async fn send_delivery(&self, body: &str, tenant: &str) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .set_message_group_id((!tenant.is_empty()).then(|| tenant.to_string()))
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs", e))?;
        Ok(())
    }
}

/// Deliveries kept in memory, in order: the tests' queue.
#[derive(Debug, Default)]
pub struct MemoryDeliveryQueue(std::sync::Mutex<Vec<String>>);

impl MemoryDeliveryQueue {
    /// Takes every body sent so far, oldest first.
    pub fn drain(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

#[async_trait]
impl DeliveryQueue for MemoryDeliveryQueue {
    async fn send_delivery(&self, body: &str, _tenant: &str) -> Result<(), StoreError> {
        self.0.lock().expect("not poisoned").push(body.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::{EnvPath, JobRequest, RunnerId};

    fn job(env: &str) -> Job {
        let request = JobRequest::from_value(
            &serde_json::json!({"operation": "plan", "files": {"main.tf": ""}}),
        )
        .unwrap();
        Job::new(
            sortie_core::tokens::new_id(),
            EnvPath::parse(env).unwrap(),
            RunnerId::parse("acme/local").unwrap(),
            request,
            "alice".into(),
            chrono::Utc::now(),
        )
    }

    #[test]
    fn a_jobs_tenant_is_its_organisation_and_travels_outside_the_body() {
        for (env, tenant) in [("acme/app", "acme"), ("beta/team/deep/prod", "beta")] {
            let job = job(env);
            let message = JobMessage::launch(&job);
            assert_eq!(message.tenant, tenant);
            assert_eq!(JobMessage::cancel(&job, "bob").tenant, tenant);
            let body = serde_json::to_string(&message).unwrap();
            assert!(
                !body.contains("tenant") && !body.contains(&format!("\"{tenant}\"")),
                "{body}"
            );
            let back: JobMessage = serde_json::from_str(&body).unwrap();
            assert_eq!(back.job_id, job.id);
        }
    }
}
