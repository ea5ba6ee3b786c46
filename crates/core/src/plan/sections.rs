//! The sections of a `terraform show -json` plan that Sortie understands, as an allowlist:
//! [`keep_known`] drops every field that is not in it, at every level, before the
//! redaction, so a section a newer Terraform adds never reaches the artifact unredacted: it
//! is dropped until the redaction handles it (as `deferred_changes`, `action_invocations`
//! and `deferred_action_invocations` were, until their masks were read).
//!
//! The shapes follow Terraform's JSON output format
//! (<https://developer.hashicorp.com/terraform/internals/json-format>): the plan, the
//! change, the values and the configuration representations. Fields that hold values
//! ([`Shape::Value`]) are kept whole here and redacted by their masks afterwards.

use serde_json::Value;

use super::redact::MARKER;

/// What Sortie expects at one place of the document.
#[derive(Debug)]
pub(super) enum Shape {
    /// A string, number, boolean or null; an object or array here is replaced by the marker.
    Scalar,
    /// Anything: a value (redacted by its mask or walked whole), a mask, a path, a list of
    /// words such as `actions`.
    Value,
    /// An object with these fields only; any other field is dropped.
    Object(&'static [(&'static str, &'static Shape)]),
    /// An array of one shape.
    List(&'static Shape),
    /// An object keyed by names (outputs, variables, module calls), of one shape.
    Map(&'static Shape),
}

use Shape::{List, Map, Object, Scalar, Value as Any};

/// Most levels the allowlist descends (the shapes below are far shallower, but the
/// configuration's modules nest).
const MAX_DEPTH: usize = 128;

/// The plan representation: every top-level section Sortie reads or passes to policies.
/// Left out (dropped): anything newer.
pub(super) static PLAN: Shape = Object(&[
    ("format_version", &Scalar),
    ("terraform_version", &Scalar),
    ("variables", &Map(&Object(&[("value", &Any)]))),
    ("planned_values", &VALUES),
    ("resource_drift", &List(&RESOURCE_CHANGE)),
    ("resource_changes", &List(&RESOURCE_CHANGE)),
    ("deferred_changes", &List(&DEFERRED_CHANGE)),
    ("output_changes", &Map(&CHANGE)),
    ("action_invocations", &List(&ACTION_INVOCATION)),
    (
        "deferred_action_invocations",
        &List(&Object(&[
            ("reason", &Scalar),
            ("action_invocation", &ACTION_INVOCATION),
        ])),
    ),
    ("prior_state", &PRIOR_STATE),
    ("configuration", &CONFIGURATION),
    (
        "relevant_attributes",
        &List(&Object(&[("resource", &Scalar), ("attribute", &Any)])),
    ),
    ("checks", &List(&CHECK)),
    ("timestamp", &Scalar),
    ("applyable", &Scalar),
    ("complete", &Scalar),
    ("errored", &Scalar),
]);

/// One entry of `resource_changes` or `resource_drift`.
static RESOURCE_CHANGE: Shape = Object(&[
    ("address", &Scalar),
    ("previous_address", &Scalar),
    ("module_address", &Scalar),
    ("mode", &Scalar),
    ("type", &Scalar),
    ("name", &Scalar),
    ("index", &Scalar),
    ("index_unknown", &Scalar),
    ("provider_name", &Scalar),
    ("deposed", &Scalar),
    ("action_reason", &Scalar),
    ("change", &CHANGE),
]);

/// One entry of `deferred_changes` (Terraform 1.8+ deferred actions): a resource change
/// Terraform could not plan yet, and why.
static DEFERRED_CHANGE: Shape =
    Object(&[("reason", &Scalar), ("resource_change", &RESOURCE_CHANGE)]);

/// One entry of `action_invocations` (Terraform 1.14 actions), also the
/// `action_invocation` of a `deferred_action_invocations` entry: the action's address, the
/// values of its `config` block with their masks, and what triggers it.
static ACTION_INVOCATION: Shape = Object(&[
    ("address", &Scalar),
    ("type", &Scalar),
    ("name", &Scalar),
    ("provider_name", &Scalar),
    ("config_values", &Any),
    ("config_sensitive", &Any),
    ("config_unknown", &Any),
    (
        "lifecycle_action_trigger",
        &Object(&[
            ("triggering_resource_address", &Scalar),
            ("action_trigger_event", &Scalar),
            ("action_trigger_block_index", &Scalar),
            ("actions_list_index", &Scalar),
            ("on_failure", &Scalar),
        ]),
    ),
    (
        "invoke_action_trigger",
        &Object(&[("calling_resource_address", &Scalar)]),
    ),
]);

/// The change representation (a resource's or an output's). Left out: the resource
/// identities (`before_identity`, `after_identity`, `importing.identity`).
static CHANGE: Shape = Object(&[
    ("actions", &Any),
    ("before", &Any),
    ("after", &Any),
    ("after_unknown", &Any),
    ("before_sensitive", &Any),
    ("after_sensitive", &Any),
    ("replace_paths", &Any),
    (
        "importing",
        &Object(&[("id", &Scalar), ("unknown", &Scalar)]),
    ),
    ("generated_config", &Scalar),
]);

/// The values representation (`planned_values`, `prior_state.values`).
static VALUES: Shape = Object(&[
    (
        "outputs",
        &Map(&Object(&[
            ("sensitive", &Scalar),
            ("type", &Any),
            ("value", &Any),
        ])),
    ),
    ("root_module", &MODULE_VALUES),
]);

static MODULE_VALUES: Shape = Object(&[
    ("address", &Scalar),
    ("resources", &List(&RESOURCE_VALUES)),
    ("child_modules", &List(&MODULE_VALUES)),
]);

static RESOURCE_VALUES: Shape = Object(&[
    ("address", &Scalar),
    ("mode", &Scalar),
    ("type", &Scalar),
    ("name", &Scalar),
    ("index", &Scalar),
    ("provider_name", &Scalar),
    ("schema_version", &Scalar),
    ("values", &Any),
    ("sensitive_values", &Any),
    ("depends_on", &Any),
    ("tainted", &Scalar),
    ("deposed_key", &Scalar),
]);

/// The state representation under `prior_state`.
static PRIOR_STATE: Shape = Object(&[
    ("format_version", &Scalar),
    ("terraform_version", &Scalar),
    ("values", &VALUES),
]);

/// The configuration representation.
static CONFIGURATION: Shape = Object(&[
    (
        "provider_config",
        &Map(&Object(&[
            ("name", &Scalar),
            ("full_name", &Scalar),
            ("alias", &Scalar),
            ("version_constraint", &Scalar),
            ("module_address", &Scalar),
            ("expressions", &Any),
        ])),
    ),
    ("root_module", &CONFIG_MODULE),
]);

static CONFIG_MODULE: Shape = Object(&[
    (
        "outputs",
        &Map(&Object(&[
            ("expression", &Any),
            ("sensitive", &Scalar),
            ("depends_on", &Any),
            ("description", &Scalar),
        ])),
    ),
    (
        "resources",
        &List(&Object(&[
            ("address", &Scalar),
            ("mode", &Scalar),
            ("type", &Scalar),
            ("name", &Scalar),
            ("provider_config_key", &Scalar),
            ("provisioners", &Any),
            ("expressions", &Any),
            ("schema_version", &Scalar),
            ("count_expression", &Any),
            ("for_each_expression", &Any),
            ("depends_on", &Any),
        ])),
    ),
    (
        "module_calls",
        &Map(&Object(&[
            ("source", &Scalar),
            ("expressions", &Any),
            ("count_expression", &Any),
            ("for_each_expression", &Any),
            ("module", &CONFIG_MODULE),
            ("version_constraint", &Scalar),
            ("depends_on", &Any),
        ])),
    ),
    (
        "variables",
        &Map(&Object(&[
            ("default", &Any),
            ("description", &Scalar),
            ("sensitive", &Scalar),
        ])),
    ),
]);

/// One entry of `checks` (the check results of the plan).
static CHECK: Shape = Object(&[
    ("address", &CHECK_ADDRESS),
    ("status", &Scalar),
    (
        "instances",
        &List(&Object(&[
            ("address", &CHECK_ADDRESS),
            ("status", &Scalar),
            ("problems", &List(&Object(&[("message", &Scalar)]))),
        ])),
    ),
]);

static CHECK_ADDRESS: Shape = Object(&[
    ("kind", &Scalar),
    ("to_display", &Scalar),
    ("mode", &Scalar),
    ("type", &Scalar),
    ("name", &Scalar),
    ("module", &Scalar),
    ("instance_key", &Scalar),
]);

/// Drops every field of `value` that `shape` does not list, at every level; a value of
/// another kind than the shape expects (an object where a scalar belongs) becomes the
/// marker, and so does anything deeper than [`MAX_DEPTH`]. `null` is kept anywhere.
pub(super) fn keep_known(value: &mut Value, shape: &Shape, depth: usize) {
    match (shape, &mut *value) {
        (_, Value::Null) | (Any, _) => {}
        (Scalar, Value::Bool(_) | Value::Number(_) | Value::String(_)) => {}
        (Object(fields), Value::Object(map)) if depth < MAX_DEPTH => {
            map.retain(|key, _| fields.iter().any(|(name, _)| name == key));
            for (key, v) in map.iter_mut() {
                if let Some((_, shape)) = fields.iter().find(|(name, _)| name == key) {
                    keep_known(v, shape, depth + 1);
                }
            }
        }
        (List(item), Value::Array(items)) if depth < MAX_DEPTH => {
            for v in items {
                keep_known(v, item, depth + 1);
            }
        }
        (Map(item), Value::Object(map)) if depth < MAX_DEPTH => {
            for v in map.values_mut() {
                keep_known(v, item, depth + 1);
            }
        }
        _ => *value = Value::String(MARKER.into()),
    }
}
