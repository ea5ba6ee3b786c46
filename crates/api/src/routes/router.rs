//! The axum router of [`Route::ALL`], behind the `/-/` rewrite, with JSON answers for
//! an unknown path (404) and a wrong method (405 naming the allowed ones). Every answer
//! outside the console's own routes, errors included, carries [`API_HEADERS`].

use std::collections::BTreeMap;

use axum::extract::Extension;
use axum::http::header::{CACHE_CONTROL, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::MethodRouter;
use tower::Layer;

use super::separator::{self, OriginalPath};
use super::Route;
use crate::error::ApiError;
use crate::AppState;

/// The router of [`Route::ALL`], behind the `/-/` rewrite, plus the console's routes.
/// Every answer of a route carries that [`Route`] in its extensions.
pub(crate) fn build(state: AppState) -> axum::Router {
    let mut templates: BTreeMap<&'static str, (MethodRouter<AppState>, Vec<String>)> =
        BTreeMap::new();
    for route in Route::ALL {
        let route = *route;
        let (method, template) = route.method_and_path();
        let entry = templates
            .entry(template)
            .or_insert_with(|| (MethodRouter::new(), vec![]));
        // Each answer carries its route, so tests can find the operation it belongs to.
        let (_, handler) = route.declaration();
        // An audited route runs in its audit scope: the store writes its entry with the change.
        let handler = if route.audited() {
            handler.layer(axum::middleware::from_fn_with_state(
                state.clone(),
                move |state, request, next| super::audit::scope(state, route, request, next),
            ))
        } else {
            handler
        };
        let tagged = handler.layer(tower::util::MapResponseLayer::new(
            move |mut response: Response| {
                response.extensions_mut().insert(route);
                response
            },
        ));
        entry.0 = std::mem::take(&mut entry.0).merge(tagged);
        entry.1.push(method.to_string());
    }
    let mut inner = axum::Router::new();
    for (template, (methods, allowed)) in templates {
        let allowed = allowed.join(", ");
        let methods = methods.fallback(
            move |method: Method, Extension(OriginalPath(path)): Extension<OriginalPath>| {
                let allowed = allowed.clone();
                async move { method_not_allowed(method, &path, &allowed) }
            },
        );
        inner = inner.route(template, methods);
    }
    let console = sortie_console::router(state.console.clone());
    let inner = inner.fallback(not_found).with_state(state);
    let rewritten = tower::util::MapRequestLayer::new(separator::rewrite).layer(inner);
    let rewritten = tower::util::MapResponseLayer::new(with_api_headers).layer(rewritten);
    // The console's `/` and `/assets/{hash}/{*path}` first (outside the route table and the
    // OpenAPI document); every other path goes through the rewrite to the v1 routes.
    axum::Router::new()
        .merge(console)
        .fallback_service(rewritten)
}

/// The headers of every answer of the API (not the console's pages, which set their
/// own): the body is JSON and is never sniffed as anything else (a message that quotes
/// user input cannot become HTML), and it is never stored by a browser or a proxy (it
/// may hold a job's outputs, plan or log).
pub(crate) const API_HEADERS: [(HeaderName, &str); 2] = [
    (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (CACHE_CONTROL, "no-store"),
];

fn with_api_headers(mut response: Response) -> Response {
    // The issuer's public keys may be cached; nothing else may.
    let cache = super::cache_control(&response);
    let headers = response.headers_mut();
    for (name, value) in API_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Some(cache) = cache {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    }
    response
}

async fn not_found(Extension(OriginalPath(path)): Extension<OriginalPath>) -> ApiError {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(&path);
    ApiError::not_found(format!("route {path}"))
}

fn method_not_allowed(method: Method, path: &str, allowed: &str) -> ApiError {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {path}; allowed: {allowed}"),
    )
}
