//! A plan for people: one entry per resource with its action, the attributes that change
//! (before and after, already redacted) and those that force a replacement; the output
//! changes; and the counts. Built from the redacted `show -json` document alone.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most resource changes in one page (also the default page size).
pub const PAGE_MAX: usize = 1000;

/// Most nesting levels flattened into attribute paths; deeper values are one attribute.
const MAX_DEPTH: usize = 32;

/// What a plan does to one resource or output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ChangeAction {
    /// Created.
    Create,
    /// Updated in place.
    Update,
    /// Destroyed.
    Delete,
    /// Destroyed and created again (either order).
    Replace,
    /// A data source read.
    Read,
    /// Nothing changes.
    NoOp,
}

impl ChangeAction {
    /// Terraform's `actions` list as one action: `[delete, create]` and `[create, delete]`
    /// are a replacement; an empty or unknown list is `no-op`.
    pub fn from_terraform(actions: &[&str]) -> ChangeAction {
        match actions {
            ["create"] => Self::Create,
            ["update"] => Self::Update,
            ["delete"] => Self::Delete,
            ["read"] => Self::Read,
            ["delete", "create"] | ["create", "delete"] => Self::Replace,
            _ => Self::NoOp,
        }
    }
}

/// One attribute that changes: its dotted path (`tags.env`, `ingress.0.port`), the value
/// before and after (redacted values are the marker), and whether the new value is known
/// only after apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttributeChange {
    /// The attribute's path, steps joined by dots.
    pub path: String,
    /// The value before (null when there was none).
    pub before: Value,
    /// The value after (null when there is none or it is known only after apply).
    pub after: Value,
    /// True when the value after is known only after apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_unknown: bool,
    /// True when this attribute's change forces the resource's replacement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forces_replacement: bool,
}

/// One resource's planned change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResourceChange {
    /// Its full address (`module.net.aws_vpc.main[0]`).
    pub address: String,
    /// Its module's address; null at the root.
    pub module: Option<String>,
    /// The resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The resource name.
    pub name: String,
    /// What happens to it.
    pub action: ChangeAction,
    /// The attributes that change, sorted by path.
    pub changes: Vec<AttributeChange>,
    /// The attributes whose change forces a replacement (dotted paths).
    pub replace_paths: Vec<String>,
}

/// One output's planned change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputChange {
    /// The output's name.
    pub name: String,
    /// What happens to it.
    pub action: ChangeAction,
    /// The value before (the marker when sensitive).
    pub before: Value,
    /// The value after (the marker when sensitive; null when known only after apply).
    pub after: Value,
    /// True when the value after is known only after apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_unknown: bool,
    /// When only part of the value after is known only after apply: the paths of those
    /// parts inside it, steps joined by dots (`1` is a list's second element), sorted.
    /// Their place in `after` holds null. Empty when the value is known, or when all of it
    /// is unknown (`after_unknown`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_paths: Vec<String>,
}

/// How many resources each action touches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanCounts {
    /// Created.
    pub create: usize,
    /// Updated in place.
    pub update: usize,
    /// Destroyed.
    pub delete: usize,
    /// Replaced.
    pub replace: usize,
    /// Read (data sources).
    pub read: usize,
    /// Unchanged.
    pub no_op: usize,
}

impl PlanCounts {
    /// Terraform's summary: `(to add, to change, to destroy)`, a replacement counting as
    /// one add and one destroy.
    pub fn terraform_summary(&self) -> (usize, usize, usize) {
        (
            self.create + self.replace,
            self.update,
            self.delete + self.replace,
        )
    }

    fn count(&mut self, action: ChangeAction) {
        let n = match action {
            ChangeAction::Create => &mut self.create,
            ChangeAction::Update => &mut self.update,
            ChangeAction::Delete => &mut self.delete,
            ChangeAction::Replace => &mut self.replace,
            ChangeAction::Read => &mut self.read,
            ChangeAction::NoOp => &mut self.no_op,
        };
        *n += 1;
    }
}

/// A whole plan, for people.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanView {
    /// Every resource change, in the document's order.
    pub resource_changes: Vec<ResourceChange>,
    /// Every output change, by name.
    pub output_changes: Vec<OutputChange>,
    /// The counts over every resource change.
    pub counts: PlanCounts,
}

/// One page of a plan (`GET /v1/jobs/{id}/plan`): up to [`PAGE_MAX`] resource changes,
/// with the output changes and counts of the whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanPage {
    /// True when the job has plan data; false with a reason otherwise.
    pub available: bool,
    /// Why there is no plan data (absent when available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// This page's resource changes.
    pub resource_changes: Vec<ResourceChange>,
    /// Every output change (on every page).
    pub output_changes: Vec<OutputChange>,
    /// The counts over the whole plan.
    pub counts: PlanCounts,
    /// How many resource changes the whole plan has.
    pub total_resources: usize,
    /// The cursor of the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl PlanPage {
    /// The page that says there is no plan data, and why.
    pub fn unavailable(reason: impl Into<String>) -> PlanPage {
        PlanPage {
            available: false,
            reason: Some(reason.into()),
            resource_changes: Vec::new(),
            output_changes: Vec::new(),
            counts: PlanCounts::default(),
            total_resources: 0,
            next_cursor: None,
        }
    }
}

impl PlanView {
    /// The view of a redacted `show -json` document. Entries that are not objects are
    /// skipped; missing fields read as empty.
    pub fn from_document(doc: &Value) -> PlanView {
        let mut view = PlanView::default();
        if let Some(changes) = doc.get("resource_changes").and_then(Value::as_array) {
            for entry in changes {
                if let Some(change) = resource_change(entry) {
                    view.counts.count(change.action);
                    view.resource_changes.push(change);
                }
            }
        }
        if let Some(outputs) = doc.get("output_changes").and_then(Value::as_object) {
            for (name, change) in outputs {
                let mut unknown = Vec::new();
                unknown_paths(
                    change.get("after_unknown").unwrap_or(&Value::Null),
                    "",
                    &mut unknown,
                    0,
                );
                let after_unknown = unknown.iter().any(String::is_empty);
                if after_unknown {
                    unknown.clear();
                }
                unknown.sort();
                unknown.dedup();
                view.output_changes.push(OutputChange {
                    name: name.clone(),
                    action: action_of(change),
                    before: change.get("before").cloned().unwrap_or(Value::Null),
                    after: change.get("after").cloned().unwrap_or(Value::Null),
                    after_unknown,
                    unknown_paths: unknown,
                });
            }
        }
        view
    }

    /// The page of at most `limit` (1 to [`PAGE_MAX`]) resource changes that starts at
    /// `cursor` (from a previous page; `None`: the first page). `Err` when the cursor is
    /// not one this function returned.
    pub fn page(&self, cursor: Option<&str>, limit: usize) -> Result<PlanPage, String> {
        let start = match cursor {
            None => 0,
            Some(c) => decode_cursor(c)
                .filter(|&i| i > 0 && i < self.resource_changes.len())
                .ok_or_else(|| "is not a cursor this API returned".to_string())?,
        };
        let limit = limit.clamp(1, PAGE_MAX);
        let end = (start + limit).min(self.resource_changes.len());
        Ok(PlanPage {
            available: true,
            reason: None,
            resource_changes: self.resource_changes[start..end].to_vec(),
            output_changes: self.output_changes.clone(),
            counts: self.counts,
            total_resources: self.resource_changes.len(),
            next_cursor: (end < self.resource_changes.len()).then(|| encode_cursor(end)),
        })
    }
}

/// The cursor of the page starting at resource `index`: the hex of `p1:<index>`.
fn encode_cursor(index: usize) -> String {
    format!("p1:{index}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 64 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?)
        .ok()?
        .strip_prefix("p1:")?
        .parse()
        .ok()
}

fn action_of(change: &Value) -> ChangeAction {
    let actions: Vec<&str> = change
        .get("actions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    ChangeAction::from_terraform(&actions)
}

fn text(entry: &Value, key: &str) -> String {
    entry
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn resource_change(entry: &Value) -> Option<ResourceChange> {
    entry.as_object()?;
    let change = entry.get("change").cloned().unwrap_or(Value::Null);
    let action = action_of(&change);
    let replace_paths: Vec<String> = change
        .get("replace_paths")
        .and_then(Value::as_array)
        .map(|paths| paths.iter().map(path_text).collect())
        .unwrap_or_default();
    let changes = if action == ChangeAction::NoOp {
        Vec::new()
    } else {
        attribute_changes(&change, &replace_paths)
    };
    Some(ResourceChange {
        address: text(entry, "address"),
        module: entry
            .get("module_address")
            .and_then(Value::as_str)
            .map(String::from),
        resource_type: text(entry, "type"),
        name: text(entry, "name"),
        action,
        changes,
        replace_paths,
    })
}

/// A `replace_paths` entry (an array of keys and indexes) as a dotted path.
fn path_text(path: &Value) -> String {
    match path {
        Value::Array(steps) => steps
            .iter()
            .map(|s| match s {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("."),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The leaves of `before` and `after` that differ, and those unknown after apply.
fn attribute_changes(change: &Value, replace_paths: &[String]) -> Vec<AttributeChange> {
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut unknown = Vec::new();
    flatten(
        change.get("before").unwrap_or(&Value::Null),
        "",
        &mut before,
        0,
    );
    flatten(
        change.get("after").unwrap_or(&Value::Null),
        "",
        &mut after,
        0,
    );
    unknown_paths(
        change.get("after_unknown").unwrap_or(&Value::Null),
        "",
        &mut unknown,
        0,
    );
    let before: Map<String, Value> = before.into_iter().collect();
    let after: Map<String, Value> = after.into_iter().collect();
    let mut paths: Vec<&String> = before.keys().chain(after.keys()).collect();
    paths.extend(unknown.iter());
    paths.sort();
    paths.dedup();
    let forces = |path: &str| {
        replace_paths.iter().any(|r| {
            path == r
                || path.starts_with(&format!("{r}."))
                || (!path.is_empty() && r.starts_with(&format!("{path}.")))
        })
    };
    paths
        .into_iter()
        .filter_map(|path| {
            let is_unknown = unknown.iter().any(|u| u == path);
            let b = before.get(path).cloned().unwrap_or(Value::Null);
            let a = if is_unknown {
                Value::Null
            } else {
                after.get(path).cloned().unwrap_or(Value::Null)
            };
            (is_unknown || a != b).then(|| AttributeChange {
                path: path.clone(),
                before: b,
                after: a,
                after_unknown: is_unknown,
                forces_replacement: forces(path),
            })
        })
        .collect()
}

fn join(prefix: &str, step: &str) -> String {
    if prefix.is_empty() {
        step.to_string()
    } else {
        format!("{prefix}.{step}")
    }
}

/// Leaves of `value` by dotted path: scalars, empty collections, and anything deeper than
/// [`MAX_DEPTH`]. A null leaf is left out (absent and null read the same).
fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, Value)>, depth: usize) {
    match value {
        Value::Object(fields) if !fields.is_empty() && depth < MAX_DEPTH => {
            for (k, v) in fields {
                flatten(v, &join(prefix, k), out, depth + 1);
            }
        }
        Value::Array(items) if !items.is_empty() && depth < MAX_DEPTH => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, &join(prefix, &i.to_string()), out, depth + 1);
            }
        }
        Value::Null => {}
        leaf => out.push((prefix.to_string(), leaf.clone())),
    }
}

/// The paths `after_unknown` marks `true`.
fn unknown_paths(mask: &Value, prefix: &str, out: &mut Vec<String>, depth: usize) {
    match mask {
        Value::Bool(true) => out.push(prefix.to_string()),
        Value::Object(fields) if depth < MAX_DEPTH => {
            for (k, v) in fields {
                unknown_paths(v, &join(prefix, k), out, depth + 1);
            }
        }
        Value::Array(items) if depth < MAX_DEPTH => {
            for (i, v) in items.iter().enumerate() {
                unknown_paths(v, &join(prefix, &i.to_string()), out, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
