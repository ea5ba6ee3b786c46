//! Core's top-level modules form no import cycle, and no domain module uses a protocol
//! module (`crate::protocol`): the wire protocols sit on the domain, never under it.
//!
//! The test reads `src/**/*.rs`, takes every `crate::…` path (in `use` lines and inline,
//! through root re-exports such as `crate::Job`, and `super::…` from a top-level file) in
//! code outside comments, strings and test modules, and builds the graph of top-level
//! modules. `SORTIE_CORE_SRC` points it at another source tree (to show it fails on one
//! with a cycle).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One edge's evidence: the file and line of its first reference.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn core_has_no_import_cycle_and_the_domain_uses_no_protocol() {
    let src = std::env::var_os("SORTIE_CORE_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let graph = module_graph(&src);
    assert!(
        graph.len() > 10,
        "read too few modules under {}",
        src.display()
    );

    let mut failures = Vec::new();
    for (from, tos) in &graph {
        if from != "protocol" {
            if let Some(at) = tos.get("protocol") {
                failures.push(format!(
                    "domain module `{from}` uses `crate::protocol` ({at})"
                ));
            }
        }
    }
    for (cycle, others) in cycles(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        let knot = if others.is_empty() {
            String::new()
        } else {
            format!(" (in a knot that also holds {})", others.join(", "))
        };
        failures.push(format!(
            "import cycle of {} modules: {}{knot}\n    {}",
            cycle.len() - 1,
            cycle.join(" -> "),
            steps.join("\n    ")
        ));
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn the_reader_sees_references_in_code_only() {
    let code = r##"
        use crate::{job::{Job, JobState}, names};
        // crate::commented
        /* crate::block */
        let s = "crate::quoted"; let c = '"'; let r = r#"crate::raw"#;
        fn f<'a>(x: &'a crate::Outcome) {}
        #[cfg(test)]
        mod tests { use crate::tested; }
        x = super::sibling::f();
    "##;
    let stripped = skip_test_modules(&strip(code));
    let refs: Vec<String> = references(&stripped, true)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(refs, ["job", "names", "Outcome", "sibling"]);
}

/// The top-level modules and, for each, the modules it uses with where.
fn module_graph(src: &Path) -> Edges {
    let mut files = Vec::new();
    walk(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexports = root_reexports(&strip(&lib), &modules);

    let mut graph = Edges::new();
    for file in &files {
        let Some(from) = top_module(src, file) else {
            continue;
        };
        if file.file_stem().is_some_and(|s| s == "tests") {
            continue; // a test module may use any module to build its fixtures
        }
        let top_level = file.parent() == Some(src)
            || (file.file_name().is_some_and(|n| n == "mod.rs")
                && file.parent().and_then(Path::parent) == Some(src));
        let text = std::fs::read_to_string(file).expect("a source file");
        let code = skip_test_modules(&strip(&text));
        let entry = graph.entry(from.clone()).or_default();
        for (name, offset) in references(&code, top_level) {
            let to = if modules.contains(&name) {
                name
            } else if let Some(m) = reexports.get(&name) {
                m.clone()
            } else {
                continue; // an item of the crate root itself, such as `ValidationError`
            };
            if to != from {
                let line = code[..offset].matches('\n').count() + 1;
                let rel = file.strip_prefix(src).unwrap_or(file).display();
                entry.entry(to).or_insert_with(|| format!("{rel}:{line}"));
            }
        }
    }
    graph
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/job/state.rs` and `src/job/mod.rs` are in `job`; `src/names.rs` is `names`;
/// `src/lib.rs` is the root, no module.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_string()),
        None => Some(first.to_string()),
    }
}

/// The root's `pub use module::{Name, ...}` lines: each re-exported name and its module.
fn root_reexports(lib: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in lib.split(';') {
        let Some(rest) = item.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        if !modules.contains(module.trim()) {
            continue;
        }
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() && !modules.contains(name) {
                out.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

/// The text with comments, string and character literals blanked (lines kept).
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let close: Vec<char> = close.chars().collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                blank(&mut out, b[j]);
                j += 1;
            }
            i = j + close.len();
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if let Some(&ch) = b.get(i) {
                    blank(&mut out, ch);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A character literal (`'"'`, `'\''`), not a lifetime.
            i += if next == Some('\\') { 2 } else { 1 };
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The code without `#[cfg(test)] mod name { ... }` blocks.
fn skip_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let Some(open) = after.find(['{', ';']) else {
            break;
        };
        if after.as_bytes()[open] == b';' || !after[..open].contains("mod ") {
            out.push_str(&after[..open + 1]);
            rest = &after[open + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (k, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        // Keep the lines so that line numbers stay true.
        out.extend(after[..end].chars().filter(|c| *c == '\n'));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every first segment after `crate::` (each first-level name of a `crate::{...}` group),
/// and after `super::` when `top_level` (where `super` is the crate root), with its offset.
fn references(code: &str, top_level: bool) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut prefixes = vec!["crate::"];
    if top_level {
        prefixes.push("super::");
    }
    for prefix in prefixes {
        let mut from = 0;
        while let Some(at) = code[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[from..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut at_start = true;
                for (k, ch) in group.char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => at_start = true,
                        c if at_start && (c.is_alphanumeric() || c == '_') => {
                            let name = ident(&group[k..]);
                            out.push((name.to_string(), from));
                            at_start = false;
                        }
                        c if !c.is_whitespace() => at_start = false,
                        _ => {}
                    }
                }
            } else {
                let name = ident(rest);
                if !name.is_empty() {
                    out.push((name.to_string(), start));
                }
            }
        }
    }
    out.sort_by_key(|(_, offset)| *offset);
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// One cycle (first module repeated at the end) for each strongly connected component
/// of more than one module, with the component's other modules.
fn cycles(graph: &Edges) -> Vec<(Vec<String>, Vec<String>)> {
    let nodes: Vec<&String> = graph.keys().collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for to in graph.get(&n).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(to.clone()) {
                    stack.push(to.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reachable[n].contains(*n) {
            continue;
        }
        let component: BTreeSet<String> = nodes
            .iter()
            .filter(|m| reachable[n].contains(**m) && reachable[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        done.extend(component.iter().cloned());
        // The shortest path from `n` back to itself, breadth first within the component.
        let mut previous: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([(*n).clone()]);
        'search: while let Some(at) = queue.pop_front() {
            for to in graph[&at].keys().filter(|t| component.contains(*t)) {
                if to == *n {
                    previous.insert(format!("{n}#end"), at.clone());
                    break 'search;
                }
                if !previous.contains_key(to) {
                    previous.insert(to.clone(), at.clone());
                    queue.push_back(to.clone());
                }
            }
        }
        let mut cycle = vec![(*n).clone()];
        let mut at = previous[&format!("{n}#end")].clone();
        while at != **n {
            cycle.push(at.clone());
            at = previous[&at].clone();
        }
        cycle.push((*n).clone());
        cycle.reverse();
        let others = component
            .iter()
            .filter(|m| !cycle.contains(m))
            .cloned()
            .collect();
        out.push((cycle, others));
    }
    out
}
