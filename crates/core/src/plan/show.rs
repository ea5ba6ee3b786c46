//! A plan as `terraform show` prints it, from its data ([`PlanPage`]): `+ create`,
//! `~ update in place`, `- destroy`, `-/+ replace`, `<= read`, each changed attribute with
//! its value before and after, `# forces replacement` marks, the output changes and
//! `Plan: N to add, N to change, N to destroy.` The CLI's `sortie job plan` prints it (in
//! colour on a terminal); a pull request's check and comment show it plain.
//!
//! The text is the redacted plan's: a sensitive value is the marker, never the value.

use std::collections::HashSet;

use serde_json::Value;

use super::{AttributeChange, ChangeAction, OutputChange, PlanPage, ResourceChange, MARKER};

/// What Terraform prints for a value known only after apply.
const UNKNOWN: &str = "(known after apply)";

/// The escape codes of each action's colour; all empty without colour.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    green: &'static str,
    yellow: &'static str,
    red: &'static str,
    cyan: &'static str,
    bold: &'static str,
    reset: &'static str,
}

impl Palette {
    /// No colour.
    pub const PLAIN: Palette = Palette {
        green: "",
        yellow: "",
        red: "",
        cyan: "",
        bold: "",
        reset: "",
    };

    /// Terminal colours.
    pub const ANSI: Palette = Palette {
        green: "\x1b[32m",
        yellow: "\x1b[33m",
        red: "\x1b[31m",
        cyan: "\x1b[36m",
        bold: "\x1b[1m",
        reset: "\x1b[0m",
    };

    /// The escape code of an action's symbol (`+`, `~`, `-`, `-/+`, `<=`).
    fn of(&self, symbol: &str) -> &'static str {
        match symbol {
            "+" => self.green,
            "~" => self.yellow,
            "-" => self.red,
            "-/+" => self.yellow,
            "<=" => self.cyan,
            _ => "",
        }
    }
}

/// The plan as `terraform show` would print it.
pub fn render(page: &PlanPage, p: Palette) -> String {
    if !page.available {
        return format!(
            "No plan data: {}.\n",
            page.reason
                .as_deref()
                .unwrap_or("the job has none")
                .trim_end_matches('.')
        );
    }
    let mut text = String::new();
    let changing: Vec<&ResourceChange> = page
        .resource_changes
        .iter()
        .filter(|r| r.action != ChangeAction::NoOp)
        .collect();
    if !changing.is_empty() {
        text.push_str("Terraform will perform the following actions:\n");
        for r in changing {
            text.push('\n');
            resource(&mut text, r, p);
        }
    }
    let outputs: Vec<&OutputChange> = page
        .output_changes
        .iter()
        .filter(|o| o.action != ChangeAction::NoOp)
        .collect();
    if !outputs.is_empty() {
        text.push_str("\nChanges to Outputs:\n");
        let width = outputs.iter().map(|o| o.name.len()).max().unwrap_or(0);
        for o in outputs {
            let symbol = symbol_of(o.action);
            let change = AttributeChange {
                path: o.name.clone(),
                before: o.before.clone(),
                after: o.after.clone(),
                after_unknown: o.after_unknown,
                forces_replacement: false,
            };
            let line_symbol = attribute_symbol(o.action, &change).unwrap_or(symbol);
            let shown = if o.unknown_paths.is_empty() {
                values(&change)
            } else {
                // Part of it is known only after apply: those parts say so, not null.
                let after = with_unknowns(&o.after, &o.unknown_paths);
                if o.before.is_null() {
                    after
                } else {
                    format!("{} -> {after}", value(&o.before))
                }
            };
            text.push_str(&format!(
                "  {}{line_symbol}{} {:width$} = {}\n",
                p.of(line_symbol),
                p.reset,
                o.name,
                shown
            ));
        }
    }
    let (add, change, destroy) = page.counts.terraform_summary();
    if add + change + destroy == 0 {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("No changes. Your infrastructure matches the configuration.\n");
    } else {
        text.push_str(&format!(
            "\n{}Plan:{} {add} to add, {change} to change, {destroy} to destroy.\n",
            p.bold, p.reset
        ));
    }
    text
}

fn symbol_of(action: ChangeAction) -> &'static str {
    match action {
        ChangeAction::Create => "+",
        ChangeAction::Update => "~",
        ChangeAction::Delete => "-",
        ChangeAction::Replace => "-/+",
        ChangeAction::Read => "<=",
        ChangeAction::NoOp => " ",
    }
}

fn heading(action: ChangeAction) -> &'static str {
    match action {
        ChangeAction::Create => "will be created",
        ChangeAction::Update => "will be updated in-place",
        ChangeAction::Delete => "will be destroyed",
        ChangeAction::Replace => "must be replaced",
        ChangeAction::Read => "will be read during apply",
        ChangeAction::NoOp => "has no changes",
    }
}

/// One resource's block.
fn resource(text: &mut String, r: &ResourceChange, p: Palette) {
    let symbol = symbol_of(r.action);
    let kind = if r.action == ChangeAction::Read {
        "data"
    } else {
        "resource"
    };
    text.push_str(&format!(
        "  {}# {}{} {}\n",
        p.bold,
        r.address,
        p.reset,
        heading(r.action)
    ));
    text.push_str(&format!(
        "{}{symbol:>3}{} {kind} \"{}\" \"{}\" {{\n",
        p.of(symbol),
        p.reset,
        r.resource_type,
        r.name
    ));
    let width = r.changes.iter().map(|c| c.path.len()).max().unwrap_or(0);
    for c in &r.changes {
        let line = attribute_symbol(r.action, c).unwrap_or(symbol);
        let forces = if c.forces_replacement {
            format!(" {}# forces replacement{}", p.red, p.reset)
        } else {
            String::new()
        };
        text.push_str(&format!(
            "      {}{line}{} {:width$} = {}{forces}\n",
            p.of(line),
            p.reset,
            c.path,
            values(c)
        ));
    }
    text.push_str("    }\n");
}

/// An attribute's own symbol inside an update or replacement: `+` when it is new, `-`
/// when it goes, `~` when it changes; `+` inside a read (what is read); the resource's
/// symbol otherwise.
fn attribute_symbol(action: ChangeAction, c: &AttributeChange) -> Option<&'static str> {
    if action == ChangeAction::Read {
        return Some("+");
    }
    if !matches!(action, ChangeAction::Update | ChangeAction::Replace) {
        return None;
    }
    Some(
        match (c.before.is_null(), c.after.is_null() && !c.after_unknown) {
            (true, _) => "+",
            (false, true) => "-",
            (false, false) => "~",
        },
    )
}

/// `before -> after`, or the one that exists.
fn values(c: &AttributeChange) -> String {
    let after = if c.after_unknown {
        UNKNOWN.to_string()
    } else {
        value(&c.after)
    };
    match (c.before.is_null(), c.after.is_null() && !c.after_unknown) {
        (true, _) => after,
        (false, true) => format!("{} -> null", value(&c.before)),
        (false, false) => format!("{} -> {after}", value(&c.before)),
    }
}

/// `value` with each part at one of `unknown` (paths, steps joined by dots) read
/// `(known after apply)`, as Terraform prints a list or object partly unknown. Linear in
/// the value's size and the paths' count: a hostile plan's output of 10,000 unknown
/// elements is one set lookup per element, never a scan of every path per element.
fn with_unknowns(value_at: &Value, unknown: &[String]) -> String {
    let exact: HashSet<&str> = unknown.iter().map(String::as_str).collect();
    // Every proper prefix of an unknown path ("a", "a.b" of "a.b.c"): a part to open.
    let mut above: HashSet<&str> = HashSet::new();
    for path in unknown {
        for (i, c) in path.char_indices() {
            if c == '.' {
                above.insert(&path[..i]);
            }
        }
    }
    let mut out = String::new();
    write_with_unknowns(value_at, "", &exact, &above, &mut out);
    out
}

fn write_with_unknowns(
    value_at: &Value,
    at: &str,
    exact: &HashSet<&str>,
    above: &HashSet<&str>,
    out: &mut String,
) {
    if exact.contains(at) {
        out.push_str(UNKNOWN);
        return;
    }
    // Open a part only when an unknown path lies below it (the root: when there is one).
    let open = if at.is_empty() {
        !exact.is_empty()
    } else {
        above.contains(at)
    };
    if !open {
        out.push_str(&value(value_at));
        return;
    }
    let step = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match value_at {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_with_unknowns(v, &step(&i.to_string()), exact, above, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_with_unknowns(v, &step(k), exact, above, out);
            }
            out.push('}');
        }
        // A part unknown below a value that is not a collection: all of it is unknown.
        _ => out.push_str(UNKNOWN),
    }
}

/// A value as HCL would read it; the redaction marker as Terraform prints it.
fn value(v: &Value) -> String {
    match v {
        Value::String(s) if s == MARKER => MARKER.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanView;
    use serde_json::json;

    fn page() -> PlanPage {
        let doc = json!({"resource_changes": [
            {"address": "a.b", "type": "a", "name": "b",
             "change": {"actions": ["delete", "create"], "before": {"k": "x"}, "after": {"k": "y"},
                        "replace_paths": [["k"]]}}
        ]});
        PlanView::from_document(&doc).page(None, 10).unwrap()
    }

    #[test]
    fn an_output_known_only_in_part_after_apply_says_which_part_never_null() {
        let doc = json!({"output_changes": {
            "buckets": {"actions": ["create"], "before": null, "after": [null, "b", null],
                        "after_unknown": [true, false, true]},
            "ids": {"actions": ["update"], "before": {"a": "1"}, "after": {"a": null, "n": 2},
                    "after_unknown": {"a": true}},
            "all": {"actions": ["create"], "before": null, "after": null, "after_unknown": true},
            "gone": {"actions": ["delete"], "before": "x", "after": null, "after_unknown": false}
        }});
        let page = PlanView::from_document(&doc).page(None, 10).unwrap();
        let buckets = page
            .output_changes
            .iter()
            .find(|o| o.name == "buckets")
            .unwrap();
        assert_eq!(buckets.unknown_paths, ["0", "2"]);
        assert!(!buckets.after_unknown);
        let all = page
            .output_changes
            .iter()
            .find(|o| o.name == "all")
            .unwrap();
        assert!(all.after_unknown && all.unknown_paths.is_empty());
        let text = render(&page, Palette::PLAIN);
        assert!(!text.contains("null,"), "{text}");
        assert!(
            text.contains(r#"+ buckets = [(known after apply),"b",(known after apply)]"#),
            "{text}"
        );
        assert!(
            text.contains(r#"~ ids     = {"a":"1"} -> {"a":(known after apply),"n":2}"#),
            "{text}"
        );
        assert!(text.contains("+ all     = (known after apply)"), "{text}");
        assert!(text.contains(r#"- gone    = "x" -> null"#), "{text}");
    }

    #[test]
    fn ten_thousand_unknown_elements_render_in_linear_time() {
        let n = 10_000;
        let after = Value::Array(vec![Value::Null; n]);
        let paths: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let text = with_unknowns(&after, &paths);
        assert_eq!(text.matches("(known after apply)").count(), n);
        // No unknown part: the value as it is, a scalar too.
        assert_eq!(with_unknowns(&json!({"a": 1}), &[]), r#"{"a":1}"#);
        assert_eq!(with_unknowns(&json!("x"), &[]), r#""x""#);
    }

    #[test]
    fn colour_only_with_the_ansi_palette() {
        let plain = render(&page(), Palette::PLAIN);
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(plain.contains("-/+ resource \"a\" \"b\" {"), "{plain}");
        assert!(
            plain.contains("~ k = \"x\" -> \"y\" # forces replacement"),
            "{plain}"
        );
        assert!(plain.ends_with("Plan: 1 to add, 0 to change, 1 to destroy.\n"));
        let coloured = render(&page(), Palette::ANSI);
        assert!(coloured.contains("\x1b[33m-/+\x1b[0m"), "{coloured:?}");
        assert!(
            coloured.contains("\x1b[31m# forces replacement"),
            "{coloured:?}"
        );
    }

    #[test]
    fn an_empty_plan_says_no_changes() {
        let empty = PlanView::default().page(None, 10).unwrap();
        assert_eq!(
            render(&empty, Palette::PLAIN),
            "No changes. Your infrastructure matches the configuration.\n"
        );
    }
}
