//! [`FaultProxy`] in front of moto, driven by the real Rust AWS SDK: requests are
//! forwarded and recorded with their operation, and injected faults reach the
//! SDK as service errors with the injected code and message.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use aws_sdk_s3::primitives::ByteStream;
use sortie_testkit::proxy::FaultProxy;
use sortie_testkit::{endpoint, sdk_config, unique};

type RetryConfig = aws_sdk_dynamodb::config::retry::RetryConfig;

async fn dynamodb(proxy: &FaultProxy, retry: RetryConfig) -> aws_sdk_dynamodb::Client {
    let config = sdk_config().await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&config)
        .endpoint_url(proxy.url())
        .retry_config(retry)
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

async fn sqs(proxy: &FaultProxy, retry: RetryConfig) -> aws_sdk_sqs::Client {
    let config = sdk_config().await;
    let conf = aws_sdk_sqs::config::Builder::from(&config)
        .endpoint_url(proxy.url())
        .retry_config(retry)
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

/// Sends raw bytes to the proxy and returns (status, whole response text).
fn raw(proxy: &FaultProxy, request: &[u8]) -> (u16, String) {
    let addr = proxy.url().trim_start_matches("http://").to_string();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(request).unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {out:?}"));
    (status, out)
}

#[tokio::test]
async fn dynamodb_calls_are_forwarded_recorded_and_counted() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let ddb = dynamodb(&proxy, RetryConfig::disabled()).await;
    let table = unique("sortie-proxy");
    ddb.create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("CreateTable through the proxy");
    // ListTables answers at most 100 names a page, and the shared moto holds every
    // test's tables: page until the end.
    let (mut names, mut pages, mut start) = (vec![], 0, None);
    loop {
        let page = ddb
            .list_tables()
            .set_exclusive_start_table_name(start)
            .send()
            .await
            .expect("ListTables");
        pages += 1;
        names.extend(page.table_names().iter().cloned());
        start = page.last_evaluated_table_name;
        if start.is_none() {
            break;
        }
    }
    assert!(names.contains(&table), "{table} not among {names:?}");

    assert_eq!(proxy.count("CreateTable"), 1);
    assert_eq!(proxy.count("ListTables"), pages);
    assert_eq!(proxy.count("DynamoDB_20120810.ListTables"), pages);
    assert_eq!(proxy.count("PutItem"), 0);
    let create = &proxy.requests_for("CreateTable")[0];
    assert_eq!(create.method, "POST");
    assert_eq!(create.service.as_deref(), Some("DynamoDB_20120810"));
    assert_eq!(
        create.target.as_deref(),
        Some("DynamoDB_20120810.CreateTable")
    );
    assert!(!create.injected);
    assert_eq!(create.json().unwrap()["TableName"], table.as_str());
    assert!(create.header("authorization").is_some());

    proxy.clear();
    assert!(proxy.requests().is_empty());
    ddb.delete_table().table_name(&table).send().await.unwrap();
    assert_eq!(proxy.count("DeleteTable"), 1);
}

#[tokio::test]
async fn injected_dynamodb_throttling_is_a_service_error_then_the_next_call_succeeds() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let ddb = dynamodb(&proxy, RetryConfig::disabled()).await;
    proxy.inject(
        "ListTables",
        1,
        400,
        "ThrottlingException",
        "Rate exceeded for table",
    );

    let err = ddb
        .list_tables()
        .send()
        .await
        .expect_err("the injected fault");
    let service = err
        .as_service_error()
        .unwrap_or_else(|| panic!("not a service error: {err:?}"));
    assert_eq!(service.code(), Some("ThrottlingException"));
    assert_eq!(service.message(), Some("Rate exceeded for table"));
    assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(400));
    assert_eq!(proxy.count("ListTables"), 1);
    assert!(proxy.requests_for("ListTables")[0].injected);
    assert_eq!(proxy.pending_faults(), 0);

    ddb.list_tables()
        .send()
        .await
        .expect("the fault was used up: the next call reaches moto");
    assert_eq!(proxy.count("ListTables"), 2);
    assert!(!proxy.requests_for("ListTables")[1].injected);
}

#[tokio::test]
async fn injected_sqs_throttling_is_a_service_error_then_the_next_call_succeeds() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let client = sqs(&proxy, RetryConfig::disabled()).await;
    let name = unique("sortie-proxy");
    let url = client
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("CreateQueue through the proxy")
        .queue_url
        .unwrap();
    let create = &proxy.requests_for("CreateQueue")[0];
    assert_eq!(create.target.as_deref(), Some("AmazonSQS.CreateQueue"));
    assert_eq!(create.json().unwrap()["QueueName"], name.as_str());

    proxy.inject(
        "AmazonSQS.ListQueues",
        1,
        400,
        "ThrottlingException",
        "Too many requests",
    );
    let err = client
        .list_queues()
        .send()
        .await
        .expect_err("the injected fault");
    let service = err
        .as_service_error()
        .unwrap_or_else(|| panic!("not a service error: {err:?}"));
    assert_eq!(
        aws_sdk_sqs::error::ProvideErrorMetadata::code(service),
        Some("ThrottlingException")
    );
    assert_eq!(
        aws_sdk_sqs::error::ProvideErrorMetadata::message(service),
        Some("Too many requests")
    );

    let listed = client
        .list_queues()
        .queue_name_prefix(&name)
        .send()
        .await
        .expect("the next call succeeds");
    assert_eq!(listed.queue_urls(), std::slice::from_ref(&url));
    assert_eq!(proxy.count("ListQueues"), 2);
    client.delete_queue().queue_url(url).send().await.unwrap();
}

#[tokio::test]
async fn the_sdk_retries_injected_throttling_with_its_default_policy() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    // The standard policy makes 3 attempts: two throttles, then success.
    let client = sqs(&proxy, RetryConfig::standard()).await;
    proxy.inject(
        "ListQueues",
        2,
        400,
        "ThrottlingException",
        "Too many requests",
    );
    let started = Instant::now();
    client
        .list_queues()
        .send()
        .await
        .expect("the third attempt reaches moto");
    assert_eq!(proxy.count("ListQueues"), 3, "{:?}", started.elapsed());
    let injected: Vec<bool> = proxy
        .requests_for("ListQueues")
        .iter()
        .map(|r| r.injected)
        .collect();
    assert_eq!(injected, [true, true, false]);
}

#[tokio::test]
async fn s3_rest_calls_are_forwarded_including_head_and_bodies() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let config = sdk_config().await;
    let conf = aws_sdk_s3::config::Builder::from(&config)
        .endpoint_url(proxy.url())
        .force_path_style(true)
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(conf);
    let bucket = unique("sortie-proxy");
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let body = "x".repeat(100_000);
    s3.put_object()
        .bucket(&bucket)
        .key("a/b.txt")
        .body(ByteStream::from(body.clone().into_bytes()))
        .send()
        .await
        .unwrap();
    let head = s3
        .head_object()
        .bucket(&bucket)
        .key("a/b.txt")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(100_000));
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("a/b.txt")
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(got.len(), body.len());

    let requests = proxy.requests();
    assert!(requests.len() >= 4, "{requests:?}");
    assert!(requests.iter().all(|r| r.service.as_deref() == Some("s3")));
    assert!(requests.iter().all(|r| r.operation.is_none()));
    assert!(requests.iter().any(|r| r.method == "HEAD"));
    let put = requests
        .iter()
        .find(|r| r.method == "PUT" && r.path.contains("a/b.txt"))
        .unwrap();
    assert!(put.body.len() >= 100_000);
}

#[test]
fn sts_form_requests_are_recorded_with_their_parameters_and_faults_are_query_xml() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let form = "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fsortie-runner&RoleSessionName=sortie+test";
    let request = format!(
        "POST / HTTP/1.1\r\nHost: sts.amazonaws.com\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20250310/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    let (status, body) = raw(&proxy, request.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("AssumeRoleResponse"), "{body}");
    assert!(body.contains("Connection: close"), "{body}");

    assert_eq!(proxy.count("AssumeRole"), 1);
    let recorded = &proxy.requests()[0];
    assert_eq!(recorded.operation.as_deref(), Some("AssumeRole"));
    assert_eq!(recorded.service.as_deref(), Some("sts"));
    assert!(recorded.target.is_none());
    let params = recorded.form();
    assert_eq!(params["Action"], "AssumeRole");
    assert_eq!(params["Version"], "2011-06-15");
    assert_eq!(
        params["RoleArn"],
        "arn:aws:iam::123456789012:role/sortie-runner"
    );
    assert_eq!(params["RoleSessionName"], "sortie test");

    proxy.inject(
        "AssumeRole",
        1,
        403,
        "AccessDenied",
        "not <allowed> & not trusted",
    );
    let (status, body) = raw(&proxy, request.as_bytes());
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not &lt;allowed&gt; &amp; not trusted</Message></Error>"),
        "{body}"
    );
    assert_eq!(proxy.count("sts.AssumeRole"), 2);
}

#[test]
fn chunked_request_bodies_are_decoded_and_forwarded() {
    sortie_testkit::require_aws!();
    let proxy = FaultProxy::start(&endpoint());
    let payload = "{}";
    // moto routes a request by the service in its credential scope.
    let request = format!(
        "POST / HTTP/1.1\r\nHost: dynamodb\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20250310/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{}\r\n1\r\n{}\r\n0\r\n\r\n",
        &payload[..1],
        &payload[1..]
    );
    let (status, body) = raw(&proxy, request.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("TableNames"), "{body}");
    let recorded = &proxy.requests_for("ListTables")[0];
    assert_eq!(recorded.body, payload.as_bytes());
    assert_eq!(recorded.json(), Some(serde_json::json!({})));
}
