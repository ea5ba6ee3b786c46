//! The submit transactions' shared tail: the idempotency key, and replaying an earlier
//! submission when the key was seen before.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId};

use super::keys::{env_key, key, queue_key};
use super::{n, s, DynamoStore, Item, TxOutcome, RETRIES};
use crate::error::aws;
use crate::{IdempotencyKey, JobStore, StoreError, Submitted};

/// The idempotency item's key: one per environment and client key.
fn idem_key(env: &EnvPath, client_key: &str) -> Item {
    key(format!("IDEM#{env}#{client_key}"), "IDEM")
}

impl DynamoStore {
    /// One submit transaction: `items`, then the idempotency key if there is one.
    /// `Ok(Ok(_))` when it committed, or when the key replays an earlier submit;
    /// `Ok(Err(codes))` with the cancellation codes, in item order, otherwise.
    pub(super) async fn try_submit(
        &self,
        mut items: Vec<TransactWriteItem>,
        job: &Job,
        idem_item: Option<&Item>,
        idempotency: Option<&IdempotencyKey>,
        took_lock: bool,
    ) -> Result<Result<Submitted, Vec<Option<String>>>, StoreError> {
        let idem_index = items.len();
        if let Some(i) = idem_item {
            // A key binds for 24 hours, checked here: an expired item (which DynamoDB's
            // TTL may keep for days) is overwritten as if absent.
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(i.clone()))
                .condition_expression("attribute_not_exists(pk) OR expires_at <= :now")
                .expression_attribute_values(":now", n(Utc::now().timestamp()))
                .build()
                .expect("table, item and condition are set");
            items.push(TransactWriteItem::builder().put(put).build());
        }
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Ok(Submitted {
                job: job.clone(),
                took_lock,
                replayed: false,
            })),
            TxOutcome::Cancelled(codes) => match self
                .check_replay(&codes, idem_index, idempotency, &job.environment)
                .await?
            {
                Some(replay) => Ok(Ok(replay)),
                None => Ok(Err(codes)),
            },
        }
    }

    /// If the idempotency item's condition failed, returns the earlier job (or a mismatch error).
    async fn check_replay(
        &self,
        codes: &[Option<String>],
        idem_index: usize,
        idempotency: Option<&IdempotencyKey>,
        env: &EnvPath,
    ) -> Result<Option<Submitted>, StoreError> {
        let Some(k) = idempotency else {
            return Ok(None);
        };
        if codes.get(idem_index).and_then(|c| c.as_deref()) != Some("ConditionalCheckFailed") {
            return Ok(None);
        }
        let item = self
            .get_item(idem_key(env, &k.key))
            .await?
            .ok_or_else(|| StoreError::Aws {
                service: "dynamodb",
                message: "idempotency item vanished".into(),
                retryable: true,
            })?;
        let job_id = item
            .get("job_id")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let hash = item
            .get("request_hash")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        if hash != k.request_hash {
            return Err(StoreError::IdempotencyMismatch {
                key: k.key.clone(),
                job_id,
            });
        }
        let job = self.get_job(&JobId::new(job_id)).await?.job;
        Ok(Some(Submitted {
            job,
            took_lock: false,
            replayed: true,
        }))
    }
}

impl DynamoStore {
    /// Sets when an idempotency key stops binding: tests back-date a key with it (the
    /// in-memory store has the same). `NotFound` if the key is not held.
    pub async fn expire_idempotency_key_at(
        &self,
        env: &EnvPath,
        key: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(idem_key(env, key)))
            .update_expression("SET expires_at = :at")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":at", n(expires_at.timestamp()))
            .send()
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Err(StoreError::NotFound {
                    kind: "idempotency key",
                    id: key.to_string(),
                })
            }
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}

/// What a cancelled submit transaction's codes say, when it is not the lock being taken or
/// the queue having moved (then `Ok`, and the caller tries the other way): the job id is
/// taken, DynamoDB refused an item, or the table is busy.
pub(super) fn refused(codes: &[Option<String>], job: &Job) -> Result<(), StoreError> {
    for code in codes.iter().flatten() {
        match code.as_str() {
            "ConditionalCheckFailed" => {}
            "ValidationError" => {
                return Err(StoreError::Invalid {
                    path: "job".into(),
                    problem: "DynamoDB refused the item".into(),
                })
            }
            other => {
                return Err(StoreError::Aws {
                    service: "dynamodb",
                    message: format!("submit transaction cancelled: {other}"),
                    retryable: true,
                })
            }
        }
    }
    if codes.first().is_some_and(|c| c.is_some()) {
        return Err(StoreError::AlreadyExists {
            kind: "job",
            id: job.id.to_string(),
        });
    }
    Ok(())
}

impl DynamoStore {
    /// The transaction that takes an idle environment's lock for a new job: the job (holding
    /// the lock, in gsi3 `PENDING`) and the environment's `active_job`, on condition that the
    /// job id is new and the environment idle.
    fn lock_items(&self, job: &Job, holding: &Item) -> Vec<TransactWriteItem> {
        vec![
            self.put(holding.clone(), "attribute_not_exists(pk)"),
            self.update(
                env_key(&job.environment),
                "SET active_job = :id",
                "attribute_exists(pk) AND attribute_not_exists(active_job)",
                HashMap::from([(":id".to_string(), s(&job.id))]),
                HashMap::new(),
            ),
        ]
    }

    /// `submit_if_idle`'s one transaction: the lock, or nothing (`None`) when the environment
    /// is busy. A taken job id is `AlreadyExists`, a missing environment `NotFound`.
    pub(super) async fn take_idle_lock(
        &self,
        job: &Job,
        holding: &Item,
    ) -> Result<Option<Submitted>, StoreError> {
        match self.transact(self.lock_items(job, holding)).await? {
            TxOutcome::Done => Ok(Some(Submitted {
                job: job.clone(),
                took_lock: true,
                replayed: false,
            })),
            TxOutcome::Cancelled(codes) => {
                refused(&codes, job)?;
                // The environment's condition: missing, or busy.
                match self.read_env(&job.environment).await? {
                    None => Err(StoreError::NotFound {
                        kind: "environment",
                        id: job.environment.to_string(),
                    }),
                    Some(_) => Ok(None),
                }
            }
        }
    }

    /// The submit's transactions: take the idle lock, else join the queue, until one commits.
    /// Each attempt is one transaction; nothing is written outside them.
    pub(super) async fn submit_attempts(
        &self,
        job: &Job,
        holding: &Item,
        idem_item: Option<&Item>,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let env = &job.environment;
        for _ in 0..RETRIES {
            // First try: take the lock, if the environment is idle.
            let items = self.lock_items(job, holding);
            let codes = match self
                .try_submit(items, job, idem_item, idempotency, true)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) => codes,
            };
            refused(&codes, job)?;
            // The environment is busy (or missing): join its FIFO queue, while it stays busy.
            // The queue position is the environment's next sequence number, taken in the
            // same transaction, so FIFO follows the order the submits committed in.
            let Some(current) = self.read_env(env).await? else {
                return Err(StoreError::NotFound {
                    kind: "environment",
                    id: env.to_string(),
                });
            };
            if current.record.active_job.is_none() {
                continue;
            }
            let seq = current.record.queue_seq;
            let position = format!("{:020}", seq + 1);
            let mut queue_item = queue_key(env, &position);
            queue_item.insert("kind".into(), s("queue"));
            queue_item.insert("job_id".into(), s(&job.id));
            let mut waiting = holding.clone();
            waiting.remove("gsi3pk");
            waiting.remove("gsi3sk");
            waiting.insert("queue_sk".into(), s(&position));
            super::items::check_item("job", &waiting)?;
            let items = vec![
                self.put(waiting, "attribute_not_exists(pk)"),
                self.update(
                    env_key(env),
                    "SET queued_count = queued_count + :one, queue_seq = :next",
                    "attribute_exists(active_job) AND queue_seq = :seq",
                    HashMap::from([
                        (":one".to_string(), n(1)),
                        (":next".to_string(), n(seq + 1)),
                        (":seq".to_string(), n(seq)),
                    ]),
                    HashMap::new(),
                ),
                self.put(queue_item, "attribute_not_exists(pk)"),
            ];
            match self
                .try_submit(items, job, idem_item, idempotency, false)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) => refused(&codes, job)?,
            }
            if self.read_env(env).await?.is_none() {
                return Err(StoreError::NotFound {
                    kind: "environment",
                    id: env.to_string(),
                });
            }
            // The lock was released between the two attempts: try to take it again.
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: "environment lock kept changing; try again".into(),
            retryable: true,
        })
    }
}
