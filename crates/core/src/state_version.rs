//! State history: the versions of an environment's Terraform state (S3 object versions of
//! its state key), what each one says about itself, which job wrote it, and a version's
//! state with every sensitive value redacted.
//!
//! Pure: the store lists the versions and reads their bytes; this module decides.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JobId;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "(sensitive)";

/// How long after a job's end a state version it wrote may be stamped (the last write
/// lands before the pilot's exit report; clocks differ a little).
pub const WRITER_SLACK_SECONDS: i64 = 120;

/// The largest state version the API reads and redacts, in bytes (larger: 413-like refusal).
pub const STATE_VERSION_MAX_BYTES: usize = 8 * 1024 * 1024;

/// A restore: the state version a job writes back as the environment's current state
/// (`terraform state push -force`), then plans, so its plan shows what the restore changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateRestore {
    /// The S3 version id of the state written back.
    pub version_id: String,
    /// Why, as the person who asked said.
    pub reason: String,
}

/// The longest restore reason, in bytes.
pub const RESTORE_REASON_MAX: usize = 1024;

/// Checks a version id from a path: S3 version ids are at most 1024 bytes of URL-safe
/// characters; anything else is refused before it reaches S3.
pub fn version_id_problem(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > 1024 {
        return Some("must be 1 to 1024 characters".into());
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-+=".contains(c))
    {
        return Some("must contain only letters, digits and `._-+=`".into());
    }
    None
}

/// What a state file says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFacts {
    /// The state's serial, incremented by each write.
    pub serial: Option<u64>,
    /// The state's lineage, fixed when the state was first made.
    pub lineage: Option<String>,
    /// The Terraform version that wrote it.
    pub terraform_version: Option<String>,
}

/// Reads a state file's serial, lineage and Terraform version; `None` when it is not a
/// JSON object (a corrupt or foreign object).
pub fn facts(state: &Value) -> Option<StateFacts> {
    let o = state.as_object()?;
    Some(StateFacts {
        serial: o.get("serial").and_then(Value::as_u64),
        lineage: o.get("lineage").and_then(Value::as_str).map(String::from),
        terraform_version: o
            .get("terraform_version")
            .and_then(Value::as_str)
            .map(String::from),
    })
}

/// A redacted secret this long or longer is also found inside other strings (a string
/// holding it is redacted whole); a shorter one only where a whole string equals it, so a
/// secret such as `"1"` or `"on"` does not wipe every string that happens to contain it.
pub const SECRET_INSIDE_MIN: usize = 4;

/// A state with every sensitive value replaced by [`REDACTED`], in two passes.
///
/// By place:
/// - outputs marked `"sensitive": true` (state format 4 omits the flag on plain outputs,
///   which stay): their value;
/// - in each resource instance (state format 4), every attribute path listed in
///   `sensitive_attributes`, and the provider's opaque `private` data;
/// - `attributes_flat` (older providers, no sensitivity known): every value;
/// - an older state format (3 and below, Terraform 0.11), which records no sensitivity:
///   every resource attribute and every output value.
///
/// By value: every string redacted by place because it is known sensitive (under a
/// sensitive path, or a sensitive output's value) is a secret, and any other string
/// anywhere in the state (any depth, outputs included) that equals a secret, or contains
/// one of at least [`SECRET_INSIDE_MIN`] bytes, is redacted too. Providers copy sensitive
/// inputs into computed attributes they do not mark (Terraform 1.11's `terraform_data`
/// lists `input.token` but not the `output` that mirrors it). Object keys, numbers and
/// booleans are not searched, nor the state's own facts (serial, lineage, Terraform
/// version: the list answer shows them); values redacted wholesale because their sensitivity is
/// unknown (`attributes_flat`, format 3 attributes) are not secrets, so ids stay.
///
/// Everything else (addresses, types, serial, lineage) is kept, so two versions can be told
/// apart.
pub fn redact(state: &Value) -> Value {
    let mut out = state.clone();
    let mut secrets = Secrets::new();
    let version = state.get("version").and_then(Value::as_u64).unwrap_or(0);
    let Some(o) = out.as_object_mut() else {
        return Value::String(REDACTED.into());
    };
    if version >= 4 {
        if let Some(outputs) = o.get_mut("outputs").and_then(Value::as_object_mut) {
            for output in outputs.values_mut() {
                let sensitive = output.get("sensitive").and_then(Value::as_bool) == Some(true);
                if sensitive {
                    if let Some(v) = output.get_mut("value") {
                        take(v, &mut secrets);
                    }
                }
            }
        }
        for resource in o
            .get_mut("resources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for instance in resource
                .get_mut("instances")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                redact_instance(instance, &mut secrets);
            }
        }
    } else {
        // No sensitivity recorded: keep only the shape.
        for module in o
            .get_mut("modules")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(outputs) = module.get_mut("outputs").and_then(Value::as_object_mut) {
                for output in outputs.values_mut() {
                    let sensitive = output.get("sensitive").and_then(Value::as_bool) == Some(true);
                    if let Some(v) = output.get_mut("value") {
                        if sensitive {
                            take(v, &mut secrets);
                        } else {
                            *v = Value::String(REDACTED.into());
                        }
                    }
                }
            }
            for resource in module
                .get_mut("resources")
                .and_then(Value::as_object_mut)
                .into_iter()
                .flat_map(|r| r.values_mut())
            {
                if let Some(primary) = resource.get_mut("primary").and_then(Value::as_object_mut) {
                    for key in ["attributes", "meta"] {
                        if let Some(attrs) = primary.get_mut(key).and_then(Value::as_object_mut) {
                            attrs.values_mut().for_each(|v| *v = REDACTED.into());
                        }
                    }
                }
            }
        }
    }
    scrub(&mut out, &secrets);
    out
}

/// The top-level keys of a state that [`facts`] reads, never searched for secrets.
const FACT_KEYS: [&str; 4] = ["version", "serial", "lineage", "terraform_version"];

/// The strings known sensitive (non-empty, not the marker itself).
type Secrets = std::collections::BTreeSet<String>;

/// Records every string below `v` as a secret, then replaces `v` with the marker.
fn take(v: &mut Value, secrets: &mut Secrets) {
    collect(v, secrets);
    *v = Value::String(REDACTED.into());
}

fn collect(v: &Value, secrets: &mut Secrets) {
    match v {
        Value::String(s) if !s.is_empty() && s != REDACTED => {
            secrets.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|v| collect(v, secrets)),
        Value::Object(o) => o.values().for_each(|v| collect(v, secrets)),
        _ => {}
    }
}

/// Redacts every string in `v` that equals a secret or contains a long enough one: one
/// pass over the state, each string searched once for all secrets (Aho-Corasick).
fn scrub(v: &mut Value, secrets: &Secrets) {
    if secrets.is_empty() {
        return;
    }
    let inside =
        aho_corasick::AhoCorasick::new(secrets.iter().filter(|s| s.len() >= SECRET_INSIDE_MIN))
            .ok();
    // The state's own facts are not searched: the list answer shows them anyway, and a
    // secret that happens to equal a lineage must not hide which version this is.
    let mut stack: Vec<&mut Value> = match v {
        Value::Object(o) => o
            .iter_mut()
            .filter(|(k, _)| !FACT_KEYS.contains(&k.as_str()))
            .map(|(_, v)| v)
            .collect(),
        other => vec![other],
    };
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => {
                let found = secrets.contains(s.as_str())
                    || inside.as_ref().is_some_and(|ac| ac.is_match(s.as_str()));
                if found {
                    *s = REDACTED.into();
                }
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            Value::Object(o) => stack.extend(o.values_mut()),
            _ => {}
        }
    }
}

fn redact_instance(instance: &mut Value, secrets: &mut Secrets) {
    let Some(i) = instance.as_object_mut() else {
        return;
    };
    if i.contains_key("private") {
        i.insert("private".into(), REDACTED.into());
    }
    if let Some(flat) = i.get_mut("attributes_flat").and_then(Value::as_object_mut) {
        flat.values_mut().for_each(|v| *v = REDACTED.into());
    }
    let paths: Vec<Value> = i
        .get("sensitive_attributes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(attrs) = i.get_mut("attributes") else {
        return;
    };
    for path in paths {
        let steps = steps_of(&path);
        match steps {
            Some(steps) => redact_path(attrs, &steps, secrets),
            // A path in a shape not understood: redact every attribute rather than guess.
            None => redact_all(attrs, secrets),
        }
    }
}

/// One step of an attribute path.
enum Step {
    Attr(String),
    Index(Value),
}

/// A sensitive attribute path as steps: a list of `{type: get_attr|index, value}`, or an
/// object `{path: [...]}` around it. `None` for any other shape.
fn steps_of(path: &Value) -> Option<Vec<Step>> {
    let list = match path {
        Value::Array(a) => a,
        Value::Object(o) => o.get("path")?.as_array()?,
        _ => return None,
    };
    list.iter()
        .map(|s| {
            let kind = s.get("type")?.as_str()?;
            let value = s.get("value")?;
            match kind {
                "get_attr" => Some(Step::Attr(value.as_str()?.to_string())),
                "index" => Some(Step::Index(value.get("value").unwrap_or(value).clone())),
                _ => None,
            }
        })
        .collect()
}

fn redact_path(v: &mut Value, steps: &[Step], secrets: &mut Secrets) {
    let Some((first, rest)) = steps.split_first() else {
        take(v, secrets);
        return;
    };
    let next = match (first, v) {
        (Step::Attr(name), Value::Object(o)) => o.get_mut(name),
        (Step::Index(Value::String(k)), Value::Object(o)) => o.get_mut(k),
        (Step::Index(Value::Number(n)), Value::Array(a)) => {
            n.as_u64().and_then(|i| a.get_mut(usize::try_from(i).ok()?))
        }
        // A set or a shape not matching the path: everything below is redacted.
        (_, other) => {
            redact_all(other, secrets);
            return;
        }
    };
    if let Some(next) = next {
        redact_path(next, rest, secrets);
    }
}

/// Replaces every leaf below `v` (keeping object keys and list lengths), recording its
/// strings as secrets.
fn redact_all(v: &mut Value, secrets: &mut Secrets) {
    match v {
        Value::Object(o) => o.values_mut().for_each(|v| redact_all(v, secrets)),
        Value::Array(a) => a.iter_mut().for_each(|v| redact_all(v, secrets)),
        Value::Null => {}
        leaf => take(leaf, secrets),
    }
}

/// The state a job ended with, as its pilot read it after writing (`terraform state
/// pull` after an apply, a destroy or a restore's push): what matches a state version to
/// the job that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StateStamp {
    /// The state's serial.
    pub serial: u64,
    /// The state's lineage.
    pub lineage: String,
}

/// The longest lineage accepted in a [`StateStamp`] (Terraform's are 36-character UUIDs).
pub const LINEAGE_MAX: usize = 128;

impl StateStamp {
    /// The stamp of a state's facts, when they hold both a serial and a lineage.
    pub fn of(facts: &StateFacts) -> Option<Self> {
        Some(Self {
            serial: facts.serial?,
            lineage: facts.lineage.clone()?,
        })
    }

    /// What is wrong with a reported stamp: the lineage must be 1 to [`LINEAGE_MAX`]
    /// letters, digits and `-`.
    pub fn problem(&self) -> Option<String> {
        let ok = !self.lineage.is_empty()
            && self.lineage.len() <= LINEAGE_MAX
            && self
                .lineage
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        (!ok).then(|| format!("lineage must be 1 to {LINEAGE_MAX} letters, digits and `-`"))
    }
}

/// A job as the writer match sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWindow {
    /// The job.
    pub id: JobId,
    /// When it may first have written state: its task's start, else its submit.
    pub from: DateTime<Utc>,
    /// When it ended (`None`: still running).
    pub until: Option<DateTime<Utc>>,
    /// The state it ended with, when its pilot reported it (jobs from before the report
    /// existed, and pilots that could not read the state, have none).
    pub wrote: Option<StateStamp>,
}

/// How a state version's writer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// The job recorded ending with this version's serial and lineage.
    Serial,
    /// By time alone: the version is not the end state of any job that recorded one (a
    /// long apply's earlier writes, or a job from before serials were recorded).
    Time,
    /// No job of the environment's wrote it (written outside Sortie, or by a job older
    /// than those read).
    None,
}

/// The job that wrote a state version with `facts`, stamped `at`, and how it was found.
///
/// 1. **By serial.** The job that recorded ending with the version's serial and lineage.
///    Two can (a restore writes an older serial back): then the one [`writer`] picks by
///    time among them, else the latest of them to start by `at`'s second.
/// 2. **By time**, for a version that is no job's recorded end: [`writer`], among the jobs
///    whose recorded end does not rule them out (a job that ended with another lineage, or
///    with a lower serial, did not write it; a job with no record is not ruled out).
/// 3. Else none.
pub fn match_writer(
    facts: &StateFacts,
    at: DateTime<Utc>,
    jobs: &[JobWindow],
) -> (Option<JobId>, MatchedBy) {
    let stamp = StateStamp::of(facts);
    if let Some(stamp) = &stamp {
        let same: Vec<JobWindow> = jobs
            .iter()
            .filter(|j| j.wrote.as_ref() == Some(stamp))
            .cloned()
            .collect();
        let second_end = at + Duration::seconds(1);
        let chosen = writer(at, &same).or_else(|| {
            same.iter()
                .filter(|j| j.from < second_end)
                .max_by_key(|j| j.from)
                .or_else(|| same.iter().max_by_key(|j| j.from))
                .map(|j| j.id.clone())
        });
        if let Some(id) = chosen {
            return (Some(id), MatchedBy::Serial);
        }
    }
    let possible: Vec<JobWindow> = jobs
        .iter()
        .filter(|j| match (&stamp, &j.wrote) {
            (Some(v), Some(w)) => w.lineage == v.lineage && w.serial >= v.serial,
            _ => true,
        })
        .cloned()
        .collect();
    match writer(at, &possible) {
        Some(id) => (Some(id), MatchedBy::Time),
        None => (None, MatchedBy::None),
    }
}

/// The writers of a page of state versions, each `(facts, stamped at)`: [`match_writer`]
/// for each, except that one job's recorded end credits one version only.
///
/// A restore can end with the serial and lineage of the apply just before it (Terraform's
/// `state push -force` writes the restored state at the current serial), and when both
/// start within one second, time alone cannot tell their versions apart. So the versions
/// are matched newest first, each among the jobs not yet credited with a version of the
/// same serial and lineage: the newer version goes to the later job, the older to the
/// earlier. A version whose every such job is already credited is matched as
/// [`match_writer`] matches it.
pub fn match_writers(
    versions: &[(&StateFacts, DateTime<Utc>)],
    jobs: &[JobWindow],
) -> Vec<(Option<JobId>, MatchedBy)> {
    let mut order: Vec<usize> = (0..versions.len()).collect();
    // Newest first; a page lists versions newest first, which breaks ties in a second.
    order.sort_by(|a, b| versions[*b].1.cmp(&versions[*a].1).then(a.cmp(b)));
    let mut credited: Vec<JobId> = Vec::new();
    let mut found = vec![(None, MatchedBy::None); versions.len()];
    for i in order {
        let (facts, at) = versions[i];
        let stamp = StateStamp::of(facts);
        let free: Vec<JobWindow> = jobs
            .iter()
            .filter(|j| !(stamp.is_some() && j.wrote == stamp && credited.contains(&j.id)))
            .cloned()
            .collect();
        let matched = match match_writer(facts, at, &free) {
            (Some(id), MatchedBy::Serial) => (Some(id), MatchedBy::Serial),
            // Every job that ended with it is credited already: as if alone.
            _ => match_writer(facts, at, jobs),
        };
        if let (Some(id), MatchedBy::Serial) = &matched {
            credited.push(id.clone());
        }
        found[i] = matched;
    }
    found
}

/// The job that wrote a state version stamped `at`, by time alone: among `jobs` (those of
/// the environment that write state: applies, destroys, restores), the latest to start at
/// or before `at` whose end (plus [`WRITER_SLACK_SECONDS`]) is not before `at`. Jobs on one
/// environment write one at a time under its lock, so at most one window holds a write.
///
/// S3 stamps a version to the whole second (truncated), so a job counts as started by `at`
/// when it started within `at`'s second: a job that starts and writes within one second
/// is its write's writer. A write by the job before it in that same second is then
/// attributed to the later job too (the stamp cannot tell them apart; [`match_writer`]
/// tells them apart by serial).
pub fn writer(at: DateTime<Utc>, jobs: &[JobWindow]) -> Option<JobId> {
    let slack = Duration::seconds(WRITER_SLACK_SECONDS);
    let second_end = at + Duration::seconds(1);
    jobs.iter()
        .filter(|j| j.from < second_end && j.until.is_none_or(|u| at <= u + slack))
        .max_by_key(|j| j.from)
        .map(|j| j.id.clone())
}

#[cfg(test)]
#[path = "state_version_tests.rs"]
mod tests;
