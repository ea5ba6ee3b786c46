//! The route table. Paths that contain `/` (group and environment paths) end at
//! the `/-/` separator; see `docs/ARCHITECTURE.md`. Dispatch and the OpenAPI
//! check both read [`Route::ALL`], so the two cannot drift.

use axum::http::Method;
use sortie_core::{EnvPath, GroupPath};

use crate::error::ApiError;

/// Every operation of API v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/health`
    Health,
    /// `GET /v1/openapi.json`
    OpenApi,
    /// `GET /v1/groups/{group}/-/runners`
    ListRunners,
    /// `POST /v1/groups/{group}/-/runners/{name}`
    CreateRunner,
    /// `GET /v1/groups/{group}/-/runners/{name}`
    GetRunner,
    /// `PUT /v1/groups/{group}/-/runners/{name}`
    UpdateRunner,
    /// `DELETE /v1/groups/{group}/-/runners/{name}`
    DeleteRunner,
    /// `GET /v1/groups/{group}/-/rules`
    ListRules,
    /// `POST /v1/groups/{group}/-/rules`
    CreateRule,
    /// `GET /v1/groups/{group}/-/rules/{id}`
    GetRule,
    /// `DELETE /v1/groups/{group}/-/rules/{id}`
    DeleteRule,
    /// `GET /v1/groups/{group}/-/environments`
    ListEnvironments,
    /// `POST /v1/groups/{group}/-/environments`
    CreateEnvironment,
    /// `GET /v1/groups/{group}/-/memberships`
    ListMemberships,
    /// `POST /v1/groups/{group}/-/memberships`
    GrantMembership,
    /// `DELETE /v1/groups/{group}/-/memberships/{id}`
    RevokeMembership,
    /// `GET /v1/environments/{environment}`
    GetEnvironment,
    /// `PATCH /v1/environments/{environment}`
    UpdateEnvironment,
    /// `DELETE /v1/environments/{environment}`
    DeleteEnvironment,
    /// `POST /v1/environments/{environment}/-/refresh-runner`
    RefreshRunner,
    /// `GET /v1/environments/{environment}/-/jobs`
    ListJobs,
    /// `POST /v1/environments/{environment}/-/jobs`
    SubmitJob,
    /// `GET /v1/jobs/{id}`
    GetJob,
    /// `POST /v1/jobs/{id}/cancel`
    CancelJob,
    /// `GET /v1/jobs/{id}/logs`
    GetJobLogs,
    /// `GET /v1/jobs/{id}/spec` (job token)
    GetJobSpec,
    /// `PUT /v1/jobs/{id}/summary` (job token)
    PutJobSummary,
}

impl Route {
    /// Every route, for dispatch and for the OpenAPI check.
    pub const ALL: &'static [Route] = &[
        Route::Health,
        Route::OpenApi,
        Route::ListRunners,
        Route::CreateRunner,
        Route::GetRunner,
        Route::UpdateRunner,
        Route::DeleteRunner,
        Route::ListRules,
        Route::CreateRule,
        Route::GetRule,
        Route::DeleteRule,
        Route::ListEnvironments,
        Route::CreateEnvironment,
        Route::ListMemberships,
        Route::GrantMembership,
        Route::RevokeMembership,
        Route::GetEnvironment,
        Route::UpdateEnvironment,
        Route::DeleteEnvironment,
        Route::RefreshRunner,
        Route::ListJobs,
        Route::SubmitJob,
        Route::GetJob,
        Route::CancelJob,
        Route::GetJobLogs,
        Route::GetJobSpec,
        Route::PutJobSummary,
    ];

    /// True for the routes a runner calls with its job token instead of a user's JWT.
    pub fn uses_job_token(self) -> bool {
        matches!(self, Route::GetJobSpec | Route::PutJobSummary)
    }

    /// The method and the OpenAPI path template.
    pub fn spec(self) -> (Method, &'static str) {
        use Route::*;
        match self {
            Health => (Method::GET, "/v1/health"),
            OpenApi => (Method::GET, "/v1/openapi.json"),
            ListRunners => (Method::GET, "/v1/groups/{group}/-/runners"),
            CreateRunner => (Method::POST, "/v1/groups/{group}/-/runners/{name}"),
            GetRunner => (Method::GET, "/v1/groups/{group}/-/runners/{name}"),
            UpdateRunner => (Method::PUT, "/v1/groups/{group}/-/runners/{name}"),
            DeleteRunner => (Method::DELETE, "/v1/groups/{group}/-/runners/{name}"),
            ListRules => (Method::GET, "/v1/groups/{group}/-/rules"),
            CreateRule => (Method::POST, "/v1/groups/{group}/-/rules"),
            GetRule => (Method::GET, "/v1/groups/{group}/-/rules/{id}"),
            DeleteRule => (Method::DELETE, "/v1/groups/{group}/-/rules/{id}"),
            ListEnvironments => (Method::GET, "/v1/groups/{group}/-/environments"),
            CreateEnvironment => (Method::POST, "/v1/groups/{group}/-/environments"),
            ListMemberships => (Method::GET, "/v1/groups/{group}/-/memberships"),
            GrantMembership => (Method::POST, "/v1/groups/{group}/-/memberships"),
            RevokeMembership => (Method::DELETE, "/v1/groups/{group}/-/memberships/{id}"),
            GetEnvironment => (Method::GET, "/v1/environments/{environment}"),
            UpdateEnvironment => (Method::PATCH, "/v1/environments/{environment}"),
            DeleteEnvironment => (Method::DELETE, "/v1/environments/{environment}"),
            RefreshRunner => (
                Method::POST,
                "/v1/environments/{environment}/-/refresh-runner",
            ),
            ListJobs => (Method::GET, "/v1/environments/{environment}/-/jobs"),
            SubmitJob => (Method::POST, "/v1/environments/{environment}/-/jobs"),
            GetJob => (Method::GET, "/v1/jobs/{id}"),
            CancelJob => (Method::POST, "/v1/jobs/{id}/cancel"),
            GetJobLogs => (Method::GET, "/v1/jobs/{id}/logs"),
            GetJobSpec => (Method::GET, "/v1/jobs/{id}/spec"),
            PutJobSummary => (Method::PUT, "/v1/jobs/{id}/summary"),
        }
    }
}

/// The parameters a matched path carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// The group path, for `/v1/groups/...` routes.
    pub group: Option<GroupPath>,
    /// The environment path, for `/v1/environments/...` routes.
    pub environment: Option<EnvPath>,
    /// The last segment: a runner name, rule id, membership id or job id.
    pub id: Option<String>,
}

/// Splits `a/b/-/x/y` into (`a/b`, [`x`, `y`]); `None` without a `-` segment.
fn split_dash(rest: &str) -> Option<(String, Vec<&str>)> {
    let segments: Vec<&str> = rest.split('/').collect();
    let i = segments.iter().position(|s| *s == "-")?;
    Some((segments[..i].join("/"), segments[i + 1..].to_vec()))
}

fn bad_path(what: &str, e: sortie_core::ValidationError) -> ApiError {
    let mut err = ApiError::from(e);
    for f in &mut err.fields {
        f.path = what.to_string();
    }
    err.message = format!(
        "the {what} in the URL is invalid: {}",
        err.fields
            .first()
            .map(|f| f.problem.as_str())
            .unwrap_or_default()
    );
    err
}

/// Matches a request to a route: 404 for an unknown path, 405 for a known path with the wrong method.
pub fn match_route(method: &Method, path: &str) -> Result<(Route, Params), ApiError> {
    use Route::*;
    let not_found = || ApiError::not_found(format!("route {path}"));
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    let mut params = Params::default();
    // Candidate routes for the path, whatever the method.
    let candidates: Vec<Route> = if path == "/v1/health" {
        vec![Health]
    } else if path == "/v1/openapi.json" {
        vec![OpenApi]
    } else if let Some(rest) = path.strip_prefix("/v1/groups/") {
        let (group, tail) = split_dash(rest).ok_or_else(not_found)?;
        params.group = Some(GroupPath::parse(&group).map_err(|e| bad_path("group", e))?);
        match tail.as_slice() {
            ["runners"] => vec![ListRunners],
            ["runners", name] if !name.is_empty() => {
                params.id = Some(name.to_string());
                vec![CreateRunner, GetRunner, UpdateRunner, DeleteRunner]
            }
            ["rules"] => vec![ListRules, CreateRule],
            ["rules", id] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![GetRule, DeleteRule]
            }
            ["environments"] => vec![ListEnvironments, CreateEnvironment],
            ["memberships"] => vec![ListMemberships, GrantMembership],
            ["memberships", id] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![RevokeMembership]
            }
            _ => return Err(not_found()),
        }
    } else if let Some(rest) = path.strip_prefix("/v1/environments/") {
        let (env, tail) = match split_dash(rest) {
            Some((env, tail)) => (env, tail),
            None => (rest.to_string(), vec![]),
        };
        params.environment = Some(EnvPath::parse(&env).map_err(|e| bad_path("environment", e))?);
        match tail.as_slice() {
            [] => vec![GetEnvironment, UpdateEnvironment, DeleteEnvironment],
            ["refresh-runner"] => vec![RefreshRunner],
            ["jobs"] => vec![ListJobs, SubmitJob],
            _ => return Err(not_found()),
        }
    } else if let Some(rest) = path.strip_prefix("/v1/jobs/") {
        let segments: Vec<&str> = rest.split('/').collect();
        match segments.as_slice() {
            [id] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![GetJob]
            }
            [id, "cancel"] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![CancelJob]
            }
            [id, "logs"] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![GetJobLogs]
            }
            [id, "spec"] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![GetJobSpec]
            }
            [id, "summary"] if !id.is_empty() => {
                params.id = Some(id.to_string());
                vec![PutJobSummary]
            }
            _ => return Err(not_found()),
        }
    } else {
        return Err(not_found());
    };
    match candidates.iter().find(|r| r.spec().0 == *method) {
        Some(route) => Ok((*route, params)),
        None => {
            let allowed: Vec<String> = candidates.iter().map(|r| r.spec().0.to_string()).collect();
            Err(ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!(
                    "{method} is not allowed on {path}; allowed: {}",
                    allowed.join(", ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_paths_end_at_the_dash_separator() {
        let (r, p) = match_route(&Method::GET, "/v1/groups/acme/payments/-/runners").unwrap();
        assert_eq!(r, Route::ListRunners);
        assert_eq!(p.group.unwrap().as_str(), "acme/payments");
        let (r, p) = match_route(&Method::GET, "/v1/groups/-/runners").unwrap();
        assert_eq!(r, Route::ListRunners);
        assert!(
            p.group.unwrap().is_root(),
            "the root group is the empty path"
        );
        let (r, p) = match_route(&Method::DELETE, "/v1/groups/acme/-/rules/prod").unwrap();
        assert_eq!((r, p.id.as_deref()), (Route::DeleteRule, Some("prod")));
        let (r, p) =
            match_route(&Method::POST, "/v1/environments/acme/payments/prod/-/jobs").unwrap();
        assert_eq!(r, Route::SubmitJob);
        assert_eq!(p.environment.unwrap().to_string(), "acme/payments/prod");
        let (r, _) = match_route(&Method::PATCH, "/v1/environments/acme/payments/prod").unwrap();
        assert_eq!(r, Route::UpdateEnvironment);
    }

    #[test]
    fn unknown_paths_are_404_wrong_methods_405_bad_groups_400() {
        assert_eq!(
            match_route(&Method::GET, "/v1/groups/acme/runners")
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(
            match_route(&Method::GET, "/v2/health").unwrap_err().status,
            404
        );
        assert_eq!(
            match_route(&Method::DELETE, "/v1/groups/acme/-/runners")
                .unwrap_err()
                .status,
            405
        );
        let e = match_route(&Method::GET, "/v1/groups/ACME/-/runners").unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.fields[0].path.as_str()),
            (400, "group")
        );
        let e = match_route(&Method::GET, "/v1/environments/prod").unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.fields[0].path.as_str()),
            (400, "environment")
        );
    }

    #[test]
    fn every_route_matches_its_own_template() {
        for route in Route::ALL {
            let (method, template) = route.spec();
            let path = template
                .replace("{group}", "acme/payments")
                .replace("{environment}", "acme/payments/prod")
                .replace("{name}", "r1")
                .replace("{id}", "x1");
            let (got, _) =
                match_route(&method, &path).unwrap_or_else(|e| panic!("{template}: {e}"));
            assert_eq!(got, *route, "{template}");
        }
    }
}
