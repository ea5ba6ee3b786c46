//! The `sortie` resource verbs, run as the real binary against `sortie dev` on moto: create,
//! get, list, update and delete of runners, runner rules and environments, a dry-run
//! `env refresh-runner`, `runner check`, memberships, the exit code of every kind of error,
//! and named contexts with a `token_command`. The development token is passed through the
//! environment and must never appear in any output.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common;

use common::Dev;

impl Dev {
    fn start_cli() -> Self {
        common::launch("cli", 5, None)
    }

    /// Runs `sortie ARGS` against this API (URL and token from the environment).
    fn run(&self, args: &[&str]) -> Out {
        sortie(
            args,
            &[
                ("SORTIE_API_URL", self.url.as_str()),
                ("SORTIE_TOKEN", self.token.as_str()),
            ],
            &self.token,
        )
    }

    /// Runs `sortie ARGS` and expects exit code 0; its standard output.
    fn ok_cli(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.code, 0,
            "sortie {args:?}: exit {}\nstdout: {}\nstderr: {}",
            out.code, out.stdout, out.stderr
        );
        out.stdout
    }

    /// Writes a file in this test's directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the real binary with `env` (and no config file of the user's); asserts that
/// `secret` appears in neither output.
fn sortie(args: &[&str], env: &[(&str, &str)], secret: &str) -> Out {
    let home = std::env::temp_dir().join("sortie-cli-test-home-that-does-not-exist");
    let mut cmd = Command::new(sortie_tests::sortie());
    cmd.args(args)
        .env_remove("SORTIE_API_URL")
        .env_remove("SORTIE_TOKEN")
        .env_remove("SORTIE_CONFIG")
        .env("HOME", &home)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run sortie");
    let out = Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    if !secret.is_empty() {
        assert!(
            !out.stdout.contains(secret) && !out.stderr.contains(secret),
            "sortie {args:?} printed the token:\nstdout: {}\nstderr: {}",
            out.stdout,
            out.stderr
        );
    }
    out
}

fn local_runner(description: &str) -> String {
    format!(
        "description: {description}\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/sortie-cli-test-state\n"
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap_or_else(|e| panic!("not YAML ({e}): {text}"))
}

#[test]
fn runners_are_created_read_listed_updated_checked_and_deleted() {
    sortie_testkit::require_aws!();
    let dev = Dev::start_cli();
    let file = dev.file("runner.yaml", &local_runner("the local runner"));
    let created = dev.ok_cli(&["create", "runner", "acme/local", "-f", &file]);
    insta::assert_snapshot!("runner_created", created);

    // A JSON runner file is sent as JSON; a shared runner has one segment.
    let json_file = dev.file(
        "shared.json",
        r#"{"runner_configuration": {"type": "local"}, "state_storage_configuration": {"type": "local", "directory": "/tmp/x"}}"#,
    );
    dev.ok_cli(&["create", "runner", "shared-local", "-f", &json_file]);

    let got = json(&dev.ok_cli(&["get", "runner", "acme/local", "-o", "json"]));
    assert_eq!(got["id"], "acme/local");
    assert_eq!(got["runner_configuration"]["type"], "local");
    assert_eq!(got["version"], 1);

    let listed = yaml(&dev.ok_cli(&["list", "runners", "--group", "acme/payments", "-o", "yaml"]));
    let ids: Vec<&str> = listed["runners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["acme/local", "shared-local"]);
    insta::assert_snapshot!(
        "runners_listed",
        dev.ok_cli(&["list", "runners", "--group", "acme/payments"])
    );
    let root = json(&dev.ok_cli(&["list", "runners", "-o", "json"]));
    assert_eq!(root["runners"][0]["id"], "shared-local");

    let changed = dev.file("changed.yaml", &local_runner("changed"));
    dev.ok_cli(&["update", "runner", "acme/local", "-f", &changed]);
    let got = json(&dev.ok_cli(&["get", "runner", "acme/local", "-o", "json"]));
    assert_eq!(
        (got["description"].as_str(), got["version"].as_u64()),
        (Some("changed"), Some(2))
    );

    // A local runner's check passes under `sortie dev`; the table names each check.
    let check = dev.ok_cli(&["runner", "check", "acme/local"]);
    insta::assert_snapshot!("runner_check", check);
    let report = json(&dev.ok_cli(&["runner", "check", "acme/local", "-o", "json"]));
    assert_eq!(report["passed"], true);

    // The same runner twice is a conflict.
    let again = dev.run(&["create", "runner", "acme/local", "-f", &file]);
    assert_eq!(again.code, 4, "{}", again.stderr);
    assert!(again.stderr.starts_with("error: "), "{}", again.stderr);

    assert_eq!(
        dev.ok_cli(&["delete", "runner", "acme/local"]).trim(),
        "deleted runner `acme/local`"
    );
    let gone = dev.run(&["get", "runner", "acme/local"]);
    assert_eq!(gone.code, 3, "{}", gone.stderr);
    assert!(
        gone.stderr.contains("`sortie list runners --group acme`"),
        "{}",
        gone.stderr
    );
    assert!(gone.stdout.is_empty(), "{}", gone.stdout);
}

#[test]
fn rules_and_environments_are_managed_and_a_dry_run_refresh_changes_nothing() {
    sortie_testkit::require_aws!();
    let dev = Dev::start_cli();
    dev.ok_cli(&[
        "create",
        "runner",
        "acme/local",
        "-f",
        &dev.file("a.yaml", &local_runner("first")),
    ]);
    dev.ok_cli(&[
        "create",
        "runner",
        "acme/other",
        "-f",
        &dev.file("b.yaml", &local_runner("second")),
    ]);
    let rule = dev.ok_cli(&[
        "create",
        "runner-rule",
        "--set",
        "scope=acme",
        "--set",
        "id=default",
        "--set",
        "runner_id=acme/local",
    ]);
    insta::assert_snapshot!("rule_created", rule);
    // A rule file under `--set`.
    let rule_file = dev.file(
        "rule.yaml",
        "id: prod\nrunner_id: acme/local\ncriteria:\n  env_type: production\n",
    );
    dev.ok_cli(&[
        "create",
        "runner-rule",
        "-f",
        &rule_file,
        "--set",
        "scope=acme",
        "--set",
        "priority=5",
    ]);
    let rule = json(&dev.ok_cli(&["get", "runner-rule", "acme/prod", "-o", "json"]));
    assert_eq!(rule["priority"], 5);
    assert_eq!(rule["criteria"]["env_type"], "production");

    let created = dev.ok_cli(&[
        "create",
        "env",
        "acme/payments/prod",
        "--type",
        "production",
        "--label",
        "tier=web",
        "--tag",
        "pci",
    ]);
    insta::assert_snapshot!("env_created", created);
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(env["runner"]["runner_id"], "acme/local");
    assert_eq!(env["runner"]["rule_id"], "prod");
    let envs = yaml(&dev.ok_cli(&["list", "envs", "--group", "acme/payments", "-o", "yaml"]));
    assert_eq!(envs["environments"][0]["path"], "acme/payments/prod");

    dev.ok_cli(&["update", "env", "acme/payments/prod", "--label", "tier=api"]);
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(env["labels"]["tier"], "api");
    assert_eq!(env["version"], 2);

    // A better rule for another runner: the dry run shows it, and changes nothing.
    dev.ok_cli(&[
        "create",
        "runner-rule",
        "--set",
        "scope=acme/payments",
        "--set",
        "id=payments",
        "--set",
        "runner_id=acme/other",
        "--set",
        "criteria.env_type=production",
        "--set",
        "criteria.labels.tier=api",
    ]);
    insta::assert_snapshot!(
        "rules_listed",
        dev.ok_cli(&["list", "runner-rules", "--scope", "acme"])
    );
    let dry = dev.ok_cli(&["env", "refresh-runner", "acme/payments/prod", "--dry-run"]);
    insta::assert_snapshot!("refresh_dry_run", dry);
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(env["runner"]["runner_id"], "acme/local");
    assert_eq!(env["version"], 2);
    let dry = yaml(&dev.ok_cli(&[
        "env",
        "refresh-runner",
        "acme/payments/prod",
        "--dry-run",
        "-o",
        "yaml",
    ]));
    assert_eq!(dry["runner_id"], "acme/other");
    assert_eq!(
        dry["resolution"]["explanation"].as_array().unwrap().len(),
        3
    );

    // The real refresh relinks.
    let done = json(&dev.ok_cli(&["env", "refresh-runner", "acme/payments/prod", "-o", "json"]));
    assert_eq!(
        (done["changed"].as_bool(), done["dry_run"].as_bool()),
        (Some(true), Some(false))
    );
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(env["runner"]["runner_id"], "acme/other");
    insta::assert_snapshot!(
        "envs_listed",
        dev.ok_cli(&["list", "envs", "--group", "acme/payments"])
    );

    // Memberships: grant, list, revoke.
    let granted = json(&dev.ok_cli(&[
        "members",
        "grant",
        "--group",
        "acme",
        "--role",
        "viewer",
        "--subject",
        "alice",
        "-o",
        "json",
    ]));
    let id = granted["id"].as_str().unwrap().to_string();
    let listed = dev.ok_cli(&["members", "list", "--group", "acme"]);
    assert!(
        listed.contains("subject alice") && listed.contains(&id),
        "{listed}"
    );
    dev.ok_cli(&["members", "revoke", "--group", "acme", &id]);
    let listed = json(&dev.ok_cli(&["members", "list", "--group", "acme", "-o", "json"]));
    assert_eq!(listed["memberships"], serde_json::json!([]));

    // Deletes, and the hints of what is gone.
    dev.ok_cli(&["delete", "env", "acme/payments/prod"]);
    let gone = dev.run(&["get", "env", "acme/payments/prod"]);
    assert_eq!(gone.code, 3, "{}", gone.stderr);
    assert!(
        gone.stderr
            .contains("sortie list envs --group acme/payments"),
        "{}",
        gone.stderr
    );
    dev.ok_cli(&["delete", "runner-rule", "acme/payments/payments"]);
    let gone = dev.run(&["get", "runner-rule", "acme/payments/payments"]);
    assert_eq!(gone.code, 3, "{}", gone.stderr);
    assert!(
        gone.stderr
            .contains("sortie list runner-rules --scope acme/payments"),
        "{}",
        gone.stderr
    );
}

#[test]
fn environment_settings_are_set_shown_and_cleared_and_decisions_and_outputs_have_their_exit_codes()
{
    sortie_testkit::require_aws!();
    let dev = Dev::start_cli();
    dev.ok_cli(&[
        "create",
        "runner",
        "acme/local",
        "-f",
        &dev.file("a.yaml", &local_runner("local")),
    ]);
    dev.ok_cli(&[
        "create",
        "runner-rule",
        "--set",
        "scope=acme",
        "--set",
        "id=default",
        "--set",
        "runner_id=acme/local",
    ]);
    // Created reviewed, with four eyes and a one-hour approval timeout.
    let created = dev.ok_cli(&[
        "create",
        "env",
        "acme/payments/prod",
        "--type",
        "production",
        "--approval",
        "required",
        "--four-eyes",
        "--approval-timeout",
        "3600",
    ]);
    assert!(
        created.contains("approval:           required\n"),
        "{created}"
    );
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(
        (
            &env["approval"],
            &env["four_eyes"],
            &env["approval_timeout_seconds"]
        ),
        (
            &Value::from("required"),
            &Value::from(true),
            &Value::from(3600)
        ),
        "{env}"
    );
    insta::assert_snapshot!(
        "env_reviewed",
        dev.ok_cli(&["get", "env", "acme/payments/prod"])
    );

    // Drift detection and the tool, then every clearable setting cleared with `''`.
    let updated = dev.ok_cli(&[
        "update",
        "env",
        "acme/payments/prod",
        "--drift-schedule",
        "0 */6 * * *",
        "--drift-remediation",
        "apply",
        "--tool",
        "opentofu",
        "--version",
        "~> 1.6",
    ]);
    assert!(
        updated.contains("drift schedule:     0 */6 * * * (UTC)\n"),
        "{updated}"
    );
    assert!(
        updated.contains("tool:               opentofu\n")
            && updated.contains("tool version:       ~> 1.6\n"),
        "{updated}"
    );
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    assert_eq!(env["drift_schedule"], "0 */6 * * *", "{env}");
    assert_eq!(env["drift_remediation"], "apply", "{env}");
    assert!(env["next_drift_at"].is_string(), "{env}");
    assert_eq!(
        (&env["tool"], &env["tool_version"]),
        (&Value::from("opentofu"), &Value::from("~> 1.6")),
        "{env}"
    );
    dev.ok_cli(&[
        "update",
        "env",
        "acme/payments/prod",
        "--drift-schedule",
        "",
        "--tool",
        "",
        "--tool-version",
        "",
        "--approval-timeout",
        "",
        "--four-eyes=false",
        "--approval",
        "auto",
        "--drift-remediation",
        "off",
    ]);
    let env = json(&dev.ok_cli(&["get", "env", "acme/payments/prod", "-o", "json"]));
    for cleared in [
        "drift_schedule",
        "next_drift_at",
        "tool",
        "tool_version",
        "approval_timeout_seconds",
    ] {
        assert!(env.get(cleared).is_none(), "{cleared} is still set: {env}");
    }
    assert!(env.get("four_eyes").is_none_or(|v| v == false), "{env}");
    assert!(env.get("approval").is_none_or(|v| v == "auto"), "{env}");
    let shown = dev.ok_cli(&["get", "env", "acme/payments/prod"]);
    for line in [
        "approval:           auto\n",
        "approval timeout:   24h (the default)\n",
        "four eyes:          no\n",
        "drift schedule:     -\n",
        "tool:               - (the runner's)\n",
    ] {
        assert!(shown.contains(line), "no {line:?} in:\n{shown}");
    }

    // A schedule that fires too often: refused by the API, naming the field.
    let often = dev.run(&[
        "update",
        "env",
        "acme/payments/prod",
        "--drift-schedule",
        "*/5 * * * *",
    ]);
    assert_eq!(often.code, 1, "{}", often.stderr);
    assert!(often.stderr.contains("drift_schedule"), "{}", often.stderr);
    // Nothing to clear when creating: a usage error before any request.
    let empty = dev.run(&[
        "create",
        "env",
        "acme/payments/dev",
        "--type",
        "dev",
        "--drift-schedule",
        "",
    ]);
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    assert!(
        empty.stderr.contains("sortie update env"),
        "{}",
        empty.stderr
    );

    // No successful apply yet, so no outputs: not found.
    let none = dev.run(&["env", "outputs", "acme/payments/prod"]);
    assert_eq!(none.code, 3, "{}", none.stderr);
    assert!(
        none.stderr.contains("no apply has succeeded"),
        "{}",
        none.stderr
    );

    // A plan never awaits approval: approving or discarding it is a conflict, with the
    // API's message; it has no outputs.
    let source = dev.dir.join("src");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("main.tf"), "output \"x\" { value = \"1\" }\n").unwrap();
    let job = json(&dev.ok_cli(&[
        "run",
        "plan",
        "acme/payments/prod",
        "--source",
        &source.to_string_lossy(),
        "-o",
        "json",
    ]));
    let id = job["id"].as_str().unwrap();
    for verb in ["approve", "discard"] {
        let refused = dev.run(&["job", verb, id, "--comment", "not this one"]);
        assert_eq!(refused.code, 4, "{verb}: {}", refused.stderr);
        assert!(
            refused.stderr.starts_with(&format!(
                "error: job `{id}` is not awaiting approval: it is "
            )),
            "{verb}: {}",
            refused.stderr
        );
        assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    }
    let outputs = dev.run(&["job", "outputs", id]);
    assert_eq!(outputs.code, 3, "{}", outputs.stderr);
    assert!(
        outputs.stderr.contains("only a succeeded apply has them"),
        "{}",
        outputs.stderr
    );
}

#[test]
fn every_kind_of_error_has_its_exit_code_and_message() {
    sortie_testkit::require_aws!();
    let dev = Dev::start_cli();
    // Bad flags: clap's usage and exit code 2.
    let bad = dev.run(&["get", "runner"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("Usage:"), "{}", bad.stderr);
    let bad = dev.run(&["list", "runners", "--colour"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    // A malformed --set is a usage error too, before any request.
    let bad = dev.run(&["create", "runner-rule", "--set", "scope"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("--set `scope`"), "{}", bad.stderr);

    // Field problems, one `path: problem` per line, exit 1.
    let file = dev.file(
        "bad.yaml",
        "runner_configuration:\n  type: local\n  timeout_seconds: 5\n  colour: red\nstate_storage_configuration:\n  type: s3\n",
    );
    let invalid = dev.run(&["create", "runner", "acme/bad", "-f", &file]);
    assert_eq!(invalid.code, 1, "{}", invalid.stderr);
    let lines: Vec<&str> = invalid.stderr.lines().collect();
    assert!(lines[0].starts_with("error: "), "{}", invalid.stderr);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("runner_configuration.timeout_seconds: ")),
        "{}",
        invalid.stderr
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("runner_configuration.colour: ")),
        "{}",
        invalid.stderr
    );

    // A 404 names what to list.
    let missing = dev.run(&["get", "runner", "acme/payments/nope"]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("sortie list runners --group acme/payments"),
        "{}",
        missing.stderr
    );

    // A bad token: refused (401), exit 1, the token not echoed.
    let refused = sortie(
        &["list", "runners"],
        &[
            ("SORTIE_API_URL", &dev.url),
            ("SORTIE_TOKEN", "not-the-token-4711"),
        ],
        "not-the-token-4711",
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);

    // Nothing listens on port 9: exit 5, the full URL named.
    let unreachable = sortie(
        &[
            "get",
            "runner",
            "acme/local",
            "--api-url",
            "http://127.0.0.1:9",
            "--token",
            "t",
        ],
        &[],
        "",
    );
    assert_eq!(unreachable.code, 5, "{}", unreachable.stderr);
    assert!(
        unreachable
            .stderr
            .contains("could not reach http://127.0.0.1:9/v1/groups/acme/-/runners/local"),
        "{}",
        unreachable.stderr
    );

    // No URL anywhere: a usage error that says how to set one.
    let nowhere = sortie(&["list", "runners"], &[], "");
    assert_eq!(nowhere.code, 2, "{}", nowhere.stderr);
    assert!(nowhere.stderr.contains("--api-url"), "{}", nowhere.stderr);
}

#[test]
fn contexts_are_set_used_listed_and_a_token_command_authenticates() {
    sortie_testkit::require_aws!();
    let dev = Dev::start_cli();
    let config = dev.dir.join("home/config.yaml");
    let config_arg = config.to_string_lossy().into_owned();
    // The token only in the token command's environment, never in the file or a flag.
    let env = [("DEV_TOKEN", dev.token.as_str())];
    let run = |args: &[&str]| {
        let mut all = vec!["--config", config_arg.as_str()];
        all.extend_from_slice(args);
        sortie(&all, &env, &dev.token)
    };
    let ok = |args: &[&str]| {
        let out = run(args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        out.stdout
    };

    assert_eq!(
        ok(&[
            "context",
            "set",
            "dev",
            "--api-url",
            &dev.url,
            "--token-command",
            "echo $DEV_TOKEN"
        ])
        .trim(),
        "context `dev` created (now the current context)"
    );
    ok(&[
        "context",
        "set",
        "prod",
        "--api-url",
        "https://sortie.example.com",
        "--token",
        "stored-secret-1",
    ]);
    assert_eq!(ok(&["context", "current"]).trim(), "dev");
    check_mode(&config);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains(&dev.token), "{text}");

    let listed = ok(&["context", "list"]);
    assert!(!listed.contains("stored-secret-1"), "{listed}");
    assert!(
        listed.contains("token_command: echo $DEV_TOKEN"),
        "{listed}"
    );
    // The table, with fixed URLs (another file): the token shows as `(set)`.
    let fixed = dev.dir.join("fixed.yaml").to_string_lossy().into_owned();
    for args in [
        &[
            "context",
            "set",
            "dev",
            "--api-url",
            "http://127.0.0.1:8080",
            "--token-command",
            "oidc-helper --audience sortie",
        ][..],
        &[
            "context",
            "set",
            "prod",
            "--api-url",
            "https://sortie.example.com",
            "--token",
            "stored-secret-2",
        ][..],
        &["context", "set", "empty"][..],
    ] {
        let mut all = vec!["--config", fixed.as_str()];
        all.extend_from_slice(args);
        assert_eq!(sortie(&all, &[], "stored-secret-2").code, 0);
    }
    let out = sortie(
        &["--config", &fixed, "context", "list"],
        &[],
        "stored-secret-2",
    );
    insta::assert_snapshot!("contexts_listed", out.stdout);
    let listed = json(&ok(&["context", "list", "-o", "json"]));
    assert_eq!(listed[1]["token"], "(set)");

    // The token command's output authenticates.
    let file = dev.dir.join("r.yaml");
    std::fs::write(&file, local_runner("via a context")).unwrap();
    ok(&[
        "create",
        "runner",
        "acme/ctx",
        "-f",
        &file.to_string_lossy(),
    ]);
    let got = json(&ok(&["get", "runner", "acme/ctx", "-o", "json"]));
    assert_eq!(got["description"], "via a context");

    // `--context` picks another one for one command; `context use` switches.
    let unknown = run(&["context", "use", "staging"]);
    assert_eq!(unknown.code, 3, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("`dev`") && unknown.stderr.contains("`prod`"),
        "{}",
        unknown.stderr
    );
    ok(&["context", "use", "prod"]);
    assert_eq!(ok(&["context", "current"]).trim(), "prod");
    ok(&["--context", "dev", "get", "runner", "acme/ctx"]);

    // A failing token command: its stderr, not a token.
    ok(&[
        "context",
        "set",
        "broken",
        "--api-url",
        &dev.url,
        "--token-command",
        "echo half-a-token; echo helper failed >&2; exit 3",
    ]);
    let failed = run(&["--context", "broken", "list", "runners"]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(failed.stderr.contains("helper failed"), "{}", failed.stderr);
    assert!(
        !failed.stderr.contains("half-a-token\n"),
        "{}",
        failed.stderr
    );

    // Flags win over the context.
    let flagged = run(&[
        "--context",
        "broken",
        "--token",
        &dev.token,
        "list",
        "runners",
    ]);
    assert_eq!(flagged.code, 0, "{}", flagged.stderr);
}

#[cfg(unix)]
fn check_mode(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
}

#[cfg(not(unix))]
fn check_mode(_: &Path) {}
