//! Compiling a policy set: every module parsed and analysed once, at write time and
//! then once per version in the cache.

use std::collections::BTreeSet;
use std::sync::Arc;

use regorus::Engine;
use sortie_core::policy::{Enforcement, OnUnavailable, PolicySet};

/// A module that does not compile, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("module `{module}` line {line} column {column}: {message}")]
pub struct CompileError {
    /// The module's name (empty when the error is not in one module).
    pub module: String,
    /// The line (1-based; 0 when unknown).
    pub line: u32,
    /// The column (1-based; 0 when unknown).
    pub column: u32,
    /// What is wrong.
    pub message: String,
}

/// A compiled set, ready to evaluate: a prepared engine and the packages whose `deny`
/// and `warn` rules give its messages.
#[derive(Debug, Clone)]
pub struct CompiledSet {
    /// The set's name.
    pub name: String,
    /// The set's enforcement level.
    pub enforcement: Enforcement,
    /// What the set does when there is no plan data.
    pub on_unavailable: OnUnavailable,
    pub(crate) engine: Engine,
    pub(crate) packages: Vec<String>,
    /// The `deny` and `warn` rules that exist, `data.<package>.<rule>`.
    pub(crate) rules: Vec<String>,
    /// The rules compiled for regorus's VM, when safe ([`crate::vm`]); else the
    /// interpreter runs `engine`.
    pub(crate) program: Option<Arc<regorus::rvm::Program>>,
    /// The resource types the set can see ([`crate::index`]), or `None`: every resource.
    pub(crate) resource_types: Option<Arc<BTreeSet<String>>>,
}

impl CompiledSet {
    /// The packages (`data.<package>`) whose `deny` and `warn` rules are read.
    pub fn packages(&self) -> &[String] {
        &self.packages
    }

    /// True when the set runs on regorus's VM (compiled bytecode, with an instruction
    /// budget), false when on its interpreter (a set whose rules may refer to each other
    /// in a cycle, or that the VM's compiler does not take).
    pub fn on_vm(&self) -> bool {
        self.program.is_some()
    }

    /// The same set, run on the interpreter (to compare the two engines' results).
    pub fn on_interpreter(mut self) -> Self {
        self.program = None;
        self
    }

    /// The resource types the set is evaluated over, when its Rego reads
    /// `input.plan.resource_changes` only through iterations that require a literal
    /// `type` (empty: it never reads them); `None` when it sees every resource.
    pub fn resource_types(&self) -> Option<&BTreeSet<String>> {
        self.resource_types.as_deref()
    }

    /// The same set, evaluated over every resource (to compare results with the index).
    pub fn without_index(mut self) -> Self {
        self.resource_types = None;
        self
    }
}

/// Parses and analyses every module of `set` (Rego v1). The first error names its
/// module, line and column.
pub fn compile(set: &PolicySet) -> Result<CompiledSet, CompileError> {
    let mut engine = Engine::new();
    engine.set_rego_v0(false);
    engine.set_strict_builtin_errors(false);
    let mut packages = BTreeSet::new();
    for module in &set.modules {
        check_nesting(&module.rego).map_err(|(line, column)| CompileError {
            module: module.name.clone(),
            line,
            column,
            message: format!("brackets nest deeper than {MAX_NESTING} levels"),
        })?;
        let package = engine
            .add_policy(module.name.clone(), module.rego.clone())
            .map_err(|e| located(&e.to_string(), &module.name))?;
        packages.insert(package);
    }
    crate::recursion::refuse_recursive_functions(&mut engine)?;
    // Analysis (undefined functions, rule conflicts, recursion) happens when the engine
    // is first prepared: a query that touches nothing of the input prepares it.
    engine
        .eval_query("true".to_string(), false)
        .map_err(|e| located(&e.to_string(), ""))?;
    let rules = message_rules(&mut engine)?;
    let program = crate::vm::program(&engine, &rules);
    let resource_types = crate::index::resource_types(&mut engine).map(Arc::new);
    Ok(CompiledSet {
        name: set.name.clone(),
        enforcement: set.enforcement,
        on_unavailable: set.on_unavailable,
        engine,
        packages: packages.into_iter().collect(),
        rules,
        program,
        resource_types,
    })
}

/// Every `deny` and `warn` rule the modules define, as `data.<package>.<rule>`.
fn message_rules(engine: &mut Engine) -> Result<Vec<String>, CompileError> {
    use regorus::unstable::{Rule, RuleHead};
    let mut out = BTreeSet::new();
    for module in engine.get_modules().iter() {
        let package = regorus::utils::get_path_string(&module.package.refr, Some("data"))
            .map_err(|e| located(&e.to_string(), ""))?;
        for rule in &module.policy {
            let refr = match rule.as_ref() {
                Rule::Spec { head, .. } => match head {
                    RuleHead::Compr { refr, .. }
                    | RuleHead::Set { refr, .. }
                    | RuleHead::Func { refr, .. } => refr,
                },
                Rule::Default { refr, .. } => refr,
            };
            let path = regorus::utils::get_path_string(refr, Some(&package))
                .map_err(|e| located(&e.to_string(), ""))?;
            if path == format!("{package}.deny") || path == format!("{package}.warn") {
                out.insert(path);
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// The deepest nesting of `(`, `[` and `{` a module may have. The parser recurses on
/// each level; a bound keeps a hostile module from overflowing its stack.
pub const MAX_NESTING: usize = 16;

/// `Err((line, column))` of the first bracket past [`MAX_NESTING`] levels. Strings
/// (`"…"` with escapes, `` `…` ``) and `#` comments are skipped.
fn check_nesting(rego: &str) -> Result<(), (u32, u32)> {
    let (mut depth, mut line, mut column) = (0usize, 1u32, 0u32);
    let mut chars = rego.chars();
    let mut in_string: Option<char> = None;
    let mut in_comment = false;
    while let Some(c) = chars.next() {
        column = column.saturating_add(1);
        if c == '\n' {
            line = line.saturating_add(1);
            column = 0;
            in_comment = false;
            continue;
        }
        if in_comment {
            continue;
        }
        if let Some(q) = in_string {
            if c == '\\' && q == '"' {
                let _ = chars.next();
                column = column.saturating_add(1);
            } else if c == q {
                in_string = None;
            }
            continue;
        }
        match c {
            '#' => in_comment = true,
            '"' | '`' => in_string = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Reads `--> file:line:col` and the last `error: message` line out of a regorus error.
pub(crate) fn located(text: &str, module: &str) -> CompileError {
    let mut out = CompileError {
        module: module.to_string(),
        line: 0,
        column: 0,
        message: text.trim().to_string(),
    };
    if let Some(at) = text.lines().find_map(|l| l.trim().strip_prefix("--> ")) {
        let mut parts = at.rsplitn(3, ':');
        let column = parts.next().and_then(|c| c.trim().parse().ok());
        let line = parts.next().and_then(|c| c.trim().parse().ok());
        let file = parts.next();
        if let (Some(line), Some(column)) = (line, column) {
            out.line = line;
            out.column = column;
            if let Some(file) = file {
                out.module = file.to_string();
            }
        }
        if let Some(msg) = text
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error:"))
        {
            out.message = msg.trim().to_string();
        }
    }
    out
}
