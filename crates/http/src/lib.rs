//! The HTTPS client pieces Sortie's programs share: `sortie-pilot` and `sortie-agent` speak
//! only HTTPS to Sortie's API, with hyper's legacy client over rustls (aws-lc-rs, the stack
//! the AWS SDK already builds), and both report an unsuccessful answer on one line.
//! [`deliver`] is the guarded client of notification deliveries (issue 44); [`rest`] is the
//! bounded transport of the code-host REST clients (`sortie-github`, `sortie-gitlab`).

pub mod deliver;
pub mod rest;

use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

/// HTTP and HTTPS over `http`, with the system's CA certificates (`SSL_CERT_FILE` is
/// honoured). Without any certificates plain HTTP still works (local mode and tests); when
/// `https` is needed, that is an error saying why.
pub fn connector(
    https: bool,
    http: HttpConnector,
) -> Result<HttpsConnector<HttpConnector>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = match hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider.clone())
    {
        Ok(builder) => builder,
        Err(e) if https => {
            return Err(format!(
                "no CA certificates to verify the API's HTTPS certificate: {e}"
            ))
        }
        Err(_) => {
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS set-up failed: {e}"))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
        }
    };
    Ok(builder.https_or_http().enable_http1().wrap_connector(http))
}

/// `text` on one line: whitespace runs (including newlines) become one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A short, one-line detail from an error body: its JSON `message`, `error` or `detail`,
/// else the text itself, cut to 200 characters.
pub fn error_detail(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let from_json = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            ["message", "error", "detail"]
                .iter()
                .find_map(|k| v.get(k).and_then(|m| m.as_str()).map(str::to_string))
        });
    one_line(&from_json.unwrap_or_else(|| text.into_owned()))
        .chars()
        .take(200)
        .collect()
}

/// An error with its sources, `a: b: c`, each said once (hyper repeats its cause).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_becomes_one_short_line() {
        assert_eq!(error_detail(br#"{"message":"bad\n  token"}"#), "bad token");
        assert_eq!(error_detail(b"plain\ttext\n"), "plain text");
        assert_eq!(error_detail("x".repeat(300).as_bytes()).len(), 200);
    }

    #[test]
    fn a_chain_says_each_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "connect: refused",
            Some(Box::new(E(
                "refused",
                Some(Box::new(E("os error 111", None))),
            ))),
        );
        assert_eq!(error_chain(&e), "connect: refused: os error 111");
    }

    #[test]
    fn plain_http_works_without_certificates() {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        assert!(connector(false, http).is_ok());
    }
}
