//! The integration tests of this crate, one binary (one link) with a module per file.

mod check;
mod eks;
mod eks_job;
mod job_secrets;
mod local;
mod state_history;
