//! Environment bodies as the API reads them: POST `/v1/groups/{group}/-/environments`
//! (create: `name` and `env_type` required) and PATCH `/v1/environments/{environment}`
//! (any subset of `env_type`, `labels`, `tags`), through the document parser and
//! the core field reader, then `EnvPath::new` for the name and rule resolution on
//! the result, as create does.
#![no_main]

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use sortie_core::{EnvPath, Environment, GroupPath, RunnerId, RunnerLink};
use sortie_fuzz::{check_error, check_resolution, document, env_fields, fixture_rules};

fuzz_target!(|data: &[u8]| {
    let Some(doc) = document(data) else {
        return;
    };
    let rules = fixture_rules();
    let group = GroupPath::parse("acme/payments").expect("fixture group");
    let mut env = Environment {
        settings: Default::default(),
        path: EnvPath::parse("acme/payments/prod").expect("fixture path"),
        env_type: "production".into(),
        labels: Default::default(),
        tags: Default::default(),
        runner: RunnerLink {
            runner_id: RunnerId::parse("acme/payments/team").expect("fixture runner"),
            rule_id: "team".into(),
            linked_by: "fuzz".into(),
            linked_at: Utc.timestamp_opt(0, 0).single().expect("epoch"),
        },
    };

    // Create.
    match env_fields(&doc, true) {
        Ok(f) => match EnvPath::new(group.clone(), f.name.as_deref().unwrap_or_default()) {
            Ok(path) => {
                assert_eq!(path.group(), &group);
                let created = Environment {
                    settings: Default::default(),
                    path,
                    env_type: f.env_type.unwrap_or_default(),
                    labels: f.labels.unwrap_or_default(),
                    tags: f.tags.unwrap_or_default(),
                    runner: env.runner.clone(),
                };
                check_resolution(&created.facts(), &rules);
                let json = serde_json::to_value(&created).expect("an environment serialises");
                let back: Environment = serde_json::from_value(json).expect("and reads back");
                assert_eq!(back, created);
            }
            Err(e) => check_error(&e),
        },
        Err(e) => check_error(&e),
    }

    // Patch.
    match env_fields(&doc, false) {
        Ok(f) => {
            if let Some(t) = f.env_type {
                env.env_type = t;
            }
            if let Some(l) = f.labels {
                env.labels = l;
            }
            if let Some(t) = f.tags {
                env.tags = t;
            }
            check_resolution(&env.facts(), &rules);
        }
        Err(e) => check_error(&e),
    }
});
