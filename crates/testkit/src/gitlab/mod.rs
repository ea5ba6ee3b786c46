//! A strict GitLab double: the REST v4 endpoints Sortie's GitLab client calls, served on
//! 127.0.0.1, enforcing what GitLab documents (each rule cites its page in [`rules`]), and a
//! webhook sender that delivers as GitLab does.
//!
//! It is written from GitLab's documentation, not from `sortie-gitlab`: the client is tested
//! against it. What it enforces, with the pages, is listed in docs/TESTING.md ("GitLab
//! double").
//!
//! ```ignore
//! let gitlab = GitlabDouble::start().await;
//! gitlab.add_project("acme/platform/infra");
//! let token = gitlab.issue_token("acme/platform/infra", "sortie", AccessLevel::Maintainer, &["api"]);
//! let iid = gitlab.add_merge_request(
//!     "acme/platform/infra",
//!     MergeRequestSpec::new("alice", "abc123").change(DiffChange::modified("main.tf")),
//! );
//! // ... drive the client at gitlab.url() (the API is under /api/v4) with `token`
//! assert_eq!(gitlab.statuses("acme/platform/infra", "abc123").len(), 1);
//! ```

mod merge_requests;
mod records;
pub mod rules;
mod server;
pub mod webhook;
mod world;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use records::{
    AccessLevel, AccessTokenRecord, ApprovalRecord, Caller, DiffChange, DownloadRecord,
    MergeRequestSpec, NoteRecord, RequestRecord, StatusRecord,
};
pub use webhook::{send_webhook, Delivery, Hook, WebhookPayloads};
pub(crate) use world::{MergeRequest, Project, Token, Version, World};

/// The most requests (and downloads) the double keeps; older ones are dropped.
pub const MAX_RECORDED_REQUESTS: usize = 100_000;
/// The most earlier bodies (or states) a note's (or status's) history keeps.
pub const MAX_HISTORY: usize = 1_000;

/// Appends `item` to `list`, dropping the oldest entries past `bound`.
pub(crate) fn push_bounded<T>(list: &mut Vec<T>, item: T, bound: usize) {
    list.push(item);
    if list.len() > bound {
        let excess = list.len() - bound;
        list.drain(..excess);
    }
}

pub(crate) type Shared = Arc<Mutex<World>>;

/// The GitLab double: a server on 127.0.0.1 and the state tests set and read.
pub struct GitlabDouble {
    url: String,
    world: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for GitlabDouble {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl GitlabDouble {
    /// Starts a double on a random 127.0.0.1 port, with no project.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("the listener's address")
        );
        let world = Arc::new(Mutex::new(World::new(url.clone())));
        let router = server::router(world.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, world, server }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with_project<T>(&self, path: &str, f: impl FnOnce(&mut Project) -> T) -> T {
        let mut world = self.world();
        let id = world
            .project_id(path)
            .unwrap_or_else(|| panic!("no project {path} in the double"));
        f(world.projects.get_mut(&id).expect("found"))
    }

    fn with_merge_request<T>(
        &self,
        project: &str,
        iid: u64,
        f: impl FnOnce(&mut MergeRequest, &world::Settings) -> T,
    ) -> T {
        self.with_project(project, |p| {
            let settings = p.settings.clone();
            let mr = p
                .merge_requests
                .get_mut(&iid)
                .unwrap_or_else(|| panic!("no merge request {project}!{iid} in the double"));
            f(mr, &settings)
        })
    }

    /// `http://127.0.0.1:<port>`: the instance's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `<url>/api/v4`: the REST API's root.
    pub fn api_url(&self) -> String {
        format!("{}/api/v4", self.url)
    }

    /// Adds the private project at full path `path` (nested groups allowed, e.g.
    /// `acme/platform/infra`), default branch `main`; its id. Adding it again returns the
    /// same id.
    pub fn add_project(&self, path: &str) -> u64 {
        self.world().project_mut(path).id
    }

    /// The id of the project at `path`.
    pub fn project_id(&self, path: &str) -> u64 {
        self.with_project(path, |p| p.id)
    }

    /// Sets the project's default branch.
    pub fn set_default_branch(&self, project: &str, branch: &str) {
        self.with_project(project, |p| p.default_branch = branch.to_string());
    }

    /// Makes `username` a member of `project` with role `level` (replacing any role).
    pub fn add_member(&self, project: &str, username: &str, level: AccessLevel) {
        let mut world = self.world();
        world.user_id(username);
        world
            .project_mut(project)
            .members
            .insert(username.to_string(), level);
    }

    /// A personal access token of `username` with `scopes`, expiring in a year: it sees the
    /// projects `username` is a member of.
    pub fn personal_token(&self, username: &str, scopes: &[&str]) -> String {
        let mut world = self.world();
        world.user_id(username);
        let token = world.new_token();
        let expires_at = (world.now() + chrono::Duration::days(365)).date_naive();
        world.tokens.insert(
            token.clone(),
            Token {
                username: username.to_string(),
                bot: false,
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
                expires_at: Some(expires_at),
                revoked: false,
            },
        );
        token
    }

    /// [`GitlabDouble::add_member`] then [`GitlabDouble::personal_token`]: a token of
    /// `username`, a member of `project` with role `level`, with `scopes`.
    pub fn issue_token(
        &self,
        project: &str,
        username: &str,
        level: AccessLevel,
        scopes: &[&str],
    ) -> String {
        self.add_member(project, username, level);
        self.personal_token(username, scopes)
    }

    /// Expires `token` (its expiry date becomes today: tokens expire at midnight UTC on it).
    pub fn expire_token(&self, token: &str) {
        let mut world = self.world();
        let today = world.now().date_naive();
        if let Some(t) = world.tokens.get_mut(token) {
            t.expires_at = Some(today);
        }
    }

    /// Revokes `token`.
    pub fn revoke_token(&self, token: &str) {
        if let Some(t) = self.world().tokens.get_mut(token) {
            t.revoked = true;
        }
    }

    /// Adds commit `sha` of `project` with `files` (path, contents): what its archive holds.
    pub fn add_commit(&self, project: &str, sha: &str, files: &[(&str, &[u8])]) {
        self.with_project(project, |p| {
            p.commits.insert(
                sha.to_string(),
                files
                    .iter()
                    .map(|(path, c)| (path.to_string(), c.to_vec()))
                    .collect(),
            );
        });
    }

    /// Points `branch` of `project` at `sha`. When it moves, every open merge request into
    /// it is one more commit behind (`diverged_commits_count`).
    pub fn set_branch(&self, project: &str, branch: &str, sha: &str) {
        self.with_project(project, |p| {
            let moved = p.branches.get(branch).is_some_and(|old| old != sha);
            p.branches.insert(branch.to_string(), sha.to_string());
            if moved {
                for mr in p.merge_requests.values_mut() {
                    if mr.state == "opened" && mr.spec.target_branch == branch {
                        mr.diverged_commits += 1;
                    }
                }
            }
        });
    }

    /// Sets the project's `reset_approvals_on_push` (on by default).
    pub fn set_reset_approvals_on_push(&self, project: &str, reset: bool) {
        self.with_project(project, |p| p.settings.reset_approvals_on_push = reset);
    }

    /// Sets how many approvals the project's merge requests need (0 by default).
    pub fn set_approvals_required(&self, project: &str, count: u32) {
        self.with_project(project, |p| p.settings.approvals_required = count);
    }

    /// Sets the project's "Pipelines must succeed" (off by default).
    pub fn set_pipeline_must_succeed(&self, project: &str, on: bool) {
        self.with_project(project, |p| p.settings.pipeline_must_succeed = on);
    }

    /// Sets the project's merge method: `merge` (the default), `rebase_merge` or `ff`.
    pub fn set_merge_method(&self, project: &str, method: &str) {
        self.with_project(project, |p| p.settings.merge_method = method.to_string());
    }

    /// Adds a finished (or pending) status `name` in `state` on `sha`, posted by `author`:
    /// another CI system's result.
    pub fn add_status(&self, project: &str, sha: &str, name: &str, state: &str, author: &str) {
        let mut world = self.world();
        world.user_id(author);
        let id = world.id();
        let id_project = world
            .project_id(project)
            .unwrap_or_else(|| panic!("no project {project} in the double"));
        let p = world.projects.get_mut(&id_project).expect("found");
        let git_ref = p.branch_containing(sha).unwrap_or_default();
        p.statuses.push(StatusRecord {
            id,
            sha: sha.to_string(),
            git_ref,
            name: name.to_string(),
            status: state.to_string(),
            description: None,
            target_url: None,
            author: author.to_string(),
            history: vec![state.to_string()],
        });
    }

    /// Every status posted on `sha` of `project`, oldest first, each with its states.
    pub fn statuses(&self, project: &str, sha: &str) -> Vec<StatusRecord> {
        self.with_project(project, |p| {
            p.statuses
                .iter()
                .filter(|s| s.sha == sha)
                .cloned()
                .collect()
        })
    }

    /// The project's access tokens, oldest first, revoked ones included.
    pub fn access_tokens(&self, project: &str) -> Vec<AccessTokenRecord> {
        self.with_project(project, |p| p.access_tokens.clone())
    }

    /// Mints a project access token on `project` as its owner would by hand (named `name`,
    /// with `scopes`, the Reporter role, a year's life); its value.
    pub fn add_access_token(&self, project: &str, name: &str, scopes: &[&str]) -> String {
        let mut world = self.world();
        let project_id = world
            .project_id(project)
            .unwrap_or_else(|| panic!("no project {project}"));
        let expires_at = world.now().date_naive() + chrono::Days::new(365);
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        server::tokens::mint(
            &mut world,
            project_id,
            name,
            &scopes,
            AccessLevel::Reporter,
            expires_at,
            "owner",
        )
        .token
    }

    /// Every archive served so far, in order.
    pub fn downloads(&self) -> Vec<DownloadRecord> {
        self.world().downloads.clone()
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.world().requests.clone()
    }

    /// The next `n` requests answer `status` (a 5xx).
    pub fn fail_next(&self, n: u32, status: u16) {
        let mut world = self.world();
        world.faults.next = n;
        world.faults.next_status = status;
    }

    /// Every request answers `status` until [`GitlabDouble::clear_faults`].
    pub fn fail_until_cleared(&self, status: u16) {
        self.world().faults.always = Some(status);
    }

    /// The next `n` requests are throttled: 429 with `Retry-After: retry_after_secs` and
    /// GitLab's `RateLimit-*` headers.
    pub fn throttle_next(&self, n: u32, retry_after_secs: u64) {
        let mut world = self.world();
        world.faults.throttled = n;
        world.faults.retry_after = retry_after_secs;
    }

    /// Ends every injected fault.
    pub fn clear_faults(&self) {
        self.world().faults = world::Faults::default();
    }

    /// Moves the double's clock by `by`: token expiry is judged by it, and diff versions
    /// and approvals are dated by it.
    pub fn advance_clock(&self, by: Duration) {
        self.world().clock_offset += chrono::Duration::from_std(by).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests;
