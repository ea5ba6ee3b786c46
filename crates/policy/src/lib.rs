//! Policy sets in Rego, evaluated in process with `regorus`.
//!
//! - [`compile`] turns a [`PolicySet`](sortie_core::policy::PolicySet) into a
//!   [`CompiledSet`], or a [`CompileError`] naming the module, line and column.
//! - [`evaluate`] checks an input (see [`build_input`]) against compiled sets, each
//!   bounded by [`Limits`]: a policy that runs too long gives a
//!   [`SetResult`](sortie_core::policy::SetResult) with an `error`, never a hang or a panic.
//! - [`SetCache`] keeps compiled sets by (group, name, version), bounded.
//! - A set runs on regorus's VM (bytecode, with an instruction budget) when its rules
//!   cannot refer to each other in a cycle, else on the interpreter
//!   ([`CompiledSet::on_vm`]).
//!
//! The convention: every module declares a package; for each distinct package `p` of
//! a set, the rules `data.p.deny` and `data.p.warn` (sets or arrays of messages) give
//! the set's deny and warn messages. Modules are Rego v1 (`if`, `contains`).

mod cache;
mod compile;
mod evaluate;
mod index;
mod input;
mod recursion;
mod tokens;
mod vm;

pub use cache::SetCache;
pub use compile::{compile, CompileError, CompiledSet, MAX_NESTING};
pub use evaluate::{
    evaluate, evaluate_one, evaluate_prepared, Limits, PlanInput, PreparedInput, MAX_FILTERED,
    MAX_MESSAGES, MAX_MESSAGE_BYTES,
};
pub use index::MAX_DEPTH;
pub use input::{
    build_input, check_plan_size, max_plan_bytes_within, JobInput, MAX_PLAN_BYTES,
    PLAN_MEMORY_SHARE_PERCENT, VALUE_BYTES_PER_JSON_BYTE,
};
pub use vm::MAX_CHAIN;
