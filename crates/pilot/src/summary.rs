//! Change summaries: add/change/destroy counts from `show -json <plan>` where
//! the version has it, and from the plan or apply text otherwise.

use serde_json::Value;
use sortie_core::{ChangeSummary, Operation};

use crate::scrub::Patterns;

/// Counts the resource changes of a `show -json` plan: `create` adds, `update`
/// changes, `delete` destroys, and a replacement (`delete` + `create`) counts
/// as one add and one destroy, as Terraform's own `Plan:` line does.
/// Data source reads, no-ops and forgets are not counted.
pub fn from_plan_json(json: &str) -> Option<ChangeSummary> {
    let plan: Value = serde_json::from_str(json).ok()?;
    let mut summary = ChangeSummary::default();
    let changes = match plan.get("resource_changes") {
        Some(Value::Array(changes)) => changes.as_slice(),
        Some(Value::Null) | None => &[],
        Some(_) => return None,
    };
    for change in changes {
        let actions = change
            .pointer("/change/actions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default();
        for action in actions {
            match action {
                "create" => summary.add += 1,
                "update" => summary.change += 1,
                "delete" => summary.destroy += 1,
                _ => {}
            }
        }
    }
    Some(summary)
}

/// Parses the summary line of `operation`'s text output:
///
/// - plan: `Plan: 1 to add, 2 to change, 0 to destroy.`, or `No changes.` → zeros;
/// - apply: `Apply complete! Resources: 1 added, 0 changed, 0 destroyed.`;
/// - destroy: `Destroy complete! Resources: 3 destroyed.`
///
/// The last matching line wins. `None` when there is no such line.
pub fn from_text(output: &str, operation: Operation) -> Option<ChangeSummary> {
    for line in output.lines().rev() {
        let line = line.trim();
        let found = match operation {
            Operation::Plan => {
                if let Some(rest) = line.strip_prefix("Plan:") {
                    Some(counts(rest))
                } else if line.starts_with("No changes.") {
                    Some(ChangeSummary::default())
                } else {
                    None
                }
            }
            Operation::Apply => line.strip_prefix("Apply complete! Resources:").map(counts),
            Operation::Destroy => line
                .strip_prefix("Destroy complete! Resources:")
                .or_else(|| line.strip_prefix("Apply complete! Resources:"))
                .map(counts),
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Reads `1 to add, 2 to change, 0 to destroy.` or `1 added, 0 changed, 0 destroyed.`
/// (other phrases, such as `1 to import`, are ignored).
fn counts(text: &str) -> ChangeSummary {
    let mut summary = ChangeSummary::default();
    for phrase in text.split(',') {
        let phrase = phrase.trim().trim_end_matches('.');
        let Some((number, word)) = phrase.split_once(' ') else {
            continue;
        };
        let Ok(n) = number.parse::<u32>() else {
            continue;
        };
        match word.trim() {
            "to add" | "added" => summary.add = n,
            "to change" | "changed" => summary.change = n,
            "to destroy" | "destroyed" => summary.destroy = n,
            _ => {}
        }
    }
    summary
}

/// `output -json`'s document with the value of every output not plainly marked
/// `sensitive: false` removed (it is stored as `{"sensitive": true, "type": …}`), and every
/// secret of `secrets` replaced inside the values kept ([`scrub_value`]: a non-sensitive
/// output built from a secret, `"pg://app:${var.db_password}@db"`), as JSON bytes; `None`
/// when it is not such a document (nothing is uploaded then: fail closed).
pub fn redact_outputs(json: &str, secrets: &Patterns) -> Option<Vec<u8>> {
    let mut outputs: serde_json::Map<String, Value> = serde_json::from_str(json).ok()?;
    for output in outputs.values_mut() {
        let obj = output.as_object_mut()?;
        if obj.get("sensitive").and_then(Value::as_bool) != Some(false) {
            obj.remove("value");
            obj.insert("sensitive".into(), Value::Bool(true));
        } else if let Some(value) = obj.get_mut("value") {
            scrub_value(value, secrets);
        }
    }
    serde_json::to_vec_pretty(&outputs).ok()
}

/// Replaces every secret of `secrets` inside `value`, at any depth: in strings, in object
/// keys, and in numbers and booleans whose text holds one (they become the scrubbed
/// text, a string).
pub fn scrub_value(value: &mut Value, secrets: &Patterns) {
    if secrets.is_empty() {
        return;
    }
    match value {
        Value::String(s) => *s = secrets.scrub_str(s),
        Value::Number(_) | Value::Bool(_) => {
            let text = value.to_string();
            let scrubbed = secrets.scrub_str(&text);
            if scrubbed != text {
                *value = Value::String(scrubbed);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, secrets)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut v) in entries {
                scrub_value(&mut v, secrets);
                map.insert(secrets.scrub_str(&key), v);
            }
        }
        Value::Null => {}
    }
}

/// The summary as a short phrase for the log's last line.
pub fn describe(summary: &ChangeSummary, operation: Operation) -> String {
    match operation {
        Operation::Plan => format!(
            "{} to add, {} to change, {} to destroy",
            summary.add, summary.change, summary.destroy
        ),
        _ => format!(
            "{} added, {} changed, {} destroyed",
            summary.add, summary.change, summary.destroy
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensitive_output_is_kept_without_its_value() {
        let json = r#"{"a":{"sensitive":false,"type":"string","value":"x"},"b":{"sensitive":true,"type":"string","value":"hunter2"},"c":{"type":"string","value":"unflagged"}}"#;
        let out: Value =
            serde_json::from_slice(&redact_outputs(json, &Patterns::default()).unwrap()).unwrap();
        assert_eq!(out["a"]["value"], "x");
        assert_eq!(
            out["b"],
            serde_json::json!({"sensitive": true, "type": "string"})
        );
        assert_eq!(
            out["c"],
            serde_json::json!({"sensitive": true, "type": "string"})
        );
        assert!(!out.to_string().contains("hunter2"));
        assert!(redact_outputs("not json", &Patterns::default()).is_none());
    }

    #[test]
    fn a_secret_inside_a_plain_output_is_replaced_at_any_depth() {
        use crate::scrub::MARKER;
        let secrets = Patterns::new(["S3cret-value", "12345", "q\"x"]);
        let json = r#"{
          "dsn": {"sensitive": false, "type": "string", "value": "pg://app:S3cret-value@db"},
          "nested": {"sensitive": false, "type": ["object", {}], "value": {
            "list": ["a", "S3cret-valueS3cret-value", {"deep": ["x S3cret-value y"]}],
            "S3cret-value-key": true, "port": 12345, "big": 9912345, "other": 7,
            "quoted": "say q\"x"}},
          "plain": {"sensitive": false, "type": "string", "value": "nothing secret"},
          "marked": {"sensitive": true, "type": "string", "value": "S3cret-value"}
        }"#;
        let bytes = redact_outputs(json, &secrets).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("S3cret-value"), "{text}");
        assert!(!text.contains("12345"), "{text}");
        assert!(!text.contains("q\\\"x"), "{text}");
        let out: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(out["dsn"]["value"], format!("pg://app:{MARKER}@db"));
        let nested = &out["nested"]["value"];
        assert_eq!(nested["list"][1], format!("{MARKER}{MARKER}"));
        assert_eq!(nested["list"][2]["deep"][0], format!("x {MARKER} y"));
        assert_eq!(nested[format!("{MARKER}-key")], true);
        assert_eq!(nested["port"], MARKER);
        assert_eq!(nested["big"], format!("99{MARKER}"));
        assert_eq!(nested["other"], 7);
        assert_eq!(nested["quoted"], format!("say {MARKER}"));
        assert_eq!(out["plain"]["value"], "nothing secret");
        assert_eq!(
            out["marked"],
            serde_json::json!({"sensitive": true, "type": "string"})
        );
        // Nothing to scrub: the values are kept as they are.
        let kept: Value =
            serde_json::from_slice(&redact_outputs(json, &Patterns::default()).unwrap()).unwrap();
        assert_eq!(kept["dsn"]["value"], "pg://app:S3cret-value@db");
    }

    #[test]
    fn an_output_document_that_is_not_one_uploads_nothing() {
        let secrets = Patterns::new(["S3cret-value"]);
        for bad in ["[]", "\"S3cret-value\"", r#"{"dsn": "S3cret-value"}"#, "{"] {
            assert_eq!(redact_outputs(bad, &secrets), None, "{bad}");
        }
    }

    fn s(add: u32, change: u32, destroy: u32) -> ChangeSummary {
        ChangeSummary {
            add,
            change,
            destroy,
            has_changes: None,
        }
    }

    #[test]
    fn plan_text_of_0_11_and_current_versions() {
        let v011 = "Refreshing Terraform state in-memory prior to plan...\n\n  + null_resource.a\n\nPlan: 1 to add, 2 to change, 0 to destroy.\n\n------\n";
        assert_eq!(from_text(v011, Operation::Plan), Some(s(1, 2, 0)));
        let import = "Plan: 1 to import, 3 to add, 0 to change, 4 to destroy.\n";
        assert_eq!(from_text(import, Operation::Plan), Some(s(3, 0, 4)));
        let none_011 = "No changes. Infrastructure is up-to-date.\n\nThis means that Terraform\n";
        assert_eq!(from_text(none_011, Operation::Plan), Some(s(0, 0, 0)));
        let none_1x = "No changes. Your infrastructure matches the configuration.\n";
        assert_eq!(from_text(none_1x, Operation::Plan), Some(s(0, 0, 0)));
        assert_eq!(from_text("Initializing...\n", Operation::Plan), None);
    }

    #[test]
    fn apply_and_destroy_text() {
        let apply = "null_resource.a: Creation complete\n\nApply complete! Resources: 1 added, 0 changed, 2 destroyed.\n\nOutputs:\n\nmessage = hi\n";
        assert_eq!(from_text(apply, Operation::Apply), Some(s(1, 0, 2)));
        let destroy = "Plan: 0 to add, 0 to change, 3 to destroy.\nnull_resource.a: Destruction complete\n\nDestroy complete! Resources: 3 destroyed.\n";
        assert_eq!(from_text(destroy, Operation::Destroy), Some(s(0, 0, 3)));
        // A plan line alone is not an apply's result.
        assert_eq!(
            from_text(
                "Plan: 1 to add, 0 to change, 0 to destroy.\n",
                Operation::Apply
            ),
            None
        );
    }

    #[test]
    fn plan_json_counts_actions_and_replacements() {
        let json = r#"{
          "format_version": "1.2",
          "resource_changes": [
            {"address": "a", "mode": "managed", "change": {"actions": ["create"]}},
            {"address": "b", "mode": "managed", "change": {"actions": ["update"]}},
            {"address": "c", "mode": "managed", "change": {"actions": ["delete", "create"]}},
            {"address": "d", "mode": "managed", "change": {"actions": ["create", "delete"]}},
            {"address": "e", "mode": "managed", "change": {"actions": ["delete"]}},
            {"address": "f", "mode": "managed", "change": {"actions": ["no-op"]}},
            {"address": "g", "mode": "data", "change": {"actions": ["read"]}}
          ]
        }"#;
        assert_eq!(from_plan_json(json), Some(s(3, 1, 3)));
        assert_eq!(
            from_plan_json(r#"{"format_version": "1.2"}"#),
            Some(s(0, 0, 0))
        );
        assert_eq!(from_plan_json("not json"), None);
    }

    #[test]
    fn sensitive_outputs_are_redacted() {
        let json = r#"{"a": {"sensitive": false, "type": "string", "value": "public"},
                      "b": {"sensitive": true, "type": "string", "value": "hunter2"},
                      "c": {"type": "string", "value": "unknown sensitivity"}}"#;
        let text = String::from_utf8(redact_outputs(json, &Patterns::default()).unwrap()).unwrap();
        assert!(text.contains("public"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("unknown sensitivity"), "{text}");
        assert_eq!(redact_outputs("not json", &Patterns::default()), None);
    }

    #[test]
    fn descriptions_match_the_operation() {
        assert_eq!(
            describe(&s(1, 2, 3), Operation::Plan),
            "1 to add, 2 to change, 3 to destroy"
        );
        assert_eq!(
            describe(&s(1, 2, 3), Operation::Apply),
            "1 added, 2 changed, 3 destroyed"
        );
    }
}
