//! Problems found while parsing or validating input, each with a field path.
//!
//! Validation never stops at the first problem: every check pushes into a
//! [`Problems`] collector, and the caller gets all of them at once.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One problem with one field of the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Where the problem is, such as `runner_configuration.subnets[0]`; empty for the whole document.
    pub path: String,
    /// A human sentence saying what is wrong.
    pub problem: String,
}

/// Every problem found in one piece of input. Empty means valid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Records a problem at `path`.
    pub fn push(&mut self, path: impl Into<String>, problem: impl Into<String>) {
        self.0.push(Problem {
            path: path.into(),
            problem: problem.into(),
        });
    }

    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems found so far.
    pub fn iter(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter()
    }

    /// Turns the collector into `Ok(value)` when empty, or the error listing everything otherwise.
    pub fn finish<T>(self, value: T) -> Result<T, crate::ValidationError> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(crate::ValidationError { problems: self.0 })
        }
    }
}

/// True when `s` is empty or only whitespace (any Unicode `White_Space`): a blank text.
pub fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The one check for free-text identifiers (a membership's subject, claim and issuer, a
/// label key, a tag, a pool's audience): pushes "must not be blank" at `path` when `value`
/// is empty or only whitespace. True when `value` was blank.
pub fn refuse_blank(p: &mut Problems, path: impl Into<String>, value: &str) -> bool {
    let blank = is_blank(value);
    if blank {
        p.push(path, "must not be blank (empty or only spaces)");
    }
    blank
}

/// The one check for control characters (issue 25, item 13), for every field that is not a
/// free-form body (identifiers, names, schedules, paths, labels, URLs, claims, patterns):
/// pushes "must not contain control characters" at `path` when `value` has one (C0, DEL or
/// C1, see [`crate::limits::has_control`]), naming the first one found. True when it had one.
pub fn refuse_control(p: &mut Problems, path: impl Into<String>, value: &str) -> bool {
    match value.chars().find(|c| c.is_control()) {
        Some(c) => {
            p.push(
                path,
                format!(
                    "must not contain control characters (found U+{:04X})",
                    u32::from(c)
                ),
            );
            true
        }
        None => false,
    }
}

/// Both checks of a free-text identifier: [`refuse_blank`], then [`refuse_control`]. True
/// when `value` was refused.
pub fn refuse_blank_or_control(p: &mut Problems, path: impl Into<String>, value: &str) -> bool {
    let path = path.into();
    refuse_blank(p, path.clone(), value) || refuse_control(p, path, value)
}

/// Joins a parent path and a field name: `join("a", "b") == "a.b"`, `join("", "b") == "b"`.
pub fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_string()
    } else {
        format!("{parent}.{field}")
    }
}

/// Joins a parent path and a map key: like [`join`], but a key that is empty or has
/// whitespace or a control character is quoted and escaped (`a.""`, `a."x\\ny"`), so that
/// every path is one visible line and an empty key is still visible.
pub fn key_path(parent: &str, key: &str) -> String {
    if key.is_empty()
        || key.chars().any(|c| c.is_whitespace() || c.is_control())
        || key.contains('"')
    {
        join(parent, &format!("\"{}\"", key.escape_debug()))
    } else {
        join(parent, key)
    }
}

/// Joins a parent path and a list index: `index("a", 2) == "a[2]"`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// A lenient reader over one JSON object that decodes field by field, so that a
/// wrong type in one field does not hide the problems in the others.
///
/// Call [`Fields::finish`] last: it reports every field that was not read as unknown.
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
    read: Vec<&'static str>,
}

/// A human name for a JSON value's type, for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

impl<'a> Fields<'a> {
    /// Starts reading `value` at `path`. Records a problem and returns `None` if it is not a mapping.
    pub fn new(value: &'a Value, path: &str, problems: &mut Problems) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Self {
                map,
                path: path.to_string(),
                read: Vec::new(),
            }),
            other => {
                problems.push(
                    path,
                    format!("must be a mapping, but is {}", type_name(other)),
                );
                None
            }
        }
    }

    /// The path of a field of this object.
    pub fn path_of(&self, field: &str) -> String {
        join(&self.path, field)
    }

    /// True when the field is present and `null`, marking it read.
    pub fn is_null(&mut self, field: &'static str) -> bool {
        self.read.push(field);
        self.map.get(field).is_some_and(Value::is_null)
    }

    /// The raw value of an optional field (null counts as absent), marking it read.
    pub fn raw(&mut self, field: &'static str) -> Option<&'a Value> {
        self.read.push(field);
        self.map.get(field).filter(|v| !v.is_null())
    }

    /// Decodes an optional field, recording a problem if it has the wrong type.
    pub fn optional<T: DeserializeOwned>(
        &mut self,
        field: &'static str,
        problems: &mut Problems,
    ) -> Option<T> {
        let value = self.raw(field)?;
        match T::deserialize(value) {
            Ok(v) => Some(v),
            Err(e) => {
                let message = clean_serde_message(&e.to_string());
                // serde names an unknown field only in its message: put it in the path,
                // so that `grantee: {isuer: …}` is reported at `grantee.isuer`.
                let path = match unknown_field(&message) {
                    Some(name) => key_path(&self.path_of(field), name),
                    None => self.path_of(field),
                };
                problems.push(path, message);
                None
            }
        }
    }

    /// Decodes a required field, recording a problem if it is missing or has the wrong type.
    pub fn required<T: DeserializeOwned>(
        &mut self,
        field: &'static str,
        problems: &mut Problems,
    ) -> Option<T> {
        if self.raw(field).is_none() {
            problems.push(self.path_of(field), "is required");
            return None;
        }
        self.optional(field, problems)
    }

    /// Decodes a required, non-empty string field without control characters (every such
    /// field is an identifier, never a free-form body).
    pub fn required_str(&mut self, field: &'static str, problems: &mut Problems) -> Option<String> {
        let value: String = self.required(field, problems)?;
        if value.trim().is_empty() {
            problems.push(self.path_of(field), "must not be empty");
            return None;
        }
        if refuse_control(problems, self.path_of(field), &value) {
            return None;
        }
        Some(value)
    }

    /// Records every field that was present but never read as unknown.
    pub fn finish(self, problems: &mut Problems) {
        for key in self.map.keys() {
            if !self.read.iter().any(|r| r == key) {
                let mut known: Vec<&str> = self.read.clone();
                known.sort_unstable();
                known.dedup();
                problems.push(
                    key_path(&self.path, key),
                    format!("is not a known field; known fields: {}", known.join(", ")),
                );
            }
        }
    }
}

/// The field named by serde's "unknown field `x`, expected …" message, if it is one.
fn unknown_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("unknown field `")?
        .split_once('`')
        .map(|(name, _)| name)
}

/// Strips serde's trailing " at line X column Y", which is meaningless for a decoded sub-value.
fn clean_serde_message(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
