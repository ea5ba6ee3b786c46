//! A job's own cloud identity end to end (issue 45): `sortie dev` as the OIDC issuer, its
//! key in KMS on moto, STS AssumeRoleWithWebIdentity as strict as AWS (moto patch 16: the
//! issuer's discovery document and JWKS fetched from `sortie dev`, the signature, `aud`,
//! `exp` and the trust policy's conditions checked), the real pilot, and the machine's
//! Terraform 1.11.
//!
//! Environment `acme/demo/a` has a read role (its plans) and a write role (its applies);
//! one runner names both for every environment, so environment `b`'s jobs ask for `a`'s
//! roles and must be refused by the trust policies alone.
//! - A plan reads through Terraform's own S3 backend (`terraform_remote_state`), whose AWS
//!   SDK exchanges the token file natively for the role the backend names.
//! - An apply's `terraform_data` runs a `local-exec` that exchanges the token file itself.
//! - A long apply outlives its first token and still exchanges a fresh one, and the signing
//!   key is rolled while it runs.
//! - The token is in no log, job record or event.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;

use common::{Dev, DevOptions};

/// How long a token lives here: the long apply sleeps past it.
const TOKEN_SECONDS: u64 = 12;

/// Exchanges the token file for the job's own role (`AWS_ROLE_ARN`) and for the role in
/// `argv[1]` (`-`: none) at the STS in `STS_ENDPOINT`, printing each answer (the ARN taken or
/// the error code), never the token; then, when `argv[2]` is not 0, writes the marker file
/// `argv[3]`, sleeps `argv[2]` seconds, and does it again with whatever token the file holds
/// then, saying whether it was replaced and by which key.
const EXCHANGE_PY: &str = r#"
import base64, hashlib, json, os, re, sys, time, urllib.error, urllib.parse, urllib.request

token_file = os.environ["AWS_WEB_IDENTITY_TOKEN_FILE"]
own = os.environ["AWS_ROLE_ARN"]

def token():
    return open(token_file).read().strip()

def kid():
    header = token().split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]

def exchange(role):
    body = urllib.parse.urlencode({
        "Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": role,
        "RoleSessionName": os.environ.get("AWS_ROLE_SESSION_NAME", "job"),
        "WebIdentityToken": token()}).encode()
    request = urllib.request.Request(os.environ["STS_ENDPOINT"], data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return "assumed " + re.search(r"<Arn>([^<]+)</Arn>", answer.read().decode()).group(1)
    except urllib.error.HTTPError as e:
        code = re.search(r"<Code>([^<]+)</Code>", e.read().decode())
        return "refused " + (code.group(1) if code else str(e.code))

first, first_kid = hashlib.sha256(token().encode()).hexdigest(), kid()
print(f"exchange own: {exchange(own)}", flush=True)
if sys.argv[1] != "-":
    print(f"exchange other: {exchange(sys.argv[1])}", flush=True)
wait = float(sys.argv[2])
if wait:
    open(sys.argv[3], "w").write("waiting")
    time.sleep(wait)
    replaced = hashlib.sha256(token().encode()).hexdigest() != first
    print(f"token replaced: {replaced}; key changed: {kid() != first_kid}", flush=True)
    print(f"exchange own after the wait: {exchange(own)}", flush=True)
"#;

/// The configuration: a `local-exec` exchange at apply time, and at plan time a read of a
/// state through Terraform's S3 backend: as the job's own role, which the backend's AWS SDK
/// takes from `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE` by itself (`probe = "own"`),
/// or with the same token file as the role `probe_role` names (the job's directory holds
/// the configuration in `src/` and the token in `identity/`).
const MAIN_TF: &str = r#"
variable "other_role" { default = "-" }
variable "wait" { default = 0 }
variable "marker" { default = "-" }
variable "probe" { default = "" }
variable "probe_role" { default = "" }
variable "probe_bucket" { default = "" }
variable "endpoint" { default = "" }

locals {
  backend = {
    bucket                      = var.probe_bucket
    key                         = "probe.tfstate"
    region                      = "us-east-1"
    endpoints                   = { s3 = var.endpoint, sts = var.endpoint }
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_region_validation      = true
  }
}

data "terraform_remote_state" "own" {
  count   = var.probe == "own" ? 1 : 0
  backend = "s3"
  config  = local.backend
}

data "terraform_remote_state" "other" {
  count   = var.probe == "other" ? 1 : 0
  backend = "s3"
  config = merge(local.backend, {
    assume_role_with_web_identity = {
      role_arn                = var.probe_role
      web_identity_token_file = "${abspath(path.root)}/../identity/token.jwt"
    }
  })
}

output "probe" {
  value = concat(data.terraform_remote_state.own[*].outputs.greeting, data.terraform_remote_state.other[*].outputs.greeting)
}

resource "terraform_data" "exchange" {
  count            = var.probe == "" ? 1 : 0
  triggers_replace = [timestamp()]
  provisioner "local-exec" {
    command = "\"$PYTHON\" exchange.py '${var.other_role}' ${var.wait} '${var.marker}'"
  }
}
"#;

/// The Python the `local-exec` runs: the project's tools' (installed by `make test`), else
/// the machine's.
fn python() -> String {
    let tools = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/venv/bin/python");
    if tools.is_file() {
        tools.display().to_string()
    } else {
        "python3".into()
    }
}

struct Roles {
    read_a: String,
    write_a: String,
}

/// Trusts `issuer` on moto's IAM and makes `a`'s read and write roles.
async fn trust(iam: &aws_sdk_iam::Client, issuer: &str) -> Roles {
    use aws_sdk_iam::error::ProvideErrorMetadata as _;
    let host = issuer.trim_start_matches("http://").to_string();
    let provider = format!("arn:aws:iam::123456789012:oidc-provider/{host}");
    // A port of an earlier run's issuer may come round again: its provider is the same.
    if let Err(e) = iam
        .create_open_id_connect_provider()
        .url(issuer)
        .client_id_list("sts.amazonaws.com")
        .thumbprint_list("0".repeat(40))
        .send()
        .await
    {
        assert_eq!(e.code(), Some("EntityAlreadyExists"), "{e:?}");
    }
    let role = |sub: String| {
        let trust = json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"Federated": provider},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {format!("{host}:aud"): "sts.amazonaws.com"},
                    "StringLike": {format!("{host}:sub"): sub},
                },
            }],
        });
        let iam = iam.clone();
        async move {
            iam.create_role()
                .role_name(sortie_testkit::unique("wif"))
                .assume_role_policy_document(trust.to_string())
                .send()
                .await
                .unwrap()
                .role
                .unwrap()
                .arn
        }
    };
    Roles {
        read_a: role("org:acme:env:acme/demo/a:op:*:phase:plan".into()).await,
        write_a: role("org:acme:env:acme/demo/a:op:*:phase:apply".into()).await,
    }
}

/// Submits `operation` on `env` with `files` and `variables`; the job's id.
fn submit(dev: &Dev, env: &str, operation: &str, variables: Value) -> String {
    let files = json!({"main.tf": MAIN_TF, "exchange.py": EXCHANGE_PY});
    let job = dev.api(
        "POST",
        &format!("/v1/environments/{env}/-/jobs"),
        Some(json!({"operation": operation, "files": files, "variables": variables})),
    );
    job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job: {job}"))
        .to_string()
}

fn finished(dev: &Dev, id: &str) -> (Value, String) {
    let job = dev.wait_terminal(id);
    let log = dev.log(id);
    (job, log)
}

fn wait_for(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn each_job_takes_only_its_environments_role_for_its_phase_for_as_long_as_it_runs() {
    sortie_testkit::require_aws!();
    let _ = sortie_testkit::terraform111_bin();
    let key_alias = format!("alias/{}", sortie_testkit::unique("identity"));
    let token_seconds = TOKEN_SECONDS.to_string();
    let dev = common::start_dev(DevOptions {
        prefix: "identity",
        runner: Some(common::runner_binary()),
        extra_args: &[
            "--identity-token-seconds",
            token_seconds.as_str(),
            "--identity-keys-ttl",
            "1",
            "--identity-key",
            key_alias.as_str(),
        ],
        ..Default::default()
    });
    let endpoint = sortie_testkit::endpoint();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = rt.block_on(sortie_testkit::sdk_config());
    let (iam, kms) = (
        aws_sdk_iam::Client::new(&config),
        aws_sdk_kms::Client::new(&config),
    );
    let roles = rt.block_on(trust(&iam, &dev.url));
    // A state for the plans to read through the S3 backend.
    let probe_bucket = common::state_bucket();
    rt.block_on(async {
        let state = json!({"version": 4, "terraform_version": "1.11.4", "serial": 1,
            "lineage": "probe", "outputs": {"greeting": {"value": "read as the plan role", "type": "string"}},
            "resources": []});
        sortie_testkit::s3_client(&config)
            .put_object()
            .bucket(&probe_bucket)
            .key("probe.tfstate")
            .body(state.to_string().into_bytes().into())
            .send()
            .await
            .unwrap();
    });

    let runner = json!({
        "tool_version": ">= 1.11",
        "runner_configuration": {"type": "local", "timeout_seconds": 600,
            "env": {"STS_ENDPOINT": endpoint, "PYTHON": python()}},
        "state_storage_configuration": {"type": "local", "directory": dev.dir.join("state").display().to_string()},
        "identity": {"audience": "sts.amazonaws.com",
            "aws": {"plan_role_arn": roles.read_a, "apply_role_arn": roles.write_a}},
    });
    dev.api("POST", "/v1/groups/acme/-/runners/cloud", Some(runner));
    // The CLI says which clouds the runner's jobs get an identity in.
    let shown: common::Out = common::sortie(&dev, &["get", "runner", "acme/cloud"]).into();
    assert!(
        shown.stdout.contains("IDENTITY") && shown.stdout.contains(" aws "),
        "{shown:?}"
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/cloud"})),
    );
    for name in ["a", "b"] {
        dev.api(
            "POST",
            "/v1/groups/acme/demo/-/environments",
            Some(json!({"name": name, "env_type": "development"})),
        );
    }
    let probe = |how: &str, role: &str| json!({"probe": how, "probe_role": role, "probe_bucket": probe_bucket, "endpoint": endpoint});

    let before = sts_counts(&endpoint);

    // A plan of `a` reads as `a`'s read role, through Terraform's own S3 backend, whose AWS
    // SDK finds the role and the token file in its environment.
    let id = submit(&dev, "acme/demo/a", "plan", probe("own", ""));
    let (job, log) = finished(&dev, &id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    assert!(log.contains("read as the plan role"), "{log}");
    // ... and is refused `a`'s write role.
    let id = submit(&dev, "acme/demo/a", "plan", probe("other", &roles.write_a));
    let (job, log) = finished(&dev, &id);
    assert_eq!(job["state"], "failed", "{job}\n{log}");
    assert!(log.contains("AccessDenied"), "{log}");

    // An apply of `a` takes `a`'s write role, and its apply token is refused the read role.
    let id = submit(
        &dev,
        "acme/demo/a",
        "apply",
        json!({"other_role": roles.read_a}),
    );
    let (job, log) = finished(&dev, &id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    let write_name = roles.write_a.rsplit('/').next().unwrap();
    assert!(
        log.contains(&format!(
            "exchange own: assumed arn:aws:sts::123456789012:assumed-role/{write_name}/{id}"
        )),
        "{log}"
    );
    assert!(
        log.contains("exchange other: refused AccessDenied"),
        "{log}"
    );

    // An apply of `b` is refused `a`'s write role, though its runner names it.
    let id = submit(&dev, "acme/demo/b", "apply", json!({}));
    let (job, log) = finished(&dev, &id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    assert!(log.contains("exchange own: refused AccessDenied"), "{log}");

    // A long apply outlives its first token; the signing key rolls while it runs.
    let marker = dev.dir.join("waiting");
    let wait = TOKEN_SECONDS + 8;
    let id = submit(
        &dev,
        "acme/demo/a",
        "apply",
        json!({"wait": wait, "marker": marker.display().to_string()}),
    );
    wait_for(&marker, Duration::from_secs(120));
    rt.block_on(async {
        let old = kms
            .describe_key()
            .key_id(&key_alias)
            .send()
            .await
            .unwrap()
            .key_metadata
            .unwrap()
            .key_id;
        let new = kms
            .create_key()
            .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
            .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
            .send()
            .await
            .unwrap()
            .key_metadata
            .unwrap()
            .key_id;
        let standby = format!("{key_alias}-standby");
        kms.create_alias()
            .alias_name(&standby)
            .target_key_id(&new)
            .send()
            .await
            .unwrap();
        kms.update_alias()
            .alias_name(&key_alias)
            .target_key_id(&new)
            .send()
            .await
            .unwrap();
        kms.update_alias()
            .alias_name(&standby)
            .target_key_id(&old)
            .send()
            .await
            .unwrap();
    });
    let (job, log) = finished(&dev, &id);
    assert_eq!(job["state"], "succeeded", "{job}\n{log}");
    assert!(log.contains("exchange own: assumed"), "{log}");
    assert!(
        log.contains("token replaced: True; key changed: True"),
        "the token was not refreshed by the new key: {log}"
    );
    assert!(
        log.contains("exchange own after the wait: assumed"),
        "{log}"
    );

    // Each exchange reached the strict STS, which verified the token against the JWKS
    // `sortie dev` publishes: accepted, the plan's read, the apply's write and the long
    // apply's two; refused, the plan's write, the apply's read and `b`'s write (counted by
    // the shared moto, so other tests' exchanges may add to them).
    let after = sts_counts(&endpoint);
    let accepted = after["accepted"].as_u64().unwrap() - before["accepted"].as_u64().unwrap();
    let denied = |c: &Value| c["refused"]["AccessDenied"].as_u64().unwrap_or(0);
    assert!(accepted >= 4, "accepted {accepted}: {before} -> {after}");
    assert!(denied(&after) - denied(&before) >= 3, "{before} -> {after}");

    // No token anywhere: the logs, the jobs, sortie dev's own files.
    let tokens = token_shaped(&format!("{log}{job}"));
    assert!(tokens.is_empty(), "a token in a log or job: {tokens:?}");
    let dev_log = std::fs::read_to_string(dev.dir.join("dev.log")).unwrap_or_default();
    assert!(
        token_shaped(&dev_log).is_empty(),
        "a token in sortie dev's log"
    );
}

/// The strict STS's counts of accepted and refused tokens (moto patch 16).
fn sts_counts(endpoint: &str) -> Value {
    let (status, body) =
        sortie_testkit::http::call(endpoint, "GET", "/_sortie/sts-web-identity", &[], None);
    assert_eq!(status, 200, "{body}");
    body
}

/// The JWTs in `text` whose header says ES256: three base64url parts, the first `eyJ`.
fn token_shaped(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .filter(|w| w.starts_with("eyJ") && w.split('.').count() == 3 && w.len() > 100)
        .map(String::from)
        .collect()
}
