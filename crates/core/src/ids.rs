//! Opaque identifiers: a job's id and the reference to the task it was launched as.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// A job's id: a lower-case ULID made at submit (so ids sort by creation time).
///
/// It reads as a `&str` wherever one is needed (`Deref`), and is stored and
/// sent as a plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// Wraps an id that was made or read elsewhere.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's last 8 characters (the random part of the ULID), for short names such
    /// as a Kubernetes Job's `generateName`.
    pub fn short(&self) -> &str {
        let start = self.0.len().saturating_sub(8);
        self.0.get(start..).unwrap_or(&self.0)
    }
}

impl From<String> for JobId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl From<&str> for JobId {
    fn from(id: &str) -> Self {
        Self(id.to_string())
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> Self {
        id.0
    }
}

impl From<&JobId> for String {
    fn from(id: &JobId) -> Self {
        id.0.clone()
    }
}

impl PartialEq<JobId> for String {
    fn eq(&self, other: &JobId) -> bool {
        *self == other.0
    }
}

impl PartialEq<JobId> for &str {
    fn eq(&self, other: &JobId) -> bool {
        *self == other.0
    }
}

impl Deref for JobId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for JobId {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for JobId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for JobId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for JobId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// A platform-neutral reference to the task a job was launched as: an ECS task ARN
/// for `ecs-fargate`, a Kubernetes Job's namespace and name for `eks`, a launch record
/// for `local`. Only the launcher that made it interprets it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskRef(String);

impl TaskRef {
    /// Wraps a launcher's reference.
    pub fn new(reference: impl Into<String>) -> Self {
        Self(reference.into())
    }

    /// The reference as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for TaskRef {
    fn from(reference: String) -> Self {
        Self(reference)
    }
}

impl From<&str> for TaskRef {
    fn from(reference: &str) -> Self {
        Self(reference.to_string())
    }
}

impl From<TaskRef> for String {
    fn from(reference: TaskRef) -> Self {
        reference.0
    }
}

impl From<&TaskRef> for String {
    fn from(reference: &TaskRef) -> Self {
        reference.0.clone()
    }
}

impl PartialEq<TaskRef> for String {
    fn eq(&self, other: &TaskRef) -> bool {
        *self == other.0
    }
}

impl Deref for TaskRef {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for TaskRef {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TaskRef {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Every agent pool id starts with this (HCP Terraform's `apool-`).
pub const POOL_ID_PREFIX: &str = "apool-";

/// What is wrong with a pool id, if anything: `apool-` and 26 lower-case ULID characters.
pub fn pool_id_problem(id: &str) -> Option<String> {
    let ok = id.strip_prefix(POOL_ID_PREFIX).is_some_and(|rest| {
        rest.len() == 26
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    });
    (!ok).then(|| {
        format!("must be an agent pool id: `{POOL_ID_PREFIX}` and 26 lower-case letters and digits")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_id_is_stored_and_sent_as_a_plain_string() {
        let id = JobId::new("01jnx6v4k2m8q9r3s5t7w0y1za");
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"01jnx6v4k2m8q9r3s5t7w0y1za\""
        );
        let back: JobId = serde_json::from_str("\"01jnx6v4k2m8q9r3s5t7w0y1za\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(id.short(), "t7w0y1za");
        assert_eq!(JobId::new("abc").short(), "abc");
    }
}
