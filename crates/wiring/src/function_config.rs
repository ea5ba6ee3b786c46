//! The AWS configuration a Lambda function starts with, built for a short init.
//!
//! With `aws_config::load_from_env`, a function's init builds a whole HTTPS connector,
//! root certificates and all, once for every SDK client it constructs: the SDK's client
//! warms its connector in `validate_base_client_config` and throws it away. With the
//! default client the roots come from `rustls-native-certs`, which reads the system's
//! CA bundle *and* every file of its certificate directory (about 150 files on Debian;
//! on Lambda's Amazon Linux 2023, the larger OpenSSL trust bundle beside the PEM one).
//! [`function_sdk_config`] instead:
//!
//! - builds the connector once, at the first request, and shares it between the
//!   clients (`ConnectorOnFirstRequest`);
//! - reads one CA bundle, once, for it ([`trusted_roots_pem`]);
//! - takes the credentials and region from the variables Lambda always sets, instead of
//!   building the default provider chain.
//!
//! `scripts/bench-cold-start.py` measures it against the bare `load_from_env` probe
//! (BENCHMARKS.md, "Cold start").

use std::path::Path;
use std::sync::OnceLock;

use aws_config::environment::EnvironmentVariableCredentialsProvider;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_http_client::{Builder, Connector};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// The CA bundle of Lambda's Amazon Linux runtimes (`provided.al2023`, `provided.al2`).
pub const LAMBDA_CA_BUNDLE: &str = "/etc/pki/tls/certs/ca-bundle.crt";
/// The CA bundle of Debian and Ubuntu, for running a function binary elsewhere.
pub const DEBIAN_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The configuration the four functions build their clients from.
///
/// - HTTPS: the SDK's own rustls (aws-lc) connector, with the environment's proxy
///   settings, built at the first request and shared by every client
///   (`ConnectorOnFirstRequest`). It trusts the roots of one CA bundle:
///   `SSL_CERT_FILE` when it is set (the SDK's loader then reads just that file), else
///   [`LAMBDA_CA_BUNDLE`] or [`DEBIAN_CA_BUNDLE`]; without any of them, the platform's
///   native store, as the SDK's default does. A function never runs without roots.
/// - Credentials: the environment's when `AWS_ACCESS_KEY_ID` is set, as Lambda sets it
///   for the function's role; otherwise the default chain.
/// - Region: `AWS_REGION` when set; otherwise the default chain.
///
/// Everything else (`AWS_ENDPOINT_URL`, retries, timeouts) is read as
/// `aws_config::load_from_env` reads it.
pub async fn function_sdk_config() -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(
        SharedHttpClient::new(ConnectorOnFirstRequest(https_client())),
    );
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        loader = loader.credentials_provider(EnvironmentVariableCredentialsProvider::new());
    }
    if let Some(region) = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()) {
        loader = loader.region(Region::new(region));
    }
    loader.load().await
}

/// An HTTP client whose connector is built when the first request needs one, not when a
/// client is constructed.
///
/// The SDK's hyper client builds a connector in `validate_base_client_config`, that
/// is at every client's construction, only to warm the platform's certificate cache,
/// and drops it. This wrapper leaves that check at its default (nothing to check) and
/// passes `http_connector` to the inner client, which builds one connector per
/// connector settings and caches it for every client that shares this configuration.
#[derive(Debug)]
struct ConnectorOnFirstRequest(SharedHttpClient);

impl HttpClient for ConnectorOnFirstRequest {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        self.0.http_connector(settings, components)
    }

    fn connector_metadata(
        &self,
    ) -> Option<aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata> {
        self.0.connector_metadata()
    }
}

/// The SDK's default HTTPS client (rustls with aws-lc, the environment's proxy
/// settings), trusting [`function_roots`].
fn https_client() -> SharedHttpClient {
    Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector = Connector::builder()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::AwsLc,
            ))
            .proxy_config(ProxyConfig::from_env());
        if let Some(roots) = function_roots() {
            connector = connector.tls_context(roots.clone());
        }
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.build()
    })
}

static ROOTS: OnceLock<Option<TlsContext>> = OnceLock::new();

/// The TLS context of one CA bundle, read the first time a connector is built; `None`
/// (the SDK's default context: the native store, or `SSL_CERT_FILE` alone) when
/// `SSL_CERT_FILE` is set or neither bundle can be read.
fn function_roots() -> Option<&'static TlsContext> {
    ROOTS
        .get_or_init(|| {
            if std::env::var_os("SSL_CERT_FILE").is_some() {
                return None;
            }
            let pem = [LAMBDA_CA_BUNDLE, DEBIAN_CA_BUNDLE]
                .iter()
                .find_map(|path| trusted_roots_pem(Path::new(path)))?;
            TlsContext::builder()
                .with_trust_store(TrustStore::empty().with_pem_certificate(pem))
                .build()
                .ok()
        })
        .as_ref()
}

/// True once a connector has been built, and the roots read.
#[cfg(test)]
fn roots_were_read() -> bool {
    ROOTS.get().is_some()
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

    /// A DynamoDB error answer to one request, on a loopback port.
    async fn one_answer() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 64 * 1024];
            let _ = stream.read(&mut request).await.unwrap();
            let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"answered by the test"}"#;
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.unwrap();
        });
        url
    }

    #[tokio::test]
    async fn clients_build_no_connector_until_the_first_request_which_reads_the_roots_once() {
        // As Lambda sets them (no other test here reads these variables). Without a
        // region, the default chain would ask IMDS, which is a request of its own.
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        let config = function_sdk_config().await;
        let _sqs = aws_sdk_sqs::Client::new(&config);
        let _s3 = aws_sdk_s3::Client::new(&config);
        let _events = aws_sdk_eventbridge::Client::new(&config);
        let dynamodb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&config)
                .endpoint_url(one_answer().await)
                .build(),
        );
        assert!(
            !roots_were_read(),
            "a client's construction built a connector, so init pays for the roots"
        );

        // The first request builds the connector (reading the roots) and goes through it.
        let error = dynamodb.list_tables().send().await.unwrap_err();
        assert_eq!(
            error.into_service_error().meta().message(),
            Some("answered by the test")
        );
        assert!(roots_were_read());
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
        assert!(
            system_count > 50,
            "{system:?} holds {system_count} certificates"
        );

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
        assert!(
            kept.len() <= system_count && kept.len() > 50,
            "{}",
            kept.len()
        );
        for der in &kept {
            webpki::anchor_from_trusted_cert(der).expect("every kept certificate is an anchor");
        }
        assert!(!kept.iter().any(|der| der.as_ref() == b"not a certificate"));

        // The SDK builds its rustls connector from them (adding each to a
        // RootCertStore, which panics on one it cannot parse) without panicking.
        let context = TlsContext::builder()
            .with_trust_store(
                TrustStore::empty().with_pem_certificate(trusted_roots_pem(&bundle).unwrap()),
            )
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
