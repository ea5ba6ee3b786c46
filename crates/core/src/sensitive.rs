//! Sensitive variables: Terraform variables whose values never enter a job record.
//!
//! A client sends `sensitive_variables` (name → value) once, in the submit request. The
//! API keeps every value in ONE Secrets Manager secret named for the job
//! ([`job_secret_name`], its value [`encode`]d as a JSON object name → value), and the job
//! records the names and that secret's ARN ([`record`]:
//! [`crate::JobRequest::sensitive_variables`] and [`crate::JobRequest::sensitive_secret`]).
//! One secret per job, not per variable: Secrets Manager's CreateSecret and DeleteSecret
//! are limited to 50 per second per account and Region (not adjustable), and a secret costs
//! by the month whatever it holds (docs/decisions/secrets-and-tokens.md). A job submitted
//! before that holds `{name: ARN}` of one secret per variable ([`secret_name`]) and is still
//! read and deleted ([`secret_arns`]). The runner fetches the values with its job token and
//! gives them to terraform as `TF_VAR_<name>` in its environment ([`env_name`]); the secret
//! is deleted when the job ends, and the sweep deletes any whose job has ended (found by
//! [`JOB_TAG`]). Everyone else sees each name with [`SHOWN`].

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::ids::JobId;
use crate::job::JobRequest;
use crate::problems::{key_path, Problems};
use crate::ValidationError;

/// The submit request's field holding the values.
pub const FIELD: &str = "sensitive_variables";

/// What a view shows in place of a sensitive variable's value or reference.
pub const SHOWN: &str = "(sensitive)";

/// The most sensitive variables one job may have.
pub const MAX_COUNT: usize = 20;

/// The longest value, in bytes (Secrets Manager takes 65,536; a process environment
/// should stay far below that).
pub const VALUE_MAX: usize = 16 * 1024;

pub use crate::names::{variable_name_problem as name_problem, VARIABLE_NAME_MAX as NAME_MAX};

/// What every job secret's name begins with; the control plane may touch only these.
pub const SECRET_PREFIX: &str = "sortie/jobs/";

/// The values of a job's sensitive variables, by name: held only between the submit
/// request and Secrets Manager, or between the API's answer and terraform's environment.
/// Its `Debug` shows the names alone, and it has no `Serialize`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SensitiveValues(BTreeMap<String, String>);

impl SensitiveValues {
    /// Values by name (the caller has validated them, or they come from the API).
    pub fn new(values: BTreeMap<String, String>) -> Self {
        Self(values)
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// Each name with its value.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The values by name, consumed (to answer the runner).
    pub fn into_inner(self) -> BTreeMap<String, String> {
        self.0
    }
}

impl fmt::Debug for SensitiveValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, SHOWN)))
            .finish()
    }
}

/// The Secrets Manager name of job `job_id`'s sensitive variable `name` in a job submitted
/// before one secret per job: `sortie/jobs/<job id>/<name>` (read and deleted, never made).
pub fn secret_name(job_id: &JobId, name: &str) -> String {
    format!("{SECRET_PREFIX}{job_id}/{name}")
}

/// The Secrets Manager name of job `job_id`'s one secret, holding every sensitive value:
/// `sortie/jobs/<job id>`.
pub fn job_secret_name(job_id: &JobId) -> String {
    format!("{SECRET_PREFIX}{job_id}")
}

/// The tag naming the job a secret belongs to (its value is the job id); the sweep lists
/// the secrets by it to delete those whose job has ended.
pub const JOB_TAG: &str = "sortie:job";
/// The tag naming the job's environment.
pub const ENV_TAG: &str = "sortie:env";
/// The tag naming the job's organisation.
pub const ORG_TAG: &str = "sortie:org";

/// The value of a job's secret: every value by name, a JSON object.
pub fn encode(values: &SensitiveValues) -> String {
    Value::Object(
        values
            .0
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
    .to_string()
}

/// The values of `names` read from a job secret's value (see [`encode`]). An error names
/// the variable or the shape, never a value.
pub fn decode<'a>(
    text: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<SensitiveValues, String> {
    let Ok(Value::Object(mut all)) = serde_json::from_str::<Value>(text) else {
        return Err("the job's secret does not hold a JSON object of values".into());
    };
    let mut values = BTreeMap::new();
    for name in names {
        match all.remove(name) {
            Some(Value::String(v)) => {
                values.insert(name.to_string(), v);
            }
            _ => return Err(format!("the job's secret holds no value for `{name}`")),
        }
    }
    Ok(SensitiveValues(values))
}

/// Records in `request` where its sensitive values are kept: the names, each with an empty
/// reference (its value is in the job's one secret), and `arn`, that secret (`None` when
/// there is no value).
pub fn record(request: &mut JobRequest, arn: Option<String>, values: &SensitiveValues) {
    request.sensitive_variables = values
        .0
        .keys()
        .map(|k| (k.clone(), String::new()))
        .collect();
    request.sensitive_secret = arn;
}

/// Every secret holding one of `request`'s sensitive values, each once: its job secret, and
/// for a job submitted before one secret per job, each variable's own ARN.
pub fn secret_arns(request: &JobRequest) -> Vec<&str> {
    let mut arns: Vec<&str> = request.sensitive_secret.as_deref().into_iter().collect();
    for arn in request.sensitive_variables.values() {
        if !arn.is_empty() && !arns.contains(&arn.as_str()) {
            arns.push(arn);
        }
    }
    arns
}

/// The environment variable terraform reads the variable `name` from: `TF_VAR_<name>`.
pub fn env_name(name: &str) -> String {
    format!("TF_VAR_{name}")
}

/// How long a job secret whose job cannot be found is kept by the sweep: a submit makes
/// the secret before it writes the job, so a young secret may belong to a job being written.
pub const ORPHAN_GRACE_MINUTES: i64 = 15;

/// What the sweep knows of the job a secret belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretOwner {
    /// The job is queued, running or awaiting review: its values are still needed.
    Live,
    /// The job has ended: its values are needed no more.
    Ended,
    /// No such job (its submit failed before writing it, or the tag names nothing).
    Missing,
}

/// True when the sweep deletes a job secret made at `created` (unknown: old) whose job is
/// `owner`, at `now`: an ended job's at once, a missing job's after
/// [`ORPHAN_GRACE_MINUTES`], a live job's never.
pub fn sweep_deletes(
    owner: SecretOwner,
    created: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    match owner {
        SecretOwner::Live => false,
        SecretOwner::Ended => true,
        SecretOwner::Missing => {
            created.is_none_or(|c| now - c >= chrono::Duration::minutes(ORPHAN_GRACE_MINUTES))
        }
    }
}

/// The job a job secret belongs to, from its name: `sortie/jobs/<job id>` (or, before one
/// secret per job, `sortie/jobs/<job id>/<name>`); `None` for any other name.
pub fn job_of_secret(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(SECRET_PREFIX)?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

/// Decodes a submit request: the job request, and apart from it the values of its
/// sensitive variables (`sensitive_variables`, name → string value). Every problem of
/// both is reported together; a problem names the variable, never its value. A name may
/// not also be a plain variable (the `terraform.tfvars.json` file would win over
/// `TF_VAR_<name>`).
pub fn parse_submitted(value: &Value) -> Result<(JobRequest, SensitiveValues), ValidationError> {
    let mut p = Problems::default();
    let mut rest = value.clone();
    let raw = rest.as_object_mut().and_then(|o| o.remove(FIELD));
    let mut values = BTreeMap::new();
    match raw {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            if map.len() > MAX_COUNT {
                p.push(
                    FIELD,
                    format!(
                        "has {} variables; at most {MAX_COUNT} are allowed",
                        map.len()
                    ),
                );
            }
            for (name, v) in map {
                let path = key_path(FIELD, &name);
                if let Some(problem) = name_problem(&name) {
                    p.push(&path, problem);
                }
                match v {
                    Value::String(s) if s.len() > VALUE_MAX => {
                        p.push(&path, format!("must be at most {VALUE_MAX} bytes"))
                    }
                    Value::String(s) if s.contains('\0') => {
                        p.push(&path, "must not contain a NUL character")
                    }
                    Value::String(s) => {
                        values.insert(name, s);
                    }
                    other => p.push(
                        &path,
                        format!(
                            "must be a string (got {}); Terraform reads it from TF_VAR_{name}",
                            crate::problems::type_name(&other)
                        ),
                    ),
                }
            }
        }
        Some(other) => p.push(
            FIELD,
            format!(
                "must be a mapping of variable names to string values, not {}",
                crate::problems::type_name(&other)
            ),
        ),
    }
    let request = match JobRequest::from_value(&rest) {
        Ok(r) => Some(r),
        Err(e) => {
            p.0.extend(e.problems);
            None
        }
    };
    if let Some(r) = &request {
        for name in values.keys().filter(|n| r.variables.contains_key(*n)) {
            p.push(
                key_path(FIELD, name),
                "is also in `variables`; give a variable one value, sensitive or not",
            );
        }
    }
    match request {
        Some(r) if p.is_empty() => Ok((r, SensitiveValues(values))),
        _ => Err(ValidationError { problems: p.0 }),
    }
}

/// The sensitive variables as a view shows them: each name with [`SHOWN`].
pub fn shown(refs: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    refs.keys()
        .map(|k| (k.clone(), SHOWN.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(sensitive: Value) -> Value {
        json!({"operation": "plan", "files": {"main.tf": ""}, "variables": {"region": "eu"},
            "sensitive_variables": sensitive})
    }

    #[test]
    fn values_are_taken_apart_from_the_request() {
        let (request, values) =
            parse_submitted(&body(json!({"db_password": "hunter2", "_k-2": ""}))).unwrap();
        assert!(request.sensitive_variables.is_empty(), "refs are the API's");
        assert_eq!(values.names(), vec!["_k-2", "db_password"]);
        assert_eq!(
            values.iter().collect::<Vec<_>>(),
            vec![("_k-2", ""), ("db_password", "hunter2")]
        );
        let (_, none) = parse_submitted(&json!({"operation": "plan", "files": {"a.tf": ""}}))
            .expect("no sensitive variables is fine");
        assert!(none.is_empty());
    }

    #[test]
    fn debug_never_shows_a_value() {
        let (_, values) = parse_submitted(&body(json!({"db_password": "hunter2"}))).unwrap();
        let shown = format!("{values:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("db_password") && shown.contains(SHOWN),
            "{shown}"
        );
    }

    #[test]
    fn every_problem_names_the_variable_and_never_the_value() {
        let e = parse_submitted(&body(json!({
            "9bad": "hunter2", "n": 3, "region": "x", "nul": "a\u{0}b",
            "big": "x".repeat(VALUE_MAX + 1)
        })))
        .unwrap_err();
        let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
        for want in [
            "sensitive_variables.9bad",
            "sensitive_variables.n",
            "sensitive_variables.nul",
            "sensitive_variables.big",
        ] {
            assert!(paths.contains(&want), "{want} in {paths:?}");
        }
        let text = format!("{e:?}");
        assert!(!text.contains("hunter2"), "{text}");
        // `region` is valid on its own but clashes only once the rest is valid.
        let e = parse_submitted(&body(json!({"region": "x"}))).unwrap_err();
        assert_eq!(e.problems[0].path, "sensitive_variables.region");
        assert!(e.problems[0].problem.contains("also in `variables`"));
    }

    #[test]
    fn the_shape_and_the_count_are_checked_with_the_rest_of_the_request() {
        let e = parse_submitted(&json!({"operation": "boom", "sensitive_variables": ["x"]}))
            .unwrap_err();
        let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
        assert!(paths.contains(&"sensitive_variables"), "{paths:?}");
        assert!(paths.contains(&"operation"), "{paths:?}");
        let many: serde_json::Map<String, Value> = (0..=MAX_COUNT)
            .map(|i| (format!("v{i}"), json!("x")))
            .collect();
        let e = parse_submitted(&body(Value::Object(many))).unwrap_err();
        assert_eq!(e.problems[0].path, "sensitive_variables");
    }

    #[test]
    fn a_client_cannot_set_references_through_the_plain_request() {
        // `JobRequest::from_value` does not know the field: references are the API's.
        let e =
            JobRequest::from_value(&body(json!({"x": "arn:aws:secretsmanager:x"}))).unwrap_err();
        assert!(e.problems.iter().any(|p| p.path == "sensitive_variables"));
    }

    #[test]
    fn one_secret_holds_every_value_and_gives_back_exactly_the_names_asked() {
        let values = SensitiveValues::new(BTreeMap::from([
            ("db".to_string(), "hunter2 \"quoted\"\n".to_string()),
            ("key".to_string(), "{\"json\": 1}".to_string()),
        ]));
        let text = encode(&values);
        assert_eq!(decode(&text, ["db", "key"]).unwrap(), values);
        assert_eq!(decode(&text, ["key"]).unwrap().names(), vec!["key"]);
        let e = decode(&text, ["other"]).unwrap_err();
        assert!(e.contains("`other`") && !e.contains("hunter2"), "{e}");
        let e = decode("hunter2", ["db"]).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        let e = decode(r#"{"db": 3}"#, ["db"]).unwrap_err();
        assert!(e.contains("`db`"), "{e}");
    }

    #[test]
    fn a_record_keeps_one_reference_and_an_older_record_each_of_its_own() {
        let (mut request, values) =
            parse_submitted(&body(json!({"db": "hunter2", "key": "k"}))).unwrap();
        record(&mut request, Some("arn:one".into()), &values);
        assert_eq!(secret_arns(&request), vec!["arn:one"]);
        assert!(request.sensitive_variables.values().all(String::is_empty));
        assert_eq!(shown(&request.sensitive_variables).len(), 2);
        let stored = serde_json::to_string(&request).unwrap();
        assert!(!stored.contains("hunter2"), "{stored}");
        // A job submitted before one secret per job: each name with its own ARN.
        let mut older = request.clone();
        older.sensitive_secret = None;
        older.sensitive_variables = BTreeMap::from([
            ("db".into(), "arn:a".into()),
            ("key".into(), "arn:b".into()),
        ]);
        assert_eq!(secret_arns(&older), vec!["arn:a", "arn:b"]);
        let read: JobRequest =
            serde_json::from_value(serde_json::to_value(&older).unwrap()).unwrap();
        assert_eq!(read, older, "the older shape still reads");
        record(&mut request, None, &SensitiveValues::default());
        assert!(secret_arns(&request).is_empty());
    }

    #[test]
    fn the_sweep_deletes_an_ended_job_s_secret_and_a_missing_one_s_after_the_grace() {
        let now = chrono::Utc::now();
        let young = Some(now - chrono::Duration::minutes(ORPHAN_GRACE_MINUTES - 1));
        let old = Some(now - chrono::Duration::minutes(ORPHAN_GRACE_MINUTES));
        for created in [young, old, None] {
            assert!(!sweep_deletes(SecretOwner::Live, created, now));
            assert!(sweep_deletes(SecretOwner::Ended, created, now));
        }
        assert!(!sweep_deletes(SecretOwner::Missing, young, now));
        assert!(sweep_deletes(SecretOwner::Missing, old, now));
        assert!(sweep_deletes(SecretOwner::Missing, None, now));
        assert_eq!(job_of_secret("sortie/jobs/01abc"), Some("01abc"));
        assert_eq!(job_of_secret("sortie/jobs/01abc/db"), Some("01abc"));
        assert_eq!(job_of_secret("sortie/jobs/"), None);
        assert_eq!(job_of_secret("other/01abc"), None);
    }

    #[test]
    fn names_secrets_and_views() {
        let id = JobId::from("01jobid".to_string());
        assert_eq!(secret_name(&id, "db"), "sortie/jobs/01jobid/db");
        assert_eq!(job_secret_name(&id), "sortie/jobs/01jobid");
        assert_eq!(env_name("db"), "TF_VAR_db");
        let refs = BTreeMap::from([(
            "db".to_string(),
            "arn:aws:secretsmanager:r:1:secret:x".to_string(),
        )]);
        assert_eq!(
            shown(&refs),
            BTreeMap::from([("db".to_string(), SHOWN.to_string())])
        );
    }
}
