//! Scrubbing the values the runner knows are secret (the job's sensitive variables, its
//! platform secrets) out of a plan document: inside any string, and inside object keys,
//! instance keys (`index`) and the instance keys of addresses (`aws_x.y["<key>"]`), with
//! the walk over a document's strings that leaves its structural fields alone.

use serde_json::{Map, Value};

use super::redact::{MARKER, MAX_DEPTH, SCRUB_MIN_CHARS};

/// Replaces every occurrence of each of `secrets` (of at least [`SCRUB_MIN_CHARS`]
/// characters) by [`MARKER`] in every string value of `value`, in every object key below a
/// value or a mask (a map key), in every instance key (`index`, `instance_key`) and in the
/// instance keys of every address (`module.m["<key>"].aws_x.y["<key>"]`, where a
/// `for_each` key shows; matched as written and as Terraform quotes it there). Terraform's
/// other structural fields outside any value (actions, types, names, modes, versions) are
/// left alone, so that a secret such as `"create"` cannot erase the plan's shape. The
/// pilot also passes the values of the job's sensitive variables here.
pub fn scrub<'a>(value: &mut Value, values: impl IntoIterator<Item = &'a str>) {
    let mut secrets: Vec<String> = Vec::new();
    for secret in values {
        if secret.chars().count() < SCRUB_MIN_CHARS || secret == MARKER {
            continue;
        }
        secrets.push(secret.to_string());
        // As quoted in an address: JSON's escapes, and HCL's for template sequences.
        let json = serde_json::to_string(secret).unwrap_or_default();
        let quoted = json
            .get(1..json.len().saturating_sub(1))
            .unwrap_or_default();
        let hcl = quoted.replace("${", "$${").replace("%{", "%%{");
        for variant in [quoted.to_string(), hcl] {
            if variant != secret && variant.chars().count() >= SCRUB_MIN_CHARS {
                secrets.push(variant);
            }
        }
    }
    if secrets.is_empty() {
        return;
    }
    // Longest first, so a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    walk_strings(value, false, true, 0, &mut |s: &mut String| {
        scrub_string(s, &secrets)
    });
}

/// Fields of a plan document that name things rather than hold values.
const STRUCTURAL: &[&str] = &[
    "action_trigger_event",
    "actions",
    "action_reason",
    "deposed",
    "format_version",
    "mode",
    "name",
    "on_failure",
    "provider_name",
    "reason",
    "terraform_version",
    "type",
];

/// Fields that hold an address: structural, but a `for_each` key shows in their instance
/// keys (`["<key>"]`), which [`scrub`] reaches.
const ADDRESSES: &[&str] = &[
    "address",
    "calling_resource_address",
    "module",
    "module_address",
    "previous_address",
    "to_display",
    "triggering_resource_address",
];

/// Fields that hold an instance key (a `count` index or a `for_each` key), which [`scrub`]
/// reaches.
const INDEXES: &[&str] = &["index", "instance_key"];

/// Fields that hold values, or masks and paths that mirror a value's keys: below them
/// every string is scrubbed, structural names or not, and [`scrub`] reaches the keys.
const VALUES: &[&str] = &[
    "after",
    "after_sensitive",
    "after_unknown",
    "before",
    "before_sensitive",
    "config_sensitive",
    "config_unknown",
    "config_values",
    "constant_value",
    "default",
    "replace_paths",
    "sensitive_values",
    "value",
    "values",
];

/// Calls `f` on every string value of `value`, skipping the structural fields outside
/// any value; with `names`, also on the object keys below a value, on instance keys and
/// on the instance keys of addresses. Anything deeper than [`MAX_DEPTH`] is replaced whole.
pub(super) fn walk_strings(
    value: &mut Value,
    in_values: bool,
    names: bool,
    depth: usize,
    f: &mut dyn FnMut(&mut String),
) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) if depth < MAX_DEPTH => {
            for item in items {
                walk_strings(item, in_values, names, depth + 1, f);
            }
        }
        Value::Object(fields) if depth < MAX_DEPTH => {
            if in_values && names {
                rename_keys(fields, f);
            }
            for (key, v) in fields.iter_mut() {
                let key = key.as_str();
                if in_values || VALUES.contains(&key) {
                    walk_strings(v, true, names, depth + 1, f);
                } else if ADDRESSES.contains(&key) {
                    match v {
                        Value::String(address) if names => address_keys(address, f),
                        Value::String(_) => {}
                        _ => walk_strings(v, false, names, depth + 1, f),
                    }
                } else if INDEXES.contains(&key) {
                    if names {
                        walk_strings(v, true, names, depth + 1, f);
                    }
                } else if !STRUCTURAL.contains(&key) {
                    walk_strings(v, false, names, depth + 1, f);
                }
            }
        }
        Value::Array(_) | Value::Object(_) => *value = Value::String(MARKER.into()),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Calls `f` on every key of `fields`, renaming the keys it changes (a renamed key that
/// meets another gets a ` (2)`, ` (3)`… suffix, so no entry is lost).
fn rename_keys(fields: &mut Map<String, Value>, f: &mut dyn FnMut(&mut String)) {
    let renames: Vec<(String, String)> = fields
        .keys()
        .filter_map(|key| {
            let mut renamed = key.clone();
            f(&mut renamed);
            (renamed != *key).then(|| (key.clone(), renamed))
        })
        .collect();
    for (old, new) in renames {
        if let Some(v) = fields.remove(&old) {
            let mut unique = new.clone();
            let mut n = 1;
            while fields.contains_key(&unique) {
                n += 1;
                unique = format!("{new} ({n})");
            }
            fields.insert(unique, v);
        }
    }
}

/// Calls `f` on the text of every string instance key of `address` (between `["` and the
/// next unescaped `"`), as written there.
fn address_keys(address: &mut String, f: &mut dyn FnMut(&mut String)) {
    if !address.contains("[\"") {
        return;
    }
    let mut out = String::with_capacity(address.len());
    let mut rest = address.as_str();
    while let Some(start) = rest.find("[\"") {
        out.push_str(&rest[..start + 2]);
        let after = &rest[start + 2..];
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let closes = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            })
            .map_or(after.len(), |(i, _)| i);
        let mut key = after[..end].to_string();
        f(&mut key);
        out.push_str(&key);
        rest = &after[end..];
    }
    out.push_str(rest);
    *address = out;
}

fn scrub_string(s: &mut String, secrets: &[String]) {
    for secret in secrets {
        if s.contains(secret.as_str()) {
            *s = s.replace(secret.as_str(), MARKER);
        }
    }
}
