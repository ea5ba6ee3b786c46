//! What the route table knows of each [`Route`], read from its handler's one
//! `#[utoipa::path]` attribute: the method and path template (the router's and the
//! OpenAPI document's), the [`Auth`] kind (its `security(...)`), the operation id, and
//! the OpenAPI entry itself.
//!
//! [`route_table!`] turns `Variant => handler` lines into the [`Route`] enum,
//! [`Route::ALL`] and each route's declaration: a one-path `#[derive(OpenApi)]` of the
//! handler (its path item and the schemas it names, collected as utoipa collects them)
//! and the handler on that path item's method. Nothing else names a route's method,
//! path or credential.

use std::sync::OnceLock;

use axum::http::Method;
use axum::routing::MethodFilter;
use utoipa::openapi::path::{Operation, PathItem, Paths};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

use super::Route;

/// Declares the routes, one `Variant => handler` line each, in the order of
/// [`Route::ALL`]. The handler's `#[utoipa::path]` gives everything else.
macro_rules! route_table {
    ($($variant:ident => $handler:ident,)*) => {
        /// Every operation of API v1. Each is declared once, by its handler's
        /// `#[utoipa::path]`: method, path, credential (`security`) and OpenAPI entry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Route {
            $(
                #[doc = concat!("The operation `", stringify!($handler), "`.")]
                $variant,
            )*
        }

        impl Route {
            /// Every route: the router, the OpenAPI document and the SAM template check
            /// read it.
            pub const ALL: &'static [Route] = &[$(Route::$variant,)*];

            /// This route's OpenAPI document (its one path item and the schemas it
            /// names) and its handler on its method, from the handler's
            /// `#[utoipa::path]`.
            pub(crate) fn declaration(
                self,
            ) -> (
                utoipa::openapi::OpenApi,
                axum::routing::MethodRouter<crate::AppState>,
            ) {
                match self {
                    $(Route::$variant => {
                        #[derive(utoipa::OpenApi)]
                        #[openapi(paths($handler))]
                        struct One;
                        let doc = <One as utoipa::OpenApi>::openapi();
                        let filter = table::method_filter(&doc.paths);
                        (doc, axum::routing::on(filter, $handler))
                    })*
                }
            }
        }
    };
}

/// Who may call a route: the credential its `#[utoipa::path]` names in `security(...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// No `security`: open to anyone (the meta routes).
    Public,
    /// `bearerAuth`: a user's or CI system's JWT, verified by API Gateway's authorizer.
    User,
    /// `jobToken`: the token dispatch gave a runner, for its one job.
    JobToken,
    /// `agentToken`: an agent's pool credential, verified by the API itself.
    Agent,
}

impl Auth {
    /// The OpenAPI security scheme of this kind (none for [`Auth::Public`]).
    pub fn scheme(self) -> Option<&'static str> {
        match self {
            Auth::Public => None,
            Auth::User => Some("bearerAuth"),
            Auth::JobToken => Some("jobToken"),
            Auth::Agent => Some("agentToken"),
        }
    }

    /// The kind an operation's `security` names.
    fn of(operation: &Operation) -> Auth {
        let schemes: Vec<String> = serde_json::to_value(&operation.security)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|r| r.as_object())
            .flat_map(|r| r.keys().cloned())
            .collect();
        let kinds = [Auth::User, Auth::JobToken, Auth::Agent];
        match schemes.as_slice() {
            [] => Auth::Public,
            [one] => kinds
                .into_iter()
                .find(|k| k.scheme() == Some(one.as_str()))
                .unwrap_or_else(|| panic!("unknown security scheme {one}")),
            more => panic!("one security scheme per route, not {more:?}"),
        }
    }
}

/// A route's method, template, credential and operation id, read once.
struct Declared {
    method: Method,
    template: String,
    auth: Auth,
    operation_id: String,
}

impl Declared {
    /// Reads the one operation of a route's path item.
    fn of(paths: &Paths) -> Declared {
        let [(template, item)] = paths.paths.iter().collect::<Vec<_>>()[..] else {
            panic!("a route has one path");
        };
        let ops = operations(item);
        let [(method, operation)] = &ops[..] else {
            panic!("{template}: a route has one method");
        };
        Declared {
            method: method.clone(),
            template: template.clone(),
            auth: Auth::of(operation),
            operation_id: operation.operation_id.clone().unwrap_or_default(),
        }
    }
}

/// The method of a route's one operation, for its handler.
pub(super) fn method_filter(paths: &Paths) -> MethodFilter {
    let method = Declared::of(paths).method;
    MethodFilter::try_from(method.clone())
        .unwrap_or_else(|_| panic!("{method}: not a method a route may have"))
}

/// The operations of a path item, with their methods.
fn operations(item: &PathItem) -> Vec<(Method, &Operation)> {
    [
        (Method::GET, &item.get),
        (Method::PUT, &item.put),
        (Method::POST, &item.post),
        (Method::DELETE, &item.delete),
        (Method::PATCH, &item.patch),
        (Method::HEAD, &item.head),
        (Method::OPTIONS, &item.options),
        (Method::TRACE, &item.trace),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.as_ref().map(|op| (method, op)))
    .collect()
}

impl Route {
    /// What this route's `#[utoipa::path]` declares, read once for every route.
    fn declared(self) -> &'static Declared {
        static TABLE: OnceLock<Vec<Declared>> = OnceLock::new();
        let table = TABLE.get_or_init(|| {
            Route::ALL
                .iter()
                .map(|r| Declared::of(&r.declaration().0.paths))
                .collect()
        });
        &table[self as usize]
    }

    /// The method and the path template (the router's and the OpenAPI document's).
    pub fn method_and_path(self) -> (Method, &'static str) {
        let d = self.declared();
        (d.method.clone(), &d.template)
    }

    /// Who may call this route.
    pub fn auth(self) -> Auth {
        self.declared().auth
    }

    /// The OpenAPI operation id (the handler's name).
    pub fn operation_id(self) -> &'static str {
        &self.declared().operation_id
    }

    /// True for the routes a runner calls with its job token instead of a user's JWT.
    pub fn uses_job_token(self) -> bool {
        self.auth() == Auth::JobToken
    }

    /// True for the routes an agent calls with its pool's credential (a pool token or an
    /// OIDC token the API verifies itself) instead of a user's JWT.
    pub fn uses_agent_credential(self) -> bool {
        self.auth() == Auth::Agent
    }

    /// True for the routes API Gateway's JWT authorizer must not guard: the runner's (job
    /// token) and the agents' (pool credential). Each checks its own credential.
    pub fn skips_user_token(self) -> bool {
        self.uses_job_token() || self.uses_agent_credential()
    }

    /// True for the open routes that need no token at all.
    pub fn is_public(self) -> bool {
        self.auth() == Auth::Public
    }
}

/// The OpenAPI paths of every route, and the schemas their operations name.
pub(crate) fn documented() -> (Paths, Vec<(String, RefOr<Schema>)>) {
    let mut paths = Paths::new();
    let mut schemas = vec![];
    for route in Route::ALL {
        let (doc, _) = route.declaration();
        paths.merge(doc.paths);
        schemas.extend(doc.components.into_iter().flat_map(|c| c.schemas));
    }
    (paths, schemas)
}
