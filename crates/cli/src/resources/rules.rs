//! Runner rules: `create`, `get`, `list` and `delete` of a rule (a rule is built from a
//! file and `--set KEY=VALUE`), and the rule table.

use std::path::PathBuf;

use serde_json::{Map, Value};
use sortie_api::model::RuleList;
use sortie_client::endpoints;
use sortie_core::{Criteria, RunnerRule};

use super::shared::{or_dash, read_document, shown_group, split_last};
use crate::args::Output;
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{emit, table};

/// `sortie create runner-rule [-f FILE] [--set KEY=VALUE]...`.
pub(super) async fn create(
    api: &Api,
    set: Vec<String>,
    file: Option<PathBuf>,
    out: Output,
) -> Result<(), CliError> {
    let mut doc = match &file {
        Some(path) => {
            let (_, text) = read_document(path)?;
            serde_norway::from_str::<Value>(&text).map_err(|e| {
                CliError::Usage(format!(
                    "{} is not a YAML or JSON document: {e}",
                    path.display()
                ))
            })?
        }
        None => Value::Object(Map::new()),
    };
    if !doc.is_object() {
        return Err(CliError::Usage(
            "a rule file must be a mapping (id, scope, runner_id, criteria, priority)".into(),
        ));
    }
    for item in &set {
        apply_set(&mut doc, item)?;
    }
    let scope = match &doc["scope"] {
        Value::String(s) => s.clone(),
        Value::Null => {
            return Err(CliError::Usage(
                "a rule needs its scope: --set scope=GROUP (the group it applies in)".into(),
            ))
        }
        _ => {
            return Err(CliError::Usage(
                "the rule's scope must be a group path".into(),
            ))
        }
    };
    let answer = api
        .send(
            &endpoints::create_rule(sortie_client::group(&scope)),
            Some(&doc),
            &[],
        )
        .await?;
    show_rules(&answer.body, vec![decode(answer.body.clone())?], out)
}

/// `sortie get runner-rule SCOPE/ID`.
pub(super) async fn get(api: &Api, id: String, out: Output) -> Result<(), CliError> {
    let (scope, rule) = split_last(&id);
    let answer = api
        .send(
            &endpoints::get_rule(sortie_client::group(scope), rule),
            None,
            &[],
        )
        .await
        .map_err(|e| rule_hint(e, scope))?;
    show_rules(&answer.body, vec![decode(answer.body.clone())?], out)
}

/// `sortie list runner-rules --scope SCOPE`.
pub(super) async fn list(api: &Api, scope: String, out: Output) -> Result<(), CliError> {
    let answer = api
        .send(
            &endpoints::list_rules(sortie_client::group(&scope)),
            None,
            &[],
        )
        .await?;
    let list: RuleList = decode(answer.body.clone())?;
    show_rules(&answer.body, list.rules, out)
}

/// `sortie delete runner-rule SCOPE/ID`: what was deleted, in words.
pub(super) async fn delete(api: &Api, id: String) -> Result<String, CliError> {
    let (scope, rule) = split_last(&id);
    api.send(
        &endpoints::delete_rule(sortie_client::group(scope), rule),
        None,
        &[],
    )
    .await
    .map_err(|e| rule_hint(e, scope))?;
    Ok(format!("runner rule `{rule}` at `{}`", shown_group(scope)))
}

pub(super) fn rule_hint(e: CliError, scope: &str) -> CliError {
    match e {
        CliError::NotFound(m) => CliError::NotFound(format!(
            "{m}\nhint: see the rules with `sortie list runner-rules --scope {}`",
            if scope.is_empty() { "''" } else { scope }
        )),
        other => other,
    }
}

/// Keys whose values are always strings, whatever they look like (`--set id=123`).
pub(super) fn string_key(key: &str) -> bool {
    matches!(
        key,
        "id" | "scope" | "runner_id" | "criteria.env_type" | "criteria.env_path"
    ) || key.starts_with("criteria.labels.")
}

/// Applies one `--set key.path=value`: dotted keys nest; the value is JSON when it parses
/// (numbers, booleans, lists), else a string; `criteria.tags=a,b` is a list.
pub(super) fn apply_set(doc: &mut Value, item: &str) -> Result<(), CliError> {
    let malformed = |why: &str| {
        CliError::Usage(format!(
            "--set `{item}`: {why} (expected KEY=VALUE, such as criteria.env_type=production)"
        ))
    };
    let (key, raw) = item.split_once('=').ok_or_else(|| malformed("no `=`"))?;
    let segments: Vec<&str> = key.split('.').collect();
    if segments.iter().any(|s| s.trim().is_empty()) {
        return Err(malformed("the key has an empty part"));
    }
    let value = if string_key(key) {
        Value::String(raw.to_string())
    } else {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::String(_)) | Err(_) if key == "criteria.tags" => Value::Array(
                raw.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(|t| Value::String(t.to_string()))
                    .collect(),
            ),
            Ok(v) => v,
            Err(_) => Value::String(raw.to_string()),
        }
    };
    let (last, parents) = segments
        .split_last()
        .expect("split gives one segment at least");
    let mut node = doc;
    let mut walked = String::new();
    for segment in parents {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(segment);
        let map = node
            .as_object_mut()
            .ok_or_else(|| malformed(&format!("`{walked}` is a value, not a mapping")))?;
        node = map
            .entry(segment.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !node.is_object() {
            return Err(malformed(&format!("`{walked}` is already set to a value")));
        }
    }
    node.as_object_mut()
        .ok_or_else(|| malformed("its parent is not a mapping"))?
        .insert(last.to_string(), value);
    Ok(())
}

pub(super) fn criteria_text(c: &Criteria) -> String {
    let mut parts = vec![];
    if let Some(t) = &c.env_type {
        parts.push(format!("env_type={t}"));
    }
    if let Some(p) = &c.env_path {
        parts.push(format!("env_path={p}"));
    }
    for (k, v) in &c.labels {
        parts.push(format!("label {k}={v}"));
    }
    for t in &c.tags {
        parts.push(format!("tag {t}"));
    }
    or_dash(parts.join(", "))
}

pub(super) fn show_rules(raw: &Value, rules: Vec<RunnerRule>, out: Output) -> Result<(), CliError> {
    emit(raw, out, || {
        let rows = rules
            .iter()
            .map(|r| {
                vec![
                    r.scope.to_string(),
                    r.id.clone(),
                    r.runner_id.to_string(),
                    r.priority.to_string(),
                    criteria_text(&r.criteria),
                ]
            })
            .collect();
        table(&["SCOPE", "ID", "RUNNER", "PRIORITY", "CRITERIA"], rows)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sets_nest_parse_json_and_keep_ids_as_strings() {
        let mut doc = json!({});
        for s in [
            "scope=acme",
            "id=123",
            "runner_id=acme/fargate",
            "criteria.env_type=production",
            "criteria.labels.tier=1",
            "criteria.tags=a,b",
            "priority=5",
        ] {
            apply_set(&mut doc, s).unwrap();
        }
        assert_eq!(
            doc,
            json!({"scope": "acme", "id": "123", "runner_id": "acme/fargate",
                "criteria": {"env_type": "production", "labels": {"tier": "1"}, "tags": ["a", "b"]},
                "priority": 5})
        );
        for bad in ["noequals", "=x", "a..b=1", "priority.x=1"] {
            let e = apply_set(&mut doc, bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
    }
}
