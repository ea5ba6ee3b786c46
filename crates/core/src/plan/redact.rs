//! Redaction of a `terraform show -json` plan document: every value Terraform marks
//! sensitive, and every sensitive variable, is replaced by [`MARKER`] before the document
//! leaves the runner.
//!
//! Terraform marks sensitivity beside the values, with masks that mirror their shape: `true`
//! (the whole value), an object of masks by key, or an array of masks by index
//! (`before_sensitive`/`after_sensitive` in `resource_changes`, `resource_drift` and
//! `output_changes`; `sensitive_values` beside a resource's `values` in `planned_values`
//! and `prior_state`; `sensitive: true` on an output). Variables have no mask: a variable is
//! sensitive when the job says so or its declaration does
//! (`configuration.root_module.variables.<name>.sensitive`), and then its value, its
//! declared default and every constant a module call passes to a sensitive variable are
//! replaced.
//!
//! A last pass replaces every other string value, anywhere in the document, equal to a
//! string that was masked (at least [`SCRUB_MIN_CHARS`] characters long), so a sensitive
//! value that Terraform copied somewhere unmarked does not leak either. [`scrub`] goes
//! further for the few values the runner knows are secret (the job's sensitive variables,
//! its platform secrets): it replaces them inside any string.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

/// What replaces a sensitive value.
pub const MARKER: &str = "(sensitive value)";

/// The shortest masked string also scrubbed from the rest of the document (shorter
/// strings, like `"a"` or `"on"`, would erase unrelated text).
pub const SCRUB_MIN_CHARS: usize = 4;

/// Most nesting levels walked; deeper values are replaced whole (Terraform's documents are
/// far shallower; this bounds the recursion).
const MAX_DEPTH: usize = 128;

/// Redacts `doc`, a `terraform show -json` plan, in place. `sensitive_variables` names the
/// job's sensitive variables (whatever their declarations say).
pub fn redact(doc: &mut Value, sensitive_variables: &[String]) {
    let mut masked = Masked::default();
    let Some(root) = doc.as_object_mut() else {
        return;
    };
    let sensitive_vars = sensitive_variable_names(root, sensitive_variables);
    if let Some(Value::Object(vars)) = root.get_mut("variables") {
        for (name, var) in vars.iter_mut() {
            if sensitive_vars.contains(name) {
                if let Some(value) = var.as_object_mut().and_then(|v| v.get_mut("value")) {
                    masked.replace(value);
                }
            }
        }
    }
    for key in ["resource_changes", "resource_drift"] {
        if let Some(Value::Array(changes)) = root.get_mut(key) {
            for change in changes.iter_mut() {
                if let Some(change) = change.get_mut("change") {
                    redact_change(change, &mut masked);
                }
            }
        }
    }
    if let Some(Value::Object(outputs)) = root.get_mut("output_changes") {
        for change in outputs.values_mut() {
            redact_change(change, &mut masked);
        }
    }
    if let Some(values) = root.get_mut("planned_values") {
        redact_values(values, &mut masked);
    }
    if let Some(values) = root
        .get_mut("prior_state")
        .and_then(|s| s.get_mut("values"))
    {
        redact_values(values, &mut masked);
    }
    if let Some(module) = root
        .get_mut("configuration")
        .and_then(|c| c.get_mut("root_module"))
    {
        redact_config_module(module, &sensitive_vars, &mut masked, 0);
    }
    replace_copies(doc, &masked.strings);
}

/// Replaces every string value equal to one of `masked` (at least [`SCRUB_MIN_CHARS`]
/// characters), outside the structural fields: linear in the document, however many
/// values were masked.
fn replace_copies(doc: &mut Value, masked: &BTreeSet<String>) {
    let masked: HashSet<&str> = masked
        .iter()
        .map(String::as_str)
        .filter(|s| s.chars().count() >= SCRUB_MIN_CHARS)
        .collect();
    if !masked.is_empty() {
        walk_strings(doc, false, 0, &mut |s: &mut String| {
            if masked.contains(s.as_str()) {
                *s = MARKER.into();
            }
        });
    }
}

/// Replaces every occurrence of each of `secrets` (of at least [`SCRUB_MIN_CHARS`]
/// characters) in every string value of `value` by [`MARKER`], except in Terraform's
/// structural fields outside any value (actions, addresses, types, names, versions), which
/// a secret such as `"create"` must not erase. The pilot also passes the values of
/// the job's sensitive variables here.
pub fn scrub<'a>(value: &mut Value, secrets: impl IntoIterator<Item = &'a str>) {
    let mut secrets: Vec<&str> = secrets
        .into_iter()
        .filter(|s| s.chars().count() >= SCRUB_MIN_CHARS && *s != MARKER)
        .collect();
    if secrets.is_empty() {
        return;
    }
    // Longest first, so a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    walk_strings(value, false, 0, &mut |s: &mut String| {
        scrub_string(s, &secrets)
    });
}

/// Fields of a plan document that name things rather than hold values.
const STRUCTURAL: &[&str] = &[
    "actions",
    "action_reason",
    "address",
    "deposed",
    "format_version",
    "index",
    "mode",
    "module_address",
    "name",
    "previous_address",
    "provider_name",
    "replace_paths",
    "terraform_version",
    "type",
];

/// Fields that hold values: below them every field is scrubbed, structural names or not.
const VALUES: &[&str] = &[
    "after",
    "before",
    "constant_value",
    "default",
    "value",
    "values",
];

/// Calls `f` on every string value of `value`, skipping the structural fields outside
/// any value; anything deeper than [`MAX_DEPTH`] is replaced whole.
fn walk_strings(value: &mut Value, in_values: bool, depth: usize, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) if depth < MAX_DEPTH => {
            for item in items {
                walk_strings(item, in_values, depth + 1, f);
            }
        }
        Value::Object(fields) if depth < MAX_DEPTH => {
            for (key, v) in fields.iter_mut() {
                let key = key.as_str();
                if in_values || !STRUCTURAL.contains(&key) {
                    let below = in_values || VALUES.contains(&key);
                    walk_strings(v, below, depth + 1, f);
                }
            }
        }
        Value::Array(_) | Value::Object(_) => *value = Value::String(MARKER.into()),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn scrub_string(s: &mut String, secrets: &[&str]) {
    for secret in secrets {
        if s.contains(secret) {
            *s = s.replace(secret, MARKER);
        }
    }
}

/// The job's sensitive variables and those declared sensitive at the root.
fn sensitive_variable_names(root: &Map<String, Value>, job: &[String]) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = job.iter().cloned().collect();
    if let Some(Value::Object(vars)) = root
        .get("configuration")
        .and_then(|c| c.get("root_module"))
        .and_then(|m| m.get("variables"))
    {
        names.extend(declared_sensitive(vars).map(String::from));
    }
    names
}

fn declared_sensitive(vars: &Map<String, Value>) -> impl Iterator<Item = &str> {
    vars.iter()
        .filter(|(_, v)| v.get("sensitive").and_then(Value::as_bool) == Some(true))
        .map(|(name, _)| name.as_str())
}

/// The strings replaced so far (for the last pass).
#[derive(Default)]
struct Masked {
    strings: BTreeSet<String>,
}

impl Masked {
    /// Replaces `value` whole, remembering its strings.
    fn replace(&mut self, value: &mut Value) {
        self.remember(value, 0);
        *value = Value::String(MARKER.into());
    }

    fn remember(&mut self, value: &Value, depth: usize) {
        match value {
            Value::String(s) if s != MARKER => {
                self.strings.insert(s.clone());
            }
            Value::Number(n) => {
                self.strings.insert(n.to_string());
            }
            Value::Array(items) if depth < MAX_DEPTH => {
                items.iter().for_each(|v| self.remember(v, depth + 1))
            }
            Value::Object(fields) if depth < MAX_DEPTH => {
                fields.values().for_each(|v| self.remember(v, depth + 1))
            }
            _ => {}
        }
    }
}

/// Applies a sensitivity mask to `value`: `true` replaces it; an object or array mask
/// recurses by key or index; `false`, `null` and anything else leave it. A structured mask
/// over a value of another shape replaces the value whole when the mask marks anything.
fn apply_mask(value: &mut Value, mask: &Value, masked: &mut Masked, depth: usize) {
    if depth >= MAX_DEPTH {
        if marks_anything(mask, 0) {
            masked.replace(value);
        }
        return;
    }
    match (mask, &mut *value) {
        (Value::Bool(true), _) => masked.replace(value),
        (Value::Object(masks), Value::Object(fields)) => {
            for (key, m) in masks {
                if let Some(v) = fields.get_mut(key) {
                    apply_mask(v, m, masked, depth + 1);
                }
            }
        }
        (Value::Array(masks), Value::Array(items)) => {
            for (v, m) in items.iter_mut().zip(masks) {
                apply_mask(v, m, masked, depth + 1);
            }
        }
        (Value::Object(_) | Value::Array(_), _) if marks_anything(mask, 0) => masked.replace(value),
        _ => {}
    }
}

/// True when `mask` marks any value sensitive.
fn marks_anything(mask: &Value, depth: usize) -> bool {
    match mask {
        Value::Bool(b) => *b,
        _ if depth >= MAX_DEPTH => true,
        Value::Object(m) => m.values().any(|v| marks_anything(v, depth + 1)),
        Value::Array(m) => m.iter().any(|v| marks_anything(v, depth + 1)),
        _ => false,
    }
}

/// A change representation: `before` by `before_sensitive`, `after` by `after_sensitive`.
fn redact_change(change: &mut Value, masked: &mut Masked) {
    let Some(change) = change.as_object_mut() else {
        return;
    };
    for (value_key, mask_key) in [("before", "before_sensitive"), ("after", "after_sensitive")] {
        let Some(mask) = change.get(mask_key).cloned() else {
            continue;
        };
        if let Some(value) = change.get_mut(value_key) {
            apply_mask(value, &mask, masked, 0);
        }
    }
}

/// A values representation (`planned_values`, `prior_state.values`): outputs by their
/// `sensitive` flag, resources by their `sensitive_values`, modules recursively.
fn redact_values(values: &mut Value, masked: &mut Masked) {
    if let Some(Value::Object(outputs)) = values.get_mut("outputs") {
        for output in outputs.values_mut() {
            let sensitive = output.get("sensitive").and_then(Value::as_bool) == Some(true);
            if let (true, Some(value)) = (sensitive, output.get_mut("value")) {
                masked.replace(value);
            }
        }
    }
    if let Some(module) = values.get_mut("root_module") {
        redact_module_values(module, masked, 0);
    }
}

fn redact_module_values(module: &mut Value, masked: &mut Masked, depth: usize) {
    if let Some(Value::Array(resources)) = module.get_mut("resources") {
        for resource in resources.iter_mut() {
            let Some(resource) = resource.as_object_mut() else {
                continue;
            };
            let Some(mask) = resource.get("sensitive_values").cloned() else {
                continue;
            };
            if let Some(v) = resource.get_mut("values") {
                apply_mask(v, &mask, masked, 0);
            }
        }
    }
    if let Some(Value::Array(children)) = module.get_mut("child_modules") {
        for child in children.iter_mut() {
            if depth < MAX_DEPTH {
                redact_module_values(child, masked, depth + 1);
            } else {
                masked.replace(child);
            }
        }
    }
}

/// A configuration module: the defaults of its sensitive variables, the expressions of its
/// sensitive outputs, and the constants its module calls pass to sensitive variables.
fn redact_config_module(
    module: &mut Value,
    sensitive_vars: &BTreeSet<String>,
    masked: &mut Masked,
    depth: usize,
) {
    let Some(module) = module.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(vars)) = module.get_mut("variables") {
        for (name, var) in vars.iter_mut() {
            let declared = var.get("sensitive").and_then(Value::as_bool) == Some(true);
            if declared || sensitive_vars.contains(name) {
                if let Some(default) = var.as_object_mut().and_then(|v| v.get_mut("default")) {
                    masked.replace(default);
                }
            }
        }
    }
    if let Some(Value::Object(outputs)) = module.get_mut("outputs") {
        for output in outputs.values_mut() {
            if output.get("sensitive").and_then(Value::as_bool) == Some(true) {
                if let Some(expr) = output.get_mut("expression") {
                    redact_constants(expr, masked, 0);
                }
            }
        }
    }
    if let Some(Value::Object(calls)) = module.get_mut("module_calls") {
        for call in calls.values_mut() {
            let Some(call) = call.as_object_mut() else {
                continue;
            };
            let child_sensitive: BTreeSet<String> = call
                .get("module")
                .and_then(|m| m.get("variables"))
                .and_then(Value::as_object)
                .map(|vars| declared_sensitive(vars).map(String::from).collect())
                .unwrap_or_default();
            if let Some(Value::Object(exprs)) = call.get_mut("expressions") {
                for (name, expr) in exprs.iter_mut() {
                    if child_sensitive.contains(name) {
                        redact_constants(expr, masked, 0);
                    }
                }
            }
            if let Some(child) = call.get_mut("module") {
                if depth < MAX_DEPTH {
                    redact_config_module(child, &BTreeSet::new(), masked, depth + 1);
                } else {
                    masked.replace(child);
                }
            }
        }
    }
}

/// Replaces every `constant_value` in an expression (or a block of expressions).
fn redact_constants(expr: &mut Value, masked: &mut Masked, depth: usize) {
    if depth >= MAX_DEPTH {
        masked.replace(expr);
        return;
    }
    match expr {
        Value::Object(fields) => {
            for (key, v) in fields.iter_mut() {
                if key == "constant_value" {
                    masked.replace(v);
                } else {
                    redact_constants(v, masked, depth + 1);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| redact_constants(v, masked, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
