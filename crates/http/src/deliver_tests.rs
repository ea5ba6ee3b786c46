use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A TLS receiver on 127.0.0.1 (its certificate names `localhost` and `127.0.0.1`) that
/// answers every request with `answer` after `delay`, and counts connections.
struct Receiver {
    port: u16,
    roots: rustls::RootCertStore,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn receiver(answer: Vec<u8>, delay: Duration) -> Receiver {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (counted, kept) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let (acceptor, answer, kept) = (acceptor.clone(), answer.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head, then the body its Content-Length gives.
                loop {
                    let Ok(n) = tls.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let length = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if seen.len() >= head_end + 4 + length {
                            break;
                        }
                    }
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&seen).to_string());
                tokio::time::sleep(delay).await;
                let _ = tls.write_all(&answer).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    Receiver {
        port,
        roots,
        connections,
        requests,
    }
}

fn answer(status_line: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status_line}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Resolves every name to the addresses it was given.
struct Fixed(Vec<IpAddr>);

#[async_trait::async_trait]
impl Resolve for Fixed {
    async fn resolve(&self, _host: &str, _port: u16) -> Result<Vec<IpAddr>, String> {
        Ok(self.0.clone())
    }
}

fn client(r: &Receiver, resolved: &[&str], local: bool) -> GuardedClient {
    let resolved = resolved.iter().map(|a| a.parse().unwrap()).collect();
    GuardedClient::new(r.roots.clone(), Arc::new(Fixed(resolved)), local)
}

#[tokio::test]
async fn a_delivery_reaches_a_local_receiver_with_its_headers_and_body() {
    let r = receiver(answer("202 Accepted", "", b"thanks"), Duration::ZERO).await;
    let c = client(&r, &["127.0.0.1"], true);
    let url = format!("https://localhost:{}/hook?x=1", r.port);
    let got = c
        .post(&url, &[("x-sortie-delivery", "d-1")], b"{\"a\":1}".to_vec())
        .await
        .unwrap();
    assert_eq!((got.status, got.body.as_slice()), (202, &b"thanks"[..]));
    let seen = r.requests.lock().unwrap().join("");
    assert!(seen.starts_with("POST /hook?x=1 HTTP/1.1\r\n"), "{seen}");
    assert!(seen.contains("x-sortie-delivery: d-1"), "{seen}");
    assert!(
        seen.contains(&format!("host: localhost:{}", r.port)),
        "{seen}"
    );
    assert!(seen.ends_with("{\"a\":1}"), "{seen}");
}

#[tokio::test]
async fn internal_addresses_are_refused_before_any_connection() {
    let r = receiver(answer("200 OK", "", b""), Duration::ZERO).await;
    // Not local: loopback is internal like any other.
    let c = client(&r, &["127.0.0.1"], false);
    for url in [
        format!("https://127.0.0.1:{}/", r.port),
        format!("https://localhost:{}/", r.port),
        "https://169.254.169.254/latest/meta-data/".to_string(),
        "https://10.0.0.1/".to_string(),
        "http://hooks.example.com/".to_string(),
    ] {
        let got = c.post(&url, &[], vec![]).await;
        assert!(matches!(got, Err(Failure::Refused(_))), "{url}: {got:?}");
    }
    // A name that resolves to a metadata address, or to a public address and a private one.
    for resolved in [&["169.254.169.254"][..], &["8.8.8.8", "10.0.0.1"]] {
        let c = client(&r, resolved, false);
        let got = c.post("https://hooks.example.com/x", &[], vec![]).await;
        assert!(
            matches!(got, Err(Failure::Refused(_))),
            "{resolved:?}: {got:?}"
        );
    }
    assert_eq!(r.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_redirect_is_an_answer_and_is_not_followed() {
    let r = receiver(
        answer("302 Found", "location: https://169.254.169.254/\r\n", b""),
        Duration::ZERO,
    )
    .await;
    let c = client(&r, &["127.0.0.1"], true);
    let got = c
        .post(&format!("https://localhost:{}/", r.port), &[], vec![])
        .await
        .unwrap();
    assert_eq!(got.status, 302);
    assert_eq!(r.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_slow_receiver_times_out_and_a_big_answer_is_cut() {
    let slow = receiver(answer("200 OK", "", b""), Duration::from_secs(5)).await;
    let mut c = client(&slow, &["127.0.0.1"], true);
    c.timeout = Duration::from_millis(300);
    let got = c
        .post(&format!("https://localhost:{}/", slow.port), &[], vec![])
        .await;
    assert_eq!(got, Err(Failure::TimedOut));

    let big = vec![b'x'; MAX_ANSWER_BYTES + 4096];
    let r = receiver(
        answer("503 Service Unavailable", "retry-after: 7\r\n", &big),
        Duration::ZERO,
    )
    .await;
    let c = client(&r, &["127.0.0.1"], true);
    let got = c
        .post(&format!("https://localhost:{}/", r.port), &[], vec![])
        .await
        .unwrap();
    assert_eq!(got.status, 503);
    assert_eq!(got.retry_after.as_deref(), Some("7"));
    assert_eq!(got.body.len(), MAX_ANSWER_BYTES);
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let r = receiver(answer("200 OK", "", b""), Duration::ZERO).await;
    // The receiver's certificate names localhost and 127.0.0.1, not this name.
    let c = client(&r, &["127.0.0.1"], true);
    let got = c
        .post(
            &format!("https://hooks.localtest.me:{}/", r.port),
            &[],
            vec![],
        )
        .await;
    match got {
        Err(Failure::Unreachable(why)) => assert!(why.contains("TLS"), "{why}"),
        other => panic!("{other:?}"),
    }
}
