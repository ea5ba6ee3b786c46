//! What tests hand the double and read back from it: roles, merge requests to open, the
//! files they change, and the statuses, notes, tokens, downloads and requests it recorded.

/// A member's role in a project, as GitLab numbers it (`access_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AccessLevel {
    /// 10.
    Guest,
    /// 15.
    Planner,
    /// 20.
    Reporter,
    /// 30.
    Developer,
    /// 40.
    Maintainer,
    /// 50.
    Owner,
}

impl AccessLevel {
    /// GitLab's number for the role.
    pub fn value(self) -> u32 {
        match self {
            Self::Guest => 10,
            Self::Planner => 15,
            Self::Reporter => 20,
            Self::Developer => 30,
            Self::Maintainer => 40,
            Self::Owner => 50,
        }
    }

    /// The role GitLab numbers `value`, if any.
    pub fn from_value(value: u64) -> Option<Self> {
        Some(match value {
            10 => Self::Guest,
            15 => Self::Planner,
            20 => Self::Reporter,
            30 => Self::Developer,
            40 => Self::Maintainer,
            50 => Self::Owner,
            _ => return None,
        })
    }
}

/// One file a merge request changes, as `.../diffs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffChange {
    /// The path before the change.
    pub old_path: String,
    /// The path after the change.
    pub new_path: String,
    /// Whether the file is new.
    pub new_file: bool,
    /// Whether the file was renamed.
    pub renamed_file: bool,
    /// Whether the file was deleted.
    pub deleted_file: bool,
    /// The unified diff of the file.
    pub diff: String,
}

impl DiffChange {
    /// A modified file.
    pub fn modified(path: &str) -> Self {
        Self::with(path, path, false, false, false)
    }
    /// An added file.
    pub fn added(path: &str) -> Self {
        Self::with(path, path, true, false, false)
    }
    /// A deleted file.
    pub fn deleted(path: &str) -> Self {
        Self::with(path, path, false, false, true)
    }
    /// A file renamed from `from` to `to`.
    pub fn renamed(from: &str, to: &str) -> Self {
        Self::with(from, to, false, true, false)
    }
    fn with(old: &str, new: &str, added: bool, renamed: bool, deleted: bool) -> Self {
        Self {
            old_path: old.to_string(),
            new_path: new.to_string(),
            new_file: added,
            renamed_file: renamed,
            deleted_file: deleted,
            diff: "@@ -1 +1 @@\n-a\n+b\n".to_string(),
        }
    }
}

/// A merge request to open in the double.
#[derive(Debug, Clone)]
pub struct MergeRequestSpec {
    /// The author's username.
    pub author: String,
    /// Its title.
    pub title: String,
    /// Its source branch.
    pub source_branch: String,
    /// Its target branch.
    pub target_branch: String,
    /// Its head commit.
    pub head_sha: String,
    /// The files it changes.
    pub changes: Vec<DiffChange>,
    /// Whether it is a draft.
    pub draft: bool,
    /// The source project's full path when it comes from a fork.
    pub fork: Option<String>,
    /// Whether its branches conflict.
    pub conflicts: bool,
}

impl MergeRequestSpec {
    /// An open merge request by `author` at `head_sha`, from `topic` into `main`, changing no
    /// file yet.
    pub fn new(author: &str, head_sha: &str) -> Self {
        Self {
            author: author.to_string(),
            title: "Change".to_string(),
            source_branch: "topic".into(),
            target_branch: "main".into(),
            head_sha: head_sha.to_string(),
            changes: Vec::new(),
            draft: false,
            fork: None,
            conflicts: false,
        }
    }
    /// Adds a changed file.
    pub fn change(mut self, change: DiffChange) -> Self {
        self.changes.push(change);
        self
    }
    /// Sets the changed files.
    pub fn changes(mut self, changes: Vec<DiffChange>) -> Self {
        self.changes = changes;
        self
    }
    /// Sets the title.
    pub fn title(mut self, title: &str) -> Self {
        self.title = title.to_string();
        self
    }
    /// Sets the source branch.
    pub fn source(mut self, branch: &str) -> Self {
        self.source_branch = branch.to_string();
        self
    }
    /// Sets the target branch.
    pub fn target(mut self, branch: &str) -> Self {
        self.target_branch = branch.to_string();
        self
    }
    /// Makes it a draft.
    pub fn draft(mut self) -> Self {
        self.draft = true;
        self
    }
    /// Makes it come from the fork at `path` (created if new): its `source_project_id`
    /// differs from its `target_project_id`.
    pub fn from_fork(mut self, path: &str) -> Self {
        self.fork = Some(path.to_string());
        self
    }
    /// Makes its branches conflict.
    pub fn conflicts(mut self) -> Self {
        self.conflicts = true;
        self
    }
}

/// A commit status (an external job) as the double holds it.
#[derive(Debug, Clone)]
pub struct StatusRecord {
    /// Its id.
    pub id: u64,
    /// Its commit.
    pub sha: String,
    /// The ref it refers to.
    pub git_ref: String,
    /// Its name (`name` or `context`, `default` when neither).
    pub name: String,
    /// Its state now: `pending`, `running`, `success`, `failed`, `canceled` or `skipped`.
    pub status: String,
    /// Its description.
    pub description: Option<String>,
    /// Its target URL.
    pub target_url: Option<String>,
    /// Who posted it.
    pub author: String,
    /// Every state it went through, in order.
    pub history: Vec<String>,
}

/// A note on a merge request as the double holds it, with its earlier bodies.
#[derive(Debug, Clone)]
pub struct NoteRecord {
    /// Its id.
    pub id: u64,
    /// The merge request (iid) it is on.
    pub merge_request_iid: u64,
    /// Its body now.
    pub body: String,
    /// Its author's username.
    pub author: String,
    /// Its bodies before each edit, oldest first.
    pub history: Vec<String>,
}

/// One approval of a merge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// Who approved.
    pub username: String,
    /// The head the merge request had when they approved.
    pub sha: String,
    /// When they approved, on the double's clock: what `approved_by[].approved_at` says.
    pub approved_at: chrono::DateTime<chrono::Utc>,
}

/// A project access token as the double holds it.
#[derive(Debug, Clone)]
pub struct AccessTokenRecord {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// Its role's number.
    pub access_level: u32,
    /// Its expiry date (`YYYY-MM-DD`).
    pub expires_at: String,
    /// Whether it was revoked.
    pub revoked: bool,
    /// Who created it.
    pub created_by: String,
    /// Its bot user's username.
    pub bot_username: String,
    /// Its value.
    pub token: String,
    /// When it was created.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Who made a request, as the double saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No token.
    Anonymous,
    /// A personal access token of this user.
    User(String),
    /// A project access token: its bot user.
    ProjectBot(String),
    /// A token the double refused (401), and why.
    Refused(String),
}

/// One request the double answered.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// `GET`, `POST`...
    pub method: String,
    /// The path, as sent (still percent-encoded).
    pub path: String,
    /// The query, if any.
    pub query: Option<String>,
    /// Who made it.
    pub caller: Caller,
    /// The status answered.
    pub status: u16,
}

/// One archive the double served.
#[derive(Debug, Clone)]
pub struct DownloadRecord {
    /// The project's full path.
    pub project: String,
    /// The commit archived.
    pub sha: String,
    /// Who downloaded it.
    pub caller: Caller,
}
