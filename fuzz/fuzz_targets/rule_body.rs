//! Rule bodies as the API reads them for POST and PUT `/v1/groups/{group}/-/rules[/{id}]`:
//! the document parser, the URL's scope (and, for an update, id) pinned into the
//! document, then `RunnerRule::from_value`. A valid rule must pass `validate`,
//! survive its own JSON, and resolve the same way through `resolve` and `RuleIndex`.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use sortie_core::{EnvFacts, EnvPath, RunnerRule};
use sortie_fuzz::{check_error, check_resolution, document, fixture_rules, pin_field};

fn checked(doc: &serde_json::Value) -> Option<RunnerRule> {
    match RunnerRule::from_value(doc) {
        Ok(rule) => Some(rule),
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(doc) = document(data) else {
        return;
    };
    let mut rules = Vec::new();
    // The document as it is (any scope), as `RunnerRule::parse` sees it.
    rules.extend(checked(&doc));
    // Create at `acme/payments`: the scope comes from the URL.
    let mut create = doc.clone();
    if pin_field(&mut create, "scope", "acme/payments").is_some() {
        rules.extend(checked(&create));
        // Update of rule `r1`: the id comes from the URL too.
        let mut update = create;
        if pin_field(&mut update, "id", "r1").is_some() {
            rules.extend(checked(&update));
        }
    }
    let Some(rule) = rules.pop() else {
        return;
    };
    rule.validate()
        .unwrap_or_else(|e| panic!("a parsed rule fails validate(): {e}"));
    let served = serde_json::to_value(&rule).expect("a rule serialises");
    let back = RunnerRule::from_value(&served)
        .unwrap_or_else(|e| panic!("a valid rule's own JSON is refused: {e}\n{served}"));
    assert_eq!(back, rule, "a rule changed through its own JSON");

    let mut set = fixture_rules();
    set.push(rule.clone());
    let mut env_type = rule.criteria.env_type.clone().unwrap_or_else(|| "production".into());
    let labels: BTreeMap<String, String> = rule.criteria.labels.clone();
    let tags: BTreeSet<String> = rule.criteria.tags.clone();
    for path in ["acme/payments/prod", "acme/payments/deep/er/prod-eu", "other/x", "acme/dev"] {
        let path = EnvPath::parse(path).expect("fixture path");
        for (labels, tags) in [(&labels, &tags), (&BTreeMap::new(), &BTreeSet::new())] {
            let facts = EnvFacts {
                path: &path,
                env_type: &env_type,
                labels,
                tags,
            };
            check_resolution(&facts, &set);
        }
        env_type = "development".into();
    }
});
