//! The integration tests of this crate, one binary (one link) with a module per file.

mod cli;
mod common;
mod data_dir;
mod env_life;
mod expiry;
mod dev;
mod first_hour;
mod follow;
mod grammar;
mod implicit_source;
mod interrupt;
mod policy_gate;
mod locks;
mod plan;
mod policy_test;
mod sensitive;
mod waiting;
