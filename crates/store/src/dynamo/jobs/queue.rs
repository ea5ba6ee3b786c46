//! The environment lock's other end: a waiting job leaving the queue (canceled), and the
//! lock released or handed to the next job in the queue.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, JobId, JobState};

use crate::dynamo::items::JobItem;
use crate::dynamo::keys::{env_key, job_key, pending_sk, queue_key, PENDING};
use crate::dynamo::{condition_failed, n, s, DynamoStore, TxOutcome, RETRIES};
use crate::error::aws;
use crate::{JobRecord, Released, StoreError};

impl DynamoStore {
    /// [`crate::JobStore::cancel_waiting_job`]: the queued job canceled, its queue entry
    /// deleted and the environment's queue count lowered, in one transaction.
    pub(super) async fn cancel_queued(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError> {
        let current = self
            .read_job(id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            })?;
        let mut record = current.record.clone();
        record
            .job
            .transition(JobState::Canceled, at, reason)
            .map_err(|e| StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Queued,
                actual: e.from,
            })?;
        let env = &record.job.environment;
        let Some(position) = current.queue_sk.clone() else {
            // Not waiting in a queue: it holds its environment's lock (or never queued).
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: JobState::Queued,
                actual: current.record.job.state,
            });
        };
        let transition = record.job.transitions.last().expect("just recorded");
        let items =
            vec![
            self.delete(queue_key(env, &position), "attribute_exists(pk)", HashMap::new()),
            self.update(
                env_key(env),
                "SET queued_count = queued_count - :one",
                "queued_count > :zero",
                HashMap::from([(":one".to_string(), n(1)), (":zero".to_string(), n(0))]),
                HashMap::new(),
            ),
            self.update(
                job_key(id),
                "SET #state = :to, transitions = list_append(transitions, :t), updated_at = :now",
                "#state = :from",
                HashMap::from([
                    (":to".to_string(), s(JobState::Canceled.as_str())),
                    (":from".to_string(), s(JobState::Queued.as_str())),
                    (
                        ":t".to_string(),
                        AttributeValue::L(vec![serde_dynamo::to_attribute_value(transition)
                            .expect("transition serialises")]),
                    ),
                    (":now".to_string(), s(at.to_rfc3339())),
                ]),
                HashMap::from([("#state".to_string(), "state".to_string())]),
            ),
        ];
        match self.transact(items).await? {
            TxOutcome::Done => {
                record.updated_at = at;
                Ok(record)
            }
            TxOutcome::Cancelled(_) => {
                let actual = self
                    .read_job(id)
                    .await?
                    .map(|j| j.record.job.state)
                    .unwrap_or(JobState::Queued);
                Err(StoreError::StateConflict {
                    job_id: id.to_string(),
                    expected: JobState::Queued,
                    actual,
                })
            }
        }
    }

    /// The first job waiting in `env`'s queue: its queue position, its id and the read of
    /// its item (kept as read: a missing or unreadable item is the caller's to skip).
    #[allow(clippy::type_complexity)]
    async fn first_waiting(
        &self,
        env: &EnvPath,
    ) -> Result<Option<(String, String, Result<Option<JobItem>, StoreError>)>, StoreError> {
        let first = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(format!("QUEUE#{env}")))
            .consistent_read(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?
            .items
            .unwrap_or_default()
            .into_iter()
            .next()
            .and_then(|i| {
                let sk = i.get("sk").and_then(|v| v.as_s().ok()).cloned()?;
                let job_id = i.get("job_id").and_then(|v| v.as_s().ok()).cloned()?;
                Some((sk, job_id))
            });
        Ok(match first {
            Some((position, id)) => {
                let read = self.read_job(&id).await;
                Some((position, id, read))
            }
            None => None,
        })
    }

    /// [`crate::JobStore::release_environment`]: the lock `job_id` holds on `env` removed
    /// when nothing waits, else handed to the first job in the queue.
    pub(super) async fn release_lock(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<Released, StoreError> {
        for _ in 0..RETRIES {
            // The environment, and the first waiting job with its item, read at once: the
            // next job's launch waits for one read's round trip less. What is decided
            // from them is unchanged, and the transaction below checks both again.
            let (current, next) = tokio::join!(self.read_env(env), self.first_waiting(env));
            let Some(current) = current? else {
                return Ok(Released::NotHeld);
            };
            if current.record.active_job.as_deref() != Some(job_id) {
                return Ok(Released::NotHeld);
            }
            let next = next?;
            let held = HashMap::from([(":held".to_string(), s(job_id))]);
            match next {
                None => {
                    let mut values = held.clone();
                    values.insert(":zero".into(), n(0));
                    let res = self
                        .client
                        .update_item()
                        .table_name(&self.table)
                        .set_key(Some(env_key(env)))
                        .update_expression("REMOVE active_job")
                        .condition_expression("active_job = :held AND queued_count = :zero")
                        .set_expression_attribute_values(Some(values))
                        .send()
                        .await;
                    match res {
                        Ok(_) => return Ok(Released::Idle),
                        // A job joined the queue meanwhile: hand the lock to it instead.
                        Err(e) if condition_failed(&e) => continue,
                        Err(e) => return Err(aws("dynamodb", e)),
                    }
                }
                Some((position, next_id, read)) => {
                    let next_job = match read {
                        Ok(Some(j)) => j,
                        // The next job's item is missing or unreadable: it can never run.
                        // Take it out of the queue (keeping the lock) and go on to the next.
                        Ok(None) | Err(StoreError::Corrupt { .. }) => {
                            self.skip_unreadable_waiting(env, job_id, &position, &next_id)
                                .await?;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    let mut values = held.clone();
                    values.insert(":next".into(), s(&next_id));
                    values.insert(":one".into(), n(1));
                    let items = vec![
                        self.update(
                            env_key(env),
                            "SET active_job = :next, queued_count = queued_count - :one",
                            "active_job = :held",
                            values,
                            HashMap::new(),
                        ),
                        self.delete(
                            queue_key(env, &position),
                            "attribute_exists(pk)",
                            HashMap::new(),
                        ),
                        self.update(
                            job_key(&next_id),
                            "SET gsi3pk = :pending, gsi3sk = :psk REMOVE queue_sk",
                            "#state = :queued",
                            HashMap::from([
                                (":pending".to_string(), s(PENDING)),
                                (":psk".to_string(), s(pending_sk(&next_job.record.job))),
                                (":queued".to_string(), s(JobState::Queued.as_str())),
                            ]),
                            HashMap::from([("#state".to_string(), "state".to_string())]),
                        ),
                    ];
                    match self.transact(items).await? {
                        TxOutcome::Done => {
                            return Ok(Released::HandedTo(Box::new(next_job.record.job)))
                        }
                        TxOutcome::Cancelled(_) => continue,
                    }
                }
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "environment lock kept changing; try again".into(),
            retryable: true,
        })
    }
}
