//! A static refusal of recursive functions.
//!
//! Regorus stops a recursive *rule* at run time ("recursion detected"), but a function
//! that calls itself (directly or through other functions) recurses until the thread's
//! stack overflows, which aborts the whole process. So a set whose functions can call
//! each other in a cycle is refused at compile time. The call graph is over-approximated:
//! any `name(` in a function's body or value counts as a call to every function whose
//! last path segment is `name`. A refusal may be spurious (two packages' functions of the
//! same name), never missed.

use std::collections::{BTreeMap, BTreeSet};

use regorus::unstable::{Rule, RuleHead};
use regorus::Engine;

use crate::compile::CompileError;

/// `Err` naming the first function found on a cycle of calls.
pub(crate) fn refuse_recursive_functions(engine: &mut Engine) -> Result<(), CompileError> {
    let table = regorus::utils::gather_functions(engine.get_modules())
        .map_err(|e| crate::compile::located(&e.to_string(), ""))?;
    // Last segment -> full paths.
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for path in table.keys() {
        by_name.entry(last(path)).or_default().push(path.as_str());
    }
    let mut calls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut spans: BTreeMap<&str, (String, u32, u32)> = BTreeMap::new();
    for (path, (rules, _, _)) in &table {
        let edges = calls.entry(path.as_str()).or_default();
        for rule in rules {
            let Rule::Spec { head, bodies, span } = rule.as_ref() else {
                continue;
            };
            spans
                .entry(path.as_str())
                .or_insert_with(|| (span.source.file().to_string(), span.line, span.col));
            let mut texts: Vec<&str> = Vec::new();
            if let RuleHead::Func {
                assign: Some(a), ..
            } = head
            {
                texts.push(a.value.span().text());
            }
            for body in bodies {
                texts.push(body.query.span.text());
                if let Some(a) = &body.assign {
                    texts.push(a.value.span().text());
                }
            }
            for text in texts {
                for name in called_names(text) {
                    if let Some(targets) = by_name.get(name) {
                        edges.extend(targets.iter().copied());
                    }
                }
            }
        }
    }
    refuse_unknown_calls(engine, &by_name)?;
    if let Some(on_cycle) = find_cycle(&calls) {
        let (module, line, column) = spans.get(on_cycle).cloned().unwrap_or_default();
        return Err(CompileError {
            module,
            line,
            column,
            message: format!(
                "function `{}` can call itself (directly or through other functions); recursion is not allowed",
                on_cycle.trim_start_matches("data.")
            ),
        });
    }
    Ok(())
}

/// Words that may stand before a `(` without being a call.
const NOT_CALLS: &[&str] = &[
    "not", "if", "else", "in", "contains", "some", "every", "with", "as", "default", "print",
];

/// Refuses a call to a name that is neither a builtin nor a function of the set (regorus
/// would only fail when the call runs).
fn refuse_unknown_calls(
    engine: &mut Engine,
    functions: &BTreeMap<&str, Vec<&str>>,
) -> Result<(), CompileError> {
    for module in engine.get_modules().iter() {
        let source = &module.package.span.source;
        let text = source.contents();
        for (name, offset) in calls(text) {
            if NOT_CALLS.contains(&name)
                || regorus::unstable::BUILTINS.contains_key(name)
                || functions.contains_key(last(name))
            {
                continue;
            }
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = offset - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            return Err(CompileError {
                module: source.file().to_string(),
                line: u32::try_from(line).unwrap_or(u32::MAX),
                column: u32::try_from(column).unwrap_or(u32::MAX),
                message: format!("unknown function `{name}`"),
            });
        }
    }
    Ok(())
}

fn last(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// Every call in `text`: the dotted name right before a `(` (spaces allowed), outside
/// string literals and comments, with its byte offset.
fn calls(text: &str) -> Vec<(&str, usize)> {
    crate::tokens::names(text)
        .into_iter()
        .filter(|n| n.called)
        .map(|n| (n.text, n.offset))
        .collect()
}

/// The last segments of the names [`calls`] finds.
fn called_names(text: &str) -> Vec<&str> {
    calls(text)
        .into_iter()
        .map(|(name, _)| last(name))
        .collect()
}

/// A node on a cycle of `graph`, if any (iterative depth-first search, bounded by its size).
fn find_cycle<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<&'a str> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&str, Mark> = graph.keys().map(|k| (*k, Mark::New)).collect();
    for &root in graph.keys() {
        if mark[root] != Mark::New {
            continue;
        }
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(root, graph[root].iter().copied().collect())];
        mark.insert(root, Mark::Open);
        while let Some((node, pending)) = stack.last_mut() {
            match pending.pop() {
                Some(next) => match mark.get(next).copied().unwrap_or(Mark::Done) {
                    Mark::Open => return Some(next),
                    Mark::New => {
                        mark.insert(next, Mark::Open);
                        let children = graph
                            .get(next)
                            .map(|c| c.iter().copied().collect())
                            .unwrap_or_default();
                        stack.push((next, children));
                    }
                    Mark::Done => {}
                },
                None => {
                    mark.insert(node, Mark::Done);
                    stack.pop();
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_before_a_parenthesis() {
        assert_eq!(
            called_names("y := data.a.f(x); count (z) + g(1) # h(2)\n\"k(3)\""),
            vec!["f", "count", "g"]
        );
    }

    #[test]
    fn cycles_are_found_and_chains_are_not() {
        let g = |edges: &[(&'static str, &'static str)]| {
            let mut m: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for (a, b) in edges {
                m.entry(a).or_default().insert(b);
                m.entry(b).or_default();
            }
            m
        };
        assert!(find_cycle(&g(&[("a", "b"), ("b", "c")])).is_none());
        assert!(find_cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).is_some());
        assert_eq!(find_cycle(&g(&[("a", "a")])), Some("a"));
    }
}
