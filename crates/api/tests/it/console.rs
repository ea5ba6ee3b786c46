//! The console beside the v1 routes: served by the API's router, outside the route table
//! and the OpenAPI document; and the document itself, served from one serialisation.

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use sortie_api::console::{ConsoleConfig, ASSET_HASH};
use sortie_client::endpoints;
use sortie_testkit::world::World;
use tower::ServiceExt;

async fn get(
    app: &axum::Router,
    method: &str,
    path: &str,
) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status.as_u16(), parts.headers, bytes.to_vec())
}

fn app(console: ConsoleConfig) -> axum::Router {
    let mut state = World::fast().api_state();
    state.console = console;
    sortie_api::router(state)
}

#[tokio::test]
async fn the_router_serves_the_console_at_the_root_with_its_configuration() {
    let app = app(ConsoleConfig::oidc("https://idp.example.com", "", "sortie"));
    let (status, headers, body) = get(&app, "GET", "/").await;
    assert_eq!(status, 200);
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("connect-src 'self' https://idp.example.com;"));
    let page = String::from_utf8(body).unwrap();
    // No client id: the page is told, and says sign-in is not configured.
    assert!(
        page.contains("&quot;client_id&quot;:&quot;&quot;"),
        "{page}"
    );
    assert!(page.contains(&format!("/assets/{ASSET_HASH}/")));
    // A wrong method on the console's path is a JSON 405 like the API's.
    let (status, headers, body) = get(&app, "DELETE", "/").await;
    assert_eq!(status, 405);
    assert_eq!(headers["allow"], "GET, HEAD");
    let error: sortie_api::ErrorBody = serde_json::from_slice(&body).unwrap();
    assert_eq!(error.error.code, "method_not_allowed");
}

#[tokio::test]
async fn the_openapi_document_is_served_from_one_serialisation_without_the_console() {
    let app = app(ConsoleConfig::local());
    let doc = endpoints::openapi_json();
    let (status, headers, first) = get(&app, doc.method.as_str(), &doc.path).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    let (_, _, second) = get(&app, doc.method.as_str(), &doc.path).await;
    assert_eq!(first, second);
    let served: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(served, sortie_api::openapi());
    let paths = served["paths"].as_object().unwrap();
    // Only the v1 routes and the job identity issuer's public documents (which OIDC puts
    // at `/.well-known/`).
    let api_path = |p: &str| p.starts_with("/v1/") || p.starts_with("/.well-known/");
    assert!(
        paths.keys().all(|p| api_path(p)),
        "the console is not an API operation: {:?}",
        paths.keys()
    );
    assert!(sortie_api::Route::ALL
        .iter()
        .all(|r| api_path(r.method_and_path().1)));
}
