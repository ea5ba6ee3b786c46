//! The `kubernetes` backend: the state in a Secret of the runner's namespace, named from
//! the environment path, and the versions that have it.

use sha2::{Digest, Sha256};
use sortie_core::runner::KubernetesStorage;
use sortie_core::{EnvPath, StateStorageConfiguration};

use super::{hcl_string, BackendSetup};
use crate::error::PilotError;
use crate::version::ToolVersion;

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

pub(super) fn kubernetes_setup(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::backend_setup;
    use crate::backend::tests::{storage, URL};

    fn env() -> EnvPath {
        EnvPath::parse("acme/payments/prod").unwrap()
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
}
