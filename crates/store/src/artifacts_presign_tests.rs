//! Presigned URLs live no longer than the credentials that sign them (issue 41, item 10).

use std::time::{Duration, SystemTime};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};

use super::{Artifacts, S3Artifacts};

/// Artifacts whose client signs with `credentials` (no network: presigning is local).
fn artifacts(credentials: Credentials) -> S3Artifacts {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(credentials.clone())
        .endpoint_url("http://127.0.0.1:9")
        .force_path_style(true)
        .build();
    S3Artifacts::new(aws_sdk_s3::Client::from_conf(config), "artifacts")
        .with_signing_credentials(Some(SharedCredentialsProvider::new(credentials)))
}

fn expires_param(url: &str) -> u64 {
    let (_, rest) = url.split_once("X-Amz-Expires=").expect("a presigned URL");
    rest.split('&').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_url_signed_with_a_session_lives_no_longer_than_the_session() {
    let expiry = SystemTime::now() + Duration::from_secs(90);
    let session = Credentials::new("ASIAX", "secret", Some("token".into()), Some(expiry), "t");
    let a = artifacts(session);
    let asked = Duration::from_secs(600);
    let put = a
        .presign_put("logs/j/0", "text/plain", asked)
        .await
        .unwrap();
    let put_expires = expires_param(&put.url);
    assert!(
        (80..=90).contains(&put_expires),
        "X-Amz-Expires={put_expires}"
    );
    assert!(
        put.expires_at <= chrono::DateTime::<chrono::Utc>::from(expiry),
        "the grant says {} past the session's {:?}",
        put.expires_at,
        expiry
    );
    let get = a.presign_get("logs/j/follow", asked).await.unwrap();
    let get_expires = expires_param(&get);
    assert!(
        (80..=90).contains(&get_expires),
        "X-Amz-Expires={get_expires}"
    );
    assert!(
        get.contains("X-Amz-Security-Token=token"),
        "signed with the session: {get}"
    );

    // Long-term credentials do not expire: the URL lives as long as asked.
    let a = artifacts(Credentials::new("AKIAX", "secret", None, None, "t"));
    let put = a
        .presign_put("logs/j/0", "text/plain", asked)
        .await
        .unwrap();
    assert_eq!(expires_param(&put.url), 600);

    // Credentials already expired sign nothing: the error says why (and is retryable).
    let gone = SystemTime::now() - Duration::from_secs(1);
    let a = artifacts(Credentials::new(
        "ASIAX",
        "s",
        Some("t".into()),
        Some(gone),
        "t",
    ));
    let e = a.presign_get("logs/j/follow", asked).await.unwrap_err();
    assert!(e.to_string().contains("expire in 0 s"), "{e}");
}
