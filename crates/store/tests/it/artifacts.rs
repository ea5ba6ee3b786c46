//! The `Artifacts` contract (`contract::artifacts`) on the in-memory bucket and on S3 on
//! moto, through the real SDK: a reader with `s3:ListBucket`, one without (an access key
//! id starting with `NOLISTBUCKET`, which the S3 double treats as a role without it:
//! scripts/moto_s3_strict.py), and a bucket whose listing pages are short
//! (`sortie-test/list-page-cap`). Plus the double itself: it answers as AWS documents
//! where stock moto is lenient (these tests fail on stock moto).

use std::sync::Arc;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::config::Credentials;
use sortie_store::{Artifacts, S3Artifacts};
use sortie_testkit::fakes::MemoryArtifacts;

use crate::contract::artifacts::{artifacts_suite, Subject};

/// The access key id the S3 double treats as a role without `s3:ListBucket`
/// (`NO_LIST_BUCKET_KEY_PREFIX` in scripts/moto_s3_strict.py, and docs/TESTING.md).
const NO_LIST_BUCKET_KEY: &str = "NOLISTBUCKET-sortie-tests";

/// The bucket tag that caps the S3 double's listing pages (scripts/moto_s3_strict.py).
const LIST_PAGE_CAP_TAG: &str = "sortie-test/list-page-cap";

/// An S3 client of moto signing with `access_key`.
async fn s3_as(access_key: &str) -> aws_sdk_s3::Client {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(sortie_testkit::endpoint())
        .credentials_provider(Credentials::new(
            access_key,
            sortie_testkit::TEST_CREDENTIAL,
            None,
            None,
            "sortie-store-tests",
        ))
        .region(Region::new(sortie_testkit::REGION))
        .load()
        .await;
    sortie_testkit::s3_client(&config)
}

/// A new bucket, made with the tests' usual key, tagged with `tags`; its name.
async fn bucket(tags: &[(&str, &str)]) -> String {
    let s3 = s3_as(sortie_testkit::TEST_CREDENTIAL).await;
    let name = sortie_testkit::unique("artifacts");
    s3.create_bucket().bucket(&name).send().await.unwrap();
    if !tags.is_empty() {
        let mut set = aws_sdk_s3::types::Tagging::builder();
        for (k, v) in tags {
            set = set.tag_set(
                aws_sdk_s3::types::Tag::builder()
                    .key(*k)
                    .value(*v)
                    .build()
                    .unwrap(),
            );
        }
        s3.put_bucket_tagging()
            .bucket(&name)
            .tagging(set.build().unwrap())
            .send()
            .await
            .unwrap();
    }
    name
}

/// A fresh bucket on moto read by a role with (or without) `s3:ListBucket`, its listing
/// pages capped at `page_cap` keys when given.
async fn s3_subject(can_list: bool, page_cap: Option<usize>) -> Subject {
    let cap = page_cap.map(|n| n.to_string());
    let tags: Vec<(&str, &str)> = cap
        .iter()
        .map(|c| (LIST_PAGE_CAP_TAG, c.as_str()))
        .collect();
    let name = bucket(&tags).await;
    let key = if can_list {
        sortie_testkit::TEST_CREDENTIAL
    } else {
        NO_LIST_BUCKET_KEY
    };
    Subject {
        artifacts: Arc::new(S3Artifacts::new(s3_as(key).await, name)),
        can_list,
    }
}

mod memory {
    use super::*;

    artifacts_suite!(Subject {
        artifacts: Arc::new(MemoryArtifacts::default()) as Arc<dyn Artifacts>,
        can_list: true,
    });
}

mod s3_with_list_bucket {
    use super::*;

    artifacts_suite!({
        sortie_testkit::require_aws!();
        s3_subject(true, None).await
    });
}

mod s3_without_list_bucket {
    use super::*;

    artifacts_suite!({
        sortie_testkit::require_aws!();
        s3_subject(false, None).await
    });
}

mod s3_short_pages {
    use super::*;

    artifacts_suite!({
        sortie_testkit::require_aws!();
        s3_subject(true, Some(3)).await
    });
}

/// The S3 double answers a missing key as AWS does: 404 NoSuchKey to a caller with
/// `s3:ListBucket`, 403 AccessDenied to one without (GetObject, HeadObject, and a
/// presigned GET), and refuses such a caller a listing; an existing key reads for both.
/// Stock moto answers 404 to everyone.
#[tokio::test]
async fn the_s3_double_answers_403_for_a_missing_key_to_a_caller_without_list_bucket() {
    sortie_testkit::require_aws!();
    let name = bucket(&[]).await;
    let (lister, reader) = (
        s3_as(sortie_testkit::TEST_CREDENTIAL).await,
        s3_as(NO_LIST_BUCKET_KEY).await,
    );
    lister
        .put_object()
        .bucket(&name)
        .key("artifacts/j/outputs.json")
        .body(b"{}".to_vec().into())
        .send()
        .await
        .unwrap();
    for (client, status) in [(&lister, 404), (&reader, 403)] {
        let get = client
            .get_object()
            .bucket(&name)
            .key("artifacts/j/plan.json")
            .send()
            .await
            .expect_err("a missing key");
        let get = get.into_service_error();
        let raw = get.meta().clone();
        let head = client
            .head_object()
            .bucket(&name)
            .key("artifacts/j/plan.json")
            .send()
            .await
            .expect_err("a missing key");
        let head_status = head.raw_response().map(|r| r.status().as_u16());
        let url = client
            .get_object()
            .bucket(&name)
            .key("artifacts/j/plan.json")
            .presigned(
                aws_sdk_s3::presigning::PresigningConfig::expires_in(
                    std::time::Duration::from_secs(60),
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let (presigned, _) = sortie_testkit::http::call(
            &sortie_testkit::endpoint(),
            "GET",
            url.uri().strip_prefix(&sortie_testkit::endpoint()).unwrap(),
            &[],
            None,
        );
        assert_eq!(
            (raw.code(), head_status, presigned),
            (
                Some(if status == 404 {
                    "NoSuchKey"
                } else {
                    "AccessDenied"
                }),
                Some(status),
                status
            ),
            "GetObject, HeadObject and a presigned GET of a missing key"
        );
        let existing = client
            .get_object()
            .bucket(&name)
            .key("artifacts/j/outputs.json")
            .send()
            .await
            .unwrap();
        assert_eq!(
            existing.body.collect().await.unwrap().into_bytes().as_ref(),
            b"{}"
        );
    }
    let listing = reader
        .list_objects_v2()
        .bucket(&name)
        .send()
        .await
        .expect_err("no listing without s3:ListBucket");
    assert_eq!(
        listing.raw_response().map(|r| r.status().as_u16()),
        Some(403)
    );
}

/// On a bucket tagged `sortie-test/list-page-cap`, ListObjectsV2 answers pages of at most
/// that many keys, saying `IsTruncated` while more follow, as S3 may (stock moto fills a
/// page to MaxKeys); without the tag, pages are full.
#[tokio::test]
async fn the_s3_double_answers_short_listing_pages_on_a_capped_bucket() {
    sortie_testkit::require_aws!();
    let s3 = s3_as(sortie_testkit::TEST_CREDENTIAL).await;
    for (cap, want) in [(Some("4"), 4), (None, 10)] {
        let tags: Vec<(&str, &str)> = cap.iter().map(|c| (LIST_PAGE_CAP_TAG, *c)).collect();
        let name = bucket(&tags).await;
        for i in 0..10 {
            s3.put_object()
                .bucket(&name)
                .key(format!("logs/j/{i:012}.log"))
                .body(b"x".to_vec().into())
                .send()
                .await
                .unwrap();
        }
        let page = s3
            .list_objects_v2()
            .bucket(&name)
            .prefix("logs/j/")
            .max_keys(1000)
            .send()
            .await
            .unwrap();
        assert_eq!(page.contents().len(), want, "cap {cap:?}");
        assert_eq!(page.is_truncated, Some(want < 10), "cap {cap:?}");
        assert_eq!(page.max_keys, Some(1000), "MaxKeys is what was asked");
    }
}
