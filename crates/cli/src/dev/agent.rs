//! The dev agent: an agent process `sortie dev` starts for agent pools, and the message
//! when it exits.

use std::path::Path;

use anyhow::Context;

use super::{data_dir, DevArgs};

/// Creates an agent pool in `group` with one token (or takes the data dir's pool of that
/// group again, when it is still in the store), and starts `sortie-agent` (next to this
/// binary) pulling its jobs, with the token in a file of the data dir.
pub(super) async fn start_agent(
    store: &dyn sortie_store::AgentPoolStore,
    group: &str,
    url: &str,
    args: &DevArgs,
    saved: Option<&data_dir::SavedAgent>,
) -> anyhow::Result<(data_dir::SavedAgent, tokio::process::Child)> {
    use sortie_core::agent_pool::{AgentPool, POOL_ID_PREFIX};
    let kept = match saved.filter(|a| a.group == group) {
        Some(a) if store.get_pool(&a.pool).await.is_ok() => Some(a.clone()),
        _ => None,
    };
    let (id, token) = match kept {
        Some(a) => (a.pool, a.token),
        None => {
            let group = sortie_core::GroupPath::parse(group)
                .map_err(|e| anyhow::anyhow!("--agent: {e}"))?;
            let id = format!("{POOL_ID_PREFIX}{}", sortie_core::tokens::new_id());
            let by = sortie_core::Principal::local_dev().subject;
            let (token, stored) = sortie_store::PoolToken::mint(&id, &by);
            let record = sortie_store::AgentPoolRecord {
                pool: AgentPool {
                    id: id.clone(),
                    group,
                    name: "dev-agents".into(),
                    description: "the agent `sortie dev --agent` starts".into(),
                    oidc: None,
                },
                tokens: vec![stored],
                created_at: chrono::Utc::now(),
                created_by: by,
                last_claim_at: None,
            };
            store
                .create_pool(&record)
                .await
                .context("creating the agent pool")?;
            (id, token)
        }
    };
    std::fs::create_dir_all(&args.data_dir)?;
    let token_file = args.data_dir.join("agent-token");
    data_dir::write_private(&token_file, token.as_bytes())?;
    let exe = std::env::current_exe()?;
    let binary = exe.with_file_name("sortie-agent");
    let log = std::fs::File::create(args.data_dir.join("agent.log"))?;
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["--api-url", url, "--pool", &id, "--name", "dev-agent"])
        .arg("--token-file")
        .arg(&token_file)
        .arg("--work-dir")
        .arg(args.data_dir.join("agent"))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some(runner) = &args.runner {
        command.arg("--runner-binary").arg(runner);
    }
    let child = command
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let saved = data_dir::SavedAgent {
        group: group.to_string(),
        pool: id,
        token,
    };
    Ok((saved, child))
}

/// What `sortie dev` says, once, when its own agent exits.
pub(super) fn agent_exited_message(status: &str, log: &Path) -> String {
    format!(
        "the dev agent exited ({status}); agent jobs will wait. See {}. Restart sortie dev to start a new one.",
        log.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dead_agent_message_names_the_status_the_log_and_what_to_do() {
        let m = agent_exited_message("exit status: 101", Path::new(".sortie-dev/agent.log"));
        assert_eq!(
            m,
            "the dev agent exited (exit status: 101); agent jobs will wait. See .sortie-dev/agent.log. Restart sortie dev to start a new one."
        );
    }
}
