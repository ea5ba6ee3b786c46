//! Writes `endpoints.rs` into `OUT_DIR` from the committed `openapi.json`: one function per
//! operation, named by its `operationId`, taking its path parameters in the order the
//! path template names them, and the table of every operation. The API's own test
//! `the_committed_document_is_the_served_one` keeps the document equal to what it serves.

use std::fmt::Write as _;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn main() {
    println!("cargo:rerun-if-changed=openapi.json");
    let text = std::fs::read_to_string("openapi.json").expect("read openapi.json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("openapi.json is JSON");
    let paths = doc["paths"].as_object().expect("openapi.json has paths");
    let mut functions = String::new();
    let mut table = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for (template, item) in paths {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {template} has no operationId"));
            assert!(
                seen.insert(id.to_string()),
                "operationId {id} is used twice"
            );
            let params = parameters(template);
            let args: Vec<String> = params
                .iter()
                .map(|p| format!("{}: &str", ident(p)))
                .collect();
            let mut format = String::new();
            let mut rest = template.as_str();
            while let Some(open) = rest.find('{') {
                let close = rest[open..].find('}').expect("a closed parameter") + open;
                format.push_str(&rest[..open]);
                format.push_str("{}");
                rest = &rest[close + 1..];
            }
            format.push_str(rest);
            let values: String = params
                .iter()
                .map(|p| format!(", segment({})", ident(p)))
                .collect();
            let upper = method.to_uppercase();
            let summary = op["summary"]
                .as_str()
                .map(|s| {
                    format!(
                        ": {}",
                        s.lines().next().unwrap_or_default().replace('`', "'")
                    )
                })
                .unwrap_or_default();
            let path = if params.is_empty() {
                format!("String::from(\"{template}\")")
            } else {
                format!("format!(\"{format}\"{values})")
            };
            writeln!(
                functions,
                "/// `{upper} {template}`{summary}\npub fn {id}({}) -> Call {{\n    Call::new(Method::{upper}, {path})\n}}\n",
                args.join(", ")
            )
            .unwrap();
            writeln!(
                table,
                "    Operation {{ id: \"{id}\", method: \"{upper}\", template: \"{template}\" }},"
            )
            .unwrap();
        }
    }
    let out = format!(
        "{functions}/// Every operation of the document, in its order.\npub const OPERATIONS: &[Operation] = &[\n{table}];\n"
    );
    let dir = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(format!("{dir}/endpoints.rs"), out).expect("write endpoints.rs");
}

/// The names of a template's parameters, in order.
fn parameters(template: &str) -> Vec<String> {
    template
        .split('{')
        .skip(1)
        .map(|p| p.split('}').next().unwrap_or_default().to_string())
        .collect()
}

/// A parameter's name as a Rust identifier.
fn ident(name: &str) -> String {
    let name = name.replace('-', "_");
    match name.as_str() {
        "type" | "ref" | "self" | "mod" | "match" | "fn" | "use" | "in" => format!("r#{name}"),
        _ => name,
    }
}
