//! Memberships: granted, listed by group and by organisation, and revoked; and the index
//! by subject: the organisations a subject is granted a role in, written with each grant
//! and gone with its revoke.

use std::sync::Arc;

use chrono::Utc;
use sortie_core::{Grantee, GroupPath, Membership, Role};
use sortie_store::{MembershipRecord, Store, StoreError};

fn grant(group: &str, grantee: Grantee) -> MembershipRecord {
    MembershipRecord {
        id: sortie_core::tokens::new_id(),
        membership: Membership {
            group: GroupPath::parse(group).unwrap(),
            role: Role::Viewer,
            grantee,
        },
        granted_by: "root".into(),
        granted_at: Utc::now(),
    }
}

fn subject(subject: &str, issuer: Option<&str>) -> Grantee {
    Grantee::Subject {
        subject: subject.into(),
        issuer: issuer.map(str::to_string),
    }
}

/// Grants in two organisations (and twice in one) list each organisation once; a revoke
/// takes its organisation away only when no other grant keeps it; root grants,
/// claim-pattern grants and other subjects are never listed.
pub async fn a_subjects_organisations_follow_its_grants_and_revokes<S: Store + 'static>(s: Arc<S>) {
    let acme = grant("acme/payments", subject("alice", None));
    let acme_again = grant("acme", subject("alice", None));
    let globex = grant("globex/web", subject("alice", None));
    let root = grant("", subject("alice", None));
    let pattern = grant(
        "initech",
        Grantee::ClaimPattern {
            claim: "sub".into(),
            pattern: "al*".into(),
            issuer: None,
        },
    );
    let bob = grant("umbrella", subject("bob", None));
    for m in [&acme, &acme_again, &globex, &root, &pattern, &bob] {
        s.put_membership(m).await.unwrap();
    }
    assert_eq!(
        s.organisations_of("alice", Some("https://issuer"))
            .await
            .unwrap(),
        vec!["acme".to_string(), "globex".to_string()]
    );
    assert_eq!(
        s.organisations_of("alice", None).await.unwrap(),
        vec!["acme", "globex"]
    );
    assert_eq!(
        s.organisations_of("bob", None).await.unwrap(),
        vec!["umbrella"]
    );
    assert!(s.organisations_of("carol", None).await.unwrap().is_empty());

    s.delete_membership(&globex.membership.group, &globex.id)
        .await
        .unwrap();
    assert_eq!(
        s.organisations_of("alice", None).await.unwrap(),
        vec!["acme"]
    );
    s.delete_membership(&acme.membership.group, &acme.id)
        .await
        .unwrap();
    assert_eq!(
        s.organisations_of("alice", None).await.unwrap(),
        vec!["acme"],
        "the grant on `acme` itself still holds"
    );
    s.delete_membership(&acme_again.membership.group, &acme_again.id)
        .await
        .unwrap();
    assert!(s.organisations_of("alice", None).await.unwrap().is_empty());
    // A second revoke of the same grant is still NotFound, and a duplicate grant refused.
    assert!(s
        .delete_membership(&acme.membership.group, &acme.id)
        .await
        .is_err());
    assert!(s.put_membership(&bob).await.is_err());
    assert_eq!(
        s.organisations_of("bob", None).await.unwrap(),
        vec!["umbrella"]
    );
}

/// A grant bound to one issuer lists its organisation only for that issuer; a grant for any
/// issuer lists for all. Names holding `#` or `%` never collide with others.
pub async fn an_issuer_bound_grant_lists_only_for_its_issuer<S: Store + 'static>(s: Arc<S>) {
    let bound = grant("acme", subject("alice", Some("https://a.example")));
    let any = grant("globex", subject("alice", None));
    let tricky = grant("initech", subject("b#c", Some("https://a.example")));
    for m in [&bound, &any, &tricky] {
        s.put_membership(m).await.unwrap();
    }
    assert_eq!(
        s.organisations_of("alice", Some("https://a.example"))
            .await
            .unwrap(),
        vec!["acme", "globex"]
    );
    assert_eq!(
        s.organisations_of("alice", Some("https://b.example"))
            .await
            .unwrap(),
        vec!["globex"]
    );
    assert_eq!(
        s.organisations_of("alice", None).await.unwrap(),
        vec!["globex"]
    );
    assert_eq!(
        s.organisations_of("b#c", Some("https://a.example"))
            .await
            .unwrap(),
        vec!["initech"]
    );
    // `https://a.example#b` + `c` would collide with `https://a.example` + `b#c` unescaped.
    assert!(s
        .organisations_of("c", Some("https://a.example#b"))
        .await
        .unwrap()
        .is_empty());
    s.delete_membership(&bound.membership.group, &bound.id)
        .await
        .unwrap();
    assert_eq!(
        s.organisations_of("alice", Some("https://a.example"))
            .await
            .unwrap(),
        vec!["globex"]
    );
}

pub async fn memberships_are_granted_listed_scoped_to_org_and_revoked<S: Store + 'static>(
    s: Arc<S>,
) {
    let m = |group: &str, subject: &str| MembershipRecord {
        id: sortie_core::tokens::new_id(),
        membership: Membership {
            group: GroupPath::parse(group).unwrap(),
            role: Role::Deployer,
            grantee: Grantee::Subject {
                subject: subject.into(),
                issuer: None,
            },
        },
        granted_by: "root".into(),
        granted_at: Utc::now(),
    };
    let a = m("acme/payments", "alice");
    s.put_membership(&a).await.unwrap();
    s.put_membership(&m("acme", "bob")).await.unwrap();
    s.put_membership(&m("acme/pay", "carol")).await.unwrap();
    s.put_membership(&m("globex", "mallory")).await.unwrap();
    s.put_membership(&m("", "admin")).await.unwrap();
    assert!(matches!(
        s.put_membership(&a).await,
        Err(StoreError::AlreadyExists {
            kind: "membership",
            ..
        })
    ));
    let listed = s
        .list_memberships(&GroupPath::parse("acme/pay").unwrap())
        .await
        .unwrap();
    assert_eq!(
        listed.len(),
        1,
        "acme/pay is not a prefix match for acme/payments"
    );
    assert_eq!(
        s.list_memberships(&GroupPath::parse("acme/payments").unwrap())
            .await
            .unwrap()[0],
        a
    );
    let for_acme = s.memberships_for(Some("acme")).await.unwrap();
    assert_eq!(
        for_acme.len(),
        4,
        "acme's three plus the root's one, never globex's"
    );
    assert_eq!(
        s.memberships_for(None).await.unwrap().len(),
        1,
        "outside any org, only the root's"
    );
    s.delete_membership(&GroupPath::parse("acme/payments").unwrap(), &a.id)
        .await
        .unwrap();
    assert!(matches!(
        s.delete_membership(&GroupPath::parse("acme/payments").unwrap(), &a.id)
            .await,
        Err(StoreError::NotFound { .. })
    ));
}
