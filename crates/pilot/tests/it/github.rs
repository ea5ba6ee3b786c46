//! Pull-request plans (issue 42), end to end through the real `sortie-pilot` binary: a
//! `github` source downloaded from a fake GitHub on loopback (its API redirecting to a
//! "codeload" on another port), and speculative plans, which take no state lock and may do
//! nothing but plan.

use std::collections::BTreeMap;

use serde_json::Value;
use sortie_core::protocol::pilot::JobSpec;
use sortie_core::{ChangeSummary, Operation, Source, StateStorageConfiguration};

use crate::github_fake::{access, github_tarball, FakeGithub, Reply, SHA};
use crate::pilot::{
    commands, create_lock_table, describe, fake_terraform, hold_lock, last_line, text, World, TOKEN,
};

/// GitHub's tarball path for `acme/infra` at [`SHA`].
fn tarball_path() -> String {
    format!("/repos/acme/infra/tarball/{SHA}")
}

/// `spec` from a `github` source (`acme/infra` at [`SHA`], `path`) served at `url` with
/// `token`, speculative or not.
fn from_github(spec: &mut JobSpec, url: &str, token: &str, path: &str, speculative: bool) {
    spec.source = Source::Github {
        repository: "acme/infra".into(),
        commit: SHA.into(),
        path: path.into(),
    };
    spec.source_access = Some(access(url, token));
    spec.speculative = speculative;
    spec.files = BTreeMap::new();
}

/// A terraform that writes each of its command lines to `$FAKE_TF_RECORD` and fails: it
/// must never be run.
const RECORDING_TERRAFORM: &str = "#!/bin/sh\necho \"$*\" >> \"$FAKE_TF_RECORD\"\nexit 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speculative_apply_is_refused_before_any_terraform_command() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let dir = sortie_testkit::scratch_dir("runner-speculative-apply").unwrap();
    let tool = fake_terraform(&dir, RECORDING_TERRAFORM);
    let record = dir.join("record.txt");

    for operation in [Operation::Apply, Operation::Destroy] {
        let mut spec = world.spec(operation, Source::inline(), crate::pilot::hello_files());
        spec.speculative = true;
        spec.report_exit = true;
        let output = world
            .run_configured(&spec.job_id, &spec, TOKEN, |command| {
                command
                    .env("SORTIE_TERRAFORM", &tool)
                    .env("FAKE_TF_RECORD", &record);
            })
            .await;
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        assert!(
            !record.exists(),
            "terraform was run: {:?}",
            std::fs::read_to_string(&record)
        );
        let log = world.log(&spec).await;
        assert!(commands(&log).is_empty(), "{log}");
        let last = last_line(&log);
        assert!(
            last.contains("refused: a speculative job") && last.contains(operation.as_str()),
            "{log}"
        );
        let exits = world.api.exits(&spec.job_id);
        assert_eq!(exits.len(), 1);
        assert!(
            exits[0]
                .exit
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("speculative")),
            "{:?}",
            exits[0].exit
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_github_token_echoed_in_an_error_never_reaches_the_log_the_output_or_the_exit_report() {
    sortie_testkit::require_aws!();
    let world = World::new().await;
    let github = FakeGithub::start().await;
    // A server error: retried, so each failure is also logged on stderr before the end.
    github.at(&tarball_path(), Reply::EchoAuthorization(500));
    let token = format!("ghs_{}", sortie_core::tokens::random_hex(16));
    let mut spec = world.spec(Operation::Plan, Source::inline(), BTreeMap::new());
    from_github(&mut spec, &github.url(&tarball_path()), &token, "", true);
    spec.report_exit = true;

    let output = world
        .run_configured(&spec.job_id, &spec, TOKEN, |_| {})
        .await;
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    // GitHub did get it, and sent it back, at each of the attempts.
    assert_eq!(github.seen().len(), 3);
    assert!(text(&output.stderr).contains("call failed; retrying"));
    assert!(github.seen()[0]
        .authorization
        .as_deref()
        .is_some_and(|a| a.ends_with(&token)));
    let log = world.log(&spec).await;
    let reason = world.api.exits(&spec.job_id)[0]
        .exit
        .reason
        .clone()
        .unwrap();
    for (what, seen) in [
        ("log", log.clone()),
        ("stdout", text(&output.stdout)),
        ("stderr", text(&output.stderr)),
        ("exit report", reason.clone()),
    ] {
        assert!(!seen.contains(&token), "the token is in the {what}: {seen}");
    }
    assert!(
        last_line(&log).contains("500 Internal Server Error: Bad credentials"),
        "{log}"
    );
    assert!(reason.contains("Bad credentials"), "{reason}");
}

/// A configuration of `terraform_data` resources named `names` (Terraform 1.4+, built in).
fn data_resources(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("resource \"terraform_data\" \"{n}\" {{\n  input = \"{n}\"\n}}\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_1_11_plans_a_github_commit_speculatively_while_another_apply_holds_the_lock() {
    sortie_testkit::require_aws!();
    let tf = sortie_testkit::terraform111_bin();
    let world = World::new().await;
    let table = create_lock_table().await;
    let with_lock_table = |mut spec: JobSpec| {
        if let StateStorageConfiguration::S3(s3) = &mut spec.state_storage {
            s3.dynamodb_table = Some(table.clone());
        }
        spec
    };
    let run = |spec: JobSpec| {
        let (world, tf) = (&world, tf.clone());
        async move {
            world
                .run_configured(&spec.job_id, &spec, TOKEN, |command| {
                    command.env("SORTIE_TERRAFORM", tf);
                })
                .await
        }
    };

    // The environment's state: resource `a`, applied.
    let applied = with_lock_table(world.spec(
        Operation::Apply,
        Source::inline(),
        BTreeMap::from([("main.tf".to_string(), data_resources(&["a"]))]),
    ));
    let output = run(applied.clone()).await;
    assert!(output.status.success(), "{}", describe(&output));

    // Another apply (of `a` and `c`) waits at its prompt, holding the state lock.
    let (holder, holder_dir) = hold_lock(
        tf.clone(),
        sortie_pilot::version::ToolVersion::terraform(1, 11, 4),
        &applied,
        BTreeMap::from([("main.tf".to_string(), data_resources(&["a", "c"]))]),
    )
    .await;

    // The pull request's commit adds `b`; GitHub redirects to codeload on another port.
    let api = FakeGithub::start().await;
    let codeload = FakeGithub::start().await;
    let tarball = github_tarball(&[
        ("acme-infra-0123456/README.md", "# infra\n"),
        (
            "acme-infra-0123456/stacks/app/main.tf",
            &data_resources(&["a", "b"]),
        ),
    ]);
    codeload.at("/acme/infra/legacy.tar.gz/x", Reply::Body(tarball));
    api.at(
        &tarball_path(),
        Reply::Redirect(codeload.url("/acme/infra/legacy.tar.gz/x?token=codeload-own")),
    );
    let token = format!("ghs_{}", sortie_core::tokens::random_hex(16));
    let mut speculative = world.spec(Operation::Plan, Source::inline(), BTreeMap::new());
    speculative.state_key = applied.state_key.clone();
    let mut speculative = with_lock_table(speculative);
    from_github(
        &mut speculative,
        &api.url(&tarball_path()),
        &token,
        "stacks/app",
        true,
    );
    let output = run(speculative.clone()).await;

    // The same plan, not speculative, while the lock is still held: Terraform's lock error.
    let mut locking = speculative.clone();
    locking.job_id = sortie_testkit::unique("job").into();
    locking.speculative = false;
    let locked_out = run(locking.clone()).await;
    let (held_status, held) = holder.release();
    let _ = std::fs::remove_dir_all(&holder_dir);

    assert!(
        output.status.success(),
        "{}\n--- the lock holder\n{held}",
        describe(&output)
    );
    let log = world.log(&speculative).await;
    let commands = commands(&log);
    assert!(
        commands.contains(&"terraform plan -input=false -no-color -lock=false -out=plan.tfplan"),
        "{log}"
    );
    assert!(
        commands.iter().all(|c| !c.starts_with("terraform apply")),
        "{log}"
    );
    assert!(
        log.contains("fetching github:acme/infra@0123456/stacks/app"),
        "{log}"
    );
    assert!(!log.contains(&token), "{log}");
    assert!(!text(&output.stdout).contains(&token));
    assert_eq!(
        world.api.summary(&speculative.job_id),
        Some(ChangeSummary {
            add: 1,
            change: 0,
            destroy: 0,
            has_changes: None,
        })
    );
    assert!(
        last_line(&log).contains("plan (speculative: no state lock) succeeded: 1 to add"),
        "{log}"
    );
    // The token went to GitHub's API, never to codeload.
    assert!(api.seen()[0]
        .authorization
        .as_deref()
        .is_some_and(|a| a.ends_with(&token)));
    assert!(codeload.seen().iter().all(|s| s.authorization.is_none()));

    assert_eq!(
        locked_out.status.code(),
        Some(1),
        "{}",
        describe(&locked_out)
    );
    let locked_log = world.log(&locking).await;
    assert!(
        last_line(&locked_log).contains("Error acquiring the state lock"),
        "{locked_log}"
    );
    assert!(
        !held_status.success() && !held.contains("Apply complete!"),
        "the holder ended without applying: {held_status}\n{held}"
    );

    // The state is still `a` alone: nothing the plans saw was written.
    let key = applied.state_key.clone().unwrap();
    let StateStorageConfiguration::S3(s3) = &applied.state_storage else {
        unreachable!("world.spec uses s3 storage")
    };
    let state: Value =
        serde_json::from_slice(&world.object_in(&s3.bucket, &key).await.unwrap()).unwrap();
    let names: Vec<&str> = state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["a"]);
}
