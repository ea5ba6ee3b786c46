//! The one client of Sortie's HTTP API, shared by the CLI, the Terraform provider, the
//! pilot and the agent (the console's counterpart is `crates/console/assets/endpoints.js`,
//! rendered from the same document by [`console_module`]).
//!
//! - [`endpoints`]: one function per operation of the committed `openapi.json`, generated
//!   at build time (`build.rs`), named by its `operationId` and taking its path parameters
//!   in the template's order. A call to an endpoint the API does not serve does not compile.
//! - [`segment`]: the one place a path parameter is encoded.
//! - [`Transport`]: one request over hyper and rustls, with the bearer token marked
//!   sensitive, a timeout, and the answer read whole ([`Reply`]).
//! - [`retry`]: the bounded, backing-off retry of transient failures.
//!
//! Why generated here and not by progenitor: `docs/decisions/one-client.md`.

pub mod retry;
mod transport;

pub use transport::{
    cleartext_problem, http_client, HttpClient, Outgoing, Reply, Transport, TransportError,
};

use http::Method;

/// One call of the API: its method and its path (parameters encoded, no query yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The HTTP method.
    pub method: Method,
    /// The path from `/`, with its parameters encoded and any query added.
    pub path: String,
}

impl Call {
    /// A call of `method` on `path`.
    pub fn new(method: Method, path: String) -> Self {
        Self { method, path }
    }

    /// The call with `params` as its query: each name and value encoded; a `None` value
    /// is left out.
    pub fn query<'a>(
        mut self,
        params: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Self {
        let mut first = !self.path.contains('?');
        for (name, value) in params {
            let Some(value) = value else { continue };
            self.path.push(if first { '?' } else { '&' });
            first = false;
            self.path.push_str(&segment(name));
            self.path.push('=');
            self.path.push_str(&segment(value));
        }
        self
    }

    /// `METHOD /path`, as errors name a call.
    pub fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// One operation of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    /// Its `operationId`: the name of its function in [`endpoints`].
    pub id: &'static str,
    /// Its method, upper case.
    pub method: &'static str,
    /// Its path template, such as `/v1/jobs/{id}`.
    pub template: &'static str,
}

/// Every endpoint of the API as a function, generated from the committed `openapi.json`.
pub mod endpoints {
    use super::{segment, Call, Method, Operation};
    include!(concat!(env!("OUT_DIR"), "/endpoints.rs"));
}

/// A path parameter as one segment: every byte but `A-Z a-z 0-9 - . _ ~` percent-encoded,
/// so an environment or group path (`acme/payments`) is one segment (`acme%2Fpayments`),
/// the API's canonical form. The console's `segment` (`encodeURIComponent`) agrees on
/// every name Sortie accepts.
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A group path as the `{group}` parameter: the root group (`""`) is `-`.
pub fn group(path: &str) -> &str {
    let path = path.trim_matches('/');
    if path.is_empty() {
        "-"
    } else {
        path
    }
}

/// The console's module of endpoints (`crates/console/assets/endpoints.js`): the same
/// operations as [`endpoints`], each a function answering its path, and the console's
/// `segment`. The committed file must equal this (`the_console_module_is_rendered_from_the_document`).
pub fn console_module() -> String {
    let mut out = String::from(
        "// Generated from crates/client/openapi.json by sortie_client::console_module: do not edit.\n\
         // Every path the console calls comes from here; `SORTIE_BLESS_OPENAPI=1 cargo test -p sortie-client`\n\
         // renders it again after an API change.\n\n\
         /** A path parameter as one segment: a group or environment path stays one segment. */\n\
         export function segment(value) {\n  return encodeURIComponent(String(value));\n}\n\n\
         /** A group path as the `{group}` parameter: the root group is `-`. */\n\
         export function group(path) {\n  const p = String(path || '').replace(/^\\/+|\\/+$/g, '');\n  return p || '-';\n}\n",
    );
    for op in endpoints::OPERATIONS {
        let params: Vec<&str> = op
            .template
            .split('{')
            .skip(1)
            .filter_map(|p| p.split('}').next())
            .collect();
        let mut body = String::new();
        let mut rest = op.template;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map_or(rest.len(), |c| c + open);
            body.push_str(&rest[..open]);
            body.push_str(&format!("${{segment({})}}", &rest[open + 1..close]));
            rest = &rest[(close + 1).min(rest.len())..];
        }
        body.push_str(rest);
        out.push_str(&format!(
            "\n/** `{} {}` */\nexport const {} = ({}) => `{}`;\n",
            op.method,
            op.template,
            op.id,
            params.join(", "),
            body
        ));
    }
    out
}

#[cfg(test)]
mod tests;
