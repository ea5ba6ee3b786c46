//! The integration tests of this crate, one binary (one link) with a module per file.

mod audit_e2e;
mod cli;
mod common;
mod console;
mod data_dir;
mod dev;
mod env_life;
mod expiry;
mod expiry_e2e;
mod first_hour;
mod follow;
mod grammar;
mod identity_e2e;
mod implicit_source;
mod interrupt;
mod locks;
mod merge_requests;
mod notify_e2e;
mod plan;
mod policy_e2e;
mod policy_gate;
mod policy_test;
mod pull_requests;
mod secret_scan;
mod sensitive;
mod waiting;
