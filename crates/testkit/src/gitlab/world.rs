//! Everything the GitLab double holds: users, projects and their members, commits, branches,
//! merge requests, statuses, notes and tokens, and the faults to inject.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};

use super::records::{
    AccessLevel, AccessTokenRecord, ApprovalRecord, Caller, DownloadRecord, MergeRequestSpec,
    NoteRecord, RequestRecord, StatusRecord,
};

/// A project's settings that change what the API answers.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) reset_approvals_on_push: bool,
    pub(crate) approvals_required: u32,
    pub(crate) pipeline_must_succeed: bool,
    pub(crate) merge_method: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            // "By default, adding a new commit to a merge request resets any existing
            // approvals" (rules::APPROVALS_PAGE).
            reset_approvals_on_push: true,
            approvals_required: 0,
            pipeline_must_succeed: false,
            merge_method: "merge".into(),
        }
    }
}

/// One diff version of a merge request: GitLab makes one when the merge request is opened
/// and one each time its source branch moves (rules::VERSIONS_PAGE).
#[derive(Debug, Clone)]
pub(crate) struct Version {
    pub(crate) id: u64,
    pub(crate) head_sha: String,
    /// The merge base of source and target (no commit graph here: the target's head when
    /// the merge request was opened).
    pub(crate) base_sha: String,
    /// The target branch's head when the version was made.
    pub(crate) start_sha: String,
    pub(crate) created_at: DateTime<Utc>,
    /// How many files it changes.
    pub(crate) real_size: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct MergeRequest {
    pub(crate) id: u64,
    pub(crate) iid: u64,
    pub(crate) spec: MergeRequestSpec,
    pub(crate) source_project_id: u64,
    /// `opened`, `closed`, `merged` or `locked`.
    pub(crate) state: String,
    /// Its diff versions, oldest first (never empty): the last is its head now.
    pub(crate) versions: Vec<Version>,
    pub(crate) approvals: Vec<ApprovalRecord>,
    pub(crate) merge_commit_sha: Option<String>,
    pub(crate) diverged_commits: u32,
    pub(crate) checking: bool,
    pub(crate) discussions_resolved: bool,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

impl MergeRequest {
    fn latest(&self) -> Option<&Version> {
        self.versions.last()
    }

    pub(crate) fn head(&self) -> &str {
        self.latest().map_or("", |v| v.head_sha.as_str())
    }

    pub(crate) fn base_sha(&self) -> &str {
        self.latest().map_or("", |v| v.base_sha.as_str())
    }

    pub(crate) fn start_sha(&self) -> &str {
        self.latest().map_or("", |v| v.start_sha.as_str())
    }

    /// Every head it had, oldest first.
    pub(crate) fn heads(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.versions.iter().map(|v| v.head_sha.as_str())
    }

    /// `merge_status` (deprecated but still sent): `checking`, `cannot_be_merged` or
    /// `can_be_merged`.
    pub(crate) fn merge_status(&self) -> &'static str {
        if self.checking {
            "checking"
        } else if self.spec.conflicts {
            "cannot_be_merged"
        } else {
            "can_be_merged"
        }
    }

    pub(crate) fn approvals_left(&self, project: &Project) -> u32 {
        project
            .settings
            .approvals_required
            .saturating_sub(self.approvals.len() as u32)
    }

    /// The first mergeability check that fails, as `detailed_merge_status` names it
    /// (rules::MERGE_REQUESTS_PAGE).
    pub(crate) fn detailed_merge_status(&self, project: &Project) -> &'static str {
        if self.state != "opened" {
            return "not_open";
        }
        if self.checking {
            return "checking";
        }
        if self.spec.draft {
            return "draft_status";
        }
        if self.spec.conflicts {
            return "conflict";
        }
        if !self.discussions_resolved {
            return "discussions_not_resolved";
        }
        if project.settings.pipeline_must_succeed {
            let latest = project.latest_statuses(self.head());
            if latest
                .iter()
                .any(|s| s.status == "pending" || s.status == "running")
            {
                return "ci_still_running";
            }
            if latest.is_empty() || latest.iter().any(|s| s.status != "success") {
                return "ci_must_pass";
            }
        }
        if self.approvals_left(project) > 0 {
            return "not_approved";
        }
        if project.settings.merge_method != "merge" && self.diverged_commits > 0 {
            return "need_rebase";
        }
        "mergeable"
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Project {
    pub(crate) id: u64,
    pub(crate) path_with_namespace: String,
    pub(crate) default_branch: String,
    pub(crate) members: BTreeMap<String, AccessLevel>,
    pub(crate) commits: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub(crate) branches: BTreeMap<String, String>,
    pub(crate) merge_requests: BTreeMap<u64, MergeRequest>,
    pub(crate) statuses: Vec<StatusRecord>,
    pub(crate) notes: Vec<NoteRecord>,
    pub(crate) access_tokens: Vec<AccessTokenRecord>,
    pub(crate) settings: Settings,
}

impl Project {
    /// The last segment of the full path: what archives are named after.
    pub(crate) fn path(&self) -> &str {
        self.path_with_namespace
            .rsplit('/')
            .next()
            .unwrap_or(&self.path_with_namespace)
    }

    /// Whether `sha` names a commit the project has: its commits, branch heads, and every
    /// head, base and merge commit of its merge requests.
    pub(crate) fn has_commit(&self, sha: &str) -> bool {
        !sha.is_empty()
            && (self.commits.contains_key(sha)
                || self.branches.values().any(|s| s == sha)
                || self.merge_requests.values().any(|m| {
                    m.heads().any(|h| h == sha)
                        || m.versions.iter().any(|v| v.base_sha == sha)
                        || m.merge_commit_sha.as_deref() == Some(sha)
                }))
    }

    /// A branch's head or a commit, for a ref.
    pub(crate) fn resolve(&self, reference: &str) -> Option<String> {
        if let Some(sha) = self.branches.get(reference) {
            return Some(sha.clone());
        }
        self.has_commit(reference).then(|| reference.to_string())
    }

    /// The branch a status on `sha` refers to when none is given: a branch whose head it is,
    /// else the source branch of a merge request that had it as a head.
    pub(crate) fn branch_containing(&self, sha: &str) -> Option<String> {
        if let Some((name, _)) = self.branches.iter().find(|(_, s)| *s == sha) {
            return Some(name.clone());
        }
        // A fork's branch is not this project's: its commits are here only under the merge
        // request's own ref, which no branch contains (rules::FORK_STATUS).
        self.merge_requests
            .values()
            .rev()
            .filter(|m| m.spec.fork.is_none())
            .find(|m| m.heads().any(|h| h == sha))
            .map(|m| m.spec.source_branch.clone())
    }

    /// The newest status of each name on `sha` (`all=false`).
    pub(crate) fn latest_statuses(&self, sha: &str) -> Vec<&StatusRecord> {
        let mut latest: BTreeMap<(&str, &str), &StatusRecord> = BTreeMap::new();
        for status in self.statuses.iter().filter(|s| s.sha == sha) {
            latest.insert((status.name.as_str(), status.git_ref.as_str()), status);
        }
        let mut out: Vec<&StatusRecord> = latest.into_values().collect();
        out.sort_by_key(|s| s.id);
        out
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub(crate) username: String,
    pub(crate) bot: bool,
    pub(crate) scopes: Vec<String>,
    pub(crate) expires_at: Option<NaiveDate>,
    pub(crate) revoked: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    pub(crate) next: u32,
    pub(crate) next_status: u16,
    pub(crate) always: Option<u16>,
    pub(crate) throttled: u32,
    pub(crate) retry_after: u64,
}

/// Everything the double holds.
pub(crate) struct World {
    pub(crate) base_url: String,
    pub(crate) clock_offset: chrono::Duration,
    pub(crate) next_id: u64,
    /// Username → user id.
    pub(crate) users: BTreeMap<String, u64>,
    pub(crate) projects: BTreeMap<u64, Project>,
    pub(crate) tokens: HashMap<String, Token>,
    pub(crate) requests: Vec<RequestRecord>,
    pub(crate) downloads: Vec<DownloadRecord>,
    pub(crate) faults: Faults,
}

impl World {
    pub(crate) fn new(base_url: String) -> Self {
        Self {
            base_url,
            clock_offset: chrono::Duration::zero(),
            next_id: 100,
            users: BTreeMap::new(),
            projects: BTreeMap::new(),
            tokens: HashMap::new(),
            requests: Vec::new(),
            downloads: Vec::new(),
            faults: Faults::default(),
        }
    }

    /// The double's clock, to the millisecond: GitLab's API writes times to the millisecond,
    /// so what the double keeps (an approval's time, a version's) is what it answers.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        (Utc::now() + self.clock_offset).trunc_subsecs(3)
    }

    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The user's id, registering the user if new.
    pub(crate) fn user_id(&mut self, username: &str) -> u64 {
        if let Some(id) = self.users.get(username) {
            return *id;
        }
        let id = self.id();
        self.users.insert(username.to_string(), id);
        id
    }

    /// The project at `path` (case-insensitive).
    pub(crate) fn project_id(&self, path: &str) -> Option<u64> {
        self.projects
            .values()
            .find(|p| p.path_with_namespace.eq_ignore_ascii_case(path))
            .map(|p| p.id)
    }

    /// The project at `path`, created (default branch `main`) if new.
    pub(crate) fn project_mut(&mut self, path: &str) -> &mut Project {
        let id = match self.project_id(path) {
            Some(id) => id,
            None => {
                assert!(
                    path.contains('/') && !path.starts_with('/') && !path.ends_with('/'),
                    "a project is `namespace/.../project`, not {path:?}"
                );
                let id = self.id();
                self.projects.insert(
                    id,
                    Project {
                        id,
                        path_with_namespace: path.to_string(),
                        default_branch: "main".into(),
                        ..Project::default()
                    },
                );
                id
            }
        };
        self.projects.get_mut(&id).expect("just found or inserted")
    }

    pub(crate) fn new_token(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut bytes = [0u8; 20];
        getrandom::fill(&mut bytes).expect("the OS random source");
        let random: String = bytes
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
            .collect();
        format!("glpat-{random}")
    }

    pub(crate) fn record(&mut self, record: RequestRecord) {
        super::push_bounded(&mut self.requests, record, super::MAX_RECORDED_REQUESTS);
    }

    pub(crate) fn record_download(&mut self, project: String, sha: String, caller: Caller) {
        super::push_bounded(
            &mut self.downloads,
            DownloadRecord {
                project,
                sha,
                caller,
            },
            super::MAX_RECORDED_REQUESTS,
        );
    }
}
