//! Agent pools and their agents: jobs on compute the control plane cannot reach.
//!
//! An `agent` runner's jobs are not launched: dispatch *offers* each one to the runner's
//! agent pool, and an agent (`sortie-agent`, run by the customer) *claims* it, runs
//! `sortie-pilot` for it and heartbeats it while it runs (the wire types of that pull
//! protocol are in [`crate::protocol::agent`]). Here are the pool's and the agent's names,
//! the claimed job's hold, and [`agent_status`], which says what a claimed job's heartbeat
//! record means for the sweeper.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::TaskRef;
pub use crate::ids::{pool_id_problem, POOL_ID_PREFIX};
use crate::outcome::{TaskStop, AGENT_LOST, AGENT_STOP_UNCONFIRMED};
pub use crate::runner::MAX_CONCURRENT_JOBS;

/// Every pool token starts with this, so a leaked one is recognisable (and scannable).
pub const POOL_TOKEN_PREFIX: &str = "sortie-pool-";
/// A claimed job whose heartbeat stops this long is ended by the sweeper ("agent lost").
pub const DEFAULT_AGENT_SILENCE_SECONDS: i64 = 120;
/// How long an agent has to confirm a stop (cancel or timeout) the heartbeat delivered,
/// before the sweeper ends the job as that stop says without it.
pub const DEFAULT_STOP_GRACE_SECONDS: i64 = 60;
/// At most this many tokens a pool holds at once (one in use, one being rotated in, spares).
pub const MAX_POOL_TOKENS: usize = 5;

/// What is wrong with an agent's self-chosen id, if anything: 1 to 64 of `[A-Za-z0-9._-]`.
pub fn agent_id_problem(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > 64 {
        return Some("must be 1 to 64 characters".into());
    }
    (!id.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    .then(|| "may contain only letters, digits, `.`, `_` and `-`".into())
}

/// The task reference of a claim: `agent:<pool>:<agent>:<attempt>`. The attempt makes each
/// claim's reference unique, so an agent's late heartbeat for an earlier attempt of a job
/// it claimed again is refused.
pub fn agent_task(pool: &str, agent: &str, attempt: u32) -> TaskRef {
    TaskRef::new(format!("agent:{pool}:{agent}:{attempt}"))
}

/// The agent id in an agent task reference, if it is one.
pub fn agent_of(task: &TaskRef) -> Option<&str> {
    let mut parts = task.as_str().strip_prefix("agent:")?.split(':');
    let _pool = parts.next()?;
    parts.next()
}

/// A claimed job's agent, as the job record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentHold {
    /// The pool it was claimed from.
    pub pool: String,
    /// The claiming agent's id.
    pub agent: String,
    /// When it was claimed.
    pub claimed_at: DateTime<Utc>,
    /// The last heartbeat (the claim counts as the first).
    pub heartbeat_at: DateTime<Utc>,
    /// A stop Sortie ordered (cancel or timeout), delivered in the heartbeat answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<AgentStop>,
}

/// A stop ordered for a claimed job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentStop {
    /// The reason, as a task stop reason (`sortie: canceled by …`, `sortie: timed out after …`).
    pub reason: String,
    /// When it was ordered.
    pub at: DateTime<Utc>,
}

/// What the sweeper makes of a claimed job's heartbeat record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentStatus {
    /// The agent is alive and has not reported an exit.
    Running,
    /// The job's task is to be treated as stopped, with this stop.
    Stopped(TaskStop),
}

/// The sweeper's view of a claimed job: a stop the agent has not confirmed within
/// `stop_grace` ends the job as that stop says (so a timeout is enforced even when the agent
/// never reports); a heartbeat silent for `silence` is a lost agent (a plan is requeued, an
/// apply or destroy fails, as for a Spot interruption).
pub fn agent_status(
    hold: &AgentHold,
    now: DateTime<Utc>,
    silence: Duration,
    stop_grace: Duration,
) -> AgentStatus {
    if let Some(stop) = &hold.stop {
        if now - stop.at >= stop_grace {
            return AgentStatus::Stopped(TaskStop {
                stop_code: Some(AGENT_STOP_UNCONFIRMED.into()),
                stopped_reason: Some(stop.reason.clone()),
                exit_code: None,
                container_reason: None,
            });
        }
    }
    let quiet = now - hold.heartbeat_at;
    if quiet >= silence {
        return AgentStatus::Stopped(TaskStop {
            stop_code: Some(AGENT_LOST.into()),
            stopped_reason: Some(format!(
                "agent lost: no heartbeat from agent {} for {}s",
                hold.agent,
                quiet.num_seconds()
            )),
            exit_code: None,
            container_reason: None,
        });
    }
    AgentStatus::Running
}

/// Trust in an OIDC issuer: an agent whose token comes from `issuer`, for `audience`, and
/// whose `claim` matches `pattern` (a glob, as in a claim-pattern membership) may act for
/// the pool. How an agent in EKS authenticates with its projected service account token,
/// with no static secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OidcTrust {
    /// The token issuer (`iss`), an `https://` URL (plain `http://` only to a loopback
    /// host, see [`crate::urls::issuer_problem`]); its JWKS is found by OIDC discovery.
    pub issuer: String,
    /// The audience (`aud`) the token must carry.
    pub audience: String,
    /// The claim to match, such as `sub`.
    pub claim: String,
    /// A glob over the claim's value, such as `system:serviceaccount:sortie-agent:*`.
    pub pattern: String,
}

impl OidcTrust {
    /// Every problem of this trust, at `at.<field>`.
    pub fn problems(&self, at: &str) -> Vec<crate::Problem> {
        use crate::problems::{join, refuse_blank_or_control};
        let mut p = crate::Problems::default();
        // Parsed, and judged by its real host: plain http only to a loopback host.
        if let Some(problem) = crate::urls::issuer_problem(&self.issuer) {
            p.push(join(at, "issuer"), problem);
        }
        for (field, value) in [
            ("audience", &self.audience),
            ("claim", &self.claim),
            ("pattern", &self.pattern),
        ] {
            if !refuse_blank_or_control(&mut p, join(at, field), value) && value.len() > 256 {
                p.push(join(at, field), "must be at most 256 characters");
            }
        }
        if glob::Pattern::new(&self.pattern).is_err() {
            p.push(join(at, "pattern"), "is not a valid glob");
        }
        p.0
    }
}

/// An agent pool: a group's named set of agents that pull its `agent` runners' jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPool {
    /// The pool's id, `apool-<ulid>`.
    pub id: String,
    /// The group that owns it (only that group's runners may use it).
    pub group: crate::GroupPath,
    /// Its name, unique in nothing but the people's minds (ids are the reference).
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// OIDC issuers whose tokens authenticate agents, besides the pool's tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcTrust>,
}

/// What is wrong with a pool's name, if anything: 1 to 63 of `[a-z0-9-]`, as a runner name.
pub fn pool_name_problem(name: &str) -> Option<String> {
    crate::names::check_segment(name).err()
}

/// True when a job is `pool`'s business: the runner it was submitted with pulls from `pool`,
/// or it was offered to, or is held by an agent of, `pool`. To an agent of any other pool
/// the job does not exist: every agent route answers it exactly as a missing job (404), so
/// that one tenant cannot learn that another tenant's job exists, nor its state.
pub fn job_of_pool(
    job: &crate::Job,
    offered_to: Option<&str>,
    hold: Option<&AgentHold>,
    pool: &str,
) -> bool {
    let runner_pool = job
        .runner_spec
        .as_ref()
        .and_then(|s| match &s.runner_configuration {
            crate::RunnerConfiguration::Agent(c) => Some(c.pool.as_str()),
            _ => None,
        });
    runner_pool == Some(pool) || offered_to == Some(pool) || hold.is_some_and(|h| h.pool == pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(heartbeat_ago: i64, stop_ago: Option<i64>) -> (AgentHold, DateTime<Utc>) {
        let now = Utc::now();
        (
            AgentHold {
                pool: "apool-01".into(),
                agent: "a1".into(),
                claimed_at: now - Duration::seconds(600),
                heartbeat_at: now - Duration::seconds(heartbeat_ago),
                stop: stop_ago.map(|s| AgentStop {
                    reason: "sortie: canceled by alice".into(),
                    at: now - Duration::seconds(s),
                }),
            },
            now,
        )
    }

    #[test]
    fn a_silent_agent_is_lost_and_an_unconfirmed_stop_ends_as_the_stop_says() {
        let (s, g) = (Duration::seconds(120), Duration::seconds(60));
        let (h, now) = hold(10, None);
        assert_eq!(agent_status(&h, now, s, g), AgentStatus::Running);
        let (h, now) = hold(121, None);
        let AgentStatus::Stopped(stop) = agent_status(&h, now, s, g) else {
            panic!("a silent agent must be lost")
        };
        assert_eq!(stop.stop_code.as_deref(), Some(AGENT_LOST));
        assert!(stop.stopped_reason.unwrap().starts_with("agent lost"));
        let (h, now) = hold(5, Some(30));
        assert_eq!(agent_status(&h, now, s, g), AgentStatus::Running);
        let (h, now) = hold(5, Some(61));
        let AgentStatus::Stopped(stop) = agent_status(&h, now, s, g) else {
            panic!("an unconfirmed stop ends the job")
        };
        assert_eq!(
            stop.stopped_reason.as_deref(),
            Some("sortie: canceled by alice")
        );
    }

    #[test]
    fn ids_and_task_references() {
        assert_eq!(agent_id_problem("agent-1.eu_west"), None);
        assert!(agent_id_problem("").is_some());
        assert!(agent_id_problem("a b").is_some());
        assert!(agent_id_problem(&"a".repeat(65)).is_some());
        assert_eq!(pool_id_problem("apool-01jnx6v4k2m8q9r3s5t7w0y1za"), None);
        assert!(pool_id_problem("apool-01JNX6V4K2M8Q9R3S5T7W0Y1ZA").is_some());
        assert!(pool_id_problem("pool-01jnx6v4k2m8q9r3s5t7w0y1za").is_some());
        let t = agent_task("apool-x", "a1", 3);
        assert_eq!(t.as_str(), "agent:apool-x:a1:3");
        assert_eq!(agent_of(&t), Some("a1"));
        assert_eq!(agent_of(&TaskRef::new("arn:aws:ecs:x")), None);
    }
}
