//! `sortie_membership`: a role on a group for one subject or for every principal whose
//! claim matches a glob. The API grants and revokes but never edits a membership, so every
//! attribute replaces it; it has no single-membership read, so a read lists the group's.

use serde_json::{json, Value};

use super::text;
use crate::api::Api;
use crate::error::Error;
use crate::schema::{attr, Block, Mode, Ty};
use sortie_client::endpoints;

/// How many memberships a read looks through (the API lists one group's, unpaged).
const READ_LIMIT: usize = 10_000;

/// Its schema: the grantee is flat (`subject`, or `claim` and `pattern`), every setting
/// force-new.
pub fn block() -> Block {
    use Mode::*;
    Block {
        attrs: vec![
            attr("id", Ty::String, Computed, "`<group>/<membership_id>`."),
            attr(
                "membership_id",
                Ty::String,
                Computed,
                "The membership's id from the API.",
            ),
            attr(
                "group",
                Ty::String,
                Required,
                "The group the role is granted on (and inherited below); `\"\"` is the root group.",
            )
            .force_new(),
            attr(
                "role",
                Ty::String,
                Required,
                "`viewer`, `deployer`, `maintainer` or `owner`.",
            )
            .force_new(),
            attr(
                "subject",
                Ty::String,
                Optional,
                "The one subject (`sub`) granted; set this or `claim` and `pattern`.",
            )
            .force_new(),
            attr(
                "claim",
                Ty::String,
                Optional,
                "The claim matched by `pattern` (with `pattern`, instead of `subject`).",
            )
            .force_new(),
            attr(
                "pattern",
                Ty::String,
                Optional,
                "A glob over the claim's value; `*` matches any run of characters, `/` included.",
            )
            .force_new(),
            attr(
                "issuer",
                Ty::String,
                Optional,
                "Only tokens from this issuer; any issuer when unset.",
            )
            .force_new(),
            attr("granted_by", Ty::String, Computed, "Who granted it."),
        ],
        blocks: vec![],
        description: "A Sortie membership: a role on a group.",
    }
}

fn set(config: &Value, name: &str) -> bool {
    !config[name].is_null()
}

/// Exactly one grantee form: `subject`, or `claim` with `pattern` (the service checks
/// only configurations without unknown values).
pub fn validate(config: &Value) -> Result<(), Error> {
    let subject = set(config, "subject");
    let (claim, pattern) = (set(config, "claim"), set(config, "pattern"));
    let problem = match (subject, claim, pattern) {
        (true, false, false) | (false, true, true) => return Ok(()),
        (true, _, _) => (
            "subject",
            "set `subject` or `claim` and `pattern`, not both",
        ),
        (false, true, false) => ("pattern", "`claim` needs `pattern`"),
        (false, false, true) => ("claim", "`pattern` needs `claim`"),
        (false, false, false) => (
            "subject",
            "a membership needs `subject`, or `claim` and `pattern`",
        ),
    };
    Err(Error::Invalid {
        attribute: problem.0.into(),
        problem: problem.1.into(),
    })
}

fn grantee(planned: &Value) -> Value {
    let mut g = if set(planned, "subject") {
        json!({ "kind": "subject", "subject": planned["subject"] })
    } else {
        json!({ "kind": "claim_pattern", "claim": planned["claim"], "pattern": planned["pattern"] })
    };
    if set(planned, "issuer") {
        g["issuer"] = planned["issuer"].clone();
    }
    g
}

fn state_of(view: &Value) -> Value {
    let g = &view["grantee"];
    json!({
        "id": format!("{}/{}", text(view, "group"), text(view, "id")),
        "membership_id": view["id"],
        "group": view["group"],
        "role": view["role"],
        "subject": g["subject"],
        "claim": g["claim"],
        "pattern": g["pattern"],
        "issuer": g["issuer"],
        "granted_by": view["granted_by"],
    })
}

fn group(state: &Value) -> &str {
    sortie_client::group(text(state, "group"))
}

/// Grants it.
pub async fn create(api: &Api, planned: &Value) -> Result<Value, Error> {
    let b = json!({ "role": planned["role"], "grantee": grantee(planned) });
    let a = api
        .send(&endpoints::grant_membership(group(planned)), Some(&b), None)
        .await?;
    Ok(state_of(&a.body))
}

/// Reads it from its group's list; gone is a 404 (so Terraform plans a re-creation).
pub async fn read(api: &Api, state: &Value) -> Result<Value, Error> {
    let id = text(state, "membership_id");
    let a = api.get(&endpoints::list_memberships(group(state))).await?;
    let found = a.body["memberships"]
        .as_array()
        .into_iter()
        .flatten()
        .take(READ_LIMIT)
        .find(|m| m["id"].as_str() == Some(id));
    match found {
        Some(m) => Ok(state_of(m)),
        None => Err(Error::Api {
            status: 404,
            code: "not_found".into(),
            message: format!("membership `{id}` is not granted on this group"),
            fields: vec![],
        }),
    }
}

/// Revokes it.
pub async fn delete(api: &Api, state: &Value) -> Result<(), Error> {
    let p = endpoints::revoke_membership(group(state), text(state, "membership_id"));
    api.send(&p, None, None).await?;
    Ok(())
}

/// An import id `<group>/<membership_id>` (the root group's is `/<membership_id>`).
pub fn import_state(id: &str) -> Result<Value, Error> {
    match id.rsplit_once('/') {
        Some((group, m)) if !m.is_empty() => {
            Ok(json!({ "id": id, "group": group, "membership_id": m }))
        }
        _ => Err(Error::Invalid {
            attribute: "id".into(),
            problem: format!("`{id}` is not `<group>/<membership_id>`"),
        }),
    }
}

/// `grantee.subject` → `subject`, `role` → `role`.
pub fn attribute_of(api_path: &str) -> Option<String> {
    let mut parts = api_path.split('.');
    let head = parts.next()?;
    Some(match head {
        "grantee" => match parts.next() {
            Some(f @ ("subject" | "claim" | "pattern" | "issuer")) => f.to_string(),
            _ => "subject".into(),
        },
        "role" | "group" => head.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_grantee_form_is_accepted() {
        let ok = [
            json!({"subject": "alice"}),
            json!({"claim": "sub", "pattern": "repo:*"}),
        ];
        for c in ok {
            assert!(validate(&c).is_ok(), "{c}");
        }
        for (c, attribute) in [
            (json!({}), "subject"),
            (
                json!({"subject": "a", "claim": "sub", "pattern": "x"}),
                "subject",
            ),
            (json!({"claim": "sub"}), "pattern"),
            (json!({"pattern": "x"}), "claim"),
        ] {
            match validate(&c) {
                Err(Error::Invalid { attribute: a, .. }) => assert_eq!(a, attribute, "{c}"),
                other => panic!("{c}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_grantee_round_trips_through_the_state() {
        for planned in [
            json!({"group": "acme", "role": "viewer", "subject": "alice", "issuer": "https://idp"}),
            json!({"group": "acme", "role": "owner", "claim": "sub", "pattern": "repo:acme/*"}),
        ] {
            let view = json!({
                "id": "m1", "group": "acme", "role": planned["role"],
                "grantee": grantee(&planned), "granted_by": "root",
            });
            let s = state_of(&view);
            for k in ["group", "role", "subject", "claim", "pattern", "issuer"] {
                assert_eq!(s[k], planned[k], "{k}");
            }
            assert_eq!(s["id"], "acme/m1");
            assert_eq!(import_state("acme/m1").unwrap()["membership_id"], "m1");
        }
    }

    #[test]
    fn api_paths_name_attributes() {
        assert_eq!(attribute_of("grantee.pattern").as_deref(), Some("pattern"));
        assert_eq!(attribute_of("grantee").as_deref(), Some("subject"));
        assert_eq!(attribute_of("role").as_deref(), Some("role"));
    }
}
