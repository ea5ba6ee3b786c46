//! `sortie_membership`: a role on a group for one subject or for every principal whose
//! claim matches a glob. The API grants and revokes but never edits a membership, so every
//! attribute replaces it; it has no single-membership read, so a read lists the group's.

use serde_json::{json, Value};
use sortie_core::{Grantee, Problems};

use super::{split_id, text, Resource};
use crate::api::Api;
use crate::checks;
use crate::error::Error;
use crate::model::{field, model};
use sortie_client::endpoints;

/// How many memberships a read looks through (the API lists one group's, unpaged).
const READ_LIMIT: usize = 10_000;

model! {
    /// Its attributes: the grantee is flat (`subject`, or `claim` and `pattern`), every
    /// setting force-new.
    pub struct MembershipModel ("A Sortie membership: a role on a group.") {
        id: String [Computed] "`<group>/<membership_id>`.",
        membership_id: String [Computed] "The membership's id from the API.",
        group: String [Required, force_new, check(checks::url_group)] "The group the role is granted on (and inherited below); `\"\"` is the root group.",
        role: String [Required, force_new, check(checks::role)] "`viewer`, `deployer`, `maintainer` or `owner`.",
        subject: String [Optional, force_new] "The one subject (`sub`) granted; set this or `claim` and `pattern`.",
        claim: String [Optional, force_new] "The claim matched by `pattern` (with `pattern`, instead of `subject`).",
        pattern: String [Optional, force_new] "A glob over the claim's value; `*` matches any run of characters, `/` included.",
        issuer: String [Optional, force_new] "Only tokens from this issuer; any issuer when unset.",
        granted_by: String [Computed] "Who granted it.",
    }
}

/// `sortie_membership`.
pub struct MembershipResource;

/// The grantee, as sortie-core's [`Grantee`], of exactly one form: `subject`, or `claim`
/// with `pattern`.
fn grantee(m: &MembershipModel) -> Result<Grantee, Error> {
    let issuer = m.issuer.clone();
    let problem = match (&m.subject, &m.claim, &m.pattern) {
        (Some(subject), None, None) => {
            return Ok(Grantee::Subject {
                subject: subject.clone(),
                issuer,
            })
        }
        (None, Some(claim), Some(pattern)) => {
            return Ok(Grantee::ClaimPattern {
                claim: claim.clone(),
                pattern: pattern.clone(),
                issuer,
            })
        }
        (Some(_), _, _) => (
            "subject",
            "set `subject` or `claim` and `pattern`, not both",
        ),
        (None, Some(_), None) => ("pattern", "`claim` needs `pattern`"),
        (None, None, Some(_)) => ("claim", "`pattern` needs `claim`"),
        (None, None, None) => (
            "subject",
            "a membership needs `subject`, or `claim` and `pattern`",
        ),
    };
    Err(Error::Invalid {
        attribute: problem.0.into(),
        problem: problem.1.into(),
    })
}

fn state_of(view: &Value) -> MembershipModel {
    let g = &view["grantee"];
    let (group, id) = (
        field::<String>(&view["group"]),
        field::<String>(&view["id"]),
    );
    MembershipModel {
        id: Some(format!("{}/{}", text(&group), text(&id))),
        membership_id: id,
        group,
        role: field(&view["role"]),
        subject: field(&g["subject"]),
        claim: field(&g["claim"]),
        pattern: field(&g["pattern"]),
        issuer: field(&g["issuer"]),
        granted_by: field(&view["granted_by"]),
    }
}

fn group(state: &MembershipModel) -> &str {
    sortie_client::group(text(&state.group))
}

#[tonic::async_trait]
impl Resource for MembershipResource {
    type Model = MembershipModel;

    fn type_name(&self) -> &'static str {
        "sortie_membership"
    }

    /// Exactly one grantee form, which sortie-core's checks pass (the glob, no blank or
    /// control characters, the lengths).
    fn validate(&self, config: &MembershipModel) -> Result<(), Error> {
        let mut problems = Problems::default();
        grantee(config)?.check("", &mut problems);
        match problems.0.into_iter().next() {
            Some(p) => Err(Error::Invalid {
                attribute: p.path,
                problem: p.problem,
            }),
            None => Ok(()),
        }
    }

    /// Grants it.
    async fn create(&self, api: &Api, planned: &MembershipModel) -> Result<MembershipModel, Error> {
        let b = json!({ "role": planned.role, "grantee": grantee(planned)? });
        let a = api
            .send(&endpoints::grant_membership(group(planned)), Some(&b), None)
            .await?;
        Ok(state_of(&a.body))
    }

    /// Reads it from its group's list; gone is a 404 (so Terraform plans a re-creation).
    async fn read(&self, api: &Api, state: &MembershipModel) -> Result<MembershipModel, Error> {
        let id = text(&state.membership_id);
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
    async fn delete(&self, api: &Api, state: &MembershipModel) -> Result<(), Error> {
        let p = endpoints::revoke_membership(group(state), text(&state.membership_id));
        api.send(&p, None, None).await?;
        Ok(())
    }

    /// An import id `<group>/<membership_id>` (the root group's is `/<membership_id>`).
    fn import(&self, id: &str) -> Result<MembershipModel, Error> {
        let (group, membership_id) = split_id(id, "<group>/<membership_id>", false)?;
        Ok(MembershipModel {
            id: Some(id.into()),
            group: Some(group.into()),
            membership_id: Some(membership_id.into()),
            ..Default::default()
        })
    }

    /// `grantee.subject` → `subject`, `role` → `role`.
    fn attribute_of(&self, api_path: &str) -> Option<String> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    fn model(v: Value) -> MembershipModel {
        MembershipModel::from_json(&v).unwrap()
    }

    #[test]
    fn exactly_one_grantee_form_is_accepted() {
        let ok = [
            json!({"subject": "alice"}),
            json!({"claim": "sub", "pattern": "repo:*"}),
        ];
        for c in ok {
            assert!(
                MembershipResource.validate(&model(c.clone())).is_ok(),
                "{c}"
            );
        }
        for (c, attribute) in [
            (json!({}), "subject"),
            (
                json!({"subject": "a", "claim": "sub", "pattern": "x"}),
                "subject",
            ),
            (json!({"claim": "sub"}), "pattern"),
            (json!({"pattern": "x"}), "claim"),
            (json!({"claim": "sub", "pattern": "repo:[acme"}), "pattern"),
            (json!({"subject": " "}), "subject"),
        ] {
            match MembershipResource.validate(&model(c.clone())) {
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
                "grantee": grantee(&model(planned.clone())).unwrap(), "granted_by": "root",
            });
            let s = state_of(&view).to_json();
            for k in ["group", "role", "subject", "claim", "pattern", "issuer"] {
                assert_eq!(s[k], planned[k], "{k}");
            }
            assert_eq!(s["id"], "acme/m1");
            let imported = MembershipResource.import("acme/m1").unwrap();
            assert_eq!(imported.membership_id.as_deref(), Some("m1"));
        }
    }

    #[test]
    fn api_paths_name_attributes() {
        let r = MembershipResource;
        assert_eq!(
            r.attribute_of("grantee.pattern").as_deref(),
            Some("pattern")
        );
        assert_eq!(r.attribute_of("grantee").as_deref(), Some("subject"));
        assert_eq!(r.attribute_of("role").as_deref(), Some("role"));
    }
}
