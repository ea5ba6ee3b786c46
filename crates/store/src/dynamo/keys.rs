//! The table's keys: partition and sort keys of every item, the gsi3 partitions and the
//! gsi4 keys of environments.

use std::collections::HashMap;

use sortie_core::{EnvPath, GroupPath, Job, RunnerId};

use super::{s, Item};
use crate::sortkeys::sort_time;

pub(super) fn key(pk: String, sk: &str) -> Item {
    HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
}

pub(super) fn group_pk(g: &GroupPath) -> String {
    format!("GROUP#{}", g.as_str())
}
pub(super) fn runner_key(id: &RunnerId) -> Item {
    key(group_pk(id.group()), &format!("RUNNER#{}", id.name()))
}
pub(super) fn env_key(path: &EnvPath) -> Item {
    key(format!("ENV#{path}"), "ENV")
}
pub(super) fn job_key(id: &str) -> Item {
    key(format!("JOB#{id}"), "JOB")
}
pub(super) fn queue_key(env: &EnvPath, id: &str) -> Item {
    key(format!("QUEUE#{env}"), id)
}
pub(super) fn members_pk(org: Option<&str>) -> String {
    format!("MEMBERS#{}", org.unwrap_or_default())
}

/// gsi4 partition of an organisation's environments (`org` is the path's first segment);
/// only environment items are in gsi4.
pub(super) fn org_pk(org: &str) -> String {
    format!("ORG#{org}")
}
/// gsi4 sort key of an environment, `ENV#<path>`; with a group's path and a `/`, the prefix
/// of every environment under that group.
pub(super) fn org_env_sk(path: &str) -> String {
    format!("ENV#{path}")
}

pub(super) const PENDING: &str = "PENDING";
pub(super) const ACTIVE: &str = "ACTIVE";
/// gsi3 partition of a job that ended but whose environment lock was not yet seen released.
pub(super) const ENDED: &str = "ENDED";
/// gsi3 partition of a job awaiting approval (holding its environment's lock), by approval
/// deadline: the sweeper's `approvals_due`.
pub(super) const AWAITING: &str = "AWAITING";
/// gsi3 partition of an environment with a drift schedule, by its next fire time: the
/// sweeper's `due_drift_checks`.
pub(super) const DRIFT: &str = "DRIFT";

pub(super) fn pending_sk(job: &Job) -> String {
    format!("{}#{}", sort_time(job.transitions[0].at), job.id)
}
