//! Submitting a job to an environment, written once: the API's submit, a scheduled drift
//! check and a drift remediation all build their job here ([`JobService::submit_for`]).

use chrono::{DateTime, Utc};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::{EnvPath, Environment, Job, JobId, JobRequest, Operation, RunnerId};
use sortie_store::{IdempotencyKey, StoreError, Submitted};

use crate::JobService;

/// A job to submit to an environment: what to run, for whom, and how it is written.
#[derive(Debug, Clone)]
pub struct JobOrder {
    /// What to run.
    pub request: JobRequest,
    /// The values of its sensitive variables, kept in one secret each for the job's life.
    pub sensitive: SensitiveValues,
    /// Who asks for it: a person's subject, or a system principal such as `sortie:drift`.
    pub requested_by: String,
    /// True for a scheduled drift check (a plan whose result is recorded on the environment).
    pub drift_check: bool,
    /// How the job is written.
    pub write: WriteMode,
    /// When it is submitted.
    pub at: DateTime<Utc>,
    /// For a trigger's job: the upstream apply that started it.
    pub trigger: Option<sortie_core::triggers::TriggerContext>,
    /// For a restore: the state version it writes back.
    pub restore: Option<sortie_core::state_version::StateRestore>,
    /// For a pull request's job: the pull request it reports to.
    pub pull_request: Option<sortie_core::job::PullRequestRef>,
}

/// How a submitted job is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteMode {
    /// Queued behind the environment's other jobs; a retry with the same key answers the
    /// first submit's job.
    Queue(Option<IdempotencyKey>),
    /// Only when the environment is idle (a drift check is skipped, never queued).
    IfIdle,
    /// A speculative plan (a pull request's): written without the environment's lock or
    /// queue, so it never waits behind an apply nor blocks one; a retry with the same key
    /// answers the first submit's job. Only a plan may be written so.
    Speculative(Option<IdempotencyKey>),
}

impl JobOrder {
    /// A person's (or a client's) submit of `request`, queued behind the environment's jobs.
    pub fn submit(
        request: JobRequest,
        sensitive: SensitiveValues,
        requested_by: impl Into<String>,
        idempotency: Option<IdempotencyKey>,
    ) -> Self {
        Self {
            request,
            sensitive,
            requested_by: requested_by.into(),
            drift_check: false,
            write: WriteMode::Queue(idempotency),
            at: Utc::now(),
            trigger: None,
            restore: None,
            pull_request: None,
        }
    }

    /// An earlier job's request again, as `operation`, for `requested_by` (a drift check
    /// replays the latest apply as a plan, a remediation the check as an apply). The earlier
    /// job's secrets are gone with it: the new one has no sensitive variables.
    pub fn again(
        earlier: &JobRequest,
        operation: Operation,
        requested_by: impl Into<String>,
        at: DateTime<Utc>,
    ) -> Self {
        let mut request = earlier.clone();
        request.operation = operation;
        request.sensitive_variables.clear();
        request.sensitive_secret = None;
        Self {
            request,
            sensitive: SensitiveValues::default(),
            requested_by: requested_by.into(),
            drift_check: false,
            write: WriteMode::Queue(None),
            at,
            trigger: None,
            restore: None,
            pull_request: None,
        }
    }
}

/// Why a job was not submitted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The environment's runner was deleted since the environment was linked to it.
    #[error("environment `{environment}` is linked to runner `{runner}`, which no longer exists; refresh its runner")]
    RunnerMissing {
        /// The environment.
        environment: EnvPath,
        /// The runner it names.
        runner: RunnerId,
    },
    /// The sensitive variables could not be kept in Secrets Manager (the message names no value).
    #[error("the sensitive variables could not be stored: {0}")]
    SecretsUnavailable(String),
    /// [`WriteMode::IfIdle`], and the environment is busy: nothing was written.
    #[error("environment `{0}` is busy")]
    Busy(EnvPath),
    /// The environment is locked, or a group above it frozen: no new job runs until it is
    /// unlocked (the message names who locked it, when and why).
    #[error("{}", .held.refusal(.environment))]
    Locked {
        /// The environment.
        environment: EnvPath,
        /// The lock that holds it.
        held: sortie_core::lock::Held,
    },
    /// The environment is marked destroyed by its expiry: no new job runs there, whoever
    /// submits it, until it is extended (the write's own condition checks it).
    #[error("{}", .destroyed.refusal(.environment))]
    Destroyed {
        /// The environment.
        environment: EnvPath,
        /// When and how it was destroyed.
        destroyed: sortie_core::expiry::Destroyed,
    },
    /// Only a plan may be speculative: an apply or destroy writes state, and needs the lock.
    #[error("a speculative job must be a plan, not {} {}", sortie_core::job::a_or_an(.0.as_str()), .0.as_str())]
    NotSpeculative(Operation),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobService {
    /// Submits `order` to environment `env`: reads its runner, makes the job's id, keeps
    /// its sensitive values, builds the job ([`Job::for_environment`]), then writes it and,
    /// when it took the environment's lock, sends it to the jobs queue. A submit that wrote
    /// no new job (an idempotent replay, or a failure) deletes the secrets it made.
    pub async fn submit_for(
        &self,
        env: &Environment,
        order: JobOrder,
    ) -> Result<Submitted, SubmitError> {
        // On the heap: a submit runs inside a job's end (a trigger, a remediation, an apply
        // after a merge), and its future inlined there overflowed a worker's stack.
        Box::pin(self.submit_for_unboxed(env, order)).await
    }

    async fn submit_for_unboxed(
        &self,
        env: &Environment,
        order: JobOrder,
    ) -> Result<Submitted, SubmitError> {
        // A lock (or a freeze above) refuses new jobs: the write's own condition checks it,
        // and only a refused write reads the lock, to name it (`refusal_of`).
        let runner_id = &env.runner.runner_id;
        // An apply or destroy reads the policy sets in force beside the runner: one round
        // trip, not two, before the job's write.
        let gated = order.request.operation.writes_state() && !order.drift_check;
        let (runner, sets) = tokio::join!(self.store.get_runner(runner_id), async {
            match gated {
                true => Some(self.sets_in_force(env).await),
                false => None,
            }
        });
        let runner = runner.map_err(|e| match e {
            StoreError::NotFound { .. } => SubmitError::RunnerMissing {
                environment: env.path.clone(),
                runner: runner_id.clone(),
            },
            other => other.into(),
        })?;
        let id = JobId::from(sortie_core::tokens::new_id());
        let mut request = order.request;
        // Values go to Secrets Manager, one secret per job; the job records its ARN.
        self.keep_sensitive_variables(&id, &env.path, &order.sensitive, &mut request)
            .await
            .map_err(SubmitError::SecretsUnavailable)?;
        drop(order.sensitive);
        let mut job = Job::for_environment(
            id,
            env,
            runner.item.spec,
            request,
            order.requested_by,
            order.at,
        );
        job.drift_check = order.drift_check;
        job.trigger = order.trigger;
        job.restore = order.restore;
        job.pull_request = order.pull_request;
        if matches!(order.write, WriteMode::Speculative(_)) {
            if job.request.operation != Operation::Plan {
                self.forget_sensitive_variables(&job).await;
                return Err(SubmitError::NotSpeculative(job.request.operation));
            }
            job.speculative = true;
        }
        // Policy sets apply: an apply or destroy runs in two phases, its plan gated.
        if let Err(e) = self.gate_at_submit(env, &mut job, sets).await {
            self.forget_sensitive_variables(&job).await;
            return Err(e.into());
        }
        let written = match &order.write {
            WriteMode::Queue(key) => self.submit(&job, key.as_ref()).await.map(Some),
            WriteMode::IfIdle => self.submit_if_idle(&job).await,
            WriteMode::Speculative(key) => {
                self.submit_speculative(&job, key.as_ref()).await.map(Some)
            }
        };
        match written {
            Ok(Some(s)) if !s.replayed => Ok(s),
            Ok(Some(s)) => {
                // A replay answers the first submit's job: this one's secrets are not needed.
                self.forget_sensitive_variables(&job).await;
                Ok(s)
            }
            Ok(None) => Err(SubmitError::Busy(env.path.clone())),
            Err(e) => {
                self.forget_sensitive_variables(&job).await;
                Err(self.refusal_of(&env.path, e).await)
            }
        }
    }

    /// The refusal of a submit whose write failed: a destroyed environment fails the write's
    /// condition (`StoreError::Destroyed`, which carries its mark); a lock or freeze
    /// (`StoreError::Locked`) is named (who, when, why) by reading it now,
    /// only after the refusal, so a submit that is not refused pays no lock read.
    async fn refusal_of(&self, path: &EnvPath, e: StoreError) -> SubmitError {
        let e = match e {
            StoreError::Destroyed { destroyed, .. } => {
                return SubmitError::Destroyed {
                    environment: path.clone(),
                    destroyed,
                }
            }
            StoreError::Locked { .. } => e,
            other => return other.into(),
        };
        match self.lock_holding(path).await {
            Ok(Some(held)) => SubmitError::Locked {
                environment: path.clone(),
                held,
            },
            // Unlocked again since: the write still failed on the lock it saw.
            Ok(None) | Err(_) => e.into(),
        }
    }

    async fn submit_speculative(
        &self,
        job: &Job,
        key: Option<&IdempotencyKey>,
    ) -> Result<Submitted, StoreError> {
        let submitted = self.store.submit_speculative(job, key).await?;
        if !submitted.replayed {
            self.send_or_leave_pending(&submitted.job).await;
        }
        Ok(submitted)
    }

    async fn submit_if_idle(&self, job: &Job) -> Result<Option<Submitted>, StoreError> {
        let submitted = self.store.submit_if_idle(job).await?;
        if let Some(s) = &submitted {
            self.send_or_leave_pending(&s.job).await;
        }
        Ok(submitted)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sortie_core::sensitive::SensitiveValues;
    use sortie_core::{JobRequest, JobState, Operation, RunnerId};
    use sortie_store::JobStore;

    use super::*;
    use crate::testing::{World, RUNNER};

    fn request(operation: &str) -> JobRequest {
        serde_json::from_value(serde_json::json!({
            "operation": operation,
            "source": {"type": "inline", "files": {"main.tf": ""}},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_submit_builds_the_job_stores_it_and_sends_it() {
        let w = World::new().await;
        let env = w.environment("acme/payments/prod").await;
        let sensitive =
            SensitiveValues::new(BTreeMap::from([("db_password".into(), "hunter2".into())]));
        let order = JobOrder::submit(request("apply"), sensitive, "alice", None);
        let submitted = w.jobs.submit_for(&env, order).await.unwrap();
        assert!(submitted.took_lock && !submitted.replayed);
        let job = w.store.get_job(&submitted.job.id).await.unwrap().job;
        assert_eq!(
            (job.state, job.requested_by.as_str()),
            (JobState::Queued, "alice")
        );
        assert_eq!(job.runner_id.to_string(), RUNNER);
        assert!(
            job.runner_spec.is_some(),
            "the runner's spec is taken at submit"
        );
        let arn = job.request.sensitive_secret.as_ref().unwrap();
        assert_eq!(
            w.jobs.secrets.value(arn).await.unwrap(),
            r#"{"db_password":"hunter2"}"#
        );
        let values = w.jobs.sensitive_values(&job).await.unwrap();
        assert_eq!(
            values.iter().collect::<Vec<_>>(),
            vec![("db_password", "hunter2")]
        );
        assert_eq!(w.sent(), vec![job.id]);
    }

    #[tokio::test]
    async fn a_drift_order_replays_an_earlier_request_without_its_secrets() {
        let w = World::new().await;
        let env = w.environment("acme/payments/prod").await;
        let mut earlier = request("apply");
        earlier
            .sensitive_variables
            .insert("db_password".into(), "arn:gone".into());
        let mut order = JobOrder::again(&earlier, Operation::Plan, "sortie:drift", Utc::now());
        order.drift_check = true;
        order.write = WriteMode::IfIdle;
        let first = w.jobs.submit_for(&env, order.clone()).await.unwrap();
        assert!(first.job.drift_check);
        assert_eq!(first.job.request.operation, Operation::Plan);
        assert!(first.job.request.sensitive_variables.is_empty());
        // The environment is busy now: an if-idle order writes nothing.
        match w.jobs.submit_for(&env, order).await {
            Err(SubmitError::Busy(path)) => assert_eq!(path, env.path),
            other => panic!("{other:?}"),
        }
        assert_eq!(w.sent(), vec![first.job.id]);
    }

    #[tokio::test]
    async fn a_deleted_runner_is_named() {
        let w = World::new().await;
        let mut env = w.environment("acme/payments/prod").await;
        // A runner deleted since the environment was linked to it.
        env.runner.runner_id = RunnerId::parse("acme/gone").unwrap();
        let order = JobOrder::submit(request("plan"), SensitiveValues::default(), "alice", None);
        let e = w.jobs.submit_for(&env, order).await.unwrap_err();
        assert!(matches!(e, SubmitError::RunnerMissing { .. }), "{e:?}");
        assert_eq!(e.to_string(), "environment `acme/payments/prod` is linked to runner `acme/gone`, which no longer exists; refresh its runner");
        assert!(w.sent().is_empty());
    }

    /// Secrets that, on the submit's first secret (after the submit started, before it
    /// writes the job), lock the environment (or freeze its group): a lock taken while a
    /// submit is under way.
    struct LockMidSubmit {
        store: std::sync::Arc<sortie_store::MemoryStore>,
        freeze: bool,
        inner: sortie_launch::MemoryJobSecrets,
    }

    #[async_trait::async_trait]
    impl sortie_launch::JobSecrets for LockMidSubmit {
        async fn create(
            &self,
            name: &str,
            value: &str,
            tags: &[(&str, &str)],
        ) -> Result<String, String> {
            use sortie_store::LockStore;
            let env = tags.iter().find(|(k, _)| *k == "sortie:env").unwrap().1;
            let path = EnvPath::parse(env).unwrap();
            let lock = sortie_core::lock::EnvLock::new("carol", Utc::now(), "incident 7").unwrap();
            if self.freeze {
                self.store.freeze_group(path.group(), &lock).await.unwrap();
            } else {
                self.store.lock_environment(&path, &lock).await.unwrap();
            }
            self.inner.create(name, value, tags).await
        }
        async fn value(&self, arn: &str) -> Result<String, String> {
            self.inner.value(arn).await
        }
        async fn delete(&self, arn: &str) -> Result<(), String> {
            self.inner.delete(arn).await
        }
    }

    #[tokio::test]
    async fn a_locked_or_frozen_environment_is_refused_by_the_write_and_named_after() {
        use sortie_store::LockStore;
        for freeze in [false, true] {
            let w = World::new().await;
            let env = w.environment("acme/payments/prod").await;
            let lock = sortie_core::lock::EnvLock::new("dave", Utc::now(), "audit").unwrap();
            if freeze {
                w.store.freeze_group(env.path.group(), &lock).await.unwrap();
            } else {
                w.store.lock_environment(&env.path, &lock).await.unwrap();
            }
            let held = w.jobs.lock_holding(&env.path).await.unwrap().unwrap();
            let order =
                JobOrder::submit(request("apply"), SensitiveValues::default(), "alice", None);
            let e = w.jobs.submit_for(&env, order).await.unwrap_err();
            assert!(
                matches!(e, SubmitError::Locked { .. }),
                "freeze={freeze}: {e:?}"
            );
            // The message is the lock's own refusal: who, when and why.
            assert_eq!(e.to_string(), held.refusal(&env.path), "freeze={freeze}");
            assert!(
                e.to_string().contains("dave") && e.to_string().contains("audit"),
                "{e}"
            );
            assert!(w.sent().is_empty(), "nothing sent (freeze={freeze})");
            let jobs = w.store.list_jobs(&env.path, 50, None).await.unwrap().jobs;
            assert!(jobs.is_empty(), "no job written (freeze={freeze})");
        }
    }

    #[tokio::test]
    async fn a_lock_taken_while_a_submit_is_under_way_lets_no_job_in() {
        for (freeze, busy) in [(false, false), (false, true), (true, false), (true, true)] {
            let mut w = World::new().await;
            let env = w.environment("acme/payments/prod").await;
            if busy {
                // The lock's condition holds on the queue's write too.
                let order =
                    JobOrder::submit(request("plan"), SensitiveValues::default(), "bob", None);
                w.jobs.submit_for(&env, order).await.unwrap();
            }
            let secrets = std::sync::Arc::new(LockMidSubmit {
                store: w.store.clone(),
                freeze,
                inner: Default::default(),
            });
            w.jobs.secrets = secrets.clone();
            let sensitive =
                SensitiveValues::new(BTreeMap::from([("token".into(), "s3cret".into())]));
            let order = JobOrder::submit(request("apply"), sensitive, "alice", None);
            let before = w
                .store
                .list_jobs(&env.path, 50, None)
                .await
                .unwrap()
                .jobs
                .len();
            let e = w.jobs.submit_for(&env, order).await.unwrap_err();
            match &e {
                SubmitError::Locked { held, .. } => {
                    assert_eq!(held.lock.reason, "incident 7", "{e}");
                    assert_eq!(held.lock.by, "carol");
                }
                other => panic!("freeze={freeze} busy={busy}: {other:?}"),
            }
            let after = w
                .store
                .list_jobs(&env.path, 50, None)
                .await
                .unwrap()
                .jobs
                .len();
            assert_eq!(
                after, before,
                "no job written (freeze={freeze}, busy={busy})"
            );
            assert_eq!(w.sent().len(), usize::from(busy), "nothing more sent");
            assert_eq!(
                secrets.inner.deleted.lock().unwrap().len(),
                1,
                "the refused job's secret is deleted"
            );
        }
    }
}
