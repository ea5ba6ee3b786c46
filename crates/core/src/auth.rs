//! Principals, memberships and the one authorisation check, [`can`].
//!
//! A membership grants a role on a group path, to a subject or to every
//! principal whose claim matches a glob (for example a CI system's OIDC `sub`).
//! A role on a group covers that group and all its descendants. An owner
//! membership on the root group makes a system administrator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::names::GroupPath;

/// Roles, each including the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything in the group.
    Viewer,
    /// Also submits and cancels jobs.
    Deployer,
    /// Also manages runners, rules and environments.
    Maintainer,
    /// Also manages memberships.
    Owner,
}

/// Everything a principal may ask to do, each needing a minimum role on the group concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Read runners, rules, environments, jobs, logs and memberships.
    Read,
    /// Submit or cancel a job.
    Deploy,
    /// Create, change or delete runners, rules and environments; refresh a runner link.
    Manage,
    /// Grant or revoke memberships.
    Administer,
}

impl Action {
    /// The least role that allows this action.
    pub fn required_role(self) -> Role {
        match self {
            Self::Read => Role::Viewer,
            Self::Deploy => Role::Deployer,
            Self::Manage => Role::Maintainer,
            Self::Administer => Role::Owner,
        }
    }
}

/// Who a membership is for. Unknown fields are refused: a misspelled `issuer` must never
/// silently drop an issuer pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Grantee {
    /// One subject (`sub`), optionally only from one issuer.
    Subject {
        /// The exact `sub`.
        subject: String,
        /// The token issuer; any issuer when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
    /// Every principal whose claim matches a glob, such as
    /// `sub` = `repo:acme/infra:ref:refs/heads/*`.
    ClaimPattern {
        /// The claim's name.
        claim: String,
        /// A glob over the claim's string value; `*` matches any run of characters, `/` included.
        pattern: String,
        /// The token issuer; any issuer when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issuer: Option<String>,
    },
}

/// A role granted on a group path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Membership {
    /// The group the role is granted on (and inherited below).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub group: GroupPath,
    /// The role.
    pub role: Role,
    /// Who gets it.
    pub grantee: Grantee,
}

impl Grantee {
    /// Checks a grantee before it is granted, pushing problems under `path` (such as
    /// `grantee.subject`): no blank subject, claim, pattern or issuer, none with a control
    /// character, and a valid glob.
    pub fn check(&self, path: &str, p: &mut crate::Problems) {
        use crate::problems::{join, refuse_blank_or_control};
        let issuer = match self {
            Grantee::Subject { subject, issuer } => {
                refuse_blank_or_control(p, join(path, "subject"), subject);
                issuer
            }
            Grantee::ClaimPattern {
                claim,
                pattern,
                issuer,
            } => {
                refuse_blank_or_control(p, join(path, "claim"), claim);
                if !refuse_blank_or_control(p, join(path, "pattern"), pattern)
                    && glob::Pattern::new(pattern).is_err()
                {
                    p.push(join(path, "pattern"), "is not a valid glob");
                }
                issuer
            }
        };
        if let Some(issuer) = issuer {
            refuse_blank_or_control(p, join(path, "issuer"), issuer);
        }
        let mut too_long = |field: &str, text: &str, max: usize| {
            if text.len() > max {
                p.push(
                    join(path, field),
                    format!("is {} bytes long; at most {max} are allowed", text.len()),
                );
                true
            } else {
                false
            }
        };
        let long = match self {
            Grantee::Subject { subject, .. } => too_long("subject", subject, GRANTEE_TEXT_MAX),
            Grantee::ClaimPattern { claim, pattern, .. } => {
                too_long("claim", claim, GRANTEE_CLAIM_MAX)
                    | too_long("pattern", pattern, GRANTEE_TEXT_MAX)
            }
        };
        let long_issuer = issuer
            .as_deref()
            .is_some_and(|i| too_long("issuer", i, GRANTEE_ISSUER_MAX));
        // The subject's index key (`MEMBER#<issuer>#<subject>`, escaped) is a partition key.
        if let (Grantee::Subject { subject, issuer }, false, false) = (self, long, long_issuer) {
            let key = member_index_key(issuer.as_deref(), subject);
            if key.len() > crate::limits::DYNAMODB_PARTITION_KEY_MAX {
                let field = if escape_key_part(subject).len()
                    >= escape_key_part(issuer.as_deref().unwrap_or_default()).len()
                {
                    "subject"
                } else {
                    "issuer"
                };
                p.push(
                    join(path, field),
                    format!(
                        "makes the subject's index key {} bytes long (`#` and `%` count three \
                         bytes each); at most {} are allowed",
                        key.len(),
                        crate::limits::DYNAMODB_PARTITION_KEY_MAX
                    ),
                );
            }
        }
    }
}

/// Longest grantee `subject` or claim `pattern`, in bytes: a membership item holds it (and
/// a subject's index key, [`member_index_key`], is checked against DynamoDB's partition key
/// limit besides).
pub const GRANTEE_TEXT_MAX: usize = 1024;

/// Longest grantee `claim` name, in bytes.
pub const GRANTEE_CLAIM_MAX: usize = 256;

/// Longest grantee `issuer`, in bytes (as an OIDC issuer URL, `urls::issuer_problem`).
pub const GRANTEE_ISSUER_MAX: usize = 512;

/// `%` and `#` escaped, so that `<issuer>#<subject>` names one pair only.
fn escape_key_part(text: &str) -> String {
    text.replace('%', "%25").replace('#', "%23")
}

/// The partition key of a subject's membership index (`MEMBER#<issuer>#<subject>`, each
/// part with `%` and `#` escaped): for one issuer, or (`None`) for any issuer. The store
/// writes and reads it; [`Grantee::check`] refuses a grantee whose key would pass
/// [`crate::limits::DYNAMODB_PARTITION_KEY_MAX`].
pub fn member_index_key(issuer: Option<&str>, subject: &str) -> String {
    format!(
        "MEMBER#{}#{}",
        escape_key_part(issuer.unwrap_or_default()),
        escape_key_part(subject)
    )
}

impl Membership {
    /// True when this membership applies to `principal`.
    pub fn applies_to(&self, principal: &Principal) -> bool {
        let issuer_ok =
            |issuer: &Option<String>| issuer.as_ref().is_none_or(|i| *i == principal.issuer);
        match &self.grantee {
            Grantee::Subject { subject, issuer } => {
                issuer_ok(issuer) && *subject == principal.subject
            }
            Grantee::ClaimPattern {
                claim,
                pattern,
                issuer,
            } => {
                issuer_ok(issuer)
                    && principal
                        .claim_values(claim)
                        .iter()
                        .any(|value| claim_matches(pattern, value))
            }
        }
    }
}

/// True when a claim pattern matches a claim value.
pub fn claim_matches(pattern: &str, value: &str) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches_with(value, options))
}

/// The values of one claim, as a list, whichever path the token came by: one meaning for a
/// claim (issue 25, item 7).
///
/// API Gateway's HTTP API JWT authorizer hands every claim to the function as a string, and
/// an array claim as one bracketed, space-separated string (`["admins", "devs"]` arrives as
/// `"[admins devs]"`), while a token the API verifies itself (an agent's OIDC token) keeps
/// the JSON array. Both read here as the same list:
/// - a string in brackets is the list of its space-separated elements (`"[]"` is empty);
/// - any other string, a number or a boolean is a list of its one text (`42` is `"42"`,
///   as API Gateway writes it);
/// - an array is the list of its scalar elements, each read as text;
/// - `null` and an object have no values.
pub fn claim_values(value: &Value) -> Vec<String> {
    fn scalar(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
    match value {
        Value::String(s) => match s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            Some(inner) => inner.split_whitespace().map(str::to_string).collect(),
            None => vec![s.clone()],
        },
        Value::Array(items) => items.iter().filter_map(scalar).collect(),
        other => scalar(other).into_iter().collect(),
    }
}

/// True when a claim pattern matches any of a claim's values ([`claim_values`]): how a
/// claim-pattern membership and an agent pool's OIDC trust both judge a claim.
pub fn claim_value_matches(pattern: &str, value: &Value) -> bool {
    claim_values(value)
        .iter()
        .any(|v| claim_matches(pattern, v))
}

/// The caller: a verified token's issuer, subject and claims, with the memberships that apply to it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Principal {
    /// The token issuer (`iss`).
    pub issuer: String,
    /// The subject (`sub`).
    pub subject: String,
    /// Every claim of the token.
    #[serde(default)]
    pub claims: BTreeMap<String, Value>,
    /// The memberships that apply to this principal.
    #[serde(default)]
    pub memberships: Vec<Membership>,
}

/// The issuer of the local development identity.
pub const LOCAL_DEV_ISSUER: &str = "sortie:local-dev";

impl Principal {
    /// A principal from a verified token's claims (`iss` and `sub` are read from them).
    pub fn from_claims(claims: BTreeMap<String, Value>) -> Self {
        let get = |k: &str| {
            claims
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Self {
            issuer: get("iss"),
            subject: get("sub"),
            claims,
            memberships: Vec::new(),
        }
    }

    /// The local development identity: a system administrator. Only enabled explicitly.
    pub fn local_dev() -> Self {
        Self {
            issuer: LOCAL_DEV_ISSUER.into(),
            subject: "local-dev".into(),
            claims: BTreeMap::new(),
            memberships: vec![Membership {
                group: GroupPath::root(),
                role: Role::Owner,
                grantee: Grantee::Subject {
                    subject: "local-dev".into(),
                    issuer: Some(LOCAL_DEV_ISSUER.into()),
                },
            }],
        }
    }

    /// Keeps, from `all`, the memberships that apply to this principal.
    pub fn with_memberships(mut self, all: impl IntoIterator<Item = Membership>) -> Self {
        let applicable: Vec<Membership> = all.into_iter().filter(|m| m.applies_to(&self)).collect();
        self.memberships.extend(applicable);
        self
    }

    /// A claim's value when it is a string (`sub` and `iss` fall back to the principal's own).
    pub fn claim_str(&self, claim: &str) -> Option<&str> {
        match self.claims.get(claim).and_then(Value::as_str) {
            Some(v) => Some(v),
            None if claim == "sub" => Some(&self.subject),
            None if claim == "iss" => Some(&self.issuer),
            None => None,
        }
    }

    /// A claim's values ([`claim_values`]); `sub` and `iss` fall back to the principal's own.
    pub fn claim_values(&self, claim: &str) -> Vec<String> {
        match self.claims.get(claim) {
            Some(v) => claim_values(v),
            None if claim == "sub" => vec![self.subject.clone()],
            None if claim == "iss" => vec![self.issuer.clone()],
            None => Vec::new(),
        }
    }

    /// The highest role this principal holds on `group`, inherited from ancestors.
    pub fn role_on(&self, group: &GroupPath) -> Option<Role> {
        self.memberships
            .iter()
            .filter(|m| m.group.contains(group))
            .map(|m| m.role)
            .max()
    }

    /// True for a system administrator: an owner of the root group.
    pub fn is_system_admin(&self) -> bool {
        self.role_on(&GroupPath::root()) == Some(Role::Owner)
    }
}

/// May `principal` do `action` on `group`? True when one of its memberships, on `group`
/// or an ancestor, grants at least the role the action needs.
pub fn can(principal: &Principal, action: Action, group: &GroupPath) -> bool {
    principal
        .role_on(group)
        .is_some_and(|r| r >= action.required_role())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn problems(grantee: &Grantee) -> Vec<(String, String)> {
        let mut p = crate::Problems::default();
        grantee.check("grantee", &mut p);
        p.iter()
            .map(|x| (x.path.clone(), x.problem.clone()))
            .collect()
    }

    proptest! {
        /// Any subject and issuer: accepted exactly when the subject's index key fits a
        /// DynamoDB partition key (and each is within its own bound); refused naming a
        /// field otherwise. `#` and `%` escape to three bytes, so the key is measured, not
        /// the text.
        #[test]
        fn a_grant_is_accepted_only_when_its_index_key_fits(
            subject in "[a-z#%é]{1,1100}",
            issuer in prop::option::of("[a-z#%:/.]{1,600}"),
        ) {
            let grantee = Grantee::Subject { subject: subject.clone(), issuer: issuer.clone() };
            let found = problems(&grantee);
            let key = member_index_key(issuer.as_deref(), &subject);
            let fits = key.len() <= crate::limits::DYNAMODB_PARTITION_KEY_MAX
                && subject.len() <= GRANTEE_TEXT_MAX
                && issuer.as_ref().is_none_or(|i| i.len() <= GRANTEE_ISSUER_MAX);
            prop_assert_eq!(found.is_empty(), fits, "{:?} for a key of {} bytes", found, key.len());
            for (path, _) in &found {
                prop_assert!(path == "grantee.subject" || path == "grantee.issuer", "{}", path);
            }
        }
    }

    #[test]
    fn long_claims_and_patterns_are_refused_by_name() {
        let found = problems(&Grantee::ClaimPattern {
            claim: "c".repeat(GRANTEE_CLAIM_MAX + 1),
            pattern: "p".repeat(GRANTEE_TEXT_MAX + 1),
            issuer: None,
        });
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["grantee.claim", "grantee.pattern"]);
    }

    #[test]
    fn a_bracketed_string_and_a_json_array_are_the_same_list() {
        let gateway = claim_values(&json!("[admins devs]"));
        let oidc = claim_values(&json!(["admins", "devs"]));
        assert_eq!(gateway, vec!["admins", "devs"]);
        assert_eq!(gateway, oidc);
        assert!(claim_values(&json!("[]")).is_empty());
        assert!(claim_values(&json!([])).is_empty());
        assert_eq!(claim_values(&json!("repo:a/b")), vec!["repo:a/b"]);
        assert_eq!(claim_values(&json!(42)), claim_values(&json!("42")));
        assert_eq!(
            claim_values(&json!([1, true])),
            claim_values(&json!("[1 true]"))
        );
        assert!(claim_values(&json!({"a": 1})).is_empty());
        assert!(claim_value_matches("dev*", &json!("[admins devs]")));
        assert!(!claim_value_matches(
            "[admins devs]",
            &json!(["admins", "devs"])
        ));
        assert!(!claim_value_matches(
            "[admins devs]",
            &json!("[admins devs]")
        ));
    }
}
