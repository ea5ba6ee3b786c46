//! The plan as data: the pilot uploads `terraform show -json` of every saved plan,
//! redacted ([`redact`]), as the job's `plan.json` artifact; the control plane reads it
//! back as [`PlanData`] (for the policy gate) and as a [`PlanView`] (for people, the API
//! and `sortie job plan`).
//!
//! Where Terraform cannot give the document (0.11 has no `show -json`), the pilot uploads
//! `{"unavailable": "<reason>"}` instead, so the job records why there is no plan data.

mod redact;
mod scrub;
mod sections;
mod show;
mod view;

pub use redact::{redact, MARKER, SCHEMA_MASKS_SINCE, SCRUB_MIN_CHARS, STATE_SCHEMA_MASKS_SINCE};
pub use scrub::scrub;
pub use show::{render, Palette};
pub use view::{
    AttributeChange, ChangeAction, OutputChange, PlanCounts, PlanPage, PlanView, ResourceChange,
    PAGE_MAX,
};

use serde_json::Value;

/// The largest `plan.json` read, in bytes (50 MiB): a bigger plan is [`PlanData::Unavailable`].
pub const PLAN_JSON_MAX_BYTES: usize = 50 * 1024 * 1024;

/// The reason a job with no `plan.json` artifact has no plan data.
pub const NO_ARTIFACT: &str = "no plan data was uploaded";

/// The reason Terraform 0.11 plans have no plan data (it has no `show -json`).
pub const TERRAFORM_011: &str = "plan data unavailable for Terraform 0.11";

/// The reason a `plan.json` over [`PLAN_JSON_MAX_BYTES`] is not read.
pub const TOO_LARGE: &str = "the plan's JSON is over 50 MiB";

/// A job's plan as data, read from its `plan.json` artifact.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanData {
    /// The redacted `terraform show -json` document.
    Available(Value),
    /// Why there is no plan data (Terraform 0.11, no artifact, too large, unreadable).
    Unavailable(String),
}

impl PlanData {
    /// Reads the artifact's bytes (`None`: there is no artifact). An object
    /// `{"unavailable": "<reason>"}` is that reason; bytes over [`PLAN_JSON_MAX_BYTES`] or
    /// that are not a JSON object are unavailable with a sentence saying so.
    pub fn from_artifact(bytes: Option<&[u8]>) -> PlanData {
        let read = read_artifact(
            bytes,
            |bytes| serde_json::from_slice::<Value>(bytes).map_err(|e| e.to_string()),
            |doc| match doc {
                Value::Object(fields) => Some(match (fields.len(), fields.get("unavailable")) {
                    (1, Some(Value::String(reason))) => Some(reason.as_str()),
                    _ => None,
                }),
                _ => None,
            },
        );
        match read {
            Ok(doc) => PlanData::Available(doc),
            Err(reason) => PlanData::Unavailable(reason),
        }
    }

    /// The artifact body that says there is no plan data, for `reason`.
    pub fn unavailable_artifact(reason: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "unavailable": reason }))
            .expect("a JSON object serialises")
    }

    /// The document, when available.
    pub fn document(&self) -> Option<&Value> {
        match self {
            PlanData::Available(doc) => Some(doc),
            PlanData::Unavailable(_) => None,
        }
    }

    /// The reason, when unavailable.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            PlanData::Available(_) => None,
            PlanData::Unavailable(reason) => Some(reason),
        }
    }
}

/// Reads a `plan.json` artifact's bytes (`None`: there is no artifact) into any JSON value
/// type, by one set of rules for every reader (the plan view here, the policy gate's input
/// in `sortie-policy`): over [`PLAN_JSON_MAX_BYTES`], not JSON (`parse` fails), or not an
/// object is `Err` with a sentence saying so; an object `{"unavailable": "<reason>"}` is
/// `Err(reason)`. `object` says of a parsed value: `None`, not an object; `Some(None)`, an
/// object that is a plan; `Some(Some(reason))`, the runner's "unavailable" object.
pub fn read_artifact<T>(
    bytes: Option<&[u8]>,
    parse: impl FnOnce(&[u8]) -> Result<T, String>,
    object: impl FnOnce(&T) -> Option<Option<&str>>,
) -> Result<T, String> {
    let Some(bytes) = bytes else {
        return Err(NO_ARTIFACT.into());
    };
    if bytes.len() > PLAN_JSON_MAX_BYTES {
        return Err(TOO_LARGE.into());
    }
    let doc = parse(bytes).map_err(|e| format!("the plan's JSON could not be read: {e}"))?;
    match object(&doc) {
        Some(None) => Ok(doc),
        Some(Some(reason)) => Err(reason.to_string()),
        None => Err("the plan's JSON could not be read: it is not a JSON object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_absent_artifact_is_unavailable() {
        assert_eq!(
            PlanData::from_artifact(None),
            PlanData::Unavailable(NO_ARTIFACT.into())
        );
    }

    #[test]
    fn an_unavailable_object_carries_its_reason() {
        let body = PlanData::unavailable_artifact(TERRAFORM_011);
        let data = PlanData::from_artifact(Some(&body));
        assert_eq!(data.unavailable(), Some(TERRAFORM_011));
        assert_eq!(data.document(), None);
    }

    #[test]
    fn a_document_is_available() {
        let doc = json!({"format_version": "1.2", "resource_changes": []});
        let bytes = serde_json::to_vec(&doc).unwrap();
        assert_eq!(
            PlanData::from_artifact(Some(&bytes)),
            PlanData::Available(doc)
        );
    }

    #[test]
    fn unreadable_and_oversized_bytes_are_unavailable_with_a_reason() {
        let bad = PlanData::from_artifact(Some(b"{not json"));
        assert!(bad
            .unavailable()
            .unwrap()
            .starts_with("the plan's JSON could not be read: "));
        let array = PlanData::from_artifact(Some(b"[1, 2]"));
        assert!(array.unavailable().unwrap().contains("not a JSON object"));
        let big = vec![b' '; PLAN_JSON_MAX_BYTES + 1];
        assert_eq!(
            PlanData::from_artifact(Some(&big)),
            PlanData::Unavailable(TOO_LARGE.into())
        );
    }
}
