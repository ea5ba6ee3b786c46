//! An environment's binding to a repository directory: which repository and base branch
//! its pull requests target, which changed files make a pull request touch it, how and
//! when its plans are applied, and what an apply requires.
//!
//! [`VcsBinding::from_value`] decodes the `vcs` field of an environment's body field by
//! field, reporting every problem with its path (`vcs.repository`,
//! `vcs.when_modified[2]`, ...), as [`crate::environment`] does for the rest.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::problems::{index, Fields, Problems};

/// The base branch a binding follows when none is given.
pub const DEFAULT_BRANCH: &str = "main";
/// The longest `directory`, in bytes.
pub const DIRECTORY_MAX_BYTES: usize = 1024;
/// The longest `branch`, in bytes (git itself has no limit; a ref is a file name on most
/// hosts, and 255 bytes is the common file-name limit).
pub const BRANCH_MAX_BYTES: usize = 255;
/// The most globs in `when_modified`.
pub const WHEN_MODIFIED_MAX: usize = 20;
/// The longest glob in `when_modified`, in bytes.
pub const GLOB_MAX_BYTES: usize = 256;
/// The most approvals `requirements.approved` may ask for.
pub const APPROVED_MAX: u32 = 10;
/// The longest repository owner (a GitHub user or organisation login), in characters.
pub const OWNER_MAX_CHARS: usize = 39;
/// The longest repository name, in characters.
pub const NAME_MAX_CHARS: usize = 100;

/// How Sortie matches changed paths against globs: `*` and `?` never cross a `/`, `**`
/// does, case matters, and a leading dot needs no literal dot (so `**` matches `.github/`).
const MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// The version control host of a binding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VcsProvider {
    /// GitHub, through a connection (a GitHub App installed for an organisation).
    #[default]
    Github,
    /// GitLab (GitLab.com or a self-managed instance), through a connection (an access
    /// token and a webhook secret token of an organisation).
    Gitlab,
}

impl VcsProvider {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Github => "github",
            Self::Gitlab => "gitlab",
        }
    }

    /// The host's name as people write it: `GitHub`, `GitLab`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Github => "GitHub",
            Self::Gitlab => "GitLab",
        }
    }
}

/// When a pull request's plan is applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApplyMode {
    /// The pull request shows plans; the apply runs on the base branch once it is merged.
    #[default]
    AfterMerge,
    /// `/sortie apply` on the pull request applies its plan, once the requirements hold;
    /// the pull request is merged after.
    BeforeMerge,
    /// Plans only: nothing is ever applied from a pull request or a merge.
    None,
}

impl ApplyMode {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AfterMerge => "after_merge",
            Self::BeforeMerge => "before_merge",
            Self::None => "none",
        }
    }
}

/// What must hold before a pull request's plan is applied, beyond the two rules that always
/// hold (a plan of the head commit exists, the required checks are green): see
/// [`crate::vcs::requirements::evaluate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Requirements {
    /// This many approvals (1 to 10) on the head commit, by people other than the author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<u32>,
    /// GitHub says the pull request can be merged, and it is not a draft.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mergeable: bool,
    /// The head has every commit of the base branch (it is not behind).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undiverged: bool,
}

/// An environment's binding to a repository directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VcsBinding {
    /// The host: `github` (the default) or `gitlab`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub provider: VcsProvider,
    /// The repository: `owner/name` on GitHub, the project's full path
    /// (`group/subgroup/project`) on GitLab.
    pub repository: String,
    /// The environment's directory, relative to the repository root; empty for the root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub directory: String,
    /// The base branch whose pull requests are planned (default `main`).
    #[serde(default = "default_branch", skip_serializing_if = "is_default_branch")]
    pub branch: String,
    /// Globs relative to the repository root: a pull request touches the environment when a
    /// changed path matches one. Empty means `<directory>/**` (see [`VcsBinding::globs`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when_modified: Vec<String>,
    /// When plans are applied: `after_merge` (default), `before_merge` or `none`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub apply: ApplyMode,
    /// What an apply from the pull request requires.
    #[serde(default, skip_serializing_if = "is_default")]
    pub requirements: Requirements,
}

impl Default for VcsBinding {
    fn default() -> Self {
        Self {
            provider: VcsProvider::default(),
            repository: String::new(),
            directory: String::new(),
            branch: default_branch(),
            when_modified: Vec::new(),
            apply: ApplyMode::default(),
            requirements: Requirements::default(),
        }
    }
}

fn default_branch() -> String {
    DEFAULT_BRANCH.to_string()
}

fn is_default_branch(branch: &str) -> bool {
    branch == DEFAULT_BRANCH
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Requirements {
    /// Decodes `requirements` at `path`, recording every problem; `None` when there was one.
    pub fn from_value(value: &Value, path: &str, p: &mut Problems) -> Option<Self> {
        let before = p.0.len();
        let mut f = Fields::new(value, path, p)?;
        let approved: Option<u32> = f.optional("approved", p);
        if approved.is_some_and(|n| !(1..=APPROVED_MAX).contains(&n)) {
            p.push(
                f.path_of("approved"),
                format!("must be between 1 and {APPROVED_MAX} approvals"),
            );
        }
        let mergeable: Option<bool> = f.optional("mergeable", p);
        let undiverged: Option<bool> = f.optional("undiverged", p);
        f.finish(p);
        (p.0.len() == before).then(|| Self {
            approved,
            mergeable: mergeable.unwrap_or(false),
            undiverged: undiverged.unwrap_or(false),
        })
    }
}

impl VcsBinding {
    /// Decodes a binding at `path` (such as `vcs`), recording every problem found with its
    /// field path; `None` when there was one. A trailing `/` of `directory` is dropped.
    pub fn from_value(value: &Value, path: &str, p: &mut Problems) -> Option<Self> {
        let before = p.0.len();
        let mut f = Fields::new(value, path, p)?;
        let provider: Option<VcsProvider> = f.optional("provider", p);
        let repository = f.required_str("repository", p);
        if let Some(problem) = repository
            .as_deref()
            .and_then(|r| repository_problem_on(provider.unwrap_or_default(), r))
        {
            p.push(f.path_of("repository"), problem);
        }
        let directory: String = f.optional("directory", p).unwrap_or_default();
        if let Some(problem) = directory_problem(&directory) {
            p.push(f.path_of("directory"), problem);
        }
        let branch: String = f.optional("branch", p).unwrap_or_else(default_branch);
        if let Some(problem) = branch_problem(&branch) {
            p.push(f.path_of("branch"), problem);
        }
        let when_modified: Vec<String> = f.optional("when_modified", p).unwrap_or_default();
        check_globs(&when_modified, &f.path_of("when_modified"), p);
        let apply: Option<ApplyMode> = f.optional("apply", p);
        let requirements = match f.raw("requirements") {
            Some(v) => Requirements::from_value(v, &f.path_of("requirements"), p),
            None => Some(Requirements::default()),
        };
        f.finish(p);
        if p.0.len() != before {
            return None;
        }
        Some(Self {
            provider: provider.unwrap_or_default(),
            repository: repository?,
            directory: directory.trim_end_matches('/').to_string(),
            branch,
            when_modified,
            apply: apply.unwrap_or_default(),
            requirements: requirements?,
        })
    }

    /// The effective globs: `when_modified` when given, or else every file under the
    /// directory, `<directory>/**` (the directory escaped, so that a `[` or `*` in its name
    /// is literal), or `**` for the repository root.
    pub fn globs(&self) -> Vec<String> {
        if !self.when_modified.is_empty() {
            return self.when_modified.clone();
        }
        let directory = self.directory.trim_end_matches('/');
        if directory.is_empty() {
            vec!["**".to_string()]
        } else {
            vec![format!("{}/**", glob::Pattern::escape(directory))]
        }
    }

    /// True when a changed path matches one of [`VcsBinding::globs`]. A renamed file counts
    /// by either name: the caller passes both its old and its new path, so that moving a
    /// file out of the directory touches the environment too.
    pub fn matches<'a>(&self, changed: impl IntoIterator<Item = &'a str>) -> bool {
        let patterns: Vec<glob::Pattern> = self
            .globs()
            .iter()
            .filter_map(|g| glob::Pattern::new(g).ok())
            .collect();
        changed
            .into_iter()
            .any(|path| patterns.iter().any(|p| p.matches_with(path, MATCH)))
    }

    /// The repository's owner (before the `/`); the whole `repository` if it has no `/`.
    pub fn owner(&self) -> &str {
        self.repository
            .split_once('/')
            .map_or(self.repository.as_str(), |(owner, _)| owner)
    }

    /// The repository's name (after the `/`); empty if it has no `/`.
    pub fn name(&self) -> &str {
        self.repository.split_once('/').map_or("", |(_, name)| name)
    }
}

/// What is wrong with a repository, `owner/name`, by GitHub's rules; `None` when valid.
///
/// The owner is a user or organisation login: 1 to 39 characters, letters, digits and single
/// hyphens, not at either end. GitHub documents these only in its sign-up form ("Username
/// may only contain alphanumeric characters or single hyphens, and cannot begin or end with
/// a hyphen", maximum 39 characters); collected with their sources at
/// <https://github.com/dead-claudia/github-limits>.
///
/// The name: 1 to 100 ASCII letters, digits, `.`, `-` and `_`, per
/// <https://docs.github.com/en/repositories/creating-and-managing-repositories/repository-limits#repository-name>;
/// not `.` or `..` (path segments, never a repository), and not ending in `.git` (GitHub
/// drops that suffix, so no repository has it) or `.wiki` (reserved for wikis), per the
/// same page.
pub fn repository_problem(name: &str) -> Option<String> {
    let Some((owner, repo)) = name.split_once('/') else {
        return Some("must be `owner/name`, such as `acme/infrastructure`".to_string());
    };
    if repo.contains('/') {
        return Some("must be `owner/name`, with exactly one `/`".to_string());
    }
    if let Some(problem) = owner_problem(owner) {
        return Some(format!("the owner {problem}"));
    }
    name_problem(repo).map(|problem| format!("the name {problem}"))
}

fn owner_problem(owner: &str) -> Option<&'static str> {
    if owner.is_empty() || owner.len() > OWNER_MAX_CHARS {
        return Some("must be 1 to 39 characters");
    }
    let allowed = owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !allowed || owner.starts_with('-') || owner.ends_with('-') || owner.contains("--") {
        return Some(
            "may contain only letters, digits and single hyphens, and cannot begin or end with a hyphen",
        );
    }
    None
}

fn name_problem(repo: &str) -> Option<&'static str> {
    if repo.is_empty() || repo.len() > NAME_MAX_CHARS {
        return Some("must be 1 to 100 characters");
    }
    if !repo
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Some("may contain only ASCII letters, digits, `.`, `-` and `_`");
    }
    if repo == "." || repo == ".." {
        return Some("must not be `.` or `..`");
    }
    if repo.to_ascii_lowercase().ends_with(".git") {
        return Some("must not end in `.git` (GitHub drops that suffix: leave it out)");
    }
    if repo.to_ascii_lowercase().ends_with(".wiki") {
        return Some("must not end in `.wiki` (GitHub reserves it for wikis)");
    }
    None
}

/// The deepest GitLab project path: a top-level group, 20 levels of subgroups and the
/// project ("You can create up to 20 levels of subgroups",
/// <https://docs.gitlab.com/user/group/subgroups/>).
const GITLAB_MAX_SEGMENTS: usize = 22;
/// The longest segment of a GitLab path (a group's or project's `path` column).
const GITLAB_SEGMENT_MAX_CHARS: usize = 255;

/// What is wrong with a repository on `provider`; `None` when valid: `owner/name` by
/// [`repository_problem`] on GitHub, a project's full path by [`gitlab_project_problem`]
/// on GitLab.
pub fn repository_problem_on(provider: VcsProvider, name: &str) -> Option<String> {
    match provider {
        VcsProvider::Github => repository_problem(name),
        VcsProvider::Gitlab => gitlab_project_problem(name),
    }
}

/// What is wrong with a GitLab project's full path (`group/subgroup/project`); `None` when
/// valid. A path has a namespace and a project (2 to 22 segments: 20 levels of subgroups
/// at most). Each segment is 1 to 255 ASCII letters, digits, `_`, `-` and `.`; starts with
/// a letter, digit or `_`; does not end in `.git` or `.atom`, and has no `..`
/// (<https://docs.gitlab.com/user/reserved_names/#limitations-on-usernames-project-and-group-names-and-slugs>).
pub fn gitlab_project_problem(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    if segments.len() < 2 {
        return Some(
            "must be the project's full path, `group/project` (or `group/subgroup/project`)".into(),
        );
    }
    if segments.len() > GITLAB_MAX_SEGMENTS {
        return Some(format!(
            "has more than {GITLAB_MAX_SEGMENTS} segments (GitLab allows 20 levels of subgroups)"
        ));
    }
    for segment in segments {
        if segment.is_empty() || segment.len() > GITLAB_SEGMENT_MAX_CHARS {
            return Some(format!(
                "has a segment `{}` that is not 1 to {GITLAB_SEGMENT_MAX_CHARS} characters",
                segment.chars().take(40).collect::<String>()
            ));
        }
        let allowed = segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        let starts_well = segment
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let lower = segment.to_ascii_lowercase();
        if !allowed || !starts_well || segment.contains("..") {
            return Some(format!(
                "has a segment `{}` GitLab does not allow: ASCII letters, digits, `_`, `-` and `.`, starting with a letter, digit or `_`, without `..`",
                segment.chars().take(40).collect::<String>()
            ));
        }
        if lower.ends_with(".git") || lower.ends_with(".atom") {
            return Some(format!(
                "has a segment `{segment}` ending in `.git` or `.atom`, which GitLab does not allow"
            ));
        }
    }
    None
}

/// What is wrong with a path relative to the repository root (a directory, or a glob);
/// `None` when it is relative and plain: no leading `/`, no `\`, no control character, and
/// no `.`, `..` or empty component (GitHub names changed files without any of them, so such
/// a path would never match).
fn relative_path_problem(path: &str) -> Option<&'static str> {
    if path.starts_with('/') {
        return Some("must be relative to the repository root (no leading `/`)");
    }
    if path.contains('\\') {
        return Some("must separate directories with `/`, not `\\`");
    }
    if path.chars().any(char::is_control) {
        return Some("must not contain control characters");
    }
    for component in path.split('/') {
        match component {
            ".." => return Some("must not contain a `..` component"),
            "." => return Some("must not contain a `.` component"),
            "" => return Some("must not contain an empty component (`//`)"),
            _ => {}
        }
    }
    None
}

/// What is wrong with a binding's directory; `None` when valid. Empty is the repository
/// root, and one trailing `/` is allowed (and dropped by [`VcsBinding::from_value`]).
pub fn directory_problem(directory: &str) -> Option<String> {
    if directory.len() > DIRECTORY_MAX_BYTES {
        return Some(format!("must be at most {DIRECTORY_MAX_BYTES} bytes"));
    }
    if directory == "/" {
        return Some("must be relative to the repository root: use \"\" for the root".into());
    }
    let trimmed = directory.strip_suffix('/').unwrap_or(directory);
    if trimmed.is_empty() {
        return None;
    }
    relative_path_problem(trimmed).map(str::to_string)
}

/// What is wrong with a base branch name, by git's rules for a ref name
/// (<https://git-scm.com/docs/git-check-ref-format>, as `git check-ref-format --branch`
/// reads a branch); `None` when valid. At most [`BRANCH_MAX_BYTES`] bytes.
pub fn branch_problem(branch: &str) -> Option<String> {
    let problem = if branch.is_empty() {
        "must not be empty"
    } else if branch.len() > BRANCH_MAX_BYTES {
        return Some(format!("must be at most {BRANCH_MAX_BYTES} bytes"));
    } else if branch.chars().any(|c| c.is_control()) {
        "must not contain control characters"
    } else if let Some(c) = branch
        .chars()
        .find(|c| matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Some(format!(
            "must not contain `{c}` (git refuses space, `~`, `^`, `:`, `?`, `*`, `[` and `\\` in a branch name)"
        ));
    } else if branch.contains("..") {
        "must not contain `..`"
    } else if branch.contains("@{") {
        "must not contain `@{`"
    } else if branch == "@" {
        "must not be `@`"
    } else if branch.starts_with('-') {
        "must not begin with `-`"
    } else if branch.starts_with('/') || branch.ends_with('/') || branch.contains("//") {
        "must not begin or end with `/` or contain `//`"
    } else if branch.ends_with('.') {
        "must not end with `.`"
    } else if branch
        .split('/')
        .any(|c| c.starts_with('.') || c.ends_with(".lock"))
    {
        "must not have a part (between `/`) that begins with `.` or ends with `.lock`"
    } else {
        return None;
    };
    Some(problem.to_string())
}

/// Checks `when_modified`: at most [`WHEN_MODIFIED_MAX`] globs, each non-empty, at most
/// [`GLOB_MAX_BYTES`] bytes, relative, a file pattern (not ending in `/`) and a valid
/// `glob::Pattern`.
fn check_globs(globs: &[String], path: &str, p: &mut Problems) {
    if globs.len() > WHEN_MODIFIED_MAX {
        p.push(
            path,
            format!(
                "must have at most {WHEN_MODIFIED_MAX} globs, but has {}",
                globs.len()
            ),
        );
    }
    for (i, g) in globs.iter().enumerate() {
        let at = index(path, i);
        if g.is_empty() {
            p.push(at, "must not be empty");
        } else if g.len() > GLOB_MAX_BYTES {
            p.push(at, format!("must be at most {GLOB_MAX_BYTES} bytes"));
        } else if g.ends_with('/') {
            p.push(
                at,
                "matches changed files, never a directory: end it with `/**` for everything under one",
            );
        } else if let Some(problem) = relative_path_problem(g) {
            p.push(at, problem);
        } else if let Err(e) = glob::Pattern::new(g) {
            p.push(
                at,
                format!("is not a valid glob: {} (at character {})", e.msg, e.pos),
            );
        }
    }
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
