//! The console through the `api` function's adapter: real API Gateway payload v2 events
//! (`events/apigw-console-index.json`, and the same request for an asset) give the page
//! and a hashed asset with the console's security headers, while the v1 routes and the
//! JSON 404 stay as they were.

use axum::http::HeaderMap;
use serde_json::Value;
use sortie_api::console::{ConsoleConfig, ASSETS, ASSET_HASH, INDEX};
use sortie_api::router;
use sortie_testkit::world::World;

/// The sample event, its path replaced by `path` when given.
fn event(path: Option<&str>) -> String {
    let file = sortie_testkit::repo_root().join("events/apigw-console-index.json");
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    if let Some(path) = path {
        event["rawPath"] = path.into();
        event["requestContext"]["http"]["path"] = path.into();
        event["routeKey"] = "GET /assets/{proxy+}".into();
        event["requestContext"]["routeKey"] = "GET /assets/{proxy+}".into();
    }
    event.to_string()
}

async fn send(app: &axum::Router, event: String) -> (u16, HeaderMap, Vec<u8>) {
    let request = lambda_http::request::from_str(&event).unwrap();
    let response = sortie_lambda_adapters::api_request(app.clone(), request)
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status.as_u16(), parts.headers, bytes.to_vec())
}

fn app(console: ConsoleConfig) -> axum::Router {
    let mut state = World::fast().api_state();
    state.console = console;
    router(state)
}

fn csp(headers: &HeaderMap) -> &str {
    headers["content-security-policy"].to_str().unwrap()
}

#[tokio::test]
async fn the_api_function_serves_the_console_page_and_its_assets_with_a_strict_policy() {
    let app = app(ConsoleConfig::oidc(
        "https://idp.example.com/realms/sortie",
        "sortie-console",
        "sortie-api",
    ));

    let (status, headers, body) = send(&app, event(None)).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(csp(&headers).starts_with("default-src 'none'; script-src 'self'; style-src 'self'"));
    assert!(csp(&headers).contains("connect-src 'self' https://idp.example.com;"));
    assert!(csp(&headers).ends_with("frame-ancestors 'none'"));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let page = String::from_utf8(body).unwrap();
    assert!(page.contains(&format!("/assets/{ASSET_HASH}/")), "{page}");
    assert!(
        page.contains("&quot;client_id&quot;:&quot;sortie-console&quot;"),
        "{page}"
    );

    let asset = ASSETS.iter().find(|a| a.path != INDEX).expect("an asset");
    let path = format!("/assets/{ASSET_HASH}/{}", asset.path);
    let (status, headers, body) = send(&app, event(Some(&path))).await;
    assert_eq!(status, 200, "{path}");
    assert_eq!(headers["content-type"], asset.content_type);
    assert_eq!(
        headers["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert!(csp(&headers).contains("frame-ancestors 'none'"));
    assert_eq!(body, asset.bytes);

    // An old hash is the API's JSON 404, with the policy too.
    let (status, headers, body) = send(
        &app,
        event(Some(&format!("/assets/0123456789abcdef/{}", asset.path))),
    )
    .await;
    assert_eq!(status, 404);
    assert!(headers.contains_key("content-security-policy"));
    let error: sortie_api::ErrorBody = serde_json::from_slice(&body).unwrap();
    assert_eq!(error.error.code, "not_found");
}

#[tokio::test]
async fn the_v1_routes_and_the_json_fallbacks_are_unchanged_beside_the_console() {
    let app = app(ConsoleConfig::local());
    // Health answers as before, without the console's headers.
    let (status, headers, body) = send(&app, event(Some("/v1/health"))).await;
    assert_eq!(status, 200);
    assert!(!headers.contains_key("content-security-policy"));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["status"],
        "ok"
    );
    // Unknown paths next to the console's are the API's JSON 404.
    for path in ["/assets", "/index.html", "/v2/console"] {
        let (status, _, body) = send(&app, event(Some(path))).await;
        assert_eq!(status, 404, "{path}");
        let error: sortie_api::ErrorBody = serde_json::from_slice(&body).unwrap();
        assert_eq!(error.error.code, "not_found", "{path}");
    }
    // The console is not in the route table, nor in the OpenAPI document.
    assert!(sortie_api::Route::ALL
        .iter()
        .all(|r| !r.method_and_path().1.starts_with("/assets") && r.method_and_path().1 != "/"));
    // The document holds the v1 routes and the job identity issuer's public documents,
    // which OIDC puts at `/.well-known/`.
    let doc = sortie_api::openapi();
    let paths = doc["paths"].as_object().unwrap();
    assert!(
        paths
            .keys()
            .all(|p| p.starts_with("/v1/") || p.starts_with("/.well-known/")),
        "{:?}",
        paths.keys()
    );
}
