//! The S3 Express One Zone double (scripts/moto_s3_express.py, patch 17) answers as AWS
//! documents, through the real SDK: directory buckets named for their zone, zonal calls
//! only inside a session the SDK makes with CreateSession, presigned URLs that die with
//! their session, read-only sessions, and listings out of key order. Each test fails on
//! stock moto, which has no directory buckets and serves every call signed by IAM.

use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::SessionMode;
use std::time::Duration;

/// The zone id the tests' directory buckets are named for.
const ZONE: &str = "use1-az4";

/// The double's test hook that ends a bucket's sessions now (not an AWS call).
const EXPIRE_PATH: &str = "/_sortie/s3-express/expire-sessions";

/// A path-style S3 client of moto with the tests' IAM credentials.
async fn s3() -> aws_sdk_s3::Client {
    sortie_testkit::s3_client(&sortie_testkit::sdk_config().await)
}

/// A client of the regional (control plane) calls, such as CreateBucket, which AWS signs
/// with IAM credentials. Against AWS the SDK sends them to `s3express-control` so; against a
/// custom endpoint it resolves session auth for them unless told otherwise (its endpoint
/// rules' "Control Plane host override" case).
async fn s3_control() -> aws_sdk_s3::Client {
    let config = sortie_testkit::sdk_config().await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .disable_s3_express_session_auth(true)
            .build(),
    )
}

/// A new directory bucket in [`ZONE`]; its name.
async fn directory_bucket(prefix: &str) -> String {
    let name = format!("{}--{ZONE}--x-s3", sortie_testkit::unique(prefix));
    s3_control()
        .await
        .create_bucket()
        .bucket(&name)
        .create_bucket_configuration(sortie_store::directory_bucket_configuration(ZONE))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateBucket {name}: {e:?}"));
    name
}

/// Writes `body` at `key` of `bucket` through the SDK (in the session it makes).
async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, body: &'static [u8]) {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from_static(body))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {key}: {e:?}"));
}

/// A presigned GET of `key`, valid an hour; the path and query to send to moto.
async fn presigned_get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> String {
    let url = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .presigned(PresigningConfig::expires_in(Duration::from_secs(3600)).unwrap())
        .await
        .unwrap();
    url.uri()
        .strip_prefix(&sortie_testkit::endpoint())
        .unwrap()
        .to_string()
}

/// GET `path` on moto with no signature of its own: (status, body text).
fn get(path: &str) -> (u16, String) {
    let (status, body) =
        sortie_testkit::http::call(&sortie_testkit::endpoint(), "GET", path, &[], None);
    (
        status,
        body.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string()),
    )
}

/// The S3 error code of an SDK failure.
fn code<E: aws_sdk_s3::error::ProvideErrorMetadata>(error: &E) -> String {
    error.code().unwrap_or("(none)").to_string()
}

#[tokio::test]
async fn a_directory_bucket_is_named_for_its_zone_and_made_with_its_configuration() {
    sortie_testkit::require_aws!();
    let s3 = s3_control().await;
    let made = directory_bucket("named").await;
    assert!(made.ends_with("--use1-az4--x-s3"));

    let base = sortie_testkit::unique("refused");
    let cases = [
        // a directory name whose zone is not its Location's
        (
            format!("{base}-a--{ZONE}--x-s3"),
            Some(sortie_store::directory_bucket_configuration("use1-az6")),
            "InvalidBucketName",
        ),
        // a directory name made as a general purpose bucket
        (format!("{base}-b--{ZONE}--x-s3"), None, "InvalidArgument"),
    ];
    for (name, config, expected) in cases {
        let mut call = s3.create_bucket().bucket(&name);
        if let Some(config) = config {
            call = call.create_bucket_configuration(config);
        }
        let refused = call
            .send()
            .await
            .expect_err("a bucket AWS refuses")
            .into_service_error();
        assert_eq!(code(&refused), expected, "{name}");
    }
    // a general purpose bucket that claims the directory suffix, sent as AWS would get it
    let name = format!("{base}-c--x-s3");
    let (status, body) = sortie_testkit::http::call(
        &sortie_testkit::endpoint(),
        "PUT",
        &format!("/{name}"),
        &[(
            "Authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20261130/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0",
        )],
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("InvalidBucketName"), "{body}");
}

#[tokio::test]
async fn zonal_calls_need_a_session_the_sdk_makes_and_a_presigned_url_carries_it() {
    sortie_testkit::require_aws!();
    let s3 = s3().await;
    let bucket = directory_bucket("zonal").await;
    put(&s3, &bucket, "logs/j/000000000001", b"one\n").await;
    let read = s3
        .get_object()
        .bucket(&bucket)
        .key("logs/j/000000000001")
        .send()
        .await
        .unwrap();
    assert_eq!(
        &read.body.collect().await.unwrap().into_bytes()[..],
        b"one\n"
    );

    let presigned = presigned_get(&s3, &bucket, "logs/j/000000000001").await;
    assert!(presigned.contains("X-Amz-S3session-Token="), "{presigned}");
    assert!(
        presigned.contains("%2Fs3express%2Faws4_request"),
        "{presigned}"
    );
    assert_eq!(get(&presigned), (200, "one\n".to_string()));

    // the same URL without its session token, and a call with no signature at all
    let without: String = presigned
        .split('&')
        .filter(|p| !p.starts_with("X-Amz-S3session-Token="))
        .collect::<Vec<_>>()
        .join("&");
    let (status, body) = get(&without);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("AccessDenied"), "{body}");
    let (status, body) = get(&format!("/{bucket}/logs/j/000000000001"));
    assert_eq!(status, 403, "{body}");
}

#[tokio::test]
async fn a_presigned_url_dies_with_the_session_that_signed_it() {
    sortie_testkit::require_aws!();
    let s3 = s3().await;
    let bucket = directory_bucket("expiry").await;
    put(&s3, &bucket, "logs/j/000000000001", b"one\n").await;
    let presigned = presigned_get(&s3, &bucket, "logs/j/000000000001").await;
    assert_eq!(get(&presigned).0, 200);

    let (status, ended) = sortie_testkit::http::call(
        &sortie_testkit::endpoint(),
        "POST",
        &format!("{EXPIRE_PATH}?bucket={bucket}"),
        &[],
        None,
    );
    assert_eq!(status, 200);
    assert!(ended["ended"].as_u64().unwrap() >= 1, "{ended}");
    // the URL asked for an hour; its session lived 5 minutes
    let (status, body) = get(&presigned);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("ExpiredToken"), "{body}");
}

#[tokio::test]
async fn a_read_only_session_reads_and_a_session_serves_its_own_bucket_only() {
    sortie_testkit::require_aws!();
    let s3 = s3().await;
    let bucket = directory_bucket("readonly").await;
    let other = directory_bucket("other").await;
    put(&s3, &bucket, "logs/j/000000000001", b"one\n").await;
    let session = s3
        .create_session()
        .bucket(&bucket)
        .session_mode(SessionMode::ReadOnly)
        .send()
        .await
        .unwrap()
        .credentials
        .expect("a session's credentials");
    let read_only = Credentials::new(
        session.access_key_id(),
        session.secret_access_key(),
        Some(session.session_token().to_string()),
        None,
        "read-only-session",
    );
    let config = sortie_testkit::sdk_config().await;
    let as_session = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .express_credentials_provider(read_only)
            .build(),
    );
    let read = as_session
        .get_object()
        .bucket(&bucket)
        .key("logs/j/000000000001")
        .send()
        .await
        .unwrap();
    assert_eq!(
        &read.body.collect().await.unwrap().into_bytes()[..],
        b"one\n"
    );
    let write = as_session
        .put_object()
        .bucket(&bucket)
        .key("logs/j/000000000002")
        .body(ByteStream::from_static(b"two\n"))
        .send()
        .await
        .expect_err("a read-only session writes nothing")
        .into_service_error();
    assert_eq!(code(&write), "AccessDenied");
    let elsewhere = as_session
        .get_object()
        .bucket(&other)
        .key("logs/j/000000000001")
        .send()
        .await
        .expect_err("a session is scoped to its bucket")
        .into_service_error();
    assert_eq!(code(&elsewhere), "AccessDenied");
}

#[tokio::test]
async fn a_directory_listing_is_out_of_key_order_and_takes_only_slash_prefixes() {
    sortie_testkit::require_aws!();
    let s3 = s3().await;
    let bucket = directory_bucket("listing").await;
    let keys: Vec<String> = (1..=5).map(|n| format!("logs/j/{n:012}")).collect();
    for key in &keys {
        put(&s3, &bucket, key, b"x").await;
    }
    let listed: Vec<String> = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("logs/j/")
        .send()
        .await
        .unwrap()
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, keys, "every key is listed");
    assert_ne!(listed, keys, "but not in key order, as AWS documents");

    for refused in [
        s3.list_objects_v2()
            .bucket(&bucket)
            .prefix("logs/j")
            .send()
            .await,
        s3.list_objects_v2()
            .bucket(&bucket)
            .prefix("logs/j/")
            .start_after("logs/j/000000000002")
            .send()
            .await,
    ] {
        let error = refused
            .expect_err("refused on a directory bucket")
            .into_service_error();
        assert_eq!(code(&error), "InvalidArgument");
    }
}

/// The live log's store: `S3Artifacts` over a directory bucket makes it, writes and reads
/// through the SDK's sessions, and presigns in a session of its own whose end each URL's
/// `expires_at` says (at least four minutes, at most five).
#[tokio::test]
async fn artifacts_over_a_directory_bucket_presign_in_a_session_and_say_when_the_url_ends() {
    use sortie_store::Artifacts;
    sortie_testkit::require_aws!();
    let name = format!("{}--{ZONE}--x-s3", sortie_testkit::unique("live"));
    let live = sortie_store::S3Artifacts::new(s3().await, name.clone());
    live.ensure_bucket().await.unwrap();
    live.ensure_bucket()
        .await
        .expect("a second ensure finds it");
    live.write("logs/j/following", b"1".to_vec(), "text/plain")
        .await
        .unwrap();
    assert_eq!(live.get("logs/j/following").await.unwrap(), b"1");

    let put = live
        .presign_put("logs/j/live", "text/plain", Duration::from_secs(600))
        .await
        .unwrap();
    let left = (put.expires_at - chrono::Utc::now()).num_seconds();
    assert!(
        (230..=300).contains(&left),
        "the PUT works {left} s, not 600"
    );
    assert!(put.url.contains("X-Amz-S3session-Token="), "{}", put.url);
    let path = put.url.strip_prefix(&sortie_testkit::endpoint()).unwrap();
    let headers: Vec<(&str, &str)> = put
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (status, body) = sortie_testkit::http::call(
        &sortie_testkit::endpoint(),
        "PUT",
        path,
        &headers,
        Some("sortie-live 1 0 0\nhello\n"),
    );
    assert_eq!(status, 200, "{body}");
    let (url, until) = live
        .presign_get_until("logs/j/live", Duration::from_secs(600))
        .await
        .unwrap();
    assert!((until - chrono::Utc::now()).num_seconds() <= 300);
    let path = url
        .strip_prefix(&sortie_testkit::endpoint())
        .unwrap()
        .to_string();
    assert_eq!(get(&path), (200, "sortie-live 1 0 0\nhello\n".to_string()));
    assert!(
        live.live().is_none(),
        "a live store has no live store of its own"
    );
}
