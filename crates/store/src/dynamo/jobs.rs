//! Jobs: submission under the environment lock (the job, the lock or a queue entry, and
//! the idempotency key in one transaction), conditional transitions, and the sparse gsi3
//! index the sweeper reads.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use sortie_core::{EnvPath, Job, JobId, JobState, Transition};

use super::items::{checked_item, from_item, job_item, JobItem};
use super::keys::{env_key, job_key, key, pending_sk, queue_key, ACTIVE, AWAITING, ENDED, PENDING};
use super::unreadable::decode_listed;
use super::{attribute, condition_failed, n, s, DynamoStore, Item, TxOutcome, RETRIES};
use crate::cursor::{decode_cursor, decode_gsi3_cursor, encode_cursor, encode_gsi3_cursor};
use crate::error::aws;
use crate::sortkeys::{job_sk, sort_time};
use crate::{
    IdempotencyKey, JobPage, JobRecord, JobStore, JobUpdate, Listed, ListedPage, Released,
    StoreError, Submitted, Unreadable,
};

/// `SET …` and, when any, ` REMOVE …`.
fn update_expression(set: &[&str], remove: &[&str]) -> String {
    let mut expr = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    expr
}

/// A transition whose history must be rewritten (it folds, or the history is full): the
/// rest of its update, and the transition.
struct HistoryRewrite {
    set: Vec<&'static str>,
    remove: Vec<&'static str>,
    names: HashMap<String, String>,
    values: Item,
    condition: String,
    transition: Transition,
}

impl DynamoStore {
    /// Writes a transition whose history folds or is full: the history of `old` (the item
    /// as it was) with the transition recorded ([`sortie_core::retry::record_transition`]),
    /// in one conditional UpdateItem that also requires the history unchanged since `old`
    /// (its length and version). `None` when `old` is not in `from`, or the item changed.
    async fn rewrite_history(
        &self,
        id: &JobId,
        from: JobState,
        old: Item,
        w: HistoryRewrite,
    ) -> Result<Option<JobRecord>, StoreError> {
        let version = old.get("tversion").cloned();
        let record = from_item::<JobItem>(old)?.record;
        if record.job.state != from {
            return Ok(None);
        }
        let mut history = record.job.transitions.clone();
        let before = history.len();
        let mut dropped = record.job.transitions_dropped;
        sortie_core::retry::record_transition(&mut history, &mut dropped, w.transition);
        let key = |t: Option<&Transition>| {
            t.map_or_else(
                || "-".to_string(),
                |t| sortie_core::retry::fold_key(t.from, t.to, &t.reason),
            )
        };
        let (k1, k2) = (
            key(history.last()),
            key(history.len().checked_sub(2).and_then(|i| history.get(i))),
        );
        let mut set = w.set;
        set.extend([
            "transitions = :list",
            "transitions_dropped = :dropped",
            "tkey1 = :tk1",
            "tkey2 = :tk2",
            "tversion = if_not_exists(tversion, :zero) + :one",
        ]);
        let mut values = w.values;
        values.extend([
            (
                ":list".to_string(),
                serde_dynamo::to_attribute_value(&history).expect("transitions serialise"),
            ),
            (":dropped".to_string(), n(i64::from(dropped))),
            (":tk1".to_string(), s(k1)),
            (":tk2".to_string(), s(k2)),
            (":zero".to_string(), n(0)),
            (":one".to_string(), n(1)),
            (":n".to_string(), n(before as i64)),
        ]);
        let mut condition = format!("{} AND size(transitions) = :n", w.condition);
        match version {
            Some(v) => {
                condition.push_str(" AND tversion = :tv");
                values.insert(":tv".into(), v);
            }
            None => condition.push_str(" AND attribute_not_exists(tversion)"),
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression(update_expression(&set, &w.remove))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(w.names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(Some(
                from_item::<JobItem>(out.attributes.unwrap_or_default())?.record,
            )),
            Err(e) if condition_failed(&e) => Ok(None),
            Err(e) => Err(aws("dynamodb", e)),
        }
    }
}

/// Adds the optional attributes of a job update to an update expression.
fn add_update(
    update: &JobUpdate,
    set: &mut Vec<&'static str>,
    remove: &mut Vec<&'static str>,
    names: &mut HashMap<String, String>,
    values: &mut Item,
) {
    if let Some(v) = &update.task {
        set.push("task_arn = :arn");
        values.insert(":arn".into(), s(v.as_str()));
    }
    if let Some(v) = &update.token_hash {
        set.push("token_hash = :th");
        values.insert(":th".into(), s(v));
    }
    if let Some(v) = &update.started_at {
        set.push("started_at = :sa");
        values.insert(":sa".into(), s(v.to_rfc3339()));
    }
    if let Some(v) = &update.cancel_requested_by {
        set.push("cancel_requested_by = :cr");
        values.insert(":cr".into(), s(v));
    }
    if let Some(v) = &update.timeout_requested_at {
        set.push("timeout_requested_at = :tr");
        values.insert(":tr".into(), s(v.to_rfc3339()));
    }
    if let Some(v) = &update.summary {
        set.push("summary = :sum");
        values.insert(":sum".into(), attribute(v));
    }
    if update.next_attempt || update.spot_requeue {
        values.insert(":zero".into(), n(0));
        values.insert(":one".into(), n(1));
    }
    if update.next_attempt {
        set.push("attempt = if_not_exists(attempt, :zero) + :one");
    }
    if update.spot_requeue {
        set.push("spot_requeues = if_not_exists(spot_requeues, :zero) + :one");
    }
    if update.clear_task {
        remove.push("task_arn, started_at, timeout_requested_at");
    }
    if let Some(v) = &update.upload_problems {
        set.push("upload_problems = :up");
        values.insert(":up".into(), AttributeValue::L(v.iter().map(s).collect()));
    }
    // Set through attribute names: `review` and friends are not reserved words, but `at`
    // inside them is, and one form for all keeps the expression uniform.
    let mut set_named = |expr: &'static str, name: &'static str, value: AttributeValue| {
        set.push(expr);
        names.insert(format!("#{name}"), name.to_string());
        values.insert(format!(":{name}"), value);
    };
    if let Some(v) = &update.review {
        set_named("#review = :review", "review", attribute(v));
    }
    if let Some(v) = &update.plan_phase {
        set_named("#plan_phase = :plan_phase", "plan_phase", attribute(v));
    }
    if let Some(v) = &update.tool_used {
        set_named("#tool_used = :tool_used", "tool_used", attribute(v));
    }
    if let Some(v) = &update.agent {
        set_named("#agent = :agent", "agent", attribute(v));
    }
    if let Some(v) = update.apply_log_offset {
        set.push("apply_log_offset = :alo");
        values.insert(":alo".into(), n(v));
    }
    // A summary given with it is the new one: set, not removed (one path, one action).
    if update.clear_summary && update.summary.is_none() {
        remove.push("summary");
    }
    if update.agent.is_none() && update.clear_task {
        remove.push("#agent");
        names.insert("#agent".into(), "agent".into());
    }
    if let Some(v) = &update.agent_stop {
        // The first stop ordered wins: a timeout after a cancel keeps the cancel's time.
        set.push("#agent.#stop = if_not_exists(#agent.#stop, :agent_stop)");
        names.insert("#agent".into(), "agent".into());
        names.insert("#stop".into(), "stop".into());
        values.insert(":agent_stop".into(), attribute(v));
    }
}

/// The gsi2 partition of the jobs offered to an agent pool.
fn pool_partition(pool: &str) -> String {
    format!("POOL#{pool}")
}

impl DynamoStore {
    /// Why a conditional write on job `id` expecting `expected` failed: the state found
    /// (`StateConflict`), or `NotFound`.
    async fn job_conflict(&self, id: &JobId, expected: JobState) -> Result<StoreError, StoreError> {
        Ok(match self.read_job(id).await? {
            Some(j) => StoreError::StateConflict {
                job_id: id.to_string(),
                expected,
                actual: j.record.job.state,
            },
            None => StoreError::NotFound {
                kind: "job",
                id: id.to_string(),
            },
        })
    }

    /// The items of gsi3 partition `partition` whose sort key (`<time>#<id>`) is before
    /// `before`, oldest first, at most `limit`: the sweeper's work lists.
    async fn gsi3_before(
        &self,
        partition: &str,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Item>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name("gsi3")
            .key_condition_expression("gsi3pk = :p AND gsi3sk < :before")
            .expression_attribute_values(":p", s(partition))
            .expression_attribute_values(":before", s(sort_time(before)))
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(out.items.unwrap_or_default())
    }
}

#[async_trait]
impl JobStore for DynamoStore {
    async fn submit_job(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let env = &job.environment;
        let idem_item = idempotency.map(|k| {
            let mut item = key(format!("IDEM#{env}#{}", k.key), "IDEM");
            item.insert("kind".into(), s("idempotency"));
            item.insert("job_id".into(), s(&job.id));
            item.insert("request_hash".into(), s(&k.request_hash));
            item.insert(
                "expires_at".into(),
                n(Utc::now().timestamp() + crate::records::IDEMPOTENCY_KEY_SECONDS),
            );
            item
        });
        // Every check before any write: DynamoDB's limits, and that each item we may write
        // reads back. A refused input leaves nothing behind.
        let holding = checked_item("job", &job_item(job, true))?;
        if let Some(i) = &idem_item {
            super::items::check_item("idempotency key", i)?;
        }
        match self
            .submit_attempts(job, &holding, idem_item.as_ref(), idempotency)
            .await
        {
            // An answer lost on the way back (a timeout, a 5xx after the commit): the job id is
            // new, so the job item tells whether the transaction committed. Never report
            // "not applied" for a submit that was.
            Err(e) if e.is_retryable() => match self.read_job(&job.id).await {
                Ok(Some(found)) if found.record.job == *job => {
                    let env = self.read_env(env).await?;
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
        // The core state machine checks the transition; the write checks the current state.
        // One UpdateItem, no read first: this is the dispatch hot path.
        if !from.can_become(to) {
            return Err(StoreError::StateConflict {
                job_id: id.to_string(),
                expected: from,
                actual: from,
            });
        }
        let transition = Transition::new(Some(from), to, at, reason);
        let mut set = vec!["#state = :to", "updated_at = :now"];
        let mut remove: Vec<&'static str> = vec![];
        let mut values: Item = HashMap::from([
            (":to".to_string(), s(to.as_str())),
            (":from".to_string(), s(from.as_str())),
            (":now".to_string(), s(at.to_rfc3339())),
        ]);
        let mut names = HashMap::from([("#state".to_string(), "state".to_string())]);
        add_update(&update, &mut set, &mut remove, &mut names, &mut values);
        // Leaving `dispatching` takes the job off its agent pool's offers (claimed, canceled
        // or requeued alike).
        if from == JobState::Dispatching {
            remove.push("offered_to, gsi2pk, gsi2sk");
        }
        let mut condition = "#state = :from".to_string();
        if let Some(pool) = &update.claim_from {
            condition
                .push_str(" AND offered_to = :pool AND attribute_not_exists(cancel_requested_by)");
            values.insert(":pool".into(), s(pool));
        }
        // The sparse gsi3 index: PENDING while a lock holder waits to be sent (queued),
        // ACTIVE while launched (dispatching, running), AWAITING while it awaits approval
        // (holding the lock; by approval deadline), ENDED once terminal until the sweeper has
        // seen its environment released (`settle_ended_job`).
        let (partition, since) = if to == JobState::Queued {
            (PENDING, update.retry_at.unwrap_or(at))
        } else if to.is_active() {
            (ACTIVE, at)
        } else if to == JobState::AwaitingApproval {
            (AWAITING, update.approval_deadline.unwrap_or(at))
        } else {
            (ENDED, at)
        };
        set.push("gsi3pk = :g3");
        set.push("gsi3sk = :g3s");
        values.insert(":g3".into(), s(partition));
        values.insert(":g3s".into(), s(job_sk(since, id)));
        // The history (issue 25 item 1): appended with `list_append` when the new transition
        // folds into neither of the last two and the history is short, which the condition
        // checks against the fold keys of the last two kept beside it (`tkey1`, `tkey2`).
        // Else the condition fails, and the history is rewritten from the item as it was.
        let mut fast_set = set.clone();
        fast_set.extend([
            "transitions = list_append(transitions, :t)",
            "tkey2 = if_not_exists(tkey1, :nokey)",
            "tkey1 = :tk",
            "tversion = if_not_exists(tversion, :zero) + :one",
        ]);
        let mut fast_values = values.clone();
        fast_values.extend([
            (
                ":t".to_string(),
                AttributeValue::L(vec![
                    serde_dynamo::to_attribute_value(&transition).expect("transition serialises")
                ]),
            ),
            (
                ":tk".to_string(),
                s(sortie_core::retry::fold_key(Some(from), to, reason)),
            ),
            (":nokey".to_string(), s("-")),
            (":zero".to_string(), n(0)),
            (":one".to_string(), n(1)),
            (
                ":hmax".to_string(),
                n(sortie_core::retry::HISTORY_MAX as i64),
            ),
        ]);
        let fast_condition = format!(
            "{condition} AND size(transitions) < :hmax \
             AND (attribute_not_exists(tkey1) OR (tkey1 <> :tk AND tkey2 <> :tk))"
        );
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression(update_expression(&fast_set, &remove))
            .condition_expression(fast_condition)
            .set_expression_attribute_names(Some(names.clone()))
            .set_expression_attribute_values(Some(fast_values))
            .return_values(ReturnValue::AllNew)
            // A refused write answers the item as it is: our own earlier write shows in it.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(out) => Ok(from_item::<JobItem>(out.attributes.unwrap_or_default())?.record),
            Err(e) if condition_failed(&e) => {
                // DynamoDB committed an earlier try whose answer was lost, and the SDK's retry
                // failed its own condition: the item shows that write, so it succeeded.
                let found = match e.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(c)) => c.item.clone(),
                    _ => None,
                };
                if let Some(item) = &found {
                    if let Ok(found) = from_item::<JobItem>(item.clone()) {
                        if found
                            .record
                            .shows_own_write(to, update.token_hash.as_deref())
                        {
                            return Ok(found.record);
                        }
                    }
                }
                // Still in `from`: the history folds or is full, so it is rewritten.
                let old = match found {
                    Some(item) => Some(item),
                    None => self.get_item(job_key(id)).await?,
                };
                if let Some(old) = old {
                    let rewrite = HistoryRewrite {
                        set,
                        remove,
                        names,
                        values,
                        condition,
                        transition,
                    };
                    if let Some(done) = self.rewrite_history(id, from, old, rewrite).await? {
                        return Ok(done);
                    }
                }
                Err(self.job_conflict(id, from).await?)
            }
            Err(e) => Err(aws("dynamodb", e)),
        }
    }

    async fn mark_job(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let mut set = vec!["updated_at = :now"];
        let mut values: Item = HashMap::from([
            (":now".to_string(), s(at.to_rfc3339())),
            (":d".to_string(), s(JobState::Dispatching.as_str())),
            (":r".to_string(), s(JobState::Running.as_str())),
        ]);
        let mut remove = vec![];
        let mut names = HashMap::from([("#state".to_string(), "state".to_string())]);
        add_update(&update, &mut set, &mut remove, &mut names, &mut values);
        let mut condition = "#state IN (:d, :r)";
        if let Some(pool) = &update.offer_to {
            // Offered while `dispatching` and unlaunched only: a claimed job is never offered again.
            set.push("offered_to = :pool, gsi2pk = :g2, gsi2sk = :g2s");
            values.insert(":pool".into(), s(pool));
            values.insert(":g2".into(), s(pool_partition(pool)));
            values.insert(":g2s".into(), s(job_sk(at, id)));
            condition = "#state = :d AND attribute_not_exists(task_arn)";
            values.remove(":r");
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(id)))
            .update_expression(expr)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match res {
            Ok(out) => Ok(from_item::<JobItem>(out.attributes.unwrap_or_default())?.record),
            Err(e) if condition_failed(&e) => Err(self.job_conflict(id, JobState::Running).await?),
            Err(e) => Err(aws("dynamodb", e)),
        }
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

    async fn release_environment(
        &self,
        env: &EnvPath,
        job_id: &JobId,
    ) -> Result<Released, StoreError> {
        for _ in 0..RETRIES {
            let Some(current) = self.read_env(env).await? else {
                return Ok(Released::NotHeld);
            };
            if current.record.active_job.as_deref() != Some(job_id) {
                return Ok(Released::NotHeld);
            }
            let next = self
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
                Some((position, next_id)) => {
                    let next_job = match self.read_job(&next_id).await {
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

    async fn fail_unreadable_job(
        &self,
        job: &Unreadable,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError> {
        let Some(raw) = self.get_item(job_key(&job.job_id)).await? else {
            return Err(StoreError::NotFound {
                kind: "job",
                id: job.job_id.to_string(),
            });
        };
        if let Ok(readable) = from_item::<JobItem>(raw.clone()) {
            // Readable again (repaired meanwhile): nothing to rewrite.
            return Ok(Some(readable.record));
        }
        // Keep what still decodes of its history, and record the failure as its last transition.
        let mut transitions: Vec<Transition> = raw
            .get("transitions")
            .and_then(|v| serde_dynamo::from_attribute_value(v.clone()).ok())
            .unwrap_or_default();
        let from = raw
            .get("state")
            .and_then(|v| serde_dynamo::from_attribute_value::<_, JobState>(v.clone()).ok());
        transitions.push(Transition::new(from, JobState::Failed, at, reason));
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(job_key(&job.job_id)))
            .update_expression(
                "SET #state = :failed, transitions = :ts, updated_at = :now \
                 REMOVE gsi3pk, gsi3sk, queue_sk",
            )
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":failed", s(JobState::Failed.as_str()))
            .expression_attribute_values(
                ":ts",
                serde_dynamo::to_attribute_value(&transitions).expect("transitions serialise"),
            )
            .expression_attribute_values(":now", s(at.to_rfc3339()))
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(self
            .read_job(&job.job_id)
            .await
            .ok()
            .flatten()
            .map(|j| j.record))
    }
}
