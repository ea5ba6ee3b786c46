//! The integration tests of this crate, one binary (one link) with a module per file.

mod cli;
mod common;
mod data_dir;
mod dev;
mod env_life;
mod expiry;
mod first_hour;
mod follow;
mod grammar;
mod implicit_source;
mod interrupt;
mod locks;
mod plan;
mod policy_gate;
mod policy_test;
mod sensitive;
mod waiting;
