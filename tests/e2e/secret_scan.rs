//! Issue 41, item 1, end to end: a sensitive variable that the configuration does not
//! declare `sensitive` is found nowhere a viewer can look. The real `sortie` binary against
//! `sortie dev` on moto, the real `sortie-pilot` and the machine's Terraform 1.11
//! (`terraform_data`, `check` blocks).
//!
//! An apply gets `db_password` and `api_key` with `--sensitive-var`; neither is declared
//! `sensitive`, so Terraform prints them: in the plan (a `terraform_data` input built from
//! them), in a failed `check` assertion's warning that quotes one, and in two outputs (one
//! a string, one a map holding a list). A second job plans a configuration whose variable
//! validation fails with a message quoting the value, so the job's reason quotes it.
//! Then everything is scanned for each value, raw and in its escaped forms (JSON's,
//! Go's `\u0026`, Rust's `Debug`): every page of both jobs' logs, every API answer
//! fetched (the jobs, the outputs, the plan, the environment, its outputs, its job
//! list), what the CLI printed, the console's pages as served, every EventBridge event
//! `sortie dev` published, every item of its DynamoDB table, every object of the
//! buckets that belongs to these jobs, and every file under `sortie dev`'s work
//! directory. Only Terraform's state is skipped (`*.tfstate` in the state bucket, and its
//! copy in `sortie dev`'s snapshot: the state must hold the values it applied, and the
//! test checks that it does, so the skip hides nothing else). The failing job runs in an
//! environment of its own: a job not given a secret cannot scrub it, and a plan against a
//! state that holds an undeclared-sensitive value from an earlier job shows it (the
//! warning tells the user to declare the variable `sensitive`).

use std::path::Path;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{json, Value};

use crate::common::{self, Dev};

const ENV: &str = "acme/demo/scan";

/// The failing job's environment (no state of the apply's).
const FAIL_ENV: &str = "acme/demo/scan-fail";

/// The configuration applied: no variable is declared `sensitive`.
const MAIN_TF: &str = r#"variable "db_password" {
  type = string
}

variable "api_key" {
  type = string
}

resource "terraform_data" "db" {
  input = {
    dsn    = "pg://app:${var.db_password}@db"
    header = "Bearer ${var.api_key}"
    user   = "app"
  }
}

check "password_strength" {
  assert {
    condition     = length(var.db_password) > 200
    error_message = "The password ${var.db_password} is too short."
  }
}

output "dsn" {
  value = "pg://app:${var.db_password}@db"
}

output "headers" {
  value = { auth = ["Bearer ${var.api_key}"], plain = "visible" }
}
"#;

/// A configuration whose validation fails quoting the value (the job's reason quotes it).
const FAILING_TF: &str = r#"variable "db_password" {
  type = string
  validation {
    condition     = length(var.db_password) > 200
    error_message = "The password ${var.db_password} is too short."
  }
}

output "length" {
  value = length(var.db_password)
}
"#;

/// The forms a text may hold `value` in: raw, JSON-escaped (serde's and Go's, which
/// escapes `<`, `>` and `&`), and `Debug`-escaped (how the table's items are printed).
fn needles(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap();
    let debug = format!("{value:?}");
    let go = json[1..json.len() - 1]
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut all = vec![
        value.to_string(),
        json[1..json.len() - 1].to_string(),
        go,
        debug[1..debug.len() - 1].to_string(),
    ];
    all.sort();
    all.dedup();
    all
}

/// Every place a value was found.
struct Scan {
    needles: Vec<String>,
    found: Vec<String>,
    /// How many texts were scanned.
    looked: usize,
}

impl Scan {
    fn new(values: &[&str]) -> Self {
        Self {
            needles: values.iter().flat_map(|v| needles(v)).collect(),
            found: Vec::new(),
            looked: 0,
        }
    }

    fn check(&mut self, what: &str, text: &str) {
        self.looked += 1;
        for needle in &self.needles {
            if let Some(at) = text.find(needle.as_str()) {
                let from = text.floor_char_boundary(at.saturating_sub(120));
                let to = text.ceil_char_boundary((at + needle.len() + 60).min(text.len()));
                self.found.push(format!("{what}: …{}…", &text[from..to]));
            }
        }
    }

    fn bytes(&mut self, what: &str, bytes: &[u8]) {
        self.check(what, &String::from_utf8_lossy(bytes));
    }
}

/// Scans every page of the job's log (the answers as served); the log's text.
fn scan_log(dev: &Dev, id: &str, scan: &mut Scan) -> String {
    let mut offset = 0;
    let mut text = String::new();
    for page in 0.. {
        assert!(page < 1000, "the log of {id} never ended");
        let answer = dev.api("GET", &format!("/v1/jobs/{id}/logs?offset={offset}"), None);
        scan.check(&format!("log page {page} of job {id}"), &answer.to_string());
        let data = answer["data"].as_str().unwrap();
        text.push_str(data);
        offset = answer["next_offset"].as_u64().unwrap();
        if data.is_empty() && answer["more"] != true {
            break;
        }
        if data.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    text
}

/// Submits `operation` from `source` with the sensitive variables `vars` (`NAME=VALUE`);
/// the job's id, after scanning what the CLI printed.
fn submit(
    dev: &Dev,
    operation: &str,
    env: &str,
    source: &Path,
    vars: &[String],
    scan: &mut Scan,
) -> String {
    let source = source.display().to_string();
    let mut args = vec!["-o", "json", "run", operation, env, "--source", &source];
    for v in vars {
        args.extend(["--sensitive-var", v.as_str()]);
    }
    let out: common::Out = common::sortie(dev, &args).into();
    scan.check(&format!("`sortie run {operation}` stdout"), &out.stdout);
    scan.check(&format!("`sortie run {operation}` stderr"), &out.stderr);
    let submitted: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    submitted["id"].as_str().unwrap().to_string()
}

/// Every text in a DynamoDB attribute value (strings, numbers, keys, binaries), at any depth.
fn attribute_texts(value: &AttributeValue, out: &mut Vec<String>) {
    match value {
        AttributeValue::S(s) | AttributeValue::N(s) => out.push(s.clone()),
        AttributeValue::Ss(v) | AttributeValue::Ns(v) => out.extend(v.iter().cloned()),
        AttributeValue::B(b) => out.push(String::from_utf8_lossy(b.as_ref()).into_owned()),
        AttributeValue::Bs(v) => out.extend(
            v.iter()
                .map(|b| String::from_utf8_lossy(b.as_ref()).into_owned()),
        ),
        AttributeValue::L(items) => items.iter().for_each(|i| attribute_texts(i, out)),
        AttributeValue::M(map) => {
            for (k, v) in map {
                out.push(k.clone());
                attribute_texts(v, out);
            }
        }
        _ => out.push(format!("{value:?}")),
    }
}

/// Scans every item of every table of this `sortie dev` (named `sortie-secretscan…`);
/// how many items.
async fn scan_tables(scan: &mut Scan) -> usize {
    let ddb = sortie_testkit::dynamodb_client(&sortie_testkit::sdk_config().await);
    let mut count = 0;
    let tables = ddb.list_tables().limit(100).send().await.unwrap();
    let mut names: Vec<String> = tables.table_names().to_vec();
    let mut start = tables.last_evaluated_table_name;
    while let Some(from) = start.take() {
        let more = ddb
            .list_tables()
            .exclusive_start_table_name(from)
            .limit(100)
            .send()
            .await
            .unwrap();
        names.extend(more.table_names().iter().cloned());
        start = more.last_evaluated_table_name;
    }
    for table in names.iter().filter(|t| t.starts_with("sortie-secretscan")) {
        let mut start = None;
        loop {
            let page = ddb
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .unwrap();
            for item in page.items() {
                count += 1;
                let mut texts = vec![format!("{item:?}")];
                for (k, v) in item {
                    texts.push(k.clone());
                    attribute_texts(v, &mut texts);
                }
                scan.check(&format!("an item of {table}"), &texts.join("\n"));
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
    }
    count
}

/// Scans every object, in any bucket, whose key names one of `jobs`, and every object of
/// `state_bucket` but its state files (which must hold the value: checked); how many
/// objects were scanned.
async fn scan_buckets(jobs: &[&str], state_bucket: &str, value: &str, scan: &mut Scan) -> usize {
    let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
    let mut count = 0;
    let mut states = 0;
    let buckets = s3.list_buckets().send().await.unwrap();
    for bucket in buckets.buckets().iter().filter_map(|b| b.name()) {
        let mut token = None;
        loop {
            let page = s3
                .list_objects_v2()
                .bucket(bucket)
                .set_continuation_token(token.take())
                .send()
                .await
                .unwrap();
            for object in page.contents() {
                let key = object.key().unwrap_or_default();
                let ours = jobs.iter().any(|j| key.contains(j));
                if !ours && bucket != state_bucket {
                    continue;
                }
                let body = s3
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .send()
                    .await
                    .unwrap()
                    .body
                    .collect()
                    .await
                    .unwrap()
                    .into_bytes();
                if bucket == state_bucket && key.ends_with(".tfstate") {
                    // Terraform's state holds what it applied: the value must be there.
                    assert!(
                        String::from_utf8_lossy(&body).contains(value),
                        "the state s3://{bucket}/{key} does not hold the value: the apply did not use it"
                    );
                    states += 1;
                    continue;
                }
                count += 1;
                scan.bytes(&format!("s3://{bucket}/{key}"), &body);
            }
            match page.next_continuation_token {
                Some(t) if page.is_truncated == Some(true) => token = Some(t),
                _ => break,
            }
        }
    }
    assert!(states > 0, "no state file in {state_bucket}");
    count
}

/// The bodies `sortie dev`'s snapshot keeps of Terraform state files (`world.json` names
/// each object's key and the SHA-256 its body is stored under).
fn snapshot_states(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join("snapshot/world.json")) else {
        return Vec::new();
    };
    let world: Value = serde_json::from_str(&text).unwrap();
    world["buckets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|b| b["objects"].as_array().into_iter().flatten())
        .filter(|o| o["key"].as_str().is_some_and(|k| k.ends_with(".tfstate")))
        .filter_map(|o| o["sha256"].as_str().map(str::to_string))
        .collect()
}

/// Scans every file under `dir` (the runner's work directory is a temporary one, removed
/// at its end) but the snapshot's copies of Terraform state, which must hold the value
/// (checked); how many files.
fn scan_files(dir: &Path, value: &str, scan: &mut Scan) -> usize {
    let states = snapshot_states(dir);
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if states.contains(&name) {
                    assert!(
                        String::from_utf8_lossy(&bytes).contains(value),
                        "the state copy {} does not hold the value",
                        path.display()
                    );
                    continue;
                }
                count += 1;
                scan.bytes(&path.display().to_string(), &bytes);
            }
        }
    }
    count
}

#[test]
fn an_undeclared_sensitive_variable_is_found_nowhere_a_viewer_can_look() {
    sortie_testkit::require_aws!();
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`, `check`).
    let _ = sortie_testkit::terraform111_bin();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dev = common::launch("secretscan", 1, Some(&common::runner_binary()));
    let (sqs, queue) = rt.block_on(common::capture_events(
        &dev.bus,
        &sortie_testkit::unique("scan-events"),
    ));
    let state_bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &state_bucket);
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "scan", "env_type": "development"})),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "scan-fail", "env_type": "development"})),
    );
    let password = format!("S3cret-value-{}", sortie_testkit::unique("pw"));
    let api_key = format!("k&y<\"q>-{}", sortie_testkit::unique("key"));
    let mut scan = Scan::new(&[&password, &api_key]);

    let source = dev.dir.join("config");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("main.tf"), MAIN_TF).unwrap();
    let apply = submit(
        &dev,
        "apply",
        ENV,
        &source,
        &[
            format!("db_password={password}"),
            format!("api_key={api_key}"),
        ],
        &mut scan,
    );
    let job = dev.wait_terminal(&apply);
    let log = scan_log(&dev, &apply, &mut scan);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    // Terraform did print the values, and what it printed was replaced.
    for shown in [
        "\"pg://app:(sensitive value)@db\"",
        "\"Bearer (sensitive value)\"",
        "The password (sensitive value) is too short.",
        "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.",
    ] {
        assert!(log.contains(shown), "no {shown:?} in the log:\n{log}");
    }
    // The warning of the undeclared sensitive variables.
    for name in ["api_key", "db_password"] {
        assert!(
            log.contains(&format!(
                "sortie-pilot: warning: variable `{name}` holds a secret value but is not declared `sensitive = true` (variable \"{name}\" in main.tf;"
            )),
            "no warning for {name}:\n{log}"
        );
    }

    // A second job fails on a validation whose message quotes the value.
    let failing = dev.dir.join("failing");
    std::fs::create_dir_all(&failing).unwrap();
    std::fs::write(failing.join("main.tf"), FAILING_TF).unwrap();
    let plan = submit(
        &dev,
        "plan",
        FAIL_ENV,
        &failing,
        &[format!("db_password={password}")],
        &mut scan,
    );
    let failed = dev.wait_terminal(&plan);
    let failed_log = scan_log(&dev, &plan, &mut scan);
    assert_eq!(failed["state"], "failed", "{failed}\n{failed_log}");
    assert!(
        failed.to_string().contains("is too short"),
        "the reason quotes Terraform's error: {failed}"
    );

    // The API's answers.
    let outputs = dev.api("GET", &format!("/v1/jobs/{apply}/outputs"), None);
    assert_eq!(
        outputs["outputs"]["dsn"]["value"], "pg://app:(sensitive value)@db",
        "{outputs}"
    );
    assert_eq!(
        outputs["outputs"]["headers"]["value"]["plain"], "visible",
        "{outputs}"
    );
    let env_outputs = dev.api("GET", &format!("/v1/environments/{ENV}/-/outputs"), None);
    let mut answers = vec![
        ("the apply job".to_string(), dev.job(&apply)),
        ("the failed plan job".to_string(), failed.clone()),
        ("the job's outputs".to_string(), outputs),
        ("the environment's outputs".to_string(), env_outputs),
        (
            "the environment".to_string(),
            dev.api("GET", &format!("/v1/environments/{ENV}"), None),
        ),
        (
            "the environment's jobs".to_string(),
            dev.api("GET", &format!("/v1/environments/{ENV}/-/jobs"), None),
        ),
    ];
    for id in [&apply, &plan] {
        let (status, page) = dev.api_with(&dev.token, "GET", &format!("/v1/jobs/{id}/plan"), None);
        answers.push((format!("the plan of {id} ({status})"), page));
    }
    for (what, answer) in &answers {
        scan.check(what, &answer.to_string());
    }
    for args in [
        vec!["-o", "json", "job", "outputs", apply.as_str()],
        vec!["job", "outputs", apply.as_str()],
        vec!["env", "outputs", ENV],
        vec!["job", "get", plan.as_str()],
    ] {
        let out: common::Out = common::sortie(&dev, &args).into();
        scan.check(
            &format!("`sortie {}`", args.join(" ")),
            &format!("{}\n{}", out.stdout, out.stderr),
        );
    }

    // The console's pages as served.
    let mut pages = vec!["/".to_string()];
    pages.extend(
        sortie_api::console::ASSETS
            .iter()
            .filter(|a| a.path != sortie_api::console::INDEX)
            .map(|a| format!("/assets/{}/{}", sortie_api::console::ASSET_HASH, a.path)),
    );
    for page in &pages {
        let (status, body) = sortie_testkit::http::call(&dev.url, "GET", page, &[], None);
        assert_eq!(status, 200, "{page}: {body}");
        let text = body
            .as_str()
            .map_or_else(|| body.to_string(), str::to_string);
        scan.check(&format!("the console's {page}"), &text);
    }

    // Every event `sortie dev` published on its bus.
    std::thread::sleep(Duration::from_secs(3));
    let events = rt.block_on(common::drain_events(&sqs, &queue));
    assert!(
        events.iter().any(|e| e.to_string().contains(&apply)),
        "no event of the apply: {events:#?}"
    );
    for event in &events {
        scan.check(
            &format!("the event {}", event["detail-type"]),
            &event.to_string(),
        );
    }

    // The table, the buckets and the files.
    let items = rt.block_on(scan_tables(&mut scan));
    assert!(items > 0, "no table scanned");
    let objects = rt.block_on(scan_buckets(
        &[&apply, &plan],
        &state_bucket,
        &password,
        &mut scan,
    ));
    assert!(objects > 0, "no object scanned");
    let files = scan_files(&dev.dir, &password, &mut scan);
    assert!(files > 0, "no file scanned");
    println!(
        "scanned {} texts: {items} items, {objects} objects, {files} files, {} events",
        scan.looked,
        events.len()
    );
    assert!(
        scan.found.is_empty(),
        "a secret value was found in {} place(s):\n{}",
        scan.found.len(),
        scan.found.join("\n")
    );
}
