//! State history against S3 on moto: the versions of one state key in a versioned bucket,
//! newest first and paged, without the lock file beside it, each readable by version and
//! through a presigned URL; read with the control plane's own credentials (a `local`
//! runner) and through the launcher role's session (an `ecs-fargate` runner).

use sortie_core::{EnvPath, RunnerSpec};
use sortie_launch::state_history::{S3StateHistory, StateAt, StateHistory, UrlLife};

async fn versioned_bucket(s3: &aws_sdk_s3::Client) -> String {
    let bucket = sortie_testkit::unique("state");
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    s3.put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    bucket
}

fn spec(runner: &str, bucket: &str, endpoint: &str) -> RunnerSpec {
    RunnerSpec::parse(&format!(
        "runner_configuration:\n{runner}state_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: pre/\n  region: us-east-1\n  endpoint: {endpoint}\n"
    ))
    .unwrap()
}

async fn three_versions(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<String> {
    let mut ids = vec![];
    for serial in 1..=3 {
        let body = format!(r#"{{"version":4,"serial":{serial},"lineage":"l"}}"#);
        let put = s3
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(body.into_bytes().into())
            .send()
            .await
            .unwrap();
        ids.push(put.version_id().unwrap().to_string());
        // The lock file shares the prefix and is never a state version.
        s3.put_object()
            .bucket(bucket)
            .key(format!("{key}.tflock"))
            .body(b"{}".to_vec().into())
            .send()
            .await
            .unwrap();
    }
    ids.reverse();
    ids
}

/// Lists, pages and reads `runner`'s state versions; a presigned URL asked for an hour
/// lives at most `longest_url` seconds.
async fn lists_pages_and_reads(runner: &str, longest_url: u64) {
    let aws = sortie_testkit::require_aws!();
    let config = aws.sdk_config().await;
    let s3 = sortie_testkit::s3_client(&config);
    let bucket = versioned_bucket(&s3).await;
    let env = EnvPath::parse("acme/app/b").unwrap();
    let key = "pre/acme/app/b/terraform.tfstate";
    let newest_first = three_versions(&s3, &bucket, key).await;
    let spec = spec(runner, &bucket, &aws.endpoint);
    let at = StateAt {
        environment: &env,
        runner_id: "acme/r",
        runner: &spec,
    };
    let history = S3StateHistory::new(config.clone());

    let all = history.list(at, None, 10).await.unwrap();
    let ids: Vec<_> = all.versions.iter().map(|v| v.version_id.clone()).collect();
    assert_eq!(ids, newest_first);
    assert!(all.versions[0].is_latest && !all.versions[1].is_latest);
    assert!(all.versions.iter().all(|v| v.size > 0));
    assert_eq!(all.next, None);

    let first = history.list(at, None, 2).await.unwrap();
    assert_eq!(first.versions.len(), 2);
    let next = first.next.clone().expect("a third version");
    let second = history.list(at, Some(&next), 2).await.unwrap();
    let ids: Vec<_> = second
        .versions
        .iter()
        .map(|v| v.version_id.clone())
        .collect();
    assert_eq!(ids, [newest_first[2].clone()]);
    assert_eq!(second.next, None);

    let oldest = history.get(at, &newest_first[2]).await.unwrap().unwrap();
    assert!(String::from_utf8(oldest).unwrap().contains(r#""serial":1"#));
    assert_eq!(history.get(at, "no-such-version").await.unwrap(), None);

    let life = UrlLife {
        wanted: std::time::Duration::from_secs(3600),
        needed: std::time::Duration::from_secs(60),
    };
    let url = history
        .presign_get(at, &newest_first[2], life)
        .await
        .unwrap();
    assert!(url.contains("versionId="), "{url}");
    let (_, rest) = url.split_once("X-Amz-Expires=").expect("a presigned URL");
    let expires: u64 = rest.split('&').next().unwrap().parse().unwrap();
    assert!(
        expires <= longest_url && expires + 5 >= longest_url,
        "X-Amz-Expires={expires}"
    );
}

#[tokio::test]
async fn a_local_runner_s_state_versions_are_listed_paged_and_read() {
    // The control plane's own credentials here do not expire: the hour asked.
    lists_pages_and_reads("  type: local\n", 3600).await;
}

#[tokio::test]
async fn a_fargate_runner_s_state_is_read_through_its_launcher_session() {
    lists_pages_and_reads(
        "  type: ecs-fargate\n  role_arn: arn:aws:iam::123456789012:role/sortie-launcher\n  external_id: sortie-ext-7f3a\n  region: us-east-1\n  cluster: runners\n  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1\n  container_name: runner\n  subnets: [subnet-0123456789abcdef0]\n  security_groups: [sg-0123456789abcdef0]\n",
        // A launcher session lasts 15 minutes: so does the URL it signs.
        900,
    )
    .await;
}
