//! What the policy tests share: a set from its modules, and the job of the inputs.

use sortie_core::policy::{Enforcement, OnUnavailable, PolicyModule, PolicySet};
use sortie_policy::JobInput;

/// A set named `name` at `enforcement`, of `(module name, rego)` modules.
pub fn set(name: &str, enforcement: Enforcement, modules: &[(&str, &str)]) -> PolicySet {
    PolicySet {
        name: name.into(),
        description: None,
        modules: modules
            .iter()
            .map(|(n, r)| PolicyModule {
                name: n.to_string(),
                rego: r.to_string(),
            })
            .collect(),
        enforcement,
        criteria: None,
        on_unavailable: OnUnavailable::Fail,
    }
}

/// A mandatory set `s` of these modules, named `m0.rego`, `m1.rego`, ...
pub fn modules(regos: &[&str]) -> PolicySet {
    let names: Vec<String> = (0..regos.len()).map(|i| format!("m{i}.rego")).collect();
    let modules: Vec<(&str, &str)> = names
        .iter()
        .map(String::as_str)
        .zip(regos.iter().copied())
        .collect();
    set("s", Enforcement::Mandatory, &modules)
}

/// Alice's apply in `acme/payments/prod` (production, labelled, tagged).
pub fn job() -> JobInput {
    JobInput {
        operation: "apply".into(),
        requested_by: "alice".into(),
        environment: "acme/payments/prod".into(),
        env_type: "production".into(),
        labels: [("tier".to_string(), "gold".to_string())].into(),
        tags: ["pci".to_string()].into(),
        drift_check: false,
    }
}
