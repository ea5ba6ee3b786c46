use super::*;
use crate::plan::scrub;
use proptest::prelude::*;
use serde_json::json;

fn strings(v: &Value) -> String {
    v.to_string()
}

#[test]
fn resource_change_masks_replace_nested_values() {
    let mut doc = json!({
        "terraform_version": "1.11.4",
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
        "terraform_version": "1.11.4",
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
        "terraform_version": "1.11.4",
        "resource_changes": [
            {"address": "a.b", "type": "a", "name": "b", "change": {"actions": ["create"], "before": null,
             "after": {"v": "create"}, "after_sensitive": {"v": true}}},
            {"address": "a.c", "type": "a", "name": "c", "change": {"actions": ["create"], "before": null,
             "after": {"copy": "s3cr3t-value", "v": "s3cr3t-value"}, "after_sensitive": {"v": true}}},
            {"address": "a.d", "type": "a", "name": "d", "change": {"actions": ["create"], "before": null,
             "after": {"url": "https://u:job-password@host"}, "after_sensitive": {}}}
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
    let mut doc = json!({"terraform_version": "1.11.4", "resource_changes": [{"change": {
        "before": "flat-secret", "before_sensitive": {"x": true},
        "after": "flat-open", "after_sensitive": {"x": false}
    }}]});
    redact(&mut doc, &[]);
    assert_eq!(doc["resource_changes"][0]["change"]["before"], MARKER);
    assert_eq!(doc["resource_changes"][0]["change"]["after"], "flat-open");
}

/// A Terraform 0.14 plan (0.12 and 0.13 write the same shape), built by hand from
/// Terraform's JSON output format
/// (<https://developer.hashicorp.com/terraform/internals/json-format>; there is no 0.12-0.14
/// binary here): no `before_sensitive`/`after_sensitive`, no `sensitive_values`, no
/// `output_changes`. A `random_password` result, also an `aws_db_instance` password.
fn plan_without_masks(version: &str) -> Value {
    json!({
        "format_version": "0.1",
        "terraform_version": version,
        "variables": {"region": {"value": "eu-west-1"}},
        "planned_values": {
            "outputs": {"endpoint": {"sensitive": false, "value": "db.example.com"}},
            "root_module": {"resources": [
                {"address": "random_password.db", "mode": "managed", "type": "random_password",
                 "name": "db", "provider_name": "registry.terraform.io/hashicorp/random",
                 "schema_version": 0,
                 "values": {"id": "none", "length": 24, "special": true, "result": "Rand0m-Result-Secret"}},
                {"address": "aws_db_instance.main", "mode": "managed", "type": "aws_db_instance",
                 "name": "main", "provider_name": "registry.terraform.io/hashicorp/aws",
                 "schema_version": 1,
                 "values": {"identifier": "main", "username": "app", "password": "Rand0m-Result-Secret",
                            "tags": {"team": "payments"}}}
            ]}
        },
        "resource_changes": [
            {"address": "aws_db_instance.main", "mode": "managed", "type": "aws_db_instance",
             "name": "main", "provider_name": "registry.terraform.io/hashicorp/aws",
             "change": {"actions": ["update"],
                "before": {"identifier": "main", "username": "app", "password": "Rand0m-Result-Secret",
                           "tags": {"team": "infra"}},
                "after": {"identifier": "main", "username": "app", "password": "Rand0m-Result-Secret",
                          "tags": {"team": "payments"}},
                "after_unknown": {}}}
        ],
        "prior_state": {"format_version": "0.1", "terraform_version": version, "values": {
            "outputs": {"endpoint": {"sensitive": false, "value": "db.example.com"}},
            "root_module": {"resources": [
                {"address": "random_password.db", "mode": "managed", "type": "random_password",
                 "name": "db", "provider_name": "registry.terraform.io/hashicorp/random",
                 "schema_version": 0,
                 "values": {"id": "none", "length": 24, "special": true, "result": "Rand0m-Result-Secret"}}
            ]}
        }},
        "configuration": {"root_module": {
            "resources": [{"address": "aws_db_instance.main", "mode": "managed", "type": "aws_db_instance",
                           "name": "main", "provider_config_key": "aws",
                           "expressions": {"password": {"references": ["random_password.db.result", "random_password.db"]}},
                           "schema_version": 1}],
            "variables": {"region": {"default": "eu-west-1"}}
        }}
    })
}

#[test]
fn a_plan_without_masks_shows_no_value_terraform_0_12_to_0_14() {
    for version in ["0.12.31", "0.13.7", "0.14.11"] {
        let mut doc = plan_without_masks(version);
        redact(&mut doc, &[]);
        let text = strings(&doc);
        assert!(
            !text.contains("Rand0m-Result-Secret"),
            "{version}: the password is shown: {text}"
        );
        // The plan keeps its shape: the view still lists the update, under its address.
        let view = super::super::PlanView::from_document(&doc);
        assert_eq!(view.counts.update, 1, "{version}");
        assert_eq!(view.resource_changes[0].address, "aws_db_instance.main");
        assert_eq!(doc["resource_changes"][0]["change"]["after"], MARKER);
        assert_eq!(
            doc["planned_values"]["outputs"]["endpoint"]["value"], "db.example.com",
            "an output its declaration says is not sensitive stays"
        );
    }
}

#[test]
fn a_missing_mask_replaces_its_value_and_a_null_value_stays_null() {
    let mut doc = json!({
        "terraform_version": "1.11.4",
        "resource_changes": [{"address": "a.b", "change": {
            "actions": ["delete"], "before": {"k": "Unmasked-Before"}, "after": null,
            "after_sensitive": false
        }}],
        "output_changes": {"o": {"actions": ["create"], "before": null, "after": "Unmasked-Output"}},
        "planned_values": {
            "outputs": {"o": {"value": "Unflagged-Output"}},
            "root_module": {"resources": [{"address": "a.b", "values": {"k": "Unmasked-Planned"}}]}
        }
    });
    redact(&mut doc, &[]);
    let text = strings(&doc);
    for leak in [
        "Unmasked-Before",
        "Unmasked-Output",
        "Unflagged-Output",
        "Unmasked-Planned",
    ] {
        assert!(!text.contains(leak), "{leak} shown: {text}");
    }
    assert_eq!(doc["resource_changes"][0]["change"]["after"], Value::Null);
    assert_eq!(doc["output_changes"]["o"]["before"], Value::Null);
}

#[test]
fn masks_without_the_schemas_sensitivity_replace_their_values_whole() {
    // Before 0.15.2 a resource's masks leave out the provider schema's `sensitive`
    // (hashicorp/terraform#28522): `random_password.result` comes with an empty mask.
    // Before 1.4.6 the prior state's do too (hashicorp/terraform#33055).
    let doc = |version: Option<&str>| {
        let mut doc = json!({
            "resource_changes": [{"address": "random_password.p", "change": {
                "actions": ["update"],
                "before": {"length": 8, "result": "Change-Sens1tive"},
                "after": {"length": 9, "result": "Change-Sens1tive"},
                "before_sensitive": {}, "after_sensitive": {}
            }}],
            "planned_values": {"root_module": {"resources": [{"address": "random_password.p",
                "values": {"length": 9, "result": "Change-Sens1tive"}, "sensitive_values": {}}]}},
            "prior_state": {"values": {"root_module": {"resources": [{"address": "random_password.p",
                "values": {"length": 8, "result": "Prior-Sens1tive"},
                "sensitive_values": {"result": true}}]}}}
        });
        if let Some(v) = version {
            doc["terraform_version"] = json!(v);
        }
        redact(&mut doc, &[]);
        doc
    };
    for old in [
        None,
        Some("0.15.0"),
        Some("0.15.1"),
        Some("0.15.2-rc1"),
        Some("x.y"),
    ] {
        let doc = doc(old);
        let text = strings(&doc);
        assert!(!text.contains("Change-Sens1tive"), "{old:?}: {text}");
        assert!(!text.contains("Prior-Sens1tive"), "{old:?}: {text}");
        assert_eq!(doc["resource_changes"][0]["change"]["after"], MARKER);
    }
    // From 0.15.2 the resource masks are trusted (here they mark nothing); the prior state's
    // not before 1.4.6, whatever they say.
    let doc_145 = doc(Some("1.4.5"));
    assert_eq!(
        doc_145["resource_changes"][0]["change"]["after"]["length"],
        9
    );
    assert_eq!(
        doc_145["prior_state"]["values"]["root_module"]["resources"][0]["values"],
        MARKER
    );
    let doc_146 = doc(Some("1.4.6"));
    let prior = &doc_146["prior_state"]["values"]["root_module"]["resources"][0]["values"];
    assert_eq!(
        (&prior["length"], &prior["result"]),
        (&json!(8), &json!(MARKER))
    );
}

#[test]
fn sections_sortie_does_not_understand_are_dropped() {
    let mut doc = json!({
        "format_version": "1.2",
        "terraform_version": "1.14.0",
        "resource_changes": [{"address": "a.b", "type": "a", "name": "b", "future_field": "Leak-Field",
            "change": {"actions": ["create"], "before": null, "after": {"k": "kept-value"},
                       "after_sensitive": {}, "after_identity": {"id": "Leak-Identity"}}}],
        "deferred_changes": [{"reason": "provider_config_unknown", "resource_change": {
            "address": "c.d", "change": {"actions": ["create"], "after": {"password": "Leak-Deferred"}}}}],
        "action_invocations": [{"address": "action.x.y", "type": "x", "name": "y",
            "config_values": {"token": "Leak-Action"}, "config_sensitive": {"token": true}}],
        "deferred_action_invocations": [{"reason": "deferred_prereq",
            "action_invocation": {"config_values": {"token": "Leak-Deferred-Action"}}}],
        "a_future_section": {"value": "Leak-Future"},
        "checks": [{"address": {"kind": "resource", "to_display": "a.b"}, "status": "pass",
                    "future": "Leak-Check"}],
        "configuration": {"root_module": {"variables": {"v": {"default": "d", "ephemeral_value": "Leak-Config"}}}},
        "applyable": true
    });
    redact(&mut doc, &[]);
    let text = strings(&doc);
    assert!(!text.contains("Leak-"), "{text}");
    assert!(
        doc.get("a_future_section").is_none(),
        "a future section kept"
    );
    // Sections that are redacted, not dropped: their values without masks are replaced.
    assert_eq!(
        doc["deferred_changes"][0]["resource_change"]["change"]["after"],
        MARKER
    );
    assert_eq!(
        doc["action_invocations"][0]["config_values"]["token"],
        MARKER
    );
    assert_eq!(
        doc["deferred_action_invocations"][0]["action_invocation"]["config_values"],
        MARKER
    );
    assert_eq!(
        doc["resource_changes"][0]["change"]["after"]["k"],
        "kept-value"
    );
    assert_eq!(doc["checks"][0]["status"], "pass");
    assert_eq!(doc["applyable"], true);
    assert_eq!(doc["format_version"], "1.2");
}

/// A Terraform 1.14 plan's deferred changes and action invocations (shapes from Terraform's
/// `internal/command/jsonplan`): kept for the reviewer, their values redacted by their own
/// masks, and replaced whole where a mask is missing.
#[test]
fn deferred_changes_and_action_invocations_are_redacted_not_dropped() {
    let mut doc = json!({
        "format_version": "1.2",
        "terraform_version": "1.14.0",
        "deferred_changes": [
            {"reason": "provider_config_unknown", "resource_change": {
                "address": "aws_db_instance.d", "mode": "managed", "type": "aws_db_instance",
                "name": "d", "provider_name": "registry.terraform.io/hashicorp/aws",
                "future_field": "Leak-Field",
                "change": {"actions": ["create"], "before": null,
                    "after": {"password": "Leak-Deferred-Pw", "engine": "postgres"},
                    "after_unknown": {"id": true},
                    "after_sensitive": {"password": true},
                    "after_identity": {"id": "Leak-Identity"}}}},
            {"reason": "resource_config_unknown", "resource_change": {
                "address": "aws_x.nomask", "change": {"actions": ["create"],
                    "after": {"token": "Leak-Unmasked", "n": 1}}}}
        ],
        "action_invocations": [
            {"address": "action.aws_lambda_invoke.notify", "type": "aws_lambda_invoke",
             "name": "notify", "provider_name": "registry.terraform.io/hashicorp/aws",
             "config_values": {"function_name": "notifier", "payload": "Leak-Action-Payload"},
             "config_sensitive": {"payload": true},
             "config_unknown": {},
             "lifecycle_action_trigger": {"triggering_resource_address": "aws_db_instance.d",
                "action_trigger_event": "after_create", "action_trigger_block_index": 0,
                "actions_list_index": 0, "on_failure": "fail"}},
            {"address": "action.x.unmasked", "type": "x", "name": "unmasked",
             "config_values": {"token": "Leak-Action-Unmasked"},
             "invoke_action_trigger": {"calling_resource_address": "aws_db_instance.d"}}
        ],
        "deferred_action_invocations": [{"reason": "deferred_prereq", "action_invocation": {
            "address": "action.x.later", "type": "x", "name": "later",
            "config_values": {"token": "Leak-Deferred-Action", "region": "eu-west-1"},
            "config_sensitive": {"token": true}}}]
    });
    redact(&mut doc, &[]);
    let text = strings(&doc);
    assert!(!text.contains("Leak-"), "{text}");

    let deferred = &doc["deferred_changes"][0];
    assert_eq!(deferred["reason"], "provider_config_unknown");
    assert_eq!(deferred["resource_change"]["address"], "aws_db_instance.d");
    assert_eq!(deferred["resource_change"]["type"], "aws_db_instance");
    let change = &deferred["resource_change"]["change"];
    assert_eq!(change["actions"], json!(["create"]));
    assert_eq!(change["after"]["password"], MARKER);
    assert_eq!(change["after"]["engine"], "postgres");
    assert_eq!(change["after_unknown"], json!({"id": true}));
    // No mask: the whole value is replaced, the change's shape stays.
    let unmasked = &doc["deferred_changes"][1]["resource_change"];
    assert_eq!(unmasked["address"], "aws_x.nomask");
    assert_eq!(unmasked["change"]["after"], MARKER);

    let action = &doc["action_invocations"][0];
    assert_eq!(
        (&action["address"], &action["type"], &action["name"]),
        (
            &json!("action.aws_lambda_invoke.notify"),
            &json!("aws_lambda_invoke"),
            &json!("notify")
        )
    );
    assert_eq!(action["config_values"]["payload"], MARKER);
    assert_eq!(action["config_values"]["function_name"], "notifier");
    assert_eq!(
        action["lifecycle_action_trigger"]["triggering_resource_address"],
        "aws_db_instance.d"
    );
    assert_eq!(
        action["lifecycle_action_trigger"]["action_trigger_event"],
        "after_create"
    );
    // No `config_sensitive`: the values are replaced whole; address and trigger stay.
    let unmasked = &doc["action_invocations"][1];
    assert_eq!(unmasked["config_values"], MARKER);
    assert_eq!(unmasked["address"], "action.x.unmasked");
    assert_eq!(
        unmasked["invoke_action_trigger"]["calling_resource_address"],
        "aws_db_instance.d"
    );
    let later = &doc["deferred_action_invocations"][0];
    assert_eq!(later["reason"], "deferred_prereq");
    assert_eq!(later["action_invocation"]["config_values"]["token"], MARKER);
    assert_eq!(
        later["action_invocation"]["config_values"]["region"],
        "eu-west-1"
    );
}

#[test]
fn provider_configuration_constants_are_replaced_and_their_copies_too() {
    let mut doc = json!({
        "terraform_version": "1.11.4",
        "resource_changes": [{"address": "x.y", "change": {"actions": ["create"], "before": null,
            "after": {"note": "ghp_Hardcoded0Token"}, "after_sensitive": {}}}],
        "configuration": {
            "provider_config": {
                "github": {"name": "github", "full_name": "registry.terraform.io/integrations/github",
                    "expressions": {
                        "token": {"constant_value": "ghp_Hardcoded0Token"},
                        "owner": {"references": ["var.owner"]},
                        "app_auth": [{"pem_file": {"constant_value": "-----BEGIN RSA KEY-----"}}]
                    }},
                "module.m:aws": {"name": "aws", "module_address": "module.m",
                    "expressions": {"access_key": {"constant_value": "AKIA0HARDCODED"}}}
            },
            "root_module": {}
        }
    });
    redact(&mut doc, &[]);
    let text = strings(&doc);
    for leak in ["ghp_Hardcoded0Token", "BEGIN RSA KEY", "AKIA0HARDCODED"] {
        assert!(!text.contains(leak), "{leak} shown: {text}");
    }
    let github = &doc["configuration"]["provider_config"]["github"];
    assert_eq!(
        github["expressions"]["owner"]["references"],
        json!(["var.owner"])
    );
    assert_eq!(
        github["full_name"],
        "registry.terraform.io/integrations/github"
    );
}

/// A real Terraform 1.11.4 plan (see `fixtures/tf-1.11.4/README.md`): a job's sensitive
/// variable that the configuration does not declare `sensitive` is a `for_each` key.
const TF_1_11_4_PLAN: &str = include_str!("fixtures/tf-1.11.4/plan.json");

#[test]
fn the_allowlist_keeps_every_field_of_a_real_terraform_1_11_plan() {
    let doc: Value = serde_json::from_str(TF_1_11_4_PLAN).unwrap();
    let mut kept = doc.clone();
    super::super::sections::keep_known(&mut kept, &super::super::sections::PLAN, 0);
    assert_eq!(kept, doc);
}

#[test]
fn a_secret_for_each_key_leaves_no_address_index_or_key_of_a_real_plan() {
    let mut doc: Value = serde_json::from_str(TF_1_11_4_PLAN).unwrap();
    let secrets = ["Tenant-S3cret-key", "Db-Pa55word-value"];
    redact(&mut doc, &["tenant".into(), "db_password".into()]);
    scrub(&mut doc, secrets);
    let text = strings(&doc);
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    let view = super::super::PlanView::from_document(&doc);
    let tenant = view
        .resource_changes
        .iter()
        .find(|r| r.name == "per_tenant")
        .unwrap();
    assert_eq!(
        tenant.address,
        format!("terraform_data.per_tenant[\"{MARKER}\"]")
    );
    assert_eq!(
        (tenant.resource_type.as_str(), tenant.action),
        ("terraform_data", super::super::ChangeAction::Replace)
    );
    // What is not secret stays readable: the trigger that forces the replacement.
    let trigger = tenant
        .changes
        .iter()
        .find(|c| c.path == "triggers_replace.0")
        .unwrap();
    assert_eq!(
        (&trigger.before, &trigger.after, trigger.forces_replacement),
        (&json!("plain-value"), &json!("plain-value-2"), true)
    );
    assert!(
        tenant
            .changes
            .iter()
            .any(|c| c.path == format!("output.tags.{MARKER}")),
        "{tenant:?}"
    );
    let child = view
        .resource_changes
        .iter()
        .find(|r| r.name == "inner")
        .unwrap();
    assert_eq!(
        child.module.as_deref(),
        Some(&*format!("module.child[\"{MARKER}\"]"))
    );
}

#[test]
fn a_key_with_quotes_is_scrubbed_as_terraform_quotes_it_in_an_address() {
    let secret = r#"Qu"ote\d-${key}"#;
    let quoted = r#"Qu\"ote\\d-$${key}"#;
    let mut doc = json!({
        "resource_changes": [{
            "address": format!("aws_x.y[\"{quoted}\"]"),
            "previous_address": format!("module.m[\"{quoted}\"].aws_x.y[\"plain\"]"),
            "index": secret, "type": "aws_x", "name": "y",
            "change": {"actions": ["create"], "before": null,
                       "after": {"tags": {secret: "v"}}, "after_unknown": {"tags": {secret: true}}}
        }]
    });
    scrub(&mut doc, [secret]);
    let rc = &doc["resource_changes"][0];
    assert_eq!(rc["address"], format!("aws_x.y[\"{MARKER}\"]"));
    assert_eq!(
        rc["previous_address"],
        format!("module.m[\"{MARKER}\"].aws_x.y[\"plain\"]")
    );
    assert_eq!(rc["index"], MARKER);
    assert_eq!(rc["change"]["after"]["tags"], json!({MARKER: "v"}));
    assert_eq!(rc["change"]["after_unknown"]["tags"], json!({MARKER: true}));
    assert_eq!((&rc["type"], &rc["name"]), (&json!("aws_x"), &json!("y")));
}

#[test]
fn renamed_keys_that_meet_keep_both_entries() {
    let mut doc = json!({"resource_changes": [{"change": {"after": {
        "a-Secret-1": 1, "b-Secret-1": 2, "(sensitive value)": 3
    }}}]});
    scrub(&mut doc, ["a-Secret-1", "b-Secret-1"]);
    let after = doc["resource_changes"][0]["change"]["after"]
        .as_object()
        .unwrap();
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(!strings(&doc).contains("Secret-1"));
}

#[test]
fn versions_are_read_fail_closed() {
    let at_least = |v: Value, since| {
        let root = json!({"terraform_version": v});
        super::version_at_least(root.as_object().unwrap(), since)
    };
    assert!(at_least(json!("1.4.6"), (1, 4, 6)));
    assert!(at_least(json!("1.11.4"), (1, 4, 6)));
    assert!(at_least(json!("1.5.0+ent"), (1, 4, 6)));
    assert!(at_least(json!("0.15.2"), (0, 15, 2)));
    assert!(!at_least(json!("1.4.6-rc1"), (1, 4, 6)));
    assert!(!at_least(json!("1.4.5"), (1, 4, 6)));
    assert!(!at_least(json!("0.15.1"), (0, 15, 2)));
    assert!(!at_least(json!("1.4"), (1, 4, 6)));
    assert!(!at_least(json!(146), (1, 4, 6)));
    assert!(!at_least(json!(""), (0, 0, 0)));
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
            "terraform_version": "1.11.4",
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

proptest! {
    /// Masks dropped at random, a Terraform version at random, and the same leaves again in
    /// sections Sortie does not understand: a leaf stays only when every place it appears
    /// has a mask Sortie trusts and that mask leaves it open (resource changes, drift,
    /// planned values, deferred changes, action invocations).
    #[test]
    fn a_leaf_without_a_trusted_mask_never_leaks(
        before in tree(),
        after in tree(),
        extra in tree(),
        action in tree(),
        dropped in prop::array::uniform6(any::<bool>()),
        version in prop::sample::select(vec!["1.11.4", "0.15.2", "0.15.1", "0.14.11", "0.12.31", ""]),
    ) {
        let mut n = 0;
        let mut leaves = Vec::new();
        let (b, bm) = build(&before, &mut n, false, &mut leaves);
        let before_leaves = leaves.len();
        let (a, am) = build(&after, &mut n, false, &mut leaves);
        let after_leaves = leaves.len();
        let (x, xm) = build(&extra, &mut n, false, &mut leaves);
        let extra_leaves = leaves.len();
        let (c, cm) = build(&action, &mut n, false, &mut leaves);
        let mask = |m: &Value, drop: bool| if drop { None } else { Some(m.clone()) };
        let change = |value: &Value, key: &str, m: Option<Value>| {
            let mut c = json!({"actions": ["update"]});
            c[key] = value.clone();
            if let Some(m) = m {
                c[format!("{key}_sensitive")] = m;
            }
            c
        };
        let mut rc = change(&b, "before", mask(&bm, dropped[0]));
        let after_change = change(&a, "after", mask(&am, dropped[1]));
        rc["after"] = after_change["after"].clone();
        if let Some(m) = after_change.get("after_sensitive") {
            rc["after_sensitive"] = m.clone();
        }
        let mut planned = json!({"values": a});
        if let Some(m) = mask(&am, dropped[2]) {
            planned["sensitive_values"] = m;
        }
        let mut doc = json!({
            "resource_changes": [{"address": "x.y", "change": rc}],
            "resource_drift": [{"change": change(&b, "before", mask(&bm, dropped[3]))}],
            "planned_values": {"root_module": {"resources": [planned]}},
            "deferred_changes": [{"resource_change": {"change": change(&x, "after", mask(&xm, dropped[4]))}}],
            "action_invocations": [{"address": "action.a.b", "config_values": c}],
            "some_future_section": [x, c],
        });
        if let Some(m) = mask(&cm, dropped[5]) {
            doc["action_invocations"][0]["config_sensitive"] = m;
        }
        if !version.is_empty() {
            doc["terraform_version"] = json!(version);
        }
        let trusted = matches!(version, "1.11.4" | "0.15.2");
        redact(&mut doc, &[]);
        let text = doc.to_string();
        for (i, (leaf, masked)) in leaves.iter().enumerate() {
            let hidden = if i < before_leaves {
                *masked || !trusted || dropped[0] || dropped[3]
            } else if i < after_leaves {
                *masked || !trusted || dropped[1] || dropped[2]
            } else if i < extra_leaves {
                *masked || !trusted || dropped[4]
            } else {
                *masked || !trusted || dropped[5]
            };
            prop_assert_eq!(!text.contains(leaf.as_str()), hidden, "leaf {} masked={}", leaf, masked);
        }
    }

    /// A secret of any characters used as a `for_each` key (in addresses, `index`, map keys
    /// of values and masks, replace paths) and inside values is gone after [`scrub`];
    /// types, names and actions stay.
    #[test]
    fn a_secret_key_leaves_no_trace(secret in "[A-Z0-9\"\\\\${}%]{4,10}") {
        let json = serde_json::to_string(&secret).unwrap();
        let quoted = json[1..json.len() - 1].replace("${", "$${").replace("%{", "%%{");
        let mut doc = json!({
            "resource_changes": [{
                "address": format!("module.m[\"{quoted}\"].aws_x.y[\"{quoted}\"]"),
                "module_address": format!("module.m[\"{quoted}\"]"),
                "index": secret, "type": "aws_x", "name": "y",
                "change": {"actions": ["update"],
                    "before": {"tags": {secret.as_str(): "v"}, "note": format!("is {secret}.")},
                    "after": {"tags": {secret.as_str(): "w"}},
                    "after_unknown": {"tags": {secret.as_str(): false}},
                    "after_sensitive": {"tags": {secret.as_str(): false}},
                    "replace_paths": [["tags", secret.as_str()]]}
            }],
            "checks": [{"address": {"kind": "resource", "to_display": format!("aws_x.y[\"{quoted}\"]")},
                "instances": [{"address": {"to_display": format!("aws_x.y[\"{quoted}\"]"),
                                            "instance_key": secret}}]}]
        });
        scrub(&mut doc, [secret.as_str()]);
        let mut seen = Vec::new();
        collect(&doc, &mut seen);
        for text in &seen {
            prop_assert!(!text.contains(secret.as_str()) && !text.contains(quoted.as_str()), "{} in {}", secret, text);
        }
        let rc = &doc["resource_changes"][0];
        prop_assert_eq!(
            (&rc["type"], &rc["name"], &rc["change"]["actions"]),
            (&json!("aws_x"), &json!("y"), &json!(["update"]))
        );
    }
}

proptest! {
    /// A deferred change (Terraform 1.8+) and an action invocation (1.14), in both of their
    /// sections: each shows exactly the leaves its own mask leaves open, and its address,
    /// reason and trigger stay.
    #[test]
    fn deferred_changes_and_action_invocations_show_exactly_their_open_leaves(
        before in tree(),
        after in tree(),
        config in tree(),
    ) {
        let mut n = 0;
        let mut leaves = Vec::new();
        let (b, bm) = build(&before, &mut n, false, &mut leaves);
        let (a, am) = build(&after, &mut n, false, &mut leaves);
        let change_leaves = leaves.len();
        let (c, cm) = build(&config, &mut n, false, &mut leaves);
        let invocation = json!({
            "address": "action.aws_lambda_invoke.n", "type": "aws_lambda_invoke", "name": "n",
            "config_values": c, "config_sensitive": cm, "config_unknown": {},
            "lifecycle_action_trigger": {"triggering_resource_address": "aws_x.y",
                "action_trigger_event": "after_update", "action_trigger_block_index": 0,
                "actions_list_index": 0, "on_failure": "fail"}
        });
        let mut doc = json!({
            "terraform_version": "1.14.0",
            "deferred_changes": [{"reason": "provider_config_unknown", "resource_change": {
                "address": "aws_x.y", "type": "aws_x", "name": "y", "change": {
                    "actions": ["update"], "before": b, "after": a,
                    "before_sensitive": bm, "after_sensitive": am}}}],
            "action_invocations": [invocation],
            "deferred_action_invocations": [{"reason": "deferred_prereq",
                "action_invocation": invocation}],
        });
        redact(&mut doc, &[]);
        let deferred = doc["deferred_changes"].to_string();
        let actions = doc["action_invocations"].to_string();
        let deferred_actions = doc["deferred_action_invocations"].to_string();
        for (i, (leaf, masked)) in leaves.iter().enumerate() {
            let shown = if i < change_leaves {
                vec![deferred.contains(leaf.as_str())]
            } else {
                vec![actions.contains(leaf.as_str()), deferred_actions.contains(leaf.as_str())]
            };
            for shown in shown {
                prop_assert_eq!(shown, !*masked, "leaf {} masked={}", leaf, masked);
            }
        }
        let rc = &doc["deferred_changes"][0];
        prop_assert_eq!(&rc["reason"], &json!("provider_config_unknown"));
        prop_assert_eq!(&rc["resource_change"]["address"], &json!("aws_x.y"));
        prop_assert_eq!(&rc["resource_change"]["change"]["actions"], &json!(["update"]));
        for invocation in [
            &doc["action_invocations"][0],
            &doc["deferred_action_invocations"][0]["action_invocation"],
        ] {
            prop_assert_eq!(&invocation["address"], &json!("action.aws_lambda_invoke.n"));
            prop_assert_eq!(
                &invocation["lifecycle_action_trigger"]["triggering_resource_address"],
                &json!("aws_x.y")
            );
        }
    }
}

/// Every string and every object key of `v`.
fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Object(fields) => {
            for (k, v) in fields {
                out.push(k.clone());
                collect(v, out);
            }
        }
        _ => {}
    }
}
