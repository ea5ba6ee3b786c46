//! The AWS configuration a Lambda function starts with, built for a short init.
//!
//! `aws_config::load_from_env` is the floor every Rust function pays, and most of it is
//! one thing: the default HTTPS client loads the platform's root certificates through
//! `rustls-native-certs`, which reads the system's CA bundle *and* every file of its
//! certificate directory (about 150 files on Debian; on Lambda's Amazon Linux 2023, the
//! bundle again and the larger OpenSSL trust bundle beside it). [`function_sdk_config`]
//! reads one bundle instead, and takes the credentials and region straight from the
//! variables Lambda always sets, instead of building the whole default provider chain.
//! `scripts/bench-cold-start.py` measures the difference against the bare
//! `load_from_env` probe (BENCHMARKS.md).

use std::path::Path;

use aws_config::environment::EnvironmentVariableCredentialsProvider;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_http_client::Builder;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// The CA bundle of Lambda's Amazon Linux runtimes (`provided.al2023`, `provided.al2`).
pub const LAMBDA_CA_BUNDLE: &str = "/etc/pki/tls/certs/ca-bundle.crt";
/// The CA bundle of Debian and Ubuntu, for running a function binary elsewhere.
pub const DEBIAN_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The configuration the four functions build their clients from.
///
/// - The root certificates are read from one CA bundle: `SSL_CERT_FILE` when it is set
///   (then the SDK's own loader reads just that file), else [`LAMBDA_CA_BUNDLE`] or
///   [`DEBIAN_CA_BUNDLE`]. Without any of them it falls back to the SDK's default
///   (the platform's native store), so a function never starts without roots.
/// - The credentials are the environment's when `AWS_ACCESS_KEY_ID` is set, as Lambda
///   sets it for the function's role; otherwise the default chain.
/// - The region is `AWS_REGION` when set; otherwise the default chain.
///
/// Everything else (`AWS_ENDPOINT_URL`, retries, timeouts) is read as
/// `aws_config::load_from_env` reads it.
pub async fn function_sdk_config() -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if std::env::var_os("SSL_CERT_FILE").is_none() {
        if let Some(roots) = [LAMBDA_CA_BUNDLE, DEBIAN_CA_BUNDLE]
            .iter()
            .find_map(|path| trusted_roots_pem(Path::new(path)))
        {
            if let Ok(context) = TlsContext::builder()
                .with_trust_store(TrustStore::empty().with_pem_certificate(roots))
                .build()
            {
                loader = loader.http_client(
                    Builder::new()
                        .tls_provider(tls::Provider::Rustls(
                            tls::rustls_provider::CryptoMode::AwsLc,
                        ))
                        .tls_context(context)
                        .build_https(),
                );
            }
        }
    }
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        loader = loader.credentials_provider(EnvironmentVariableCredentialsProvider::new());
    }
    if let Some(region) = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()) {
        loader = loader.region(Region::new(region));
    }
    loader.load().await
}

/// The certificates of the PEM bundle at `path` that are usable as trust anchors, as
/// PEM; `None` when the file cannot be read or holds none.
///
/// Each certificate is checked with `webpki::anchor_from_trusted_cert`, the check
/// rustls's `RootCertStore::add` makes: the SDK's TLS context *panics* on a certificate
/// that fails it, and a panic in a release build (`panic = "abort"`) would end the
/// function's init. A system bundle may well hold one that webpki cannot parse.
pub fn trusted_roots_pem(path: &Path) -> Option<Vec<u8>> {
    let bundle = std::fs::read(path).ok()?;
    let mut pem = Vec::with_capacity(bundle.len());
    for der in CertificateDer::pem_slice_iter(&bundle).flatten() {
        if webpki::anchor_from_trusted_cert(&der).is_err() {
            continue;
        }
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        let encoded = aws_smithy_types::base64::encode(der.as_ref());
        for line in encoded.as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    (!pem.is_empty()).then_some(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_bundle_keeps_only_the_certificates_webpki_accepts_and_nothing_is_no_roots() {
        let Some(system) = [LAMBDA_CA_BUNDLE, DEBIAN_CA_BUNDLE]
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
        else {
            panic!("this machine has no CA bundle at {LAMBDA_CA_BUNDLE} or {DEBIAN_CA_BUNDLE}");
        };
        let system_text = std::fs::read_to_string(system).unwrap();
        let system_count = CertificateDer::pem_slice_iter(system_text.as_bytes())
            .flatten()
            .count();
        assert!(system_count > 50, "{system:?} holds {system_count} certificates");

        let dir = std::env::temp_dir().join(format!("sortie-roots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The system bundle, plus a "certificate" whose DER is not a certificate, plus
        // text around them that is not PEM at all.
        let junk = format!(
            "# a comment\n{system_text}\n-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            aws_smithy_types::base64::encode(b"not a certificate")
        );
        let bundle = write(&dir, "bundle.pem", &junk);
        let kept = trusted_roots_pem(&bundle).expect("the system's roots are kept");
        let kept: Vec<_> = CertificateDer::pem_slice_iter(&kept)
            .collect::<Result<_, _>>()
            .expect("what is kept is valid PEM");
        assert!(kept.len() <= system_count && kept.len() > 50, "{}", kept.len());
        for der in &kept {
            webpki::anchor_from_trusted_cert(der).expect("every kept certificate is an anchor");
        }
        assert!(!kept.iter().any(|der| der.as_ref() == b"not a certificate"));

        // The SDK builds its rustls connector from them (adding each to a
        // RootCertStore, which panics on one it cannot parse) without panicking.
        let context = TlsContext::builder()
            .with_trust_store(TrustStore::empty().with_pem_certificate(
                trusted_roots_pem(&bundle).unwrap(),
            ))
            .build()
            .expect("a TLS context");
        let _connector = aws_smithy_http_client::Connector::builder()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::AwsLc,
            ))
            .tls_context(context)
            .build();

        let empty = write(&dir, "empty.pem", "no certificates here\n");
        assert_eq!(trusted_roots_pem(&empty), None);
        assert_eq!(trusted_roots_pem(&dir.join("missing.pem")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
