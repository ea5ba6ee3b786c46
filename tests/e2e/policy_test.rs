//! `sortie policy test -f set.yaml --plan plan.json` (issue 28 item 4): a set evaluated
//! locally against a saved plan, with no API; the exit code tells a CI step the verdict.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sortie-policy-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A saved `terraform show -json` plan: one create, one delete of an IAM role.
fn plan(d: &Path) -> PathBuf {
    let p = d.join("plan.json");
    let doc = json!({
        "format_version": "1.2",
        "resource_changes": [
            {"address": "aws_s3_bucket.logs", "type": "aws_s3_bucket", "name": "logs",
             "change": {"actions": ["create"], "before": null, "after": {"bucket": "logs"}}},
            {"address": "aws_iam_role.ci", "type": "aws_iam_role", "name": "ci",
             "change": {"actions": ["delete"], "before": {"name": "ci"}, "after": null}},
        ],
    });
    std::fs::write(&p, doc.to_string()).unwrap();
    p
}

fn set(d: &Path, enforcement: &str, rego: &str) -> PathBuf {
    let p = d.join("set.yaml");
    let indented: String = rego.lines().map(|l| format!("      {l}\n")).collect();
    std::fs::write(
        &p,
        format!("name: roles\nenforcement: {enforcement}\nmodules:\n  - name: roles.rego\n    rego: |\n{indented}"),
    )
    .unwrap();
    p
}

fn sortie(args: &[&str]) -> common::Out {
    let home = std::env::temp_dir().join("sortie-policy-test-home-that-does-not-exist");
    Command::new(sortie_tests::sortie())
        .args(args)
        .env("SORTIE_CONFIG", home.join("none.yaml"))
        .env("HOME", &home)
        .env_remove("SORTIE_API_URL")
        .env_remove("SORTIE_TOKEN")
        .output()
        .expect("run sortie")
        .into()
}

/// `sortie policy test -f SET --plan PLAN` and `extra`.
fn policy_test(set: &Path, plan: &Path, extra: &[&str]) -> common::Out {
    let args = [
        "policy",
        "test",
        "-f",
        set.to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
    ];
    sortie(&[&args[..], extra].concat())
}

const NO_ROLE_DELETES: &str = r#"package roles

deny contains msg if {
  some rc in input.plan.resource_changes
  rc.type == "aws_iam_role"
  "delete" in rc.change.actions
  msg := sprintf("%s would be deleted by %s", [rc.address, input.job.operation])
}

warn contains msg if {
  some rc in input.plan.resource_changes
  "create" in rc.change.actions
  msg := sprintf("%s is new", [rc.address])
}
"#;

#[test]
fn a_mandatory_deny_exits_7_with_its_messages() {
    let d = dir("deny");
    let (s, p) = (set(&d, "mandatory", NO_ROLE_DELETES), plan(&d));
    let out = policy_test(&s, &p, &[]);
    assert_eq!(out.code, 7, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("denied"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("aws_iam_role.ci would be deleted by apply"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("aws_s3_bucket.logs is new"),
        "{}",
        out.stdout
    );

    // The operation goes into the input; JSON output carries the result.
    let out = policy_test(&s, &p, &["--operation", "destroy", "-o", "json"]);
    assert_eq!(out.code, 7, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["status"], "denied");
    assert_eq!(
        v["result"]["deny"][0],
        "aws_iam_role.ci would be deleted by destroy"
    );
    // A file tested alone is held by no group (it said `local`, a name no group has).
    assert_eq!(v["result"]["group"], "", "{v}");
}

#[test]
fn the_report_says_whether_the_set_is_indexed_by_type() {
    let d = dir("indexed");
    let p = plan(&d);
    // The deny rule alone reads only `aws_iam_role` changes; with the warn rule, which
    // looks at every change, the set sees them all.
    let only_deny = NO_ROLE_DELETES.split("\nwarn contains").next().unwrap();
    for (rego, types, line) in [
        (
            only_deny,
            json!(["aws_iam_role"]),
            "evaluated over resource types aws_iam_role only (indexed by type)",
        ),
        (
            NO_ROLE_DELETES,
            Value::Null,
            "evaluated over every resource change (not indexed by type)",
        ),
    ] {
        let s = set(&d, "mandatory", rego);
        let out = policy_test(&s, &p, &[]);
        assert_eq!(out.code, 7, "{}\n{}", out.stdout, out.stderr);
        assert!(out.stdout.contains(line), "{}", out.stdout);
        assert!(
            out.stdout
                .contains("aws_iam_role.ci would be deleted by apply"),
            "{}",
            out.stdout
        );
        let out = policy_test(&s, &p, &["-o", "json"]);
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(v["resource_types"], types, "{}", out.stdout);
    }
}

#[test]
fn an_advisory_deny_or_a_warning_passes_with_a_warning() {
    let d = dir("advisory");
    let (s, p) = (set(&d, "advisory", NO_ROLE_DELETES), plan(&d));
    let out = policy_test(&s, &p, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("warned"), "{}", out.stdout);
}

#[test]
fn a_set_that_does_not_compile_names_module_line_and_column() {
    let d = dir("broken");
    let s = set(
        &d,
        "review",
        "package roles\n\ndeny contains msg if {\n  msg := ]\n}\n",
    );
    let p = plan(&d);
    let out = policy_test(&s, &p, &[]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("`roles.rego`"), "{}", out.stderr);
    assert!(out.stderr.contains("line 4 column"), "{}", out.stderr);
}
