use super::*;
use serde_json::json;

fn doc() -> Value {
    json!({
        "resource_changes": [
            {"address": "terraform_data.new", "type": "terraform_data", "name": "new", "mode": "managed",
             "change": {"actions": ["create"], "before": null,
                        "after": {"input": "v1", "triggers_replace": null},
                        "after_unknown": {"id": true, "output": true}}},
            {"address": "module.net.terraform_data.web[0]", "module_address": "module.net",
             "type": "terraform_data", "name": "web",
             "change": {"actions": ["delete", "create"],
                        "before": {"id": "abc", "input": "old", "triggers_replace": ["a"], "tags": {"env": "dev", "keep": "y"}},
                        "after": {"input": "new", "triggers_replace": ["b"], "tags": {"env": "prod", "keep": "y"}},
                        "after_unknown": {"id": true},
                        "replace_paths": [["triggers_replace"]]}},
            {"address": "terraform_data.same", "type": "terraform_data", "name": "same",
             "change": {"actions": ["no-op"], "before": {"id": "1"}, "after": {"id": "1"}}},
            {"address": "terraform_data.gone", "type": "terraform_data", "name": "gone",
             "change": {"actions": ["delete"], "before": {"id": "2"}, "after": null}},
            {"address": "data.x.y", "type": "x", "name": "y",
             "change": {"actions": ["read"], "before": null, "after": {"q": 1}}},
            {"address": "terraform_data.up", "type": "terraform_data", "name": "up",
             "change": {"actions": ["update"], "before": {"input": "(sensitive value)", "n": 1}, "after": {"input": "(sensitive value)", "n": 2}}},
            "not an object"
        ],
        "output_changes": {
            "pw": {"actions": ["create"], "before": null, "after": "(sensitive value)", "after_unknown": false},
            "id": {"actions": ["create"], "before": null, "after_unknown": true}
        }
    })
}

#[test]
fn actions_collapse_to_one_and_replace_in_either_order() {
    assert_eq!(
        ChangeAction::from_terraform(&["delete", "create"]),
        ChangeAction::Replace
    );
    assert_eq!(
        ChangeAction::from_terraform(&["create", "delete"]),
        ChangeAction::Replace
    );
    assert_eq!(ChangeAction::from_terraform(&["no-op"]), ChangeAction::NoOp);
    assert_eq!(ChangeAction::from_terraform(&[]), ChangeAction::NoOp);
    assert_eq!(ChangeAction::from_terraform(&["read"]), ChangeAction::Read);
}

#[test]
fn a_document_becomes_one_entry_per_resource_with_changed_attributes() {
    let view = PlanView::from_document(&doc());
    assert_eq!(
        view.resource_changes.len(),
        6,
        "the non-object entry is skipped"
    );
    assert_eq!(
        view.counts,
        PlanCounts {
            create: 1,
            update: 1,
            delete: 1,
            replace: 1,
            read: 1,
            no_op: 1
        }
    );
    assert_eq!(view.counts.terraform_summary(), (2, 1, 2));

    let created = &view.resource_changes[0];
    assert_eq!(created.module, None);
    let paths: Vec<&str> = created.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["id", "input", "output"]);
    assert!(created.changes[0].after_unknown);
    assert_eq!(created.changes[1].after, json!("v1"));

    let replaced = &view.resource_changes[1];
    assert_eq!(replaced.action, ChangeAction::Replace);
    assert_eq!(replaced.module.as_deref(), Some("module.net"));
    assert_eq!(
        (replaced.resource_type.as_str(), replaced.name.as_str()),
        ("terraform_data", "web")
    );
    assert_eq!(replaced.replace_paths, ["triggers_replace"]);
    let by_path = |p: &str| replaced.changes.iter().find(|c| c.path == p).cloned();
    let trig = by_path("triggers_replace.0").expect("the trigger changed");
    assert_eq!((trig.before, trig.after), (json!("a"), json!("b")));
    assert!(trig.forces_replacement);
    let env = by_path("tags.env").expect("a nested attribute changed");
    assert_eq!(
        (env.before, env.after, env.forces_replacement),
        (json!("dev"), json!("prod"), false)
    );
    assert!(
        by_path("tags.keep").is_none(),
        "an unchanged attribute is left out"
    );
    assert!(by_path("id").unwrap().after_unknown);

    assert!(
        view.resource_changes[2].changes.is_empty(),
        "no-op has no changes"
    );
    assert_eq!(view.resource_changes[3].changes[0].before, json!("2"));
    // Two redacted values read the same: only `n` shows as changed.
    let up: Vec<&str> = view.resource_changes[5]
        .changes
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(up, ["n"]);

    assert_eq!(view.output_changes.len(), 2);
    let id = view.output_changes.iter().find(|o| o.name == "id").unwrap();
    assert!(id.after_unknown);
}

#[test]
fn pages_walk_every_resource_once_and_refuse_foreign_cursors() {
    let changes: Vec<Value> = (0..2503)
        .map(|i| json!({"address": format!("terraform_data.r[{i}]"), "type": "terraform_data", "name": "r",
                         "change": {"actions": ["create"], "before": null, "after": {"input": i}}}))
        .collect();
    let view = PlanView::from_document(&json!({ "resource_changes": changes }));
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let page = view.page(cursor.as_deref(), usize::MAX).unwrap();
        assert!(page.resource_changes.len() <= PAGE_MAX);
        assert_eq!(page.total_resources, 2503);
        assert_eq!(page.counts.create, 2503);
        seen.extend(page.resource_changes.into_iter().map(|r| r.address));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let expected: Vec<String> = (0..2503)
        .map(|i| format!("terraform_data.r[{i}]"))
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(view.page(None, 7).unwrap().resource_changes.len(), 7);
    assert!(view.page(Some("zz"), 10).is_err());
    assert!(view.page(Some(&encode_cursor(99_999)), 10).is_err());
    assert!(view.page(Some(&encode_cursor(0)), 10).is_err());
}
