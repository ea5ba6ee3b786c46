//! Sensitive variables end to end (issue 24, item 9): the real `sortie` binary against
//! `sortie dev` on moto, the real `sortie-pilot` and real Terraform 1.0.3.
//!
//! `--sensitive-var` sends a value once; it lives in a Secrets Manager secret (on moto)
//! for the job's life, reaches terraform as `TF_VAR_<name>`, and is nowhere else: not in
//! the job's answer, the table, the job's log or `sortie dev`'s own files. The secret is
//! deleted when the job ends. Terraform proves it saw the value with a `validation` block
//! that compares the value's SHA-256 (the configuration never holds the value itself).

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::Digest;

use crate::common;

use common::Dev;

const ENV: &str = "acme/demo/hello";

/// `sortie dev` with a local runner on Terraform 1.0.3 (state in a fresh moto bucket), a
/// rule and the environment [`ENV`].
fn start() -> Dev {
    let dev = common::launch("sensitive", 1, Some(&common::runner_binary()));
    let bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf1", "1.0.3", &bucket);
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "hello", "env_type": "development"})),
    );
    dev
}

fn sortie(dev: &Dev, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::sortie_command(dev);
    cmd.args(args)
        .env("HOME", &dev.dir)
        .env_remove("SORTIE_CONFIG")
        .env_remove("TF_VAR_db_password");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sortie")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every item of every table of this `sortie dev`, as text.
fn table_items() -> String {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let ddb = sortie_testkit::dynamodb_client(&sortie_testkit::sdk_config().await);
        let mut items = String::new();
        let tables = ddb.list_tables().send().await.unwrap();
        for table in tables
            .table_names()
            .iter()
            .filter(|t| t.starts_with("sortie-sensitive"))
        {
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
                    items.push_str(&format!("{item:?}\n"));
                }
                match page.last_evaluated_key {
                    Some(k) if !k.is_empty() => start = Some(k),
                    _ => break,
                }
            }
        }
        items
    })
}

/// The names of the Secrets Manager secrets that exist under `prefix`.
fn secrets_named(prefix: &str) -> Vec<String> {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let sm = aws_sdk_secretsmanager::Client::new(&sortie_testkit::sdk_config().await);
        // Filtered by name: an unfiltered first page may not reach this job's secret.
        let name = aws_sdk_secretsmanager::types::Filter::builder()
            .key(aws_sdk_secretsmanager::types::FilterNameStringType::Name)
            .values(prefix)
            .build();
        let listed = sm
            .list_secrets()
            .filters(name)
            .max_results(100)
            .send()
            .await
            .unwrap();
        listed
            .secret_list()
            .iter()
            .filter_map(|s| s.name())
            .filter(|n| n.starts_with(prefix))
            .map(str::to_string)
            .collect()
    })
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

#[test]
fn a_sensitive_variable_reaches_terraform_and_nothing_else_then_its_secret_is_deleted() {
    sortie_testkit::require_aws!();
    let dev = start();
    let value = format!("s3cr3t-{}", sortie_testkit::unique("pw"));
    let digest: String = sha2::Sha256::digest(value.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let source = dev.dir.join("config");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(
        source.join("main.tf"),
        format!(
            "variable \"db_password\" {{\n  type      = string\n  sensitive = true\n  validation {{\n    condition     = sha256(var.db_password) == \"{digest}\"\n    error_message = \"The db_password is not the one the test sent.\"\n  }}\n}}\n\noutput \"checked\" {{\n  value = \"the password was checked\"\n}}\n"
        ),
    )
    .unwrap();
    let source_arg = source.display().to_string();

    // `--sensitive-var NAME` reads TF_VAR_NAME: the value is never on a command line.
    let run = sortie(
        &dev,
        &[
            "-o",
            "json",
            "run",
            "plan",
            ENV,
            "--source",
            &source_arg,
            "--sensitive-var",
            "db_password",
        ],
        &[("TF_VAR_db_password", &value)],
    );
    let shown = text(&run);
    assert!(
        !shown.contains(&value),
        "the CLI printed the value: {shown}"
    );
    let submitted: Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {shown}"));
    let id = submitted["id"].as_str().unwrap().to_string();
    assert_eq!(
        submitted["sensitive_variables"],
        json!({"db_password": "(sensitive)"}),
        "{submitted}"
    );
    let job = dev.wait_terminal(&id);
    let job_log = dev.log(&id);
    // (a) terraform saw the value: its validation passes only on the value's digest.
    assert_eq!(job["state"], "succeeded", "{job}\n{job_log}");
    assert!(
        job_log.contains("sensitive variables in terraform's environment: db_password"),
        "{job_log}"
    );

    // (b) the value appears nowhere.
    assert!(!job_log.contains(&value), "the value is in the job's log");
    let get = sortie(&dev, &["-o", "json", "job", "get", &id], &[]);
    let got = String::from_utf8_lossy(&get.stdout).into_owned();
    assert!(get.status.success(), "{}", text(&get));
    assert!(!got.contains(&value), "the value is in `job get`: {got}");
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(
        got["sensitive_variables"],
        json!({"db_password": "(sensitive)"})
    );
    let table = sortie(&dev, &["job", "get", &id], &[]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("db_password = (sensitive)"),
        "{}",
        text(&table)
    );
    let items = table_items();
    assert!(
        items.contains(&format!(":secret:sortie/jobs/{id}")),
        "the job item holds its one secret's ARN: {items}"
    );
    assert!(!items.contains(&value), "the value is in the table");
    let leaked = files_containing(&dev.dir, &value);
    assert!(leaked.is_empty(), "the value is in {leaked:?}");

    // (c) the job ended: its secret is gone.
    let deadline = Instant::now() + Duration::from_secs(20);
    let prefix = format!("sortie/jobs/{id}");
    while !secrets_named(&prefix).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the secret outlived the job: {:?}",
            secrets_named(&prefix)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A wrong value fails the validation: the check above is a real one.
    let wrong = sortie(
        &dev,
        &[
            "-o",
            "json",
            "run",
            "plan",
            ENV,
            "--source",
            &source_arg,
            "--sensitive-var",
            "db_password=not-the-password",
        ],
        &[],
    );
    let submitted: Value = serde_json::from_slice(&wrong.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&wrong)));
    let id = submitted["id"].as_str().unwrap().to_string();
    let job = dev.wait_terminal(&id);
    assert_eq!(job["state"], "failed", "{job}");
    assert!(
        dev.log(&id)
            .contains("The db_password is not the one the test sent."),
        "{job}"
    );
    assert!(secrets_named(&format!("sortie/jobs/{id}")).is_empty());

    // `-o json jobs list` names each job's files and never serves their contents.
    let list = sortie(&dev, &["-o", "json", "jobs", "list", ENV], &[]);
    let listed: Value = serde_json::from_slice(&list.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&list)));
    let jobs = listed["jobs"].as_array().expect("a page of jobs");
    assert_eq!(jobs.len(), 2, "{listed}");
    for j in jobs {
        assert!(
            j.get("files").is_none(),
            "a listed job has file contents: {j}"
        );
        assert_eq!(j["file_names"], json!(["main.tf"]), "{j}");
        assert_eq!(
            j["sensitive_variables"],
            json!({"db_password": "(sensitive)"})
        );
    }
    assert!(
        !listed.to_string().contains(&digest),
        "a file's contents are listed"
    );
    let one = dev.job(&id);
    assert!(
        one["files"]["main.tf"].as_str().unwrap().contains(&digest),
        "GET /v1/jobs/{{id}} still serves everything: {one}"
    );
}
