//! The development token in front of the API: a request without it is refused, one with
//! it acts as the local development user.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sortie_api::Route;
use subtle::ConstantTimeEq;

/// The issuer of `sortie dev`'s named users.
pub const DEV_USER_ISSUER: &str = "sortie:local-dev-user";

/// The routes of the API's route table a request may reach without the development
/// token: the meta routes (no `security`), the runner's (job token) and the agents' (pool
/// credential), each of which checks its own credential. Matched as the router matches:
/// the path after the router's `/-/` rewrite ([`canonical_path`]), against every route's
/// template with axum's own matcher (`matchit`), then the method (`HEAD` falling back
/// to `GET`, as axum's method router does).
///
/// [`canonical_path`]: sortie_api::routes::separator::canonical_path
fn open_route(method: &Method, path: &str) -> bool {
    /// The route table as the router's matcher: each template's routes with their methods.
    static TABLE: OnceLock<matchit::Router<Vec<(Method, Route)>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut by_template: BTreeMap<&'static str, Vec<(Method, Route)>> = BTreeMap::new();
        for route in Route::ALL {
            let (method, template) = route.method_and_path();
            by_template
                .entry(template)
                .or_default()
                .push((method, *route));
        }
        let mut table = matchit::Router::new();
        for (template, routes) in by_template {
            // The router is built from the same templates and panics on one it refuses;
            // were one refused here, its paths would match nothing: closed, not open.
            let _ = table.insert(template, routes);
        }
        table
    });
    // The router's rewrite keeps the path as sent when the rewritten one is no valid
    // URI path; so does this.
    let canonical = sortie_api::routes::separator::canonical_path(path);
    let routed = if axum::http::uri::PathAndQuery::try_from(canonical.as_str()).is_ok() {
        canonical.as_str()
    } else {
        path
    };
    let Ok(found) = table.at(routed) else {
        return false;
    };
    let on = |m: &Method| found.value.iter().find(|(rm, _)| rm == m).map(|(_, r)| *r);
    let route = match on(method) {
        None if *method == Method::HEAD => on(&Method::GET),
        route => route,
    };
    route.is_some_and(|r| r.is_public() || r.skips_user_token())
}

/// True when `sent` is `want`, compared in constant time (for equal lengths).
fn same_token(sent: &str, want: &str) -> bool {
    bool::from(sent.as_bytes().ct_eq(want.as_bytes()))
}

/// Lets through the console (`GET`/`HEAD` of `/` and `/assets/…`) and the routes
/// [`open_route`] names (health, the OpenAPI document, the runner's and the agents');
/// everything else needs the development token (`expected` is `Bearer <token>`), the
/// scheme matched in any case and the token compared in constant time. A refusal is 401
/// with `WWW-Authenticate: Bearer`, plus `error="invalid_token"` when a bearer token was
/// sent but is not the development one.
///
/// A named user's token (`users`: token → name) passes too, with claims for that user on
/// the request, so the API sees that user and not the development identity. Every named
/// user's token is compared, in constant time, whichever matches.
pub(super) async fn require_dev_token(
    expected: &str,
    users: &BTreeMap<String, String>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    // The console's page and assets are public (GET and HEAD only): it signs in itself,
    // and its API calls carry the token.
    let console = matches!(*req.method(), Method::GET | Method::HEAD)
        && (path == "/" || path.starts_with("/assets/"));
    let open = console || open_route(req.method(), path);
    let want = expected.strip_prefix("Bearer ").unwrap_or(expected);
    let sent = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .and_then(|v| {
            let (scheme, token) = v.split_once([' ', '\t']).unwrap_or((v, ""));
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start_matches([' ', '\t']))
        });
    if open || sent.is_some_and(|t| same_token(t, want)) {
        return next.run(req).await;
    }
    // Every user's token is compared (no early exit, no ordered lookup by the secret).
    let user = sent.and_then(|t| {
        users.iter().fold(None, |hit, (token, name)| {
            if same_token(t, token) {
                Some(name.clone())
            } else {
                hit
            }
        })
    });
    if let Some(name) = user {
        let claims = BTreeMap::from([
            ("iss".to_string(), json!(DEV_USER_ISSUER)),
            ("sub".to_string(), json!(name)),
        ]);
        req.extensions_mut()
            .insert(sortie_api::VerifiedClaims(claims));
        return next.run(req).await;
    }
    let (code, challenge) = match sent {
        Some(_) => ("invalid_token", r#"Bearer error="invalid_token""#),
        None => ("unauthenticated", "Bearer"),
    };
    let body = json!({"error": {"code": code, "message": "sortie dev needs `Authorization: Bearer <token>`, as printed at start", "fields": []}});
    (
        axum::http::StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, challenge)],
        axum::Json(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every method a client may send.
    const METHODS: [Method; 7] = [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::POST,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ];

    /// The route's template with each `{param}` replaced by `value`.
    fn concrete(template: &str, value: &str) -> String {
        template
            .split('/')
            .map(|seg| if seg.starts_with('{') { value } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    }

    fn opens(route: Route) -> bool {
        route.is_public() || route.skips_user_token()
    }

    /// The routes that need no development token.
    fn open_routes() -> Vec<Route> {
        Route::ALL.iter().copied().filter(|r| opens(*r)).collect()
    }

    proptest! {
        /// Each route, called with its own method on a path of its template, is open
        /// exactly when the route table says it checks its own credential (or none).
        #[test]
        fn each_route_is_open_exactly_as_its_table_entry_says(value in "[a-z0-9][a-z0-9_.~]{0,11}") {
            for route in Route::ALL {
                let (method, template) = route.method_and_path();
                let path = concrete(template, &value);
                prop_assert_eq!(open_route(&method, &path), opens(*route), "{} {}", method, path);
            }
        }

        /// An open route's path with a method its template does not declare is refused
        /// (HEAD only where GET is declared, as the router answers it).
        #[test]
        fn an_open_routes_path_with_another_method_is_refused(value in "[a-z0-9]{1,12}") {
            for route in open_routes() {
                let (_, template) = route.method_and_path();
                let declared: Vec<Method> = Route::ALL
                    .iter()
                    .map(|r| r.method_and_path())
                    .filter(|(_, t)| *t == template)
                    .map(|(m, _)| m)
                    .collect();
                let path = concrete(template, &value);
                for method in METHODS {
                    let answered = declared.contains(&method)
                        || (method == Method::HEAD && declared.contains(&Method::GET));
                    if !answered {
                        prop_assert!(!open_route(&method, &path), "{} {} is open", method, path);
                    }
                }
            }
        }

        /// A user route whose parameters are named like an open route's last segment
        /// (`DELETE /v1/agent-pools/p/tokens/exit` ends as an agent's route does) needs
        /// the token; so does a path that is no route but ends like one.
        #[test]
        fn a_path_that_only_shares_an_open_routes_suffix_is_refused(prefix in "[a-z0-9]{1,8}") {
            let tails: Vec<&str> = open_routes()
                .into_iter()
                .filter_map(|r| r.method_and_path().1.rsplit('/').next())
                .filter(|t| !t.starts_with('{'))
                .collect();
            for route in Route::ALL.iter().filter(|r| !opens(**r)) {
                let (method, template) = route.method_and_path();
                for tail in &tails {
                    let path = concrete(template, tail);
                    prop_assert!(!open_route(&method, &path), "{} {} is open", method, path);
                }
            }
            for route in open_routes() {
                let (method, template) = route.method_and_path();
                let path = format!("/v1/jobs/{prefix}/extra{}", concrete(template, &prefix).trim_start_matches("/v1"));
                prop_assert!(!open_route(&method, &path), "{} {} is open", method, path);
                let path = format!("/v1/agent-pools/{prefix}/tokens/{}", template.rsplit('/').next().unwrap_or_default());
                prop_assert!(!open_route(&method, &path), "{} {} is open", method, path);
            }
        }
    }

    #[test]
    fn the_runner_agent_and_meta_routes_are_open_and_the_rest_closed() {
        assert!(open_route(&Method::GET, "/v1/health"));
        assert!(open_route(&Method::HEAD, "/v1/health"));
        assert!(open_route(&Method::GET, "/v1/jobs/j1/spec"));
        assert!(open_route(&Method::POST, "/v1/agent-pools/p1/jobs/j1/exit"));
        assert!(!open_route(&Method::DELETE, "/v1/jobs/j1/spec"));
        assert!(!open_route(
            &Method::DELETE,
            "/v1/agent-pools/p1/tokens/exit"
        ));
        assert!(!open_route(&Method::GET, "/v1/groups/acme/-/runners"));
        assert!(!open_route(&Method::GET, "/v1/nothing/spec"));
    }

    #[test]
    fn tokens_compare_equal_only_when_identical() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("", "abc"));
    }
}
