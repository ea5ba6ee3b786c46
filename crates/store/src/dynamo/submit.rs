//! The submit transactions' shared tail: the idempotency key, and replaying an earlier
//! submission when the key was seen before.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId};

use super::keys::{env_key, group_pk, key, queue_key};
use super::locks::SETTINGS_SK;
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

/// At most this many groups' freezes are checked in a submit's transaction (DynamoDB takes
/// 100 items; a path is far shallower).
const MAX_FREEZE_CHECKS: usize = 90;

/// A submit's condition on the environment item beyond its own: not locked by a person
/// (`lock`, a reserved word, hence `#lock`) and not marked destroyed by its expiry (a
/// destroyed environment takes no job from anyone until it is extended).
const OPEN_FOR_JOBS: &str = "attribute_not_exists(#lock) AND attribute_not_exists(#destroyed)";

/// The attribute names [`OPEN_FOR_JOBS`] uses.
fn open_names() -> HashMap<String, String> {
    HashMap::from([
        ("#lock".to_string(), "lock".to_string()),
        ("#destroyed".to_string(), "destroyed".to_string()),
    ])
}

/// After a cancelled submit transaction: `Destroyed` when the environment, read after it,
/// is marked destroyed; `Locked` when a freeze check failed it (their codes start at
/// `freezes_from`) or the environment is locked.
fn closed_refusal(
    env: &EnvPath,
    codes: &[Option<String>],
    freezes_from: usize,
    current: Option<&super::EnvItem>,
) -> Result<(), StoreError> {
    if let Some(destroyed) = current.and_then(|e| e.record.destroyed.clone()) {
        return Err(StoreError::Destroyed {
            environment: env.to_string(),
            destroyed,
        });
    }
    let locked = current.is_some_and(|e| e.record.lock.is_some());
    let frozen = codes
        .iter()
        .skip(freezes_from)
        .take(MAX_FREEZE_CHECKS)
        .any(|c| c.as_deref() == Some("ConditionalCheckFailed"));
    if frozen || locked {
        return Err(StoreError::Locked {
            environment: env.to_string(),
        });
    }
    Ok(())
}

/// The index of the first freeze check in a submit transaction: after the job and the
/// environment's update (and, when joining the queue, the queue entry).
fn freeze_checks_from(items: &[TransactWriteItem], groups: usize) -> usize {
    items.len() - groups
}

impl DynamoStore {
    /// A condition check per group above the job's environment (not the root): its
    /// settings item holds no `freeze`. A missing settings item passes (nothing frozen).
    /// With the environment's own `attribute_not_exists(#lock)`, a lock or freeze taken
    /// after the submit's read but before its write makes the write fail, never let a job
    /// in ([`StoreError::Locked`]).
    fn freeze_checks(&self, env: &EnvPath) -> Vec<TransactWriteItem> {
        crate::locks::settings_groups(env.group())
            .iter()
            .take(MAX_FREEZE_CHECKS)
            .map(|g| {
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(group_pk(g), SETTINGS_SK)))
                    .condition_expression("attribute_not_exists(#freeze)")
                    .expression_attribute_names("#freeze", "freeze")
                    .build()
                    .expect("table, key and condition are set");
                TransactWriteItem::builder().condition_check(check).build()
            })
            .collect()
    }

    /// The transaction that takes an idle environment's lock for a new job: the job (holding
    /// the lock, in gsi3 `PENDING`) and the environment's `active_job`, on condition that the
    /// job id is new, the environment idle and not locked, and no group above it frozen.
    fn lock_items(&self, job: &Job, holding: &Item) -> Vec<TransactWriteItem> {
        let mut items = vec![
            self.put(holding.clone(), "attribute_not_exists(pk)"),
            self.update(
                env_key(&job.environment),
                "SET active_job = :id",
                &format!(
                    "attribute_exists(pk) AND attribute_not_exists(active_job) AND {OPEN_FOR_JOBS}"
                ),
                HashMap::from([(":id".to_string(), s(&job.id))]),
                open_names(),
            ),
        ];
        items.extend(self.freeze_checks(&job.environment));
        items
    }

    /// `submit_if_idle`'s one transaction: the lock, or nothing (`None`) when the environment
    /// is busy. A taken job id is `AlreadyExists`, a missing environment `NotFound`.
    pub(super) async fn take_idle_lock(
        &self,
        job: &Job,
        holding: &Item,
    ) -> Result<Option<Submitted>, StoreError> {
        let items = self.lock_items(job, holding);
        let freezes_from = freeze_checks_from(&items, self.freeze_checks(&job.environment).len());
        match self.transact(items).await? {
            TxOutcome::Done => Ok(Some(Submitted {
                job: job.clone(),
                took_lock: true,
                replayed: false,
            })),
            TxOutcome::Cancelled(codes) => {
                refused(&codes, job)?;
                // The environment's condition: locked, frozen above, missing, or busy.
                let current = self.read_env(&job.environment).await?;
                closed_refusal(&job.environment, &codes, freezes_from, current.as_ref())?;
                match current {
                    None => Err(StoreError::NotFound {
                        kind: "environment",
                        id: job.environment.to_string(),
                    }),
                    Some(_) => Ok(None),
                }
            }
        }
    }

    /// A speculative job's one transaction: the job (a pending send) on condition that its
    /// id is new, and a check that the environment exists; the lock, the queue, any freeze
    /// and a `destroyed` mark are not read, as the job writes no state (a pull request's
    /// plan of a destroyed environment shows what its apply would create again).
    pub(super) async fn submit_lockless(
        &self,
        job: &Job,
        holding: &Item,
        idem_item: Option<&Item>,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let exists = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(env_key(&job.environment)))
            .condition_expression("attribute_exists(pk)")
            .build()
            .expect("table, key and condition are set");
        let items = vec![
            self.put(holding.clone(), "attribute_not_exists(pk)"),
            TransactWriteItem::builder().condition_check(exists).build(),
        ];
        match self
            .try_submit(items, job, idem_item, idempotency, false)
            .await?
        {
            Ok(submitted) => Ok(submitted),
            Err(codes) => {
                refused(&codes, job)?;
                Err(StoreError::NotFound {
                    kind: "environment",
                    id: job.environment.to_string(),
                })
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
        let groups = self.freeze_checks(env).len();
        for _ in 0..RETRIES {
            // First try: take the lock, if the environment is idle.
            let items = self.lock_items(job, holding);
            let freezes_from = freeze_checks_from(&items, groups);
            let codes = match self
                .try_submit(items, job, idem_item, idempotency, true)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) => codes,
            };
            refused(&codes, job)?;
            // The environment is busy (or missing, or locked): join its FIFO queue, while it
            // stays busy. The queue position is the environment's next sequence number, taken
            // in the same transaction, so FIFO follows the order the submits committed in.
            let current = self.read_env(env).await?;
            closed_refusal(env, &codes, freezes_from, current.as_ref())?;
            let Some(current) = current else {
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
            let mut items = vec![
                self.put(waiting, "attribute_not_exists(pk)"),
                self.update(
                    env_key(env),
                    "SET queued_count = queued_count + :one, queue_seq = :next",
                    &format!(
                        "attribute_exists(active_job) AND queue_seq = :seq AND {OPEN_FOR_JOBS}"
                    ),
                    HashMap::from([
                        (":one".to_string(), n(1)),
                        (":next".to_string(), n(seq + 1)),
                        (":seq".to_string(), n(seq)),
                    ]),
                    open_names(),
                ),
                self.put(queue_item, "attribute_not_exists(pk)"),
            ];
            items.extend(self.freeze_checks(env));
            let freezes_from = freeze_checks_from(&items, groups);
            let codes = match self
                .try_submit(items, job, idem_item, idempotency, false)
                .await?
            {
                Ok(submitted) => return Ok(submitted),
                Err(codes) => codes,
            };
            refused(&codes, job)?;
            let current = self.read_env(env).await?;
            closed_refusal(env, &codes, freezes_from, current.as_ref())?;
            if current.is_none() {
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
