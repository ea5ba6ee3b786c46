//! Drift remediation: the step after a drift check ended, apart from the end itself.
//!
//! [`JobService::end`] records a drift check's verdict on its environment. When the verdict
//! is `drifted`, the caller of the end runs [`JobService::remediate_drift`] next: with the
//! environment's `drift_remediation: apply`, it submits an apply (requested by
//! `sortie:drift`, subject to the environment's approval setting, through
//! [`JobService::submit_for`]) and records it on the drift status; either way it publishes
//! `sortie.environment.drifted`, naming the remediation if there is one.

use chrono::Utc;
use serde_json::json;
use sortie_core::drift::{DriftVerdict, DRIFT_PRINCIPAL};
use sortie_core::{DriftRemediation, JobId, Operation};
use sortie_store::JobRecord;
use tracing::{info, warn};

use crate::end::drift_status;
use crate::submit::{JobOrder, SubmitError};
use crate::{JobService, ENVIRONMENT_DRIFTED};

impl JobService {
    /// Answers an ended drift check that found drift: remediates it by an apply when its
    /// environment asks for it, and publishes `sortie.environment.drifted`. Best effort
    /// (failures are logged: the check's verdict is already recorded by the end); does
    /// nothing for any other job. Returns the remediation's job id, if one was submitted.
    pub async fn remediate_drift(&self, ended: &JobRecord) -> Option<JobId> {
        let job = &ended.job;
        if !job.drift_check || !job.state.is_terminal() {
            return None;
        }
        let mut status = drift_status(ended);
        if status.status != DriftVerdict::Drifted {
            return None;
        }
        match self.submit_remediation(ended).await {
            Ok(Some(id)) => {
                info!(remediation = %id, "drift remediation submitted");
                status.remediation_job_id = Some(id);
                if let Err(e) = self.store.record_drift(&job.environment, &status).await {
                    warn!(error = %e, "could not record the drift remediation");
                }
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "drift remediation not submitted"),
        }
        let detail = json!({
            "environment": job.environment.to_string(),
            "org": job.environment.org(),
            "job_id": job.id,
            "summary": ended.summary,
            "remediation_job_id": status.remediation_job_id,
        });
        let resource = format!("sortie:environment/{}", job.environment);
        if let Err(e) = self
            .bus
            .publish(ENVIRONMENT_DRIFTED, &resource, detail)
            .await
        {
            warn!(error = %e, "publishing sortie.environment.drifted failed");
        }
        status.remediation_job_id
    }

    /// Submits the apply that remediates `check`'s drift when its environment's
    /// `drift_remediation` is `apply`: the check's request again, as an apply, for
    /// `sortie:drift`. `None` when the environment does not ask for it.
    async fn submit_remediation(&self, check: &JobRecord) -> Result<Option<JobId>, SubmitError> {
        let job = &check.job;
        let env = self.store.get_environment(&job.environment).await?;
        let environment = &env.item.environment;
        if environment.settings.drift_remediation != DriftRemediation::Apply {
            return Ok(None);
        }
        let order = JobOrder::again(&job.request, Operation::Apply, DRIFT_PRINCIPAL, Utc::now());
        let submitted = self.submit_for(environment, order).await?;
        Ok(Some(submitted.job.id))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use sortie_core::{
        ChangeSummary, EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId,
        RunnerLink, RunnerSpec,
    };
    use sortie_store::{
        EnvironmentStore, JobMessage, JobQueue, MemoryStore, RunnerStore, StoreError,
    };

    use super::*;
    use crate::{Bus, LifecycleError};

    const RUNNER: &str = "acme/fargate";

    /// Keeps what is sent and published.
    #[derive(Default)]
    struct Seen {
        sent: Mutex<Vec<JobMessage>>,
        published: Mutex<Vec<(String, serde_json::Value)>>,
    }

    #[async_trait]
    impl JobQueue for Seen {
        async fn send_message(&self, message: &JobMessage, _delay: i32) -> Result<(), StoreError> {
            self.sent.lock().unwrap().push(message.clone());
            Ok(())
        }
    }

    #[async_trait]
    impl Bus for Seen {
        async fn job_ended(&self, _record: &JobRecord) -> Result<(), LifecycleError> {
            Ok(())
        }
        async fn publish(
            &self,
            detail_type: &str,
            _resource: &str,
            detail: serde_json::Value,
        ) -> Result<(), LifecycleError> {
            let published = (detail_type.to_string(), detail);
            self.published.lock().unwrap().push(published);
            Ok(())
        }
    }

    async fn world(remediation: DriftRemediation) -> (JobService, Arc<Seen>, Environment) {
        let store = Arc::new(MemoryStore::new());
        let seen = Arc::new(Seen::default());
        let spec = RunnerSpec::parse(
            "runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: sortie-ext-7f3a
  region: us-east-1
  cluster: runners
  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1
  container_name: runner
  subnets: [subnet-0123456789abcdef0]
  security_groups: [sg-0123456789abcdef0]
state_storage_configuration:
  type: s3
  bucket: acme-state
  region: us-east-1
",
        )
        .unwrap();
        let runner_id = RunnerId::parse(RUNNER).unwrap();
        store
            .create_runner(&Runner {
                id: runner_id.clone(),
                spec,
            })
            .await
            .unwrap();
        let mut env = Environment {
            settings: Default::default(),
            path: EnvPath::parse("acme/payments/prod").unwrap(),
            env_type: "production".into(),
            labels: BTreeMap::new(),
            tags: BTreeSet::new(),
            runner: RunnerLink {
                runner_id,
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: Utc::now(),
            },
        };
        env.settings.drift_remediation = remediation;
        store.create_environment(&env).await.unwrap();
        let jobs = JobService {
            store,
            queue: seen.clone(),
            bus: seen.clone(),
            secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
            gate: Default::default(),
        };
        (jobs, seen, env)
    }

    /// A drift check of `env` that ended `state`, its plan finding changes or not.
    async fn ended_check(jobs: &JobService, env: &Environment, changes: bool) -> JobRecord {
        let runner = jobs.store.get_runner(&env.runner.runner_id).await.unwrap();
        let request = JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#).unwrap();
        let mut job = Job::for_environment(
            sortie_core::tokens::new_id(),
            env,
            runner.item.spec,
            request,
            DRIFT_PRINCIPAL.into(),
            Utc::now(),
        );
        job.drift_check = true;
        job.state = JobState::Succeeded;
        let mut record = JobRecord::new(&job);
        record.summary = Some(ChangeSummary {
            add: 0,
            change: u32::from(changes),
            destroy: 0,
            has_changes: Some(changes),
        });
        record
    }

    #[tokio::test]
    async fn a_drift_is_remediated_by_an_apply_for_sortie_drift_when_the_environment_asks() {
        let (jobs, seen, env) = world(DriftRemediation::Apply).await;
        let check = ended_check(&jobs, &env, true).await;
        let fix = jobs
            .remediate_drift(&check)
            .await
            .expect("an apply submitted");
        let submitted = jobs.store.get_job(&fix).await.unwrap().job;
        assert_eq!(submitted.request.operation, Operation::Apply);
        assert_eq!(submitted.request.files, check.job.request.files);
        assert_eq!(submitted.requested_by, DRIFT_PRINCIPAL);
        assert!(!submitted.drift_check);
        let rec = jobs.store.get_environment(&env.path).await.unwrap().item;
        assert_eq!(
            rec.active_job.as_ref(),
            Some(&fix),
            "the fix holds the lock"
        );
        let drift = rec.drift.expect("the remediation is recorded");
        assert_eq!(drift.status, DriftVerdict::Drifted);
        assert_eq!(drift.job_id, check.job.id);
        assert_eq!(drift.remediation_job_id.as_ref(), Some(&fix));
        let sent: Vec<_> = seen
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.job_id.clone())
            .collect();
        assert_eq!(
            sent,
            std::slice::from_ref(&fix),
            "the fix is sent to the jobs queue"
        );
        let published = seen.published.lock().unwrap().clone();
        assert_eq!(published.len(), 1, "{published:?}");
        assert_eq!(published[0].0, ENVIRONMENT_DRIFTED);
        assert_eq!(published[0].1["remediation_job_id"], fix.as_str());
        assert_eq!(published[0].1["job_id"], check.job.id.as_str());
    }

    #[tokio::test]
    async fn without_remediation_a_drift_is_only_published() {
        let (jobs, seen, env) = world(DriftRemediation::Off).await;
        let check = ended_check(&jobs, &env, true).await;
        assert_eq!(jobs.remediate_drift(&check).await, None);
        let rec = jobs.store.get_environment(&env.path).await.unwrap().item;
        assert_eq!(rec.active_job, None, "nothing submitted");
        assert!(seen.sent.lock().unwrap().is_empty());
        let published = seen.published.lock().unwrap().clone();
        assert_eq!(published.len(), 1, "{published:?}");
        assert_eq!(published[0].0, ENVIRONMENT_DRIFTED);
        assert!(published[0].1["remediation_job_id"].is_null());
    }

    #[tokio::test]
    async fn a_check_in_sync_a_failed_check_and_any_other_job_are_left_alone() {
        let (jobs, seen, env) = world(DriftRemediation::Apply).await;
        let in_sync = ended_check(&jobs, &env, false).await;
        assert_eq!(jobs.remediate_drift(&in_sync).await, None);
        let mut failed = ended_check(&jobs, &env, true).await;
        failed.job.state = JobState::Failed;
        assert_eq!(jobs.remediate_drift(&failed).await, None);
        let mut apply = ended_check(&jobs, &env, true).await;
        apply.job.drift_check = false;
        assert_eq!(jobs.remediate_drift(&apply).await, None);
        let mut running = ended_check(&jobs, &env, true).await;
        running.job.state = JobState::Running;
        assert_eq!(jobs.remediate_drift(&running).await, None);
        let rec = jobs.store.get_environment(&env.path).await.unwrap().item;
        assert_eq!(rec.active_job, None);
        assert!(seen.sent.lock().unwrap().is_empty());
        assert!(seen.published.lock().unwrap().is_empty());
    }
}
