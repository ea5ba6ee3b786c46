//! Contract case for the VCS records: connections, deliveries, bindings and pull requests.

use std::sync::Arc;

use chrono::{Duration, Timelike, Utc};
use sortie_core::EnvPath;
use sortie_store::{Store, StoreError};

pub async fn connections_deliveries_bindings_and_pull_requests_round_trip<S: Store + 'static>(
    s: Arc<S>,
) {
    use sortie_core::vcs::connection::VcsConnection;
    use sortie_core::vcs::pull::{PullEnvironment, PullRequestRecord};
    use sortie_core::vcs::VcsProvider::Github;

    // A connection: absent, written, replaced, deleted.
    assert!(matches!(
        s.get_connection("acme", Github).await,
        Err(StoreError::NotFound {
            kind: "connection",
            ..
        })
    ));
    let mut c = VcsConnection {
        org: "acme".into(),
        provider: Github,
        app_id: 7,
        api_url: "https://api.github.com".into(),
        credential_secret: "arn:aws:secretsmanager:us-east-1:1:secret:k".into(),
        webhook_secret: "arn:aws:secretsmanager:us-east-1:1:secret:w".into(),
        created_by: "alice".into(),
        created_at: Utc::now().with_nanosecond(0).unwrap(),
    };
    s.put_connection(&c).await.unwrap();
    c.app_id = 8;
    s.put_connection(&c).await.unwrap();
    assert_eq!(s.get_connection("acme", Github).await.unwrap(), c);
    assert!(s.get_connection("other", Github).await.is_err());
    // The reconcile's list: each connected organisation once.
    let mut beta = c.clone();
    beta.org = "beta".into();
    s.put_connection(&beta).await.unwrap();
    let mut connected = s.connected_organisations(Github).await.unwrap();
    connected.sort();
    assert_eq!(connected, vec!["acme".to_string(), "beta".to_string()]);
    s.delete_connection("beta", Github).await.unwrap();
    s.delete_connection("acme", Github).await.unwrap();
    assert!(s.connected_organisations(Github).await.unwrap().is_empty());
    assert!(matches!(
        s.delete_connection("acme", Github).await,
        Err(StoreError::NotFound { .. })
    ));

    // A delivery is new once, until it expires.
    let later = Utc::now() + Duration::hours(1);
    assert!(s.claim_delivery(Github, "d-1", later).await.unwrap());
    assert!(!s.claim_delivery(Github, "d-1", later).await.unwrap());
    assert!(s
        .claim_delivery(Github, "d-2", Utc::now() - Duration::seconds(1))
        .await
        .unwrap());
    assert!(
        s.claim_delivery(Github, "d-2", later).await.unwrap(),
        "an expired delivery counts as absent"
    );
    s.forget_delivery(Github, "d-1").await.unwrap();
    s.forget_delivery(Github, "d-1").await.unwrap();
    assert!(
        s.claim_delivery(Github, "d-1", later).await.unwrap(),
        "a forgotten delivery is new again"
    );

    // The bindings index: repository names compare without case; idempotent; paged.
    let envs: Vec<EnvPath> = (0..30)
        .map(|i| EnvPath::parse(&format!("acme/web/e{i:02}")).unwrap())
        .collect();
    for e in &envs {
        s.index_binding(Github, "Acme/Infra", e).await.unwrap();
    }
    s.index_binding(Github, "acme/infra", &envs[0])
        .await
        .unwrap();
    s.index_binding(Github, "acme/other", &envs[1])
        .await
        .unwrap();
    let mut bound = s.bound_environments(Github, "ACME/infra").await.unwrap();
    bound.sort();
    assert_eq!(bound, envs);
    s.unindex_binding(Github, "acme/infra", &envs[3])
        .await
        .unwrap();
    s.unindex_binding(Github, "acme/infra", &envs[3])
        .await
        .unwrap();
    assert_eq!(
        s.bound_environments(Github, "acme/infra")
            .await
            .unwrap()
            .len(),
        29
    );
    assert!(s
        .bound_environments(Github, "acme/none")
        .await
        .unwrap()
        .is_empty());

    // An organisation's bound environments: its own only, whatever the repository; an
    // environment unindexed from one repository stays listed while another holds it.
    let other_org = EnvPath::parse("beta/web/prod").unwrap();
    s.index_binding(Github, "beta/infra", &other_org)
        .await
        .unwrap();
    let of_acme = s.bound_environments_of("acme", Github).await.unwrap();
    assert_eq!(of_acme.len(), 29, "{of_acme:?}");
    assert!(of_acme.contains(&envs[1]) && !of_acme.contains(&envs[3]));
    assert_eq!(
        s.bound_environments_of("beta", Github).await.unwrap(),
        vec![other_org.clone()]
    );
    s.unindex_binding(Github, "beta/infra", &other_org)
        .await
        .unwrap();
    assert!(s
        .bound_environments_of("beta", Github)
        .await
        .unwrap()
        .is_empty());

    // What the last reconcile saw open, per organisation, repository (without case) and base.
    let seen = sortie_core::vcs::reconcile::OpenPulls {
        etag: Some("W/\"abc\"".into()),
        numbers: vec![3, 7, 11],
    };
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "main")
            .await
            .unwrap(),
        Default::default()
    );
    s.put_open_pulls("acme", Github, "Acme/Infra", "main", &seen)
        .await
        .unwrap();
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "main")
            .await
            .unwrap(),
        seen
    );
    assert_eq!(
        s.get_open_pulls("acme", Github, "acme/infra", "develop")
            .await
            .unwrap(),
        Default::default()
    );

    // A pull request's record, written on condition of its version.
    assert!(s
        .get_pull_request(Github, "acme/infra", 7)
        .await
        .unwrap()
        .is_none());
    let mut pr = PullRequestRecord {
        provider: Github,
        org: "acme".into(),
        repository: "acme/Infra".into(),
        number: 7,
        head_sha: "a".repeat(40),
        base: "main".into(),
        author: "octocat".into(),
        fork: false,
        open: true,
        merged: false,
        notes: vec![],
        plans_allowed_by: None,
        comment_id: None,
        comment_digest: None,
        environments: Default::default(),
        over_limit: 0,
        updated_at: Utc::now().with_nanosecond(0).unwrap(),
    };
    assert_eq!(s.put_pull_request(&pr, None).await.unwrap(), 1);
    assert!(matches!(
        s.put_pull_request(&pr, None).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    pr.comment_id = Some(99);
    pr.environments.insert(
        "acme/web/e01".into(),
        PullEnvironment {
            sha: "a".repeat(40),
            plan_job: Some("01job".into()),
            ..Default::default()
        },
    );
    assert_eq!(s.put_pull_request(&pr, Some(1)).await.unwrap(), 2);
    assert!(matches!(
        s.put_pull_request(&pr, Some(1)).await,
        Err(StoreError::VersionMismatch {
            expected: 1,
            actual: 2,
            ..
        })
    ));
    let read = s
        .get_pull_request(Github, "ACME/infra", 7)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.item, read.version), (pr, 2));
}
