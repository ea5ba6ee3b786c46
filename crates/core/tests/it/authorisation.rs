//! `can`: memberships, role inheritance down the group tree, claim patterns.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;
use sortie_core::{can, Action, Grantee, GroupPath, Membership, Principal, Role};

fn g(p: &str) -> GroupPath {
    GroupPath::parse(p).unwrap()
}

fn member(group: &str, role: Role, subject: &str) -> Membership {
    Membership {
        group: g(group),
        role,
        grantee: Grantee::Subject {
            subject: subject.into(),
            issuer: None,
        },
    }
}

fn principal(sub: &str, claims: serde_json::Value) -> Principal {
    let mut map: BTreeMap<String, serde_json::Value> = serde_json::from_value(claims).unwrap();
    map.insert("sub".into(), json!(sub));
    map.insert("iss".into(), json!("https://token.actions.example.com"));
    Principal::from_claims(map)
}

#[test]
fn roles_are_inherited_down_the_tree_and_never_up_or_across() {
    let all = vec![
        member("acme/payments", Role::Deployer, "alice"),
        member("globex", Role::Owner, "bob"),
    ];
    let alice = principal("alice", json!({})).with_memberships(all.clone());
    assert!(can(&alice, Action::Read, &g("acme/payments")));
    assert!(
        can(&alice, Action::Deploy, &g("acme/payments/eu")),
        "inherited by descendants"
    );
    assert!(
        !can(&alice, Action::Manage, &g("acme/payments")),
        "deployer cannot manage"
    );
    assert!(
        !can(&alice, Action::Read, &g("acme")),
        "not inherited upwards"
    );
    assert!(
        !can(&alice, Action::Read, &g("acme/web")),
        "not across to siblings"
    );
    assert!(
        !can(&alice, Action::Read, &g("globex")),
        "not across tenants"
    );
    assert!(!can(&alice, Action::Read, &GroupPath::root()));
    assert!(!alice.is_system_admin());
}

#[test]
fn each_action_needs_its_role() {
    for (role, allowed) in [
        (Role::Viewer, vec![Action::Read]),
        (Role::Deployer, vec![Action::Read, Action::Deploy]),
        (
            Role::Maintainer,
            vec![Action::Read, Action::Deploy, Action::Manage],
        ),
        (
            Role::Owner,
            vec![
                Action::Read,
                Action::Deploy,
                Action::Manage,
                Action::Administer,
            ],
        ),
    ] {
        let p = principal("u", json!({})).with_memberships(vec![member("acme", role, "u")]);
        for action in [
            Action::Read,
            Action::Deploy,
            Action::Manage,
            Action::Administer,
        ] {
            assert_eq!(
                can(&p, action, &g("acme")),
                allowed.contains(&action),
                "{role:?} {action:?}"
            );
        }
    }
}

#[test]
fn a_ci_token_matching_a_claim_pattern_may_deploy() {
    let ci = Membership {
        group: g("acme/payments"),
        role: Role::Deployer,
        grantee: Grantee::ClaimPattern {
            claim: "sub".into(),
            pattern: "repo:acme/infra:ref:refs/heads/*".into(),
            issuer: Some("https://token.actions.example.com".into()),
        },
    };
    let main = principal("repo:acme/infra:ref:refs/heads/main", json!({}))
        .with_memberships(vec![ci.clone()]);
    assert!(can(&main, Action::Deploy, &g("acme/payments/eu")));
    let fork = principal("repo:evil/infra:ref:refs/heads/main", json!({}))
        .with_memberships(vec![ci.clone()]);
    assert!(!can(&fork, Action::Read, &g("acme/payments")));
    let mut other_issuer = principal("repo:acme/infra:ref:refs/heads/main", json!({}));
    other_issuer.issuer = "https://evil.example.com".into();
    let other_issuer = other_issuer.with_memberships(vec![ci]);
    assert!(
        !can(&other_issuer, Action::Read, &g("acme/payments")),
        "issuer is pinned"
    );

    let by_claim = Membership {
        group: g("acme"),
        role: Role::Viewer,
        grantee: Grantee::ClaimPattern {
            claim: "groups".into(),
            pattern: "platform-*".into(),
            issuer: None,
        },
    };
    let p = principal("carol", json!({"groups": "platform-team"}))
        .with_memberships(vec![by_claim.clone()]);
    assert!(can(&p, Action::Read, &g("acme/web")));
    let p = principal("dave", json!({"groups": 7})).with_memberships(vec![by_claim]);
    assert!(
        !can(&p, Action::Read, &g("acme")),
        "a non-string claim never matches"
    );
}

#[test]
fn the_root_owner_is_the_system_administrator_and_dev_identity_is_one() {
    let admin =
        principal("root", json!({})).with_memberships(vec![member("", Role::Owner, "root")]);
    assert!(admin.is_system_admin());
    assert!(can(&admin, Action::Manage, &GroupPath::root()));
    assert!(can(&admin, Action::Administer, &g("globex/x")));
    assert!(Principal::local_dev().is_system_admin());
    let nobody = principal("nobody", json!({}));
    assert!(!can(&nobody, Action::Read, &g("acme")));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn can_holds_exactly_when_a_membership_on_an_ancestor_grants_enough(
        groups in prop::collection::vec((prop::sample::select(vec!["", "acme", "acme/pay", "acme/pay/eu", "globex"]), 0..4usize), 0..4),
        target in prop::sample::select(vec!["", "acme", "acme/pay", "acme/pay/eu", "acme/web", "globex", "globex/x"]),
        action in prop::sample::select(vec![Action::Read, Action::Deploy, Action::Manage, Action::Administer]),
    ) {
        let roles = [Role::Viewer, Role::Deployer, Role::Maintainer, Role::Owner];
        let memberships: Vec<Membership> = groups.iter().map(|(grp, r)| member(grp, roles[*r], "u")).collect();
        let p = principal("u", json!({})).with_memberships(memberships.clone());
        let target = g(target);
        let expected = memberships.iter().any(|m| m.group.contains(&target) && m.role >= action.required_role());
        prop_assert_eq!(can(&p, action, &target), expected);
        // A principal never gains access through someone else's membership.
        let stranger = principal("v", json!({})).with_memberships(memberships);
        prop_assert!(!can(&stranger, action, &target));
    }
}
