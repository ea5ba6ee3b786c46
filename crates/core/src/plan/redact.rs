//! Redaction of a `terraform show -json` plan document: every value Terraform marks
//! sensitive, every value it gives no mask for, and every sensitive variable, is replaced
//! by [`MARKER`] before the document leaves the runner. It fails closed:
//!
//! - **An allowlist first** ([`super::sections`]): only the sections and fields Sortie
//!   understands are kept; anything else (resource identities, a section a newer Terraform
//!   adds) is dropped until it is handled here.
//! - Terraform marks sensitivity beside the values, with masks that mirror their shape:
//!   `true` (the whole value), an object of masks by key, or an array of masks by index
//!   (`before_sensitive`/`after_sensitive` in `resource_changes`, `resource_drift`,
//!   `output_changes` and the `resource_change` of each `deferred_changes` entry;
//!   `config_sensitive` beside an action invocation's `config_values`, in
//!   `action_invocations` and `deferred_action_invocations`; `sensitive_values` beside a
//!   resource's `values` in `planned_values` and `prior_state`; `sensitive: true` on an
//!   output). **A missing mask replaces the whole value**: Terraform before 0.15 writes
//!   none.
//! - **Masks that leave out the provider schema's sensitivity replace the whole value**:
//!   resource masks before Terraform 0.15.2 ([`SCHEMA_MASKS_SINCE`]) and the prior state's
//!   before 1.4.6 ([`STATE_SCHEMA_MASKS_SINCE`]), read from `terraform_version` (a missing
//!   or unreadable version counts as old).
//! - Variables have no mask: a variable is sensitive when the job says so or its
//!   declaration does (`configuration.root_module.variables.<name>.sensitive`), and then
//!   its value, its declared default and every constant a module call passes to a
//!   sensitive variable are replaced. **Every constant of a provider configuration**
//!   (`configuration.provider_config.*.expressions`) is replaced: a hard-coded provider
//!   token has no mask anywhere.
//!
//! A last pass replaces every other string value, anywhere in the document, equal to a
//! string that was masked (at least [`SCRUB_MIN_CHARS`] characters long), so a sensitive
//! value that Terraform copied somewhere unmarked does not leak either. [`scrub`](super::scrub())
//! goes further for the few values the runner knows are secret.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::scrub::walk_strings;
use super::sections::{keep_known, PLAN};

/// What replaces a sensitive value.
pub const MARKER: &str = "(sensitive value)";

/// The shortest masked string also scrubbed from the rest of the document (shorter
/// strings, like `"a"` or `"on"`, would erase unrelated text).
pub const SCRUB_MIN_CHARS: usize = 4;

/// The first Terraform whose resource masks (`before_sensitive`, `after_sensitive`,
/// `planned_values`' `sensitive_values`) include the provider schema's sensitivity
/// (hashicorp/terraform#28523, backported to 0.15.2); before it, resource values are
/// replaced whole.
pub const SCHEMA_MASKS_SINCE: (u64, u64, u64) = (0, 15, 2);

/// The first Terraform whose state masks (`prior_state`'s `sensitive_values`) include the
/// provider schema's sensitivity (hashicorp/terraform#33059, 1.4.6); before it, prior
/// state values are replaced whole.
pub const STATE_SCHEMA_MASKS_SINCE: (u64, u64, u64) = (1, 4, 6);

/// Most nesting levels walked; deeper values are replaced whole (Terraform's documents are
/// far shallower; this bounds the recursion).
pub(super) const MAX_DEPTH: usize = 128;

/// Redacts `doc`, a `terraform show -json` plan, in place. `sensitive_variables` names the
/// job's sensitive variables (whatever their declarations say). Anything but a JSON
/// object becomes an empty object.
pub fn redact(doc: &mut Value, sensitive_variables: &[String]) {
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    keep_known(doc, &PLAN, 0);
    let mut masked = Masked::default();
    let Some(root) = doc.as_object_mut() else {
        return;
    };
    let masks = Trust {
        schema: version_at_least(root, SCHEMA_MASKS_SINCE),
    };
    let state_masks = Trust {
        schema: version_at_least(root, STATE_SCHEMA_MASKS_SINCE),
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
    for key in ["resource_changes", "resource_drift", "deferred_changes"] {
        if let Some(Value::Array(changes)) = root.get_mut(key) {
            for change in changes.iter_mut() {
                // A deferred change wraps a resource change of the same shape.
                let change = match key {
                    "deferred_changes" => change.get_mut("resource_change"),
                    _ => Some(change),
                };
                if let Some(change) = change.and_then(|c| c.get_mut("change")) {
                    redact_change(change, masks, &mut masked);
                }
            }
        }
    }
    for key in ["action_invocations", "deferred_action_invocations"] {
        if let Some(Value::Array(invocations)) = root.get_mut(key) {
            for invocation in invocations.iter_mut() {
                let invocation = match key {
                    "deferred_action_invocations" => invocation.get_mut("action_invocation"),
                    _ => Some(invocation),
                };
                if let Some(invocation) = invocation.and_then(Value::as_object_mut) {
                    // An action's masks include its schema's sensitivity, like a resource's.
                    let mask = invocation.get("config_sensitive").cloned();
                    if let Some(values) = invocation.get_mut("config_values") {
                        apply_mask_or_replace(values, mask.as_ref(), masks, &mut masked);
                    }
                }
            }
        }
    }
    if let Some(Value::Object(outputs)) = root.get_mut("output_changes") {
        for change in outputs.values_mut() {
            // An output's masks are its declaration's `sensitive`: no schema involved.
            redact_change(change, Trust { schema: true }, &mut masked);
        }
    }
    if let Some(values) = root.get_mut("planned_values") {
        redact_values(values, masks, &mut masked);
    }
    if let Some(values) = root
        .get_mut("prior_state")
        .and_then(|s| s.get_mut("values"))
    {
        redact_values(values, state_masks, &mut masked);
    }
    if let Some(configuration) = root.get_mut("configuration") {
        if let Some(Value::Object(providers)) = configuration.get_mut("provider_config") {
            for provider in providers.values_mut() {
                if let Some(expressions) = provider.get_mut("expressions") {
                    redact_constants(expressions, &mut masked, 0);
                }
            }
        }
        if let Some(module) = configuration.get_mut("root_module") {
            redact_config_module(module, &sensitive_vars, &mut masked, 0);
        }
    }
    replace_copies(doc, &masked.strings);
}

/// Whether a document's masks can be trusted: `schema` when they include the provider
/// schema's sensitivity (by the Terraform version that wrote them).
#[derive(Clone, Copy)]
struct Trust {
    schema: bool,
}

/// True when the document's `terraform_version` is `since` or later. A pre-release
/// (`1.4.6-rc1`) is before its release; a missing or unreadable version is before every
/// release (fail closed).
fn version_at_least(root: &Map<String, Value>, since: (u64, u64, u64)) -> bool {
    let Some(text) = root.get("terraform_version").and_then(Value::as_str) else {
        return false;
    };
    let text = text.split_once('+').map_or(text, |(v, _)| v);
    let (release, pre_release) = match text.split_once('-') {
        Some((release, _)) => (release, true),
        None => (text, false),
    };
    let parts: Vec<Option<u64>> = release.split('.').map(|p| p.parse().ok()).collect();
    let version = match parts.as_slice() {
        [Some(major), Some(minor), Some(patch)] => (*major, *minor, *patch),
        _ => return false,
    };
    version > since || (version == since && !pre_release)
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
        walk_strings(doc, false, false, 0, &mut |s: &mut String| {
            if masked.contains(s.as_str()) {
                *s = MARKER.into();
            }
        });
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
/// A value without its mask, or whose masks `trust` does not cover, is replaced whole.
fn redact_change(change: &mut Value, trust: Trust, masked: &mut Masked) {
    let Some(change) = change.as_object_mut() else {
        return;
    };
    for (value_key, mask_key) in [("before", "before_sensitive"), ("after", "after_sensitive")] {
        let mask = change.get(mask_key).cloned();
        if let Some(value) = change.get_mut(value_key) {
            apply_mask_or_replace(value, mask.as_ref(), trust, masked);
        }
    }
}

/// Applies `mask` to `value` when there is one and `trust` covers it; otherwise replaces
/// the value whole. A null value has nothing to hide and stays null.
fn apply_mask_or_replace(
    value: &mut Value,
    mask: Option<&Value>,
    trust: Trust,
    masked: &mut Masked,
) {
    match mask {
        _ if value.is_null() => {}
        Some(mask) if trust.schema => apply_mask(value, mask, masked, 0),
        _ => masked.replace(value),
    }
}

/// A values representation (`planned_values`, `prior_state.values`): outputs by their
/// `sensitive` flag (absent: replaced), resources by their `sensitive_values`, modules
/// recursively.
fn redact_values(values: &mut Value, trust: Trust, masked: &mut Masked) {
    if let Some(Value::Object(outputs)) = values.get_mut("outputs") {
        for output in outputs.values_mut() {
            let open = output.get("sensitive").and_then(Value::as_bool) == Some(false);
            if let (false, Some(value)) = (open, output.get_mut("value")) {
                if !value.is_null() {
                    masked.replace(value);
                }
            }
        }
    }
    if let Some(module) = values.get_mut("root_module") {
        redact_module_values(module, trust, masked, 0);
    }
}

fn redact_module_values(module: &mut Value, trust: Trust, masked: &mut Masked, depth: usize) {
    if let Some(Value::Array(resources)) = module.get_mut("resources") {
        for resource in resources.iter_mut() {
            let Some(resource) = resource.as_object_mut() else {
                continue;
            };
            let mask = resource.get("sensitive_values").cloned();
            if let Some(v) = resource.get_mut("values") {
                apply_mask_or_replace(v, mask.as_ref(), trust, masked);
            }
        }
    }
    if let Some(Value::Array(children)) = module.get_mut("child_modules") {
        for child in children.iter_mut() {
            if depth < MAX_DEPTH {
                redact_module_values(child, trust, masked, depth + 1);
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
