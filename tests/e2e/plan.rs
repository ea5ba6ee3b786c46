//! `sortie job plan ID` (issue 28): the plan as data, shown like `terraform show`.
//!
//! - The rendering, against a fake API on loopback that answers pages built with the API's
//!   own code (`PlanView::page`) from a fixed redacted document: a snapshot of every kind of
//!   change, no colour off a terminal, and every page of a plan over 1,000 resources.
//! - End to end (moto, `sortie dev`, the real pilot and the machine's Terraform 1.11 with
//!   `terraform_data`): a sensitive value never reaches plan.json's API answer, the table,
//!   the job's answer or its log; a job with no plan data is a clear 404.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;

use serde_json::{json, Value};
use sortie_core::plan::{PlanPage, PlanView};

use crate::common;

/// A fake API answering `GET /v1/jobs/<any>/plan[?cursor=..]` with `view`'s pages (and
/// 404 to anything else), for at most `requests` requests; its URL.
fn fake_api(view: PlanView, requests: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let target = first.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, body) = match target.split_once("/plan") {
                Some((_, rest)) => {
                    let cursor = rest.strip_prefix("?cursor=");
                    let page: PlanPage = view.page(cursor, 1000).unwrap();
                    ("200 OK", serde_json::to_string(&page).unwrap())
                }
                None => (
                    "404 Not Found",
                    json!({"error": {"code": "not_found", "message": "no such route"}}).to_string(),
                ),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn sortie_against(url: &str, args: &[&str]) -> common::Out {
    let home = std::env::temp_dir().join("sortie-plan-test-home-that-does-not-exist");
    Command::new(sortie_tests::sortie())
        .args(args)
        .env("SORTIE_API_URL", url)
        .env("SORTIE_TOKEN", "a-test-token")
        .env("SORTIE_CONFIG", home.join("none.yaml"))
        .env("HOME", &home)
        .env_remove("NO_COLOR")
        .output()
        .expect("run sortie")
        .into()
}

/// A redacted `show -json` document with one change of every kind, in a module and out.
fn document() -> Value {
    json!({
        "format_version": "1.2",
        "resource_changes": [
            {"address": "terraform_data.new", "type": "terraform_data", "name": "new",
             "change": {"actions": ["create"], "before": null,
                        "after": {"input": "v1", "triggers_replace": null},
                        "after_unknown": {"id": true, "output": true}}},
            {"address": "terraform_data.tuned", "type": "terraform_data", "name": "tuned",
             "change": {"actions": ["update"],
                        "before": {"id": "11", "input": {"size": 1, "tags": {"env": "dev"}}, "password": "(sensitive value)"},
                        "after": {"id": "11", "input": {"size": 2, "tags": {"env": "dev", "team": "pay"}}, "password": "(sensitive value)"}}},
            {"address": "module.net.terraform_data.web[0]", "module_address": "module.net",
             "type": "terraform_data", "name": "web", "index": 0,
             "change": {"actions": ["delete", "create"],
                        "before": {"id": "abc", "input": "old", "triggers_replace": ["a"]},
                        "after": {"input": "new", "triggers_replace": ["b"]},
                        "after_unknown": {"id": true},
                        "replace_paths": [["triggers_replace"]]}},
            {"address": "terraform_data.gone", "type": "terraform_data", "name": "gone",
             "change": {"actions": ["delete"], "before": {"id": "22", "input": "bye"}, "after": null}},
            {"address": "data.terraform_remote_state.net", "type": "terraform_remote_state", "name": "net",
             "change": {"actions": ["read"], "before": null, "after": {"backend": "s3"}, "after_unknown": {"outputs": true}}},
            {"address": "terraform_data.same", "type": "terraform_data", "name": "same",
             "change": {"actions": ["no-op"], "before": {"id": "1"}, "after": {"id": "1"}}}
        ],
        "output_changes": {
            "buckets": {"actions": ["create"], "before": null, "after": [null, "b"], "after_unknown": [true, false]},
            "old_name": {"actions": ["delete"], "before": "x", "after": null, "after_unknown": false},
            "password": {"actions": ["create"], "before": null, "after": "(sensitive value)", "after_unknown": false},
            "url": {"actions": ["update"], "before": "http://a", "after": "http://b"},
            "web_id": {"actions": ["create"], "before": null, "after_unknown": true}
        }
    })
}

#[test]
fn job_plan_renders_every_kind_of_change_like_terraform_show() {
    let url = fake_api(PlanView::from_document(&document()), 4);
    let out = sortie_against(&url, &["job", "plan", "01JOB"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains('\x1b'),
        "no colour off a terminal: {:?}",
        out.stdout
    );
    insta::assert_snapshot!("job_plan_rendered", out.stdout);

    let out = sortie_against(&url, &["-o", "json", "job", "plan", "01JOB"]);
    assert_eq!(out.code, 0, "{out:?}");
    let page: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(page["resource_changes"].as_array().unwrap().len(), 6);
    assert_eq!(page["counts"]["replace"], 1);
    assert_eq!(page["resource_changes"][2]["module"], "module.net");
    assert_eq!(page["resource_changes"][2]["action"], "replace");
}

#[test]
fn job_plan_reads_every_page_of_a_plan_over_1000_resources() {
    let changes: Vec<Value> = (0..2345)
        .map(|i| json!({"address": format!("terraform_data.r[{i}]"), "type": "terraform_data", "name": "r",
                         "change": {"actions": ["create"], "before": null, "after": {"input": i}}}))
        .collect();
    let url = fake_api(
        PlanView::from_document(&json!({ "resource_changes": changes })),
        3,
    );
    let out = sortie_against(&url, &["job", "plan", "01BIG"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.matches(" will be created").count(), 2345);
    assert!(out.stdout.contains("terraform_data.r[2344]"));
    assert!(
        out.stdout
            .ends_with("Plan: 2345 to add, 0 to change, 0 to destroy.\n"),
        "{}",
        &out.stdout[out.stdout.len().saturating_sub(200)..]
    );
}

#[test]
fn job_plan_of_an_unavailable_plan_says_why() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        if let Some(Ok(mut stream)) = listener.incoming().next() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let body = serde_json::to_string(&PlanPage::unavailable(
                "plan data unavailable for Terraform 0.11",
            ))
            .unwrap();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let out = sortie_against(&url, &["job", "plan", "01OLD"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "No plan data: plan data unavailable for Terraform 0.11.\n"
    );
}

const ENV: &str = "acme/demo/plans";

#[test]
fn a_sensitive_value_never_leaves_the_runner_through_the_plan() {
    sortie_testkit::require_aws!();
    // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
    // (`terraform_data` exists from 1.4 on: the job succeeding proves which one ran.)
    let _ = sortie_testkit::terraform111_bin();
    // The host's Terraform settings stay with the host (issue 47 item 11): a CLI
    // configuration that is not there (Terraform warned in every job's log) and a value
    // the configuration would read.
    let dev = common::start_dev(common::DevOptions {
        prefix: "plans",
        runner: Some(common::runner_binary()),
        env: &[
            ("TF_CLI_CONFIG_FILE", "/nonexistent/sortie-test.tfrc"),
            ("TF_VAR_host_only", "from-the-host"),
        ],
        ..Default::default()
    });
    let bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &bucket);
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "plans", "env_type": "development"})),
    );
    let source = dev.dir.join("config");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(
        source.join("main.tf"),
        "variable \"db_password\" {\n  type      = string\n  sensitive = true\n}\n\nresource \"terraform_data\" \"db\" {\n  input = { password = var.db_password, user = \"app\" }\n}\n\nvariable \"host_only\" {\n  type    = string\n  default = \"declared\"\n}\n\nresource \"terraform_data\" \"plain\" {\n  input = \"visible-${var.host_only}\"\n}\n\noutput \"password\" {\n  value     = var.db_password\n  sensitive = true\n}\n\noutput \"ids\" {\n  value = [terraform_data.plain.id, \"fixed\"]\n}\n",
    )
    .unwrap();
    let secret = format!("s3cr3t-{}", sortie_testkit::unique("pw"));
    let source_arg = source.display().to_string();
    let run = common::sortie_command(&dev)
        .args(["-o", "json", "run", "plan", ENV, "--source", &source_arg])
        .args(["--sensitive-var", "db_password"])
        .env("TF_VAR_db_password", &secret)
        .output()
        .unwrap();
    let submitted: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", common::Out::from(run.clone())));
    let id = submitted["id"].as_str().unwrap().to_string();
    let job = dev.wait_terminal(&id);
    let log = dev.log(&id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    assert!(log.contains("uploaded plan.json"), "{log}");
    let api_answer = dev.api("GET", &format!("/v1/jobs/{id}/plan"), None);
    let json_out: common::Out = common::sortie(&dev, &["-o", "json", "job", "plan", &id]).into();
    let table: common::Out = common::sortie(&dev, &["job", "plan", &id]).into();
    assert_eq!(
        (json_out.code, table.code),
        (0, 0),
        "{json_out:?}\n{table:?}"
    );
    for (what, text) in [
        ("the API's answer", api_answer.to_string()),
        ("`job plan -o json`", json_out.stdout.clone()),
        ("`job plan`", format!("{}{}", table.stdout, table.stderr)),
        ("the job's log", log.clone()),
        ("the job", dev.job(&id).to_string()),
    ] {
        assert!(!text.contains(&secret), "the secret is in {what}: {text}");
    }
    assert_eq!(api_answer["available"], true, "{api_answer}");
    assert_eq!(api_answer["counts"]["create"], 2, "{api_answer}");
    assert!(
        table
            .stdout
            .contains("  # terraform_data.db will be created")
            && table.stdout.contains("(sensitive value)")
            && table.stdout.contains("\"visible-declared\"")
            && table
                .stdout
                .contains("Plan: 2 to add, 0 to change, 0 to destroy."),
        "{}",
        table.stdout
    );

    // An output known only in part after apply says which part, as Terraform does, never
    // `null` (issue 47 item 5): Terraform 1.11's own document, not a fixture.
    assert!(
        table
            .stdout
            .contains(r#"+ ids      = [(known after apply),"fixed"]"#),
        "{}",
        table.stdout
    );
    let ids = api_answer["output_changes"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["name"] == "ids"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(ids["unknown_paths"], json!(["0"]), "{api_answer}");
    assert!(
        !log.contains("Unable to open CLI configuration file") && !log.contains("from-the-host"),
        "the host's TF_ variables reached the job: {log}"
    );

    // A job that failed before its plan has no plan data: a clear 404.
    std::fs::write(
        source.join("main.tf"),
        "resource \"terraform_data\" \"x\" {\n",
    )
    .unwrap();
    let run = common::sortie(
        &dev,
        &["-o", "json", "run", "plan", ENV, "--source", &source_arg],
    );
    let submitted: Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = submitted["id"].as_str().unwrap().to_string();
    assert_eq!(dev.wait_terminal(&id)["state"], "failed");
    let missing: common::Out = common::sortie(&dev, &["job", "plan", &id]).into();
    assert_ne!(missing.code, 0, "{missing:?}");
    assert!(
        missing
            .stderr
            .contains(&format!("job `{id}` has no plan data")),
        "{missing:?}"
    );
}
