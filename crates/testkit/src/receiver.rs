//! A webhook receiver over TLS on 127.0.0.1, for notification tests: its own test CA (write
//! [`Receiver::ca_pem`] to a file and point `SSL_CERT_FILE` at it), answers scripted per
//! path (each path answers its script in turn, then 200), and every request kept. It runs on
//! its own thread with its own tokio runtime; dropping it stops it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its path.
    pub path: String,
    /// Its headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// Its body.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Book {
    scripts: HashMap<String, VecDeque<u16>>,
    received: Vec<Received>,
}

/// The receiver.
pub struct Receiver {
    port: u16,
    ca_pem: String,
    book: Arc<Mutex<Book>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts a receiver on a free port of 127.0.0.1.
    ///
    /// # Panics
    ///
    /// When no port can be bound or the certificates cannot be made.
    pub fn start() -> Self {
        let (ca_pem, tls) = crate::kube::server::loopback_tls("webhook-receiver");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let book = Arc::new(Mutex::new(Book::default()));
        let (shutdown, mut stop) = oneshot::channel::<()>();
        let served = book.clone();
        let thread = std::thread::Builder::new()
            .name(format!("receiver-{port}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the receiver's runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
                    loop {
                        let tcp = tokio::select! {
                            _ = &mut stop => break,
                            accepted = listener.accept() => match accepted {
                                Ok((tcp, _)) => tcp,
                                Err(_) => continue,
                            },
                        };
                        let (acceptor, book) = (acceptor.clone(), served.clone());
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let service = service_fn(move |r| answer(book.clone(), r));
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(tls), service)
                                .await;
                        });
                    }
                });
            })
            .expect("spawn the receiver");
        Self {
            port,
            ca_pem,
            book,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The PEM of the CA that signed its certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// `path` answers `statuses` in turn, then 200.
    pub fn script(&self, path: &str, statuses: &[u16]) {
        self.book
            .lock()
            .unwrap()
            .scripts
            .insert(path.to_string(), statuses.iter().copied().collect());
    }

    /// The requests `path` got, in order.
    pub fn received(&self, path: &str) -> Vec<Received> {
        self.book
            .lock()
            .unwrap()
            .received
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(
    book: Arc<Mutex<Book>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let status = {
        let mut book = book.lock().unwrap_or_else(|p| p.into_inner());
        book.received.push(Received {
            path: path.clone(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body,
            at: Instant::now(),
        });
        book.scripts
            .get_mut(&path)
            .and_then(VecDeque::pop_front)
            .unwrap_or(200)
    };
    let mut response = Response::new(Full::new(Bytes::from(format!("answer {status}"))));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    Ok(response)
}
