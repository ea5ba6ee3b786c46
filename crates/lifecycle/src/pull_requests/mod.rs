//! Sortie in the pull request: the service that turns a pull request's work
//! ([`PullWork`]) into speculative plans, check runs and one comment, and answers its
//! `/sortie` commands. What is decided is decided in `sortie_core::vcs`; the host is
//! reached through [`CodeHost`].

mod bus;
mod connections;
mod github;
mod host;
mod reconcile;
mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use chrono::Utc;
use sortie_core::auth::{can, Action, Grantee, Principal};
use sortie_core::sensitive::SensitiveValues;
use sortie_core::vcs::command::{help_text, Command};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::{PullEnvironment, PullRequestRecord, MAX_ENVIRONMENTS};
use sortie_core::vcs::report::escape;
use sortie_core::vcs::requirements::{evaluate, Unmet};
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::{VcsBinding, VcsProvider};
use sortie_core::{EnvPath, Environment, JobId, JobRequest, Operation, ReviewVerdict, Source};
use sortie_store::{IdempotencyKey, Store, StoreError};
use tracing::{info, warn};

pub use bus::{report_of, work_of_message, PullReportingBus, REPORTED_EVENTS};
pub use connections::{
    ConnectRefusal, Connections, PRIVATE_KEY_MAX, WEBHOOK_SECRET_MAX, WEBHOOK_SECRET_MIN,
};
pub use github::{work_of, GithubHost, GithubHosts};
pub use host::{CodeHost, CodeHosts, HostError, PullInfo};
pub use reconcile::{Reconciled, MAX_REPAIRS};

use crate::{JobOrder, JobService, SubmitError, WriteMode};

/// A record written on condition of its version is read and tried again at most this
/// many times when another worker wrote it first.
const RECORD_TRIES: u32 = 3;

/// The issuer of the principals a connection's users are mapped to: a membership granted
/// to subject `<login>` with this issuer lets that GitHub user command Sortie.
pub fn issuer_of(connection: &VcsConnection) -> String {
    let host = url::Url::parse(&connection.api_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    format!("vcs:{}:{host}", connection.provider.as_str())
}

/// Why pull-request work failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The host failed.
    #[error("{0}")]
    Host(#[from] HostError),
    /// An approved apply waits for requirements that may still come to hold (a required
    /// check running, GitHub still computing mergeability): the work is tried again.
    #[error("waiting for the pull request's requirements: {0}")]
    Waiting(String),
}

impl PullError {
    /// True when the work may succeed if tried again (the queue redelivers it).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Store(e) => e.is_retryable(),
            Self::Host(e) => e.is_retryable(),
            Self::Waiting(_) => true,
        }
    }
}

/// Who discards an approved apply whose pull request's requirements no longer hold.
pub const REQUIREMENTS_PRINCIPAL: &str = "sortie:pull-request-requirements";

/// The pull-request service.
#[derive(Clone)]
pub struct PullRequests {
    /// The job operations (its store is the repository).
    pub jobs: JobService,
    /// Opens each connection's host.
    pub hosts: Arc<dyn CodeHosts>,
    /// The console's URL: a job's page is `<console_url>/#/jobs/<id>`.
    pub console_url: String,
}

/// Writes the bindings index before an environment's binding changes to `after` (from
/// `before`): a bound environment is always in the index of its repository.
pub(crate) async fn index_binding(
    store: &dyn Store,
    env: &EnvPath,
    before: Option<&VcsBinding>,
    after: Option<&VcsBinding>,
) -> Result<(), StoreError> {
    if let Some(b) = after {
        if before.map(index_key) != Some(index_key(b)) {
            store.index_binding(b.provider, &b.repository, env).await?;
        }
    }
    Ok(())
}

/// Removes an environment from the index of the repository it was bound to, after its
/// binding moved (or the environment went). Best effort: a stale entry is skipped by every
/// reader, which checks the binding.
pub(crate) async fn unindex_moved_binding(
    store: &dyn Store,
    env: &EnvPath,
    before: Option<&VcsBinding>,
    after: Option<&VcsBinding>,
) {
    if let Some(b) = before {
        if after.map(index_key) != Some(index_key(b)) {
            if let Err(e) = store.unindex_binding(b.provider, &b.repository, env).await {
                warn!(environment = %env, error = %e, "a stale bindings index entry is left (readers skip it)");
            }
        }
    }
}

fn index_key(b: &VcsBinding) -> (VcsProvider, String) {
    (b.provider, b.repository.to_ascii_lowercase())
}

impl PullRequests {
    fn store(&self) -> &dyn Store {
        self.jobs.store.as_ref()
    }

    /// Does one piece of work. A retryable error asks the queue to redeliver it; any other
    /// is logged by the caller and the work dropped.
    pub async fn handle(&self, work: &PullWork) -> Result<(), PullError> {
        let Some((connection, host)) = self.host(work.org()).await? else {
            return Ok(());
        };
        match work {
            PullWork::PullRequest {
                repository,
                number,
                action,
                ..
            } => {
                if *action == PullAction::Closed {
                    self.closed(&connection, host.as_ref(), repository, *number)
                        .await
                } else {
                    self.plan_head(&connection, host.as_ref(), repository, *number, None)
                        .await
                }
            }
            PullWork::Comment {
                repository,
                number,
                author,
                commands,
                ..
            } => {
                for command in commands {
                    self.command(
                        &connection,
                        host.as_ref(),
                        repository,
                        *number,
                        author,
                        command,
                    )
                    .await?;
                }
                Ok(())
            }
            PullWork::Review {
                repository, number, ..
            }
            | PullWork::Report {
                repository, number, ..
            } => self.report(host.as_ref(), repository, *number).await,
            // Applies after a merge come with the merge commands' work (issue 42, next).
            PullWork::Push { .. } => Ok(()),
            PullWork::Reconcile { .. } => self
                .reconcile_with(&connection, host.as_ref())
                .await
                .map(|_| ()),
        }
    }

    /// The organisation's connection and its host; `None` (the work is dropped) when the
    /// organisation has no connection any more.
    async fn host(
        &self,
        org: &str,
    ) -> Result<Option<(VcsConnection, Arc<dyn CodeHost>)>, PullError> {
        let connection = match self.store().get_connection(org, VcsProvider::Github).await {
            Ok(c) => c,
            Err(StoreError::NotFound { .. }) => {
                warn!(
                    org,
                    "pull request work for an organisation with no connection: dropped"
                );
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let host = self.hosts.open(&connection).await?;
        Ok(Some((connection, host)))
    }

    /// The principal a host user is: subject `<login>` (lower case) of the connection's
    /// issuer, with the memberships of the connection's organisation granted to it by name
    /// and issuer. A grant that names no issuer is not counted: it was meant for a token's
    /// `sub`, and a host user may pick any login, such as a person's subject elsewhere.
    async fn principal(
        &self,
        connection: &VcsConnection,
        login: &str,
    ) -> Result<Principal, PullError> {
        let mut principal = Principal {
            issuer: issuer_of(connection),
            subject: login.to_ascii_lowercase(),
            claims: Default::default(),
            memberships: vec![],
        };
        let memberships = self.store().memberships_for(Some(&connection.org)).await?;
        principal.memberships = memberships
            .into_iter()
            .filter(|m| {
                matches!(&m.grantee, Grantee::Subject { issuer: Some(i), .. } if *i == principal.issuer)
                    && m.applies_to(&principal)
            })
            .collect();
        Ok(principal)
    }

    /// The environments of the connection's organisation bound to `repository` and `base`
    /// whose globs match `files`, in path order. Another organisation's binding of the same
    /// repository is never touched: a connection serves its own organisation only.
    async fn matched_environments(
        &self,
        org: &str,
        repository: &str,
        base: &str,
        files: &[String],
    ) -> Result<Vec<Environment>, PullError> {
        let mut out = Vec::new();
        for path in self
            .store()
            .bound_environments(VcsProvider::Github, repository)
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
    async fn plan_head(
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
            .matched_environments(&connection.org, repository, &info.base, &files)
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
    async fn record(
        &self,
        connection: &VcsConnection,
        repository: &str,
        number: u64,
        info: &PullInfo,
    ) -> Result<(PullRequestRecord, Option<u64>), PullError> {
        let found = self
            .store()
            .get_pull_request(VcsProvider::Github, repository, number)
            .await?;
        let (mut record, version) = match found {
            Some(v) => (v.item, Some(v.version)),
            None => (
                PullRequestRecord {
                    provider: VcsProvider::Github,
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
            source: Source::Github {
                repository: binding.repository.clone(),
                commit: sha.to_string(),
                path: binding.directory.clone(),
            },
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
            format!("{}:{requested_by}", VcsProvider::Github.as_str()),
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

    /// A closed pull request: its record says so, and its report is written once more.
    async fn closed(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
    ) -> Result<(), PullError> {
        let info = host.pull(repository, number).await?;
        if info.open {
            // Reopened since (or a stale list): it is planned as open, never marked closed.
            return self
                .plan_head(connection, host, repository, number, None)
                .await;
        }
        for _ in 0..RECORD_TRIES {
            let (mut record, version) = self.record(connection, repository, number, &info).await?;
            if version.is_none() {
                return Ok(());
            }
            let newly_merged = info.merged && !record.merged;
            record.open = false;
            record.merged = info.merged;
            if newly_merged {
                self.after_merge(connection, &mut record, &info).await?;
            }
            record.updated_at = Utc::now();
            match self.store().put_pull_request(&record, version).await {
                Ok(v) => return self.write_report(host, record, v).await,
                // Another worker moved the record: its applies are found again by their
                // idempotency keys, never submitted twice.
                Err(StoreError::VersionMismatch { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// A merge: every planned environment bound with `apply: after_merge` gets an apply of
    /// the merge commit, requested by whoever its plans ran for (the author, or the
    /// deployer who allowed them), if that person may still deploy there; an environment
    /// bound with `before_merge` that was not applied is named in the comment.
    async fn after_merge(
        &self,
        connection: &VcsConnection,
        record: &mut PullRequestRecord,
        info: &PullInfo,
    ) -> Result<(), PullError> {
        let requester = record
            .plans_allowed_by
            .clone()
            .unwrap_or_else(|| record.author.clone());
        let principal = self.principal(connection, &requester).await?;
        let mut applies = Vec::new();
        let paths: Vec<String> = record.environments.keys().cloned().collect();
        for path in paths {
            let entry = record.environments[&path].clone();
            let Ok(env_path) = EnvPath::parse(&path) else {
                continue;
            };
            let env = match self.store().get_environment(&env_path).await {
                Ok(e) => e.item.environment,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(binding) = env.settings.vcs.clone() else {
                continue;
            };
            match binding.apply {
                sortie_core::vcs::ApplyMode::AfterMerge if entry.plan_job.is_some() => {
                    let Some(merge_sha) = info.merge_commit_sha.clone() else {
                        record.note(format!(
                            "{path} was not applied: GitHub gave no merge commit"
                        ));
                        continue;
                    };
                    if !can(&principal, Action::Deploy, env.path.group()) {
                        record.note(format!(
                            "{path} was not applied after the merge: {requester} may not deploy there (apply it with `sortie run apply`)"
                        ));
                        continue;
                    }
                    applies.push((path, env, binding, merge_sha));
                }
                sortie_core::vcs::ApplyMode::BeforeMerge if entry.apply_job.is_none() => {
                    record.note(format!(
                        "{path} was merged before its apply: its changes are not applied (its binding applies before the merge)"
                    ));
                }
                _ => {}
            }
        }
        for (path, env, binding, sha) in applies {
            let id = self
                .submit_apply(&env, &binding, record, &sha, &requester, true)
                .await?;
            if let Some(e) = record.environments.get_mut(&path) {
                e.apply_job = Some(id);
            }
        }
        Ok(())
    }

    /// Carries out one `/sortie` command by `author`.
    async fn command(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
        author: &str,
        command: &Command,
    ) -> Result<(), PullError> {
        match command {
            Command::Help => host.reply(repository, number, &help_text()).await?,
            Command::Unknown { text } => {
                let body = format!("{}\n\n{}", escape(text), help_text());
                host.reply(repository, number, &body).await?
            }
            Command::Plan { environments } => {
                let info = host.pull(repository, number).await?;
                let files = host.changed_files(repository, number).await?;
                let matched = self
                    .matched_environments(&connection.org, repository, &info.base, &files)
                    .await?;
                let commenter = self.principal(connection, author).await?;
                let targets: Vec<&Environment> = matched
                    .iter()
                    .filter(|e| {
                        environments.is_empty()
                            || environments.iter().any(|n| *n == e.path.to_string())
                    })
                    .collect();
                let unknown: Vec<&String> = environments
                    .iter()
                    .filter(|n| !matched.iter().any(|e| e.path.to_string() == **n))
                    .collect();
                let refused: Vec<String> = targets
                    .iter()
                    .filter(|e| !can(&commenter, Action::Deploy, e.path.group()))
                    .map(|e| e.path.to_string())
                    .collect();
                if !refused.is_empty() || !unknown.is_empty() || targets.is_empty() {
                    let mut lines = Vec::new();
                    if !refused.is_empty() {
                        lines.push(format!(
                            "@{} needs the deployer role on {} to plan there (a membership for subject `{}` of issuer `{}`).",
                            escape(author),
                            escape(&refused.join(", ")),
                            escape(&author.to_ascii_lowercase()),
                            escape(&issuer_of(connection))
                        ));
                    }
                    if !unknown.is_empty() {
                        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
                        lines.push(format!(
                            "This pull request does not touch {}.",
                            escape(&names.join(", "))
                        ));
                    }
                    if targets.is_empty() && unknown.is_empty() {
                        lines.push("This pull request touches no environment bound to its repository and base branch.".into());
                    }
                    host.reply(repository, number, &lines.join("\n")).await?;
                    return Ok(());
                }
                self.plan_head(
                    connection,
                    host,
                    repository,
                    number,
                    Some((author, environments)),
                )
                .await?
            }
            Command::Apply { environments } => {
                self.apply(connection, host, repository, number, author, environments)
                    .await?
            }
        }
        Ok(())
    }

    /// `/sortie apply` by `author`: every environment named (or every one planned) must
    /// allow applies before the merge, have a successful plan of the head commit, and meet
    /// its requirements read from the host now (approvals on the head, mergeable, up to
    /// date, required checks green, Sortie's own left out); the commenter must be a
    /// deployer there. All or nothing: any refusal answers with every reason and applies
    /// none. Each apply is an ordinary apply of the planned commit (it takes the lock,
    /// passes the policy gate and the environment's approval), submitted once per commit.
    async fn apply(
        &self,
        connection: &VcsConnection,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
        author: &str,
        named: &[String],
    ) -> Result<(), PullError> {
        let Some(found) = self
            .store()
            .get_pull_request(VcsProvider::Github, repository, number)
            .await?
        else {
            host.reply(
                repository,
                number,
                "Nothing is planned on this pull request yet.",
            )
            .await?;
            return Ok(());
        };
        let record = found.item;
        let commenter = self.principal(connection, author).await?;
        let mut facts = host.facts(repository, number).await?;
        let mut refusals = Vec::new();
        for n in named {
            if !record.environments.contains_key(n) {
                refusals.push(format!("This pull request does not touch {}.", escape(n)));
            }
        }
        let mut targets = Vec::new();
        for (path, entry) in &record.environments {
            if !named.is_empty() && !named.contains(path) {
                continue;
            }
            let env_path = match EnvPath::parse(path) {
                Ok(p) => p,
                Err(_) => continue,
            };
            let env = match self.store().get_environment(&env_path).await {
                Ok(e) => e.item.environment,
                Err(StoreError::NotFound { .. }) => {
                    refusals.push(format!("{}: the environment is gone.", escape(path)));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let mut why = Vec::new();
            if !can(&commenter, Action::Deploy, env.path.group()) {
                why.push(format!(
                    "@{} needs the deployer role here (a membership for subject `{}` of issuer `{}`)",
                    escape(author),
                    escape(&author.to_ascii_lowercase()),
                    escape(&issuer_of(connection))
                ));
            }
            let Some(binding) = env.settings.vcs.clone() else {
                refusals.push(format!(
                    "{}: no longer bound to this repository.",
                    escape(path)
                ));
                continue;
            };
            match binding.apply {
                sortie_core::vcs::ApplyMode::BeforeMerge => {}
                sortie_core::vcs::ApplyMode::AfterMerge => {
                    why.push("it applies after the merge (`apply: after_merge`)".into())
                }
                sortie_core::vcs::ApplyMode::None => {
                    why.push("it is never applied from a pull request (`apply: none`)".into())
                }
            }
            let planned = match &entry.plan_job {
                Some(id) => match self.store().get_job(&JobId::from(id.clone())).await {
                    Ok(r) => r.job.state == sortie_core::JobState::Succeeded,
                    Err(StoreError::NotFound { .. }) => false,
                    Err(e) => return Err(e.into()),
                },
                None => false,
            };
            if !planned {
                why.push("its plan of this commit has not succeeded".into());
            }
            if entry.apply_job.is_some() && entry.sha == facts.head_sha {
                why.push("it is already being applied".into());
            }
            facts.planned_sha = Some(entry.sha.clone());
            for unmet in evaluate(&binding.requirements, &facts) {
                why.push(unmet.to_string());
            }
            if why.is_empty() {
                targets.push((env, binding, entry.sha.clone()));
            } else {
                refusals.push(format!("{}: {}.", escape(path), escape(&why.join("; "))));
            }
        }
        if targets.is_empty() && refusals.is_empty() {
            refusals.push("Nothing is planned on this pull request to apply.".into());
        }
        if !refusals.is_empty() {
            let body = format!("Not applied:\n\n- {}", refusals.join("\n- "));
            host.reply(repository, number, &body).await?;
            return Ok(());
        }
        let mut applied = Vec::new();
        for (env, binding, sha) in &targets {
            let id = self
                .submit_apply(env, binding, &record, sha, author, false)
                .await?;
            applied.push((env.path.to_string(), sha.clone(), id));
        }
        for _ in 0..RECORD_TRIES {
            let Some(found) = self
                .store()
                .get_pull_request(VcsProvider::Github, repository, number)
                .await?
            else {
                return Ok(());
            };
            let mut record = found.item;
            for (path, sha, id) in &applied {
                if let Some(e) = record.environments.get_mut(path) {
                    if e.sha == *sha {
                        e.apply_job = Some(id.clone());
                    }
                }
            }
            record.updated_at = Utc::now();
            match self
                .store()
                .put_pull_request(&record, Some(found.version))
                .await
            {
                Ok(v) => return self.write_report(host, record, v).await,
                Err(StoreError::VersionMismatch { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Submits the apply of `sha` to `env` for `requested_by` (a host login), once per pull
    /// request, environment and commit; `merged` for the merge commit's apply after the
    /// merge (no requirement is checked again before its apply phase).
    async fn submit_apply(
        &self,
        env: &Environment,
        binding: &VcsBinding,
        record: &PullRequestRecord,
        sha: &str,
        requested_by: &str,
        merged: bool,
    ) -> Result<String, PullError> {
        let request = JobRequest {
            operation: Operation::Apply,
            source: Source::Github {
                repository: binding.repository.clone(),
                commit: sha.to_string(),
                path: binding.directory.clone(),
            },
            variables: Default::default(),
            files: Default::default(),
            secret_refs: Default::default(),
            sensitive_variables: Default::default(),
            sensitive_secret: None,
        };
        let key = IdempotencyKey {
            key: format!(
                "pr-apply:{}#{}@{sha}",
                record.repository.to_ascii_lowercase(),
                record.number
            ),
            request_hash: sha.to_string(),
        };
        let mut order = JobOrder::submit(
            request,
            SensitiveValues::default(),
            format!("{}:{requested_by}", VcsProvider::Github.as_str()),
            Some(key),
        );
        let mut origin = record.job_ref(sha);
        origin.merged = merged;
        order.pull_request = Some(origin);
        match self.jobs.submit_for(env, order).await {
            Ok(submitted) => {
                info!(job_id = %submitted.job.id, environment = %env.path, pull_request = %record.display(), "apply submitted from the pull request");
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

    /// Writes the pull request's checks and comment again from its jobs.
    async fn report(
        &self,
        host: &dyn CodeHost,
        repository: &str,
        number: u64,
    ) -> Result<(), PullError> {
        let Some(found) = self
            .store()
            .get_pull_request(VcsProvider::Github, repository, number)
            .await?
        else {
            return Ok(());
        };
        let waiting = self.settle_approved(host, &found.item).await?;
        self.write_report(host, found.item, found.version).await?;
        match waiting {
            Some(why) => Err(PullError::Waiting(why)),
            None => Ok(()),
        }
    }

    /// Checks again, right before its apply phase, each apply of this pull request that
    /// was approved and waits ([`sortie_core::Job::approved_awaiting_pull_request`]): its
    /// requirements are read from the host now, as for `/sortie apply` (the head still the
    /// commit planned, approvals on it, mergeable, up to date, required checks green,
    /// Sortie's own left out). All hold: the apply phase starts. One that can no longer
    /// come to hold (the head moved, a check failed, an approval withdrawn, conflicts):
    /// the apply is discarded, saying why, and the pull request is told. Only ones that
    /// may still come to hold (a check running or not reported yet, GitHub still
    /// computing): it waits, and `Some(what)` asks for the work to be tried again; the
    /// approval's deadline bounds the wait.
    async fn settle_approved(
        &self,
        host: &dyn CodeHost,
        record: &PullRequestRecord,
    ) -> Result<Option<String>, PullError> {
        let mut facts = None;
        let mut waiting = Vec::new();
        for (path, entry) in &record.environments {
            let Some(apply) = &entry.apply_job else {
                continue;
            };
            let job = match self.store().get_job(&JobId::from(apply.clone())).await {
                Ok(r) => r,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if !job.job.approved_awaiting_pull_request() {
                continue;
            }
            let mut facts_now = match &facts {
                Some(f) => Clone::clone(f),
                None => {
                    let f = host.facts(&record.repository, record.number).await?;
                    facts = Some(f.clone());
                    f
                }
            };
            facts_now.planned_sha = Some(entry.sha.clone());
            let binding = match self.store().get_environment(&job.job.environment).await {
                Ok(e) => e.item.environment.settings.vcs,
                Err(StoreError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            };
            let unmet = match &binding {
                Some(b) if b.repository.eq_ignore_ascii_case(&record.repository) => {
                    evaluate(&b.requirements, &facts_now)
                }
                _ => {
                    self.discard_approved(
                        host,
                        record,
                        &job,
                        path,
                        "the environment is no longer bound to this repository",
                    )
                    .await?;
                    continue;
                }
            };
            if unmet.is_empty() {
                let Some(review) = job.job.review.clone() else {
                    continue;
                };
                let by = review
                    .decision
                    .as_ref()
                    .map(|d| d.by.clone())
                    .unwrap_or_default();
                let reason = format!(
                    "approved by {by}; the pull request's requirements hold, checked again right before the apply; the saved plan is applied by a second task"
                );
                match self
                    .jobs
                    .start_apply_phase(&job, review, Utc::now(), &reason)
                    .await
                {
                    Ok(_) => {
                        info!(job_id = %job.job.id, environment = %path, "requirements hold again: the apply phase starts")
                    }
                    Err(StoreError::StateConflict { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            } else if unmet.iter().all(Unmet::may_still_hold) {
                let what: Vec<String> = unmet.iter().map(ToString::to_string).collect();
                waiting.push(format!("{path}: {}", what.join("; ")));
            } else {
                let what: Vec<String> = unmet
                    .iter()
                    .filter(|u| !u.may_still_hold())
                    .map(ToString::to_string)
                    .collect();
                self.discard_approved(host, record, &job, path, &what.join("; "))
                    .await?;
            }
        }
        Ok((!waiting.is_empty()).then(|| waiting.join(". ")))
    }

    /// Discards an approved apply whose requirements no longer hold, saying `why`, and
    /// tells the pull request.
    async fn discard_approved(
        &self,
        host: &dyn CodeHost,
        record: &PullRequestRecord,
        job: &sortie_store::JobRecord,
        path: &str,
        why: &str,
    ) -> Result<(), PullError> {
        let comment =
            format!("the pull request's requirements no longer hold right before the apply: {why}");
        // A refusal: it moved meanwhile (another delivery of this work, a person's discard).
        if let Ok(_discarded) = self
            .jobs
            .review(
                job,
                REQUIREMENTS_PRINCIPAL,
                ReviewVerdict::Discarded,
                Some(comment),
                Utc::now(),
            )
            .await?
        {
            info!(job_id = %job.job.id, environment = %path, %why, "approved apply discarded: requirements no longer hold");
            let body = format!(
                "Not applied: {}: the requirements no longer hold right before the apply: {}.",
                escape(path),
                escape(why)
            );
            host.reply(&record.repository, record.number, &body).await?;
        }
        Ok(())
    }
}
