//! Proves the integration-test harness end to end: the real Rust AWS SDK and
//! the real Terraform 0.11.11 binary, both against the local moto server.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use serde_json::Value;
use sortie_testkit::{
    copy_dir, dynamodb_client, example_dir, s3_client, scratch_dir, sdk_config, terraform, unique,
    S3Backend, REGION,
};

const STATE_KEY: &str = "acme/payments/prod/terraform.tfstate";

#[tokio::test]
async fn dynamodb_item_put_into_an_on_demand_table_reads_back_unchanged() {
    sortie_testkit::require_aws!();
    let config = sdk_config().await;
    assert_eq!(config.region().map(|r| r.as_ref()), Some(REGION));
    let ddb = dynamodb_client(&config);
    let table = unique("sortie-harness");

    let key_attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition")
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema element")
    };
    ddb.create_table()
        .table_name(&table)
        .attribute_definitions(key_attr("pk"))
        .attribute_definitions(key_attr("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create table");

    ddb.put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("RUNNER#acme/payments/prod".into()))
        .item("sk", AttributeValue::S("JOB#0001".into()))
        .item("state", AttributeValue::S("queued".into()))
        .item("attempt", AttributeValue::N("3".into()))
        .send()
        .await
        .expect("put item");

    let got = ddb
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("RUNNER#acme/payments/prod".into()))
        .key("sk", AttributeValue::S("JOB#0001".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item");
    let item = got.item().expect("the item just written is found");
    assert_eq!(item.get("state"), Some(&AttributeValue::S("queued".into())));
    assert_eq!(item.get("attempt"), Some(&AttributeValue::N("3".into())));
    assert_eq!(item.len(), 4, "no attributes added or lost: {item:?}");

    let missing = ddb
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("RUNNER#acme/payments/prod".into()))
        .key("sk", AttributeValue::S("JOB#0002".into()))
        .send()
        .await
        .expect("get missing item");
    assert!(missing.item().is_none());
}

#[tokio::test]
async fn terraform_apply_with_s3_backend_stores_state_with_outputs_in_the_bucket() {
    sortie_testkit::require_aws!();
    let config = sdk_config().await;
    let s3 = s3_client(&config);
    let bucket = unique("sortie-state");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("create state bucket");

    let dir = scratch_dir("hello").expect("scratch dir");
    copy_dir(&example_dir("hello"), &dir).expect("copy examples/hello");
    let backend = S3Backend {
        bucket: bucket.clone(),
        key: STATE_KEY.to_string(),
    };
    backend.write_stub(&dir).expect("write backend stub");

    let mut init_args = vec!["-input=false".to_string()];
    init_args.extend(backend.init_args());
    terraform(&dir, "init", &init_args).unwrap_or_else(|e| panic!("{e}"));

    // A value unique to this run, so the state can only hold it if this apply wrote it.
    let greeting = unique("hi");
    let var = format!("greeting={greeting}");
    let apply = terraform(
        &dir,
        "apply",
        ["-auto-approve", "-input=false", "-var", var.as_str()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let expected = format!("{greeting}!");
    let stdout = String::from_utf8_lossy(&apply.stdout);
    assert!(stdout.contains(&expected), "apply output:\n{stdout}");

    // Nothing may be left locally: the state lives only in the backend.
    assert!(
        !dir.join("terraform.tfstate").exists(),
        "terraform wrote a local state instead of using the S3 backend"
    );

    let object = s3
        .get_object()
        .bucket(&bucket)
        .key(STATE_KEY)
        .send()
        .await
        .expect("state object exists at the backend key");
    let body = object
        .body
        .collect()
        .await
        .expect("read state")
        .into_bytes();
    let state: Value = serde_json::from_slice(&body).expect("state is JSON");
    assert_eq!(
        output_value(&state, "message"),
        Some(&Value::String(expected)),
        "state:\n{state:#}"
    );
    // Only reached on success: a failing run leaves its files for inspection.
    let _ = std::fs::remove_dir_all(&dir);
}

/// The value of root output `name` in a Terraform state: `modules[root].outputs`
/// in format 3 (Terraform 0.11), top-level `outputs` in format 4 (0.12+).
fn output_value<'a>(state: &'a Value, name: &str) -> Option<&'a Value> {
    let outputs = match state.get("version").and_then(Value::as_u64) {
        Some(3) => state["modules"]
            .as_array()?
            .iter()
            .find(|m| m["path"] == serde_json::json!(["root"]))?
            .get("outputs")?,
        _ => state.get("outputs")?,
    };
    outputs.get(name)?.get("value")
}
