//! Attribute checks from sortie-core's types: the rules the API applies to the same
//! values, run when Terraform validates a configuration, so a bad name is refused at plan
//! time, on its attribute, before anything is created or replaced.

use sortie_core::names::{check_segment, GroupPath, RunnerId};
use sortie_core::{EnvPath, Role};

/// A group path as a URL's `{group}` carries it: as the client sends it (`/` trimmed; `-`
/// and `""` are the root).
pub fn url_group(value: &str) -> Result<(), String> {
    url_group_path(value).map(drop)
}

/// The group path of a URL's `{group}` value (see [`url_group`]).
pub fn url_group_path(value: &str) -> Result<GroupPath, String> {
    let group = sortie_client::group(value);
    GroupPath::parse(if group == "-" { "" } else { group }).map_err(|e| e.first_problem())
}

/// A group as a body carries it: a group path, not the root.
pub fn owner_group(value: &str) -> Result<(), String> {
    match GroupPath::parse(value) {
        Ok(g) if g.is_root() => Err("must be a group, not the root".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.first_problem()),
    }
}

/// An organisation: a top-level group.
pub fn org(value: &str) -> Result<(), String> {
    match url_group_path(value)? {
        g if g.depth() == 1 => Ok(()),
        _ => Err("a connection belongs to an organisation (a top-level group)".into()),
    }
}

/// A name or an id within a group: `[a-z0-9][a-z0-9-]{0,62}`.
pub fn segment(value: &str) -> Result<(), String> {
    check_segment(value)
}

/// A runner's id: `<group>/<name>`, or `<name>` for a shared runner.
pub fn runner_id(value: &str) -> Result<(), String> {
    RunnerId::parse(value)
        .map(drop)
        .map_err(|e| e.first_problem())
}

/// An environment's path: `<group>/<name>` in an organisation.
pub fn env_path(value: &str) -> Result<(), String> {
    EnvPath::parse(value)
        .map(drop)
        .map_err(|e| e.first_problem())
}

/// A role: `viewer`, `deployer`, `maintainer` or `owner`.
pub fn role(value: &str) -> Result<(), String> {
    serde_json::from_value::<Role>(serde_json::Value::String(value.into()))
        .map(drop)
        .map_err(|_| {
            format!("`{value}` is not a role: `viewer`, `deployer`, `maintainer` or `owner`")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_are_cores_rules_on_what_the_client_sends() {
        assert!(url_group("acme/payments").is_ok());
        assert!(
            url_group("/acme/").is_ok(),
            "trimmed as the client sends it"
        );
        assert!(url_group("").is_ok() && url_group("-").is_ok(), "the root");
        assert!(url_group("Acme").is_err());
        assert!(owner_group("").is_err() && owner_group("acme").is_ok());
        assert!(org("acme").is_ok() && org("acme/x").is_err());
        assert!(segment("prod-1").is_ok() && segment("Bad Name!").is_err());
        assert!(runner_id("acme/local").is_ok() && runner_id("shared").is_ok());
        assert!(runner_id("acme/Bad").is_err());
        assert!(env_path("acme/dev").is_ok() && env_path("dev").is_err());
        assert!(role("owner").is_ok() && role("admin").is_err());
    }
}
