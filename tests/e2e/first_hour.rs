//! Issue 24's items 3 and 4 (and the new grammar of item 7) end to end: the real `sortie`
//! binary against `sortie dev` on moto, with the real `sortie-pilot` and real Terraform.
//!
//! - Ctrl-C while `run --wait` follows a slow job, in a real pseudo-terminal: one Ctrl-C
//!   stops following (exit 130) and leaves the job running; two within 2 s and `y`
//!   cancel it.
//! - `get jobs ENV`, `list jobs ENV` and `get job ID` print what `jobs list ENV` and
//!   `job get ID` print.
//! - A refused token names its source (`SORTIE_TOKEN`, `--token`, a context's
//!   `token_command`); `whoami` prints the URL, subject, credential and memberships; a
//!   viewer approving is told the role it lacks (exit 1), a stranger gets not found (3).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use portable_pty::CommandBuilder;
use serde_json::{json, Value};

use crate::common;

use common::{Dev, DevOptions, Out, Terminal};

/// `sortie dev` with the real runner and `--user` for each of `users`.
fn launch(prefix: &str, users: &[&str]) -> Dev {
    common::start_dev(DevOptions {
        prefix,
        runner: Some(common::runner_binary()),
        users,
        ..Default::default()
    })
}

/// Writes an executable shell script.
fn script(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

impl Dev {
    /// A local runner `acme/NAME` (state in a fresh moto bucket) with extra lines, and a
    /// rule at `scope` picking it.
    fn runner(&self, name: &str, head: &str, local_extra: &str, scope: &str) {
        let bucket = common::state_bucket();
        let file = format!(
            "{head}runner_configuration:\n  type: local\n{local_extra}state_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
            sortie_testkit::endpoint()
        );
        self.api(
            "POST",
            &format!("/v1/groups/acme/-/runners/{name}"),
            Some(Value::String(file)),
        );
        self.api(
            "POST",
            &format!("/v1/groups/{scope}/-/rules"),
            Some(json!({"id": name, "runner_id": format!("acme/{name}")})),
        );
    }

    /// Creates environment `GROUP/NAME` with extra settings.
    fn environment(&self, group: &str, name: &str, settings: Value) {
        let mut body = json!({"name": name, "env_type": "development"});
        for (k, v) in settings.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.api(
            "POST",
            &format!("/v1/groups/{group}/-/environments"),
            Some(body),
        );
    }

    /// The ids of `env`'s jobs, as the API lists them.
    fn job_ids(&self, env: &str) -> Vec<String> {
        let v = self.api("GET", &format!("/v1/environments/{env}/-/jobs"), None);
        let list = v
            .as_array()
            .or_else(|| v["items"].as_array())
            .or_else(|| v["jobs"].as_array())
            .unwrap_or_else(|| panic!("a list of jobs: {v}"));
        list.iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Runs `sortie ARGS` (no terminal) with this API's URL, `env` and no user config;
    /// asserts no token was printed.
    fn sortie_first_hour(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = common::sortie_command(self);
        cmd.args(args).env_remove("SORTIE_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = Out::from(cmd.output().unwrap());
        for token in std::iter::once(self.token.as_str())
            .chain(self.users.values().filter_map(Value::as_str))
        {
            assert!(
                !out.stdout.contains(token) && !out.stderr.contains(token),
                "a token was printed: {out:?}"
            );
        }
        out
    }

    /// `sortie ARGS` with the development token; asserts exit 0; its standard output.
    fn sortie_ok(&self, args: &[&str]) -> String {
        let out = self.sortie_first_hour(args, &[("SORTIE_TOKEN", &self.token)]);
        assert_eq!(out.code, 0, "sortie {args:?}: {out:?}");
        out.stdout
    }
}

/// `sortie ARGS` in a real pseudo-terminal in the dev's directory, with its token.
fn terminal(dev: &Dev, args: &[&str]) -> Terminal {
    let mut cmd = CommandBuilder::new(sortie_tests::sortie());
    cmd.args(args);
    cmd.env("SORTIE_API_URL", &dev.url);
    cmd.env("SORTIE_TOKEN", &dev.token);
    cmd.env(
        "SORTIE_CONFIG",
        dev.dir.join("no-config.yaml").display().to_string(),
    );
    cmd.env("TERM", "dumb");
    cmd.cwd(dev.dir.as_os_str());
    Terminal::start(cmd, 250, Duration::from_secs(90))
}

const SLOW_ENV: &str = "acme/slow/hello";

/// `sortie run apply SLOW_ENV --wait` in a terminal, once its job's log has started (the
/// apply itself sleeps); the terminal and the job's id.
fn run_slow_apply(dev: &Dev) -> (Terminal, String) {
    let before = dev.job_ids(SLOW_ENV);
    let hello = sortie_testkit::example_dir("hello");
    let terminal = terminal(
        dev,
        &[
            "run",
            "apply",
            SLOW_ENV,
            "--source",
            hello.to_str().unwrap(),
            "--var",
            "greeting=slow",
            "--wait",
        ],
    );
    // Terraform's init is in the log: the job runs, and its apply sleeps.
    terminal.expect("Initializing the backend");
    let id = dev
        .job_ids(SLOW_ENV)
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("the run's job");
    let job = dev.job(&id);
    assert_eq!(job["state"], "running", "{job}");
    (terminal, id)
}

/// Item 3 (Ctrl-C) through a real `sortie dev`, then the new grammar on the same jobs.
#[test]
fn ctrl_c_while_following_a_real_job_stops_following_and_a_second_ctrl_c_cancels_it() {
    sortie_testkit::require_aws!();
    let dev = launch("first-hour-ctrl-c", &[]);
    // Terraform's `apply` sleeps: a job that runs until it is canceled (the local
    // launcher stops the runner's whole process group).
    let terraform = script(
        &dev.dir.join("slow-terraform"),
        &format!(
            "#!/bin/sh\ncase \"$1\" in apply) sleep 300;; esac\nexec '{}' \"$@\"\n",
            sortie_testkit::terraform_bin().display()
        ),
    );
    let runner = script(
        &dev.dir.join("slow-runner.sh"),
        &format!(
            "#!/bin/sh\nSORTIE_TERRAFORM='{}'\nexport SORTIE_TERRAFORM\nexec '{}' \"$@\"\n",
            terraform.display(),
            common::runner_binary().display()
        ),
    );
    dev.runner(
        "slow",
        "",
        &format!("  runner_binary: {}\n", runner.display()),
        "acme",
    );
    dev.environment("acme/slow", "hello", json!({}));

    // One Ctrl-C: the message, exit 130, and the job goes on.
    let (mut terminal, first) = run_slow_apply(&dev);
    terminal.send(b"\x03");
    terminal.expect(&format!(
        "stopped following; job {first} is still running. Follow again: sortie job logs -f {first} · Cancel: sortie job cancel {first}"
    ));
    assert_eq!(terminal.exit_code(Duration::from_secs(15)), 130);
    let text = terminal.text();
    assert!(!text.contains("Cancel job"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    std::thread::sleep(Duration::from_secs(1));
    let job = dev.job(&first);
    assert_eq!(job["state"], "running", "the job goes on: {job}");
    assert!(job.get("cancel_requested_by").is_none(), "{job}");
    // Out of the way of the next run (one writer at a time).
    dev.sortie_ok(&["job", "cancel", &first]);
    dev.wait_job(&first, "canceled", |j| j["state"] == "canceled");

    // Two Ctrl-C within 2 s, and `y`: the job ends canceled.
    let (mut terminal, second) = run_slow_apply(&dev);
    terminal.send(b"\x03");
    terminal.expect("stopped following");
    terminal.send(b"\x03");
    terminal.expect(&format!("Cancel job {second}? [y/N]"));
    terminal.send(b"y\r");
    terminal.expect("cancel requested");
    assert_eq!(terminal.exit_code(Duration::from_secs(15)), 130);
    let job = dev.wait_job(&second, "canceled", |j| {
        !["queued", "dispatching", "running"].contains(&j["state"].as_str().unwrap())
    });
    assert_eq!(job["state"], "canceled", "{job}");
    assert!(job["cancel_requested_by"].is_string(), "{job}");

    // Item 7's grammar against the real API: the same jobs either way.
    let listed = dev.sortie_ok(&["jobs", "list", SLOW_ENV]);
    for id in [&first, &second] {
        assert!(listed.contains(id.as_str()), "{listed}");
    }
    assert_eq!(dev.sortie_ok(&["get", "jobs", SLOW_ENV]), listed);
    assert_eq!(dev.sortie_ok(&["list", "jobs", SLOW_ENV]), listed);
    let json_listed = dev.sortie_ok(&["-o", "json", "jobs", "list", SLOW_ENV]);
    assert_eq!(
        dev.sortie_ok(&["-o", "json", "get", "jobs", SLOW_ENV]),
        json_listed
    );
    let shown = dev.sortie_ok(&["job", "get", &second]);
    assert!(
        shown.contains(second.as_str()) && shown.contains("canceled"),
        "{shown}"
    );
    assert_eq!(dev.sortie_ok(&["get", "job", &second]), shown);
}

/// Item 4 through a real `sortie dev`: a refused token names its source, `whoami`, and a
/// viewer's or a stranger's approve.
#[test]
fn errors_name_the_credential_whoami_tells_who_and_approve_names_the_missing_role() {
    sortie_testkit::require_aws!();
    let dev = launch("first-hour-errors", &["alice", "carol", "dave"]);
    dev.runner("tf1", "tool_version: \"1.0.3\"\n", "", "acme");
    dev.environment("acme/demo", "prod", json!({"approval": "required"}));

    // A bad token names its source, by name, and never talks about headers.
    let get_env = ["get", "env", "acme/demo/prod"];
    let check = |out: &Out, names: &str| {
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains(names), "names {names}: {out:?}");
        assert!(
            !out.stderr.to_lowercase().contains("header"),
            "talks about headers: {out:?}"
        );
    };
    let out = dev.sortie_first_hour(&get_env, &[("SORTIE_TOKEN", "wrong")]);
    check(&out, "SORTIE_TOKEN");
    let mut args = get_env.to_vec();
    args.extend(["--token", "wrong"]);
    let out = dev.sortie_first_hour(&args, &[]);
    check(&out, "--token");
    assert!(!out.stderr.contains("SORTIE_TOKEN"), "{out:?}");
    let config = dev.dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "current_context: stale\ncontexts:\n  stale:\n    api_url: {}\n    token_command: echo wrong\n",
            dev.url
        ),
    )
    .unwrap();
    let mut cmd = Command::new(sortie_tests::sortie());
    let out = cmd
        .args(get_env)
        .env_remove("SORTIE_API_URL")
        .env_remove("SORTIE_TOKEN")
        .env("SORTIE_CONFIG", &config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = Out::from(out);
    check(&out, "`stale`");
    assert!(out.stderr.contains("token_command"), "{out:?}");
    // The good token works.
    assert!(dev.sortie_ok(&get_env).contains("prod"));
    // The real API's health has Sortie's shape: a missing environment is not found (3),
    // while a URL that is not the API's base is said to be that (5).
    let out = dev.sortie_first_hour(
        &["get", "env", "acme/demo/nope"],
        &[("SORTIE_TOKEN", &dev.token)],
    );
    assert_eq!(out.code, 3, "{out:?}");
    assert!(!out.stderr.contains("not a Sortie API"), "{out:?}");
    let elsewhere = format!("{}/console", dev.url.trim_end_matches('/'));
    let out = dev.sortie_first_hour(
        &["get", "env", "acme/demo/prod", "--api-url", &elsewhere],
        &[("SORTIE_TOKEN", &dev.token)],
    );
    assert_eq!(out.code, 5, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("{elsewhere} is not a Sortie API")),
        "{out:?}"
    );

    // whoami: the URL, the subject, the credential's source and the memberships.
    dev.sortie_ok(&[
        "members",
        "grant",
        "--group",
        "acme",
        "--role",
        "deployer",
        "--subject",
        "alice",
    ]);
    dev.sortie_ok(&[
        "members",
        "grant",
        "--group",
        "acme",
        "--role",
        "viewer",
        "--subject",
        "carol",
    ]);
    let alice = dev.user("alice");
    let out = dev.sortie_first_hour(&["whoami", "--org", "acme"], &[("SORTIE_TOKEN", &alice)]);
    assert_eq!(out.code, 0, "{out:?}");
    for shown in [
        dev.url.as_str(),
        "alice",
        "SORTIE_TOKEN",
        "acme",
        "deployer",
    ] {
        assert!(out.stdout.contains(shown), "whoami shows {shown}: {out:?}");
    }
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("organisations:") && l.ends_with(" acme")),
        "whoami names alice's organisations: {out:?}"
    );
    let out = dev.sortie_first_hour(
        &["-o", "json", "whoami", "--org", "acme"],
        &[("SORTIE_TOKEN", &alice)],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let who: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(who["subject"], "alice", "{who}");
    assert_eq!(
        who["api_url"].as_str().unwrap().trim_end_matches('/'),
        dev.url.trim_end_matches('/')
    );
    assert_eq!(who["credential"], "the variable SORTIE_TOKEN", "{who}");
    assert_eq!(
        who["memberships"],
        json!([{"group": "acme", "role": "deployer"}]),
        "{who}"
    );
    assert_eq!(who["organisations"], json!(["acme"]), "{who}");

    // A job awaiting approval: a viewer is told the role it lacks (exit 1); a user with
    // no membership in the organisation does not see the job (exit 3).
    let hello = sortie_testkit::example_dir("hello");
    let submitted = dev.sortie_ok(&[
        "-o",
        "json",
        "run",
        "apply",
        "acme/demo/prod",
        "--source",
        hello.to_str().unwrap(),
    ]);
    let id = serde_json::from_str::<Value>(&submitted).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let awaiting = dev.wait_job(&id, "awaiting approval", |j| {
        !["queued", "dispatching", "running"].contains(&j["state"].as_str().unwrap())
    });
    assert_eq!(awaiting["state"], "awaiting_approval", "{awaiting}");
    let carol = dev.user("carol");
    let out = dev.sortie_first_hour(&["job", "approve", &id], &[("SORTIE_TOKEN", &carol)]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("deployer"), "{out:?}");
    let out = dev.sortie_first_hour(&["job", "discard", &id], &[("SORTIE_TOKEN", &carol)]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("deployer"), "{out:?}");
    let dave = dev.user("dave");
    let out = dev.sortie_first_hour(&["job", "approve", &id], &[("SORTIE_TOKEN", &dave)]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("not found"), "{out:?}");
    // Neither decided anything.
    assert_eq!(dev.job(&id)["state"], "awaiting_approval");
}
