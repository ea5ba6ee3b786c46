//! The audit trail end to end (issue 44) through `sortie dev`: changes made through the
//! API each write one entry; the sweeper seals them into the organisation's chain;
//! `sortie audit list` shows them and `sortie audit verify` recomputes the chain from the
//! stored bytes. One byte flipped in one stored entry, straight in the table as anyone
//! with write access to it could, is named by `verify` (exit 1).

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{json, Value};

use crate::common::{self, DevOptions};

/// `sortie -o json audit verify acme`, its exit code and its answer.
fn verify(dev: &common::Dev) -> (i32, Value) {
    let out = common::sortie(dev, &["-o", "json", "audit", "verify", "acme"]);
    let answer = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), answer)
}

#[test]
fn changes_are_recorded_sealed_listed_and_a_flipped_byte_is_named() {
    sortie_testkit::require_aws!();
    let dev = common::start_dev(DevOptions {
        prefix: "audit-e2e",
        extra_args: &["--audit-settle", "1"],
        ..Default::default()
    });
    common::local_runner_on_s3(&dev, "local", ">= 1.5", "unused-bucket");
    dev.api(
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "web", "env_type": "development"})),
    );
    dev.api(
        "POST",
        "/v1/environments/acme/web/-/lock",
        Some(json!({"reason": "change freeze"})),
    );
    dev.api("POST", "/v1/environments/acme/web/-/unlock", None);
    // A refused change (the environment exists) writes nothing.
    let (status, _) = dev.api_with(
        &dev.token,
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "web", "env_type": "development"})),
    );
    assert_eq!(status, 409);

    // Sealed by the sweeper (every second here, entries settled after a second).
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let (code, answer) = verify(&dev);
        if code == 0 && answer["entries"] == 5 && answer["unsealed"] == 0 {
            break answer;
        }
        assert!(Instant::now() < deadline, "never sealed: {code} {answer}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(answer["verified"], true, "{answer}");

    let out = common::sortie(&dev, &["-o", "json", "audit", "list", "acme"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = listed["entries"].as_array().unwrap().clone();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["entry"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "unlock_environment",
            "lock_environment",
            "create_environment",
            "create_rule",
            "create_runner"
        ],
        "newest first, one entry per change"
    );
    let lock = &entries[1]["entry"];
    assert_eq!(lock["target"], "/v1/environments/acme/web/-/lock");
    assert_eq!(lock["org"], "acme");
    assert!(!lock["actor"]["subject"].as_str().unwrap().is_empty());
    assert_eq!(
        lock["after"].as_str().unwrap().len(),
        64,
        "the body's digest, never the body: {lock}"
    );
    assert!(!entries[1]["stored"]
        .as_str()
        .unwrap()
        .contains("change freeze"));
    let seqs: Vec<u64> = entries
        .iter()
        .map(|e| e["seal"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [5, 4, 3, 2, 1]);

    // Exported to the archive (Object Lock, compliance mode): the five entries as stored,
    // in sequence, then the head; S3 refuses to delete it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let key = "audit/acme/000000000001-000000000005.jsonl";
    let (body, version) = rt.block_on(async {
        let config = sortie_testkit::sdk_config().await;
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&config)
                .force_path_style(true)
                .build(),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let object = loop {
            match s3
                .get_object()
                .bucket(&dev.audit_bucket)
                .key(key)
                .send()
                .await
            {
                Ok(o) => break o,
                Err(e) => {
                    assert!(Instant::now() < deadline, "never exported: {e:?}");
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        };
        let version = object.version_id.clone().unwrap_or_default();
        let body = object.body.collect().await.unwrap().into_bytes().to_vec();
        let refused = s3
            .delete_object()
            .bucket(&dev.audit_bucket)
            .key(key)
            .version_id(&version)
            .send()
            .await;
        let code = refused.err().and_then(|e| {
            use aws_sdk_s3::error::ProvideErrorMetadata;
            e.into_service_error().code().map(String::from)
        });
        assert_eq!(
            code.as_deref(),
            Some("AccessDenied"),
            "a locked export cannot be deleted"
        );
        (String::from_utf8(body).unwrap(), version)
    });
    assert!(!version.is_empty(), "the archive is versioned");
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{body}");
    for (i, line) in lines[..5].iter().enumerate() {
        assert_eq!(line["seal"]["seq"], i as u64 + 1);
        let listed = entries
            .iter()
            .find(|e| e["seal"]["seq"] == i as u64 + 1)
            .unwrap();
        assert_eq!(line["stored"], listed["stored"], "exported as stored");
    }
    assert_eq!(lines[5]["head"]["seq"], 5);

    // The human form names the action and the actor.
    let text = common::sortie(
        &dev,
        &["audit", "list", "acme", "--action", "lock_environment"],
    );
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("lock_environment") && !text.contains("unlock_environment"),
        "{text}"
    );

    // One byte of the third entry flipped where it is stored.
    let victim = &entries[2];
    let id = victim["entry"]["id"].as_str().unwrap().to_string();
    let mut bytes = victim["stored"].as_str().unwrap().as_bytes().to_vec();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    let flipped = String::from_utf8(bytes).unwrap();
    rt.block_on(async {
        let config = sortie_testkit::sdk_config().await;
        aws_sdk_dynamodb::Client::new(&config)
            .update_item()
            .table_name(&dev.table)
            .key("pk", AttributeValue::S("AUDIT#acme".into()))
            .key("sk", AttributeValue::S(format!("E#{id}")))
            .update_expression("SET body = :b")
            .expression_attribute_values(":b", AttributeValue::S(flipped))
            .send()
            .await
            .unwrap();
    });
    let (code, answer) = verify(&dev);
    assert_eq!(code, 1, "{answer}");
    assert_eq!(answer["verified"], false);
    let broken = answer["broken"].as_str().unwrap();
    assert!(
        broken.contains("entry 3") && broken.contains("edited"),
        "names the entry: {broken}"
    );
    let text = common::sortie(&dev, &["audit", "verify", "acme"]);
    assert_eq!(text.status.code(), Some(1));
    let said =
        String::from_utf8_lossy(&text.stdout).to_string() + &String::from_utf8_lossy(&text.stderr);
    assert!(
        said.contains("entry 3") && said.contains("was edited"),
        "{said}"
    );
}
