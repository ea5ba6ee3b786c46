//! Change summaries: add/change/destroy counts from `show -json <plan>` where
//! the version has it, and from the plan or apply text otherwise.

use serde_json::Value;
use sortie_core::{ChangeSummary, Operation};

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
/// `sensitive: false` removed (it is stored as `{"sensitive": true, "type": …}`), as JSON
/// bytes; `None` when it is not such a document.
pub fn redact_outputs(json: &str) -> Option<Vec<u8>> {
    let mut outputs: serde_json::Map<String, Value> = serde_json::from_str(json).ok()?;
    for output in outputs.values_mut() {
        if output.get("sensitive").and_then(Value::as_bool) != Some(false) {
            if let Some(obj) = output.as_object_mut() {
                obj.remove("value");
                obj.insert("sensitive".into(), Value::Bool(true));
            }
        }
    }
    serde_json::to_vec_pretty(&outputs).ok()
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
        let out: Value = serde_json::from_slice(&redact_outputs(json).unwrap()).unwrap();
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
        assert!(redact_outputs("not json").is_none());
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
        let text = String::from_utf8(redact_outputs(json).unwrap()).unwrap();
        assert!(text.contains("public"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("unknown sensitivity"), "{text}");
        assert_eq!(redact_outputs("not json"), None);
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
