//! `terraform-provider-sortie`: Sortie's objects as Terraform resources.
//!
//! Started by Terraform, it checks go-plugin's magic cookie, serves the plugin protocol 6
//! (`tfplugin6.Provider`, and go-plugin's `GRPCController`) over gRPC on a loopback port
//! with AutoMTLS, and prints the handshake line
//! `1|6|tcp|127.0.0.1:PORT|grpc|<server certificate, base64 DER, no padding>`.

mod accept;
mod api;
mod checks;
mod cty;
mod data;
mod error;
mod model;
mod proto;
mod resources;
mod schema;
mod service;
mod tls;

use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tonic::transport::server::Connected;

use crate::proto::plugin::grpc_controller_server::{GrpcController, GrpcControllerServer};
use crate::proto::tfplugin6::provider_server::ProviderServer;

/// go-plugin's handshake: Terraform's cookie (internal/plugin6/serve.go).
const COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// At most this many connections wait for their TLS handshake to be served.
const PENDING: usize = 16;

/// A TLS connection as tonic serves it.
struct Conn(tokio_rustls::server::TlsStream<TcpStream>);

impl Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// go-plugin's controller: Shutdown ends the process once answered.
struct Controller(mpsc::Sender<()>);

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(
        &self,
        _: tonic::Request<proto::plugin::Empty>,
    ) -> Result<tonic::Response<proto::plugin::Empty>, tonic::Status> {
        let _ = self.0.try_send(());
        Ok(tonic::Response::new(proto::plugin::Empty {}))
    }
}

fn fail(message: &str) -> ! {
    eprintln!("terraform-provider-sortie: {message}");
    std::process::exit(1)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var(COOKIE_KEY).as_deref() != Ok(COOKIE_VALUE) {
        fail("this is a Terraform plugin: Terraform runs it (see docs/provider/index.md)");
    }
    let versions = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    if !versions.split(',').any(|v| v.trim() == "6") {
        fail(&format!(
            "Terraform offers plugin protocol versions `{versions}`; this provider speaks 6 (Terraform 1.0 or later)"
        ));
    }
    let client_cert = std::env::var("PLUGIN_CLIENT_CERT")
        .unwrap_or_else(|_| fail("PLUGIN_CLIENT_CERT is unset: Terraform's AutoMTLS is required"));
    let tls = tls::setup(&client_cert).unwrap_or_else(|e| fail(&e.to_string()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| fail(&format!("could not listen on 127.0.0.1: {e}")));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| fail(&e.to_string()));
    let listener = std::sync::Arc::new(listener);
    let cert = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&tls.cert_der);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
    let (conns, incoming) = mpsc::channel::<std::io::Result<Conn>>(PENDING);
    // Each connection's TLS handshake: bounded in number and time (accept::LIMITS).
    tokio::spawn(accept::serve(
        move || {
            let listener = listener.clone();
            async move { listener.accept().await.map(|(tcp, _)| tcp) }
        },
        move |tcp: TcpStream| {
            let handshake = acceptor.accept(tcp);
            async move { handshake.await.map(Conn) }
        },
        conns,
        accept::LIMITS,
    ));
    let (stop, mut stopped) = mpsc::channel(1);
    println!("1|6|tcp|{addr}|grpc|{cert}");
    let _ = std::io::stdout().flush();
    let served = tonic::transport::Server::builder()
        .add_service(ProviderServer::new(service::SortieProvider::default()))
        .add_service(GrpcControllerServer::new(Controller(stop)))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::ReceiverStream::new(incoming),
            async move {
                stopped.recv().await;
            },
        )
        .await;
    if let Err(e) = served {
        fail(&format!("the gRPC server stopped: {e}"));
    }
}
