//! Runs that follow other runs: an environment's `triggers` name its upstream environments;
//! when an upstream apply succeeds and its outputs changed, the downstream environment gets a
//! plan (or an apply) requested by [`TRIGGER_PRINCIPAL`].
//!
//! The pure rules: checking a `triggers` list, refusing a cycle (naming it), the downstream
//! environments of one upstream, whether outputs changed, and which upstream outputs become
//! a downstream job's variables. The graph is one organisation's: a trigger never crosses
//! organisations.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::names::EnvPath;
use crate::problems::{index, Problems};

/// Who requests the jobs a trigger submits.
pub const TRIGGER_PRINCIPAL: &str = "sortie:trigger";
/// The most upstream environments one environment may name.
pub const TRIGGERS_MAX: usize = 20;
/// The most upstream outputs one environment may ask for.
pub const TRIGGER_INPUTS_MAX: usize = 50;
/// The most environments of one organisation the trigger graph is read from; an
/// organisation with more cannot be checked for cycles, so a trigger write is refused.
pub const TRIGGER_GRAPH_MAX: usize = 5000;

/// What a trigger submits to the downstream environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TriggerOperation {
    /// A plan (the default).
    #[default]
    Plan,
    /// An apply, subject to the environment's approval setting.
    Apply,
}

/// What started a job submitted by a trigger: the upstream environment and its apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerContext {
    /// The upstream environment.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub upstream: EnvPath,
    /// The upstream apply whose outputs changed.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub upstream_job_id: crate::JobId,
}

/// Checks an environment's `triggers` list on its own (the cycle check needs the graph:
/// [`find_cycle`]): at most [`TRIGGERS_MAX`], no repeats, not itself, and all in its own
/// organisation.
pub fn check_triggers(env: &EnvPath, triggers: &[EnvPath], field: &str, p: &mut Problems) {
    if triggers.len() > TRIGGERS_MAX {
        p.push(
            field,
            format!(
                "names {} environments; at most {TRIGGERS_MAX}",
                triggers.len()
            ),
        );
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, t) in triggers.iter().enumerate() {
        let at = index(field, i);
        if t == env {
            p.push(
                at,
                format!("`{t}` is this environment: an environment cannot trigger itself"),
            );
        } else if t.org() != env.org() {
            p.push(
                at,
                format!(
                    "`{t}` is in organisation `{}`; triggers stay within `{}`",
                    t.org(),
                    env.org()
                ),
            );
        } else if !seen.insert(t) {
            p.push(at, format!("`{t}` is named twice"));
        }
    }
}

/// Checks `trigger_inputs`: at most [`TRIGGER_INPUTS_MAX`], each a valid variable name.
pub fn check_inputs(inputs: &[String], field: &str, p: &mut Problems) {
    if inputs.len() > TRIGGER_INPUTS_MAX {
        p.push(
            field,
            format!(
                "names {} outputs; at most {TRIGGER_INPUTS_MAX}",
                inputs.len()
            ),
        );
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, name) in inputs.iter().enumerate() {
        let at = index(field, i);
        if let Some(problem) = crate::names::variable_name_problem(name) {
            p.push(at, problem);
        } else if !seen.insert(name) {
            p.push(at, format!("`{name}` is named twice"));
        }
    }
}

/// The trigger graph after `env`'s upstream list becomes `upstreams`: `graph` maps each
/// environment to its upstream environments. Returns the first cycle through the graph,
/// in trigger order (each environment's apply triggers the next), starting and ending at
/// the same environment: `[A, B, A]` for A → B → A. `None` when there is none. Bounded: each
/// environment is visited once.
pub fn find_cycle(
    graph: &BTreeMap<EnvPath, Vec<EnvPath>>,
    env: &EnvPath,
    upstreams: &[EnvPath],
) -> Option<Vec<EnvPath>> {
    fn edges<'a>(
        graph: &'a BTreeMap<EnvPath, Vec<EnvPath>>,
        env: &EnvPath,
        upstreams: &'a [EnvPath],
        e: &EnvPath,
    ) -> &'a [EnvPath] {
        if e == env {
            upstreams
        } else {
            graph.get(e).map(Vec::as_slice).unwrap_or(&[])
        }
    }
    let mut nodes: BTreeSet<&EnvPath> = graph.keys().collect();
    nodes.insert(env);
    // Colours: absent white, false grey (on the stack), true black (done).
    let mut colour: BTreeMap<&EnvPath, bool> = BTreeMap::new();
    // The start is `env` first: a new cycle goes through it.
    let starts = std::iter::once(env).chain(nodes.iter().copied().filter(|n| *n != env));
    for start in starts {
        if colour.contains_key(start) {
            continue;
        }
        // Iterative depth-first search along upstream edges; `stack` holds the path.
        let mut stack: Vec<(&EnvPath, usize)> = vec![(start, 0)];
        colour.insert(start, false);
        while let Some((node, next)) = stack.last().cloned() {
            let ups = edges(graph, env, upstreams, node);
            if next >= ups.len() {
                colour.insert(node, true);
                stack.pop();
                continue;
            }
            stack.last_mut().expect("non-empty").1 += 1;
            let target = &ups[next];
            match colour.get(target) {
                None => {
                    colour.insert(target, false);
                    stack.push((target, 0));
                }
                Some(false) => {
                    // A back edge: the path from `target` to `node`, then `target` again.
                    let from = stack.iter().position(|(n, _)| *n == target)?;
                    let mut cycle: Vec<EnvPath> =
                        stack[from..].iter().map(|(n, _)| (*n).clone()).collect();
                    cycle.push(target.clone());
                    // Upstream edges point against the trigger direction.
                    cycle.reverse();
                    return Some(cycle);
                }
                Some(true) => {}
            }
        }
    }
    None
}

/// A cycle as a sentence: `a/b/x → a/b/y → a/b/x`.
pub fn describe_cycle(cycle: &[EnvPath]) -> String {
    cycle
        .iter()
        .map(EnvPath::to_string)
        .collect::<Vec<_>>()
        .join(" → ")
}

/// The environments whose `triggers` name `upstream`, by path.
pub fn downstream_of(graph: &BTreeMap<EnvPath, Vec<EnvPath>>, upstream: &EnvPath) -> Vec<EnvPath> {
    graph
        .iter()
        .filter(|(_, ups)| ups.contains(upstream))
        .map(|(e, _)| e.clone())
        .collect()
}

/// True when an apply's outputs (`terraform output -json`: name → `{value, type,
/// sensitive}`) differ from the previous apply's: a name added or removed, or a value or
/// its sensitivity changed. No previous outputs counts as empty.
pub fn outputs_changed(
    previous: Option<&Map<String, Value>>,
    current: &Map<String, Value>,
) -> bool {
    let empty = Map::new();
    let previous = previous.unwrap_or(&empty);
    let key = |o: &Value| (o.get("value").cloned(), is_sensitive(o));
    previous.len() != current.len()
        || current
            .iter()
            .any(|(name, o)| previous.get(name).map(key) != Some(key(o)))
}

/// True unless an output is plainly marked `sensitive: false`.
pub fn is_sensitive(output: &Value) -> bool {
    output.get("sensitive").and_then(Value::as_bool) != Some(false)
}

/// The variables a downstream job gets from its upstream outputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerInputs {
    /// Plain values, as Terraform variables (kept in the job's request).
    pub plain: BTreeMap<String, Value>,
    /// Sensitive values, as text (kept as secrets for the job's life, never in the record).
    pub sensitive: BTreeMap<String, String>,
    /// Names no upstream has.
    pub missing: Vec<String>,
}

/// The values of `inputs` taken from the upstream outputs, in the order of `upstreams`
/// (the first upstream that has a name gives it). A sensitive output's value is kept apart
/// as text: a string as itself, anything else as its JSON.
pub fn trigger_inputs(
    inputs: &[String],
    upstreams: &[(EnvPath, Map<String, Value>)],
) -> TriggerInputs {
    let mut out = TriggerInputs::default();
    for name in inputs {
        let Some(o) = upstreams.iter().find_map(|(_, outs)| outs.get(name)) else {
            out.missing.push(name.clone());
            continue;
        };
        let value = o.get("value").cloned().unwrap_or(Value::Null);
        if is_sensitive(o) {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            out.sensitive.insert(name.clone(), text);
        } else {
            out.plain.insert(name.clone(), value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn p(s: &str) -> EnvPath {
        EnvPath::parse(s).unwrap()
    }

    #[test]
    fn a_to_b_to_a_is_refused_naming_the_cycle() {
        let (a, b) = (p("acme/x/a"), p("acme/x/b"));
        // B is triggered by A; now A asks to be triggered by B.
        let graph = BTreeMap::from([(b.clone(), vec![a.clone()])]);
        let cycle = find_cycle(&graph, &a, std::slice::from_ref(&b)).unwrap();
        assert_eq!(describe_cycle(&cycle), "acme/x/a → acme/x/b → acme/x/a");
        assert_eq!(find_cycle(&graph, &a, &[]), None);
    }

    #[test]
    fn a_longer_cycle_is_named_in_trigger_order() {
        let (a, b, c) = (p("acme/x/a"), p("acme/x/b"), p("acme/x/c"));
        // A → B → C (B names A, C names B); C → A closes it.
        let graph = BTreeMap::from([(b.clone(), vec![a.clone()]), (c.clone(), vec![b.clone()])]);
        let cycle = find_cycle(&graph, &a, std::slice::from_ref(&c)).unwrap();
        assert_eq!(
            describe_cycle(&cycle),
            "acme/x/a → acme/x/b → acme/x/c → acme/x/a"
        );
        assert_eq!(downstream_of(&graph, &a), vec![b.clone()]);
    }

    #[test]
    fn a_trigger_list_is_checked() {
        let env = p("acme/x/a");
        let mut problems = Problems::default();
        check_triggers(
            &env,
            &[p("acme/x/a"), p("globex/x/b"), p("acme/x/c"), p("acme/x/c")],
            "triggers",
            &mut problems,
        );
        let paths: Vec<_> = problems.0.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(paths, ["triggers[0]", "triggers[1]", "triggers[3]"]);
    }

    #[test]
    fn unchanged_outputs_are_not_a_change() {
        let a = json!({"ip": {"value": "10.0.0.1", "type": "string", "sensitive": false}});
        let a = a.as_object().unwrap();
        assert!(!outputs_changed(Some(a), a));
        assert!(outputs_changed(None, a));
        assert!(!outputs_changed(None, &Map::new()));
        let b = json!({"ip": {"value": "10.0.0.2", "type": "string", "sensitive": false}});
        assert!(outputs_changed(Some(a), b.as_object().unwrap()));
    }

    #[test]
    fn sensitive_inputs_are_kept_apart() {
        let outs = json!({
            "ip": {"value": "10.0.0.1", "sensitive": false},
            "password": {"value": "hunter2", "sensitive": true},
            "ports": {"value": [80, 443]},
        });
        let ups = vec![(p("acme/x/a"), outs.as_object().unwrap().clone())];
        let names: Vec<String> = ["ip", "password", "ports", "nope"].map(String::from).into();
        let got = trigger_inputs(&names, &ups);
        assert_eq!(
            got.plain,
            BTreeMap::from([("ip".into(), json!("10.0.0.1"))])
        );
        assert_eq!(got.sensitive["password"], "hunter2");
        assert_eq!(got.sensitive["ports"], "[80,443]", "unmarked is sensitive");
        assert_eq!(got.missing, ["nope"]);
    }

    /// Environments `acme/g/e0`..`acme/g/e7`, and edges between them.
    fn arb_graph() -> impl Strategy<Value = BTreeMap<EnvPath, Vec<EnvPath>>> {
        proptest::collection::vec((0usize..8, 0usize..8), 0..20).prop_map(|edges| {
            let mut g: BTreeMap<EnvPath, Vec<EnvPath>> = BTreeMap::new();
            for (from, to) in edges {
                let (f, t) = (p(&format!("acme/g/e{from}")), p(&format!("acme/g/e{to}")));
                let ups = g.entry(f).or_default();
                if !ups.contains(&t) {
                    ups.push(t);
                }
            }
            g
        })
    }

    /// Reachability along upstream edges, by brute force.
    fn reaches(g: &BTreeMap<EnvPath, Vec<EnvPath>>, from: &EnvPath, to: &EnvPath) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for u in g.get(&n).into_iter().flatten() {
                if u == to {
                    return true;
                }
                if seen.insert(u.clone()) {
                    todo.push(u.clone());
                }
            }
        }
        false
    }

    proptest! {
        /// A cycle is found exactly when some environment reaches itself, and the cycle
        /// named is a real one: each step is an edge of the graph.
        #[test]
        fn a_cycle_is_found_exactly_when_there_is_one(g in arb_graph(), n in 0usize..8) {
            let env = p(&format!("acme/g/e{n}"));
            let ups = g.get(&env).cloned().unwrap_or_default();
            let has = g.keys().any(|e| reaches(&g, e, e));
            match find_cycle(&g, &env, &ups) {
                None => prop_assert!(!has),
                Some(cycle) => {
                    prop_assert!(has);
                    prop_assert!(cycle.len() >= 2);
                    prop_assert_eq!(cycle.first(), cycle.last());
                    for w in cycle.windows(2) {
                        // w[0] triggers w[1]: w[1] names w[0] upstream.
                        prop_assert!(g.get(&w[1]).is_some_and(|u| u.contains(&w[0])));
                    }
                }
            }
        }

        /// Outputs compared with themselves never changed; any changed value did.
        #[test]
        fn outputs_change_exactly_when_a_value_does(v in any::<i64>(), w in any::<i64>()) {
            let a = json!({"n": {"value": v, "sensitive": false}});
            let b = json!({"n": {"value": w, "sensitive": false}});
            let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
            prop_assert!(!outputs_changed(Some(a), a));
            prop_assert_eq!(outputs_changed(Some(a), b), v != w);
        }
    }
}
