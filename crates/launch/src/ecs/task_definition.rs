//! The task definition a job runs: the runner's own, or one derived from it whose runner
//! container carries the job's secrets; and the runner container's memory.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ecs::types::Secret;
use sortie_core::runner::EcsFargateRunner;
use sortie_core::Job;

use super::errors::{from_sdk, is_concurrent_revision};
use super::EcsLauncher;
use crate::LaunchError;

impl EcsLauncher {
    /// The task definition to run: the runner's own when the job needs no secret, else one
    /// derived from it whose runner container carries every secret the job needs in its
    /// `secrets` (`valueFrom` = the ARN; ECS injects the values, Sortie never sees them):
    /// the runner's `secrets`, the job's `secret_refs` and a git source's
    /// `credentials_secret` (as [`GIT_CREDENTIALS`]).
    ///
    /// The derived family is `<base family>-sortie-<content hash>`: the hash covers the base
    /// revision, the container and the secret set, so one registration serves every job with
    /// the same set. It is looked up (DescribeTaskDefinition) before it is registered, so a
    /// new Lambda instance reuses what an earlier one registered, and cached in memory.
    pub(super) async fn task_definition(
        &self,
        client: &aws_sdk_ecs::Client,
        c: &EcsFargateRunner,
        job: &Job,
    ) -> Result<String, LaunchError> {
        let wanted = container_secrets(c, job);
        if wanted.is_empty() {
            return Ok(c.task_definition.clone());
        }
        let text = serde_json::to_string(&wanted).unwrap_or_default();
        let cache_key = format!(
            "{}|{}|{}|{}",
            c.access.role_arn,
            c.task_definition,
            c.container_name,
            fingerprint(&text)
        );
        let mut cache = self.task_definitions.lock().await;
        if let Some(arn) = cache.get(&cache_key) {
            return Ok(arn.clone());
        }
        let base = client
            .describe_task_definition()
            .task_definition(&c.task_definition)
            .send()
            .await
            .map_err(|e| from_sdk("DescribeTaskDefinition", e))?;
        let td = base.task_definition.ok_or_else(|| {
            LaunchError::Fatal(format!(
                "task definition `{}` was not found",
                c.task_definition
            ))
        })?;
        let hash = fingerprint(&format!(
            "{}|{}|{text}",
            td.task_definition_arn
                .as_deref()
                .unwrap_or(&c.task_definition),
            c.container_name
        ));
        let family = derived_family(td.family.as_deref().unwrap_or("runner"), &hash);
        // Registered before, perhaps by another instance: reuse it.
        if let Some(arn) = active_revision(client, &family).await {
            cache.insert(cache_key, arn.clone());
            return Ok(arn);
        }
        let secrets: Vec<Secret> = wanted
            .iter()
            .map(|(name, arn)| {
                Secret::builder()
                    .name(name)
                    .value_from(arn)
                    .build()
                    .map_err(|e| LaunchError::Fatal(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let mut containers = td.container_definitions.clone().unwrap_or_default();
        let runner = containers
            .iter_mut()
            .find(|cd| cd.name.as_deref() == Some(c.container_name.as_str()))
            .ok_or_else(|| {
                LaunchError::Fatal(format!(
                    "task definition `{}` has no container named `{}`",
                    c.task_definition, c.container_name
                ))
            })?;
        let mut all = runner.secrets.clone().unwrap_or_default();
        all.retain(|s| !wanted.contains_key(&s.name));
        all.extend(secrets);
        runner.secrets = Some(all);
        // A secret must never also be a plain variable of the same name.
        if let Some(env) = runner.environment.as_mut() {
            env.retain(|kv| !kv.name.as_ref().is_some_and(|n| wanted.contains_key(n)));
        }
        let mut refused: u32 = 0;
        let registered = loop {
            let sent = client
                .register_task_definition()
                .family(&family)
                .set_container_definitions(Some(containers.clone()))
                .set_cpu(td.cpu.clone())
                .set_memory(td.memory.clone())
                .set_network_mode(td.network_mode.clone())
                .set_requires_compatibilities(td.requires_compatibilities.clone())
                .set_execution_role_arn(td.execution_role_arn.clone())
                .set_task_role_arn(td.task_role_arn.clone())
                .set_volumes(td.volumes.clone())
                .set_runtime_platform(td.runtime_platform.clone())
                .set_ephemeral_storage(td.ephemeral_storage.clone())
                .send()
                .await;
            let err = match sent {
                Ok(registered) => {
                    break registered
                        .task_definition
                        .and_then(|t| t.task_definition_arn)
                }
                Err(e) => from_sdk("RegisterTaskDefinition", e),
            };
            // Another registration of this family is in progress (another Lambda instance,
            // another job with the same secrets): wait a little, then look again, since it
            // may have registered exactly the revision this job needs.
            if !is_concurrent_revision(&err.to_string()) || refused >= REGISTER_TRIES {
                return Err(err);
            }
            refused += 1;
            tokio::time::sleep(register_backoff(refused)).await;
            if let Some(arn) = active_revision(client, &family).await {
                break Some(arn);
            }
        };
        let arn = registered.ok_or_else(|| {
            LaunchError::Retryable("RegisterTaskDefinition returned no ARN".into())
        })?;
        cache.insert(cache_key, arn.clone());
        Ok(arn)
    }
}

impl EcsLauncher {
    /// The hard memory limit (MiB) for the runner container of a task whose memory is
    /// overridden to `task_memory`: what the task definition's other containers leave
    /// ([`sortie_core::limits::runner_container_memory`]). Their reservations are read
    /// once (DescribeTaskDefinition) per role, task definition and container, and kept.
    pub(super) async fn runner_memory(
        &self,
        client: &aws_sdk_ecs::Client,
        c: &EcsFargateRunner,
        task_memory: u32,
    ) -> Result<i32, LaunchError> {
        let key = format!(
            "{}|{}|{}",
            c.access.role_arn, c.task_definition, c.container_name
        );
        let known = self.container_memory.lock().await.get(&key).copied();
        let (others, reservation) = match known {
            Some(k) => k,
            None => {
                let out = client
                    .describe_task_definition()
                    .task_definition(&c.task_definition)
                    .send()
                    .await
                    .map_err(|e| from_sdk("DescribeTaskDefinition", e))?;
                let containers = out
                    .task_definition()
                    .map(|t| t.container_definitions())
                    .unwrap_or_default();
                let mib = |v: Option<i32>| v.map(|m| u32::try_from(m).unwrap_or(0));
                let is_runner = |cd: &&aws_sdk_ecs::types::ContainerDefinition| {
                    cd.name() == Some(c.container_name.as_str())
                };
                let others: u32 = containers
                    .iter()
                    .filter(|cd| !is_runner(cd))
                    .map(|cd| mib(cd.memory_reservation().or(cd.memory())).unwrap_or(0))
                    .sum();
                let reservation = containers
                    .iter()
                    .find(is_runner)
                    .and_then(|cd| mib(cd.memory_reservation()));
                self.container_memory
                    .lock()
                    .await
                    .insert(key, (others, reservation));
                (others, reservation)
            }
        };
        sortie_core::limits::runner_container_memory(task_memory, others, reservation)
            .map(|m| i32::try_from(m).unwrap_or(i32::MAX))
            .map_err(|why| {
                LaunchError::Fatal(format!(
                    "runner_configuration.memory: {why} (task definition `{}`)",
                    c.task_definition
                ))
            })
    }
}

/// How often a registration refused for a concurrent one is tried again in one launch
/// (then the launch is [`LaunchError::Retryable`], and the job's retry tries again).
const REGISTER_TRIES: u32 = 5;

/// The wait before registration try `n` (1, 2, ...): 250 ms doubling per try, up to 2 s,
/// plus up to 250 ms of jitter so that instances refused together do not retry together.
fn register_backoff(n: u32) -> Duration {
    let base = 250u64.saturating_mul(1 << n.saturating_sub(1).min(3));
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos(),
    ) % 250;
    Duration::from_millis(base + jitter)
}

/// The ARN of the ACTIVE latest revision of `family`, if there is one.
async fn active_revision(client: &aws_sdk_ecs::Client, family: &str) -> Option<String> {
    client
        .describe_task_definition()
        .task_definition(family)
        .send()
        .await
        .ok()?
        .task_definition
        .filter(|t| t.status.as_ref().is_some_and(|s| s.as_str() == "ACTIVE"))
        .and_then(|t| t.task_definition_arn)
}

/// The container secret through which a git source's `credentials_secret` arrives
/// (the runner reads it as `SORTIE_GIT_CREDENTIALS`).
pub const GIT_CREDENTIALS: &str = "SORTIE_GIT_CREDENTIALS";

/// Every secret the runner container of `job` needs, by environment variable name: the
/// job's `secret_refs`, then the runner's `secrets` (which win a name given twice: the
/// runner's owner decides its environment), then the git credential.
pub fn container_secrets(c: &EcsFargateRunner, job: &Job) -> BTreeMap<String, String> {
    let mut all = job.request.secret_refs.clone();
    all.extend(c.secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(arn) = git_credentials_secret(job) {
        all.insert(GIT_CREDENTIALS.to_string(), arn.to_string());
    }
    all
}

/// A git source's `credentials_secret`, if the job has one.
pub fn git_credentials_secret(job: &Job) -> Option<&str> {
    match &job.request.source {
        sortie_core::Source::Git {
            credentials_secret: Some(arn),
            ..
        } => Some(arn.as_str()),
        _ => None,
    }
}

/// 16 hexadecimal digits of the SHA-256 of `text`.
fn fingerprint(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The most characters a task definition family may have (RegisterTaskDefinition `family`:
/// "Up to 255 letters (uppercase and lowercase), numbers, underscores, and hyphens").
const FAMILY_MAX: usize = 255;

/// `<base>-sortie-<hash>`, within ECS's family rules: other characters become `-` and the
/// base is shortened so the whole stays within [`FAMILY_MAX`].
pub fn derived_family(base: &str, hash: &str) -> String {
    let suffix = format!("-sortie-{hash}");
    let clean: String = base
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch
            } else {
                '-'
            }
        })
        .take(FAMILY_MAX.saturating_sub(suffix.len()))
        .collect();
    format!("{clean}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecs::classify;

    #[test]
    fn derived_families_keep_within_ecs_rules() {
        let hash = fingerprint("x");
        assert_eq!(hash.len(), 16);
        assert_eq!(
            derived_family("runner", &hash),
            format!("runner-sortie-{hash}")
        );
        let long = derived_family(&"a.b".repeat(200), &hash);
        assert_eq!(long.len(), 255);
        assert!(long
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(long.ends_with(&format!("-sortie-{hash}")));
    }

    #[test]
    fn a_concurrent_registration_of_the_family_is_retried() {
        let refused = classify(
            "RegisterTaskDefinition",
            "ClientException",
            "Too many concurrent attempts to create a new revision of the specified family.",
            400,
        );
        assert!(refused.is_retryable(), "{refused}");
        assert!(register_backoff(1) >= Duration::from_millis(250));
        assert!(register_backoff(9) < Duration::from_millis(2250));
    }
}
