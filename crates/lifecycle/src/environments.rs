//! The environment service: rule resolution (with its per-instance cache), creating an
//! environment linked to the runner the rules pick, changing its settings, and refreshing
//! its runner. The API checks who may act and renders; this service does it.

use std::sync::Arc;

use chrono::Utc;
use sortie_core::environment::EnvironmentInput;
use sortie_core::{
    Considered, EnvPath, Environment, NoRunnerMatched, RuleIndex, RunnerId, RunnerLink, RunnerRule,
    Tally,
};
use sortie_store::{EnvironmentRecord, Store, StoreError, Versioned};

use crate::RuleIndexCache;

/// Environments and the rules that pick their runner, over the store.
#[derive(Clone)]
pub struct Environments {
    /// The repository.
    pub store: Arc<dyn Store>,
    /// Compiled rule indexes per group, revalidated by the rule-set version on each use.
    pub rule_indexes: RuleIndexCache,
}

/// The rule that picks an environment's runner, why, and how every other rule fared.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The winning rule.
    pub rule: RunnerRule,
    /// Why it won, in words.
    pub why: String,
    /// Every other rule, counted by why it did not win.
    pub counts: Tally,
    index: Arc<RuleIndex>,
    env: Environment,
}

impl Resolved {
    /// Every rule's fate, in precedence order for those that matched, then the rest.
    pub fn explanation(&self) -> Vec<Considered> {
        self.index
            .explain(&self.env.facts())
            .map(|r| r.explanation)
            .unwrap_or_default()
    }
}

/// Why an environment's runner was not resolved, or the environment not written.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentRefusal {
    /// No rule picks a runner for the environment; the error explains every rule.
    #[error(transparent)]
    NoRunnerMatched(NoRunnerMatched),
    /// The compiled index and the reference resolution disagreed (a defect).
    #[error("rule resolution disagreed with its reference")]
    Disagreed,
    /// The winning rule picks a runner that does not exist.
    #[error("rule `{rule}` picks runner `{runner}`, which does not exist")]
    RunnerMissing {
        /// The rule.
        rule: String,
        /// The runner it names.
        runner: String,
    },
    /// The store failed (a stale version is its `VersionMismatch`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a refresh of an environment's runner found, and did.
#[derive(Debug, Clone)]
pub struct Refreshed {
    /// The runner the environment was linked to.
    pub previous: RunnerId,
    /// The resolution now.
    pub resolved: Resolved,
    /// The relinked environment; `None` for a dry run.
    pub environment: Option<Versioned<EnvironmentRecord>>,
}

impl Environments {
    /// The service over `store`, with the instance's rule cache.
    pub fn new(store: Arc<dyn Store>, rule_indexes: RuleIndexCache) -> Self {
        Self {
            store,
            rule_indexes,
        }
    }

    /// Resolves `env`'s runner with the compiled rule index of its group.
    pub async fn resolve(&self, env: &Environment) -> Result<Resolved, EnvironmentRefusal> {
        let index = self
            .rule_indexes
            .index_for(self.store.as_ref(), env.path.group())
            .await?;
        let facts = env.facts();
        let (rule, why, counts) = match index.resolve(&facts) {
            Ok(pick) => (pick.rule.clone(), pick.why(), pick.tally),
            // The full explanation only on the rare failure path, for the error's fields.
            Err(_) => {
                return Err(match index.explain(&facts) {
                    Err(e) => EnvironmentRefusal::NoRunnerMatched(e),
                    Ok(_) => EnvironmentRefusal::Disagreed,
                })
            }
        };
        Ok(Resolved {
            rule,
            why,
            counts,
            index: index.clone(),
            env: env.clone(),
        })
    }

    /// Creates environment `path` from `fields`, linked for `by` to the runner the rules pick.
    pub async fn create(
        &self,
        path: EnvPath,
        fields: EnvironmentInput,
        by: &str,
    ) -> Result<(Versioned<EnvironmentRecord>, Resolved), EnvironmentRefusal> {
        let mut settings = sortie_core::EnvSettings::default();
        fields.apply_settings(&mut settings);
        let mut env = Environment {
            settings,
            path,
            env_type: fields.env_type.unwrap_or_default(),
            labels: fields.labels.unwrap_or_default(),
            tags: fields.tags.unwrap_or_default(),
            runner: RunnerLink {
                runner_id: RunnerId::parse("unresolved").expect("valid name"),
                rule_id: String::new(),
                linked_by: by.to_string(),
                linked_at: Utc::now(),
            },
        };
        crate::triggers::check(self.store.as_ref(), &env.path, &env.settings.triggers).await?;
        self.check_expiry(&env.path, &env.settings).await?;
        let resolved = self.resolve(&env).await?;
        env.runner.runner_id = resolved.rule.runner_id.clone();
        env.runner.rule_id = resolved.rule.id.clone();
        // The index first: a bound environment is always found (a stale entry is skipped).
        crate::pull_requests::index_binding(
            self.store.as_ref(),
            &env.path,
            None,
            env.settings.vcs.as_ref(),
        )
        .await?;
        let created = self
            .store
            .create_environment(&env)
            .await
            .map_err(|e| match e {
                StoreError::NotFound { kind: "runner", id } => EnvironmentRefusal::RunnerMissing {
                    rule: resolved.rule.id.clone(),
                    runner: id,
                },
                other => other.into(),
            })?;
        crate::expiry::refresh_due_logged(self.store.as_ref(), &created.item.environment.path)
            .await;
        Ok((created, resolved))
    }

    /// Changes environment `path`'s settings, type, labels or tags from `fields` (never its
    /// runner link), at version `expected` (else the one read now).
    pub async fn update(
        &self,
        path: &EnvPath,
        fields: EnvironmentInput,
        expected: Option<u64>,
    ) -> Result<Versioned<EnvironmentRecord>, StoreError> {
        let current = self.store.get_environment(path).await?;
        let mut env = current.item.environment;
        if let Some(upstreams) = &fields.triggers {
            crate::triggers::check(self.store.as_ref(), path, upstreams).await?;
        }
        let before = (env.settings.expires_at, env.settings.ttl.clone());
        let before_from = env.settings.expiry().ttl_from;
        let binding_before = env.settings.vcs.clone();
        fields.apply_settings(&mut env.settings);
        crate::pull_requests::index_binding(
            self.store.as_ref(),
            path,
            binding_before.as_ref(),
            env.settings.vcs.as_ref(),
        )
        .await?;
        let expiry_changed = before != (env.settings.expires_at, env.settings.ttl.clone());
        if expiry_changed {
            self.check_expiry(path, &env.settings).await?;
        }
        let expiry_changed = expiry_changed || before_from != env.settings.expiry().ttl_from;
        if expiry_changed {
            // Its own end or TTL now: an extension of a group default's end is spent.
            env.settings.extended_to = None;
        }
        if let Some(t) = fields.env_type {
            env.env_type = t;
        }
        if let Some(l) = fields.labels {
            env.labels = l;
        }
        if let Some(t) = fields.tags {
            env.tags = t;
        }
        let written = self
            .store
            .update_environment(&env, Some(expected.unwrap_or(current.version)))
            .await?;
        crate::pull_requests::unindex_moved_binding(
            self.store.as_ref(),
            path,
            binding_before.as_ref(),
            written.item.environment.settings.vcs.as_ref(),
        )
        .await;
        if expiry_changed {
            // New expiry settings bring a destroyed environment back.
            if written.item.destroyed.is_some() {
                self.store.mark_destroyed(path, None).await?;
            }
            crate::expiry::refresh_due_logged(self.store.as_ref(), path).await;
        }
        Ok(written)
    }

    /// Deletes idle environment `path`, at version `expected` when given, and takes it off
    /// the expiry due list.
    pub async fn delete(&self, path: &EnvPath, expected: Option<u64>) -> Result<(), StoreError> {
        let binding = self
            .store
            .get_environment(path)
            .await
            .ok()
            .and_then(|e| e.item.environment.settings.vcs);
        self.store.delete_environment(path, expected).await?;
        crate::pull_requests::unindex_moved_binding(
            self.store.as_ref(),
            path,
            binding.as_ref(),
            None,
        )
        .await;
        if let Err(e) = self.store.remove_expiry(path).await {
            // The sweep drops an entry whose environment is gone.
            tracing::warn!(environment = %path, error = %e, "the deleted environment's expiry entry is left to the sweep");
        }
        Ok(())
    }

    /// Resolves environment `path`'s runner again and, unless `dry_run`, relinks it for `by`
    /// (at version `expected`, else the one read now).
    pub async fn refresh_runner(
        &self,
        path: &EnvPath,
        by: &str,
        dry_run: bool,
        expected: Option<u64>,
    ) -> Result<Refreshed, EnvironmentRefusal> {
        let current = self.store.get_environment(path).await?;
        let resolved = self.resolve(&current.item.environment).await?;
        let previous = current.item.environment.runner.runner_id.clone();
        if dry_run {
            return Ok(Refreshed {
                previous,
                resolved,
                environment: None,
            });
        }
        let link = RunnerLink {
            runner_id: resolved.rule.runner_id.clone(),
            rule_id: resolved.rule.id.clone(),
            linked_by: by.to_string(),
            linked_at: Utc::now(),
        };
        let updated = self
            .store
            .relink_environment(path, &link, Some(expected.unwrap_or(current.version)))
            .await?;
        Ok(Refreshed {
            previous,
            resolved,
            environment: Some(updated),
        })
    }
}
