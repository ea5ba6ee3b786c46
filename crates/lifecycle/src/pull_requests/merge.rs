//! A pull request closed or merged: its record says so, and a merge submits the applies
//! of environments bound to apply after it.

use chrono::Utc;
use sortie_core::auth::{can, Action};
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::EnvPath;
use sortie_store::StoreError;

use super::{CodeHost, PullError, PullInfo, PullRequests, RECORD_TRIES};

impl PullRequests {
    /// A closed pull request: its record says so, and its report is written once more.
    pub(super) async fn closed(
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
                            "{path} was not applied: {} gave no merge commit",
                            connection.provider.name()
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
}
