//! The policy gate on the in-memory world: a hand-written `plan.json` artifact, sets made
//! through [`crate::PolicySets`], and the job's end as the runner's exit reports it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use sortie_core::policy::PolicyStatus;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{GroupPath, JobRequest, JobState, Outcome};
use sortie_store::{EnvironmentStore, JobRecord, JobStore, MemoryStore, RunnerStore};
use sortie_testkit::fakes::MemoryArtifacts;

use crate::testing::World;
use crate::{Bus, EndCause, JobOrder, LifecycleError, PolicySets, JOB_POLICY_CHECKED};

/// Keeps every event published.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, Value)>>);

#[async_trait]
impl Bus for Recorder {
    async fn job_ended(&self, _record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(())
    }
    async fn publish(
        &self,
        kind: &str,
        _resource: &str,
        detail: Value,
    ) -> Result<(), LifecycleError> {
        self.0.lock().unwrap().push((kind.to_string(), detail));
        Ok(())
    }
}

impl Recorder {
    fn checked(&self) -> Vec<Value> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|(k, _)| k == JOB_POLICY_CHECKED)
            .map(|(_, d)| d.clone())
            .collect()
    }
}

struct Gated {
    w: World,
    artifacts: Arc<MemoryArtifacts>,
    bus: Arc<Recorder>,
    env: sortie_core::Environment,
}

async fn gated() -> Gated {
    let mut w = World::new().await;
    let artifacts = Arc::new(MemoryArtifacts::default());
    let bus = Arc::new(Recorder::default());
    w.jobs.gate.artifacts = Some(artifacts.clone() as Arc<dyn sortie_store::Artifacts>);
    w.jobs.bus = bus.clone();
    let env = w.environment("acme/payments/prod").await;
    Gated {
        w,
        artifacts,
        bus,
        env,
    }
}

/// A set at `acme` whose `deny` names every `terraform_data` resource created and whose
/// `warn` names every one replaced.
async fn set(g: &Gated, name: &str, enforcement: &str, on_unavailable: &str) {
    let rego = "package tf\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  rc.type == \"terraform_data\"\n  rc.change.actions == [\"create\"]\n  msg := concat(\" \", [rc.address, \"may not be created\"])\n}\n\nwarn contains msg if {\n  some rc in input.plan.resource_changes\n  rc.change.actions == [\"delete\", \"create\"]\n  msg := concat(\" \", [rc.address, \"is replaced\"])\n}\n";
    PolicySets::new(g.w.store.clone())
        .create(
            &GroupPath::parse("acme").unwrap(),
            Some(name),
            json!({"enforcement": enforcement, "on_unavailable": on_unavailable,
                   "modules": [{"name": "tf", "rego": rego}]}),
        )
        .await
        .unwrap();
}

fn plan_json(actions: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "format_version": "1.0",
        "resource_changes": [{
            "address": "terraform_data.web", "type": "terraform_data", "name": "web",
            "change": {"actions": actions, "before": null, "after": {"input": "x"}}
        }]
    }))
    .unwrap()
}

/// Submits `operation` and runs its (plan) phase to a successful end, `plan` uploaded.
async fn planned(g: &Gated, operation: &str, plan: Option<Vec<u8>>) -> JobRecord {
    let running = running(g, operation, plan).await;
    g.w.jobs.end(&running, succeeded()).await.unwrap();
    g.w.store.get_job(&running.job.id).await.unwrap()
}

/// The end a task's stopped event decides for a plan that exited 0.
fn succeeded() -> EndCause {
    EndCause::Decided {
        from: JobState::Running,
        outcome: Outcome {
            state: JobState::Succeeded,
            reason: "the runner exited with code 0".into(),
        },
    }
}

/// Submits `operation` and runs its (plan) phase up to `running`, `plan` uploaded.
async fn running(g: &Gated, operation: &str, plan: Option<Vec<u8>>) -> JobRecord {
    let request: JobRequest = serde_json::from_value(json!({
        "operation": operation,
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .unwrap();
    let order = JobOrder::submit(request, SensitiveValues::default(), "alice", None);
    let id = g.w.jobs.submit_for(&g.env, order).await.unwrap().job.id;
    let store: &MemoryStore = &g.w.store;
    let now = chrono::Utc::now();
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        store
            .transition_job(&id, from, to, now, "test", Default::default())
            .await
            .unwrap();
    }
    if let Some(bytes) = plan {
        g.artifacts.put(&format!("artifacts/{id}/plan.json"), bytes);
    }
    store.get_job(&id).await.unwrap()
}

#[tokio::test]
async fn an_apply_under_a_set_runs_in_two_phases_and_a_mandatory_deny_fails_it() {
    let g = gated().await;
    set(&g, "no-data", "mandatory", "fail").await;
    let job = planned(&g, "apply", Some(plan_json(&["create"]))).await;
    let review = job.job.review.as_ref().expect("gated: two phases");
    assert!(review.policy_only, "approval auto: a policy-only review");
    assert_eq!(job.job.state, JobState::Failed, "{:?}", job.job.transitions);
    assert_eq!(
        job.job.reason(),
        "policy_denied: acme/no-data: terraform_data.web may not be created"
    );
    let policy = job.policy.as_ref().expect("the result is recorded");
    assert_eq!(policy.status, PolicyStatus::Denied);
    assert_eq!(
        policy.sets[0].deny,
        vec!["terraform_data.web may not be created"]
    );
    // Nothing applied: the apply phase was never sent, and the lock is released.
    assert_eq!(
        g.w.sent(),
        vec![job.job.id.clone()],
        "sent once, for the plan"
    );
    let env = g.w.store.get_environment(&g.env.path).await.unwrap().item;
    assert!(env.active_job.is_none(), "the lock is released");
    let events = g.bus.checked();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["verdict"], "fail");
    assert_eq!(events[0]["violation"], true);
    assert_eq!(events[0]["policy"]["status"], "denied");
}

#[tokio::test]
async fn a_review_deny_holds_an_auto_apply_and_approving_it_records_the_override() {
    let g = gated().await;
    set(&g, "owners", "review", "fail").await;
    let job = planned(&g, "apply", Some(plan_json(&["create"]))).await;
    assert_eq!(job.job.state, JobState::AwaitingApproval);
    assert!(
        job.job
            .reason()
            .contains("held by policy: acme/owners denied: terraform_data.web may not be created"),
        "{}",
        job.job.reason()
    );
    assert!(sortie_core::policy::gate::approval_overrides_policy(
        job.policy.as_ref()
    ));
    let approved =
        g.w.jobs
            .review(
                &job,
                "maria",
                sortie_core::ReviewVerdict::Approved,
                None,
                chrono::Utc::now(),
            )
            .await
            .unwrap()
            .unwrap();
    let decision = approved.job.review.unwrap().decision.unwrap();
    assert!(decision.overrode_policy);
    assert_eq!(approved.job.state, JobState::Queued);
}

#[tokio::test]
async fn a_passing_plan_is_approved_by_the_gate_and_an_advisory_deny_is_recorded_only() {
    let g = gated().await;
    set(&g, "advice", "advisory", "fail").await;
    let job = planned(&g, "apply", Some(plan_json(&["create"]))).await;
    assert_eq!(job.job.state, JobState::Queued, "the apply phase goes on");
    let review = job.job.review.as_ref().unwrap();
    assert_eq!(review.phase, sortie_core::job::JobPhase::Apply);
    let decision = review.decision.as_ref().unwrap();
    assert_eq!(decision.by, sortie_core::policy::gate::POLICY_PRINCIPAL);
    assert!(!decision.overrode_policy);
    let policy = job.policy.as_ref().unwrap();
    assert_eq!(policy.status, PolicyStatus::Warned);
    assert_eq!(
        g.w.sent(),
        vec![job.job.id.clone(), job.job.id.clone()],
        "sent again to apply"
    );
    assert!(job.plan_phase.is_some(), "the plan phase is kept");
    assert_eq!(g.bus.checked()[0]["verdict"], "proceed");
    // The gate's approval is in the audit trail, as a person's is, by the gate.
    let entries =
        g.w.audit_entries(job.job.environment.group().org().unwrap())
            .await;
    let approved: Vec<_> = entries
        .iter()
        .filter(|e| e.action == "policy_gate_approved")
        .collect();
    assert_eq!(approved.len(), 1, "{entries:?}");
    assert_eq!(approved[0].target, format!("/v1/jobs/{}", job.job.id));
    assert_eq!(
        approved[0].actor.subject,
        sortie_core::policy::gate::POLICY_PRINCIPAL
    );
    assert_eq!(
        approved[0].actor.credential,
        sortie_core::audit::CredentialKind::System
    );
}

#[tokio::test]
async fn a_warning_holds_an_auto_apply_for_a_deployer() {
    let g = gated().await;
    set(&g, "replacements", "mandatory", "fail").await;
    let job = planned(&g, "apply", Some(plan_json(&["delete", "create"]))).await;
    assert_eq!(job.job.state, JobState::AwaitingApproval);
    assert_eq!(job.policy.as_ref().unwrap().status, PolicyStatus::Warned);
    assert!(!sortie_core::policy::gate::approval_overrides_policy(
        job.policy.as_ref()
    ));
}

#[tokio::test]
async fn unavailable_plan_data_follows_each_sets_on_unavailable() {
    let g = gated().await;
    set(&g, "strict", "mandatory", "fail").await;
    let unavailable =
        sortie_core::plan::PlanData::unavailable_artifact(sortie_core::plan::TERRAFORM_011);
    let job = planned(&g, "apply", Some(unavailable.clone())).await;
    assert_eq!(job.job.state, JobState::Failed);
    assert!(
        job.job
            .reason()
            .contains("plan data unavailable for Terraform 0.11"),
        "{}",
        job.job.reason()
    );
    assert_eq!(
        job.policy.as_ref().unwrap().status,
        PolicyStatus::Unavailable
    );

    let g = gated().await;
    set(&g, "lenient", "mandatory", "skip").await;
    let job = planned(&g, "apply", None).await;
    assert_eq!(
        job.job.state,
        JobState::Queued,
        "skipped: the apply goes on"
    );
    let policy = job.policy.as_ref().unwrap();
    assert_eq!(policy.status, PolicyStatus::Unavailable);
    assert_eq!(
        policy.reason.as_deref(),
        Some(sortie_core::plan::NO_ARTIFACT)
    );
}

#[tokio::test]
async fn plan_jobs_and_drift_checks_are_checked_and_a_drift_violation_is_published() {
    let g = gated().await;
    set(&g, "no-data", "mandatory", "fail").await;
    let plan = planned(&g, "plan", Some(plan_json(&["create"]))).await;
    assert!(plan.job.review.is_none(), "a plan job has one phase");
    assert_eq!(
        plan.job.state,
        JobState::Failed,
        "a mandatory deny fails a plan job"
    );
    assert!(plan.job.reason().starts_with("policy_denied: "));

    // A drift check: checked and published, but its end is the plan's.
    let runner = g.w.store.get_runner(&g.env.runner.runner_id).await.unwrap();
    let request = JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap();
    let mut job = sortie_core::Job::for_environment(
        sortie_core::tokens::new_id(),
        &g.env,
        runner.item.spec,
        request,
        "sortie:drift".into(),
        chrono::Utc::now(),
    );
    job.drift_check = true;
    let submitted = g.w.jobs.submit(&job, None).await.unwrap();
    let id = submitted.job.id;
    let store: &MemoryStore = &g.w.store;
    let now = chrono::Utc::now();
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        store
            .transition_job(&id, from, to, now, "test", Default::default())
            .await
            .unwrap();
    }
    g.artifacts
        .put(&format!("artifacts/{id}/plan.json"), plan_json(&["create"]));
    let running = store.get_job(&id).await.unwrap();
    let how = EndCause::Decided {
        from: JobState::Running,
        outcome: Outcome {
            state: JobState::Succeeded,
            reason: "the runner exited with code 0".into(),
        },
    };
    g.w.jobs.end(&running, how).await.unwrap();
    let check = store.get_job(&id).await.unwrap();
    assert_eq!(
        check.job.state,
        JobState::Succeeded,
        "the drift verdict stays the plan's"
    );
    assert_eq!(check.policy.as_ref().unwrap().status, PolicyStatus::Denied);
    let events = g.bus.checked();
    let drift = events
        .iter()
        .find(|e| e["drift_check"] == true)
        .expect("published");
    assert_eq!(drift["violation"], true);
    assert_eq!(drift["verdict"], "recorded");
}

#[tokio::test]
async fn without_sets_nothing_changes() {
    let g = gated().await;
    let job = planned(&g, "apply", Some(plan_json(&["create"]))).await;
    assert!(job.job.review.is_none(), "no set: one phase, as before");
    assert_eq!(job.job.state, JobState::Succeeded);
    assert!(job.policy.is_none());
    assert!(g.bus.checked().is_empty());
}

/// The runner's exit report and the task's stopped event race for one plan's end: both
/// read the job `running`, both reach the gate. Whatever the verdict, the plan is checked
/// into one move, one `policy_checked` event and one end; the loser changes nothing.
#[tokio::test]
async fn a_racing_exit_report_and_task_event_run_the_gate_once() {
    use crate::EndReport;
    use sortie_core::protocol::pilot::PilotExit;
    let exit = PilotExit {
        exit_code: 0,
        reason: None,
    };
    // (operation, enforcement, the plan's actions, the state the winner leaves)
    let cases = [
        ("apply", "mandatory", "create", JobState::Failed),
        ("apply", "review", "create", JobState::AwaitingApproval),
        ("apply", "advisory", "create", JobState::Queued),
        ("plan", "mandatory", "create", JobState::Failed),
        ("plan", "review", "create", JobState::Succeeded),
    ];
    for (i, (operation, enforcement, action, state)) in cases.into_iter().enumerate() {
        for exit_first in [true, false] {
            let g = gated().await;
            set(&g, "s", enforcement, "fail").await;
            let stale = running(&g, operation, Some(plan_json(&[action]))).await;
            let id = stale.job.id.clone();
            // One path after the other, the second with the record read before the first
            // moved the job (what a real race gives it); then both at once.
            let by_exit = || g.w.jobs.pilot_exited(&stale, &exit);
            let by_event = || g.w.jobs.end(&stale, succeeded());
            let (first, second) = if exit_first {
                let a = by_exit().await.unwrap();
                (a, by_event().await.unwrap())
            } else {
                let a = by_event().await.unwrap();
                (a, by_exit().await.unwrap())
            };
            let case = format!("case {i} ({operation} {enforcement}), exit first: {exit_first}");
            assert!(first.ended().is_some(), "{case}: {first:?}");
            assert!(
                matches!(
                    second,
                    EndReport::AlreadyEnded(_) | EndReport::NotRunning(_)
                ),
                "{case}: the loser changed nothing: {second:?}"
            );
            let job = g.w.store.get_job(&id).await.unwrap();
            assert_eq!(job.job.state, state, "{case}: {:?}", job.job.transitions);
            assert_eq!(g.bus.checked().len(), 1, "{case}: one policy_checked");
            let policy_moves = job
                .job
                .transitions
                .iter()
                .filter(|t| t.from == Some(JobState::Running))
                .count();
            assert_eq!(policy_moves, 1, "{case}: one move out of running");
            // An apply that passed is sent once for its plan and once for its apply.
            let sends = g.w.sent().iter().filter(|s| **s == id).count();
            let expected = if state == JobState::Queued { 2 } else { 1 };
            assert_eq!(sends, expected, "{case}: sent {sends} times");
        }
        // Both at once, on one thread: each await point may interleave them.
        let g = gated().await;
        set(&g, "s", enforcement, "fail").await;
        let stale = running(&g, operation, Some(plan_json(&[action]))).await;
        let (a, b) = tokio::join!(
            g.w.jobs.pilot_exited(&stale, &exit),
            g.w.jobs.end(&stale, succeeded())
        );
        let ended = [a.unwrap(), b.unwrap()]
            .iter()
            .filter(|r| r.ended().is_some())
            .count();
        assert_eq!(ended, 1, "case {i} at once: one winner");
        assert_eq!(
            g.bus.checked().len(),
            1,
            "case {i} at once: one policy_checked"
        );
    }
}

/// The sets' listing is cached by version: unchanged sets are not listed again, and a
/// write to a set (through any instance: it moves the store's version) is seen by the
/// very next check, never a stale verdict.
#[tokio::test]
async fn a_write_to_a_set_is_seen_by_the_next_check() {
    let g = gated().await;
    set(&g, "created", "mandatory", "fail").await;
    let record = running(&g, "plan", Some(plan_json(&["create"]))).await;
    let group = record.job.environment.group().clone();
    let status = |r: Option<sortie_core::policy::PolicyResult>| r.expect("a set applies").status;
    let listing = || g.w.jobs.gate.listings.sets_for(g.w.store.as_ref(), &group);
    let first = g.w.jobs.check_policy(&record).await.unwrap();
    assert_eq!(status(first), PolicyStatus::Denied);
    let cached = listing().await.unwrap();
    let again = listing().await.unwrap();
    assert!(
        Arc::ptr_eq(&cached, &again),
        "unchanged sets: the same listing"
    );

    // The set is made advisory: the next check warns no more than it records.
    let rego = "package tf\n\nwarn contains \"recorded\" if { true }\n";
    PolicySets::new(g.w.store.clone())
        .update(
            &GroupPath::parse("acme").unwrap(),
            "created",
            json!({"enforcement": "advisory", "modules": [{"name": "tf", "rego": rego}]}),
            None,
        )
        .await
        .unwrap();
    let after =
        g.w.jobs
            .check_policy(&record)
            .await
            .unwrap()
            .expect("a set applies");
    assert_eq!(after.status, PolicyStatus::Warned, "{after:?}");
    assert_eq!(after.sets[0].warn, vec!["recorded".to_string()]);
    let fresh = listing().await.unwrap();
    assert!(!Arc::ptr_eq(&cached, &fresh), "a write: listed afresh");

    // Deleted: no set applies at the next check.
    PolicySets::new(g.w.store.clone())
        .delete(&GroupPath::parse("acme").unwrap(), "created", None)
        .await
        .unwrap();
    assert!(g.w.jobs.check_policy(&record).await.unwrap().is_none());
}

/// Issue 41 item 8, through the gate: twelve sets that each deny every resource with a long
/// message (the result keeps 20 per list, each cut at 512 bytes: about 125 KB in all) end
/// with a summary on the job within `SUMMARY_MAX_BYTES` (so the job's item stays under
/// DynamoDB's 400 KB) and the whole result, every kept message, in the artifacts bucket at
/// the key the summary names.
#[tokio::test]
async fn a_result_too_large_for_the_job_is_summarised_and_kept_whole_in_the_bucket() {
    use sortie_core::policy::gate::SUMMARY_MAX_BYTES;
    use sortie_core::policy::PolicyResult;
    use sortie_store::Artifacts;

    let g = gated().await;
    let pad = "x".repeat(950);
    let rego = format!(
        "package tf\n\ndeny contains msg if {{\n  some rc in input.plan.resource_changes\n  msg := concat(\" \", [rc.address, \"may not be created: {pad}\"])\n}}\n"
    );
    let names: Vec<String> = (0..12).map(|i| format!("set{i:02}")).collect();
    for name in &names {
        PolicySets::new(g.w.store.clone())
            .create(
                &GroupPath::parse("acme").unwrap(),
                Some(name.as_str()),
                json!({"enforcement": "advisory", "on_unavailable": "fail",
                       "modules": [{"name": "tf", "rego": rego}]}),
            )
            .await
            .unwrap();
    }
    let changes: Vec<Value> = (0..100)
        .map(|i| {
            json!({"address": format!("terraform_data.d{i:03}"), "type": "terraform_data",
                   "name": format!("d{i:03}"),
                   "change": {"actions": ["create"], "before": null, "after": {"input": "x"}}})
        })
        .collect();
    let plan =
        serde_json::to_vec(&json!({"format_version": "1.0", "resource_changes": changes})).unwrap();
    let job = planned(&g, "plan", Some(plan)).await;
    let policy = job.policy.as_ref().expect("the result is recorded");
    let shown = serde_json::to_string(policy).unwrap();
    let truncated = policy.truncated.as_ref().unwrap_or_else(|| {
        panic!(
            "a summary, not the whole result ({} bytes): {}",
            shown.len(),
            &shown[..shown.len().min(300)]
        )
    });
    let key = truncated
        .full_result_key
        .clone()
        .expect("the summary names where the whole result is");
    assert_eq!(key, format!("artifacts/{}/policy.json", job.job.id));
    assert!(
        shown.len() <= SUMMARY_MAX_BYTES,
        "the job keeps {} bytes of policy result",
        shown.len()
    );
    let whole: PolicyResult =
        serde_json::from_slice(&g.artifacts.get(&key).await.expect("the whole result")).unwrap();
    assert!(serde_json::to_vec(&whole).unwrap().len() > SUMMARY_MAX_BYTES);
    assert_eq!(whole.sets.len(), 12);
    let kept = sortie_core::policy::gate::MAX_MESSAGES;
    for s in &whole.sets {
        assert_eq!(
            s.deny.len(),
            kept,
            "every kept message is in the bucket: {}",
            s.set
        );
        assert!(
            s.deny.iter().all(|m| m.len() > 400),
            "as the result keeps them"
        );
    }
    assert!(whole.truncated.is_none());
    assert_eq!(
        truncated.counts,
        vec![[kept as u32, 0]; 12],
        "the summary counts every message"
    );
}
