//! The OpenAPI document, generated with utoipa from the route handlers' annotations:
//! the paths are the route table's ([`Route::ALL`](crate::Route::ALL), each from its
//! handler's one `#[utoipa::path]`), with the schemas they name.
//!
//! Every operation declares its request body schema, each status it answers with
//! its schema (the [`ErrorBody`] on every 4xx and 5xx), its path, query and header
//! parameters, and its security: `bearerAuth` (a user's JWT) on user routes,
//! `jobToken` (a job's token) on the runner's routes, `agentToken` (a pool's credential)
//! on the agents' routes, none on the meta routes.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorDetail, FieldProblem};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sortie API",
        version = "1",
        description = "Runners, rules, environments, jobs and memberships. A group or environment path is one path parameter: send it percent-encoded (`/v1/environments/acme%2Fpayments%2Fprod`), the canonical form that generated clients write; written by hand with its slashes (`/v1/environments/acme/payments/prod`) it is read the same. The `/-/` separator ends it; the root group is `-`."
    ),
    components(schemas(ErrorBody, ErrorDetail, FieldProblem)),
    modifiers(&SecuritySchemes)
)]
struct ApiDoc;

/// Adds the two bearer schemes.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A user's or CI system's OIDC token, verified by API Gateway's JWT authorizer",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "jobToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The job token dispatch gave the runner: valid for that one job, while it is not terminal",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agentToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An agent's credential: a pool token, or an OIDC token of the issuer the pool trusts (verified by the API)",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document as JSON: utoipa's, with the group and environment path
/// parameters described in one place (`describe_nested_paths`), the `links` that
/// chain each create to what it made (`add_links`), and its unions written so that
/// code generators read them (`distribute_all_of_over_one_of`, `name_union_members`).
pub fn openapi() -> serde_json::Value {
    let mut api = ApiDoc::openapi();
    // Each route's path item and schemas, from its handler's one `#[utoipa::path]`.
    let (paths, schemas) = crate::routes::documented();
    api.paths.merge(paths);
    api.components
        .get_or_insert_with(Default::default)
        .schemas
        .extend(schemas);
    let mut doc = serde_json::to_value(api).unwrap_or_default();
    describe_nested_paths(&mut doc);
    add_links(&mut doc);
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(|s| s.as_object_mut())
    {
        distribute_all_of_over_one_of(schemas);
        name_union_members(schemas);
        for schema in schemas.values_mut() {
            plain_doc_links(schema);
        }
    }
    doc
}

/// Writes each rustdoc link in a schema's descriptions (`` [`crate::job::JobPhase::Apply`] ``,
/// from a core type's doc comment) as the code it names (`` `Apply` ``): a reader of the
/// API has no crate to follow it into.
fn plain_doc_links(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = unlinked(text);
                    }
                    _ => plain_doc_links(v),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(plain_doc_links),
        _ => {}
    }
}

/// `text` with each `` [`a::b::C`] `` written `` `C` ``.
fn unlinked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        let path = &rest[start + 2..start + 2 + len];
        let name = path.rsplit("::").next().unwrap_or(path);
        out.push_str(&rest[..start]);
        out.push('`');
        out.push_str(name);
        out.push('`');
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The component a local `$ref` names, or the schema itself.
fn resolved<'a>(schemas: &'a Schemas, schema: &'a serde_json::Value) -> &'a serde_json::Value {
    schema
        .get("$ref")
        .and_then(|r| r.as_str())
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .unwrap_or(schema)
}

/// The component schemas, by name.
type Schemas = serde_json::Map<String, serde_json::Value>;

/// Rewrites each component `allOf: [oneOf: [A, B], X]` (a flattened tagged enum, such as
/// a rule's verdict inside a resolution line) as the same schema `oneOf: [allOf: [A, X],
/// allOf: [B, X]]`: code generators (openapi-python-client) build a model per
/// `allOf` of objects, and cannot take `allOf` of a union.
fn distribute_all_of_over_one_of(schemas: &mut Schemas) {
    let names: Vec<String> = schemas.keys().cloned().collect();
    for name in names {
        let schema = &schemas[&name];
        let Some(parts) = schema.get("allOf").and_then(|a| a.as_array()) else {
            continue;
        };
        let union = parts.iter().enumerate().find_map(|(i, part)| {
            let members = resolved(schemas, part).get("oneOf")?.as_array()?;
            (!members.iter().any(|m| m["type"] == "null")).then(|| (i, members.clone()))
        });
        let Some((i, members)) = union else {
            continue;
        };
        let rest: Vec<serde_json::Value> = parts
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| p.clone())
            .collect();
        let mut rewritten = schema.clone();
        let object = rewritten.as_object_mut().expect("a schema with allOf");
        object.remove("allOf");
        let one_of = members
            .into_iter()
            .map(|m| {
                let mut all = vec![m];
                all.extend(rest.iter().cloned());
                serde_json::json!({ "allOf": all })
            })
            .collect();
        object.insert("oneOf".into(), serde_json::Value::Array(one_of));
        schemas.insert(name, rewritten);
    }
}

/// Moves each inline member of a component's `oneOf` (but `null`) into a component of
/// its own, named after the union and its tag (`RunnerConfigurationEcsFargate`), so that
/// code generators make a model of each member; the document means the same.
fn name_union_members(schemas: &mut Schemas) {
    let names: Vec<String> = schemas.keys().cloned().collect();
    for name in names {
        let Some(members) = schemas[&name].get("oneOf").and_then(|m| m.as_array()) else {
            continue;
        };
        let mut rewritten = vec![];
        let mut hoisted = vec![];
        for (i, member) in members.iter().enumerate() {
            if member.get("$ref").is_some() || member["type"] == "null" {
                rewritten.push(member.clone());
                continue;
            }
            let mut member_name = match union_tag(member) {
                Some(tag) => format!("{name}{}", upper_camel(&tag)),
                None => format!("{name}Variant{}", i + 1),
            };
            if schemas.contains_key(&member_name) {
                member_name = format!("{name}Variant{}", i + 1);
            }
            rewritten
                .push(serde_json::json!({ "$ref": format!("#/components/schemas/{member_name}") }));
            hoisted.push((member_name, member.clone()));
        }
        schemas[&name]["oneOf"] = serde_json::Value::Array(rewritten);
        schemas.extend(hoisted);
    }
}

/// The tag of a tagged union's member: the value of its property whose schema is a
/// one-value `enum` (`type: local`), in the member or one of its `allOf` parts.
fn union_tag(member: &serde_json::Value) -> Option<String> {
    let parts = match member.get("allOf").and_then(|a| a.as_array()) {
        Some(parts) => parts.iter().collect::<Vec<_>>(),
        None => vec![member],
    };
    parts.into_iter().find_map(|part| {
        part.get("properties")?.as_object()?.values().find_map(|p| {
            match p.get("enum")?.as_array()?.as_slice() {
                [one] => one.as_str().map(str::to_string),
                _ => None,
            }
        })
    })
}

/// `ecs-fargate` and `out_of_scope` as `EcsFargate` and `OutOfScope`.
fn upper_camel(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The description of every `{group}` path parameter.
pub const GROUP_PARAM: &str = "Group path, such as `acme/payments`; `-` is the root group. Send it percent-encoded as one segment (`acme%2Fpayments`): the canonical form, which generated clients write. The raw form with its slashes (`acme/payments`) is read too, with the same answer. Decoded once: double encoding (`%252F`), `.` and `..` segments, empty segments and an encoded `-` segment are 400 naming `group`.";

/// The description of every `{environment}` path parameter.
pub const ENVIRONMENT_PARAM: &str = "Environment path, such as `acme/payments/prod`. Send it percent-encoded as one segment (`acme%2Fpayments%2Fprod`): the canonical form, which generated clients write. The raw form with its slashes (`acme/payments/prod`) is read too, with the same answer. Decoded once: double encoding (`%252F`), `.` and `..` segments, empty segments and an encoded `-` segment are 400 naming `environment`.";

/// Sets the description and example of every `group` and `environment` path parameter.
fn describe_nested_paths(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for op in paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
    {
        let Some(params) = op.get_mut("parameters").and_then(|p| p.as_array_mut()) else {
            continue;
        };
        for p in params.iter_mut().filter(|p| p["in"] == "path") {
            let (description, example) = match p["name"].as_str() {
                Some("group") => (GROUP_PARAM, "acme/payments"),
                Some("environment") => (ENVIRONMENT_PARAM, "acme/payments/prod"),
                _ => continue,
            };
            p["description"] = serde_json::Value::from(description);
            // An example with its slashes also tells fuzzers (schemathesis) that `%2F` is
            // meant here, so they send nested paths encoded instead of filtering them out.
            p["example"] = serde_json::Value::from(example);
        }
    }
}

/// One link: from a response of (`method`, `path`) at `status`, to `operation_id`,
/// with its path parameters as runtime expressions.
struct Link {
    from: (&'static str, &'static str, &'static [&'static str]),
    to: &'static str,
    parameters: &'static [(&'static str, &'static str)],
}

/// The links: each create to the get, update and delete of what it made, and a job's
/// submit to the job's get, cancel, logs, approve and outputs. Tools that follow links
/// (schemathesis's stateful phase) chain them.
const LINKS: &[Link] = {
    const RUNNER: &[(&str, &str)] = &[
        ("group", "$request.path.group"),
        ("name", "$request.path.name"),
    ];
    const RULE: &[(&str, &str)] = &[
        ("group", "$request.path.group"),
        ("id", "$response.body#/id"),
    ];
    const ENVIRONMENT: &[(&str, &str)] = &[("environment", "$response.body#/path")];
    const MEMBERSHIP: &[(&str, &str)] = &[
        ("group", "$request.path.group"),
        ("id", "$response.body#/id"),
    ];
    const ID: &[(&str, &str)] = &[("id", "$response.body#/id")];
    const CREATED: &[&str] = &["201"];
    const SUBMITTED: &[&str] = &["201", "200"];
    const RUNNER_AT: (&str, &str, &[&str]) =
        ("post", "/v1/groups/{group}/-/runners/{name}", CREATED);
    const RULE_AT: (&str, &str, &[&str]) = ("post", "/v1/groups/{group}/-/rules", CREATED);
    const ENV_AT: (&str, &str, &[&str]) = ("post", "/v1/groups/{group}/-/environments", CREATED);
    const MEMBERSHIP_AT: (&str, &str, &[&str]) =
        ("post", "/v1/groups/{group}/-/memberships", CREATED);
    const POOL_AT: (&str, &str, &[&str]) = ("post", "/v1/agent-pools", CREATED);
    const JOB_AT: (&str, &str, &[&str]) =
        ("post", "/v1/environments/{environment}/-/jobs", SUBMITTED);
    &[
        Link {
            from: RUNNER_AT,
            to: "get_runner",
            parameters: RUNNER,
        },
        Link {
            from: RUNNER_AT,
            to: "update_runner",
            parameters: RUNNER,
        },
        Link {
            from: RUNNER_AT,
            to: "delete_runner",
            parameters: RUNNER,
        },
        Link {
            from: RUNNER_AT,
            to: "check_runner",
            parameters: RUNNER,
        },
        Link {
            from: RULE_AT,
            to: "get_rule",
            parameters: RULE,
        },
        Link {
            from: RULE_AT,
            to: "update_rule",
            parameters: RULE,
        },
        Link {
            from: RULE_AT,
            to: "delete_rule",
            parameters: RULE,
        },
        Link {
            from: ENV_AT,
            to: "get_environment",
            parameters: ENVIRONMENT,
        },
        Link {
            from: ENV_AT,
            to: "update_environment",
            parameters: ENVIRONMENT,
        },
        Link {
            from: ENV_AT,
            to: "delete_environment",
            parameters: ENVIRONMENT,
        },
        Link {
            from: ENV_AT,
            to: "submit_job",
            parameters: ENVIRONMENT,
        },
        Link {
            from: ENV_AT,
            to: "list_jobs",
            parameters: ENVIRONMENT,
        },
        Link {
            from: MEMBERSHIP_AT,
            to: "revoke_membership",
            parameters: MEMBERSHIP,
        },
        Link {
            from: POOL_AT,
            to: "get_agent_pool",
            parameters: ID,
        },
        Link {
            from: POOL_AT,
            to: "delete_agent_pool",
            parameters: ID,
        },
        Link {
            from: JOB_AT,
            to: "get_job",
            parameters: ID,
        },
        Link {
            from: JOB_AT,
            to: "cancel_job",
            parameters: ID,
        },
        Link {
            from: JOB_AT,
            to: "get_job_logs",
            parameters: ID,
        },
        Link {
            from: JOB_AT,
            to: "approve_job",
            parameters: ID,
        },
        Link {
            from: JOB_AT,
            to: "get_job_outputs",
            parameters: ID,
        },
    ]
};

/// Adds [`LINKS`] to the responses they start from, each named after its target
/// operation in UpperCamelCase (`GetRunner`). When the target takes an `If-Match`
/// header and the source answer carries an `ETag`, the link passes it on
/// (`header.If-Match`), so that a followed update or delete names the version it read.
fn add_links(doc: &mut serde_json::Value) {
    for link in LINKS {
        let (method, path, statuses) = link.from;
        let if_match = takes_if_match(doc, link.to);
        for status in statuses {
            let Some(response) = doc
                .pointer_mut(&format!(
                    "/paths/{}/{method}/responses/{status}",
                    path.replace('~', "~0").replace('/', "~1")
                ))
                .and_then(|r| r.as_object_mut())
            else {
                continue;
            };
            let name = upper_camel(link.to);
            let mut parameters: serde_json::Map<String, serde_json::Value> = link
                .parameters
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect();
            let etag = response
                .get("headers")
                .and_then(|h| h.as_object())
                .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("etag")));
            if if_match && etag {
                parameters.insert(
                    "header.If-Match".to_string(),
                    serde_json::Value::from("$response.header.ETag"),
                );
            }
            let links = response
                .entry("links")
                .or_insert_with(|| serde_json::json!({}));
            links[name] = serde_json::json!({
                "operationId": link.to,
                "parameters": parameters,
            });
        }
    }
}

/// Whether the operation `operation_id` takes an `If-Match` header parameter.
fn takes_if_match(doc: &serde_json::Value, operation_id: &str) -> bool {
    let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) else {
        return false;
    };
    paths
        .values()
        .filter_map(|item| item.as_object())
        .flat_map(|item| item.values())
        .filter(|op| op["operationId"] == operation_id)
        .flat_map(|op| op["parameters"].as_array().into_iter().flatten())
        .any(|p| p["in"] == "header" && p["name"] == "If-Match")
}

/// The error responses operations declare, each with the [`ErrorBody`] schema.
#[allow(dead_code)]
pub(crate) mod errors {
    use utoipa::IntoResponses;

    use crate::error::ErrorBody;

    /// 400.
    #[derive(IntoResponses)]
    #[response(
        status = 400,
        description = "Invalid: every problem, each with its field path (`group`, `environment`, `query.<name>`, `If-Match` or a body path)"
    )]
    pub(crate) struct BadRequest(ErrorBody);

    /// 401 on user routes.
    #[derive(IntoResponses)]
    #[response(
        status = 401,
        description = "No verified bearer token: `unauthenticated` when none was sent, `invalid_token` when one was sent but not verified",
        headers(("www-authenticate" = String, description = "`Bearer` when no token was sent; `Bearer error=\"invalid_token\"` when one was sent but is not valid (RFC 6750)"))
    )]
    pub(crate) struct Unauthorized(ErrorBody);

    /// 401 on the runner's routes.
    #[derive(IntoResponses)]
    #[response(
        status = 401,
        description = "The token is not this job's, or the job ended (no hint whether the job exists); the code is always `invalid_token`",
        headers(("www-authenticate" = String, description = "`Bearer` when no bearer token was sent; `Bearer error=\"invalid_token\"` when one was sent but is not valid (RFC 6750)"))
    )]
    pub(crate) struct InvalidToken(ErrorBody);

    /// 401 on a webhook: not signed by the connection.
    #[derive(IntoResponses)]
    #[response(
        status = 401,
        description = "Not signed by the connection's webhook secret (or no connection): the same answer whatever the cause, so a forger learns nothing",
        headers(("www-authenticate" = String, description = "`X-Hub-Signature-256`: the signature GitHub sends, an HMAC-SHA256 of the body with the webhook secret"))
    )]
    pub(crate) struct NotSigned(ErrorBody);

    /// 403.
    #[derive(IntoResponses)]
    #[response(
        status = 403,
        description = "The caller sees the group but lacks the role"
    )]
    pub(crate) struct Forbidden(ErrorBody);

    /// 404.
    #[derive(IntoResponses)]
    #[response(
        status = 404,
        description = "Not found, or not visible to the caller (another tenant's resources are never revealed)"
    )]
    pub(crate) struct NotFound(ErrorBody);

    /// 409.
    #[derive(IntoResponses)]
    #[response(
        status = 409,
        description = "A conflict: the id is taken, the resource is in use (`fields` lists by what), no rule matches (`fields` explains), the job's state forbids it, or an Idempotency-Key was reused with another body"
    )]
    pub(crate) struct Conflict(ErrorBody);

    /// 412.
    #[derive(IntoResponses)]
    #[response(
        status = 412,
        description = "If-Match names a version that is no longer current"
    )]
    pub(crate) struct PreconditionFailed(ErrorBody);

    /// 413.
    #[derive(IntoResponses)]
    #[response(status = 413, description = "The request body is over 256 KiB")]
    pub(crate) struct PayloadTooLarge(ErrorBody);

    /// 415.
    #[derive(IntoResponses)]
    #[response(
        status = 415,
        description = "The body's Content-Type is not one this API reads (`unsupported_media_type`; the message lists application/json and application/*+json, application/yaml, application/x-yaml, text/yaml). Without a Content-Type, JSON text is read as JSON and anything else as YAML"
    )]
    pub(crate) struct UnsupportedMediaType(ErrorBody);

    /// 502.
    #[derive(IntoResponses)]
    #[response(
        status = 502,
        description = "The store failed in a way a retry will not fix (access denied, a corrupt item); the request was not applied"
    )]
    pub(crate) struct BadGateway(ErrorBody);

    /// 503.
    #[derive(IntoResponses)]
    #[response(
        status = 503,
        description = "The store is throttling or unavailable (a retryable failure); the request was not applied: retry after `Retry-After` seconds",
        headers(("retry-after" = String, description = "Seconds to wait"))
    )]
    pub(crate) struct Unavailable(ErrorBody);
}
