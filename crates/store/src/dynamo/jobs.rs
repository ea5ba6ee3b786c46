//! Jobs: the [`JobStore`] of DynamoDB. Here: submission under the environment lock (the
//! job, the lock or a queue entry, and the idempotency key in one transaction), reads and
//! lists. Beside it, by concept: [`transition`] (conditional writes and the history),
//! [`queue`] (leaving the queue, releasing the lock) and [`sweep`] (the sparse gsi3 index
//! the sweeper reads, unreadable jobs).

mod queue;
mod sweep;
mod transition;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId, JobState};

use super::items::{checked_item, from_item, job_item, JobItem};
use super::keys::{job_key, key, ACTIVE, AWAITING, ENDED, PENDING};
use super::unreadable::decode_listed;
use super::{condition_failed, n, s, DynamoStore};
use crate::cursor::{decode_cursor, decode_gsi3_cursor, encode_cursor, encode_gsi3_cursor};
use crate::error::aws;
use crate::{
    IdempotencyKey, JobPage, JobRecord, JobStore, JobUpdate, Listed, ListedPage, Released,
    StoreError, Submitted, Unreadable,
};

/// A submit's items: the job (a pending send) and its idempotency key, each checked
/// before any write (DynamoDB's limits, and that it reads back), so a refused input leaves
/// nothing behind.
fn submit_items(
    job: &Job,
    idempotency: Option<&IdempotencyKey>,
) -> Result<(super::Item, Option<super::Item>), StoreError> {
    let idem_item = idempotency.map(|k| idempotency_item(job, k));
    let holding = checked_item("job", &job_item(job, true))?;
    if let Some(i) = &idem_item {
        super::items::check_item("idempotency key", i)?;
    }
    Ok((holding, idem_item))
}

/// A submit's idempotency item: the key binds the job for 24 hours.
fn idempotency_item(job: &Job, k: &IdempotencyKey) -> super::Item {
    let mut item = key(format!("IDEM#{}#{}", job.environment, k.key), "IDEM");
    item.insert("kind".into(), s("idempotency"));
    item.insert("job_id".into(), s(&job.id));
    item.insert("request_hash".into(), s(&k.request_hash));
    item.insert(
        "expires_at".into(),
        n(Utc::now().timestamp() + crate::records::IDEMPOTENCY_KEY_SECONDS),
    );
    item
}

impl DynamoStore {
    /// A submit's answer, read again when it was lost on the way back (a timeout, a 5xx
    /// after the commit): the job id is new, so the job item tells whether the transaction
    /// committed. Never report "not applied" for a submit that was.
    async fn committed_despite(
        &self,
        job: &Job,
        written: Result<Submitted, StoreError>,
    ) -> Result<Submitted, StoreError> {
        match written {
            Err(e) if e.is_retryable() => match self.read_job(&job.id).await {
                Ok(Some(found)) if found.record.job == *job => {
                    let env = self.read_env(&job.environment).await?;
                    Ok(Submitted {
                        job: job.clone(),
                        took_lock: env.and_then(|e| e.record.active_job).as_ref() == Some(&job.id),
                        replayed: false,
                    })
                }
                _ => Err(e),
            },
            other => other,
        }
    }
}

/// The gsi2 partition of the jobs offered to an agent pool.
fn pool_partition(pool: &str) -> String {
    format!("POOL#{pool}")
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let (holding, idem_item) = submit_items(job, idempotency)?;
        let written = self
            .submit_attempts(job, &holding, idem_item.as_ref(), idempotency)
            .await;
        self.committed_despite(job, written).await
    }

    async fn submit_speculative(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let (holding, idem_item) = submit_items(job, idempotency)?;
        let written = self
            .submit_lockless(job, &holding, idem_item.as_ref(), idempotency)
            .await;
        self.committed_despite(job, written).await
    }

    async fn submit_if_idle(&self, job: &Job) -> Result<Option<Submitted>, StoreError> {
        let holding = checked_item("job", &job_item(job, true))?;
        match self.take_idle_lock(job, &holding).await {
            // An answer lost on the way back: the job item tells whether the transaction
            // committed (it is the only write of this new id), as for `submit_job`.
            Err(e) if e.is_retryable() => match self.read_job(&job.id).await {
                Ok(Some(found)) if found.record.job == *job => Ok(Some(Submitted {
                    job: job.clone(),
                    took_lock: true,
                    replayed: false,
                })),
                _ => Err(e),
            },
            other => other,
        }
    }

    async fn get_job(&self, id: &JobId) -> Result<JobRecord, StoreError> {
        self.read_job(id)
            .await?
            .map(|j| j.record)
            .ok_or_else(|| StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            })
    }

    async fn list_jobs(
        &self,
        env: &EnvPath,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<JobPage, StoreError> {
        let pk = format!("ENVJOBS#{env}");
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi1")
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", s(&pk))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100) as i32);
        if let Some(c) = cursor {
            let last = decode_cursor(c).ok_or(StoreError::NotFound {
                kind: "cursor",
                id: c.to_string(),
            })?;
            let mut start = job_key(&last);
            start.insert("gsi1pk".into(), s(&pk));
            start.insert("gsi1sk".into(), s(&last));
            q = q.set_exclusive_start_key(Some(start));
        }
        let out = q.send().await.map_err(|e| aws("dynamodb", e))?;
        let listed = decode_listed(out.items.unwrap_or_default(), |j| j.record);
        let unreadable = listed
            .unreadable
            .iter()
            .map(|u| u.job_id.to_string())
            .collect();
        let jobs = listed.records;
        let next = match out.last_evaluated_key {
            Some(k) if !k.is_empty() => k
                .get("gsi1sk")
                .and_then(|v| v.as_s().ok())
                .map(|id| encode_cursor(id)),
            _ => None,
        };
        Ok(JobPage {
            jobs,
            unreadable,
            next,
        })
    }

    async fn transition_job(
        &self,
        id: &JobId,
        from: JobState,
        to: JobState,
        at: DateTime<Utc>,
        reason: &str,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        self.write_transition(id, from, to, at, reason, update)
            .await
    }

    async fn mark_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        self.write_mark(id, at, update).await
    }

    async fn decide_awaiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        self.write_decision(id, at, update).await
    }

    async fn active_jobs_page(
        &self,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<ListedPage<JobRecord>, StoreError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :a")
            .expression_attribute_values(":a", s(ACTIVE))
            .limit(limit.clamp(1, 1000) as i32);
        if let Some(c) = cursor {
            let (sk, id) = decode_gsi3_cursor(c).ok_or(StoreError::NotFound {
                kind: "cursor",
                id: c.to_string(),
            })?;
            // A GSI's ExclusiveStartKey: the table's key and the index's key of the last item.
            let mut start = job_key(&id);
            start.insert("gsi3pk".into(), s(ACTIVE));
            start.insert("gsi3sk".into(), s(sk));
            q = q.set_exclusive_start_key(Some(start));
        }
        let out = q.send().await.map_err(|e| aws("dynamodb", e))?;
        let next = match out.last_evaluated_key {
            Some(k) if !k.is_empty() => k
                .get("gsi3sk")
                .and_then(|v| v.as_s().ok())
                .map(|sk| encode_gsi3_cursor(sk)),
            _ => None,
        };
        Ok(ListedPage {
            listed: decode_listed(out.items.unwrap_or_default(), |j| j.record),
            next,
        })
    }

    async fn offered_jobs(&self, pool: &str, limit: u32) -> Result<Listed<JobRecord>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi2")
            .key_condition_expression("gsi2pk = :p")
            .expression_attribute_values(":p", s(pool_partition(pool)))
            .limit(limit.clamp(1, 100) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(decode_listed(out.items.unwrap_or_default(), |j| j.record))
    }

    async fn heartbeat_job(
        &self,
        id: &JobId,
        task: &sortie_core::TaskRef,
        at: DateTime<Utc>,
    ) -> Result<JobRecord, StoreError> {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression("SET #agent.heartbeat_at = :at")
            .condition_expression("#state = :r AND task_arn = :task AND attribute_exists(#agent)")
            .expression_attribute_names("#state", "state")
            .expression_attribute_names("#agent", "agent")
            .expression_attribute_values(":r", s(JobState::Running.as_str()))
            .expression_attribute_values(":task", s(task.as_str()))
            .expression_attribute_values(":at", s(at.to_rfc3339()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(from_item::<JobItem>(out.attributes.unwrap_or_default())?.record),
            Err(e) if condition_failed(&e) => Err(self.job_conflict(id, JobState::Running).await?),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn cancel_waiting_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<JobRecord, StoreError> {
        self.cancel_queued(id, at, reason).await
    }

    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<Released, StoreError> {
        self.release_lock(env, job_id).await
    }

    async fn pending_sends(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<Job>, StoreError> {
        let items = self.gsi3_before(PENDING, before, limit).await?;
        Ok(decode_listed(items, |j| j.record.job))
    }

    async fn ended_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError> {
        let items = self.gsi3_before(ENDED, before, limit).await?;
        Ok(decode_listed(items, |j| j.record))
    }

    async fn approvals_due(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Listed<JobRecord>, StoreError> {
        let items = self.gsi3_before(AWAITING, before, limit).await?;
        Ok(decode_listed(items, |j| j.record))
    }

    async fn settle_ended_job(&self, id: &JobId) -> Result<(), StoreError> {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression("REMOVE gsi3pk, gsi3sk")
            .condition_expression("gsi3pk = :e")
            .expression_attribute_values(":e", s(ENDED))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Ok(()),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn sweep_cursor(&self) -> Result<crate::SweepCursor, StoreError> {
        let Some(item) = self.get_item(sweep_cursor_key()).await? else {
            return Ok(crate::SweepCursor::default());
        };
        let version = item
            .get("version")
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let cursor = item.get("cursor").and_then(|v| v.as_s().ok()).cloned();
        Ok(crate::SweepCursor { cursor, version })
    }

    async fn save_sweep_cursor(
        &self,
        cursor: Option<&str>,
        expected: u64,
    ) -> Result<u64, StoreError> {
        // Names for every attribute: `CURSOR` is one of DynamoDB's reserved words.
        let mut update = "SET #v = :next, #k = :kind".to_string();
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(sweep_cursor_key()))
            .expression_attribute_values(":next", n(expected + 1))
            .expression_attribute_values(":kind", s("sweep_cursor"))
            .expression_attribute_names("#v", "version")
            .expression_attribute_names("#k", "kind");
        match cursor {
            Some(c) => {
                update.push_str(", #c = :c");
                req = req
                    .expression_attribute_values(":c", s(c))
                    .expression_attribute_names("#c", "cursor");
            }
            None => {
                update.push_str(" REMOVE #c");
                req = req.expression_attribute_names("#c", "cursor");
            }
        }
        req = if expected == 0 {
            req.condition_expression("attribute_not_exists(#v)")
        } else {
            req.condition_expression("#v = :v")
                .expression_attribute_values(":v", n(expected))
        };
        match req.update_expression(update).send().await {
            Ok(_) => Ok(expected + 1),
            Err(e) if condition_failed(&e) => Err(StoreError::VersionMismatch {
                kind: "sweep cursor",
                id: "SWEEP".into(),
                expected,
                actual: self.sweep_cursor().await?.version,
            }),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn fail_unreadable_job(
        &self,
        job: &Unreadable,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError> {
        self.fail_unreadable(job, at, reason).await
    }
}

/// The key of the item holding the sweep's cursor.
fn sweep_cursor_key() -> crate::dynamo::Item {
    crate::dynamo::keys::key("SWEEP".into(), "CURSOR")
}
