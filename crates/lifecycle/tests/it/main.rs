//! The integration tests of this crate, one binary (one link) with a module per file.

mod calls_per_job;
mod common;
mod eks;
mod end_bound;
mod lifecycle;
mod list_tasks;
mod locks;
mod lost_answer;
mod poison;
mod relaunch;
mod retry_storm;
mod reviews;
mod sensitive;
mod sweep_scale;
mod true_to_ecs;
