//! The pull-request service over the in-memory world and a fake host that records what it
//! was asked to write.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::Utc;
use sortie_core::auth::{Grantee, Membership, Role};
use sortie_core::environment::EnvironmentInput;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_core::sensitive::SensitiveValues;
use sortie_core::vcs::command::Command;
use sortie_core::vcs::connection::VcsConnection;
use sortie_core::vcs::pull::PullRequestRecord;
use sortie_core::vcs::reconcile::ListedPull;
use sortie_core::vcs::report::{CheckOutput, CheckStatus, Conclusion, COMMENT_MARKER};
use sortie_core::vcs::work::{PullAction, PullWork};
use sortie_core::vcs::{VcsBinding, VcsProvider};
use sortie_core::{GroupPath, JobId, JobState, Operation, ReviewVerdict, Source};
use sortie_store::{
    EnvironmentStore, JobStore, MembershipRecord, MembershipStore, RunnerStore, VcsStore,
};

use super::*;
use crate::testing::World;

const REPO: &str = "acme/infra";
const HEAD: &str = "1111111111111111111111111111111111111111";
const NEXT: &str = "2222222222222222222222222222222222222222";

#[derive(Default)]
struct HostState {
    pulls: BTreeMap<u64, PullInfo>,
    files: BTreeMap<u64, Vec<String>>,
    /// Check runs by id: (sha, every output written, in order).
    checks: BTreeMap<u64, (String, Vec<CheckOutput>)>,
    comments: BTreeMap<u64, Vec<String>>,
    replies: Vec<String>,
    next_id: u64,
    down: bool,
    reviews: Vec<sortie_core::vcs::requirements::Review>,
    required_checks: Vec<String>,
    head_checks: Vec<sortie_core::vcs::requirements::CheckResult>,
    /// Lists answered, and how many of them were 304s.
    lists: u32,
    not_modified: u32,
    /// Source tokens still active, the ones revoked (in order), and one whose revocation
    /// the host refuses.
    sources: Vec<HeldSource>,
    revoked_sources: Vec<u64>,
    refuse_revoke: Option<u64>,
}

#[derive(Default)]
struct FakeHost(Mutex<HostState>);

impl FakeHost {
    fn down(&self) -> Result<(), HostError> {
        if self.0.lock().unwrap().down {
            return Err(HostError::Unavailable {
                message: "503".into(),
                retry_after_seconds: 1,
            });
        }
        Ok(())
    }
    fn open_pull(&self, number: u64, author: &str, fork: bool, files: &[&str]) {
        let mut st = self.0.lock().unwrap();
        st.pulls.insert(
            number,
            PullInfo {
                head_sha: HEAD.into(),
                base: "main".into(),
                author: author.into(),
                fork,
                open: true,
                merged: false,
                merge_commit_sha: None,
            },
        );
        st.files
            .insert(number, files.iter().map(|f| f.to_string()).collect());
    }
    fn checks_on(&self, sha: &str) -> BTreeMap<String, CheckOutput> {
        let st = self.0.lock().unwrap();
        st.checks
            .values()
            .filter(|(s, _)| s == sha)
            .map(|(_, outs)| {
                let last = outs.last().unwrap().clone();
                (last.name.clone(), last)
            })
            .collect()
    }
}

#[async_trait]
impl CodeHost for FakeHost {
    fn provider(&self) -> VcsProvider {
        VcsProvider::Github
    }

    async fn open_pulls(
        &self,
        _r: &str,
        base: &str,
        etag: Option<&str>,
    ) -> Result<Option<(Vec<ListedPull>, Option<String>)>, HostError> {
        self.down()?;
        let mut st = self.0.lock().unwrap();
        st.lists += 1;
        let list: Vec<ListedPull> = st
            .pulls
            .iter()
            .filter(|(_, p)| p.open && p.base == base)
            .map(|(n, p)| ListedPull {
                number: *n,
                head_sha: p.head_sha.clone(),
            })
            .collect();
        // The list's ETag is what it holds, as GitHub's is a digest of the answer.
        let tag = format!("{:?}", list);
        if etag == Some(tag.as_str()) {
            st.not_modified += 1;
            return Ok(None);
        }
        Ok(Some((list, Some(tag))))
    }
    async fn pull(&self, _repository: &str, number: u64) -> Result<PullInfo, HostError> {
        self.down()?;
        self.0
            .lock()
            .unwrap()
            .pulls
            .get(&number)
            .cloned()
            .ok_or_else(|| HostError::Refused("Not Found".into()))
    }
    async fn changed_files(&self, _r: &str, number: u64) -> Result<Vec<String>, HostError> {
        self.down()?;
        Ok(self.0.lock().unwrap().files[&number].clone())
    }
    async fn write_check(
        &self,
        _r: &str,
        sha: &str,
        id: Option<u64>,
        check: &CheckOutput,
        _details: Option<&str>,
    ) -> Result<u64, HostError> {
        self.down()?;
        let mut st = self.0.lock().unwrap();
        let id = match id {
            Some(id) => id,
            None => {
                st.next_id += 1;
                st.next_id
            }
        };
        st.checks
            .entry(id)
            .or_insert_with(|| (sha.to_string(), vec![]))
            .1
            .push(check.clone());
        Ok(id)
    }
    async fn upsert_comment(
        &self,
        _r: &str,
        _n: u64,
        id: Option<u64>,
        body: &str,
    ) -> Result<u64, HostError> {
        self.down()?;
        let mut st = self.0.lock().unwrap();
        let id = match id {
            Some(id) => id,
            None => {
                st.next_id += 1;
                st.next_id
            }
        };
        st.comments.entry(id).or_default().push(body.to_string());
        Ok(id)
    }
    async fn reply(&self, _r: &str, _n: u64, body: &str) -> Result<(), HostError> {
        self.down()?;
        self.0.lock().unwrap().replies.push(body.to_string());
        Ok(())
    }
    async fn facts(
        &self,
        _r: &str,
        number: u64,
    ) -> Result<sortie_core::vcs::requirements::PullFacts, HostError> {
        self.down()?;
        let st = self.0.lock().unwrap();
        let pull = &st.pulls[&number];
        Ok(sortie_core::vcs::requirements::PullFacts {
            author: pull.author.clone(),
            head_sha: pull.head_sha.clone(),
            planned_sha: None,
            reviews: st.reviews.clone(),
            mergeable: Some(true),
            draft: false,
            behind_by: Some(0),
            required_checks: st.required_checks.clone(),
            checks: st.head_checks.clone(),
        })
    }
    async fn source_access(
        &self,
        repository: &str,
        sha: &str,
        _job: &str,
    ) -> Result<SourceAccess, HostError> {
        Ok(SourceAccess {
            url: format!("https://api.github.com/repos/{repository}/tarball/{sha}"),
            token: "ghs_test".into(),
            expires_at: Utc::now() + chrono::Duration::hours(1),
            revoke_url: None,
        })
    }
    async fn source_tokens(&self, _repository: &str) -> Result<Vec<HeldSource>, HostError> {
        self.down()?;
        let st = self.0.lock().unwrap();
        Ok(st
            .sources
            .iter()
            .filter(|t| !st.revoked_sources.contains(&t.token_id))
            .cloned()
            .collect())
    }
    async fn revoke_source(&self, _repository: &str, token_id: u64) -> Result<(), HostError> {
        let mut st = self.0.lock().unwrap();
        if st.refuse_revoke == Some(token_id) {
            return Err(HostError::Refused("403 Forbidden".into()));
        }
        st.revoked_sources.push(token_id);
        Ok(())
    }
}

struct FakeHosts(Arc<FakeHost>);

#[async_trait]
impl CodeHosts for FakeHosts {
    async fn open(&self, _c: &VcsConnection) -> Result<Arc<dyn CodeHost>, HostError> {
        Ok(self.0.clone())
    }
}

struct Setup {
    w: World,
    host: Arc<FakeHost>,
    prs: PullRequests,
    connection: VcsConnection,
}

/// octocat, a deployer of `acme`, opens pull request `number` touching `web/dev`, and its
/// work is done.
async fn deployer_opens(s: &Setup, number: u64) {
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host
        .open_pull(number, "octocat", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(number)).await.unwrap();
}

async fn setup() -> Setup {
    let w = World::new().await;
    let connection = VcsConnection {
        org: "acme".into(),
        provider: VcsProvider::Github,
        app_id: 1,
        api_url: "https://api.github.com".into(),
        credential_secret: "arn:key".into(),
        webhook_secret: "arn:hook".into(),
        created_by: "admin".into(),
        created_at: Utc::now(),
    };
    w.store.put_connection(&connection).await.unwrap();
    for (path, dir) in [
        ("acme/web/dev", "web/dev"),
        ("acme/web/prod", "web/prod"),
        ("acme/api/dev", "api/dev"),
    ] {
        bind(&w, path, REPO, dir).await;
    }
    let host = Arc::new(FakeHost::default());
    let prs = PullRequests {
        jobs: w.jobs.clone(),
        hosts: Arc::new(FakeHosts(host.clone())),
        console_url: "https://sortie.example.com".into(),
    };
    Setup {
        w,
        host,
        prs,
        connection,
    }
}

/// Creates environment `path` bound to `repo`'s `dir`, through the environments service's
/// update (which writes the bindings index).
async fn bind(w: &World, path: &str, repo: &str, dir: &str) {
    w.environment(path).await;
    let input = EnvironmentInput::from_value(
        &serde_json::json!({"vcs": {"repository": repo, "directory": dir}}),
        false,
    )
    .unwrap();
    environments(w)
        .update(&sortie_core::EnvPath::parse(path).unwrap(), input, None)
        .await
        .unwrap();
}

fn environments(w: &World) -> crate::Environments {
    crate::Environments::new(w.store.clone(), Default::default())
}

async fn grant(w: &World, login: &str, issuer: Option<&str>, group: &str, role: Role) {
    w.store
        .put_membership(&MembershipRecord {
            id: sortie_core::tokens::new_id(),
            membership: Membership {
                group: GroupPath::parse(group).unwrap(),
                role,
                grantee: Grantee::Subject {
                    subject: login.into(),
                    issuer: issuer.map(str::to_string),
                },
            },
            granted_by: "admin".into(),
            granted_at: Utc::now(),
        })
        .await
        .unwrap();
}

fn opened(number: u64) -> PullWork {
    PullWork::PullRequest {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number,
        action: PullAction::Opened,
        head_sha: HEAD.into(),
        merged: false,
    }
}

fn comment(number: u64, author: &str, command: Command) -> PullWork {
    PullWork::Comment {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number,
        author: author.into(),
        commands: vec![command],
    }
}

async fn record(s: &Setup, number: u64) -> PullRequestRecord {
    s.w.store
        .get_pull_request(VcsProvider::Github, REPO, number)
        .await
        .unwrap()
        .unwrap()
        .item
}

#[tokio::test]
async fn a_pull_request_touching_two_bound_environments_gets_two_plans_two_checks_and_one_comment()
{
    let s = setup().await;
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    s.host.open_pull(
        7,
        "OctoCat",
        false,
        &["web/dev/main.tf", "web/prod/variables.tf", "README.md"],
    );
    s.prs.handle(&opened(7)).await.unwrap();

    let rec = record(&s, 7).await;
    assert_eq!(
        rec.environments.keys().collect::<Vec<_>>(),
        ["acme/web/dev", "acme/web/prod"]
    );
    for (path, entry) in &rec.environments {
        let job =
            s.w.store
                .get_job(&JobId::from(entry.plan_job.clone().unwrap()))
                .await
                .unwrap()
                .job;
        assert_eq!(job.environment.to_string(), *path);
        assert!(job.speculative, "a pull request's plan is speculative");
        assert_eq!(job.requested_by, "github:OctoCat");
        assert_eq!(
            job.request.source,
            Source::Github {
                repository: REPO.into(),
                commit: HEAD.into(),
                path: path.trim_start_matches("acme/").into(),
            }
        );
        assert_eq!(job.pull_request.as_ref().unwrap().number, 7);
        assert!(entry.check_run_id.is_some());
    }
    assert_eq!(s.w.sent().len(), 2, "both plans sent at once");
    let checks = s.host.checks_on(HEAD);
    assert_eq!(
        checks.keys().collect::<Vec<_>>(),
        ["sortie: acme/web/dev", "sortie: acme/web/prod"]
    );
    assert!(checks.values().all(|c| c.status == CheckStatus::Queued));
    let st = s.host.0.lock().unwrap();
    assert_eq!(st.comments.len(), 1, "one comment");
    let body = st.comments.values().next().unwrap().last().unwrap();
    assert!(body.starts_with(COMMENT_MARKER), "{body}");
    assert!(body.contains("acme/web/dev") && body.contains("acme/web/prod"));
    assert!(
        !body.contains("acme/api/dev"),
        "an untouched environment is not shown"
    );
}

/// An environment its expiry destroyed still gets a pull request's plan (no state, no
/// lock: it shows what an apply would create again), and so does every other environment
/// the pull request touches: a refused submit there would have ended the planning of all.
#[tokio::test]
async fn a_destroyed_environment_still_gets_the_pull_requests_plan_beside_the_others() {
    use sortie_store::ExpiryStore;
    let s = setup().await;
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    let mark = sortie_core::expiry::Destroyed {
        at: Utc::now(),
        job_id: None,
        expired_at: Utc::now(),
    };
    s.w.store
        .mark_destroyed(
            &sortie_core::EnvPath::parse("acme/web/dev").unwrap(),
            Some(&mark),
        )
        .await
        .unwrap();
    s.host.open_pull(
        8,
        "OctoCat",
        false,
        &["web/dev/main.tf", "web/prod/main.tf"],
    );
    s.prs.handle(&opened(8)).await.unwrap();
    let rec = record(&s, 8).await;
    for path in ["acme/web/dev", "acme/web/prod"] {
        let entry = &rec.environments[path];
        assert!(entry.plan_job.is_some(), "{path}: {entry:?}");
    }
    assert_eq!(s.w.sent().len(), 2, "both plans sent");
}

#[tokio::test]
async fn a_redelivered_event_submits_nothing_twice_and_edits_the_same_comment() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    s.prs.handle(&opened(7)).await.unwrap();
    let jobs =
        s.w.store
            .list_jobs(
                &sortie_core::EnvPath::parse("acme/web/dev").unwrap(),
                10,
                None,
            )
            .await
            .unwrap()
            .jobs;
    assert_eq!(jobs.len(), 1, "one plan per commit");
    let st = s.host.0.lock().unwrap();
    assert_eq!(st.comments.len(), 1);
    assert_eq!(
        st.checks.len(),
        1,
        "one check run per environment and commit"
    );
}

#[tokio::test]
async fn a_fork_is_not_planned_until_a_deployer_comments_and_a_viewer_is_refused() {
    let s = setup().await;
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "alice", Some(&issuer), "acme/web", Role::Deployer).await;
    grant(&s.w, "vic", Some(&issuer), "acme", Role::Viewer).await;
    s.host.open_pull(9, "stranger", true, &["web/dev/main.tf"]);
    s.prs.handle(&opened(9)).await.unwrap();
    let rec = record(&s, 9).await;
    let entry = &rec.environments["acme/web/dev"];
    assert!(entry.plan_job.is_none() && entry.not_planned.is_some());
    assert!(s.w.sent().is_empty(), "nothing runs the fork's code");
    let check = &s.host.checks_on(HEAD)["sortie: acme/web/dev"];
    assert_eq!(check.conclusion, Some(Conclusion::Neutral), "{check:?}");

    // A viewer's command is refused, saying which role is missing.
    s.prs
        .handle(&comment(
            9,
            "vic",
            Command::Plan {
                environments: vec![],
            },
        ))
        .await
        .unwrap();
    assert!(s.w.sent().is_empty());
    let reply = s.host.0.lock().unwrap().replies.last().unwrap().clone();
    assert!(
        reply.contains("deployer") && reply.contains("acme/web/dev"),
        "{reply}"
    );

    // A deployer's command plans it, requested by the deployer.
    s.prs
        .handle(&comment(
            9,
            "alice",
            Command::Plan {
                environments: vec![],
            },
        ))
        .await
        .unwrap();
    let rec = record(&s, 9).await;
    let job =
        s.w.store
            .get_job(&JobId::from(
                rec.environments["acme/web/dev"].plan_job.clone().unwrap(),
            ))
            .await
            .unwrap()
            .job;
    assert_eq!(job.requested_by, "github:alice");
    assert_eq!(rec.plans_allowed_by.as_deref(), Some("alice"));
}

#[tokio::test]
async fn a_grant_without_the_connections_issuer_does_not_let_a_login_plan() {
    let s = setup().await;
    // An owner grant to subject `alice` from any issuer (meant for a token's `sub`).
    grant(&s.w, "alice", None, "acme", Role::Owner).await;
    s.host.open_pull(3, "alice", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(3)).await.unwrap();
    assert!(
        s.w.sent().is_empty(),
        "a GitHub login is not a token's subject"
    );
    assert!(record(&s, 3).await.environments["acme/web/dev"]
        .not_planned
        .is_some());
}

#[tokio::test]
async fn another_organisations_binding_of_the_same_repository_is_never_planned() {
    let s = setup().await;
    // Org `beta` binds the same repository; acme's connection must not plan it.
    s.w.store
        .create_runner(&sortie_core::Runner {
            id: sortie_core::RunnerId::parse("beta/fargate").unwrap(),
            spec: crate::testing::runner_spec(),
        })
        .await
        .unwrap();
    let mut env = s.w.environment("acme/tmp").await;
    s.w.store.delete_environment(&env.path, None).await.unwrap();
    env.path = sortie_core::EnvPath::parse("beta/web/dev").unwrap();
    env.runner.runner_id = sortie_core::RunnerId::parse("beta/fargate").unwrap();
    env.settings.vcs = Some(VcsBinding {
        repository: REPO.into(),
        directory: "web/dev".into(),
        ..serde_json::from_value(serde_json::json!({"repository": REPO})).unwrap()
    });
    s.w.store.create_environment(&env).await.unwrap();
    s.w.store
        .index_binding(VcsProvider::Github, REPO, &env.path)
        .await
        .unwrap();
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host.open_pull(4, "octocat", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(4)).await.unwrap();
    let rec = record(&s, 4).await;
    assert_eq!(
        rec.environments.keys().collect::<Vec<_>>(),
        ["acme/web/dev"]
    );
}

#[tokio::test]
async fn a_new_head_plans_again_with_new_checks_and_a_job_end_reports_it() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    let first = record(&s, 7).await.environments["acme/web/dev"].clone();

    // The plan ends: the report shows it planned, on the same check and comment.
    let id = JobId::from(first.plan_job.clone().unwrap());
    walk(
        &s.w,
        &id,
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
            (JobState::Running, JobState::Succeeded),
        ],
    )
    .await;
    let report = PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
    };
    s.prs.handle(&report).await.unwrap();
    let check = &s.host.checks_on(HEAD)["sortie: acme/web/dev"];
    assert_eq!(check.status, CheckStatus::Completed);
    assert_eq!(s.host.0.lock().unwrap().comments.len(), 1);

    // A push: a new head, a new plan, a new check run on the new commit.
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().head_sha = NEXT.into();
    s.prs
        .handle(&PullWork::PullRequest {
            org: "acme".into(),
            provider: VcsProvider::Github,
            repository: REPO.into(),
            number: 7,
            action: PullAction::Synchronize,
            head_sha: NEXT.into(),
            merged: false,
        })
        .await
        .unwrap();
    let second = record(&s, 7).await.environments["acme/web/dev"].clone();
    assert_eq!(second.sha, NEXT);
    assert_ne!(second.plan_job, first.plan_job);
    assert_ne!(second.check_run_id, first.check_run_id);
    assert_eq!(s.host.checks_on(NEXT).len(), 1);
    assert_eq!(
        s.host.0.lock().unwrap().comments.len(),
        1,
        "still one comment"
    );
}

#[tokio::test]
async fn a_host_outage_fails_the_work_retryably_and_the_next_delivery_writes_it_whole() {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.host.0.lock().unwrap().down = true;
    let e = s.prs.handle(&opened(7)).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    s.host.0.lock().unwrap().down = false;
    s.prs.handle(&opened(7)).await.unwrap();
    assert_eq!(s.host.checks_on(HEAD).len(), 1);
    assert_eq!(s.host.0.lock().unwrap().comments.len(), 1);
}

#[tokio::test]
async fn unbinding_takes_an_environment_out_of_the_repository_index() {
    let s = setup().await;
    let path = sortie_core::EnvPath::parse("acme/web/dev").unwrap();
    let before =
        s.w.store
            .bound_environments(VcsProvider::Github, REPO)
            .await
            .unwrap();
    assert!(before.contains(&path));
    let input = EnvironmentInput::from_value(&serde_json::json!({"vcs": null}), false).unwrap();
    environments(&s.w).update(&path, input, None).await.unwrap();
    let after =
        s.w.store
            .bound_environments(VcsProvider::Github, REPO)
            .await
            .unwrap();
    assert!(!after.contains(&path) && after.len() == before.len() - 1);
}

/// Binds `path` (already bound by `setup`) to apply before the merge, after `approvals`.
async fn before_merge(s: &Setup, path: &str, approvals: u32) {
    let input = EnvironmentInput::from_value(
        &serde_json::json!({"vcs": {"repository": REPO, "directory": path.trim_start_matches("acme/"),
            "apply": "before_merge", "requirements": {"approved": approvals}}}),
        false,
    )
    .unwrap();
    environments(&s.w)
        .update(&sortie_core::EnvPath::parse(path).unwrap(), input, None)
        .await
        .unwrap();
}

/// Moves job `id` through `steps` (from, to), as its platform and runner would.
async fn walk(w: &World, id: &JobId, steps: &[(JobState, JobState)]) {
    for &(from, to) in steps {
        w.store
            .transition_job(id, from, to, Utc::now(), "test", Default::default())
            .await
            .unwrap();
    }
}

async fn succeed(s: &Setup, id: &str) {
    let id = JobId::from(id.to_string());
    walk(
        &s.w,
        &id,
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
            (JobState::Running, JobState::Succeeded),
        ],
    )
    .await;
}

fn approval(user: &str, sha: &str, at: i64) -> sortie_core::vcs::requirements::Review {
    sortie_core::vcs::requirements::Review {
        user: user.into(),
        state: sortie_core::vcs::requirements::ReviewState::Approved,
        commit_id: sha.into(),
        submitted_at: chrono::DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(at),
    }
}

fn apply(number: u64, author: &str) -> PullWork {
    comment(
        number,
        author,
        Command::Apply {
            environments: vec![],
        },
    )
}

#[tokio::test]
async fn apply_is_refused_before_an_approval_accepted_after_and_refused_when_the_head_moves() {
    let s = setup().await;
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    grant(&s.w, "reviewer", Some(&issuer), "acme", Role::Viewer).await;
    before_merge(&s, "acme/web/dev", 1).await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    // Sortie's own check is required by the branch: it never blocks its own apply.
    s.host.0.lock().unwrap().required_checks = vec!["sortie: acme/web/dev".into()];
    s.prs.handle(&opened(7)).await.unwrap();
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    succeed(&s, &plan).await;

    // No approval yet: refused, with the reason, and nothing submitted.
    let sent = s.w.sent().len();
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let reply = s.host.0.lock().unwrap().replies.last().unwrap().clone();
    assert!(
        reply.starts_with("Not applied") && reply.contains("approval"),
        "{reply}"
    );
    assert_eq!(s.w.sent().len(), sent);
    // The author's own approval never counts; an approval on an older commit neither.
    s.host.0.lock().unwrap().reviews =
        vec![approval("octocat", HEAD, 1), approval("reviewer", NEXT, 2)];
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    assert!(record(&s, 7).await.environments["acme/web/dev"]
        .apply_job
        .is_none());

    // A reviewer's approval on the head: the apply is submitted, once.
    s.host
        .0
        .lock()
        .unwrap()
        .reviews
        .push(approval("reviewer", HEAD, 3));
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let entry = record(&s, 7).await.environments["acme/web/dev"].clone();
    let job =
        s.w.store
            .get_job(&JobId::from(entry.apply_job.clone().expect("applied")))
            .await
            .unwrap()
            .job;
    assert_eq!(job.request.operation, Operation::Apply);
    assert!(!job.speculative, "an apply takes the lock");
    assert_eq!(job.requested_by, "github:octocat");
    assert_eq!(job.pull_request.as_ref().unwrap().head_sha, HEAD);
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let reply = s.host.0.lock().unwrap().replies.last().unwrap().clone();
    assert!(reply.contains("already being applied"), "{reply}");

    // A push after the approval: the planned commit is no longer the head.
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().head_sha = NEXT.into();
    let mut stale = record(&s, 7).await;
    stale
        .environments
        .get_mut("acme/web/dev")
        .unwrap()
        .apply_job = None;
    let v =
        s.w.store
            .get_pull_request(VcsProvider::Github, REPO, 7)
            .await
            .unwrap()
            .unwrap()
            .version;
    s.w.store.put_pull_request(&stale, Some(v)).await.unwrap();
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let reply = s.host.0.lock().unwrap().replies.last().unwrap().clone();
    assert!(reply.contains("plan again"), "{reply}");
}

#[tokio::test]
async fn apply_is_refused_to_a_viewer_and_where_the_binding_applies_after_the_merge() {
    let s = setup().await;
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    grant(&s.w, "vic", Some(&issuer), "acme", Role::Viewer).await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(7)).await.unwrap();
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    succeed(&s, &plan).await;
    s.prs.handle(&apply(7, "vic")).await.unwrap();
    let reply = s.host.0.lock().unwrap().replies.last().unwrap().clone();
    assert!(
        reply.contains("deployer") && reply.contains("after the merge"),
        "{reply}"
    );
    assert!(record(&s, 7).await.environments["acme/web/dev"]
        .apply_job
        .is_none());
}

#[tokio::test]
async fn a_merge_applies_after_merge_environments_at_the_merge_commit_and_warns_of_an_unapplied_one(
) {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    // web/dev applies after the merge (the default); web/prod before it, and is not applied.
    before_merge(&s, "acme/web/prod", 1).await;
    s.host.open_pull(
        7,
        "octocat",
        false,
        &["web/dev/main.tf", "web/prod/main.tf"],
    );
    s.prs.handle(&opened(7)).await.unwrap();
    let merge = "3333333333333333333333333333333333333333";
    {
        let mut st = s.host.0.lock().unwrap();
        let pull = st.pulls.get_mut(&7).unwrap();
        pull.open = false;
        pull.merged = true;
        pull.merge_commit_sha = Some(merge.into());
    }
    let closed = PullWork::PullRequest {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
        action: PullAction::Closed,
        head_sha: HEAD.into(),
        merged: true,
    };
    s.prs.handle(&closed).await.unwrap();
    // A redelivery applies nothing twice.
    s.prs.handle(&closed).await.unwrap();
    let rec = record(&s, 7).await;
    assert!(rec.merged && !rec.open);
    let dev = &rec.environments["acme/web/dev"];
    let job =
        s.w.store
            .get_job(&JobId::from(
                dev.apply_job.clone().expect("applied after the merge"),
            ))
            .await
            .unwrap()
            .job;
    assert_eq!(job.request.operation, Operation::Apply);
    match &job.request.source {
        Source::Github { commit, path, .. } => {
            assert_eq!((commit.as_str(), path.as_str()), (merge, "web/dev"))
        }
        other => panic!("{other:?}"),
    }
    // Past every requirement: one phase, nothing checked again (its head is not the
    // pull request's).
    assert!(job.pull_request.as_ref().unwrap().merged);
    assert!(!job.checked_again_before_apply());
    assert!(job.review.is_none(), "{:?}", job.review);
    assert!(rec.environments["acme/web/prod"].apply_job.is_none());
    let jobs =
        s.w.store
            .list_jobs(
                &sortie_core::EnvPath::parse("acme/web/dev").unwrap(),
                10,
                None,
            )
            .await
            .unwrap()
            .jobs;
    assert_eq!(jobs.len(), 2, "one plan and one apply");
    let st = s.host.0.lock().unwrap();
    let body = st.comments.values().next().unwrap().last().unwrap();
    assert!(
        body.contains("acme/web/prod was merged before its apply"),
        "the comment warns: {body}"
    );
}

#[tokio::test]
async fn each_job_state_change_costs_at_most_one_edit_of_each_check_and_of_the_comment() {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host.open_pull(
        7,
        "octocat",
        false,
        &["web/dev/main.tf", "web/prod/main.tf"],
    );
    s.prs.handle(&opened(7)).await.unwrap();
    let report = PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
    };
    let writes = |s: &Setup| {
        let st = s.host.0.lock().unwrap();
        let checks: usize = st.checks.values().map(|(_, outs)| outs.len()).sum();
        let comments: usize = st.comments.values().map(Vec::len).sum();
        (checks, comments)
    };
    assert_eq!(writes(&s), (2, 1), "two checks created, one comment");
    // Reports with nothing changed write nothing.
    s.prs.handle(&report).await.unwrap();
    s.prs.handle(&report).await.unwrap();
    assert_eq!(writes(&s), (2, 1));
    // One plan ends: its check and the comment are edited once; the other check is not.
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    succeed(&s, &plan).await;
    s.prs.handle(&report).await.unwrap();
    s.prs.handle(&report).await.unwrap();
    assert_eq!(writes(&s), (3, 2));
}

#[tokio::test]
async fn the_reconcile_plans_a_pull_request_whose_webhook_was_lost_and_then_lists_for_free() {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    // Opened on the host; its webhook never arrived.
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    let done = s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    assert_eq!((done.repositories, done.planned), (1, 1), "{done:?}");
    let rec = record(&s, 7).await;
    assert!(rec.environments["acme/web/dev"].plan_job.is_some());
    assert_eq!(s.host.checks_on(HEAD).len(), 1, "its check is written");

    // Nothing changed: the list is asked with its ETag, answered 304, and nothing is
    // written to the host again.
    let writes = |s: &Setup| {
        let st = s.host.0.lock().unwrap();
        st.checks.values().map(|(_, o)| o.len()).sum::<usize>()
            + st.comments.values().map(Vec::len).sum::<usize>()
    };
    let before = writes(&s);
    let done = s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    assert_eq!(
        (done.unchanged, done.planned, done.reported),
        (1, 0, 1),
        "{done:?}"
    );
    assert_eq!(s.host.0.lock().unwrap().not_modified, 1);
    assert_eq!(
        writes(&s),
        before,
        "an unchanged pull request costs no write"
    );

    // A push whose webhook was lost: planned again at the new head, once.
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().head_sha = NEXT.into();
    let done = s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    assert_eq!(done.planned, 1, "{done:?}");
    assert_eq!(record(&s, 7).await.head_sha, NEXT);
    assert_eq!(s.host.checks_on(NEXT).len(), 1);
    assert_eq!(
        s.prs
            .reconcile("acme", VcsProvider::Github)
            .await
            .unwrap()
            .planned,
        0
    );
}

#[tokio::test]
async fn the_reconcile_closes_a_pull_request_whose_merge_was_not_heard_and_applies_it_once() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    assert_eq!(
        s.prs
            .reconcile("acme", VcsProvider::Github)
            .await
            .unwrap()
            .reported,
        1
    );
    let merge = "3333333333333333333333333333333333333333";
    {
        let mut st = s.host.0.lock().unwrap();
        let pull = st.pulls.get_mut(&7).unwrap();
        pull.open = false;
        pull.merged = true;
        pull.merge_commit_sha = Some(merge.into());
    }
    let done = s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    assert_eq!(done.closed, 1, "{done:?}");
    let rec = record(&s, 7).await;
    assert!(rec.merged && !rec.open);
    let apply = rec.environments["acme/web/dev"].apply_job.clone();
    assert!(apply.is_some(), "after_merge applies at the merge commit");
    // The next period has nothing left to do, and applies nothing twice.
    let done = s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    assert_eq!((done.closed, done.planned), (0, 0), "{done:?}");
    assert_eq!(
        record(&s, 7).await.environments["acme/web/dev"].apply_job,
        apply
    );
}

#[tokio::test]
async fn a_host_outage_fails_the_reconcile_retryably_and_the_next_one_recovers() {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.host.0.lock().unwrap().down = true;
    let e = s
        .prs
        .reconcile("acme", VcsProvider::Github)
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "{e}");
    s.host.0.lock().unwrap().down = false;
    assert_eq!(
        s.prs
            .reconcile("acme", VcsProvider::Github)
            .await
            .unwrap()
            .planned,
        1
    );
}

#[tokio::test]
async fn the_schedule_queues_one_reconcile_per_connected_organisation() {
    let s = setup().await;
    let mut beta = s.connection.clone();
    beta.org = "beta".into();
    s.w.store.put_connection(&beta).await.unwrap();
    let queue = sortie_store::MemoryPullQueue::default();
    assert_eq!(s.prs.queue_reconciles(&queue).await.unwrap(), 2);
    let mut orgs: Vec<String> = queue
        .drain()
        .into_iter()
        .map(|w| match w {
            PullWork::Reconcile { org, .. } => org,
            other => panic!("{other:?}"),
        })
        .collect();
    orgs.sort();
    assert_eq!(orgs, ["acme", "beta"]);
    // An organisation with no connection any more reconciles nothing.
    s.w.store
        .delete_connection("beta", VcsProvider::Github)
        .await
        .unwrap();
    assert_eq!(
        s.prs.reconcile("beta", VcsProvider::Github).await.unwrap(),
        Reconciled::default()
    );
}

#[tokio::test]
async fn a_pull_request_that_touches_no_bound_environment_gets_no_comment_until_it_does() {
    let s = setup().await;
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host
        .open_pull(7, "octocat", false, &["README.md", "docs/guide.md"]);
    s.prs.handle(&opened(7)).await.unwrap();
    // The reconcile sees it too, and stays as quiet.
    s.prs.reconcile("acme", VcsProvider::Github).await.unwrap();
    {
        let st = s.host.0.lock().unwrap();
        assert!(st.comments.is_empty(), "no comment: {:?}", st.comments);
        assert!(st.checks.is_empty());
    }
    assert!(record(&s, 7).await.environments.is_empty());

    // A push that touches web/dev: planned, checked, commented.
    {
        let mut st = s.host.0.lock().unwrap();
        st.pulls.get_mut(&7).unwrap().head_sha = NEXT.into();
        st.files.insert(7, vec!["web/dev/main.tf".into()]);
    }
    s.prs.handle(&opened(7)).await.unwrap();
    assert_eq!(s.host.checks_on(NEXT).len(), 1);
    assert_eq!(s.host.0.lock().unwrap().comments.len(), 1);

    // And back: the one comment says it no longer changes an environment's files.
    let third = "4444444444444444444444444444444444444444";
    {
        let mut st = s.host.0.lock().unwrap();
        st.pulls.get_mut(&7).unwrap().head_sha = third.into();
        st.files.insert(7, vec!["README.md".into()]);
    }
    s.prs.handle(&opened(7)).await.unwrap();
    let st = s.host.0.lock().unwrap();
    assert_eq!(st.comments.len(), 1, "still one comment");
    let last = st.comments.values().next().unwrap().last().unwrap();
    assert!(last.contains("changes no environment"), "{last}");
}

/// Puts job `job`'s plan data where its pilot uploads it.
fn put_plan(bucket: &crate::testing::Bucket, job: &str, doc: &serde_json::Value) {
    let key = sortie_core::protocol::pilot::upload_key(
        &JobId::from(job.to_string()),
        sortie_core::protocol::pilot::UploadKind::PlanJson,
        None,
    )
    .unwrap();
    bucket.put(&key, serde_json::to_vec(doc).unwrap());
}

/// Records what is published.
#[derive(Default)]
struct Published(Mutex<Vec<(String, serde_json::Value)>>);

#[async_trait]
impl crate::Bus for Published {
    async fn job_ended(&self, _: &sortie_store::JobRecord) -> Result<(), crate::LifecycleError> {
        Ok(())
    }
    async fn publish(
        &self,
        detail_type: &str,
        _: &str,
        detail: serde_json::Value,
    ) -> Result<(), crate::LifecycleError> {
        self.0
            .lock()
            .unwrap()
            .push((detail_type.to_string(), detail));
        Ok(())
    }
}

#[tokio::test]
async fn a_claimed_plan_goes_in_progress_and_a_planned_one_shows_its_changes_and_diff() {
    let mut s = setup().await;
    let bucket = Arc::new(crate::testing::Bucket::default());
    let published = Arc::new(Published::default());
    s.prs.jobs.gate.artifacts = Some(bucket.clone());
    s.prs.jobs.bus = published.clone();
    grant(
        &s.w,
        "octocat",
        Some(&issuer_of(&s.connection)),
        "acme",
        Role::Deployer,
    )
    .await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(7)).await.unwrap();
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();

    // Dispatch claims it: a pull request's job says so (its launch is refused here, as
    // this world launches nothing), and the report of a claimed job is in progress.
    let engine = crate::Engine {
        jobs: s.prs.jobs.clone(),
        ..s.w.engine()
    };
    let body = serde_json::json!({"job_id": plan}).to_string();
    engine.dispatch(&body, 1).await;
    let said: Vec<(String, serde_json::Value)> = published.0.lock().unwrap().clone();
    let dispatched: Vec<_> = said
        .iter()
        .filter(|(t, _)| t == crate::bus::JOB_DISPATCHED)
        .collect();
    assert_eq!(dispatched.len(), 1, "{said:?}");
    let work = work_of_message(
        &serde_json::json!({"source": "sortie", "detail-type": crate::bus::JOB_DISPATCHED,
            "detail": dispatched[0].1})
        .to_string(),
    );
    assert_eq!(
        work,
        Some(PullWork::Report {
            org: "acme".into(),
            provider: VcsProvider::Github,
            repository: REPO.into(),
            number: 7
        })
    );
    // A job of no pull request says nothing at its claim.
    let other = s.w.environment("acme/other/dev").await;
    let plain = crate::submit::JobOrder::submit(
        sortie_core::JobRequest::from_value(
            &serde_json::json!({"operation": "plan", "files": {"main.tf": ""}}),
        )
        .unwrap(),
        SensitiveValues::default(),
        "alice".to_string(),
        None,
    );
    let plain = s.prs.jobs.submit_for(&other, plain).await.unwrap().job.id;
    engine
        .dispatch(&serde_json::json!({"job_id": plain}).to_string(), 1)
        .await;
    assert_eq!(
        published
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| t == crate::bus::JOB_DISPATCHED)
            .count(),
        1
    );

    // The report of a claimed plan (another pull request's, as this one's launch was
    // refused): in progress.
    let planned = setup_claimed(&s, 8).await;
    let report = |number| PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number,
    };
    s.prs.handle(&report(8)).await.unwrap();
    let checks = s.host.checks_on(NEXT);
    assert_eq!(
        checks["sortie: acme/api/dev"].status,
        CheckStatus::InProgress,
        "{checks:?}"
    );

    // Planned, with plan data: the check lists the changes and holds the plan's text,
    // and the comment shows it too.
    put_plan(
        &bucket,
        &planned,
        &serde_json::json!({"resource_changes": [
            {"address": "terraform_data.web", "type": "terraform_data", "name": "web",
             "change": {"actions": ["create"], "before": null, "after": {"input": "v2"}}}
        ]}),
    );
    let planned_id = JobId::from(planned.clone());
    for (from, to) in [
        (JobState::Dispatching, JobState::Running),
        (JobState::Running, JobState::Succeeded),
    ] {
        s.w.store
            .transition_job(
                &planned_id,
                from,
                to,
                Utc::now(),
                "test",
                Default::default(),
            )
            .await
            .unwrap();
    }
    s.prs.handle(&report(8)).await.unwrap();
    let check = &s.host.checks_on(NEXT)["sortie: acme/api/dev"];
    assert_eq!(check.status, CheckStatus::Completed);
    let line = format!(
        "- create: {}",
        sortie_core::vcs::report::escape("terraform_data.web")
    );
    assert!(check.summary.contains(&line), "{}", check.summary);
    let text = check.text.as_deref().unwrap_or_default();
    assert!(
        text.contains("# terraform_data.web will be created") && text.contains("\"v2\""),
        "{text}"
    );
    let st = s.host.0.lock().unwrap();
    let bodies: Vec<&String> = st.comments.values().filter_map(|c| c.last()).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("# terraform_data.web will be created")),
        "the comment holds the diff: {bodies:?}"
    );
}

/// Pull request `number` on [`NEXT`] touching `acme/api/dev`, its plan claimed by
/// dispatch (state `dispatching`); returns the plan's id.
async fn setup_claimed(s: &Setup, number: u64) -> String {
    s.host
        .open_pull(number, "octocat", false, &["api/dev/main.tf"]);
    s.host
        .0
        .lock()
        .unwrap()
        .pulls
        .get_mut(&number)
        .unwrap()
        .head_sha = NEXT.into();
    s.prs
        .handle(&PullWork::PullRequest {
            org: "acme".into(),
            provider: VcsProvider::Github,
            repository: REPO.into(),
            number,
            action: PullAction::Opened,
            head_sha: NEXT.into(),
            merged: false,
        })
        .await
        .unwrap();
    let plan = record(s, number).await.environments["acme/api/dev"]
        .plan_job
        .clone()
        .unwrap();
    s.w.store
        .transition_job(
            &JobId::from(plan.clone()),
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed by dispatch",
            Default::default(),
        )
        .await
        .unwrap();
    plan
}

/// Pull request 7 on [`HEAD`] touching `acme/web/dev` (`before_merge`, one approval
/// required), planned, approved by a reviewer and applied with `/sortie apply`; the apply's
/// plan phase then ends well. Returns the apply job's record: approved by the policy gate
/// (no set in force) and waiting for the requirements to be checked again.
async fn applied_and_approved(s: &Setup) -> sortie_store::JobRecord {
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    before_merge(s, "acme/web/dev", 1).await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.prs.handle(&opened(7)).await.unwrap();
    let plan = record(s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    succeed(s, &plan).await;
    s.host.0.lock().unwrap().reviews = vec![approval("reviewer", HEAD, 3)];
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let id = JobId::from(
        record(s, 7).await.environments["acme/web/dev"]
            .apply_job
            .clone()
            .expect("the apply is submitted"),
    );
    let submitted = s.w.store.get_job(&id).await.unwrap();
    assert!(
        submitted.job.review.is_some(),
        "a pull request's apply runs in two phases, with no policy set or approval setting"
    );
    walk(
        &s.w,
        &id,
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
        ],
    )
    .await;
    let running = s.w.store.get_job(&id).await.unwrap();
    let sent = s.w.sent().len();
    s.prs
        .jobs
        .end(
            &running,
            crate::end::EndCause::Decided {
                from: JobState::Running,
                outcome: sortie_core::Outcome {
                    state: JobState::Succeeded,
                    reason: "the runner exited with code 0".into(),
                },
            },
        )
        .await
        .unwrap();
    let approved = s.w.store.get_job(&id).await.unwrap();
    assert_eq!(
        approved.job.state,
        JobState::AwaitingApproval,
        "{:?}",
        approved.job.transitions
    );
    assert!(approved.job.approved_awaiting_pull_request());
    assert_eq!(
        s.w.sent().len(),
        sent,
        "its apply phase is not sent before the requirements are checked again"
    );
    approved
}

fn report_work(number: u64) -> PullWork {
    PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number,
    }
}

#[tokio::test]
async fn an_approved_apply_waits_for_a_running_required_check_and_starts_once_it_is_green() {
    let s = setup().await;
    s.host.0.lock().unwrap().required_checks = vec!["ci/test".into()];
    s.host.0.lock().unwrap().head_checks = vec![sortie_core::vcs::requirements::CheckResult {
        name: "ci/test".into(),
        passed: Some(true),
    }];
    let approved = applied_and_approved(&s).await;
    let id = approved.job.id.clone();

    // Right before the apply phase a required check runs again (a re-run): it waits.
    s.host.0.lock().unwrap().head_checks[0].passed = None;
    let sent = s.w.sent().len();
    let e = s.prs.handle(&report_work(7)).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("ci/test"), "{e}");
    let waiting = s.w.store.get_job(&id).await.unwrap();
    assert!(waiting.job.approved_awaiting_pull_request());
    assert_eq!(s.w.sent().len(), sent);

    // Green again: the apply phase starts, once.
    s.host.0.lock().unwrap().head_checks[0].passed = Some(true);
    s.prs.handle(&report_work(7)).await.unwrap();
    let started = s.w.store.get_job(&id).await.unwrap();
    assert_eq!(started.job.state, JobState::Queued);
    assert_eq!(
        started.job.review.as_ref().unwrap().phase,
        sortie_core::JobPhase::Apply
    );
    assert!(
        started.job.reason().contains("checked again"),
        "{}",
        started.job.reason()
    );
    assert_eq!(s.w.sent().len(), sent + 1);
    s.prs.handle(&report_work(7)).await.unwrap();
    assert_eq!(s.w.sent().len(), sent + 1, "started once");
}

#[tokio::test]
async fn an_approved_apply_is_discarded_when_the_head_moves_before_its_apply_phase() {
    let s = setup().await;
    let approved = applied_and_approved(&s).await;
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().head_sha = NEXT.into();
    let sent = s.w.sent().len();
    let replies = s.host.0.lock().unwrap().replies.len();
    s.prs.handle(&report_work(7)).await.unwrap();
    let ended = s.w.store.get_job(&approved.job.id).await.unwrap();
    assert_eq!(ended.job.state, JobState::Discarded);
    assert!(
        ended.job.reason().contains("no longer hold") && ended.job.reason().contains(&NEXT[..7]),
        "{}",
        ended.job.reason()
    );
    assert_eq!(s.w.sent().len(), sent, "nothing applied");
    let st = s.host.0.lock().unwrap();
    assert_eq!(st.replies.len(), replies + 1);
    assert!(
        st.replies.last().unwrap().starts_with("Not applied"),
        "{:?}",
        st.replies
    );
}

#[tokio::test]
async fn a_persons_approval_of_a_pull_requests_apply_is_recorded_and_a_second_is_refused() {
    let s = setup().await;
    // The environment asks for a person's approval too.
    let env = sortie_core::EnvPath::parse("acme/web/dev").unwrap();
    let input =
        EnvironmentInput::from_value(&serde_json::json!({"approval": "required"}), false).unwrap();
    environments(&s.w).update(&env, input, None).await.unwrap();
    let issuer = issuer_of(&s.connection);
    grant(&s.w, "octocat", Some(&issuer), "acme", Role::Deployer).await;
    before_merge(&s, "acme/web/dev", 1).await;
    s.host.open_pull(7, "octocat", false, &["web/dev/main.tf"]);
    s.host.0.lock().unwrap().reviews = vec![approval("reviewer", HEAD, 3)];
    s.prs.handle(&opened(7)).await.unwrap();
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    succeed(&s, &plan).await;
    s.prs.handle(&apply(7, "octocat")).await.unwrap();
    let id = JobId::from(
        record(&s, 7).await.environments["acme/web/dev"]
            .apply_job
            .clone()
            .unwrap(),
    );
    walk(
        &s.w,
        &id,
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
            (JobState::Running, JobState::AwaitingApproval),
        ],
    )
    .await;
    let awaiting = s.w.store.get_job(&id).await.unwrap();
    let sent = s.w.sent().len();
    let approved = s
        .prs
        .jobs
        .review(
            &awaiting,
            "alice",
            ReviewVerdict::Approved,
            None,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(approved.job.state, JobState::AwaitingApproval);
    assert!(approved.job.approved_awaiting_pull_request());
    assert_eq!(s.w.sent().len(), sent, "not started by the approval itself");
    assert_eq!(
        s.prs
            .jobs
            .review(&approved, "bob", ReviewVerdict::Approved, None, Utc::now())
            .await
            .unwrap()
            .unwrap_err(),
        sortie_core::ReviewRefusal::AlreadyApproved
    );
    // The requirements hold: the report starts it, naming who approved.
    s.prs.handle(&report_work(7)).await.unwrap();
    let started = s.w.store.get_job(&id).await.unwrap();
    assert_eq!(started.job.state, JobState::Queued);
    assert!(
        started.job.reason().contains("approved by alice"),
        "{}",
        started.job.reason()
    );
}

#[tokio::test]
async fn a_report_revokes_the_source_tokens_of_ended_jobs_only_each_on_its_own() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    let held = |token_id, job: &str| HeldSource {
        token_id,
        job: job.to_string(),
    };
    // The spec fetched twice (two tokens), and a token of a job this deployment never ran.
    s.host.0.lock().unwrap().sources = vec![
        held(11, &plan),
        held(12, &plan),
        held(13, "01unknownjobofanotherdeploy"),
    ];
    let report = PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
    };
    let id = JobId::from(plan.clone());
    walk(
        &s.w,
        &id,
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
        ],
    )
    .await;
    s.prs.handle(&report).await.unwrap();
    assert!(
        s.host.0.lock().unwrap().revoked_sources.is_empty(),
        "a running job keeps its token"
    );

    walk(&s.w, &id, &[(JobState::Running, JobState::Succeeded)]).await;
    s.host.0.lock().unwrap().refuse_revoke = Some(11);
    s.prs.handle(&report).await.unwrap();
    assert_eq!(
        s.host.0.lock().unwrap().revoked_sources,
        [12],
        "one refusal does not stop the others, nor the report"
    );
    assert_eq!(
        s.host.checks_on(HEAD)["sortie: acme/web/dev"].status,
        CheckStatus::Completed
    );

    s.host.0.lock().unwrap().refuse_revoke = None;
    s.prs.handle(&report).await.unwrap();
    assert_eq!(s.host.0.lock().unwrap().revoked_sources, [12, 11]);
    s.prs.handle(&report).await.unwrap();
    assert_eq!(
        s.host.0.lock().unwrap().revoked_sources,
        [12, 11],
        "a revoked token is not listed again; the unknown job's is left to expire"
    );
}

#[tokio::test]
async fn a_retargeted_pull_request_is_planned_for_its_new_base_only() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    assert!(record(&s, 7)
        .await
        .environments
        .contains_key("acme/web/dev"));

    // Moved onto `release`, where no environment is bound: the report drops it; the same
    // head is not planned again for `main`.
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().base = "release".into();
    let retargeted = PullWork::PullRequest {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
        action: PullAction::Synchronize,
        head_sha: HEAD.into(),
        merged: false,
    };
    s.prs.handle(&retargeted).await.unwrap();
    let moved = record(&s, 7).await;
    assert_eq!(moved.base, "release");
    assert!(moved.environments.is_empty(), "{:?}", moved.environments);

    // And back onto `main`: planned there again.
    s.host.0.lock().unwrap().pulls.get_mut(&7).unwrap().base = "main".into();
    s.prs.handle(&retargeted).await.unwrap();
    assert!(record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .is_some());
}

#[tokio::test]
async fn the_revocations_of_a_report_are_bounded_and_tokens_passed_over_do_not_starve_them() {
    let s = setup().await;
    deployer_opens(&s, 7).await;
    let plan = record(&s, 7).await.environments["acme/web/dev"]
        .plan_job
        .clone()
        .unwrap();
    walk(
        &s.w,
        &JobId::from(plan.clone()),
        &[
            (JobState::Queued, JobState::Dispatching),
            (JobState::Dispatching, JobState::Running),
            (JobState::Running, JobState::Succeeded),
        ],
    )
    .await;
    // 60 tokens of jobs this deployment does not know come first (passed over), then 55
    // of the ended plan's (its spec fetched again and again).
    let mut sources: Vec<HeldSource> = (0..60)
        .map(|n| HeldSource {
            token_id: 1000 + n,
            job: format!("01unknown{n}"),
        })
        .collect();
    sources.extend((0..55).map(|n| HeldSource {
        token_id: n,
        job: plan.clone(),
    }));
    s.host.0.lock().unwrap().sources = sources;
    let report = PullWork::Report {
        org: "acme".into(),
        provider: VcsProvider::Github,
        repository: REPO.into(),
        number: 7,
    };
    s.prs.handle(&report).await.unwrap();
    let revoked = s.host.0.lock().unwrap().revoked_sources.clone();
    assert_eq!(
        revoked,
        (0..50).collect::<Vec<u64>>(),
        "at most 50 a report"
    );
    s.prs.handle(&report).await.unwrap();
    let revoked = s.host.0.lock().unwrap().revoked_sources.clone();
    assert_eq!(
        revoked,
        (0..55).collect::<Vec<u64>>(),
        "the next report takes the rest"
    );
}
