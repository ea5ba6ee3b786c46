//! Runs that follow other runs: the trigger graph's check at write time, and the jobs a
//! successful apply with changed outputs submits to its downstream environments.
//!
//! The rules are [`sortie_core::triggers`]'s; this module reads the graph (one bounded
//! Query of the organisation's environments), the outputs (the artifacts bucket) and
//! submits through [`JobService::submit_for`]. docs/decisions/environment-life.md,
//! "Triggers".

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Map, Value};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::triggers::{self, TriggerContext, TRIGGER_GRAPH_MAX, TRIGGER_PRINCIPAL};
use sortie_core::{EnvPath, GroupPath, JobId, JobState, Problems};
use sortie_store::{EnvironmentRecord, EnvironmentStore, IdempotencyKey, JobRecord, StoreError};
use tracing::{info, warn};

use crate::submit::{JobOrder, WriteMode};
use crate::JobService;

/// How many of a downstream environment's newest jobs are searched for a queued trigger.
const QUEUED_SEARCH: u32 = 25;

/// The trigger graph of `org`: each environment's upstream list (only those with one).
/// `Invalid` when the organisation has more than [`TRIGGER_GRAPH_MAX`] environments.
pub async fn graph(
    store: &dyn EnvironmentStore,
    org: &str,
) -> Result<BTreeMap<EnvPath, Vec<EnvPath>>, StoreError> {
    let group = GroupPath::parse(org).map_err(|e| StoreError::Invalid {
        path: "triggers".into(),
        problem: e.first_problem(),
    })?;
    let listed = store
        .list_environments_under(&group, TRIGGER_GRAPH_MAX)
        .await?;
    if listed.truncated {
        return Err(StoreError::Invalid {
            path: "triggers".into(),
            problem: format!(
                "organisation `{org}` has more than {TRIGGER_GRAPH_MAX} environments: the trigger graph cannot be checked for cycles"
            ),
        });
    }
    Ok(listed
        .environments
        .into_iter()
        .map(|v| v.item.environment)
        .filter(|e| !e.settings.triggers.is_empty())
        .map(|e| (e.path, e.settings.triggers))
        .collect())
}

/// Checks `env`'s new upstream list before it is written: the list itself, that each
/// upstream exists, and that no cycle results (the cycle is named). `Invalid` with the
/// field `triggers` when refused.
pub async fn check(
    store: &dyn EnvironmentStore,
    env: &EnvPath,
    upstreams: &[EnvPath],
) -> Result<(), StoreError> {
    if upstreams.is_empty() {
        return Ok(());
    }
    let mut p = Problems::default();
    triggers::check_triggers(env, upstreams, "triggers", &mut p);
    if let Some(first) = p.0.into_iter().next() {
        return Err(StoreError::Invalid {
            path: first.path,
            problem: first.problem,
        });
    }
    for (i, up) in upstreams.iter().enumerate() {
        match store.get_environment(up).await {
            Ok(_) => {}
            Err(StoreError::NotFound { .. }) => {
                return Err(StoreError::Invalid {
                    path: format!("triggers[{i}]"),
                    problem: format!("environment `{up}` does not exist"),
                })
            }
            Err(e) => return Err(e),
        }
    }
    let graph = graph(store, env.org()).await?;
    if let Some(cycle) = triggers::find_cycle(&graph, env, upstreams) {
        return Err(StoreError::Invalid {
            path: "triggers".into(),
            problem: format!("would make a cycle: {}", triggers::describe_cycle(&cycle)),
        });
    }
    Ok(())
}

impl JobService {
    /// The outputs a succeeded apply uploaded (`terraform output -json`); `None` when they
    /// cannot be read (no artifacts bucket, none uploaded, not an object).
    pub async fn apply_outputs(&self, job_id: &JobId) -> Option<Map<String, Value>> {
        let artifacts = self.gate.artifacts.as_ref()?;
        match crate::job_artifacts::read_outputs(artifacts.as_ref(), job_id).await {
            Ok(outputs) => Some(outputs),
            Err(e) => {
                warn!(error = %e, job_id = %job_id, "could not read an apply's outputs");
                None
            }
        }
    }

    /// After apply `ended` succeeded on an environment whose previous apply was `previous`:
    /// when its outputs changed, each downstream environment gets a job (best effort: every
    /// failure is logged). Returns the jobs submitted.
    pub async fn fire_triggers(&self, ended: &JobRecord, previous: Option<&JobId>) -> Vec<JobId> {
        let upstream = &ended.job.environment;
        let Some(now) = self.apply_outputs(&ended.job.id).await else {
            return vec![];
        };
        let before = match previous {
            Some(id) => self.apply_outputs(id).await,
            None => None,
        };
        if !triggers::outputs_changed(before.as_ref(), &now) {
            info!(environment = %upstream, "outputs unchanged: no trigger");
            return vec![];
        }
        let graph = match graph(self.store.as_ref(), upstream.org()).await {
            Ok(g) => g,
            Err(e) => {
                warn!(error = %e, "could not read the trigger graph");
                return vec![];
            }
        };
        let mut submitted = vec![];
        for downstream in triggers::downstream_of(&graph, upstream) {
            match self.trigger(&downstream, ended, &now).await {
                Ok(Some(id)) => {
                    info!(downstream = %downstream, job_id = %id, "trigger submitted");
                    submitted.push(id);
                }
                Ok(None) => {}
                Err(e) => warn!(downstream = %downstream, error = %e, "trigger not submitted"),
            }
        }
        submitted
    }

    /// Submits the job `ended`'s changed outputs ask of `downstream`: its latest apply's
    /// request again, as its `trigger_operation`, with its `trigger_inputs` from its
    /// upstreams' outputs. A trigger's job still queued there is replaced (canceled, as
    /// superseded), so the environment has one queued trigger, carrying the newest outputs.
    async fn trigger(
        &self,
        downstream: &EnvPath,
        ended: &JobRecord,
        fresh: &Map<String, Value>,
    ) -> Result<Option<JobId>, crate::SubmitError> {
        let record: EnvironmentRecord = self.store.get_environment(downstream).await?.item;
        let env = &record.environment;
        if let Some(destroyed) = &record.destroyed {
            // Its submit would be refused (`SubmitError::Destroyed`); a queued trigger there
            // is left as it is, not superseded by a job that cannot be written.
            info!(downstream = %downstream, destroyed_at = %destroyed.at, "destroyed: no trigger until it is extended");
            return Ok(None);
        }
        let Some(last) = &record.last_apply else {
            info!(downstream = %downstream, "no apply yet: nothing to plan, no trigger");
            return Ok(None);
        };
        let template = self.store.get_job(&last.job_id).await?;
        let mut order = JobOrder::again(
            &template.job.request,
            env.settings.trigger_operation.operation(),
            TRIGGER_PRINCIPAL,
            Utc::now(),
        );
        // The inputs, from each upstream in order: the one that just applied, fresh.
        let mut outputs = vec![];
        for up in &env.settings.triggers {
            if up == &ended.job.environment {
                outputs.push((up.clone(), fresh.clone()));
                continue;
            }
            let last = match self.store.get_environment(up).await {
                Ok(u) => u.item.last_apply,
                Err(_) => None,
            };
            if let Some(l) = last {
                if let Some(o) = self.apply_outputs(&l.job_id).await {
                    outputs.push((up.clone(), o));
                }
            }
        }
        let inputs = triggers::trigger_inputs(&env.settings.trigger_inputs, &outputs);
        if !inputs.missing.is_empty() {
            warn!(missing = ?inputs.missing, "trigger inputs no upstream has");
        }
        for name in inputs.sensitive.keys() {
            order.request.variables.remove(name);
        }
        order.request.variables.extend(inputs.plain);
        order.sensitive = SensitiveValues::new(inputs.sensitive);
        order.trigger = Some(TriggerContext {
            upstream: ended.job.environment.clone(),
            upstream_job_id: ended.job.id.clone(),
        });
        // One queued trigger: a queued one is superseded by this one.
        let page = self
            .store
            .list_jobs(downstream, QUEUED_SEARCH, None)
            .await?;
        let queued = page.jobs.into_iter().find(|j| {
            j.job.state == JobState::Queued
                && j.job.requested_by == TRIGGER_PRINCIPAL
                && record.active_job.as_ref() != Some(&j.job.id)
        });
        let key_by = match &queued {
            Some(q) => {
                let by = format!(
                    "{TRIGGER_PRINCIPAL} (superseded by the trigger of job {})",
                    ended.job.id
                );
                // Boxed: a cancel ends the job, and an end may fire triggers.
                Box::pin(self.cancel(q, &by)).await?;
                q.job.id.to_string()
            }
            None => record
                .active_job
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| ended.job.id.to_string()),
        };
        // Two upstream ends racing to replace the same queued job (or to queue behind the
        // same active one) write one job: the second replays the first's.
        order.write = WriteMode::Queue(Some(IdempotencyKey {
            key: format!("{TRIGGER_PRINCIPAL}/{downstream}/{key_by}"),
            request_hash: TRIGGER_PRINCIPAL.into(),
        }));
        let submitted = self.submit_for(env, order).await?;
        Ok((!submitted.replayed).then_some(submitted.job.id))
    }
}
