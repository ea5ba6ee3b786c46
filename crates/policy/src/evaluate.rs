//! Evaluating compiled sets against one input, each within its time limit.

use std::collections::BTreeSet;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;
use regorus::Value as RegoValue;
use sortie_core::policy::SetResult;

use crate::compile::CompiledSet;
use crate::input::JobInput;
use sortie_core::plan::read_artifact;

/// The most messages kept from one rule (`deny` or `warn`) of one set.
pub const MAX_MESSAGES: usize = 50;
/// The longest message kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The bounds of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one set may take (all its packages' `deny` and `warn`).
    pub time_per_set: Duration,
    /// Instructions one set may execute on regorus's VM (each of its rules afresh); a set
    /// on the interpreter is bounded by its time alone.
    pub instructions_per_set: usize,
}

impl Default for Limits {
    /// One second and 50 million VM instructions per set (a few times what one second
    /// runs on an idle core: the timer is the usual bound, the budget a deterministic one
    /// that a loaded host's clock cannot stretch).
    fn default() -> Self {
        Self {
            time_per_set: Duration::from_secs(1),
            instructions_per_set: 50_000_000,
        }
    }
}

/// A check's input converted once to the evaluator's form (shared, read-only), for every
/// set of the check: converting a 1,000-resource plan costs as much as evaluating a few
/// sets, so it is never done per set. A set indexed by resource type
/// ([`CompiledSet::resource_types`]) reads a copy whose `plan.resource_changes` keeps
/// those types only, made once per distinct set of types and shared by the check's sets.
#[derive(Debug)]
pub struct PreparedInput {
    value: RegoValue,
    /// The input filtered to each set of types asked for so far (at most
    /// [`MAX_FILTERED`]; beyond, a filtered input is made and not kept).
    filtered: Mutex<Vec<(Arc<BTreeSet<String>>, RegoValue)>>,
}

/// The most filtered inputs one [`PreparedInput`] keeps.
pub const MAX_FILTERED: usize = 32;

impl Clone for PreparedInput {
    fn clone(&self) -> Self {
        Self::of(self.value.clone())
    }
}

/// The plan of a check, read from its stored `plan.json` bytes: parsed once, straight
/// into the evaluator's value (never through a `serde_json` tree), or the reason there is
/// no plan data (the same reasons as
/// [`PlanData::from_artifact`](sortie_core::plan::PlanData::from_artifact)).
#[derive(Debug, Clone)]
pub enum PlanInput {
    /// The redacted plan document, parsed.
    Available(RegoValue),
    /// Why there is no plan data (no artifact, too large, unreadable, or the runner's
    /// `{"unavailable": reason}`).
    Unavailable(String),
}

impl PlanInput {
    /// Reads the artifact's bytes (`None`: there is no artifact) by the rules of
    /// [`read_artifact`] that [`PlanData::from_artifact`](sortie_core::plan::PlanData::from_artifact)
    /// also follows: too large, not JSON, or not an object is unavailable with a sentence
    /// saying so; `{"unavailable": "<reason>"}` is that reason.
    pub fn from_artifact(bytes: Option<&[u8]>) -> Self {
        Self::read(bytes, |bytes| {
            let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
            RegoValue::from_json_str(text).map_err(|e| e.to_string())
        })
    }

    /// Reads a `plan.json` from `reader` as it arrives, straight into the evaluator's value:
    /// the bytes are never held whole, only the value (about five times the JSON).
    /// The rules are [`PlanInput::from_artifact`]'s, but for the size, which the caller
    /// checks before it reads (the object's size, from a HEAD).
    pub fn from_reader(reader: impl std::io::Read) -> Self {
        // Object keys are interned as `RegoValue::from_json_str` does it (its `Deserialize`).
        let parsed = serde_json::from_reader::<_, RegoValue>(reader).map_err(|e| e.to_string());
        // Nothing is held to measure: the parse has run, its result is judged by the rules.
        Self::read(Some(&[]), move |_| parsed)
    }

    fn read(bytes: Option<&[u8]>, parse: impl FnOnce(&[u8]) -> Result<RegoValue, String>) -> Self {
        let read = read_artifact(bytes, parse, |doc| {
            let fields = doc.as_object().ok()?;
            let reason = match fields.get(&RegoValue::from("unavailable")) {
                Some(RegoValue::String(reason)) if fields.len() == 1 => Some(reason.as_ref()),
                _ => None,
            };
            Some(reason)
        });
        match read {
            Ok(plan) => Self::Available(plan),
            Err(reason) => Self::Unavailable(reason),
        }
    }
}

impl PreparedInput {
    /// `{"plan": …, "job": …, "runner": …}` from a plan already parsed: the plan is shared,
    /// not copied; only the small job and runner parts are converted.
    pub fn from_parts(plan: RegoValue, job: &JobInput, runner: &serde_json::Value) -> Self {
        let small = |v: serde_json::Result<String>| {
            v.ok()
                .and_then(|text| RegoValue::from_json_str(&text).ok())
                .unwrap_or(RegoValue::Undefined)
        };
        let (job, runner) = (
            small(serde_json::to_string(job)),
            small(serde_json::to_string(runner)),
        );
        if [&plan, &job, &runner].contains(&&RegoValue::Undefined) {
            return Self::of(RegoValue::Undefined);
        }
        let fields: std::collections::BTreeMap<RegoValue, RegoValue> = [
            (RegoValue::from("plan"), plan),
            (RegoValue::from("job"), job),
            (RegoValue::from("runner"), runner),
        ]
        .into_iter()
        .collect();
        Self::of(RegoValue::from(fields))
    }

    /// Converts `input` (`Undefined`, and so an error on every set, when it cannot be).
    pub fn new(input: &serde_json::Value) -> Self {
        // Through JSON text: the parser interns object keys and keeps compact storage,
        // which the evaluator reads faster than a value deserialized from a tree.
        let value = serde_json::to_string(input)
            .ok()
            .and_then(|text| RegoValue::from_json_str(&text).ok())
            .unwrap_or(RegoValue::Undefined);
        Self::of(value)
    }

    fn of(value: RegoValue) -> Self {
        Self {
            value,
            filtered: Mutex::new(Vec::new()),
        }
    }

    /// The input a set sees: the whole input, or for an indexed set the input with
    /// `plan.resource_changes` filtered to its types.
    fn for_set(&self, set: &CompiledSet) -> RegoValue {
        let Some(types) = &set.resource_types else {
            return self.value.clone();
        };
        let mut kept = self.filtered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, value)) = kept.iter().find(|(t, _)| t == types) {
            return value.clone();
        }
        let value = filter_changes(&self.value, types).unwrap_or_else(|| self.value.clone());
        if kept.len() < MAX_FILTERED {
            kept.push((types.clone(), value.clone()));
        }
        value
    }
}

/// `input` with `plan.resource_changes` keeping, in order, the changes whose `type` is one
/// of `types`; `None` when the input has no such array (the set then sees it whole).
fn filter_changes(input: &RegoValue, types: &BTreeSet<String>) -> Option<RegoValue> {
    let (plan_key, changes_key, type_key) = (
        RegoValue::from("plan"),
        RegoValue::from("resource_changes"),
        RegoValue::from("type"),
    );
    let plan = input.as_object().ok()?.get(&plan_key)?;
    let changes = plan.as_object().ok()?.get(&changes_key)?.as_array().ok()?;
    let kept: Vec<RegoValue> = changes
        .iter()
        .filter(|change| {
            let kind = change.as_object().ok().and_then(|c| c.get(&type_key));
            matches!(kind, Some(RegoValue::String(t)) if types.contains(t.as_ref()))
        })
        .cloned()
        .collect();
    let mut plan = plan.clone();
    plan.as_object_mut()
        .ok()?
        .insert(changes_key, RegoValue::from(kept));
    let mut input = input.clone();
    input.as_object_mut().ok()?.insert(plan_key, plan);
    Some(input)
}

/// Evaluates every `(group, set)` against `input`, one [`SetResult`] each, in order.
/// A set that fails (its time limit, a runtime error, a message that is not a string)
/// gives a result with `error` set; nothing here panics or runs unbounded.
pub fn evaluate(
    sets: &[(String, &CompiledSet)],
    input: &serde_json::Value,
    limits: Limits,
) -> Vec<SetResult> {
    evaluate_prepared(sets, &PreparedInput::new(input), limits)
}

/// [`evaluate`] with the input already converted, the sets one after another (on threads
/// they were slower: they contend on the shared input's reference counts).
pub fn evaluate_prepared(
    sets: &[(String, &CompiledSet)],
    input: &PreparedInput,
    limits: Limits,
) -> Vec<SetResult> {
    sets.iter()
        .map(|(group, set)| evaluate_one(group, set, input, limits))
        .collect()
}

fn blank(group: &str, set: &CompiledSet) -> SetResult {
    SetResult {
        set: set.name.clone(),
        group: group.to_string(),
        enforcement: set.enforcement,
        deny: Vec::new(),
        warn: Vec::new(),
        error: None,
    }
}

/// Evaluates one set against an input already converted.
pub fn evaluate_one(
    group: &str,
    set: &CompiledSet,
    input: &PreparedInput,
    limits: Limits,
) -> SetResult {
    let mut result = blank(group, set);
    if input.value == RegoValue::Undefined {
        result.error = Some("the policy input could not be built".into());
        return result;
    }
    let input = input.for_set(set);
    if let Err(e) = run(set, &input, limits, &mut result.deny, &mut result.warn) {
        result.error = Some(e);
    }
    result
}

/// Evaluates every package's `deny` and `warn` into the two lists; `Err` is the reason
/// the set could not be evaluated.
fn run(
    set: &CompiledSet,
    input: &RegoValue,
    limits: Limits,
    deny: &mut Vec<String>,
    warn: &mut Vec<String>,
) -> Result<(), String> {
    let timer = ExecutionTimerConfig {
        limit: limits.time_per_set,
        check_interval: NonZeroU32::new(64).unwrap_or(NonZeroU32::MIN),
    };
    if let Some(program) = &set.program {
        return run_vm(set, program, input, limits, timer, deny, warn);
    }
    let mut engine = set.engine.clone();
    engine.set_execution_timer_config(timer);
    engine.set_input(input.clone());
    let started = std::time::Instant::now();
    for path in &set.rules {
        // The timer covers each call; the budget is also checked between calls.
        if started.elapsed() > limits.time_per_set {
            return Err(timeout(limits));
        }
        let into = if path.ends_with(".deny") {
            &mut *deny
        } else {
            &mut *warn
        };
        let value = engine.eval_rule(path.clone()).map_err(|e| {
            let text = e.to_string();
            if is_time_limit(&text) {
                timeout(limits)
            } else {
                format!("{path}: {}", cut(text.trim()))
            }
        })?;
        messages(&value, into).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

/// [`run`] on regorus's VM: one VM for the set, each rule its own entry point.
fn run_vm(
    set: &CompiledSet,
    program: &std::sync::Arc<regorus::rvm::Program>,
    input: &RegoValue,
    limits: Limits,
    timer: ExecutionTimerConfig,
    deny: &mut Vec<String>,
    warn: &mut Vec<String>,
) -> Result<(), String> {
    let mut vm = regorus::rvm::RegoVM::new();
    vm.load_program(program.clone());
    vm.set_input(input.clone());
    vm.set_execution_timer_config(Some(timer));
    vm.set_max_instructions(limits.instructions_per_set);
    let started = std::time::Instant::now();
    for path in &set.rules {
        if started.elapsed() > limits.time_per_set {
            return Err(timeout(limits));
        }
        let into = if path.ends_with(".deny") {
            &mut *deny
        } else {
            &mut *warn
        };
        let value = vm.execute_entry_point_by_name(path).map_err(|e| {
            let text = e.to_string();
            if is_time_limit(&text) {
                timeout(limits)
            } else if text.contains("instruction limit") {
                format!(
                    "policy evaluation exceeded its limit of {} instructions",
                    limits.instructions_per_set
                )
            } else {
                format!("{path}: {}", cut(text.trim()))
            }
        })?;
        messages(&value, into).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

fn timeout(limits: Limits) -> String {
    format!(
        "policy evaluation exceeded its time limit of {} ms",
        limits.time_per_set.as_millis()
    )
}

fn is_time_limit(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("time limit") || t.contains("execution time") || t.contains("timed out")
}

/// Collects the messages of a `deny`/`warn` value: undefined (no rule, or no match)
/// is none; a set or array of strings gives them; anything else is refused.
fn messages(value: &RegoValue, into: &mut Vec<String>) -> Result<(), String> {
    let items: Vec<&RegoValue> = match value {
        RegoValue::Undefined => return Ok(()),
        RegoValue::Set(s) => s.iter().collect(),
        RegoValue::Array(a) => a.iter().collect(),
        _ => return Err("must be a set (or array) of strings".into()),
    };
    for item in items.into_iter().take(MAX_MESSAGES) {
        match item {
            RegoValue::String(s) => into.push(cut(s)),
            _ => return Err("every message must be a string".into()),
        }
    }
    Ok(())
}

/// `s` cut to at most [`MAX_MESSAGE_BYTES`] at a character boundary.
fn cut(s: &str) -> String {
    if s.len() <= MAX_MESSAGE_BYTES {
        return s.to_string();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
