//! The Sortie console: plain ES modules (Preact + htm, vendored; no build step) under
//! `assets/`, embedded at build time and served by the `api` function and `sortie dev`.
//!
//! [`router`] answers `GET`/`HEAD /` with `index.html`, its placeholders replaced (the
//! hashed asset prefix and the [`ConsoleConfig`] as JSON), and
//! `GET`/`HEAD /assets/<hash>/<path>` with the embedded files, cached for a year: `<hash>` is
//! [`ASSET_HASH`], a content hash of every asset, so a new build is a new URL. Every answer
//! carries a strict Content-Security-Policy ([`content_security_policy`]). Decisions:
//! `docs/decisions/console.md`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header::{
    ALLOW, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

mod config;

pub use config::{ConsoleConfig, ConsoleMode, OidcConfig, DEFAULT_SCOPES};

/// One embedded asset file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its path under `assets/`, with `/` separators (`pages/job.js`).
    pub path: &'static str,
    /// Its content.
    pub bytes: &'static [u8],
    /// The `Content-Type` it is served with.
    pub content_type: &'static str,
}

mod generated {
    use super::Asset;
    include!(concat!(env!("OUT_DIR"), "/assets.rs"));
}

pub use generated::{ASSETS, ASSET_HASH};

/// The routes API Gateway sends to the `api` function without its JWT authorizer, as the
/// SAM template writes them (method, path): GET and HEAD of each (the router answers
/// both), since a method without its route falls to `$default` and its authorizer.
pub const GATEWAY_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("HEAD", "/"),
    ("GET", "/assets/{proxy+}"),
    ("HEAD", "/assets/{proxy+}"),
];

/// The page every console URL starts from; the only HTML.
pub const INDEX: &str = "index.html";

/// `Cache-Control` of the hashed assets: a year, never revalidated.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The embedded asset at `path` (`app.js`, `pages/job.js`), if there is one.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS
        .binary_search_by(|a| a.path.cmp(path))
        .ok()
        .map(|i| &ASSETS[i])
}

/// The URL prefix of the current assets: `/assets/<hash>` (no trailing slash).
pub fn assets_prefix() -> String {
    format!("/assets/{ASSET_HASH}")
}

/// `s` escaped for an HTML attribute value or text: `&`, `"`, `'`, `<` and `>`.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// `index.html` with `{{ASSETS}}` and `{{CONFIG}}` replaced, or `None` when the build
/// embedded no `index.html`.
pub fn render_index(config: &ConsoleConfig) -> Option<String> {
    let page = std::str::from_utf8(asset(INDEX)?.bytes).ok()?;
    Some(
        page.replace("{{ASSETS}}", &assets_prefix())
            .replace("{{CONFIG}}", &escape_html(&config.to_json())),
    )
}

/// The console's Content-Security-Policy: everything from its own origin only, no inline
/// script or style, no `eval`, never framed; `connect-src` adds the OIDC issuer's origin
/// (discovery) and the token endpoint's when one is configured.
pub fn content_security_policy(config: &ConsoleConfig) -> String {
    let mut connect = vec!["'self'".to_string()];
    for origin in config.connect_origins() {
        if !connect.contains(&origin) {
            connect.push(origin);
        }
    }
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src {}; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        connect.join(" ")
    )
}

/// What the console's handlers share.
struct Console {
    /// The rendered `index.html`.
    index: Option<String>,
}

/// The console's routes: `GET`/`HEAD /` and `GET`/`HEAD /assets/{hash}/{*path}`, each answer
/// with the security headers. Merge it into the API's router; other paths are not its own.
pub fn router(config: ConsoleConfig) -> axum::Router {
    let csp = HeaderValue::from_str(&content_security_policy(&config))
        .expect("the policy is ASCII: origins are checked");
    let state = Arc::new(Console {
        index: render_index(&config),
    });
    axum::Router::new()
        .route("/", get(index).fallback(method_not_allowed))
        .route(
            "/assets/{hash}/{*path}",
            get(asset_file).fallback(method_not_allowed),
        )
        .with_state(state)
        .layer(axum::middleware::map_response(
            move |mut response: Response| {
                let csp = csp.clone();
                async move {
                    let headers = response.headers_mut();
                    headers.insert(CONTENT_SECURITY_POLICY, csp);
                    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
                    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
                    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
                    response
                }
            },
        ))
}

async fn index(State(console): State<Arc<Console>>) -> Response {
    match &console.index {
        Some(page) => (
            [
                (CONTENT_TYPE, "text/html; charset=utf-8"),
                (CACHE_CONTROL, "no-cache"),
            ],
            page.clone(),
        )
            .into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            "this build embeds no console (crates/console/assets/index.html is missing)".into(),
        ),
    }
}

async fn asset_file(Path((hash, path)): Path<(String, String)>) -> Response {
    // Only a lookup in the embedded table: no path is ever opened.
    match asset(&path).filter(|a| hash == ASSET_HASH && a.path != INDEX) {
        Some(a) => (
            [(CONTENT_TYPE, a.content_type), (CACHE_CONTROL, IMMUTABLE)],
            Body::from(a.bytes),
        )
            .into_response(),
        None if hash != ASSET_HASH => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "asset /assets/{hash}/{path} was not found: this console's assets are under {} \
                 (reload the page)",
                assets_prefix()
            ),
        ),
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("asset /assets/{hash}/{path} was not found"),
        ),
    }
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Response {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{method} is not allowed on {}; allowed: GET, HEAD",
            uri.path()
        ),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// The API's error body: `{"error": {"code", "message", "fields": []}}`.
#[derive(Serialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Serialize)]
struct ErrorDetail {
    code: &'static str,
    message: String,
    fields: [(); 0],
}

fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code,
            message,
            fields: [],
        },
    };
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        serde_json::to_string(&body).expect("an error body serialises"),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
