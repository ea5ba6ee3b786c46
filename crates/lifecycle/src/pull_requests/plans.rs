//! Speculative plans of a pull request's head: the environments it touches, its record,
//! and one plan per environment and commit.

use chrono::Utc;
use sortie_core::auth::{can, Action, Principal};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::{PullEnvironment, PullRequestRecord, MAX_ENVIRONMENTS};
use sortie_core::vcs::{VcsBinding, VcsProvider};
use sortie_core::{Environment, JobRequest, Operation, Source};
use sortie_store::{IdempotencyKey, StoreError};
use tracing::info;

use super::{CodeHost, PullError, PullInfo, PullRequests, RECORD_TRIES};
use crate::{JobOrder, SubmitError, WriteMode};

impl PullRequests {
    /// The environments of the connection's organisation bound to `repository` and `base`
    /// whose globs match `files`, in path order. Another organisation's binding of the same
    /// repository is never touched: a connection serves its own organisation only.
    pub(super) async fn matched_environments(
        &self,
        provider: VcsProvider,
        org: &str,
        repository: &str,
        base: &str,
        files: &[String],
    ) -> Result<Vec<Environment>, PullError> {
        let mut out = Vec::new();
        for path in self
            .store()
            .bound_environments(provider, repository)
            .await?
        {
            if path.org() != org {
                continue;
            }
            let env = match self.store().get_environment(&path).await {
                Ok(e) => e.item.environment,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(binding) = &env.settings.vcs else {
                continue;
            };
            if binding.repository.eq_ignore_ascii_case(repository)
                && binding.branch == base
                && binding.matches(files.iter().map(String::as_str))
            {
                out.push(env);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Plans the pull request's head on every environment it touches (or, `only`, the
    /// ones named) that has no plan of that commit yet, and writes its report. An
    /// environment whose plan may not run yet (a fork, or an author who may not deploy
    /// there) is shown as waiting for a deployer's `/sortie plan`.
    pub(super) async fn plan_head(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
        allowed_by: Option<(&str, &[String])>,
    ) -> Result<(), PullError> {
        let info = host.pull(repository, number).await?;
        let files = host.changed_files(repository, number).await?;
        let matched = self
            .matched_environments(
                connection.provider,
                &connection.org,
                repository,
                &info.base,
                &files,
            )
            .await?;
        let author = self.principal(connection, &info.author).await?;
        for _ in 0..RECORD_TRIES {
            let (mut record, version) = self.record(connection, repository, number, &info).await?;
            if let Some((by, _)) = allowed_by {
                record.plans_allowed_by = Some(by.to_string());
            }
            let planned = self
                .plan_environments(&mut record, &matched, &author, &info, allowed_by)
                .await;
            record.updated_at = Utc::now();
            match self.store().put_pull_request(&record, version).await {
                Ok(v) => {
                    planned?;
                    return self.write_report(host, record, v).await;
                }
                Err(StoreError::VersionMismatch { .. } | StoreError::AlreadyExists { .. }) => {
                    // Another worker moved the record: its jobs are found again by their
                    // idempotency keys, never submitted twice.
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Aws {
            service: "dynamodb",
            message: format!("pull request {repository}#{number} kept changing"),
            retryable: true,
        }
        .into())
    }

    /// The pull request's record, updated with what the host says now, and its version
    /// (`None` when new).
    pub(super) async fn record(
        &self,
        connection: &VcsConnection,
        repository: &str,
        number: u64,
        info: &PullInfo,
    ) -> Result<(PullRequestRecord, Option<u64>), PullError> {
        let found = self
            .store()
            .get_pull_request(connection.provider, repository, number)
            .await?;
        let (mut record, version) = match found {
            Some(v) => (v.item, Some(v.version)),
            None => (
                PullRequestRecord {
                    provider: connection.provider,
                    org: connection.org.clone(),
                    repository: repository.to_string(),
                    number,
                    head_sha: info.head_sha.clone(),
                    base: info.base.clone(),
                    author: info.author.clone(),
                    fork: info.fork,
                    open: info.open,
                    merged: false,
                    notes: vec![],
                    plans_allowed_by: None,
                    comment_id: None,
                    comment_digest: None,
                    environments: Default::default(),
                    over_limit: 0,
                    updated_at: Utc::now(),
                },
                None,
            ),
        };
        record.head_sha = info.head_sha.clone();
        record.base = info.base.clone();
        record.fork = info.fork;
        record.open = info.open;
        Ok((record, version))
    }

    /// Submits the speculative plans `record` lacks for its head. The first failure is
    /// returned after the record keeps what was submitted before it.
    async fn plan_environments(
        &self,
        record: &mut PullRequestRecord,
        matched: &[Environment],
        author: &Principal,
        info: &PullInfo,
        allowed_by: Option<(&str, &[String])>,
    ) -> Result<(), PullError> {
        let head = info.head_sha.clone();
        // Environments the head no longer touches leave the report.
        record
            .environments
            .retain(|path, _| matched.iter().any(|e| e.path.to_string() == *path));
        record.over_limit = matched.len().saturating_sub(MAX_ENVIRONMENTS) as u32;
        if !info.open {
            return Ok(());
        }
        for env in matched.iter().take(MAX_ENVIRONMENTS) {
            let path = env.path.to_string();
            if let Some((_, only)) = allowed_by {
                if !only.is_empty() && !only.contains(&path) {
                    continue;
                }
            }
            let planned = record
                .environments
                .get(&path)
                .is_some_and(|e| e.sha == head && e.plan_job.is_some());
            if planned {
                continue;
            }
            let author_may = !info.fork && can(author, Action::Deploy, env.path.group());
            let requested_by = match (&record.plans_allowed_by, author_may) {
                (Some(by), _) => by.clone(),
                (None, true) => info.author.clone(),
                (None, false) => {
                    let why = if info.fork {
                        "the pull request comes from a fork"
                    } else {
                        "its author may not deploy here"
                    };
                    record.environments.insert(
                        path.clone(),
                        PullEnvironment {
                            sha: head.clone(),
                            not_planned: Some(format!(
                                "plans run the pull request's code, and {why}: a deployer of {path} can comment `/sortie plan {path}`"
                            )),
                            ..Default::default()
                        },
                    );
                    continue;
                }
            };
            let binding = env
                .settings
                .vcs
                .as_ref()
                .expect("matched environments are bound");
            let job = self
                .submit_plan(env, binding, record, &head, &requested_by)
                .await?;
            record.environments.insert(
                path,
                PullEnvironment {
                    sha: head.clone(),
                    plan_job: Some(job),
                    ..Default::default()
                },
            );
        }
        Ok(())
    }

    /// Submits one speculative plan of `sha` to `env`, once per pull request, environment
    /// and commit (the idempotency key), for `requested_by` (a host login).
    async fn submit_plan(
        &self,
        env: &Environment,
        binding: &VcsBinding,
        record: &PullRequestRecord,
        sha: &str,
        requested_by: &str,
    ) -> Result<String, PullError> {
        let request = JobRequest {
            operation: Operation::Plan,
            source: Source::of_commit(
                binding.provider,
                &binding.repository,
                sha,
                &binding.directory,
            ),
            variables: Default::default(),
            files: Default::default(),
            secret_refs: Default::default(),
            sensitive_variables: Default::default(),
            sensitive_secret: None,
        };
        let key = IdempotencyKey {
            key: format!(
                "pr:{}#{}@{sha}",
                record.repository.to_ascii_lowercase(),
                record.number
            ),
            request_hash: sha.to_string(),
        };
        let mut order = JobOrder::submit(
            request,
            SensitiveValues::default(),
            format!("{}:{requested_by}", record.provider.as_str()),
            None,
        );
        order.write = WriteMode::Speculative(Some(key));
        order.pull_request = Some(record.job_ref(sha));
        match self.jobs.submit_for(env, order).await {
            Ok(submitted) => {
                info!(job_id = %submitted.job.id, environment = %env.path, pull_request = %record.display(), "speculative plan submitted");
                Ok(submitted.job.id.to_string())
            }
            Err(SubmitError::Store(e)) => Err(e.into()),
            Err(e) => Err(StoreError::Invalid {
                path: env.path.to_string(),
                problem: e.to_string(),
            }
            .into()),
        }
    }
}
