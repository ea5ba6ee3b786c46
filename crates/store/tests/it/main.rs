//! The integration tests of this crate, one binary (one link) with a module per file.

mod artifacts;
mod audit_cost;
mod contract;
mod dynamo;
mod fair_queue;
mod memory;
mod s3_express;
mod wedge;
