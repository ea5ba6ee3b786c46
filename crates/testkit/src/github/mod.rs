//! A strict GitHub double: the REST endpoints Sortie's GitHub App calls, served on
//! 127.0.0.1, enforcing what GitHub documents (each rule cites its page in
//! [`rules`]), and a webhook sender that signs as GitHub does.
//!
//! It is written from GitHub's documentation, not from `sortie-github`: the client is
//! tested against it. What it enforces, with the pages, is listed in docs/TESTING.md
//! ("GitHub double").
//!
//! ```ignore
//! let github = GithubDouble::start().await;
//! github.install("acme/infra");
//! let number = github.add_pull("acme/infra", PullSpec::new("alice", "abc123").file(FileChange::modified("main.tf")));
//! // ... drive the code under test at github.url() with github.app_id() and github.app_private_key_pem()
//! assert_eq!(github.check_runs("acme/infra").len(), 1);
//! ```

mod records;
pub mod rules;
mod server;
pub mod webhook;
mod world;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use base64::Engine;

pub use records::{CheckRunRecord, CommentRecord, FileChange, PullSpec, RequestRecord, TokenKind};
pub use webhook::{send_webhook, WebhookPayloads};
pub(crate) use world::{
    Bucket, Download, Faults, Grant, Installation, PullState, Repo, Review, World,
};

/// The permissions an installation is granted when [`GithubDouble::install`] makes it:
/// everything Sortie's app asks for.
pub const DEFAULT_INSTALLATION_PERMISSIONS: &[(&str, &str)] = &[
    ("metadata", "read"),
    ("contents", "read"),
    ("pull_requests", "write"),
    ("issues", "write"),
    ("checks", "write"),
    ("statuses", "read"),
    ("administration", "read"),
];

/// The most requests [`GithubDouble::requests`] keeps; older ones are dropped.
pub const MAX_RECORDED_REQUESTS: usize = 100_000;
/// The most earlier bodies a check run's or a comment's history keeps; older ones are
/// dropped.
pub const MAX_HISTORY: usize = 1_000;

/// Appends `item` to `list`, dropping the oldest entries past `bound`.
pub(crate) fn push_bounded<T>(list: &mut Vec<T>, item: T, bound: usize) {
    list.push(item);
    if list.len() > bound {
        let excess = list.len() - bound;
        list.drain(..excess);
    }
}

/// The app's RSA key pair, made once per test process (2048-bit RSA, as GitHub's).
struct AppKeys {
    #[cfg_attr(not(test), allow(dead_code))]
    pkcs1_der: Vec<u8>,
    pkcs1_pem: String,
    pkcs8_pem: String,
    public_raw: Vec<u8>,
}

fn app_keys() -> &'static AppKeys {
    static KEYS: OnceLock<AppKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        // A test-only key, generated here; never a real app's.
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256)
            .expect("RSA key generation (rcgen on aws-lc-rs)");
        let pkcs8 = key.serialize_der();
        // A 2048-bit RSA PrivateKeyInfo is a fixed 26-byte prefix (SEQUENCE, version 0,
        // the rsaEncryption AlgorithmIdentifier, the OCTET STRING's header) before the
        // PKCS#1 RSAPrivateKey that GitHub hands out as "RSA PRIVATE KEY".
        const VERSION_AND_ALGORITHM: [u8; 18] = [
            0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01,
            0x01, 0x01, 0x05, 0x00,
        ];
        assert!(
            pkcs8.len() > 26
                && pkcs8[..2] == [0x30, 0x82]
                && pkcs8[4..22] == VERSION_AND_ALGORITHM
                && pkcs8[22..24] == [0x04, 0x82],
            "an unexpected PKCS#8 layout from rcgen"
        );
        let pkcs1 = pkcs8[26..].to_vec();
        AppKeys {
            pkcs1_pem: pem("RSA PRIVATE KEY", &pkcs1),
            pkcs1_der: pkcs1,
            pkcs8_pem: key.serialize_pem(),
            public_raw: key.public_key_raw().to_vec(),
        }
    })
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

pub(crate) type Shared = Arc<Mutex<World>>;

/// The GitHub double: a server on 127.0.0.1 and the state tests set and read.
pub struct GithubDouble {
    url: String,
    world: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for GithubDouble {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl GithubDouble {
    /// Starts a double on a random 127.0.0.1 port, with one app registered (id 4242, slug
    /// `sortie-test`) and nothing installed.
    pub async fn start() -> Self {
        let keys = app_keys();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("the listener's address")
        );
        let world = Arc::new(Mutex::new(World {
            base_url: url.clone(),
            app_id: 4242,
            app_slug: "sortie-test".into(),
            public_key: keys.public_raw.clone(),
            clock_offset: chrono::Duration::zero(),
            next_id: 1000,
            repos: BTreeMap::new(),
            installations: BTreeMap::new(),
            tokens: HashMap::new(),
            downloads: HashMap::new(),
            requests: Vec::new(),
            faults: Faults::default(),
            buckets: HashMap::new(),
            rate_limit: rules::RATE_LIMIT_PER_HOUR,
        }));
        let router = server::router(world.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, world, server }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `http://127.0.0.1:<port>`: the API's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The registered app's id.
    pub fn app_id(&self) -> u64 {
        self.world().app_id
    }

    /// The app's private key as GitHub hands it out: PEM, PKCS#1 (`RSA PRIVATE KEY`). A
    /// test key made for this process.
    pub fn app_private_key_pem(&self) -> String {
        app_keys().pkcs1_pem.clone()
    }

    /// The same key as PKCS#8 (`PRIVATE KEY`), as `openssl pkcs8 -topk8` converts it.
    pub fn app_private_key_pkcs8_pem(&self) -> String {
        app_keys().pkcs8_pem.clone()
    }

    /// The login the app's comments carry: `<slug>[bot]`.
    pub fn app_bot_login(&self) -> String {
        format!("{}[bot]", self.world().app_slug)
    }

    /// Installs the app on `repo` (`owner/name`, created if new) with
    /// [`DEFAULT_INSTALLATION_PERMISSIONS`]: one installation per owner, shared by its
    /// repositories. Returns the installation's id.
    pub fn install(&self, repo: &str) -> u64 {
        self.install_with(repo, DEFAULT_INSTALLATION_PERMISSIONS)
    }

    /// [`GithubDouble::install`] with the owner's installation granted `permissions`
    /// (`(name, "read" | "write")`) instead.
    pub fn install_with(&self, repo: &str, permissions: &[(&str, &str)]) -> u64 {
        let mut world = self.world();
        let owner = repo
            .split_once('/')
            .map(|(o, _)| o)
            .unwrap_or(repo)
            .to_string();
        let existing = world
            .installations
            .iter()
            .find(|(_, i)| i.account.eq_ignore_ascii_case(&owner))
            .map(|(id, _)| *id);
        let id = match existing {
            Some(id) => id,
            None => world.id(),
        };
        world.installations.insert(
            id,
            Installation {
                account: owner,
                permissions: permissions
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
        );
        world.repo_mut(repo).installation = Some(id);
        id
    }

    /// Removes the app from `repo` (its installation no longer covers it).
    pub fn uninstall(&self, repo: &str) {
        self.world().repo_mut(repo).installation = None;
    }

    /// A personal token of user `login` with write access to `repos`: for proving what
    /// only an app's installation token may do.
    pub fn user_token(&self, login: &str, repos: &[&str]) -> String {
        let mut world = self.world();
        let token = world.new_token("ghp");
        let expires_at = world.now() + chrono::Duration::days(365);
        world.tokens.insert(
            token.clone(),
            Grant {
                kind: TokenKind::User(login.to_string()),
                repositories: repos.iter().map(|r| r.to_ascii_lowercase()).collect(),
                permissions: DEFAULT_INSTALLATION_PERMISSIONS
                    .iter()
                    .map(|(k, _)| (k.to_string(), "write".to_string()))
                    .collect(),
                expires_at,
            },
        );
        token
    }

    /// Adds commit `sha` of `repo` with `files` (path, contents): what its tarball holds.
    pub fn add_commit(&self, repo: &str, sha: &str, files: &[(&str, &[u8])]) {
        self.world().repo_mut(repo).commits.insert(
            sha.to_string(),
            files
                .iter()
                .map(|(p, c)| (p.to_string(), c.to_vec()))
                .collect(),
        );
    }

    /// Points `branch` of `repo` at `sha`.
    pub fn set_branch(&self, repo: &str, branch: &str, sha: &str) {
        self.world()
            .repo_mut(repo)
            .branches
            .insert(branch.to_string(), sha.to_string());
    }

    /// Opens a pull request on `repo`; its number (1, 2, ...).
    pub fn add_pull(&self, repo: &str, spec: PullSpec) -> u64 {
        let mut world = self.world();
        let id = world.id();
        let repo = world.repo_mut(repo);
        let number = repo.pulls.keys().max().copied().unwrap_or(0) + 1;
        let base_sha = repo
            .branches
            .get(&spec.base_ref)
            .cloned()
            .unwrap_or_else(|| format!("{:0>40}", "ba5e"));
        repo.pulls.insert(
            number,
            PullState {
                id,
                number,
                spec,
                base_sha,
                state: "open".into(),
                merged: false,
                merge_commit_sha: None,
                reviews: Vec::new(),
            },
        );
        number
    }

    fn pull_mut<T>(&self, repo: &str, number: u64, f: impl FnOnce(&mut PullState) -> T) -> T {
        let mut world = self.world();
        let pull = world
            .repo_mut(repo)
            .pulls
            .get_mut(&number)
            .unwrap_or_else(|| panic!("no pull request {repo}#{number} in the double"));
        f(pull)
    }

    /// Pushes `sha` to pull request `number`'s head (a `synchronize`), optionally with a
    /// new list of changed files.
    pub fn push(&self, repo: &str, number: u64, sha: &str, files: Option<Vec<FileChange>>) {
        self.pull_mut(repo, number, |pull| {
            pull.spec.head_sha = sha.to_string();
            if let Some(files) = files {
                pull.spec.files = files;
            }
        });
    }

    /// Closes pull request `number`, merged (with `merge_sha`) or not.
    pub fn close_pull(&self, repo: &str, number: u64, merge_sha: Option<&str>) {
        self.pull_mut(repo, number, |pull| {
            pull.state = "closed".into();
            pull.merged = merge_sha.is_some();
            pull.merge_commit_sha = merge_sha.map(str::to_string);
        });
    }

    /// Sets pull request `number`'s mergeability.
    pub fn set_mergeable(&self, repo: &str, number: u64, mergeable: Option<bool>) {
        self.pull_mut(repo, number, |pull| pull.spec.mergeable = mergeable);
    }

    /// `user` reviews pull request `number` on `commit_id` (`APPROVED`,
    /// `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`); the review's id.
    pub fn add_review(
        &self,
        repo: &str,
        number: u64,
        user: &str,
        state: &str,
        commit_id: &str,
    ) -> u64 {
        let id = self.world().id();
        self.pull_mut(repo, number, |pull| {
            pull.reviews.push(Review {
                id,
                user: user.to_string(),
                state: state.to_string(),
                commit_id: commit_id.to_string(),
            })
        });
        id
    }

    /// Protects `branch` with these required status check contexts.
    pub fn set_required_checks(&self, repo: &str, branch: &str, contexts: &[&str]) {
        self.world().repo_mut(repo).protection.insert(
            branch.to_string(),
            contexts.iter().map(|c| c.to_string()).collect(),
        );
    }

    /// Adds a ruleset on `branch` whose `required_status_checks` rule names `contexts`.
    pub fn add_ruleset_checks(&self, repo: &str, branch: &str, contexts: &[&str]) {
        self.world()
            .repo_mut(repo)
            .rulesets
            .entry(branch.to_string())
            .or_default()
            .extend(contexts.iter().map(|c| c.to_string()));
    }

    /// Sets commit status `context` of `sha` to `state` (`success`, `failure`, `error`,
    /// `pending`).
    pub fn set_status(&self, repo: &str, sha: &str, context: &str, state: &str) {
        let mut world = self.world();
        let statuses = world
            .repo_mut(repo)
            .statuses
            .entry(sha.to_string())
            .or_default();
        statuses.retain(|(c, _)| c != context);
        statuses.push((context.to_string(), state.to_string()));
    }

    /// `repo`'s check runs, oldest first, each with its history of bodies.
    pub fn check_runs(&self, repo: &str) -> Vec<CheckRunRecord> {
        self.world().repo_mut(repo).check_runs.clone()
    }

    /// The comments on `repo`'s pull request (or issue) `number`, oldest first.
    pub fn comments(&self, repo: &str, number: u64) -> Vec<CommentRecord> {
        self.world()
            .repo_mut(repo)
            .comments
            .iter()
            .filter(|c| c.issue_number == number)
            .cloned()
            .collect()
    }

    /// Adds a comment by user `login` on `number` (a person writing in the pull request);
    /// its id.
    pub fn add_user_comment(&self, repo: &str, number: u64, login: &str, body: &str) -> u64 {
        let mut world = self.world();
        let id = world.id();
        world.repo_mut(repo).comments.push(CommentRecord {
            id,
            issue_number: number,
            body: body.to_string(),
            author: login.to_string(),
            author_type: "User".into(),
            history: Vec::new(),
        });
        id
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.world().requests.clone()
    }

    /// How many installation tokens the app has minted.
    pub fn tokens_minted(&self) -> usize {
        self.world()
            .tokens
            .values()
            .filter(|g| matches!(g.kind, TokenKind::Installation(_)))
            .count()
    }

    /// The next `n` requests answer `status` (a 5xx).
    pub fn fail_next(&self, n: u32, status: u16) {
        let mut world = self.world();
        world.faults.next = n;
        world.faults.next_status = status;
    }

    /// Every request answers `status` for `how_long` from now.
    pub fn fail_for(&self, how_long: Duration, status: u16) {
        self.world().faults.until = Some((std::time::Instant::now() + how_long, status));
    }

    /// Every request answers `status` until [`GithubDouble::clear_faults`].
    pub fn fail_until_cleared(&self, status: u16) {
        self.world().faults.always = Some(status);
    }

    /// The next `n` requests hit a secondary rate limit: 403 with `retry-after:
    /// retry_after_secs`.
    pub fn secondary_rate_limit(&self, n: u32, retry_after_secs: u64) {
        let mut world = self.world();
        world.faults.secondary = n;
        world.faults.secondary_retry_after = retry_after_secs;
    }

    /// Spends every credential's primary rate limit, to reset in `reset_in`.
    pub fn exhaust_rate_limit(&self, reset_in: Duration) {
        let mut world = self.world();
        let reset = world.now().timestamp() + reset_in.as_secs() as i64;
        world.rate_limit = 0;
        for bucket in world.buckets.values_mut() {
            bucket.remaining = 0;
            bucket.reset = reset;
        }
        world.buckets.insert(
            "*".into(),
            Bucket {
                remaining: 0,
                reset,
            },
        );
    }

    /// Ends every injected fault and restores the primary rate limit.
    pub fn clear_faults(&self) {
        let mut world = self.world();
        world.faults = Faults::default();
        world.rate_limit = rules::RATE_LIMIT_PER_HOUR;
        world.buckets.clear();
    }

    /// Expires every installation token issued so far (as an hour passing would).
    pub fn expire_tokens(&self) {
        let mut world = self.world();
        let past = world.now() - chrono::Duration::seconds(1);
        for grant in world.tokens.values_mut() {
            if matches!(grant.kind, TokenKind::Installation(_)) {
                grant.expires_at = past;
            }
        }
    }

    /// Moves the double's clock by `by` (tokens, JWTs and downloads are judged by it).
    pub fn advance_clock(&self, by: Duration) {
        self.world().clock_offset += chrono::Duration::from_std(by).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests;
