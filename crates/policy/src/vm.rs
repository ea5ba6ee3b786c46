//! A set compiled to regorus's virtual machine (`rvm`), when that is known to be safe.
//!
//! The VM runs the same Rego about a quarter faster than the tree interpreter and counts
//! its instructions, so a set gets an instruction budget on top of its wall-clock timer.
//! But the VM (regorus 0.14.1) does not catch every recursive rule: `x := y if { y := z }`
//! with `z := x` overflows the thread's stack, which aborts the process. So a set runs on
//! the VM only when an over-approximated graph of its rules' references has no cycle and
//! no chain longer than [`MAX_CHAIN`]; otherwise (and when the VM's compiler refuses the
//! set) it runs on the interpreter, which reports a recursive rule as an error. A spurious
//! edge costs speed only, never a result.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::Program;
use regorus::unstable::{Rule, RuleHead};
use regorus::{Engine, Rc};

/// The longest chain of rules referring to rules that runs on the VM (its rule calls
/// recurse on the native stack).
pub const MAX_CHAIN: usize = 32;

/// The set's `rules` (`data.<package>.deny|warn`) compiled to a VM program, or `None` when
/// the set must run on the interpreter.
pub(crate) fn program(engine: &Engine, rules: &[String]) -> Option<Arc<Program>> {
    let first = rules.first()?;
    // On a copy: compiling for an entry point changes the engine's settings.
    let mut engine = engine.clone();
    if !acyclic_and_shallow(&mut engine) {
        return None;
    }
    let entry: Rc<str> = first.as_str().into();
    let compiled = engine.compile_with_entrypoint(&entry).ok()?;
    let entries: Vec<&str> = rules.iter().map(String::as_str).collect();
    Compiler::compile_from_policy(&compiled, &entries).ok()
}

/// True when no rule (or function) can reach itself through the names its text mentions,
/// and no chain of such references is longer than [`MAX_CHAIN`].
fn acyclic_and_shallow(engine: &mut Engine) -> bool {
    // Every rule and function by the last segment of its path, with its text.
    let mut texts: Vec<(String, String)> = Vec::new();
    for module in engine.get_modules().iter() {
        let Ok(package) = regorus::utils::get_path_string(&module.package.refr, Some("data"))
        else {
            return false;
        };
        for rule in &module.policy {
            let (refr, span) = match rule.as_ref() {
                Rule::Spec { head, span, .. } => match head {
                    RuleHead::Compr { refr, .. }
                    | RuleHead::Set { refr, .. }
                    | RuleHead::Func { refr, .. } => (refr, span),
                },
                Rule::Default { refr, span, .. } => (refr, span),
            };
            let Ok(path) = regorus::utils::get_path_string(refr, Some(&package)) else {
                return false;
            };
            texts.push((path, span.text().to_string()));
        }
    }
    let names: BTreeSet<String> = texts.iter().map(|(p, _)| last(p).to_string()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &texts {
        let node = graph.entry(last(path).to_string()).or_default();
        // The rule's own head names it: only the text after the head's name counts.
        let body = text
            .find(last(path))
            .map_or(text.as_str(), |i| &text[i + last(path).len()..]);
        for word in words(body) {
            if names.contains(word) {
                node.insert(word.to_string());
            }
        }
    }
    longest_chain(&graph).is_some_and(|n| n <= MAX_CHAIN)
}

fn last(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// Every identifier (each segment of a dotted name) outside strings and comments.
fn words(text: &str) -> Vec<&str> {
    crate::tokens::names(text)
        .into_iter()
        .flat_map(|n| n.segments().collect::<Vec<_>>())
        .collect()
}

/// The number of nodes on the longest path of `graph`, or `None` when it has a cycle.
fn longest_chain(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<usize> {
    // Iterative depth-first search with memoised depths; `Open` marks the current path.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done(usize),
    }
    let mut mark: BTreeMap<&str, Mark> = BTreeMap::new();
    let mut longest = 0;
    for root in graph.keys() {
        if mark.contains_key(root.as_str()) {
            continue;
        }
        let mut stack: Vec<(&str, Vec<&str>)> =
            vec![(root, graph[root].iter().map(String::as_str).collect())];
        mark.insert(root, Mark::Open);
        while let Some((node, pending)) = stack.last_mut() {
            match pending.pop() {
                Some(next) => match mark.get(next).copied() {
                    Some(Mark::Open) => return None,
                    Some(Mark::Done(_)) => {}
                    None => {
                        mark.insert(next, Mark::Open);
                        let children = graph
                            .get(next)
                            .map(|c| c.iter().map(String::as_str).collect())
                            .unwrap_or_default();
                        stack.push((next, children));
                    }
                },
                None => {
                    let node = *node;
                    let depth = 1 + graph[node]
                        .iter()
                        .filter_map(|c| match mark.get(c.as_str()) {
                            Some(Mark::Done(d)) => Some(*d),
                            _ => None,
                        })
                        .max()
                        .unwrap_or(0);
                    longest = longest.max(depth);
                    mark.insert(node, Mark::Done(depth));
                    stack.pop();
                }
            }
        }
    }
    Some(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
            m.entry(b.to_string()).or_default();
        }
        m
    }

    #[test]
    fn chains_are_measured_and_cycles_found() {
        assert_eq!(longest_chain(&graph(&[("a", "b"), ("b", "c")])), Some(3));
        assert_eq!(
            longest_chain(&graph(&[("a", "b"), ("a", "c"), ("c", "d"), ("d", "b")])),
            Some(4)
        );
        assert_eq!(longest_chain(&graph(&[("a", "b"), ("b", "a")])), None);
        assert_eq!(longest_chain(&graph(&[("a", "a")])), None);
    }

    #[test]
    fn words_skip_strings_and_comments() {
        assert_eq!(
            words("x := data.p.y if { z } # w\n\"v\" `u`"),
            vec!["x", "data", "p", "y", "if", "z"]
        );
    }
}
