//! A job's conditional writes: a transition (one UpdateItem, its history appended, or
//! rewritten when it folds or is full), a mark (attributes only), and why a refused
//! write was refused.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use sortie_core::{JobId, JobState, Transition};

use super::pool_partition;
use crate::dynamo::items::{from_item, JobItem};
use crate::dynamo::keys::{job_key, ACTIVE, AWAITING, ENDED, PENDING};
use crate::dynamo::{attribute, condition_failed, n, s, DynamoStore, Item};
use crate::error::aws;
use crate::sortkeys::job_sk;
use crate::{JobRecord, JobUpdate, StoreError};

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
        self.update_returning(
            job_key(id),
            &update_expression(&set, &w.remove),
            &condition,
            w.names,
            values,
        )
        .await?
        .map(|item| Ok(from_item::<JobItem>(item)?.record))
        .transpose()
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
    if update.end_try {
        values.insert(":zero".into(), n(0));
        values.insert(":one".into(), n(1));
        set.push("end_tries = if_not_exists(end_tries, :zero) + :one");
        set.push("end_tries_since = if_not_exists(end_tries_since, :now)");
    }
    if let Some(v) = &update.end_error {
        set.push("end_error = :ee");
        values.insert(":ee".into(), s(v));
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
    if let Some(v) = &update.state_written {
        set_named(
            "#state_written = :state_written",
            "state_written",
            attribute(v),
        );
    }
    if let Some(v) = &update.agent {
        set_named("#agent = :agent", "agent", attribute(v));
    }
    if let Some(v) = &update.policy {
        set_named("#policy = :policy", "policy", attribute(v));
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

impl DynamoStore {
    /// Why a conditional write on job `id` expecting `expected` failed: the state found
    /// (`StateConflict`), or `NotFound`.
    pub(super) async fn job_conflict(
        &self,
        id: &JobId,
        expected: JobState,
    ) -> Result<StoreError, StoreError> {
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

    /// [`crate::JobStore::transition_job`]: `from` to `to` in one conditional UpdateItem, with
    /// `update`'s attributes and the sparse gsi3 entry of the new state.
    pub(super) async fn write_transition(
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
        if crate::audit::pending() {
            // A person's decision (approve, discard, cancel): the transition and its audit
            // entry in one transaction, whose retry is idempotent (its client request token).
            if let Some(item) = self
                .update_returning(
                    job_key(id),
                    &update_expression(&fast_set, &remove),
                    &fast_condition,
                    names.clone(),
                    fast_values.clone(),
                )
                .await?
            {
                return Ok(from_item::<JobItem>(item)?.record);
            }
            // Refused: the history folds or is full; rewritten below, with the entry.
            if let Some(old) = self.get_item(job_key(id)).await? {
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
            return Err(self.job_conflict(id, from).await?);
        }
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

    /// [`crate::JobStore::decide_awaiting_job`]: `update` written on condition that the
    /// job awaits approval and its review has no decision yet.
    pub(super) async fn write_decision(
        &self,
        id: &JobId,
        at: DateTime<Utc>,
        update: JobUpdate,
    ) -> Result<JobRecord, StoreError> {
        let mut set = vec!["updated_at = :now"];
        let mut values: Item = HashMap::from([
            (":now".to_string(), s(at.to_rfc3339())),
            (":aw".to_string(), s(JobState::AwaitingApproval.as_str())),
        ]);
        let mut remove = vec![];
        let mut names = HashMap::from([
            ("#state".to_string(), "state".to_string()),
            ("#rv".to_string(), "review".to_string()),
            ("#decision".to_string(), "decision".to_string()),
        ]);
        add_update(&update, &mut set, &mut remove, &mut names, &mut values);
        let condition = "#state = :aw AND attribute_not_exists(#rv.#decision)";
        self.update_in_place(
            id,
            JobState::AwaitingApproval,
            (&set, &remove),
            condition,
            names,
            values,
        )
        .await
    }

    /// [`crate::JobStore::mark_job`]: `update`'s attributes on a dispatching or running job,
    /// or an offer to an agent pool on an unlaunched dispatching one.
    pub(super) async fn write_mark(
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
        self.update_in_place(
            id,
            JobState::Running,
            (&set, &remove),
            condition,
            names,
            values,
        )
        .await
    }

    /// One conditional UpdateItem of a job that keeps its state (a mark, a decision): the
    /// `SET` and `REMOVE` parts joined into its expression; a failed `condition` is the
    /// job's `StateConflict` against `expected` (or `NotFound`).
    async fn update_in_place(
        &self,
        id: &JobId,
        expected: JobState,
        (set, remove): (&[&str], &[&str]),
        condition: &str,
        names: HashMap<String, String>,
        values: Item,
    ) -> Result<JobRecord, StoreError> {
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        match self
            .update_returning(job_key(id), &expr, condition, names, values)
            .await?
        {
            Some(item) => Ok(from_item::<JobItem>(item)?.record),
            None => Err(self.job_conflict(id, expected).await?),
        }
    }
}
