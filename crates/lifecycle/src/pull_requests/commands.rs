//! The `/sortie` commands of a pull request's comments: help, plan and apply, each checked
//! against the commenter's roles and the environments' requirements.

use chrono::Utc;
use sortie_core::auth::{can, Action};
use sortie_core::vcs::command::{help_text, Command};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::report::escape;
use sortie_core::vcs::requirements::evaluate;
use sortie_core::{EnvPath, Environment, JobId};
use sortie_store::StoreError;

use super::{issuer_of, CodeHost, PullError, PullRequests, RECORD_TRIES};

impl PullRequests {
    /// Carries out one `/sortie` command by `author`.
    pub(super) async fn command(
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
                    .matched_environments(
                        connection.provider,
                        &connection.org,
                        repository,
                        &info.base,
                        &files,
                    )
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
            .get_pull_request(connection.provider, repository, number)
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
                .get_pull_request(connection.provider, repository, number)
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
}
