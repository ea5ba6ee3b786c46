//! The resource types a set can see: indexing a set by `type`, as OPA indexes rules on
//! equality with a constant.
//!
//! Most plan policies look at one or a few resource types. When every place a set reads
//! `input.plan.resource_changes` is an iteration (`some rc in input.plan.resource_changes`
//! or `rc := input.plan.resource_changes[_]`) whose own query later requires the element's
//! `type` to equal a string literal (`rc.type == "aws_s3_bucket"`, either side, `=`,
//! `rc["type"]`, or `rc.type in {"a", "b"}`), then no other element can make a difference
//! to the set's result, and the set is evaluated over an input whose `resource_changes`
//! keeps only those types, in their order. The iterations cost about 170 ns per resource
//! on regorus's VM (BENCHMARKS.md), so a set about one type of four is about four times
//! cheaper.
//!
//! The analysis is conservative: a set that reads the list any other way (a `count`, an
//! `every`, an index variable, an element by position, the plan or the input whole, a
//! dynamic key under `input` or `input.plan`, a `with`, an `import input…`, a variable
//! named `input`, a type condition before the iteration or in another query) sees the
//! whole list; so does a set whose expressions nest deeper than [`MAX_DEPTH`]. A set the
//! analysis cannot prove gets the full input: the index changes speed, never a result
//! (`tests/it/index.rs` checks filtered against full evaluation over generated sets and
//! plans). One difference is deliberate: a set that would stop with a runtime error on an
//! element its own type condition excludes (a conflict, a time or instruction limit) no
//! longer meets that element.

use std::collections::BTreeSet;
use std::iter::once;

use regorus::unstable::{
    AssignOp, BoolOp, Expr, ExprRef, Literal, Module, Query, Rule, RuleBody, RuleHead,
};
use regorus::{Engine, Value};

/// The deepest expression nesting the analysis follows; deeper, the set sees every
/// resource (the walk recurses, so this bounds its stack).
pub const MAX_DEPTH: usize = 128;

/// The resource types the set's modules can see (empty: the set never reads
/// `input.plan.resource_changes`), or `None` when the analysis cannot prove the set reads
/// the list only through type-filtered iterations.
pub(crate) fn resource_types(engine: &mut Engine) -> Option<BTreeSet<String>> {
    let mut walk = Walk::default();
    for module in engine.get_modules().iter() {
        walk.module(module)?;
    }
    Some(walk.types)
}

/// The walk: the types seen so far; every method answers `None` when the set cannot be
/// indexed.
#[derive(Default)]
struct Walk {
    types: BTreeSet<String>,
}

/// One step of a reference chain below its root.
enum Step<'a> {
    /// `.name`, or `["name"]` with a string literal.
    Field(&'a str),
    /// `[expr]` with anything else.
    Index(&'a Expr),
    /// A field that is not a string (not produced by regorus's parser; never indexed).
    Unknown,
}

impl Walk {
    fn module(&mut self, module: &Module) -> Option<()> {
        for import in &module.imports {
            if matches!(chain(&import.refr).0, Expr::Var { value, .. } if is(value, "input")) {
                return None;
            }
        }
        for rule in &module.policy {
            // Every expression of the rule's head (and a default's value), then its bodies.
            let (exprs, bodies): (Vec<&ExprRef>, &[RuleBody]) = match rule.as_ref() {
                Rule::Spec { head, bodies, .. } => {
                    let exprs = match head {
                        RuleHead::Compr { refr, assign, .. } => {
                            once(refr).chain(assign.iter().map(|a| &a.value)).collect()
                        }
                        RuleHead::Set { refr, key, .. } => once(refr).chain(key).collect(),
                        RuleHead::Func {
                            refr, args, assign, ..
                        } => once(refr)
                            .chain(args)
                            .chain(assign.iter().map(|a| &a.value))
                            .collect(),
                    };
                    (exprs, bodies)
                }
                Rule::Default {
                    refr, args, value, ..
                } => (once(refr).chain(args).chain(once(value)).collect(), &[]),
            };
            for expr in exprs {
                self.expr(expr, 0)?;
            }
            for body in bodies {
                if let Some(a) = &body.assign {
                    self.expr(&a.value, 0)?;
                }
                self.query(&body.query, 0)?;
            }
        }
        Some(())
    }

    fn query(&mut self, query: &Query, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH || query.stmts.iter().any(|s| !s.with_mods.is_empty()) {
            return None;
        }
        let depth = depth + 1;
        for (at, stmt) in query.stmts.iter().enumerate() {
            match &stmt.literal {
                Literal::SomeVars { vars, .. } => {
                    if vars.iter().any(|v| v.text() == "input") {
                        return None;
                    }
                }
                Literal::SomeIn {
                    key,
                    value,
                    collection,
                    ..
                } => {
                    if is_resource_changes(collection) {
                        // Only `some rc in …`: a key variable would see positions.
                        let var = key.is_none().then(|| var_name(value)).flatten()?;
                        self.iteration(query, at, var)?;
                    } else {
                        if let Some(k) = key {
                            self.expr(k, depth)?;
                        }
                        self.expr(value, depth)?;
                        self.expr(collection, depth)?;
                    }
                }
                Literal::Expr { expr, .. } => match element_of_changes(expr) {
                    Some(var) => self.iteration(query, at, var?)?,
                    None => self.expr(expr, depth)?,
                },
                Literal::NotExpr { expr, .. } => self.expr(expr, depth)?,
                Literal::Every {
                    key,
                    value,
                    domain,
                    query: body,
                    ..
                } => {
                    if key.iter().chain([value]).any(|v| v.text() == "input") {
                        return None;
                    }
                    self.expr(domain, depth)?;
                    self.query(body, depth)?;
                }
            }
        }
        Some(())
    }

    /// The iteration at `query.stmts[at]` binds `var` to each resource change: it is
    /// indexed when `var` is declared once in the query and a later literal of the same
    /// query requires `var.type` to be one of some string literals.
    fn iteration(&mut self, query: &Query, at: usize, var: &str) -> Option<()> {
        if var == "_" || var == "input" || declarations(query, var) != 1 {
            return None;
        }
        let types = query.stmts[at + 1..]
            .iter()
            .find_map(|stmt| match &stmt.literal {
                Literal::Expr { expr, .. } => type_condition(expr, var),
                _ => None,
            })?;
        self.types.extend(types);
        Some(())
    }

    fn expr(&mut self, expr: &Expr, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let depth = depth + 1;
        match expr {
            Expr::Var { .. } | Expr::RefDot { .. } | Expr::RefBrack { .. } => {
                self.reference(expr, depth)
            }
            Expr::String { .. }
            | Expr::RawString { .. }
            | Expr::Number { .. }
            | Expr::Bool { .. }
            | Expr::Null { .. } => Some(()),
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                items.iter().try_for_each(|i| self.expr(i, depth))
            }
            Expr::Object { fields, .. } => fields.iter().try_for_each(|(_, k, v)| {
                self.expr(k, depth)?;
                self.expr(v, depth)
            }),
            Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
                self.expr(term, depth)?;
                self.query(query, depth)
            }
            Expr::ObjectCompr {
                key, value, query, ..
            } => {
                self.expr(key, depth)?;
                self.expr(value, depth)?;
                self.query(query, depth)
            }
            Expr::Call { fcn, params, .. } => {
                self.expr(fcn, depth)?;
                params.iter().try_for_each(|p| self.expr(p, depth))
            }
            Expr::UnaryExpr { expr, .. } => self.expr(expr, depth),
            Expr::BinExpr { lhs, rhs, .. }
            | Expr::BoolExpr { lhs, rhs, .. }
            | Expr::ArithExpr { lhs, rhs, .. }
            | Expr::AssignExpr { lhs, rhs, .. } => {
                self.expr(lhs, depth)?;
                self.expr(rhs, depth)
            }
            Expr::Membership {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    self.expr(k, depth)?;
                }
                self.expr(value, depth)?;
                self.expr(collection, depth)
            }
        }
    }

    /// A variable or a reference chain: below `input` it must stay out of
    /// `input.plan.resource_changes`; its root (when not a variable) and its dynamic
    /// indexes are walked.
    fn reference(&mut self, expr: &Expr, depth: usize) -> Option<()> {
        let (root, steps) = chain(expr);
        match root {
            Expr::Var { value, .. } => {
                if is(value, "input") && !outside_resource_changes(&steps) {
                    return None;
                }
            }
            other => self.expr(other, depth)?,
        }
        steps.iter().try_for_each(|step| match step {
            Step::Index(index) => self.expr(index, depth),
            Step::Field(_) | Step::Unknown => Some(()),
        })
    }
}

/// True when a reference below `input` with these steps cannot reach
/// `input.plan.resource_changes`: its first step is a named field other than `plan`, or
/// it is `input.plan.<name>` with a name other than `resource_changes`.
fn outside_resource_changes(steps: &[Step]) -> bool {
    match steps {
        [Step::Field("plan"), Step::Field(name), ..] => *name != "resource_changes",
        [Step::Field(name), ..] => *name != "plan",
        _ => false,
    }
}

/// `expr`'s root (the innermost non-reference) and its steps outward.
fn chain(expr: &Expr) -> (&Expr, Vec<Step<'_>>) {
    let mut steps = Vec::new();
    let mut at = expr;
    loop {
        match at {
            Expr::RefDot { refr, field, .. } => {
                steps.push(match field.1.as_string() {
                    Ok(name) => Step::Field(name.as_ref()),
                    Err(_) => Step::Unknown,
                });
                at = refr;
            }
            Expr::RefBrack { refr, index, .. } => {
                steps.push(match index.as_ref() {
                    Expr::String { value, .. } | Expr::RawString { value, .. } => {
                        match value.as_string() {
                            Ok(name) => Step::Field(name.as_ref()),
                            Err(_) => Step::Index(index),
                        }
                    }
                    other => Step::Index(other),
                });
                at = refr;
            }
            root => {
                steps.reverse();
                return (root, steps);
            }
        }
    }
}

/// True for exactly `input.plan.resource_changes`.
fn is_resource_changes(expr: &Expr) -> bool {
    match chain(expr) {
        (Expr::Var { value, .. }, steps) if is(value, "input") => matches!(
            steps.as_slice(),
            [Step::Field("plan"), Step::Field("resource_changes")]
        ),
        _ => false,
    }
}

/// For `var := input.plan.resource_changes[_]` (or `=`): `Some(Some(var))`; for a
/// statement of that shape whose left side is not a plain variable or whose index is
/// not `_`: `Some(None)` (not indexable); for any other statement: `None`.
fn element_of_changes(expr: &Expr) -> Option<Option<&str>> {
    let Expr::AssignExpr { lhs, rhs, .. } = expr else {
        return None;
    };
    let Expr::RefBrack { refr, index, .. } = rhs.as_ref() else {
        return None;
    };
    if !is_resource_changes(refr) {
        return None;
    }
    Some(var_name(lhs).filter(|_| var_name(index) == Some("_")))
}

/// The name of a plain variable.
fn var_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Var { value, .. } => value.as_string().ok().map(|s| s.as_ref()),
        _ => None,
    }
}

fn is(value: &Value, name: &str) -> bool {
    value.as_string().is_ok_and(|s| s.as_ref() == name)
}

/// How many times the query's own literals declare `var` (`some`, `some … in`, `:=`,
/// or `=` with the variable alone on the left).
fn declarations(query: &Query, var: &str) -> usize {
    query
        .stmts
        .iter()
        .map(|stmt| match &stmt.literal {
            Literal::SomeVars { vars, .. } => vars.iter().filter(|v| v.text() == var).count(),
            Literal::SomeIn { key, value, .. } => key
                .iter()
                .chain([value])
                .filter(|e| var_name(e) == Some(var))
                .count(),
            Literal::Expr { expr, .. } => match expr.as_ref() {
                Expr::AssignExpr { lhs, .. } if var_name(lhs) == Some(var) => 1,
                _ => 0,
            },
            _ => 0,
        })
        .sum()
}

/// The types `expr` requires of `var.type`, when it is `var.type == "t"` (either side,
/// or `=`) or `var.type in {…}` / `[…]` of string literals.
fn type_condition(expr: &Expr, var: &str) -> Option<Vec<String>> {
    match expr {
        Expr::BoolExpr {
            op: BoolOp::Eq,
            lhs,
            rhs,
            ..
        }
        | Expr::AssignExpr {
            op: AssignOp::Eq,
            lhs,
            rhs,
            ..
        } => {
            if is_type_of(lhs, var) {
                literal(rhs).map(|t| vec![t])
            } else if is_type_of(rhs, var) {
                literal(lhs).map(|t| vec![t])
            } else {
                None
            }
        }
        Expr::Membership {
            key: None,
            value,
            collection,
            ..
        } if is_type_of(value, var) => match collection.as_ref() {
            Expr::Set { items, .. } | Expr::Array { items, .. } => {
                items.iter().map(|i| literal(i)).collect()
            }
            _ => None,
        },
        _ => None,
    }
}

/// True for `var.type` or `var["type"]`.
fn is_type_of(expr: &Expr, var: &str) -> bool {
    let (root, steps) = chain(expr);
    var_name(root) == Some(var) && matches!(steps.as_slice(), [Step::Field("type")])
}

/// A string literal's text.
fn literal(expr: &Expr) -> Option<String> {
    match expr {
        Expr::String { value, .. } | Expr::RawString { value, .. } => {
            value.as_string().ok().map(|s| s.to_string())
        }
        _ => None,
    }
}
