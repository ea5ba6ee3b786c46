//! The secrets of sensitive variables against Secrets Manager on moto: created tagged,
//! read back, deleted at once (a second delete is no error), and nothing is readable after.

use sortie_launch::{AwsJobSecrets, JobSecrets};

#[tokio::test]
async fn a_job_secret_is_created_tagged_read_and_deleted_without_recovery() {
    sortie_testkit::require_aws!();
    let config = sortie_testkit::sdk_config().await;
    let secrets = AwsJobSecrets::new(&config);
    let name = format!("sortie/jobs/{}/db_password", sortie_testkit::unique("job"));
    let arn = secrets
        .create(
            &name,
            "hunter2",
            &[("sortie:job", "j1"), ("sortie:org", "acme")],
        )
        .await
        .unwrap();
    assert!(arn.contains(":secret:sortie/jobs/"), "{arn}");
    assert_eq!(secrets.value(&arn).await.unwrap(), "hunter2");

    let sm = aws_sdk_secretsmanager::Client::new(&config);
    let described = sm.describe_secret().secret_id(&arn).send().await.unwrap();
    let tags: Vec<(String, String)> = described
        .tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        tags.contains(&("sortie:org".into(), "acme".into())),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("sortie:job".into(), "j1".into())),
        "{tags:?}"
    );

    secrets.delete(&arn).await.unwrap();
    let gone = secrets.value(&arn).await.unwrap_err();
    assert!(gone.starts_with("GetSecretValue"), "{gone}");
    assert!(!gone.contains("hunter2"), "{gone}");
    secrets
        .delete(&arn)
        .await
        .expect("deleting a deleted secret is no error");
    // Deleted without recovery: the name is free again at once.
    let again = secrets.create(&name, "x", &[]).await.unwrap();
    secrets.delete(&again).await.unwrap();
}
