//! One case per value that AWS or DynamoDB would refuse (or that smuggles data), found by
//! a black-box run: each must be refused at parsing, with a problem at its exact field path.
//!
//! Every case here was accepted by the code before `limits.rs` (see the commit that adds
//! this file); the unknown-field table also covers the structs that already refused them.

use serde_json::{json, Value};
use sortie_core::problems::{Fields, Problems};
use sortie_core::{Grantee, JobRequest, RunnerRule, RunnerSpec, ValidationError};

/// A valid `ecs-fargate` runner on S3 state.
fn ecs() -> Value {
    json!({
        "runner_configuration": {
            "type": "ecs-fargate",
            "role_arn": "arn:aws:iam::123456789012:role/sortie-launcher",
            "external_id": "payments-7f3a",
            "region": "eu-west-1",
            "cluster": "runners",
            "task_definition": "sortie-runner:3",
            "container_name": "runner",
            "subnets": ["subnet-0123456789abcdef0"],
            "security_groups": ["sg-0123456789abcdef0"],
            "secrets": {"DB_PASSWORD": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"}
        },
        "state_storage_configuration": {"type": "s3", "bucket": "acme-tf-state", "region": "eu-west-1"}
    })
}

/// A valid `eks` runner on S3 state.
fn eks() -> Value {
    json!({
        "runner_configuration": {
            "type": "eks",
            "role_arn": "arn:aws:iam::123456789012:role/sortie-launcher",
            "external_id": "eks-ext",
            "region": "us-east-1",
            "cluster": "platform",
            "job": {
                "namespace": "sortie-runner",
                "service_account": "sortie-runner",
                "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sortie-runner:1.0.0",
                "node_selector": {"disktype": "ssd"},
                "tolerations": [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                "resources": {"requests": {"cpu": "500m"}}
            }
        },
        "state_storage_configuration": {"type": "s3", "bucket": "acme-tf-state", "region": "us-east-1"}
    })
}

/// A valid job request.
fn job() -> Value {
    json!({
        "operation": "plan",
        "source": {"type": "git", "url": "https://git.example.com/acme/infra.git", "ref": "main"},
        "variables": {"region": "eu-west-1"},
        "files": {"extra.auto.tfvars.json": "{}"},
        "secret_refs": {"TF_VAR_token": "arn:aws:ssm:eu-west-1:123456789012:parameter/ci/token"}
    })
}

/// A valid rule.
fn rule() -> Value {
    json!({"id": "prod", "scope": "acme", "runner_id": "acme/fargate", "criteria": {"labels": {"tier": "web"}}})
}

/// A valid membership grant body, as the API decodes it.
fn grant() -> Value {
    json!({"role": "deployer", "grantee": {"kind": "subject", "subject": "x", "issuer": "https://token.actions.githubusercontent.com"}})
}

/// Decodes a membership grant the way the API does (`Fields` over the body, `Grantee` by serde).
fn decode_grant(doc: &Value) -> Result<(), ValidationError> {
    let mut p = Problems::default();
    let mut f = Fields::new(doc, "", &mut p).expect("a mapping");
    let _: Option<sortie_core::Role> = f.required("role", &mut p);
    let _: Option<Grantee> = f.required("grantee", &mut p);
    f.finish(&mut p);
    p.finish(())
}

/// Sets the value at a JSON pointer (creating nothing: the parent must exist).
fn with(mut doc: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let parent = doc.pointer_mut(parent).expect("the parent exists");
    match parent {
        Value::Object(m) => {
            m.insert(key.replace("~1", "/").replace("~0", "~"), value);
        }
        Value::Array(a) => a[key.parse::<usize>().unwrap()] = value,
        _ => panic!("not a container"),
    }
    doc
}

#[derive(Clone, Copy)]
enum Kind {
    Runner,
    Job,
    Rule,
    Grant,
}

fn check(kind: Kind, doc: &Value) -> Result<(), ValidationError> {
    match kind {
        Kind::Runner => RunnerSpec::from_value(doc).map(drop),
        Kind::Job => JobRequest::from_value(doc).map(drop),
        Kind::Rule => RunnerRule::from_value(doc).map(drop),
        Kind::Grant => decode_grant(doc),
    }
}

/// `n` levels of nested maps around a string.
fn nested(n: usize) -> Value {
    (0..n).fold(json!("leaf"), |inner, _| json!({ "a": inner }))
}

/// `(case, kind, document, the one problem path expected)`.
fn cases() -> Vec<(&'static str, Kind, Value, &'static str)> {
    use Kind::*;
    let rc = "/runner_configuration";
    let role = |v: &str| with(ecs(), &format!("{rc}/role_arn"), json!(v));
    let seventeen: Vec<String> = (0..17).map(|i| format!("subnet-{i:017x}")).collect();
    let six: Vec<String> = (0..6).map(|i| format!("sg-{i:017x}")).collect();
    let secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf";
    let long_name = "r".repeat(65);
    vec![
        // Malformed role ARNs.
        (
            "role ARN in an unknown partition",
            Runner,
            role("arn:aws-mars:iam::123456789012:role/x"),
            "runner_configuration.role_arn",
        ),
        (
            "role ARN with a space",
            Runner,
            role("arn:aws:iam::123456789012:role/sortie launcher"),
            "runner_configuration.role_arn",
        ),
        (
            "role ARN with a newline",
            Runner,
            role("arn:aws:iam::123456789012:role/sortie\nlauncher"),
            "runner_configuration.role_arn",
        ),
        (
            "role name longer than IAM allows",
            Runner,
            role(&format!("arn:aws:iam::123456789012:role/{long_name}")),
            "runner_configuration.role_arn",
        ),
        (
            "role path without its closing slash",
            Runner,
            role("arn:aws:iam::123456789012:role/team/x/"),
            "runner_configuration.role_arn",
        ),
        (
            "task role ARN in an unknown partition",
            Runner,
            with(
                ecs(),
                &format!("{rc}/task_role_arn"),
                json!("arn:awsx:iam::123456789012:role/x"),
            ),
            "runner_configuration.task_role_arn",
        ),
        // ExternalId outside STS's character set.
        (
            "external_id with a space",
            Runner,
            with(ecs(), &format!("{rc}/external_id"), json!("ext id")),
            "runner_configuration.external_id",
        ),
        (
            "external_id with a newline",
            Runner,
            with(ecs(), &format!("{rc}/external_id"), json!("ext\nid")),
            "runner_configuration.external_id",
        ),
        // More subnets or security groups than ECS allows.
        (
            "17 subnets",
            Runner,
            with(ecs(), &format!("{rc}/subnets"), json!(seventeen)),
            "runner_configuration.subnets[16]",
        ),
        (
            "6 security groups",
            Runner,
            with(ecs(), &format!("{rc}/security_groups"), json!(six)),
            "runner_configuration.security_groups[5]",
        ),
        // A secret ARN followed by a newline or a space and a clear value.
        (
            "secret ARN, newline, clear value",
            Runner,
            with(
                ecs(),
                &format!("{rc}/secrets/DB_PASSWORD"),
                json!(format!("{secret}\nhunter2")),
            ),
            "runner_configuration.secrets.DB_PASSWORD",
        ),
        (
            "secret ARN, space, clear value",
            Runner,
            with(
                ecs(),
                &format!("{rc}/secrets/DB_PASSWORD"),
                json!(format!("{secret} hunter2")),
            ),
            "runner_configuration.secrets.DB_PASSWORD",
        ),
        (
            "job secret ref, newline, clear value",
            Job,
            with(
                job(),
                "/secret_refs/TF_VAR_token",
                json!("arn:aws:ssm:eu-west-1:123456789012:parameter/ci/token\nhunter2"),
            ),
            "secret_refs.TF_VAR_token",
        ),
        (
            "git credentials secret, space, clear value",
            Job,
            with(
                job(),
                "/source/credentials_secret",
                json!(format!("{secret} hunter2")),
            ),
            "source.credentials_secret",
        ),
        // Empty label keys.
        (
            "empty label key in rule criteria",
            Rule,
            with(rule(), "/criteria/labels", json!({"": "web"})),
            "criteria.labels.\"\"",
        ),
        (
            "empty node_selector key",
            Runner,
            with(
                eks(),
                &format!("{rc}/job/node_selector"),
                json!({"": "ssd"}),
            ),
            "runner_configuration.job.node_selector.\"\"",
        ),
        // File names with control characters.
        (
            "file name with a bell",
            Job,
            with(job(), "/files", json!({"main\u{7}.tf": ""})),
            "files.\"main\\u{7}.tf\"",
        ),
        (
            "file name with a newline",
            Job,
            with(job(), "/files", json!({"a\nb.tf": ""})),
            "files.\"a\\nb.tf\"",
        ),
        // Invalid S3 bucket names.
        (
            "bucket shaped like an IP address",
            Runner,
            with(
                ecs(),
                "/state_storage_configuration/bucket",
                json!("192.168.5.4"),
            ),
            "state_storage_configuration.bucket",
        ),
        (
            "bucket with the xn-- prefix",
            Runner,
            with(
                ecs(),
                "/state_storage_configuration/bucket",
                json!("xn--state"),
            ),
            "state_storage_configuration.bucket",
        ),
        (
            "bucket with the -s3alias suffix",
            Runner,
            with(
                ecs(),
                "/state_storage_configuration/bucket",
                json!("state-s3alias"),
            ),
            "state_storage_configuration.bucket",
        ),
        (
            "bucket with the --ol-s3 suffix",
            Runner,
            with(
                ecs(),
                "/state_storage_configuration/bucket",
                json!("state--ol-s3"),
            ),
            "state_storage_configuration.bucket",
        ),
        (
            "job source bucket with capitals",
            Job,
            with(
                job(),
                "/source",
                json!({"type": "s3", "bucket": "Acme_Src", "key": "src.tgz", "sha256": "a".repeat(64)}),
            ),
            "source.bucket",
        ),
        // A misspelled grantee field.
        (
            "grantee with a misspelled issuer",
            Grant,
            with(
                grant(),
                "/grantee",
                json!({"kind": "subject", "subject": "x", "isuer": "https://token.actions.githubusercontent.com"}),
            ),
            "grantee.isuer",
        ),
        (
            "claim-pattern grantee with an unknown field",
            Grant,
            with(
                grant(),
                "/grantee",
                json!({"kind": "claim_pattern", "claim": "sub", "pattern": "repo:*", "issuer": "i", "extra": 1}),
            ),
            "grantee.extra",
        ),
        // DynamoDB: nesting, empty map keys, item size.
        (
            "variables 40 levels deep",
            Job,
            with(job(), "/variables/deep", nested(40)),
            "variables.deep",
        ),
        (
            "empty map key inside a variable",
            Job,
            with(job(), "/variables/tags", json!({"team": "a", "": "b"})),
            "variables.tags.\"\"",
        ),
        (
            "empty variable name",
            Job,
            with(job(), "/variables/", json!("x")),
            "variables.\"\"",
        ),
        (
            "job item over 400 KB",
            Job,
            with(job(), "/variables/blob", json!("x".repeat(450 * 1024))),
            "",
        ),
        (
            "pod_template deeper than the runner item allows",
            Runner,
            with(eks(), &format!("{rc}/job/pod_template"), nested(31)),
            "runner_configuration.job.pod_template",
        ),
    ]
}

#[test]
fn the_base_documents_are_valid() {
    for (name, kind, doc) in [
        ("ecs", Kind::Runner, ecs()),
        ("eks", Kind::Runner, eks()),
        ("job", Kind::Job, job()),
        ("rule", Kind::Rule, rule()),
        ("grant", Kind::Grant, grant()),
    ] {
        check(kind, &doc).unwrap_or_else(|e| panic!("{name} must be valid: {e}"));
    }
}

#[test]
fn every_value_aws_or_dynamodb_would_refuse_is_refused_at_its_path() {
    let mut failures = Vec::new();
    for (name, kind, doc, want) in cases() {
        match check(kind, &doc) {
            Ok(()) => failures.push(format!("{name}: accepted, want a problem at `{want}`")),
            Err(e) => {
                let got: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
                if got != [want] {
                    failures.push(format!(
                        "{name}: want exactly [`{want}`], got {got:?} ({e})"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unknown_fields_are_refused_in_every_decoded_struct() {
    use Kind::*;
    let rc = "/runner_configuration";
    let table = [
        (Runner, ecs(), "/typo", "typo"),
        (
            Runner,
            ecs(),
            &format!("{rc}/typo") as &str,
            "runner_configuration.typo",
        ),
        (
            Runner,
            eks(),
            &format!("{rc}/job/typo"),
            "runner_configuration.job.typo",
        ),
        (
            Runner,
            eks(),
            &format!("{rc}/job/tolerations/0/typo"),
            "runner_configuration.job.tolerations[0].typo",
        ),
        (
            Runner,
            eks(),
            &format!("{rc}/job/resources/typo"),
            "runner_configuration.job.resources.typo",
        ),
        (
            Runner,
            ecs(),
            "/state_storage_configuration/typo",
            "state_storage_configuration.typo",
        ),
        (Job, job(), "/typo", "typo"),
        (Job, job(), "/source/typo", "source.typo"),
        (Rule, rule(), "/typo", "typo"),
        (Rule, rule(), "/criteria/typo", "criteria.typo"),
        (Grant, grant(), "/typo", "typo"),
        (Grant, grant(), "/grantee/typo", "grantee.typo"),
    ]
    .map(|(k, d, p, w)| (k, d, p.to_string(), w));
    let mut failures = Vec::new();
    for (kind, doc, pointer, want) in table {
        let doc = with(doc, &pointer, json!(1));
        match check(kind, &doc) {
            Ok(()) => failures.push(format!("{pointer}: accepted")),
            Err(e) => {
                let got: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
                if got != [want] {
                    failures.push(format!("{pointer}: want [`{want}`], got {got:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn environment_bodies_refuse_empty_label_keys_and_unknown_fields() {
    use sortie_core::environment::EnvironmentInput;
    let ok = EnvironmentInput::from_value(
        &json!({"name": "prod", "env_type": "production", "labels": {"tier": "web"}, "tags": ["spot"]}),
        true,
    )
    .expect("valid");
    assert_eq!(ok.name.as_deref(), Some("prod"));
    for (doc, creating, want) in [
        (
            json!({"name": "prod", "env_type": "production", "labels": {"": "web"}}),
            true,
            "labels.\"\"",
        ),
        (json!({"labels": {"": "web"}}), false, "labels.\"\""),
        (json!({"tags": ["", "spot"]}), false, "tags[0]"),
        (
            json!({"env_type": "production", "lables": {}}),
            false,
            "lables",
        ),
    ] {
        let e = EnvironmentInput::from_value(&doc, creating).unwrap_err();
        let got: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(got, [want], "{doc}");
    }
}

#[test]
fn an_environment_path_fits_a_session_tag() {
    use sortie_core::names::MAX_ENV_PATH_LEN;
    // Three 63-character segments and a 1-character one: 63 × 3 + 1 + 3 slashes = 193.
    let segs: Vec<String> = (0..3).map(|i| format!("{i}{}", "g".repeat(62))).collect();
    let group = sortie_core::GroupPath::parse(&format!("{}/x", segs.join("/"))).unwrap();
    let name = |len: usize| "e".repeat(len);
    // 193 + "/" + 62 = 256: accepted; 193 + "/" + 63 = 257: refused.
    let fits = MAX_ENV_PATH_LEN - 194;
    assert_eq!(fits, 62);
    let ok = sortie_core::EnvPath::new(group.clone(), &name(fits)).expect("256 characters fit");
    assert_eq!(ok.to_string().len(), MAX_ENV_PATH_LEN);
    let e = sortie_core::EnvPath::new(group, &name(fits + 1)).unwrap_err();
    assert!(e.to_string().contains("AWS tag value"), "{e}");
}

#[test]
fn change_summaries_refuse_unknown_fields() {
    let ok: Result<sortie_core::ChangeSummary, _> =
        serde_json::from_value(json!({"add": 1, "change": 0, "destroy": 0}));
    assert!(ok.is_ok());
    let typo: Result<sortie_core::ChangeSummary, _> =
        serde_json::from_value(json!({"add": 1, "change": 0, "destory": 0}));
    assert!(typo.is_err());
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use sortie_core::limits;

    /// Any string with at least one control character somewhere.
    fn with_control() -> impl Strategy<Value = String> {
        (
            "[a-zA-Z0-9/._-]{0,20}",
            prop::sample::select(vec![
                '\0', '\u{7}', '\t', '\n', '\r', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}',
            ]),
            "[a-zA-Z0-9/._-]{0,20}",
        )
            .prop_map(|(a, c, b)| format!("{a}{c}{b}"))
    }

    proptest! {
        #[test]
        fn a_file_name_with_a_control_character_is_refused(name in with_control()) {
            let doc = with(job(), "/files", json!({ name.clone(): "x" }));
            let e = JobRequest::from_value(&doc).unwrap_err();
            let want = sortie_core::problems::key_path("files", &name);
            prop_assert_eq!(e.problems.len(), 1);
            prop_assert_eq!(&e.problems[0].path, &want);
        }

        #[test]
        fn a_secret_arn_with_a_control_character_or_space_is_refused(
            tail in with_control(),
            sep in prop::sample::select(vec![" ", "\n", "\t", "\u{a0}", ""]),
        ) {
            let arn = format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf{sep}{tail}");
            prop_assert!(!limits::is_secret_ref(&arn));
            let arn = format!("arn:aws:ssm:eu-west-1:123456789012:parameter/app{sep}{tail}");
            prop_assert!(!limits::is_secret_ref(&arn));
        }

        #[test]
        fn every_accepted_bucket_name_follows_the_rules(name in "[a-z0-9.-]{1,70}|[a-zA-Z0-9._ -]{1,10}") {
            if limits::is_bucket_name(&name) {
                let b = name.as_bytes();
                prop_assert!((3..=63).contains(&b.len()));
                prop_assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'));
                prop_assert!(b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric());
                prop_assert!(!name.contains(".."));
                prop_assert!(name.parse::<std::net::Ipv4Addr>().is_err());
                prop_assert!(!name.starts_with("xn--") && !name.ends_with("-s3alias") && !name.ends_with("--ol-s3"));
            }
        }

        #[test]
        fn every_accepted_role_arn_is_within_iam_limits(
            partition in "aws|aws-cn|aws-us-gov|aws-iso|awsx",
            path in "([!-~]{1,8}/){0,3}",
            name in "[a-zA-Z0-9+=,.@_ -]{0,70}",
        ) {
            let arn = format!("arn:{partition}:iam::123456789012:role/{path}{name}");
            if limits::is_role_arn(&arn) {
                prop_assert!(limits::PARTITIONS.contains(&partition.as_str()));
                prop_assert!(!name.is_empty() && name.len() <= limits::ROLE_NAME_MAX);
                prop_assert!(!name.contains(' ') && !arn.chars().any(char::is_whitespace));
                prop_assert!(arn.len() <= limits::ROLE_ARN_MAX);
            }
        }

        #[test]
        fn item_size_never_underestimates_the_json_payload(v in json_value()) {
            // Every string byte and key byte is counted, so the estimate is at least their sum.
            fn payload(v: &Value) -> usize {
                match v {
                    Value::String(s) => s.len(),
                    Value::Array(a) => a.iter().map(payload).sum(),
                    Value::Object(m) => m.iter().map(|(k, v)| k.len() + payload(v)).sum(),
                    _ => 1,
                }
            }
            prop_assert!(limits::dynamodb_item_size(&v) >= payload(&v));
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
