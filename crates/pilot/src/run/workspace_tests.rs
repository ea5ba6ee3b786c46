//! Unit tests of the runner's own secrets (issue 41, gap 1): a value the runner injected
//! into the pilot's environment, named by the spec, never reaches the log, `outputs.json`
//! or a failure reason; and of a `github` source (issue 42), fetched from a fake GitHub.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sortie_core::protocol::pilot::{JobSpec, UploadKind};

use super::*;
use crate::upload::MemoryUploads;

/// A plan spec whose runner injects `names` as secrets.
fn spec(names: &[&str]) -> JobSpec {
    let mut doc: serde_json::Value = serde_json::json!({
        "job_id": "01jnx6v4k2m8q9r3s5t7w0y1za",
        "environment": "acme/web/prod",
        "operation": "plan",
        "source": {"type": "inline"},
        "state_storage": {"type": "local", "directory": "/tmp/state"},
    });
    doc["runner_secret_env"] = serde_json::json!(names);
    serde_json::from_value(doc).unwrap()
}

/// An environment holding `vars`.
fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The log as shipped: `text` written in pieces cut at `cuts`, then ended and flushed.
fn shipped(sink: &LogSink, text: &str, cuts: &[usize]) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort();
    for cut in cuts {
        sink.write(&bytes[at..cut]);
        at = cut;
    }
    sink.write(&bytes[at..]);
    sink.end();
    let store = MemoryUploads::new();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(sink.flush_to(&store))
        .unwrap();
    store
        .of(UploadKind::Log)
        .into_iter()
        .flat_map(|(_, chunk)| chunk)
        .collect()
}

proptest! {
    #[test]
    fn a_runner_injected_value_never_reaches_the_log_sink_or_outputs_json(
        value in "[A-Z0-9][A-Za-z0-9 !#%&*+/<>=@^_~.\"\\\\-]{7,39}",
        cuts in proptest::collection::vec(0usize..4096, 0..6),
    ) {
        let secrets = Secrets::new();
        let found = add_runner_secrets(
            &spec(&["TF_VAR_db_password", "RUNNER_ABSENT"]),
            env_of(&[("TF_VAR_db_password", &value), ("UNNAMED", "not a secret")]),
            &secrets,
        );
        prop_assert_eq!(&found.present, &["TF_VAR_db_password".to_string()]);
        prop_assert_eq!(&found.missing, &["RUNNER_ABSENT".to_string()]);

        // Terraform's output, as an `external` data source or an output echoing the
        // variable prints it: raw, JSON-escaped, Go-quoted.
        let json = serde_json::to_string(&value).unwrap();
        let text = format!(
            "data.external.env: Refreshing state...\nurl = pg://app:{value}@db\n{{\"@message\":\"Outputs: dsn={}\"}}\nplan: \"{}\"\n",
            &json[1..json.len() - 1],
            value.replace('\\', "\\\\").replace('"', "\\\""),
        );
        let log = shipped(&LogSink::scrubbed(false, 0, secrets.clone()), &text, &cuts);
        prop_assert!(!contains(&log, &value), "{}", String::from_utf8_lossy(&log));
        prop_assert!(!contains(&log, &json[1..json.len() - 1]));

        // `outputs.json`: a non-sensitive output built from the value.
        let outputs = serde_json::json!({
            "dsn": {"sensitive": false, "type": "string", "value": format!("pg://app:{value}@db")},
            "raw": {"sensitive": false, "type": "string", "value": value},
        })
        .to_string();
        let uploaded = crate::summary::redact_outputs(&outputs, &secrets.read()).unwrap();
        prop_assert!(!contains(&uploaded, &value));
        let decoded: serde_json::Value = serde_json::from_slice(&uploaded).unwrap();
        prop_assert!(!decoded.to_string().contains(&value));
        prop_assert!(!decoded["dsn"]["value"].as_str().unwrap().contains(&value));
    }
}

#[test]
fn a_runner_injected_value_never_reaches_the_failure_reason() {
    // The process's set, which `PilotError::reason` scrubs with.
    let value = format!("Rs3cret-{}", std::process::id());
    let found = add_runner_secrets(
        &spec(&["VAULT_TOKEN"]),
        env_of(&[("VAULT_TOKEN", &value)]),
        &Secrets::process(),
    );
    assert_eq!(found.present, ["VAULT_TOKEN"]);
    let e = PilotError::Terraform {
        tool: "terraform".into(),
        command: "plan".into(),
        code: "1".into(),
        first_error: Some(format!(
            "Error: Invalid function argument\n\n  no file exists at {value}\n"
        )),
    };
    let reason = e.reason();
    assert!(!reason.contains(&value), "{reason}");
    assert!(reason.contains(crate::scrub::MARKER), "{reason}");
}

#[test]
fn absent_or_malformed_names_are_noted_never_read_and_never_an_error() {
    let secrets = Secrets::new();
    let found = add_runner_secrets(
        &spec(&["PRESENT", "ABSENT", "BAD=NAME", "SHORT"]),
        env_of(&[
            ("PRESENT", "long-enough-value"),
            ("BAD=NAME", "x"),
            ("SHORT", "k9"),
        ]),
        &secrets,
    );
    assert_eq!(found.present, ["PRESENT", "SHORT"]);
    assert_eq!(found.missing, ["ABSENT", "BAD=NAME"]);
    // A short value is scrubbed too (the run warns by name).
    assert_eq!(
        secrets.scrub_str("a=long-enough-value b=k9"),
        format!("a={m} b={m}", m = crate::scrub::MARKER)
    );
    // No name, nothing read.
    let none = add_runner_secrets(&spec(&[]), |_| panic!("nothing to read"), &secrets);
    assert_eq!(none, RunnerSecrets::default());
}

// ---- A `github` source (issue 42): fetched with the spec's token, which never shows. ----

mod github_source {
    use std::path::PathBuf;

    use super::*;
    use crate::github_fake::{access, github_tarball, FakeGithub, Reply, SHA};
    use crate::objects::MemoryObjects;

    /// A speculative plan of `acme/infra` at [`SHA`], `path` inside it, with `access`.
    fn github_spec(
        path: &str,
        access: Option<sortie_core::protocol::pilot::SourceAccess>,
    ) -> JobSpec {
        let mut spec = spec(&[]);
        spec.source = Source::Github {
            repository: "acme/infra".into(),
            commit: SHA.into(),
            path: path.into(),
        };
        spec.source_access = access;
        spec.speculative = true;
        spec
    }

    fn env() -> PilotEnv {
        PilotEnv::from_lookup(|name| match name {
            crate::env::API_URL => Some("http://127.0.0.1:9".into()),
            crate::env::JOB_ID => Some("01jnx6v4k2m8q9r3s5t7w0y1za".into()),
            crate::env::JOB_TOKEN => Some("job-token".into()),
            _ => None,
        })
        .unwrap()
    }

    /// Runs `fetch_source` for `spec` in a fresh directory: its result, the log it wrote
    /// (scrubbed of `secrets`, as the run's sink is), and the source's root.
    async fn fetch(
        spec: &JobSpec,
        secrets: &Secrets,
    ) -> (Result<String, PilotError>, Vec<u8>, PathBuf) {
        let work = std::env::temp_dir().join(format!(
            "sortie-pilot-github-{}-{}",
            std::process::id(),
            sortie_core::tokens::random_hex(4)
        ));
        std::fs::create_dir_all(&work).unwrap();
        let root = work.join("src");
        let sink = LogSink::scrubbed(false, 0, secrets.clone());
        let result = fetch_source(&env(), spec, &sink, &MemoryObjects::new(), &work, &root).await;
        sink.end();
        let store = MemoryUploads::new();
        sink.flush_to(&store).await.unwrap();
        let log = store
            .of(UploadKind::Log)
            .into_iter()
            .flat_map(|(_, chunk)| chunk)
            .collect();
        (result, log, root)
    }

    #[tokio::test]
    async fn the_commit_is_fetched_into_the_root_and_its_path_selects_the_configuration() {
        let github = FakeGithub::start().await;
        let tarball = github_tarball(&[
            (
                "acme-infra-0123456/stacks/app/main.tf",
                "output \"x\" { value = 1 }\n",
            ),
            ("acme-infra-0123456/stacks/db/main.tf", "# db\n"),
        ]);
        github.at("/repos/acme/infra/tarball/x", Reply::Body(tarball));
        let spec = github_spec(
            "stacks/app",
            Some(access(
                &github.url("/repos/acme/infra/tarball/x"),
                "ghs_fetch_token",
            )),
        );
        let (result, log, root) = fetch(&spec, &Secrets::new()).await;
        let path = result.unwrap();
        assert_eq!(path, "stacks/app");
        let dir = crate::source::config_dir(&root, &path).unwrap();
        assert_eq!(
            crate::source::own_config_files(&dir).unwrap(),
            [(
                "main.tf".to_string(),
                "output \"x\" { value = 1 }\n".to_string()
            )]
        );
        let log = String::from_utf8(log).unwrap();
        assert!(
            log.contains("fetching github:acme/infra@0123456/stacks/app"),
            "{log}"
        );
        let _ = std::fs::remove_dir_all(root.parent().unwrap());
    }

    #[tokio::test]
    async fn a_token_echoed_by_github_never_reaches_the_log_or_the_error() {
        let github = FakeGithub::start().await;
        github.at("/repos/acme/infra/tarball/x", Reply::EchoAuthorization(401));
        let token = format!("ghs_echo_{}", sortie_core::tokens::random_hex(8));
        let spec = github_spec(
            "",
            Some(access(&github.url("/repos/acme/infra/tarball/x"), &token)),
        );
        // As the run does when the spec arrives.
        let secrets = Secrets::new();
        add_source_secrets(&spec, &secrets);
        let (result, log, _) = fetch(&spec, &secrets).await;
        let err = result.unwrap_err();
        assert!(!contains(&log, &token), "{}", String::from_utf8_lossy(&log));
        for text in [err.to_string(), format!("{err:?}"), err.reason()] {
            assert!(!text.contains(&token), "{text}");
            assert!(text.contains("Bad credentials"), "{text}");
        }
        // The fake did see it: the token was sent, and echoed.
        assert!(github.seen()[0]
            .authorization
            .as_deref()
            .is_some_and(|a| a.ends_with(&token)));
    }

    #[tokio::test]
    async fn a_token_of_the_job_alone_is_revoked_before_fetch_source_returns_even_on_failure() {
        let gitlab = FakeGithub::start().await;
        let tarball = github_tarball(&[("acme-infra-0123456/main.tf", "# hi\n")]);
        let archive = "/api/v4/projects/acme%2Finfra/repository/archive.tar.gz";
        let revoke = "/api/v4/personal_access_tokens/self";
        gitlab.at(archive, Reply::Body(tarball));
        gitlab.at(revoke, Reply::Status(204, String::new()));
        let mut with = access(&gitlab.url(archive), "glpat-the-jobs-own");
        with.revoke_url = Some(gitlab.url(revoke));
        let (result, log, root) =
            fetch(&github_spec("", Some(with.clone())), &Secrets::new()).await;
        result.unwrap();
        let calls: Vec<(String, String)> = gitlab
            .seen()
            .iter()
            .map(|s| (s.method.clone(), s.path.clone()))
            .collect();
        assert_eq!(
            calls,
            [
                ("GET".to_string(), archive.to_string()),
                ("DELETE".to_string(), revoke.to_string())
            ],
            "the token is revoked right after the download, before anything runs"
        );
        let log = String::from_utf8(log).unwrap();
        assert!(log.contains("source token revoked"), "{log}");
        let _ = std::fs::remove_dir_all(root.parent().unwrap());

        // The download refused: the token is revoked all the same.
        gitlab.at(
            archive,
            Reply::Status(404, r#"{"message":"404 Not Found"}"#.into()),
        );
        let before = gitlab.seen().len();
        let (result, _, _) = fetch(&github_spec("", Some(with.clone())), &Secrets::new()).await;
        assert!(result.is_err());
        let seen = gitlab.seen();
        assert_eq!(seen.last().map(|s| s.method.as_str()), Some("DELETE"));
        assert_eq!(seen.len() - before, 2);

        // A revocation that fails is said, and the job goes on: Sortie revokes at its end.
        gitlab.at(
            archive,
            Reply::Body(github_tarball(&[("a-0123456/main.tf", "")])),
        );
        gitlab.at(
            revoke,
            Reply::Status(403, r#"{"message":"403 Forbidden"}"#.into()),
        );
        let (result, log, root) = fetch(&github_spec("", Some(with)), &Secrets::new()).await;
        result.unwrap();
        let log = String::from_utf8(log).unwrap();
        assert!(log.contains("could not revoke the source token"), "{log}");
        assert!(log.contains("Sortie revokes it when the job ends"), "{log}");
        let _ = std::fs::remove_dir_all(root.parent().unwrap());
    }

    #[tokio::test]
    async fn a_missing_or_expired_access_fails_before_any_request() {
        let github = FakeGithub::start().await;
        let (result, _, _) = fetch(&github_spec("", None), &Secrets::new()).await;
        let err = result.unwrap_err().to_string();
        assert!(err.contains("no source_access"), "{err}");
        let mut expired = access(&github.url("/repos/acme/infra/tarball/x"), "ghs_old");
        expired.expires_at = chrono::Utc::now() - chrono::Duration::seconds(1);
        let (result, _, _) = fetch(&github_spec("", Some(expired)), &Secrets::new()).await;
        let err = result.unwrap_err().to_string();
        assert!(err.contains("expired"), "{err}");
        assert!(github.seen().is_empty());
    }
}
