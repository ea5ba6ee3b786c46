//! One function per route. Each authorises first, then calls the store.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::{
    resolve, Action, EnvPath, Environment, Grantee, Job, JobRequest, JobState, Membership, Role,
    Runner, RunnerId, RunnerLink, RunnerRule, RunnerSpec,
};
use sortie_store::{
    EnvironmentRecord, IdempotencyKey, JobRecord, MembershipRecord, Released, StoreError, Versioned,
};

use crate::error::ApiError;
use crate::{Ctx, Route};

/// Runs the handler of a matched route.
pub(crate) async fn run(route: Route, cx: &Ctx) -> Result<Response, ApiError> {
    use Route::*;
    match route {
        Health | OpenApi => unreachable_route(),
        ListRunners => list_runners(cx).await,
        CreateRunner => create_runner(cx).await,
        GetRunner => get_runner(cx).await,
        UpdateRunner => update_runner(cx).await,
        DeleteRunner => delete_runner(cx).await,
        ListRules => list_rules(cx).await,
        CreateRule => create_rule(cx).await,
        GetRule => get_rule(cx).await,
        DeleteRule => delete_rule(cx).await,
        ListEnvironments => list_environments(cx).await,
        CreateEnvironment => create_environment(cx).await,
        ListMemberships => list_memberships(cx).await,
        GrantMembership => grant_membership(cx).await,
        RevokeMembership => revoke_membership(cx).await,
        GetEnvironment => get_environment(cx).await,
        UpdateEnvironment => update_environment(cx).await,
        DeleteEnvironment => delete_environment(cx).await,
        RefreshRunner => refresh_runner(cx).await,
        ListJobs => list_jobs(cx).await,
        SubmitJob => submit_job(cx).await,
        GetJob => get_job(cx).await,
        CancelJob => cancel_job(cx).await,
        GetJobLogs => get_job_logs(cx).await,
        GetJobSpec => get_job_spec(cx).await,
        PutJobSummary => put_job_summary(cx).await,
    }
}

fn unreachable_route() -> Result<Response, ApiError> {
    Err(ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route",
    ))
}

fn with_etag(status: StatusCode, body: Value, version: u64) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        r.headers_mut().insert("etag", v);
    }
    r
}

fn ok(status: StatusCode, body: Value) -> Result<Response, ApiError> {
    Ok((status, axum::Json(body)).into_response())
}

fn runner_view(r: &Versioned<Runner>, listed_for: &sortie_core::GroupPath) -> Value {
    let mut v = serde_json::to_value(&r.item).unwrap_or_default();
    v["group"] = json!(r.item.id.group().as_str());
    v["name"] = json!(r.item.id.name());
    v["version"] = json!(r.version);
    v["shared"] = json!(r.item.id.is_shared());
    v["inherited"] = json!(r.item.id.group() != listed_for);
    v
}

fn env_view(e: &Versioned<EnvironmentRecord>) -> Value {
    let mut v = serde_json::to_value(&e.item).unwrap_or_default();
    v["group"] = json!(e.item.environment.path.group().as_str());
    v["name"] = json!(e.item.environment.path.name());
    v["version"] = json!(e.version);
    v
}

fn job_view(j: &JobRecord) -> Value {
    let mut v = serde_json::to_value(j).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        // The hash of the job's token is nobody's business.
        o.remove("token_hash");
    }
    v
}

fn parse_runner_id(cx: &Ctx) -> Result<RunnerId, ApiError> {
    RunnerId::new(cx.param_group().clone(), cx.param_id())
        .map_err(|e| ApiError::field("name", e.first_problem()))
}

/// Writes to the root group (shared runners, root rules) need a system administrator.
fn manage_action(group: &sortie_core::GroupPath) -> Action {
    if group.is_root() {
        Action::Administer
    } else {
        Action::Manage
    }
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/runners", tag = "runners",
    params(("group" = String, Path, description = "Group path, slashes included; empty for the root")),
    responses((status = 200, description = "The group's runners, then inherited and shared ones, each marked", body = Object), (status = 404, description = "No such group visible to the caller")))]
pub(crate) async fn list_runners(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    cx.authorize(Action::Read, group, &format!("group `{}`", group.as_str()))
        .await?;
    let mut out = vec![];
    for g in group.self_and_ancestors() {
        for r in cx.state.store.list_runners(&g).await? {
            out.push(runner_view(&r, group));
        }
    }
    ok(StatusCode::OK, json!({ "runners": out }))
}

#[utoipa::path(post, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name")),
    request_body(content = String, description = "A runner file, YAML or JSON: description, runner_configuration, state_storage_configuration", content_type = "application/yaml"),
    responses((status = 201, description = "Created; ETag is the version", body = Object), (status = 400, description = "Every problem, with its field path"), (status = 409, description = "The id is taken")))]
pub(crate) async fn create_runner(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    let id = parse_runner_id(cx)?;
    cx.authorize(
        manage_action(group),
        group,
        &format!("group `{}`", group.as_str()),
    )
    .await?;
    let spec = RunnerSpec::from_value(&cx.document()?)?;
    let created = cx.state.store.create_runner(&Runner { id, spec }).await?;
    Ok(with_etag(
        StatusCode::CREATED,
        runner_view(&created, group),
        created.version,
    ))
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name")),
    responses((status = 200, description = "The runner; ETag is the version", body = Object), (status = 404, description = "Not found")))]
pub(crate) async fn get_runner(cx: &Ctx) -> Result<Response, ApiError> {
    let id = parse_runner_id(cx)?;
    cx.authorize(Action::Read, cx.param_group(), &format!("runner `{id}`"))
        .await?;
    let r = cx.state.store.get_runner(&id).await?;
    Ok(with_etag(
        StatusCode::OK,
        runner_view(&r, cx.param_group()),
        r.version,
    ))
}

#[utoipa::path(put, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"), ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    request_body(content = String, description = "The new runner file", content_type = "application/yaml"),
    responses((status = 200, description = "Updated", body = Object), (status = 412, description = "The version changed")))]
pub(crate) async fn update_runner(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    let id = parse_runner_id(cx)?;
    cx.authorize(manage_action(group), group, &format!("runner `{id}`"))
        .await?;
    let expected = cx.if_match()?;
    let spec = RunnerSpec::from_value(&cx.document()?)?;
    let r = cx
        .state
        .store
        .update_runner(&Runner { id, spec }, expected)
        .await?;
    Ok(with_etag(StatusCode::OK, runner_view(&r, group), r.version))
}

#[utoipa::path(delete, path = "/v1/groups/{group}/-/runners/{name}", tag = "runners",
    params(("group" = String, Path, description = "Owner group path"), ("name" = String, Path, description = "Runner name"), ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    responses((status = 204, description = "Deleted"), (status = 409, description = "Environments are linked to it; they are listed in `fields`")))]
pub(crate) async fn delete_runner(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    let id = parse_runner_id(cx)?;
    cx.authorize(manage_action(group), group, &format!("runner `{id}`"))
        .await?;
    cx.state.store.delete_runner(&id, cx.if_match()?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/rules", tag = "rules",
    params(("group" = String, Path, description = "Scope group path")),
    responses((status = 200, description = "The scope's rules; ETag is the scope's rule-set version", body = Object)))]
pub(crate) async fn list_rules(cx: &Ctx) -> Result<Response, ApiError> {
    let scope = cx.param_group();
    cx.authorize(Action::Read, scope, &format!("group `{}`", scope.as_str()))
        .await?;
    let rules = cx.state.store.list_rules(scope).await?;
    Ok(with_etag(
        StatusCode::OK,
        json!({ "rules": rules.item }),
        rules.version,
    ))
}

#[utoipa::path(post, path = "/v1/groups/{group}/-/rules", tag = "rules",
    params(("group" = String, Path, description = "Scope group path")),
    request_body(content = Object, description = "id, runner_id, criteria (env_type, env_path, labels, tags), priority"),
    responses((status = 201, description = "Created", body = Object), (status = 400, description = "Invalid, or the runner is not visible at the scope or does not exist"), (status = 409, description = "The id is taken")))]
pub(crate) async fn create_rule(cx: &Ctx) -> Result<Response, ApiError> {
    let scope = cx.param_group();
    cx.authorize(
        manage_action(scope),
        scope,
        &format!("group `{}`", scope.as_str()),
    )
    .await?;
    let mut doc = cx.document()?;
    if let Some(o) = doc.as_object_mut() {
        match o.get("scope") {
            None => {
                o.insert("scope".into(), json!(scope.as_str()));
            }
            Some(s) if s.as_str() == Some(scope.as_str()) => {}
            Some(_) => {
                return Err(ApiError::field(
                    "scope",
                    format!(
                        "must be `{}`, the group in the URL, or absent",
                        scope.as_str()
                    ),
                ))
            }
        }
    }
    let rule = RunnerRule::from_value(&doc)?;
    match cx.state.store.get_runner(&rule.runner_id).await {
        Ok(_) => {}
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::field(
                "runner_id",
                format!("runner `{}` does not exist", rule.runner_id),
            ))
        }
        Err(e) => return Err(e.into()),
    }
    let created = cx.state.store.create_rule(&rule).await?;
    Ok(with_etag(
        StatusCode::CREATED,
        serde_json::to_value(&created.item).unwrap_or_default(),
        created.version,
    ))
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/rules/{id}", tag = "rules",
    params(("group" = String, Path, description = "Scope group path"), ("id" = String, Path, description = "Rule id")),
    responses((status = 200, description = "The rule", body = Object), (status = 404, description = "Not found")))]
pub(crate) async fn get_rule(cx: &Ctx) -> Result<Response, ApiError> {
    let scope = cx.param_group();
    let what = format!("rule `{}` in `{}`", cx.param_id(), scope.as_str());
    cx.authorize(Action::Read, scope, &what).await?;
    let rules = cx.state.store.list_rules(scope).await?;
    let rule = rules
        .item
        .iter()
        .find(|r| r.id == cx.param_id())
        .ok_or_else(|| ApiError::not_found(&what))?;
    Ok(with_etag(
        StatusCode::OK,
        serde_json::to_value(rule).unwrap_or_default(),
        rules.version,
    ))
}

#[utoipa::path(delete, path = "/v1/groups/{group}/-/rules/{id}", tag = "rules",
    params(("group" = String, Path, description = "Scope group path"), ("id" = String, Path, description = "Rule id"), ("If-Match" = Option<String>, Header, description = "The rule set's ETag")),
    responses((status = 204, description = "Deleted; linked environments keep their runner until refreshed"), (status = 404, description = "Not found")))]
pub(crate) async fn delete_rule(cx: &Ctx) -> Result<Response, ApiError> {
    let scope = cx.param_group();
    cx.authorize(
        manage_action(scope),
        scope,
        &format!("rule `{}`", cx.param_id()),
    )
    .await?;
    cx.state
        .store
        .delete_rule(scope, cx.param_id(), cx.if_match()?)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/environments", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    responses((status = 200, description = "The group's environments", body = Object)))]
pub(crate) async fn list_environments(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    cx.authorize(Action::Read, group, &format!("group `{}`", group.as_str()))
        .await?;
    let envs = cx.state.store.list_environments(group).await?;
    ok(
        StatusCode::OK,
        json!({ "environments": envs.iter().map(env_view).collect::<Vec<_>>() }),
    )
}

/// The body of an environment create or update.
struct EnvFields {
    name: Option<String>,
    env_type: Option<String>,
    labels: Option<std::collections::BTreeMap<String, String>>,
    tags: Option<std::collections::BTreeSet<String>>,
}

fn env_fields(doc: &Value, creating: bool) -> Result<EnvFields, ApiError> {
    let mut p = sortie_core::Problems::default();
    let Some(mut f) = sortie_core::problems::Fields::new(doc, "", &mut p) else {
        return Err(sortie_core::ValidationError { problems: p.0 }.into());
    };
    let name = if creating {
        f.required_str("name", &mut p)
    } else {
        None
    };
    let env_type = if creating {
        f.required_str("env_type", &mut p)
    } else {
        f.optional::<String>("env_type", &mut p)
    };
    if env_type.as_deref().is_some_and(|t| t.trim().is_empty()) {
        p.push("env_type", "must not be empty");
    }
    let labels = f.optional("labels", &mut p);
    let tags = f.optional("tags", &mut p);
    f.finish(&mut p);
    p.finish(EnvFields {
        name,
        env_type,
        labels,
        tags,
    })
    .map_err(Into::into)
}

async fn resolve_for(
    cx: &Ctx,
    env: &Environment,
) -> Result<Result<sortie_core::Resolution, sortie_core::NoRunnerMatched>, ApiError> {
    let rules = cx.state.store.rules_for(env.path.group()).await?;
    Ok(resolve(&env.facts(), &rules))
}

fn no_match(e: sortie_core::NoRunnerMatched) -> ApiError {
    let mut err = ApiError::new(StatusCode::CONFLICT, "no_runner_matched", e.to_string());
    err.fields = e
        .explanation
        .iter()
        .map(|c| sortie_core::Problem {
            path: format!("rules.{}:{}", c.scope.as_str(), c.rule_id),
            problem: format!("{:?}", c.verdict),
        })
        .collect();
    err
}

#[utoipa::path(post, path = "/v1/groups/{group}/-/environments", tag = "environments",
    params(("group" = String, Path, description = "Group path")),
    request_body(content = Object, description = "name, env_type, labels, tags"),
    responses((status = 201, description = "Created and linked; the answer explains the rule resolution", body = Object), (status = 409, description = "Exists already, or no rule matches (the explanation is in `fields`)")))]
pub(crate) async fn create_environment(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    let principal = cx
        .authorize(
            Action::Manage,
            group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let fields = env_fields(&cx.document()?, true)?;
    let path = EnvPath::new(group.clone(), fields.name.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::field("name", e.first_problem()))?;
    let mut env = Environment {
        path,
        env_type: fields.env_type.unwrap_or_default(),
        labels: fields.labels.unwrap_or_default(),
        tags: fields.tags.unwrap_or_default(),
        runner: RunnerLink {
            runner_id: RunnerId::parse("unresolved").expect("valid name"),
            rule_id: String::new(),
            linked_by: principal.subject.clone(),
            linked_at: Utc::now(),
        },
    };
    let resolution = resolve_for(cx, &env).await?.map_err(no_match)?;
    env.runner.runner_id = resolution.runner_id().clone();
    env.runner.rule_id = resolution.rule.id.clone();
    let created = cx
        .state
        .store
        .create_environment(&env)
        .await
        .map_err(|e| match e {
            StoreError::NotFound { kind: "runner", id } => ApiError::new(
                StatusCode::CONFLICT,
                "runner_missing",
                format!(
                    "rule `{}` picks runner `{id}`, which does not exist",
                    resolution.rule.id
                ),
            ),
            other => other.into(),
        })?;
    let mut body = env_view(&created);
    body["resolution"] = serde_json::to_value(&resolution).unwrap_or_default();
    Ok(with_etag(StatusCode::CREATED, body, created.version))
}

#[utoipa::path(get, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path, slashes included")),
    responses((status = 200, description = "The environment, its linked runner and its lock", body = Object), (status = 404, description = "Not found")))]
pub(crate) async fn get_environment(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    cx.authorize(Action::Read, path.group(), &format!("environment `{path}`"))
        .await?;
    let e = cx.state.store.get_environment(path).await?;
    Ok(with_etag(StatusCode::OK, env_view(&e), e.version))
}

#[utoipa::path(patch, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    request_body(content = Object, description = "env_type, labels, tags (any subset); the runner link never changes here"),
    responses((status = 200, description = "Updated", body = Object), (status = 412, description = "The version changed")))]
pub(crate) async fn update_environment(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    cx.authorize(
        Action::Manage,
        path.group(),
        &format!("environment `{path}`"),
    )
    .await?;
    let fields = env_fields(&cx.document()?, false)?;
    let expected = cx.if_match()?;
    let current = cx.state.store.get_environment(path).await?;
    let mut env = current.item.environment;
    if let Some(t) = fields.env_type {
        env.env_type = t;
    }
    if let Some(l) = fields.labels {
        env.labels = l;
    }
    if let Some(t) = fields.tags {
        env.tags = t;
    }
    let updated = cx
        .state
        .store
        .update_environment(&env, Some(expected.unwrap_or(current.version)))
        .await?;
    Ok(with_etag(
        StatusCode::OK,
        env_view(&updated),
        updated.version,
    ))
}

#[utoipa::path(delete, path = "/v1/environments/{environment}", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), ("If-Match" = Option<String>, Header, description = "The ETag last read")),
    responses((status = 204, description = "Deleted"), (status = 409, description = "A job is active or waiting")))]
pub(crate) async fn delete_environment(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    cx.authorize(
        Action::Manage,
        path.group(),
        &format!("environment `{path}`"),
    )
    .await?;
    cx.state
        .store
        .delete_environment(path, cx.if_match()?)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(post, path = "/v1/environments/{environment}/-/refresh-runner", tag = "environments",
    params(("environment" = String, Path, description = "Environment path"), ("dry_run" = Option<bool>, Query, description = "Answer without changing anything")),
    responses((status = 200, description = "The runner picked now, the rule that picked it and the explanation; relinked unless dry_run", body = Object), (status = 409, description = "No rule matches")))]
pub(crate) async fn refresh_runner(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    let dry_run = match cx.query.get("dry_run").map(String::as_str) {
        None | Some("false") => false,
        Some("true") | Some("") => true,
        Some(other) => {
            return Err(ApiError::field(
                "query.dry_run",
                format!("`{other}` is not true or false"),
            ))
        }
    };
    let action = if dry_run {
        Action::Read
    } else {
        Action::Manage
    };
    let principal = cx
        .authorize(action, path.group(), &format!("environment `{path}`"))
        .await?;
    let current = cx.state.store.get_environment(path).await?;
    let resolution = resolve_for(cx, &current.item.environment)
        .await?
        .map_err(no_match)?;
    let previous = current.item.environment.runner.runner_id.clone();
    let changes = *resolution.runner_id() != previous;
    let mut body = json!({
        "dry_run": dry_run,
        "previous_runner_id": previous,
        "runner_id": resolution.runner_id(),
        "changed": changes,
        "resolution": resolution,
    });
    if dry_run {
        return ok(StatusCode::OK, body);
    }
    let link = RunnerLink {
        runner_id: resolution.runner_id().clone(),
        rule_id: resolution.rule.id.clone(),
        linked_by: principal.subject.clone(),
        linked_at: Utc::now(),
    };
    let expected = cx.if_match()?.unwrap_or(current.version);
    let updated = cx
        .state
        .store
        .relink_environment(path, &link, Some(expected))
        .await?;
    body["environment"] = env_view(&updated);
    Ok(with_etag(StatusCode::OK, body, updated.version))
}

#[utoipa::path(get, path = "/v1/environments/{environment}/-/jobs", tag = "jobs",
    params(("environment" = String, Path, description = "Environment path"), ("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query, description = "The `next` of the previous page")),
    responses((status = 200, description = "Jobs, newest first, and the next cursor", body = Object)))]
pub(crate) async fn list_jobs(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    cx.authorize(Action::Read, path.group(), &format!("environment `{path}`"))
        .await?;
    let limit = match cx.query.get("limit") {
        None => 20,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(|| {
                ApiError::field("query.limit", "must be a whole number from 1 to 100")
            })?,
    };
    let page = cx
        .state
        .store
        .list_jobs(path, limit, cx.query.get("cursor").map(String::as_str))
        .await
        .map_err(|e| match e {
            StoreError::NotFound { kind: "cursor", .. } => {
                ApiError::field("query.cursor", "is not a cursor this API returned")
            }
            other => other.into(),
        })?;
    ok(
        StatusCode::OK,
        json!({ "jobs": page.jobs, "next": page.next }),
    )
}

fn idempotency_key(cx: &Ctx) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(v) = cx.headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = v
        .to_str()
        .map_err(|_| ApiError::field("Idempotency-Key", "must be printable ASCII"))?;
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::field(
            "Idempotency-Key",
            "must be 1 to 255 printable ASCII characters without spaces",
        ));
    }
    Ok(Some(IdempotencyKey {
        key: key.to_string(),
        request_hash: sortie_store::sha256_hex(&cx.body),
    }))
}

#[utoipa::path(post, path = "/v1/environments/{environment}/-/jobs", tag = "jobs",
    params(("environment" = String, Path, description = "Environment path"), ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and body returns the same job")),
    request_body(content = Object, description = "operation (plan | apply | destroy), source (git | s3 | inline), variables, files, secret_refs (ARNs)"),
    responses((status = 201, description = "Queued; it runs when the environment is free", body = Object), (status = 200, description = "A replay of an earlier submit with the same Idempotency-Key", body = Object), (status = 409, description = "The key was used with another body")))]
pub(crate) async fn submit_job(cx: &Ctx) -> Result<Response, ApiError> {
    let path = cx.param_env();
    let principal = cx
        .authorize(
            Action::Deploy,
            path.group(),
            &format!("environment `{path}`"),
        )
        .await?;
    let idempotency = idempotency_key(cx)?;
    let request = JobRequest::from_value(&cx.document()?)?;
    let env = cx.state.store.get_environment(path).await?;
    let runner_id = env.item.environment.runner.runner_id.clone();
    let runner = cx.state.store.get_runner(&runner_id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => ApiError::new(StatusCode::CONFLICT, "runner_missing", format!("environment `{path}` is linked to runner `{runner_id}`, which no longer exists; refresh its runner")),
        other => other.into(),
    })?;
    let mut job = Job::new(
        sortie_store::new_id(),
        path.clone(),
        runner_id,
        request,
        principal.subject.clone(),
        Utc::now(),
    );
    job.runner_spec = Some(runner.item.spec);
    let submitted = cx
        .state
        .store
        .submit_job(&job, idempotency.as_ref())
        .await?;
    if submitted.took_lock {
        send_or_leave_pending(cx, &submitted.job.id).await;
    }
    let record = cx.state.store.get_job(&submitted.job.id).await?;
    let status = if submitted.replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut response = (status, axum::Json(job_view(&record))).into_response();
    if submitted.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// Sends a lock-holding job to the queue. If the send fails the job stays a pending
/// send in the store (it holds the lock and is `queued`), and the sweeper re-sends it.
async fn send_or_leave_pending(cx: &Ctx, job_id: &str) {
    if let Err(e) = cx.state.queue.send(job_id, 0).await {
        tracing::warn!(job_id, error = %e, "send to the jobs queue failed; the sweeper will re-send");
    }
}

async fn read_job_for(
    cx: &Ctx,
    action: Action,
) -> Result<(JobRecord, sortie_core::Principal), ApiError> {
    let id = cx.param_id();
    let what = format!("job `{id}`");
    let record = cx.state.store.get_job(id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => ApiError::not_found(&what),
        other => other.into(),
    })?;
    let principal = cx
        .authorize(action, record.job.environment.group(), &what)
        .await?;
    Ok((record, principal))
}

#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "The job with every transition, its time and reason", body = Object), (status = 404, description = "Not found")))]
pub(crate) async fn get_job(cx: &Ctx) -> Result<Response, ApiError> {
    let (record, _) = read_job_for(cx, Action::Read).await?;
    ok(StatusCode::OK, job_view(&record))
}

#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "A queued job is canceled at once", body = Object), (status = 202, description = "A launched job's task is being stopped; it ends `canceled`", body = Object), (status = 409, description = "The job already ended")))]
pub(crate) async fn cancel_job(cx: &Ctx) -> Result<Response, ApiError> {
    let (record, principal) = read_job_for(cx, Action::Deploy).await?;
    let reason = format!("sortie: canceled by {}", principal.subject);
    let job = &record.job;
    if job.state.is_terminal() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "state_conflict",
            format!("job `{}` already ended: {}", job.id, job.state),
        ));
    }
    if job.state.is_active() {
        // A launched job: dispatch stops its task (the API holds no ECS permissions), and
        // task-events finishes it as `canceled` when the task's STOPPED event arrives.
        let message = sortie_store::JobMessage {
            job_id: job.id.clone(),
            cancel_by: Some(principal.subject.clone()),
        };
        cx.state.queue.send_message(&message, 0).await?;
        let mut body = job_view(&record);
        body["cancel_requested_by"] = json!(principal.subject);
        return ok(StatusCode::ACCEPTED, body);
    }
    let env = cx.state.store.get_environment(&job.environment).await?;
    let holds_lock = env.item.active_job.as_deref() == Some(job.id.as_str());
    let canceled = if holds_lock {
        let c = cx
            .state
            .store
            .transition_job(
                &job.id,
                JobState::Queued,
                JobState::Canceled,
                Utc::now(),
                &reason,
                Default::default(),
            )
            .await?;
        if let Released::HandedTo(next) = cx
            .state
            .store
            .release_environment(&job.environment, &job.id)
            .await?
        {
            send_or_leave_pending(cx, &next.id).await;
        }
        c
    } else {
        cx.state
            .store
            .cancel_waiting_job(&job.id, Utc::now(), &reason)
            .await?
    };
    ok(StatusCode::OK, job_view(&canceled))
}

#[utoipa::path(get, path = "/v1/groups/{group}/-/memberships", tag = "memberships",
    params(("group" = String, Path, description = "Group path")),
    responses((status = 200, description = "Memberships granted on exactly this group", body = Object)))]
pub(crate) async fn list_memberships(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    cx.authorize(Action::Read, group, &format!("group `{}`", group.as_str()))
        .await?;
    ok(
        StatusCode::OK,
        json!({ "memberships": cx.state.store.list_memberships(group).await? }),
    )
}

#[utoipa::path(post, path = "/v1/groups/{group}/-/memberships", tag = "memberships",
    params(("group" = String, Path, description = "Group path")),
    request_body(content = Object, description = "role (viewer | deployer | maintainer | owner) and grantee: {kind: subject, subject, issuer?} or {kind: claim_pattern, claim, pattern, issuer?}"),
    responses((status = 201, description = "Granted", body = Object)))]
pub(crate) async fn grant_membership(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    let principal = cx
        .authorize(
            Action::Administer,
            group,
            &format!("group `{}`", group.as_str()),
        )
        .await?;
    let doc = cx.document()?;
    let mut p = sortie_core::Problems::default();
    let Some(mut f) = sortie_core::problems::Fields::new(&doc, "", &mut p) else {
        return Err(sortie_core::ValidationError { problems: p.0 }.into());
    };
    let role: Option<Role> = f.required("role", &mut p);
    let grantee: Option<Grantee> = f.required("grantee", &mut p);
    f.finish(&mut p);
    if let Some(Grantee::ClaimPattern { claim, pattern, .. }) = &grantee {
        if claim.is_empty() {
            p.push("grantee.claim", "must not be empty");
        }
        if glob::Pattern::new(pattern).is_err() || pattern.is_empty() {
            p.push("grantee.pattern", "is not a valid glob");
        }
    }
    if let Some(Grantee::Subject { subject, .. }) = &grantee {
        if subject.is_empty() {
            p.push("grantee.subject", "must not be empty");
        }
    }
    let (role, grantee) = p.finish((role, grantee))?;
    let record = MembershipRecord {
        id: sortie_store::new_id(),
        membership: Membership {
            group: group.clone(),
            role: role.expect("checked"),
            grantee: grantee.expect("checked"),
        },
        granted_by: principal.subject.clone(),
        granted_at: Utc::now(),
    };
    cx.state.store.put_membership(&record).await?;
    ok(
        StatusCode::CREATED,
        serde_json::to_value(&record).unwrap_or_default(),
    )
}

#[utoipa::path(delete, path = "/v1/groups/{group}/-/memberships/{id}", tag = "memberships",
    params(("group" = String, Path, description = "Group path"), ("id" = String, Path, description = "Membership id")),
    responses((status = 204, description = "Revoked"), (status = 404, description = "Not found")))]
pub(crate) async fn revoke_membership(cx: &Ctx) -> Result<Response, ApiError> {
    let group = cx.param_group();
    cx.authorize(
        Action::Administer,
        group,
        &format!("group `{}`", group.as_str()),
    )
    .await?;
    cx.state
        .store
        .delete_membership(group, cx.param_id())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Checks a runner's job token: valid for this one job, and only while it is not terminal.
async fn job_by_token(cx: &Ctx) -> Result<JobRecord, ApiError> {
    let refuse = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the job token is not valid for this job",
        )
    };
    let token = cx
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| !t.is_empty())
        .ok_or_else(refuse)?;
    let record = match cx.state.store.get_job(cx.param_id()).await {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => return Err(refuse()),
        Err(e) => return Err(e.into()),
    };
    let presented = sortie_store::sha256_hex(token.as_bytes());
    let matches = record
        .token_hash
        .as_deref()
        .is_some_and(|h| constant_time_eq(h.as_bytes(), presented.as_bytes()));
    if !matches || record.job.state.is_terminal() {
        return Err(refuse());
    }
    Ok(record)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[utoipa::path(get, path = "/v1/jobs/{id}/spec", tag = "runner",
    params(("id" = String, Path, description = "Job id"), ("Authorization" = String, Header, description = "Bearer <job token>: valid for this job only, while it is not terminal")),
    responses((status = 200, description = "The job spec the runner runs", body = Object), (status = 401, description = "The token is not this job's, or the job ended")))]
pub(crate) async fn get_job_spec(cx: &Ctx) -> Result<Response, ApiError> {
    let record = job_by_token(cx).await?;
    let job = &record.job;
    let runner = job.runner_spec.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "runner_missing",
            "the job has no runner configuration",
        )
    })?;
    let state_key = match &runner.state_storage_configuration {
        sortie_core::StateStorageConfiguration::S3(s3) => Some(s3.state_key(&job.environment)),
        _ => None,
    };
    let location = |kind: &str| sortie_core::ArtifactLocation {
        bucket: cx.state.bucket.name.clone(),
        prefix: format!("{kind}/{}/", job.id),
        region: cx.state.bucket.region.clone(),
    };
    let spec = sortie_core::JobSpec {
        job_id: job.id.clone(),
        environment: job.environment.clone(),
        operation: job.request.operation,
        source: job.request.source.clone(),
        variables: job.request.variables.clone(),
        files: job.request.files.clone(),
        secret_refs: job.request.secret_refs.clone(),
        state_storage: runner.state_storage_configuration.clone(),
        state_key,
        logs: location("logs"),
        artifacts: location("artifacts"),
    };
    ok(
        StatusCode::OK,
        serde_json::to_value(spec).unwrap_or_default(),
    )
}

#[utoipa::path(put, path = "/v1/jobs/{id}/summary", tag = "runner",
    params(("id" = String, Path, description = "Job id"), ("Authorization" = String, Header, description = "Bearer <job token>")),
    request_body(content = Object, description = "add, change, destroy"),
    responses((status = 200, description = "Recorded on the job", body = Object), (status = 401, description = "The token is not this job's, or the job ended")))]
pub(crate) async fn put_job_summary(cx: &Ctx) -> Result<Response, ApiError> {
    let record = job_by_token(cx).await?;
    let summary: sortie_core::ChangeSummary = serde_json::from_value(cx.document()?)
        .map_err(|e| ApiError::field("body", e.to_string()))?;
    let updated = cx
        .state
        .store
        .mark_job(
            &record.job.id,
            Utc::now(),
            sortie_store::JobUpdate {
                summary: Some(summary),
                ..Default::default()
            },
        )
        .await?;
    ok(StatusCode::OK, job_view(&updated))
}

/// Most log bytes answered at once.
const MAX_LOG_PAGE: usize = 1024 * 1024;

#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), ("offset" = Option<u64>, Query, description = "The byte offset to read from (the `next_offset` of the previous answer)")),
    responses((status = 200, description = "`data` from `offset`, `next_offset`, and `more`: whether more may come (the job has not ended)", body = Object), (status = 404, description = "Not found")))]
pub(crate) async fn get_job_logs(cx: &Ctx) -> Result<Response, ApiError> {
    let (record, _) = read_job_for(cx, Action::Read).await?;
    let offset = match cx.query.get("offset") {
        None => 0,
        Some(o) => o
            .parse::<u64>()
            .map_err(|_| ApiError::field("query.offset", "must be a whole number of bytes"))?,
    };
    let prefix = format!("logs/{}/", record.job.id);
    let mut data: Vec<u8> = Vec::new();
    let mut next = offset;
    for chunk in cx.state.artifacts.list(&prefix).await? {
        let Some(start) = sortie_core::spec::log_chunk_offset(&prefix, &chunk.key) else {
            continue;
        };
        if start + chunk.size <= next || start > next {
            // Already read, or a gap (a chunk not written yet): stop at the gap.
            if start > next {
                break;
            }
            continue;
        }
        let bytes = cx.state.artifacts.get(&chunk.key).await?;
        let from = (next - start) as usize;
        data.extend_from_slice(bytes.get(from..).unwrap_or_default());
        next = start + bytes.len() as u64;
        if data.len() >= MAX_LOG_PAGE {
            break;
        }
    }
    let more = !record.job.state.is_terminal() || data.len() >= MAX_LOG_PAGE;
    ok(
        StatusCode::OK,
        json!({ "offset": offset, "next_offset": next, "data": String::from_utf8_lossy(&data), "more": more }),
    )
}
