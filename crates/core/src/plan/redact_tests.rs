use super::*;
use proptest::prelude::*;
use serde_json::json;

fn strings(v: &Value) -> String {
    v.to_string()
}

#[test]
fn resource_change_masks_replace_nested_values() {
    let mut doc = json!({
        "resource_changes": [{
            "address": "terraform_data.x",
            "change": {
                "actions": ["update"],
                "before": {"input": {"password": "old-secret", "user": "me"}, "list": ["a-secret", "open"]},
                "after": {"input": {"password": "new-secret", "user": "me"}, "list": ["b-secret", "open"]},
                "before_sensitive": {"input": {"password": true}, "list": [true, false]},
                "after_sensitive": {"input": {"password": true}, "list": [true]}
            }
        }]
    });
    redact(&mut doc, &[]);
    let change = &doc["resource_changes"][0]["change"];
    assert_eq!(change["before"]["input"]["password"], MARKER);
    assert_eq!(change["after"]["input"]["password"], MARKER);
    assert_eq!(change["before"]["input"]["user"], "me");
    assert_eq!(change["after"]["list"], json!([MARKER, "open"]));
    let text = strings(&doc);
    for secret in ["old-secret", "new-secret", "a-secret", "b-secret"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

#[test]
fn sensitive_variables_outputs_and_configuration_constants_are_replaced() {
    let mut doc = json!({
        "variables": {"db_password": {"value": "hunter22"}, "token": {"value": "tok-12345"}, "region": {"value": "eu-west-1"}},
        "output_changes": {
            "pw": {"actions": ["create"], "before": null, "after": "hunter22", "before_sensitive": false, "after_sensitive": true},
            "open": {"actions": ["create"], "before": null, "after": "visible", "before_sensitive": false, "after_sensitive": false}
        },
        "planned_values": {
            "outputs": {"pw": {"sensitive": true, "value": "hunter22"}, "open": {"sensitive": false, "value": "visible"}},
            "root_module": {"child_modules": [{"resources": [{"values": {"k": "deep-secret"}, "sensitive_values": {"k": true}}]}]}
        },
        "prior_state": {"values": {"root_module": {"resources": [{"values": {"k": "prior-secret", "o": 1}, "sensitive_values": {"k": true}}]}}},
        "configuration": {"root_module": {
            "variables": {"db_password": {"sensitive": true, "default": "default-pw"}, "region": {"default": "eu-west-1"}},
            "outputs": {"pw": {"sensitive": true, "expression": {"constant_value": "const-secret"}}},
            "module_calls": {"child": {
                "expressions": {"key": {"constant_value": "passed-secret"}, "name": {"constant_value": "plain"}},
                "module": {"variables": {"key": {"sensitive": true}, "name": {}}}
            }}
        }}
    });
    // `token` is sensitive only because the job says so.
    redact(&mut doc, &["token".to_string()]);
    let text = strings(&doc);
    for secret in [
        "hunter22",
        "tok-12345",
        "deep-secret",
        "prior-secret",
        "default-pw",
        "const-secret",
        "passed-secret",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert_eq!(doc["variables"]["region"]["value"], "eu-west-1");
    assert_eq!(doc["output_changes"]["open"]["after"], "visible");
    assert_eq!(
        doc["configuration"]["root_module"]["module_calls"]["child"]["expressions"]["name"]
            ["constant_value"],
        "plain"
    );
}

#[test]
fn a_masked_string_copied_elsewhere_unmarked_is_scrubbed_but_structure_is_kept() {
    let mut doc = json!({
        "resource_changes": [
            {"address": "a.b", "type": "a", "name": "b", "change": {"actions": ["create"], "before": null,
             "after": {"v": "create"}, "after_sensitive": {"v": true}}},
            {"address": "a.c", "type": "a", "name": "c", "change": {"actions": ["create"], "before": null,
             "after": {"copy": "s3cr3t-value", "v": "s3cr3t-value"}, "after_sensitive": {"v": true}}},
            {"address": "a.d", "type": "a", "name": "d", "change": {"actions": ["create"], "before": null,
             "after": {"url": "https://u:job-password@host"}}}
        ]
    });
    redact(&mut doc, &[]);
    let text = strings(&doc);
    assert!(!text.contains("s3cr3t-value"), "{text}");
    assert_eq!(
        doc["resource_changes"][1]["change"]["after"]["copy"],
        MARKER
    );
    // A value the runner knows is secret is scrubbed inside any string.
    scrub(&mut doc, ["job-password"]);
    assert_eq!(
        doc["resource_changes"][2]["change"]["after"]["url"],
        format!("https://u:{MARKER}@host")
    );
    // A secret equal to a structural word does not erase the structure.
    assert_eq!(
        doc["resource_changes"][0]["change"]["actions"],
        json!(["create"])
    );
}

#[test]
fn scrub_ignores_short_strings() {
    let mut v = json!({"a": "on and off", "b": "xyzzy-long"});
    scrub(&mut v, ["on", "xyzzy"]);
    assert_eq!(v, json!({"a": "on and off", "b": format!("{MARKER}-long")}));
}

#[test]
fn a_structured_mask_over_a_scalar_replaces_it_when_it_marks_anything() {
    let mut doc = json!({"resource_changes": [{"change": {
        "before": "flat-secret", "before_sensitive": {"x": true},
        "after": "flat-open", "after_sensitive": {"x": false}
    }}]});
    redact(&mut doc, &[]);
    assert_eq!(doc["resource_changes"][0]["change"]["before"], MARKER);
    assert_eq!(doc["resource_changes"][0]["change"]["after"], "flat-open");
}

/// A value tree whose leaves are unique strings (`<leaf-N>`), with a mask of the same
/// shape choosing leaves and subtrees at random.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(bool),
    Map(Vec<(String, Tree)>, bool),
    List(Vec<Tree>, bool),
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = any::<bool>().prop_map(Tree::Leaf);
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            (
                prop::collection::vec(("[a-z]{1,6}", inner.clone()), 0..5),
                prop::bool::weighted(0.15)
            )
                .prop_map(|(fields, whole)| Tree::Map(fields, whole)),
            (
                prop::collection::vec(inner, 0..5),
                prop::bool::weighted(0.15)
            )
                .prop_map(|(items, whole)| Tree::List(items, whole)),
        ]
    })
}

/// Builds (value, mask), recording each leaf as masked or not.
fn build(
    t: &Tree,
    n: &mut usize,
    under_mask: bool,
    leaves: &mut Vec<(String, bool)>,
) -> (Value, Value) {
    match t {
        Tree::Leaf(masked) => {
            *n += 1;
            let s = format!("<leaf-{n:05}>");
            leaves.push((s.clone(), under_mask || *masked));
            (Value::String(s), Value::Bool(*masked))
        }
        Tree::Map(fields, whole) => {
            let mut value = Map::new();
            let mut mask = Map::new();
            for (k, sub) in fields {
                if value.contains_key(k) {
                    continue;
                }
                let (v, m) = build(sub, n, under_mask || *whole, leaves);
                value.insert(k.clone(), v);
                mask.insert(k.clone(), m);
            }
            let mask = if *whole {
                Value::Bool(true)
            } else {
                Value::Object(mask)
            };
            (Value::Object(value), mask)
        }
        Tree::List(items, whole) => {
            let (values, masks): (Vec<_>, Vec<_>) = items
                .iter()
                .map(|sub| build(sub, n, under_mask || *whole, leaves))
                .unzip();
            let mask = if *whole {
                Value::Bool(true)
            } else {
                Value::Array(masks)
            };
            (Value::Array(values), mask)
        }
    }
}

proptest! {
    #[test]
    fn a_masked_leaf_never_leaks_and_an_unmasked_leaf_stays(before in tree(), after in tree()) {
        let mut n = 0;
        let mut leaves = Vec::new();
        let (b, bm) = build(&before, &mut n, false, &mut leaves);
        let (a, am) = build(&after, &mut n, false, &mut leaves);
        let mut doc = json!({
            "resource_changes": [{"address": "x.y", "change": {
                "actions": ["update"], "before": b, "after": a,
                "before_sensitive": bm, "after_sensitive": am
            }}],
            "resource_drift": [{"change": {"before": b, "before_sensitive": bm}}],
            "planned_values": {"root_module": {"resources": [{"values": a, "sensitive_values": am}]}},
        });
        redact(&mut doc, &[]);
        let text = doc.to_string();
        for (leaf, masked) in &leaves {
            prop_assert_eq!(!text.contains(leaf.as_str()), *masked, "leaf {} masked={}", leaf, masked);
        }
    }
}
