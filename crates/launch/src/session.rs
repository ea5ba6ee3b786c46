//! Who a launcher-role session acts for, and what each task says about its job.
//!
//! A launcher-role session is cached and shared by every job of one organisation on one
//! runner (docs/decisions/sessions-and-tags.md, "Issue 25 item 8"). So it is tagged and
//! named only with what all those jobs share, the organisation and the runner
//! ([`SessionScope`]), and the cache key is exactly that scope: a cached session never
//! carries another key's tags. What differs per job, the job and its environment, is on the
//! task itself: RunTask `tags` ([`task_tags`]) and the Kubernetes Job's labels and
//! annotations.
//!
//! Pure: no I/O.

use sha2::Digest;
use sortie_core::limits::{ECS_TAG_VALUE_MAX, ROLE_SESSION_NAME_MAX, SESSION_TAG_VALUE_MAX};
use sortie_core::Job;

/// Session and task tag: the organisation whose job it is.
pub const TAG_ORG: &str = "sortie:org";
/// Session and task tag: the runner (`<group>/<name>`, or `<name>` for a shared runner).
pub const TAG_RUNNER: &str = "sortie:runner";
/// Task tag (and, with the value `runner-check`, the tag of a `runner check` session):
/// the environment path.
pub const TAG_ENV: &str = "sortie:env";
/// Task tag: the job id.
pub const TAG_JOB: &str = "sortie:job";

/// What a launcher-role session acts for: its session tags, its session name and, within
/// one (role, ExternalId), its cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionScope {
    /// The organisation of the jobs the session launches (`sortie:org`).
    pub org: String,
    /// The runner those jobs run on (`sortie:runner`).
    pub runner: String,
}

impl SessionScope {
    /// The scope of the session that launches, watches and stops `job`.
    pub fn of(job: &Job) -> Self {
        Self {
            org: job.environment.org().to_string(),
            runner: job.runner_id.to_string(),
        }
    }

    /// The session tags: `sortie:org` and `sortie:runner`, nothing per job.
    pub fn tags(&self) -> Vec<(&'static str, String)> {
        vec![
            (TAG_ORG, tag_value(&self.org, SESSION_TAG_VALUE_MAX)),
            (TAG_RUNNER, tag_value(&self.runner, SESSION_TAG_VALUE_MAX)),
        ]
    }

    /// The RoleSessionName, which CloudTrail shows: `sortie-<org>@<runner>` with the
    /// runner's `/` as `.` (STS allows only `[\w+=,.@-]`). Longer than STS's 64 characters,
    /// it is cut and ends with 8 hexadecimal digits of the SHA-256 of the whole name, so two
    /// long scopes keep two names.
    pub fn session_name(&self) -> String {
        let full: String = format!("sortie-{}@{}", self.org, self.runner)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_+=,.@-".contains(c) {
                    c
                } else {
                    '.'
                }
            })
            .collect();
        if full.len() <= ROLE_SESSION_NAME_MAX {
            return full;
        }
        let hash: String = sha2::Sha256::digest(full.as_bytes())
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        let head: String = full
            .chars()
            .take(ROLE_SESSION_NAME_MAX - hash.len() - 1)
            .collect();
        format!("{head}-{hash}")
    }
}

/// The tags of `job`'s task (ECS RunTask `tags`): `sortie:job`, `sortie:env`, `sortie:org`
/// and `sortie:runner`, each value within ECS's 256 characters (an environment path and a
/// runner id are at most 256 by Sortie's own validation, so nothing is cut in practice).
pub fn task_tags(job: &Job) -> Vec<(&'static str, String)> {
    let scope = SessionScope::of(job);
    vec![
        (TAG_JOB, tag_value(job.id.as_str(), ECS_TAG_VALUE_MAX)),
        (
            TAG_ENV,
            tag_value(&job.environment.to_string(), ECS_TAG_VALUE_MAX),
        ),
        (TAG_ORG, tag_value(&scope.org, ECS_TAG_VALUE_MAX)),
        (TAG_RUNNER, tag_value(&scope.runner, ECS_TAG_VALUE_MAX)),
    ]
}

/// `value` cut to at most `max` characters (a tag value's limit counts characters).
fn tag_value(value: &str, max: usize) -> String {
    value.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortie_core::limits::{is_role_session_name, is_session_tag_value};

    fn job(env: &str, runner: &str) -> Job {
        Job::new(
            "01jnx6v4k2m8q9r3s5t7w0y1za",
            sortie_core::EnvPath::parse(env).unwrap(),
            sortie_core::RunnerId::parse(runner).unwrap(),
            sortie_core::JobRequest::parse(r#"{"operation":"plan","files":{"main.tf":""}}"#)
                .unwrap(),
            "alice@example.com".into(),
            chrono::Utc::now(),
        )
    }

    #[test]
    fn two_jobs_of_one_org_and_runner_share_one_scope_that_names_no_job() {
        let a = SessionScope::of(&job("acme/payments/prod", "acme/fargate"));
        let b = SessionScope::of(&job("acme/web/dev", "acme/fargate"));
        assert_eq!(a, b, "one cache key, so one session");
        assert_eq!(
            a.tags(),
            [
                (TAG_ORG, "acme".to_string()),
                (TAG_RUNNER, "acme/fargate".to_string())
            ]
        );
        assert_eq!(a.session_name(), "sortie-acme@acme.fargate");
        assert!(is_role_session_name(&a.session_name()));
        // Another runner, or another org on a shared runner: another scope.
        assert_ne!(a, SessionScope::of(&job("acme/web/dev", "acme/other")));
        let shared = SessionScope::of(&job("globex/web/dev", "fargate"));
        assert_eq!(shared.session_name(), "sortie-globex@fargate");
        assert_ne!(SessionScope::of(&job("acme/web/dev", "fargate")), shared);
    }

    #[test]
    fn a_long_scope_keeps_a_valid_distinct_session_name() {
        let group = format!("{}/{}", "a".repeat(63), "b".repeat(63));
        let one = SessionScope::of(&job(&format!("{group}/prod"), &format!("{group}/r1")));
        let two = SessionScope::of(&job(&format!("{group}/prod"), &format!("{group}/r2")));
        for s in [&one, &two] {
            let name = s.session_name();
            assert_eq!(name.len(), ROLE_SESSION_NAME_MAX, "{name}");
            assert!(is_role_session_name(&name), "{name}");
            assert!(s.tags().iter().all(|(_, v)| is_session_tag_value(v)));
        }
        assert_ne!(one.session_name(), two.session_name());
    }

    #[test]
    fn the_task_carries_its_own_container_environment_org_and_runner() {
        let tags = task_tags(&job("acme/payments/prod", "acme/fargate"));
        assert_eq!(
            tags,
            [
                (TAG_JOB, "01jnx6v4k2m8q9r3s5t7w0y1za".to_string()),
                (TAG_ENV, "acme/payments/prod".to_string()),
                (TAG_ORG, "acme".to_string()),
                (TAG_RUNNER, "acme/fargate".to_string()),
            ]
        );
        for (k, v) in &tags {
            assert!(!k.to_ascii_lowercase().starts_with("aws:"));
            assert!(v.chars().count() <= ECS_TAG_VALUE_MAX);
        }
    }
}
