//! AutoMTLS as go-plugin does it: a self-signed server certificate made at start (sent to
//! Terraform base64 in the handshake line), and TLS that accepts exactly one client
//! certificate, the one Terraform passed in `PLUGIN_CLIENT_CERT`.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};

use crate::error::Error;

/// The server's certificate (DER) and the TLS configuration serving it.
pub struct Tls {
    /// The certificate, for the handshake line.
    pub cert_der: Vec<u8>,
    /// The server configuration (HTTP/2 by ALPN, the client certificate required).
    pub config: Arc<ServerConfig>,
}

/// A certificate like go-plugin's own: `localhost`, a CA for itself, client and server auth.
fn server_cert() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), Error> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let fail = |e: rcgen::Error| Error::Config(format!("could not make the TLS certificate: {e}"));
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(fail)?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(fail)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "HashiCorp");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyAgreement,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let cert = params.self_signed(&key).map_err(fail)?;
    Ok((
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// The first certificate of a PEM text, as DER.
pub fn pem_cert(pem: &str) -> Result<Vec<u8>, Error> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE-----"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .ok()
        .filter(|der| !der.is_empty())
        .ok_or_else(|| Error::Config("PLUGIN_CLIENT_CERT holds no PEM certificate".into()))
}

/// Accepts exactly one certificate (byte for byte) and checks the handshake signature
/// with its key.
#[derive(Debug)]
struct Pinned {
    cert: Vec<u8>,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_slice() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "not Terraform's client certificate".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS set-up for Terraform's client certificate (PEM).
pub fn setup(client_cert_pem: &str) -> Result<Tls, Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = Arc::new(Pinned {
        cert: pem_cert(client_cert_pem)?,
        provider: provider.clone(),
    });
    let (cert, key) = server_cert()?;
    let cert_der = cert.as_ref().to_vec();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS set-up failed: {e}")))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert], key)
        .map_err(|e| Error::Config(format!("TLS set-up failed: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Tls {
        cert_der,
        config: Arc::new(config),
    })
}
