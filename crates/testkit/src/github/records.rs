//! What tests hand the double and read back from it: pull requests to open, the files they
//! change, and the check runs, comments and requests it recorded.

use serde_json::Value;

/// How a request authenticated, as the double saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKind {
    /// No `Authorization` header.
    None,
    /// A valid app JWT.
    AppJwt,
    /// A valid installation token of installation `.0`.
    Installation(u64),
    /// A user's token (made by
    /// [`GithubDouble::user_token`](super::GithubDouble::user_token)).
    User(String),
    /// A credential the double refused (401), and why.
    Invalid(String),
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
    /// How it authenticated.
    pub token: TokenKind,
    /// Whether it carried `If-None-Match`.
    pub conditional: bool,
    /// The status answered.
    pub status: u16,
}

/// One file a pull request changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path after the change.
    pub filename: String,
    /// The path before, for a rename.
    pub previous_filename: Option<String>,
    /// `added`, `removed`, `modified`, `renamed`.
    pub status: String,
}

impl FileChange {
    /// A modified file.
    pub fn modified(path: &str) -> Self {
        Self::with_status(path, "modified")
    }
    /// An added file.
    pub fn added(path: &str) -> Self {
        Self::with_status(path, "added")
    }
    /// A removed file.
    pub fn removed(path: &str) -> Self {
        Self::with_status(path, "removed")
    }
    /// A file renamed from `from` to `to`.
    pub fn renamed(from: &str, to: &str) -> Self {
        Self {
            filename: to.to_string(),
            previous_filename: Some(from.to_string()),
            status: "renamed".into(),
        }
    }
    fn with_status(path: &str, status: &str) -> Self {
        Self {
            filename: path.to_string(),
            previous_filename: None,
            status: status.into(),
        }
    }
}

/// A pull request to open in the double.
#[derive(Debug, Clone)]
pub struct PullSpec {
    /// Who opens it.
    pub author: String,
    /// Its head commit.
    pub head_sha: String,
    /// Its head branch.
    pub head_ref: String,
    /// Its base branch.
    pub base_ref: String,
    /// The files it changes.
    pub files: Vec<FileChange>,
    /// The head repository's `owner/name` when it comes from a fork.
    pub fork: Option<String>,
    /// Whether it is a draft.
    pub draft: bool,
    /// GitHub's mergeability (`None`: still being computed).
    pub mergeable: Option<bool>,
}

impl PullSpec {
    /// An open pull request by `author` at `head_sha`, from `topic` into `main`, mergeable,
    /// changing no file yet.
    pub fn new(author: &str, head_sha: &str) -> Self {
        Self {
            author: author.to_string(),
            head_sha: head_sha.to_string(),
            head_ref: "topic".into(),
            base_ref: "main".into(),
            files: Vec::new(),
            fork: None,
            draft: false,
            mergeable: Some(true),
        }
    }
    /// Adds a changed file.
    pub fn file(mut self, file: FileChange) -> Self {
        self.files.push(file);
        self
    }
    /// Sets the changed files.
    pub fn files(mut self, files: Vec<FileChange>) -> Self {
        self.files = files;
        self
    }
    /// Sets the base branch.
    pub fn base(mut self, base: &str) -> Self {
        self.base_ref = base.to_string();
        self
    }
    /// Sets the head branch.
    pub fn head_ref(mut self, head: &str) -> Self {
        self.head_ref = head.to_string();
        self
    }
    /// Makes it come from the fork `owner/name`.
    pub fn from_fork(mut self, fork: &str) -> Self {
        self.fork = Some(fork.to_string());
        self
    }
    /// Makes it a draft.
    pub fn draft(mut self) -> Self {
        self.draft = true;
        self
    }
    /// Sets its mergeability.
    pub fn mergeable(mut self, mergeable: Option<bool>) -> Self {
        self.mergeable = mergeable;
        self
    }
}

/// A check run as the double holds it, with every create or update body it received.
#[derive(Debug, Clone)]
pub struct CheckRunRecord {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its commit.
    pub head_sha: String,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    /// Its conclusion, once completed.
    pub conclusion: Option<String>,
    /// Its `external_id`.
    pub external_id: Option<String>,
    /// Its `details_url`.
    pub details_url: Option<String>,
    /// Its `output`.
    pub output: Option<Value>,
    /// The app that created it.
    pub app_id: u64,
    /// Every accepted body, create first, in order.
    pub history: Vec<Value>,
}

/// An issue comment as the double holds it, with its earlier bodies.
#[derive(Debug, Clone)]
pub struct CommentRecord {
    /// Its id.
    pub id: u64,
    /// The pull request (or issue) it is on.
    pub issue_number: u64,
    /// Its body now.
    pub body: String,
    /// Its author's login (`<slug>[bot]` for the app).
    pub author: String,
    /// `Bot` or `User`.
    pub author_type: String,
    /// Its bodies before each edit, oldest first.
    pub history: Vec<String>,
}
