//! The backend configuration for the job's state storage, matched to the
//! Terraform or OpenTofu version.
//!
//! Everything here is pure: [`backend_setup`] returns the contents of
//! [`BACKEND_FILE`] and the `init` arguments; the caller writes and runs them.
//!
//! ## `s3` options by version
//!
//! Always: `bucket`, `key`, `region`, `encrypt=true`, plus `kms_key_id` and
//! `dynamodb_table` when the storage sets them, and `use_lockfile=true` when
//! the storage asks for it *and* the version has it (Terraform/OpenTofu 1.10+;
//! an older version gets a note in the log instead).
//!
//! With an endpoint override (the storage's `endpoint`, else the pilot's
//! `AWS_ENDPOINT_URL`), for a local AWS:
//!
//! | version | options |
//! |---|---|
//! | Terraform 0.11 | `endpoint`, `force_path_style`, `skip_credentials_validation`, `skip_metadata_api_check`, `skip_region_validation`, `skip_requesting_account_id`, `skip_get_ec2_platforms` (+ `dynamodb_endpoint`) |
//! | Terraform 0.12 – 1.5 | `endpoint`, `force_path_style`, `skip_credentials_validation`, `skip_metadata_api_check`, `skip_region_validation` (+ `dynamodb_endpoint`) |
//! | Terraform 1.6+, OpenTofu | `endpoints={s3="…"}` (+ `dynamodb="…"`), `use_path_style`, `skip_credentials_validation`, `skip_metadata_api_check`, `skip_region_validation`, `skip_requesting_account_id` |
//!
//! ## `kubernetes`
//!
//! Terraform 0.13+ and OpenTofu only ([`check_storage_version`] refuses an older
//! version before anything runs). The whole configuration is in the backend file:
//! `secret_suffix` = [`kubernetes_secret_suffix`] of the environment path,
//! `namespace` = the storage's (the API fills in the runner's own when the runner
//! names none), `in_cluster_config = true` (the pod's service account). Terraform
//! keeps the state in the Secret `tfstate-<workspace>-<secret_suffix>` and locks it
//! with a Lease.

use std::path::{Path, PathBuf};

use sortie_core::runner::{LocalStorage, S3Storage};
use sortie_core::{EnvPath, StateStorageConfiguration};

use crate::error::PilotError;
use crate::version::ToolVersion;

mod kubernetes;

use kubernetes::kubernetes_setup;
pub use kubernetes::{
    check_storage_version, kubernetes_secret_suffix, KUBERNETES_SECRET_SUFFIX_MAX,
};

/// The file the pilot writes next to the configuration.
pub const BACKEND_FILE: &str = "sortie_backend.tf";

/// What to write and pass to `init` for a state storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSetup {
    /// Contents of [`BACKEND_FILE`].
    pub file: String,
    /// `-backend-config=...` arguments for `init`.
    pub init_args: Vec<String>,
    /// A directory to create before `init` (the `local` storage's state directory).
    pub create_dir: Option<PathBuf>,
    /// Lines for the log: options left out because the version lacks them.
    pub notes: Vec<String>,
}

/// The `s3` backend's settings, as `(name, value)` pairs, for `version`; and notes.
pub fn s3_backend_options(
    version: &ToolVersion,
    storage: &S3Storage,
    key: &str,
    endpoint: Option<&str>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut opts: Vec<(String, String)> = Vec::new();
    let mut notes = Vec::new();
    let mut push = |k: &str, v: &str| opts.push((k.to_string(), v.to_string()));
    push("bucket", &storage.bucket);
    push("key", key);
    push("region", &storage.region);
    push("encrypt", "true");
    if let Some(kms) = &storage.kms_key_id {
        push("kms_key_id", kms);
    }
    if let Some(table) = &storage.dynamodb_table {
        push("dynamodb_table", table);
    }
    if storage.use_lockfile {
        if version.has_s3_lockfile() {
            push("use_lockfile", "true");
        } else {
            notes.push(format!(
                "{version} has no S3 lock file (use_lockfile needs 1.10 or later): the state is {}",
                if storage.dynamodb_table.is_some() {
                    "locked with the DynamoDB table only"
                } else {
                    "not locked by the backend"
                }
            ));
        }
    }
    if let Some(url) = endpoint {
        if version.has_new_s3_backend() {
            let mut endpoints = format!("s3={}", hcl_string(url));
            if storage.dynamodb_table.is_some() {
                endpoints.push_str(&format!(",dynamodb={}", hcl_string(url)));
            }
            push("endpoints", &format!("{{{endpoints}}}"));
            push("use_path_style", "true");
        } else {
            push("endpoint", url);
            if storage.dynamodb_table.is_some() {
                push("dynamodb_endpoint", url);
            }
            push("force_path_style", "true");
        }
        push("skip_credentials_validation", "true");
        push("skip_metadata_api_check", "true");
        push("skip_region_validation", "true");
        if version.is_legacy() || version.has_new_s3_backend() {
            push("skip_requesting_account_id", "true");
        }
        if version.is_legacy() {
            push("skip_get_ec2_platforms", "true");
        }
    }
    (opts, notes)
}

/// The backend file and `init` arguments for `storage`.
///
/// `state_key` is the spec's key for `s3` storage (computed from the storage
/// and environment when absent); `endpoint` is the pilot's `AWS_ENDPOINT_URL`,
/// used when the storage names no endpoint of its own.
pub fn backend_setup(
    version: &ToolVersion,
    storage: &StateStorageConfiguration,
    environment: &EnvPath,
    state_key: Option<&str>,
    endpoint: Option<&str>,
) -> Result<BackendSetup, PilotError> {
    match storage {
        StateStorageConfiguration::S3(s3) => {
            Ok(s3_setup(version, s3, environment, state_key, endpoint))
        }
        StateStorageConfiguration::Local(local) => Ok(local_setup(local, environment)),
        StateStorageConfiguration::Kubernetes(k8s) => kubernetes_setup(version, k8s, environment),
    }
}

fn s3_setup(
    version: &ToolVersion,
    storage: &S3Storage,
    environment: &EnvPath,
    state_key: Option<&str>,
    endpoint: Option<&str>,
) -> BackendSetup {
    let key = state_key
        .map(str::to_string)
        .unwrap_or_else(|| storage.state_key(environment));
    let endpoint = storage.endpoint.as_deref().or(endpoint);
    let (opts, notes) = s3_backend_options(version, storage, &key, endpoint);
    BackendSetup {
        file: "terraform {\n  backend \"s3\" {}\n}\n".to_string(),
        init_args: opts
            .into_iter()
            .map(|(k, v)| format!("-backend-config={k}={v}"))
            .collect(),
        create_dir: None,
        notes,
    }
}

/// The `local` storage's state file: `<directory>/<environment path>/terraform.tfstate`.
pub fn local_state_path(storage: &LocalStorage, environment: &EnvPath) -> PathBuf {
    Path::new(&storage.directory)
        .join(environment.to_string())
        .join("terraform.tfstate")
}

fn local_setup(storage: &LocalStorage, environment: &EnvPath) -> BackendSetup {
    let path = local_state_path(storage, environment);
    BackendSetup {
        file: format!(
            "terraform {{\n  backend \"local\" {{\n    path = {}\n  }}\n}}\n",
            hcl_string(&path.to_string_lossy())
        ),
        init_args: Vec::new(),
        create_dir: path.parent().map(Path::to_path_buf),
        notes: Vec::new(),
    }
}

/// `value` as a quoted HCL string literal (quotes, backslashes, newlines and
/// interpolation markers escaped).
pub fn hcl_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn storage() -> S3Storage {
        S3Storage {
            bucket: "state".into(),
            key_prefix: "tf/".into(),
            region: "eu-west-1".into(),
            kms_key_id: None,
            use_lockfile: false,
            dynamodb_table: None,
            endpoint: None,
        }
    }

    fn env() -> EnvPath {
        EnvPath::parse("acme/payments/prod").unwrap()
    }

    fn names(opts: &[(String, String)]) -> Vec<&str> {
        opts.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn value<'a>(opts: &'a [(String, String)], name: &str) -> Option<&'a str> {
        opts.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) const URL: &str = "http://127.0.0.1:5000";

    #[test]
    fn terraform_0_11_with_a_local_endpoint_gets_every_legacy_skip() {
        let (opts, notes) = s3_backend_options(
            &ToolVersion::terraform(0, 11, 11),
            &storage(),
            "k",
            Some(URL),
        );
        assert_eq!(
            names(&opts),
            [
                "bucket",
                "key",
                "region",
                "encrypt",
                "endpoint",
                "force_path_style",
                "skip_credentials_validation",
                "skip_metadata_api_check",
                "skip_region_validation",
                "skip_requesting_account_id",
                "skip_get_ec2_platforms",
            ]
        );
        assert_eq!(value(&opts, "endpoint"), Some(URL));
        assert!(notes.is_empty());
    }

    #[test]
    fn terraform_1_5_uses_endpoint_and_force_path_style_without_the_0_11_extras() {
        let mut s = storage();
        s.dynamodb_table = Some("locks".into());
        let (opts, _) = s3_backend_options(&ToolVersion::terraform(1, 5, 7), &s, "k", Some(URL));
        assert_eq!(value(&opts, "endpoint"), Some(URL));
        assert_eq!(value(&opts, "dynamodb_endpoint"), Some(URL));
        assert_eq!(value(&opts, "dynamodb_table"), Some("locks"));
        assert_eq!(value(&opts, "force_path_style"), Some("true"));
        assert_eq!(value(&opts, "skip_region_validation"), Some("true"));
        for absent in [
            "endpoints",
            "use_path_style",
            "skip_requesting_account_id",
            "skip_get_ec2_platforms",
            "use_lockfile",
        ] {
            assert_eq!(value(&opts, absent), None, "{absent}");
        }
    }

    #[test]
    fn terraform_1_6_uses_endpoints_and_use_path_style() {
        let (opts, notes) =
            s3_backend_options(&ToolVersion::terraform(1, 6, 0), &storage(), "k", Some(URL));
        assert_eq!(
            value(&opts, "endpoints"),
            Some(r#"{s3="http://127.0.0.1:5000"}"#)
        );
        assert_eq!(value(&opts, "use_path_style"), Some("true"));
        assert_eq!(value(&opts, "skip_requesting_account_id"), Some("true"));
        for absent in ["endpoint", "force_path_style", "skip_get_ec2_platforms"] {
            assert_eq!(value(&opts, absent), None, "{absent}");
        }
        assert!(notes.is_empty());
    }

    #[test]
    fn use_lockfile_only_from_1_10_and_a_note_before() {
        let mut s = storage();
        s.use_lockfile = true;
        s.kms_key_id = Some("arn:aws:kms:eu-west-1:1:key/k".into());
        let (opts, notes) = s3_backend_options(&ToolVersion::terraform(1, 10, 0), &s, "k", None);
        assert_eq!(value(&opts, "use_lockfile"), Some("true"));
        assert_eq!(
            value(&opts, "kms_key_id"),
            Some("arn:aws:kms:eu-west-1:1:key/k")
        );
        assert!(notes.is_empty());
        // No endpoint: none of the local-AWS options.
        assert_eq!(value(&opts, "endpoints"), None);
        assert_eq!(value(&opts, "skip_credentials_validation"), None);

        let (opts, notes) = s3_backend_options(&ToolVersion::terraform(1, 9, 8), &s, "k", None);
        assert_eq!(value(&opts, "use_lockfile"), None);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("use_lockfile"), "{notes:?}");
    }

    #[test]
    fn opentofu_uses_the_new_backend_and_lockfile_from_1_10() {
        let mut s = storage();
        s.use_lockfile = true;
        s.dynamodb_table = Some("locks".into());
        let (opts, notes) = s3_backend_options(&ToolVersion::tofu(1, 8, 5), &s, "k", Some(URL));
        assert_eq!(
            value(&opts, "endpoints"),
            Some(r#"{s3="http://127.0.0.1:5000",dynamodb="http://127.0.0.1:5000"}"#)
        );
        assert_eq!(value(&opts, "use_path_style"), Some("true"));
        assert_eq!(value(&opts, "use_lockfile"), None);
        assert!(notes[0].contains("DynamoDB"), "{notes:?}");
        let (opts, _) = s3_backend_options(&ToolVersion::tofu(1, 10, 0), &s, "k", Some(URL));
        assert_eq!(value(&opts, "use_lockfile"), Some("true"));
    }

    #[test]
    fn s3_setup_writes_a_partial_backend_and_prefers_the_storage_endpoint() {
        let mut s = storage();
        s.endpoint = Some("http://storage:1".into());
        let setup = backend_setup(
            &ToolVersion::terraform(0, 11, 11),
            &StateStorageConfiguration::S3(s),
            &env(),
            None,
            Some("http://env:2"),
        )
        .unwrap();
        assert_eq!(setup.file, "terraform {\n  backend \"s3\" {}\n}\n");
        assert!(setup
            .init_args
            .contains(&"-backend-config=key=tf/acme/payments/prod/terraform.tfstate".to_string()));
        assert!(setup
            .init_args
            .contains(&"-backend-config=endpoint=http://storage:1".to_string()));
    }

    #[test]
    fn local_setup_points_at_the_environment_state_file() {
        let setup = backend_setup(
            &ToolVersion::terraform(0, 11, 11),
            &StateStorageConfiguration::Local(LocalStorage {
                directory: "/var/lib/sortie".into(),
            }),
            &env(),
            None,
            None,
        )
        .unwrap();
        assert!(setup
            .file
            .contains(r#"path = "/var/lib/sortie/acme/payments/prod/terraform.tfstate""#));
        assert_eq!(
            setup.create_dir,
            Some(PathBuf::from("/var/lib/sortie/acme/payments/prod"))
        );
        assert!(setup.init_args.is_empty());
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(hcl_string("${x} %{y} $z"), r#""$${x} %%{y} $z""#);
    }
}
