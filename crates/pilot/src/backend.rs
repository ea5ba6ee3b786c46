//! The backend configuration for the runner's state storage, matched to the
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
//! With an endpoint override (the storage's `endpoint`, else the runner's
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

use sha2::{Digest, Sha256};
use sortie_core::runner::{KubernetesStorage, LocalStorage, S3Storage};
use sortie_core::{EnvPath, StateStorageConfiguration};

use crate::error::PilotError;
use crate::version::ToolVersion;

/// The file the runner writes next to the configuration.
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
/// and environment when absent); `endpoint` is the runner's `AWS_ENDPOINT_URL`,
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

/// The longest [`kubernetes_secret_suffix`]: Terraform also writes the suffix as the
/// value of the secret's `tfstateSecretSuffix` label, and a label value has at most 63.
pub const KUBERNETES_SECRET_SUFFIX_MAX: usize = 63;

/// How many hex digits of the environment path's SHA-256 end the secret suffix.
const SUFFIX_HASH_HEX: usize = 8;

/// The `kubernetes` backend's `secret_suffix` for `environment`: the path lower-cased,
/// every character outside `[a-z0-9]` turned into `-` (runs collapsed, none at either
/// end), cut so that the whole fits [`KUBERNETES_SECRET_SUFFIX_MAX`], then `-` and the
/// first 8 hex digits of the SHA-256 of the path itself, so that paths that read alike
/// (`a/b-c`, `a-b/c`) get different secrets: `acme/payments/prod` →
/// `acme-payments-prod-<8 hex>`, and Terraform names the secret
/// `tfstate-<workspace>-<suffix>`.
pub fn kubernetes_secret_suffix(environment: &EnvPath) -> String {
    let path = environment.to_string();
    let digest = Sha256::digest(path.as_bytes());
    let hash: String = digest
        .iter()
        .take(SUFFIX_HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut readable = String::with_capacity(path.len());
    for c in path.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            readable.push(c);
        } else if !readable.is_empty() && !readable.ends_with('-') {
            readable.push('-');
        }
    }
    // Only ASCII is left, so a byte length is a character count.
    readable.truncate(KUBERNETES_SECRET_SUFFIX_MAX - SUFFIX_HASH_HEX - 1);
    let readable = readable.trim_matches('-');
    if readable.is_empty() {
        hash
    } else {
        format!("{readable}-{hash}")
    }
}

/// Refuses a storage `version` cannot use, before anything runs: the `kubernetes`
/// backend needs Terraform 0.13 or later (or OpenTofu).
pub fn check_storage_version(
    version: &ToolVersion,
    storage: &StateStorageConfiguration,
) -> Result<(), PilotError> {
    match storage {
        StateStorageConfiguration::Kubernetes(_) if !version.has_kubernetes_backend() => {
            Err(no_kubernetes_backend(version))
        }
        _ => Ok(()),
    }
}

fn no_kubernetes_backend(version: &ToolVersion) -> PilotError {
    PilotError::Tool(format!(
        "{version} has no kubernetes backend: kubernetes state storage needs Terraform 0.13 or later, or OpenTofu"
    ))
}

fn kubernetes_setup(
    version: &ToolVersion,
    storage: &KubernetesStorage,
    environment: &EnvPath,
) -> Result<BackendSetup, PilotError> {
    if !version.has_kubernetes_backend() {
        return Err(no_kubernetes_backend(version));
    }
    let namespace = storage.namespace.as_deref().ok_or_else(|| {
        PilotError::Workspace(
            "the job spec's state_storage.namespace is not set: the kubernetes backend needs the namespace of the state secrets"
                .into(),
        )
    })?;
    Ok(BackendSetup {
        file: format!(
            "terraform {{\n  backend \"kubernetes\" {{\n    secret_suffix     = {}\n    namespace         = {}\n    in_cluster_config = true\n  }}\n}}\n",
            hcl_string(&kubernetes_secret_suffix(environment)),
            hcl_string(namespace),
        ),
        init_args: Vec::new(),
        create_dir: None,
        notes: Vec::new(),
    })
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

    fn storage() -> S3Storage {
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

    const URL: &str = "http://127.0.0.1:5000";

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

    fn kubernetes(namespace: Option<&str>) -> StateStorageConfiguration {
        StateStorageConfiguration::Kubernetes(KubernetesStorage {
            namespace: namespace.map(str::to_string),
        })
    }

    #[test]
    fn kubernetes_setup_writes_the_whole_backend_in_the_file() {
        let suffix = kubernetes_secret_suffix(&env());
        let setup = backend_setup(
            &ToolVersion::terraform(1, 9, 8),
            &kubernetes(Some("sortie-runners")),
            &env(),
            None,
            Some(URL),
        )
        .unwrap();
        assert_eq!(
            setup.file,
            format!(
                "terraform {{\n  backend \"kubernetes\" {{\n    secret_suffix     = \"{suffix}\"\n    namespace         = \"sortie-runners\"\n    in_cluster_config = true\n  }}\n}}\n"
            )
        );
        assert!(setup.init_args.is_empty(), "{:?}", setup.init_args);
        assert_eq!(setup.create_dir, None);
        assert!(setup.notes.is_empty());
        // Terraform 0.13 is the first with the backend; every OpenTofu has it.
        for version in [ToolVersion::terraform(0, 13, 0), ToolVersion::tofu(1, 6, 0)] {
            let setup =
                backend_setup(&version, &kubernetes(Some("ns")), &env(), None, None).unwrap();
            assert!(setup.file.contains("backend \"kubernetes\""), "{version}");
        }
    }

    #[test]
    fn kubernetes_setup_without_a_namespace_names_the_field() {
        let err = backend_setup(
            &ToolVersion::terraform(1, 9, 8),
            &kubernetes(None),
            &env(),
            None,
            None,
        )
        .unwrap_err();
        assert!(
            err.reason().contains("state_storage.namespace"),
            "{}",
            err.reason()
        );
    }

    #[test]
    fn terraform_0_11_is_refused_kubernetes_storage_with_both_versions_named() {
        let v011 = ToolVersion::terraform(0, 11, 11);
        let expected = "Terraform v0.11.11 has no kubernetes backend: kubernetes state storage needs Terraform 0.13 or later, or OpenTofu";
        let err = check_storage_version(&v011, &kubernetes(Some("ns"))).unwrap_err();
        assert_eq!(err.reason(), expected);
        let err = backend_setup(&v011, &kubernetes(Some("ns")), &env(), None, None).unwrap_err();
        assert_eq!(err.reason(), expected);
        let err = check_storage_version(&ToolVersion::terraform(0, 12, 31), &kubernetes(None))
            .unwrap_err();
        assert!(err.reason().starts_with("Terraform v0.12.31 "), "{err}");
        // Other storages are for every version.
        check_storage_version(&v011, &StateStorageConfiguration::S3(storage())).unwrap();
        check_storage_version(&ToolVersion::terraform(0, 13, 0), &kubernetes(None)).unwrap();
    }

    #[test]
    fn kubernetes_secret_suffixes_read_as_the_path_and_end_in_its_hash() {
        let suffix = kubernetes_secret_suffix(&env());
        let hash = &crate::source::sha256_hex(b"acme/payments/prod")[..8];
        assert_eq!(suffix, format!("acme-payments-prod-{hash}"));
        // Paths that read alike get different secrets.
        let a = kubernetes_secret_suffix(&EnvPath::parse("a/b-c").unwrap());
        let b = kubernetes_secret_suffix(&EnvPath::parse("a-b/c").unwrap());
        assert!(
            a.starts_with("a-b-c-") && b.starts_with("a-b-c-"),
            "{a} {b}"
        );
        assert_ne!(a, b);
        // A long path keeps its start, a hyphen never ends the readable part, and the
        // whole fits a label value.
        let long = format!("{}/{}-x/prod", "a".repeat(53), "b".repeat(20));
        let suffix = kubernetes_secret_suffix(&EnvPath::parse(&long).unwrap());
        assert_eq!(suffix.len(), 62, "{suffix}");
        assert!(
            suffix.starts_with(&format!("{}-", "a".repeat(53))),
            "{suffix}"
        );
        assert!(!suffix.contains("--"), "{suffix}");
        let long = format!("{}/{}/prod", "a".repeat(63), "b".repeat(63));
        let suffix = kubernetes_secret_suffix(&EnvPath::parse(&long).unwrap());
        assert_eq!(suffix.len(), KUBERNETES_SECRET_SUFFIX_MAX, "{suffix}");
    }

    /// A Kubernetes label value: at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both
    /// ends (or empty).
    fn is_label_value(v: &str) -> bool {
        let b = v.as_bytes();
        v.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b.first().is_none_or(u8::is_ascii_alphanumeric)
            && b.last().is_none_or(u8::is_ascii_alphanumeric)
    }

    /// A DNS subdomain (RFC 1123), as Kubernetes names a Secret: at most 253 of
    /// `[a-z0-9.-]`, dot-separated labels each alphanumeric at both ends.
    fn is_dns_subdomain(v: &str) -> bool {
        v.len() <= 253
            && v.split('.').all(|label| {
                let b = label.as_bytes();
                !b.is_empty()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-'
            })
    }

    fn env_path() -> impl proptest::strategy::Strategy<Value = EnvPath> {
        use proptest::prelude::*;
        prop::collection::vec("[a-z0-9][a-z0-9-]{0,62}", 2..=9)
            .prop_map(|segments| EnvPath::parse(&segments.join("/")).unwrap())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        #[test]
        fn every_secret_suffix_is_a_label_value_and_names_a_valid_secret(
            a in env_path(),
            b in env_path(),
        ) {
            let suffix = kubernetes_secret_suffix(&a);
            proptest::prop_assert!(is_label_value(&suffix), "{}", suffix);
            proptest::prop_assert!(suffix.len() <= KUBERNETES_SECRET_SUFFIX_MAX);
            let secret = format!("tfstate-default-{suffix}");
            proptest::prop_assert!(is_dns_subdomain(&secret), "{}", secret);
            proptest::prop_assert_eq!(&suffix, &kubernetes_secret_suffix(&a));
            if a != b {
                proptest::prop_assert_ne!(suffix, kubernetes_secret_suffix(&b));
            }
        }

        #[test]
        fn paths_that_read_alike_get_different_suffixes(
            segments in proptest::collection::vec("[a-z0-9]{1,10}", 3..=6),
            join in 1usize..5,
        ) {
            // The same characters with one `/` turned into `-`: the readable parts match.
            let slashed = segments.join("/");
            let mut hyphenated = segments[..join.min(segments.len() - 2)].join("/");
            hyphenated.push('-');
            hyphenated.push_str(&segments[join.min(segments.len() - 2)..].join("/"));
            let a = EnvPath::parse(&slashed).unwrap();
            let b = EnvPath::parse(&hyphenated).unwrap();
            proptest::prop_assert_ne!(kubernetes_secret_suffix(&a), kubernetes_secret_suffix(&b));
        }
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(hcl_string("${x} %{y} $z"), r#""$${x} %%{y} $z""#);
    }
}
