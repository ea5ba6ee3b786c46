//! The integration tests of this crate, one binary (one link) with a module per file, in
//! two tiers.
//!
//! The fast tier (`common::fast::FastWorld`: the memory store, queue, bus, launcher and
//! secrets; runs in every `cargo test`) holds the lifecycle's behaviour:
//! - `outcomes`: how a job ends, the lock handed on, cancel and timeout from outside,
//!   FIFO per environment, Spot requeues bounded, a stale lock released;
//! - `reviews`: reviewed applies and drift schedules;
//! - `locks`: a locked environment's drift check;
//! - `sensitive`: a job's secrets deleted at its end.
//!
//! The AWS tier (`common::World`: ECS, DynamoDB, SQS and EventBridge on moto, through the
//! loopback fault proxy; `require_aws!`) holds the launcher and store contracts, what only
//! the real SDK against the strict doubles can show: RunTask's client token and
//! exactly-once launch (`lifecycle`, `relaunch`, `lost_answer`), ListTasks and
//! DescribeTasks (`list_tasks`, `true_to_ecs`), AWS errors and throttling (`retry_storm`),
//! calls per job (`calls_per_job`), conditional writes and unreadable items on DynamoDB
//! (`end_bound`, `poison`), the EKS launcher against the Kubernetes double (`eks`), and the
//! sweep over thousands of jobs (`sweep_scale`, whose scale test runs on the fast tier).

mod calls_per_job;
mod common;
mod eks;
mod end_bound;
mod lifecycle;
mod list_tasks;
mod locks;
mod lost_answer;
mod outcomes;
mod poison;
mod relaunch;
mod retry_storm;
mod reviews;
mod sensitive;
mod sweep_scale;
mod true_to_ecs;
