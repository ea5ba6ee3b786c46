//! The integration tests of this crate, one binary (one link) with a module per file.

mod contract;
mod dynamo;
mod memory;
mod wedge;
