//! Names: group paths, environment paths and the ids of runners and rules.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// Most segments a group path may have.
pub const MAX_GROUP_DEPTH: usize = 8;

/// Longest environment path (and runner id), in characters: the path is the value of the
/// task's `sortie:env` tag (ECS, at most 256) and a runner id the value of the
/// `sortie:runner` session and task tag (STS and ECS, at most 256,
/// [`crate::limits::SESSION_TAG_VALUE_MAX`]). Checked when an environment or a runner is
/// created.
pub const MAX_ENV_PATH_LEN: usize = crate::limits::SESSION_TAG_VALUE_MAX;

/// Checks one path segment or id: `[a-z0-9][a-z0-9-]{0,62}`.
pub fn check_segment(segment: &str) -> Result<(), String> {
    let bytes = segment.as_bytes();
    if bytes.is_empty() {
        return Err("has an empty segment".into());
    }
    if bytes.len() > 63 {
        return Err(format!("segment `{segment}` is longer than 63 characters"));
    }
    let ok_first = bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit();
    let ok_rest = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if !ok_first || !ok_rest {
        return Err(format!(
            "segment `{segment}` must match [a-z0-9][a-z0-9-]{{0,62}}"
        ));
    }
    Ok(())
}

/// A hierarchical group namespace such as `acme/payments/eu`.
///
/// The first segment is the organisation. The root `""` is reserved for shared
/// runners and system administration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupPath(String);

impl GroupPath {
    /// The root group `""`, owner of shared runners.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Parses and validates a group path. The empty string is the root.
    pub fn parse(path: &str) -> Result<Self, ValidationError> {
        if path.is_empty() {
            return Ok(Self::root());
        }
        let segments: Vec<&str> = path.split('/').collect();
        if segments.len() > MAX_GROUP_DEPTH {
            return Err(ValidationError::single(
                "",
                format!(
                    "`{path}` is {} segments deep; at most {MAX_GROUP_DEPTH} are allowed",
                    segments.len()
                ),
            ));
        }
        for segment in &segments {
            check_segment(segment)
                .map_err(|e| ValidationError::single("", format!("`{path}` {e}")))?;
        }
        Ok(Self(path.to_string()))
    }

    /// The path as a string (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the root group `""`.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The organisation: the first segment, or `None` for the root.
    pub fn org(&self) -> Option<&str> {
        self.segments().next()
    }

    /// The segments, outermost first (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// How many segments deep the path is (0 for the root).
    pub fn depth(&self) -> usize {
        self.segments().count()
    }

    /// The parent group, or `None` for the root.
    pub fn parent(&self) -> Option<Self> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => Self(self.0[..i].to_string()),
            None => Self::root(),
        })
    }

    /// This group and every ancestor, deepest first, ending with the root.
    pub fn self_and_ancestors(&self) -> Vec<Self> {
        let mut out = vec![self.clone()];
        let mut current = self.clone();
        while let Some(parent) = current.parent() {
            out.push(parent.clone());
            current = parent;
        }
        out
    }

    /// True when `self` is `other` or one of its ancestors (the root is everyone's ancestor).
    pub fn contains(&self, other: &GroupPath) -> bool {
        self.is_root()
            || other.0 == self.0
            || (other.0.len() > self.0.len()
                && other.0.starts_with(&self.0)
                && other.0.as_bytes()[self.0.len()] == b'/')
    }

    /// The child group `self/segment`.
    pub fn child(&self, segment: &str) -> Result<Self, ValidationError> {
        if self.is_root() {
            Self::parse(segment)
        } else {
            Self::parse(&format!("{}/{segment}", self.0))
        }
    }
}

impl fmt::Display for GroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            f.write_str("(root)")
        } else {
            f.write_str(&self.0)
        }
    }
}

impl TryFrom<String> for GroupPath {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<GroupPath> for String {
    fn from(value: GroupPath) -> Self {
        value.0
    }
}

/// An environment's path: its group plus its own name, such as `acme/payments/prod`.
///
/// An environment always lives inside an organisation, never in the root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EnvPath {
    group: GroupPath,
    name: String,
}

impl EnvPath {
    /// Parses `group/name`; the group must not be the root.
    pub fn parse(path: &str) -> Result<Self, ValidationError> {
        let Some((group, name)) = path.rsplit_once('/') else {
            return Err(ValidationError::single(
                "",
                format!("`{path}` must be `<group path>/<environment name>`, such as acme/payments/prod"),
            ));
        };
        let group = GroupPath::parse(group)?;
        check_segment(name).map_err(|e| ValidationError::single("", format!("`{path}` {e}")))?;
        Ok(Self {
            group,
            name: name.to_string(),
        })
    }

    /// Builds the path of environment `name` in `group`.
    pub fn new(group: GroupPath, name: &str) -> Result<Self, ValidationError> {
        if group.is_root() {
            return Err(ValidationError::single(
                "",
                "an environment must belong to an organisation, not the root group",
            ));
        }
        check_segment(name).map_err(|e| ValidationError::single("", format!("name {e}")))?;
        let len = group.as_str().len() + 1 + name.len();
        if len > MAX_ENV_PATH_LEN {
            return Err(ValidationError::single(
                "",
                format!("the environment path `{group}/{name}` is {len} characters long; at most {MAX_ENV_PATH_LEN} are allowed (it is an AWS tag value)"),
            ));
        }
        Ok(Self {
            group,
            name: name.to_string(),
        })
    }

    /// The group the environment belongs to.
    pub fn group(&self) -> &GroupPath {
        &self.group
    }

    /// The environment's own name, the last segment.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The organisation the environment belongs to.
    pub fn org(&self) -> &str {
        self.group.org().unwrap_or_default()
    }
}

impl fmt::Display for EnvPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group.as_str(), self.name)
    }
}

impl TryFrom<String> for EnvPath {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<EnvPath> for String {
    fn from(value: EnvPath) -> Self {
        value.to_string()
    }
}

/// A runner's id: its owner group's path plus its name, such as `acme/fargate-eu`.
///
/// A shared runner lives in the root group, so its id is just its name.
/// Because the group is part of the id, a rule's `runner_id` says by itself
/// whether the runner is visible at the rule's scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunnerId {
    group: GroupPath,
    name: String,
}

impl RunnerId {
    /// Parses `group/name`, or `name` for a shared runner.
    pub fn parse(id: &str) -> Result<Self, ValidationError> {
        let (group, name) = match id.rsplit_once('/') {
            Some((g, n)) => (GroupPath::parse(g)?, n),
            None => (GroupPath::root(), id),
        };
        check_segment(name)
            .map_err(|e| ValidationError::single("", format!("runner id `{id}` {e}")))?;
        Ok(Self {
            group,
            name: name.to_string(),
        })
    }

    /// Builds the id of runner `name` owned by `group`.
    pub fn new(group: GroupPath, name: &str) -> Result<Self, ValidationError> {
        check_segment(name).map_err(|e| ValidationError::single("", format!("name {e}")))?;
        let len = group.as_str().len() + 1 + name.len();
        if len > MAX_ENV_PATH_LEN {
            return Err(ValidationError::single(
                "",
                format!("the environment path `{group}/{name}` is {len} characters long; at most {MAX_ENV_PATH_LEN} are allowed (it is an AWS tag value)"),
            ));
        }
        Ok(Self {
            group,
            name: name.to_string(),
        })
    }

    /// The group that owns the runner (the root for a shared runner).
    pub fn group(&self) -> &GroupPath {
        &self.group
    }

    /// The runner's own name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when the runner is shared (owned by the root group).
    pub fn is_shared(&self) -> bool {
        self.group.is_root()
    }

    /// True when the runner may be used at `scope`: its owner is `scope` or an ancestor of it.
    pub fn is_visible_at(&self, scope: &GroupPath) -> bool {
        self.group.contains(scope)
    }
}

impl fmt::Display for RunnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_root() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.group.as_str(), self.name)
        }
    }
}

impl TryFrom<String> for RunnerId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<RunnerId> for String {
    fn from(value: RunnerId) -> Self {
        value.to_string()
    }
}

/// The longest Terraform variable name Sortie takes, in bytes (a secret's name, which
/// holds it, is at most 512 characters).
pub const VARIABLE_NAME_MAX: usize = 128;

/// Why `name` is not a Terraform variable name (a sensitive variable's, a trigger
/// input's), or `None`: a Terraform identifier (a letter or `_`, then letters, digits,
/// `_` or `-`), at most [`VARIABLE_NAME_MAX`] bytes.
pub fn variable_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Some(
            "is not a Terraform variable name: a letter or `_`, then letters, digits, `_` or `-`"
                .into(),
        );
    }
    if name.len() > VARIABLE_NAME_MAX {
        return Some(format!("must be at most {VARIABLE_NAME_MAX} bytes"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_paths_validate_segments_and_depth() {
        assert!(GroupPath::parse("acme").is_ok());
        assert!(GroupPath::parse("acme/payments/eu").is_ok());
        assert!(GroupPath::parse("a/b/c/d/e/f/g/h").is_ok());
        assert!(GroupPath::parse("a/b/c/d/e/f/g/h/i").is_err(), "depth 9");
        assert!(GroupPath::parse("Acme").is_err(), "upper case");
        assert!(GroupPath::parse("-acme").is_err(), "leading dash");
        assert!(GroupPath::parse("acme//x").is_err(), "empty segment");
        assert!(GroupPath::parse("acme/").is_err(), "trailing slash");
        assert!(GroupPath::parse(&"a".repeat(64)).is_err(), "64 chars");
        assert!(GroupPath::parse(&"a".repeat(63)).is_ok(), "63 chars");
        assert!(GroupPath::parse("").unwrap().is_root());
    }

    #[test]
    fn ancestry() {
        let g = GroupPath::parse("acme/payments/eu").unwrap();
        let names: Vec<String> = g
            .self_and_ancestors()
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(names, vec!["acme/payments/eu", "acme/payments", "acme", ""]);
        assert!(GroupPath::parse("acme").unwrap().contains(&g));
        assert!(GroupPath::root().contains(&g));
        assert!(
            !GroupPath::parse("acme/pay").unwrap().contains(&g),
            "prefix is not ancestry"
        );
        assert!(!g.contains(&GroupPath::parse("acme").unwrap()));
        assert_eq!(g.org(), Some("acme"));
        assert_eq!(g.depth(), 3);
    }

    #[test]
    fn env_and_runner_ids_round_trip() {
        let e = EnvPath::parse("acme/payments/prod").unwrap();
        assert_eq!(e.group().as_str(), "acme/payments");
        assert_eq!(e.name(), "prod");
        assert_eq!(e.to_string(), "acme/payments/prod");
        assert!(
            EnvPath::parse("prod").is_err(),
            "an environment needs an org"
        );

        let shared = RunnerId::parse("fargate-shared").unwrap();
        assert!(shared.is_shared());
        assert_eq!(shared.to_string(), "fargate-shared");
        let r = RunnerId::parse("acme/fargate-eu").unwrap();
        assert!(r.is_visible_at(&GroupPath::parse("acme/payments").unwrap()));
        assert!(!r.is_visible_at(&GroupPath::parse("globex").unwrap()));
        assert!(shared.is_visible_at(&GroupPath::parse("globex").unwrap()));
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"acme/fargate-eu\"");
        let back: RunnerId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
    }
}
