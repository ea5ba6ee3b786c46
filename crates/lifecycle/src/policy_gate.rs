//! The policy gate, where a plan ends and before anything is applied.
//!
//! An apply or destroy submitted to an environment that at least one policy set applies
//! to runs in two phases, like a reviewed job ([`JobService::gate_at_submit`]): its plan
//! phase saves the plan and uploads `plan.json`. When that phase ends, the gate reads the
//! STORED `plan.json` (never the runner's word), evaluates the sets in force at that moment
//! (compiled sets cached by version), records the result on the job, publishes
//! `sortie.job.policy_checked`, and then ([`sortie_core::policy::gate::verdict`]):
//! - a mandatory deny fails the job (`policy_denied: ...`; nothing was applied, and the
//!   lock is released through [`JobService::end`]);
//! - a review deny or a warning holds it in `awaiting_approval` with the messages, even
//!   with approval `auto`;
//! - otherwise, with approval `auto` the apply phase is approved at once by
//!   [`POLICY_PRINCIPAL`]; with `required` the job awaits a person as before.
//!
//! Plan jobs are checked too, and a mandatory deny fails them (a CI check sees the
//! failure); a drift check is checked and its result published (`violation` in the
//! event), but its state stays the drift verdict's.

use std::sync::Arc;

use chrono::Utc;
use serde_json::json;
use sortie_core::end_retry::{cut, QUOTED_ERROR_MAX_BYTES};
use sortie_core::job::JobPhase;
use sortie_core::plan::{PLAN_JSON_MAX_BYTES, TOO_LARGE};
use sortie_core::policy::gate::{self, GateVerdict, POLICY_PRINCIPAL};
use sortie_core::policy::{PolicyResult, PolicySet, SetResult};
use sortie_core::{Environment, JobState, Operation, Outcome, ReviewDecision, ReviewVerdict};
use sortie_policy::{Limits, PlanInput, PreparedInput, SetCache};
use sortie_store::{Artifacts, JobRecord, JobUpdate, StoreError};
use tracing::{info, warn};

use crate::{JobService, JOB_POLICY_CHECKED};

/// What the gate needs beyond the store: where `plan.json` is read, and the compiled sets.
#[derive(Clone, Default)]
pub struct PolicyGate {
    /// The artifacts bucket. `None` (a world without one) reads every plan as unavailable,
    /// so each set's `on_unavailable` decides: a set is never silently passed over.
    pub artifacts: Option<Arc<dyn Artifacts>>,
    /// Compiled sets by group, name and version.
    pub cache: SetCache,
    /// The sets of each group and its ancestors, revalidated by version on every check.
    pub listings: crate::PolicyListingCache,
    /// The bounds of one evaluation.
    pub limits: Limits,
    /// The memory of the process the gate runs in, in bytes (`None`: unbounded): a plan
    /// whose value would not fit ([`sortie_policy::max_plan_bytes_within`]) is unavailable,
    /// saying so, and each set's `on_unavailable` decides; the function is never killed.
    pub memory_bytes: Option<u64>,
}

impl PolicyGate {
    /// The memory Lambda gives this function (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, in MB),
    /// in bytes; `None` outside Lambda.
    pub fn lambda_memory_bytes() -> Option<u64> {
        std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
            .ok()
            .and_then(|mb| mb.trim().parse::<u64>().ok())
            .map(|mb| mb * 1024 * 1024)
    }
}

impl std::fmt::Debug for PolicyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyGate")
            .field("artifacts", &self.artifacts.is_some())
            .field("cached_sets", &self.cache.len())
            .finish()
    }
}

/// One set in force for an environment: the group holding it, its version and the set.
#[derive(Debug, Clone)]
pub(crate) struct SetInForce {
    pub group: String,
    pub version: String,
    pub set: PolicySet,
}

/// The sets of `listed` whose criteria match `env`.
fn in_force(listed: &crate::policy_listing::Listing, env: &Environment) -> Vec<SetInForce> {
    listed
        .iter()
        .filter(|(_, v)| v.item.applies_to(env))
        .map(|(group, v)| SetInForce {
            group: group.to_string(),
            version: v.version.to_string(),
            set: v.item.clone(),
        })
        .collect()
}

/// The most bytes of `plan.json` one read asks for: the S3 client holds a range two or three
/// times while it hands it over, so a range, not the object, is what is held several times.
pub(crate) const READ_RANGE_BYTES: u64 = 2 * 1024 * 1024;

/// Streams `size` bytes of `key`, in ranges of [`READ_RANGE_BYTES`], into the parser
/// ([`PlanInput::from_reader`], on a blocking thread): at most two ranges are held at once
/// besides the parsed value, and never more than `size` bytes are read, whatever the object
/// has become since its HEAD (a shorter one ends the stream; its JSON is then incomplete).
/// A read that fails is returned as the error, whatever the parser made of the cut stream.
pub(crate) async fn stream_plan(
    artifacts: &dyn Artifacts,
    key: &str,
    size: u64,
) -> Result<PlanInput, StoreError> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(1);
    let parser = tokio::task::spawn_blocking(move || PlanInput::from_reader(Ranges::new(rx)));
    let mut from = 0u64;
    let mut failed = None;
    while from < size {
        let len = READ_RANGE_BYTES.min(size - from);
        let mut range = match artifacts.get_range(key, from, len).await {
            Ok(range) => range,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        let got = (range.len() as u64).min(len);
        range.truncate(got as usize);
        // A parser that stopped (the JSON is bad) needs no more.
        if got == 0 || tx.send(range).await.is_err() {
            break;
        }
        from += got;
    }
    drop(tx);
    let plan = parser.await.map_err(|e| StoreError::Aws {
        service: "s3",
        message: format!("the plan's parser stopped: {e}"),
        retryable: true,
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(plan),
    }
}

/// The ranges of a plan as one [`std::io::Read`], for the parser's thread.
struct Ranges {
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    range: Vec<u8>,
    at: usize,
}

impl Ranges {
    fn new(rx: tokio::sync::mpsc::Receiver<Vec<u8>>) -> Self {
        Self {
            rx,
            range: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for Ranges {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.range.len() {
            match self.rx.blocking_recv() {
                Some(next) => {
                    self.range = next;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.range.len() - self.at);
        buf[..n].copy_from_slice(&self.range[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The key of a job's `plan.json` artifact.
fn plan_key(record: &JobRecord) -> String {
    format!(
        "{}plan.json",
        sortie_core::protocol::pilot::artifact_prefix(&record.job.id)
    )
}

/// Where a job's whole policy result is kept when its summary left messages out.
fn policy_key(record: &JobRecord) -> String {
    format!(
        "{}policy.json",
        sortie_core::protocol::pilot::artifact_prefix(&record.job.id)
    )
}

impl JobService {
    /// `full` as kept on the job and in the event ([`gate::summary`] within
    /// [`gate::SUMMARY_MAX_BYTES`]); when messages were left out the whole result is
    /// written to the artifacts bucket first and its key named in the summary.
    async fn summarised(
        &self,
        record: &JobRecord,
        full: PolicyResult,
    ) -> Result<PolicyResult, StoreError> {
        let key = self.gate.artifacts.as_ref().map(|_| policy_key(record));
        let summary = gate::summary(&full, gate::SUMMARY_MAX_BYTES, key.as_deref());
        if let (Some(artifacts), Some(key), Some(_)) =
            (&self.gate.artifacts, &key, &summary.truncated)
        {
            let bytes = serde_json::to_vec(&full).map_err(|e| StoreError::Invalid {
                path: "policy".into(),
                problem: e.to_string(),
            })?;
            artifacts.write(key, bytes, "application/json").await?;
        }
        Ok(summary)
    }

    /// The sets in force for `env` now: every set of its group and its ancestors whose
    /// criteria match, the root's first, from the listing cached by version
    /// ([`crate::PolicyListingCache`]). A group cannot switch off an inherited set.
    pub(crate) async fn sets_in_force(
        &self,
        env: &Environment,
    ) -> Result<Vec<SetInForce>, StoreError> {
        let listed = self
            .gate
            .listings
            .sets_for(self.store.as_ref(), env.path.group())
            .await?;
        Ok(in_force(&listed, env))
    }

    /// At submit: an apply or destroy to an environment under at least one policy set (or
    /// from a pull request) runs in two phases, so its plan can be checked before anything
    /// is applied. A job already
    /// reviewed (approval `required`) keeps its review; one with approval `auto` gets a
    /// policy-only review, approved by the gate itself when its plan passes.
    ///
    /// `read`, when given, is the sets in force already read for `env` (the submit reads
    /// them beside the runner: one round trip, not two); `None` reads them when needed.
    pub(crate) async fn gate_at_submit(
        &self,
        env: &Environment,
        job: &mut sortie_core::Job,
        read: Option<Result<Vec<SetInForce>, StoreError>>,
    ) -> Result<(), StoreError> {
        if !job.request.operation.writes_state() || job.review.is_some() || job.drift_check {
            return Ok(());
        }
        // A pull request's apply always runs in two phases: its requirements are checked
        // again between them ([`sortie_core::Job::checked_again_before_apply`]).
        if job.checked_again_before_apply() {
            // Gated whatever the sets.
        } else {
            let sets = match read {
                Some(read) => read?,
                None => self.sets_in_force(env).await?,
            };
            if sets.is_empty() {
                return Ok(());
            }
        }
        job.review = Some(sortie_core::Review {
            four_eyes: false,
            timeout_seconds: env
                .settings
                .approval_timeout_seconds
                .unwrap_or(sortie_core::environment::APPROVAL_TIMEOUT_DEFAULT_SECONDS),
            phase: JobPhase::Plan,
            awaiting_since: None,
            decision: None,
            policy_only: true,
        });
        Ok(())
    }

    /// Checks `record`'s stored plan against the sets in force for its environment; `None`
    /// when no set applies.
    pub(crate) async fn check_policy(
        &self,
        record: &JobRecord,
    ) -> Result<Option<PolicyResult>, StoreError> {
        // Both reads at once: a plan's end waits for them (one round trip, not two).
        let (env, listed) = tokio::join!(
            self.store.get_environment(&record.job.environment),
            self.gate
                .listings
                .sets_for(self.store.as_ref(), record.job.environment.group()),
        );
        let env = env?.item.environment;
        let sets = in_force(&*listed?, &env);
        if sets.is_empty() {
            return Ok(None);
        }
        let plan = self.read_plan(record).await?;
        let now = Utc::now();
        let plan = match plan {
            PlanInput::Unavailable(reason) => {
                let results = gate::unavailable_sets(
                    sets.iter().map(|s| (s.group.as_str(), &s.set)),
                    &reason,
                );
                let full = gate::result(results, Some(&reason), now);
                return self.summarised(record, full).await.map(Some);
            }
            PlanInput::Available(plan) => plan,
        };
        let runner = json!({
            "id": record.job.runner_id.to_string(),
            "type": record.job.runner_spec.as_ref().map(|s| s.runner_configuration.type_name()),
        });
        // The stored bytes were parsed once, straight into the evaluator's value; the plan
        // is shared by every set, only the job and the runner are converted here.
        let input = PreparedInput::from_parts(
            plan,
            &sortie_policy::JobInput::new(&record.job, &env),
            &runner,
        );
        let mut results = Vec::with_capacity(sets.len());
        for s in &sets {
            let result = match self.gate.cache.get_or_compile(&s.group, &s.set, &s.version) {
                Ok(compiled) => {
                    let one = [(s.group.clone(), compiled.as_ref())];
                    sortie_policy::evaluate_prepared(&one, &input, self.gate.limits)
                        .pop()
                        .unwrap_or_else(|| errored(s, "the evaluation gave no result".into()))
                }
                // Refused at write time; a set stored before a stricter compiler still counts.
                Err(e) => errored(s, format!("the set does not compile: {e}")),
            };
            results.push(result);
        }
        let full = gate::result(results, None, now);
        self.summarised(record, full).await.map(Some)
    }

    /// The job's stored `plan.json`, within the function's memory: its size is read first
    /// (HEAD) and a plan over [`PLAN_JSON_MAX_BYTES`] is unavailable without a byte read;
    /// else it is streamed in ranges into the parser, straight into the evaluator's value
    /// ([`stream_plan`]: the bytes are never held whole, and no `serde_json` tree is made).
    /// Absent is unavailable ("no plan data was uploaded"); an error that trying again
    /// cannot change (S3's 403 for a missing key to a role without `s3:ListBucket`) is
    /// unavailable with the error quoted; a retryable one is returned (the end is tried
    /// again, within [`sortie_core::end_retry`]'s bound).
    async fn read_plan(&self, record: &JobRecord) -> Result<PlanInput, StoreError> {
        let Some(artifacts) = &self.gate.artifacts else {
            return Ok(PlanInput::Unavailable(
                "this control plane has no artifacts bucket to read plan data from".into(),
            ));
        };
        let key = plan_key(record);
        let read = async {
            let size = artifacts.head(&key).await?.size;
            if size > PLAN_JSON_MAX_BYTES as u64 {
                return Ok(PlanInput::Unavailable(TOO_LARGE.into()));
            }
            let fits = sortie_policy::max_plan_bytes_within(self.gate.memory_bytes);
            if size > fits as u64 {
                return Ok(PlanInput::Unavailable(format!(
                    "the plan's JSON is {size} bytes, over the {fits} bytes this function can check within its {} MiB of memory",
                    self.gate.memory_bytes.unwrap_or_default() / (1024 * 1024)
                )));
            }
            stream_plan(artifacts.as_ref(), &key, size).await
        };
        match read.await {
            Ok(plan) => Ok(plan),
            Err(StoreError::NotFound { .. }) => Ok(PlanInput::from_artifact(None)),
            Err(e) if !e.is_retryable() => Ok(PlanInput::Unavailable(format!(
                "the plan data could not be read: \"{}\"",
                cut(&e.to_string(), QUOTED_ERROR_MAX_BYTES)
            ))),
            Err(e) => Err(e),
        }
    }

    /// Publishes `sortie.job.policy_checked` (best effort: the result is on the job).
    async fn publish_policy_checked(
        &self,
        record: &JobRecord,
        result: &PolicyResult,
        verdict: &str,
    ) {
        let mut detail = crate::ended_detail(record);
        detail["policy"] = json!(result);
        detail["verdict"] = json!(verdict);
        detail["drift_check"] = json!(record.job.drift_check);
        detail["violation"] = json!(gate::violated(result));
        let resource = format!("sortie:job/{}", record.job.id);
        if let Err(e) = self
            .bus
            .publish(JOB_POLICY_CHECKED, &resource, detail)
            .await
        {
            warn!(error = %e, "publishing sortie.job.policy_checked failed");
        }
    }

    /// The gate at the end of a successful plan: `Some(record)` when it moved the job
    /// itself (failed it, held it, approved it, or ended a checked plan job with its
    /// result), `None` when the end goes on as without policy.
    pub(crate) async fn gate_plan_end(
        &self,
        record: &JobRecord,
        from: JobState,
        outcome: &Outcome,
    ) -> Result<Option<JobRecord>, StoreError> {
        let job = &record.job;
        let reviewed_plan = job.review.as_ref().filter(|r| r.phase == JobPhase::Plan);
        let plan_job = job.request.operation == Operation::Plan;
        if reviewed_plan.is_none() && !plan_job {
            return Ok(None);
        }
        let policy_only = reviewed_plan.is_some_and(|r| r.policy_only);
        let result = self.check_policy(record).await?;
        let Some(result) = result else {
            if policy_only {
                // The sets were deleted since the submit: nothing holds the apply.
                return self.approve_by_policy(record, from, None).await.map(Some);
            }
            return Ok(None);
        };
        let verdict = gate::verdict(&result);
        let word = match (&verdict, reviewed_plan.is_some(), job.drift_check) {
            (GateVerdict::Fail { .. }, _, false) => "fail",
            (GateVerdict::Review(_), true, _) => "review",
            (GateVerdict::Proceed, true, _) => "proceed",
            _ => "recorded",
        };
        info!(status = ?result.status, verdict = word, "plan checked against policy");
        // The runner's exit report and the task's stopped event may both reach this point
        // with the same `running` record (each evaluates). Only the path whose conditional
        // move (from `from`) wins publishes `policy_checked` and ends the job: the loser's
        // move fails with a state conflict before either, so the check is published once.
        match verdict {
            GateVerdict::Fail { reason } if !job.drift_check => {
                let update = JobUpdate {
                    policy: Some(result.clone()),
                    ..Default::default()
                };
                let failed = self
                    .store
                    .transition_job(&job.id, from, JobState::Failed, Utc::now(), &reason, update)
                    .await?;
                info!(job_id = %job.id, %reason, "policy denied the plan; nothing applied");
                self.publish_policy_checked(record, &result, word).await;
                self.ended(&failed).await?;
                Ok(Some(failed))
            }
            _ if reviewed_plan.is_none() => {
                // A plan job or a drift check: the result is recorded, the end is the plan's.
                let update = JobUpdate {
                    policy: Some(result.clone()),
                    ..Default::default()
                };
                let ended = self
                    .store
                    .transition_job(
                        &job.id,
                        from,
                        outcome.state,
                        Utc::now(),
                        &outcome.reason,
                        update,
                    )
                    .await?;
                self.publish_policy_checked(record, &result, word).await;
                self.ended(&ended).await?;
                Ok(Some(ended))
            }
            GateVerdict::Review(messages) => {
                let held = self
                    .hold_for_approval(record, from, Some(result.clone()), Some(&messages), true)
                    .await?;
                self.publish_policy_checked(record, &result, word).await;
                Ok(Some(held))
            }
            _ if policy_only => {
                let approved = self
                    .approve_by_policy(record, from, Some(result.clone()))
                    .await?;
                self.publish_policy_checked(record, &result, word).await;
                Ok(Some(approved))
            }
            _ => {
                let held = self
                    .hold_for_approval(record, from, Some(result.clone()), None, true)
                    .await?;
                self.publish_policy_checked(record, &result, word).await;
                Ok(Some(held))
            }
        }
    }

    /// An `auto` job's plan passed the gate: it is recorded awaiting approval (its plan
    /// phase kept, quietly) and approved at once by [`POLICY_PRINCIPAL`]; the apply phase
    /// is sent.
    async fn approve_by_policy(
        &self,
        record: &JobRecord,
        from: JobState,
        result: Option<PolicyResult>,
    ) -> Result<JobRecord, StoreError> {
        let awaiting = self
            .hold_for_approval(record, from, result, None, false)
            .await?;
        let job = &awaiting.job;
        let Some(mut review) = job.review.clone() else {
            return Ok(awaiting);
        };
        let now = Utc::now();
        review.phase = JobPhase::Apply;
        review.decision = Some(ReviewDecision {
            verdict: ReviewVerdict::Approved,
            by: POLICY_PRINCIPAL.to_string(),
            at: now,
            comment: Some("the plan passed the policy gate".into()),
            overrode_policy: false,
        });
        // As an approval ([`JobService::review`]) writes it; not through it, since a review
        // may end a job and the end is what runs the gate. A pull request's apply waits for
        // its requirements to be checked again.
        // Recorded in the audit trail as a person's approval is, by the gate.
        let scope = crate::audit::system_scope(
            POLICY_PRINCIPAL,
            "policy_gate_approved",
            format!("/v1/jobs/{}", job.id),
            job.environment.group().org(),
        );
        if job.checked_again_before_apply() {
            return scope
                .run(Box::pin(
                    self.approve_for_pull_request(&awaiting, review, now),
                ))
                .await;
        }
        let reason = format!(
            "approved by {POLICY_PRINCIPAL}: the plan passed the policy gate; the saved plan is applied by a second task"
        );
        let approved = scope
            .run(Box::pin(
                self.start_apply_phase(&awaiting, review, now, &reason),
            ))
            .await?;
        info!(job_id = %job.id, "the plan passed the policy gate; the apply phase is sent");
        Ok(approved)
    }
}

/// The result of a set that could not be evaluated: a deny at its level, saying why.
fn errored(s: &SetInForce, message: String) -> SetResult {
    SetResult {
        set: s.set.name.clone(),
        group: s.group.clone(),
        enforcement: s.set.enforcement,
        deny: Vec::new(),
        warn: Vec::new(),
        error: Some(message),
    }
}

#[cfg(test)]
#[path = "policy_gate_tests.rs"]
mod tests;
