//! Everything the double holds: repositories, their commits, pull requests, check runs
//! and comments, installations, tokens, faults and rate-limit buckets.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::{CheckRunRecord, CommentRecord, PullSpec, RequestRecord, TokenKind};

/// The double's notion of an installation token's or a JWT's rate-limit bucket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    pub(crate) remaining: u64,
    pub(crate) reset: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Review {
    pub(crate) id: u64,
    pub(crate) user: String,
    pub(crate) state: String,
    pub(crate) commit_id: String,
}

#[derive(Debug, Clone)]
pub(crate) struct PullState {
    pub(crate) id: u64,
    pub(crate) number: u64,
    pub(crate) spec: PullSpec,
    pub(crate) base_sha: String,
    pub(crate) state: String,
    pub(crate) merged: bool,
    pub(crate) merge_commit_sha: Option<String>,
    pub(crate) reviews: Vec<Review>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Repo {
    pub(crate) id: u64,
    pub(crate) owner: String,
    pub(crate) name: String,
    pub(crate) installation: Option<u64>,
    pub(crate) commits: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub(crate) branches: BTreeMap<String, String>,
    pub(crate) pulls: BTreeMap<u64, PullState>,
    pub(crate) protection: BTreeMap<String, Vec<String>>,
    pub(crate) rulesets: BTreeMap<String, Vec<String>>,
    pub(crate) statuses: BTreeMap<String, Vec<(String, String)>>,
    pub(crate) check_runs: Vec<CheckRunRecord>,
    pub(crate) comments: Vec<CommentRecord>,
}

impl Repo {
    pub(crate) fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// Whether `sha` names a commit the repository has (its commits, branch heads and the
    /// heads of its pull requests).
    pub(crate) fn has_commit(&self, sha: &str) -> bool {
        self.commits.contains_key(sha)
            || self.branches.values().any(|s| s == sha)
            || self
                .pulls
                .values()
                .any(|p| p.spec.head_sha == sha || p.base_sha == sha)
    }

    /// A branch's head or a commit, for a ref.
    pub(crate) fn resolve(&self, reference: &str) -> Option<String> {
        if let Some(sha) = self.branches.get(reference) {
            return Some(sha.clone());
        }
        let reference = reference.strip_prefix("refs/heads/").unwrap_or(reference);
        if let Some(sha) = self.branches.get(reference) {
            return Some(sha.clone());
        }
        self.has_commit(reference).then(|| reference.to_string())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Installation {
    pub(crate) account: String,
    pub(crate) permissions: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) kind: TokenKind,
    /// Lower-case `owner/name` of each repository it may touch.
    pub(crate) repositories: Vec<String>,
    pub(crate) permissions: BTreeMap<String, String>,
    pub(crate) expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub(crate) struct Download {
    pub(crate) repo: String,
    pub(crate) sha: String,
    pub(crate) expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    pub(crate) next: u32,
    pub(crate) next_status: u16,
    pub(crate) until: Option<(std::time::Instant, u16)>,
    pub(crate) always: Option<u16>,
    pub(crate) secondary: u32,
    pub(crate) secondary_retry_after: u64,
}

/// Everything the double holds.
pub(crate) struct World {
    pub(crate) base_url: String,
    pub(crate) app_id: u64,
    pub(crate) app_slug: String,
    pub(crate) public_key: Vec<u8>,
    pub(crate) clock_offset: chrono::Duration,
    pub(crate) next_id: u64,
    pub(crate) repos: BTreeMap<String, Repo>,
    pub(crate) installations: BTreeMap<u64, Installation>,
    pub(crate) tokens: HashMap<String, Grant>,
    pub(crate) downloads: HashMap<String, Download>,
    pub(crate) requests: Vec<RequestRecord>,
    pub(crate) faults: Faults,
    pub(crate) buckets: HashMap<String, Bucket>,
    pub(crate) rate_limit: u64,
}

impl World {
    pub(crate) fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock_offset
    }

    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn repo_mut(&mut self, full_name: &str) -> &mut Repo {
        let key = full_name.to_ascii_lowercase();
        if !self.repos.contains_key(&key) {
            let id = self.id();
            let (owner, name) = full_name
                .split_once('/')
                .unwrap_or_else(|| panic!("a repository is owner/name, not {full_name:?}"));
            self.repos.insert(
                key.clone(),
                Repo {
                    id,
                    owner: owner.to_string(),
                    name: name.to_string(),
                    ..Repo::default()
                },
            );
        }
        self.repos.get_mut(&key).expect("just inserted")
    }

    pub(crate) fn new_token(&mut self, prefix: &str) -> String {
        let mut bytes = [0u8; 20];
        getrandom::fill(&mut bytes).expect("the OS random source");
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("{prefix}_{hex}")
    }
}
