//! The integration tests of this crate, one binary (one link) with a module per file.

mod authorisation;
mod hostile_text;
mod job_state;
mod limits;
mod module_graph;
mod outcome;
mod oversight;
mod parsing;
mod resolution;
mod shape;
