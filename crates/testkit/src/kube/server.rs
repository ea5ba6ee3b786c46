//! The double's server: its test CA and TLS, the accept loop, and one request's way from
//! the wire to [`State::answer`](super::state::State) and back.

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use tokio::sync::oneshot;

use super::rules::parse_query;
use super::state::State;
use super::KubeRequest;

pub(super) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not take the double down with it.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

pub(super) fn new_ca(name: &str) -> (rcgen::Certificate, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("generate the CA key");
    let cert = params.self_signed(&key).expect("self-sign the CA");
    (cert, Issuer::new(params, key))
}

/// A fresh test CA (its PEM) and a server configuration whose certificate, for
/// `127.0.0.1` and `localhost`, it signed; `name` is the certificate's common name.
pub(crate) fn loopback_tls(name: &str) -> (String, rustls::ServerConfig) {
    let (ca_cert, ca_issuer) = new_ca(&format!("Sortie tests: {name} CA"));
    let mut server_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("server certificate parameters");
    server_params.distinguished_name = common_name(name);
    server_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().expect("generate the server key");
    let server_cert = server_params
        .signed_by(&server_key, &ca_issuer)
        .expect("sign the server certificate");
    let key = PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        server_key.serialize_der(),
    ));
    (ca_cert.pem(), server_tls(server_cert.der().clone(), key))
}

pub(super) fn server_tls(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("the server certificate and key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// The server thread: accepts connections until told to stop.
pub(super) fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    state: Arc<Mutex<State>>,
    mut stop: oneshot::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the KubeDouble runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        loop {
            let tcp = tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(_) => {
                        // E.g. out of file descriptors: wait instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let acceptor = acceptor.clone();
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                // A client that refuses the certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request| handle(Arc::clone(&state), request));
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    // Dropping the runtime drops every connection still open.
}

pub(super) async fn handle(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let body = if bytes.is_empty() {
        None
    } else {
        Some(
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        )
    };
    let recorded = KubeRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parse_query(parts.uri.query().unwrap_or_default()),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let ((status, answer), delay) = {
        let mut state = lock(&state);
        state.requests.push(recorded.clone());
        (state.answer(&recorded), state.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
