//! The double's HTTP side: authentication, faults, rate limits, paging, ETags and the
//! routes. Every rule is from GitHub's documentation ([`super::rules`]).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::Router;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::rules;
use super::{
    CheckRunRecord, CommentRecord, Download, Grant, PullState, Repo, Shared, TokenKind, World,
};

pub(crate) fn router(world: Shared) -> Router {
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    Router::new().fallback(handle).with_state(world)
}

/// An answer before it becomes a response.
pub(crate) struct Reply {
    status: u16,
    body: Vec<u8>,
    content_type: &'static str,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            body: serde_json::to_vec(value).unwrap_or_default(),
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
        }
    }

    /// GitHub's error body: `message` and `documentation_url`.
    fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({"message": message, "documentation_url": "https://docs.github.com/rest"}),
        )
    }

    /// GitHub's 422 "Validation Failed" with one error naming the field.
    fn invalid(resource: &str, field: &str, code: &str, message: &str) -> Self {
        Self::json(
            422,
            &json!({
                "message": "Validation Failed",
                "errors": [{"resource": resource, "field": field, "code": code, "message": message}],
                "documentation_url": "https://docs.github.com/rest"
            }),
        )
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

async fn handle(
    State(world): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut world = world.lock().unwrap_or_else(|p| p.into_inner());
        answer(&mut world, &method, &uri, &headers, &body)
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header("content-type", reply.content_type);
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response
        .body(Body::from(reply.body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The credential of a request and its grant.
struct Caller {
    kind: TokenKind,
    grant: Option<Grant>,
    bucket: String,
}

fn answer(
    world: &mut World,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Reply {
    let path = uri.path().to_string();
    let query = uri.query().map(str::to_string);
    let if_none_match = headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let caller = authenticate(world, headers);
    let (reply, counted) = respond(world, method, &path, query.as_deref(), &caller, body);
    let mut reply = reply;
    let mut refund = false;
    if reply.status == 200
        && *method == Method::GET
        && reply.content_type.starts_with("application/json")
    {
        let etag = format!("\"{}\"", hex(&sha256(&reply.body)));
        let matched = if_none_match.as_deref().is_some_and(|sent| {
            sent.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        });
        if matched && !matches!(caller.kind, TokenKind::None | TokenKind::Invalid(_)) {
            // A 304 to a correctly authorised request costs no rate limit.
            reply = Reply {
                status: 304,
                body: Vec::new(),
                content_type: "application/json; charset=utf-8",
                headers: Vec::new(),
            };
            refund = true;
        }
        reply = reply.header("etag", etag);
    }
    if counted {
        let bucket = bucket(world, &caller);
        if refund {
            bucket.remaining += 1;
        }
        let bucket = *bucket;
        let limit = limit_of(&caller);
        reply = reply
            .header("x-ratelimit-limit", limit.to_string())
            .header("x-ratelimit-remaining", bucket.remaining.to_string())
            .header(
                "x-ratelimit-used",
                limit.saturating_sub(bucket.remaining).to_string(),
            )
            .header("x-ratelimit-reset", bucket.reset.to_string())
            .header("x-ratelimit-resource", "core");
    }
    super::push_bounded(
        &mut world.requests,
        super::RequestRecord {
            method: method.to_string(),
            path,
            query,
            token: caller.kind.clone(),
            conditional: if_none_match.is_some(),
            status: reply.status,
        },
        super::MAX_RECORDED_REQUESTS,
    );
    reply
}

fn limit_of(caller: &Caller) -> u64 {
    match caller.kind {
        // An unauthenticated caller gets 60 an hour.
        TokenKind::None | TokenKind::Invalid(_) => 60,
        _ => rules::RATE_LIMIT_PER_HOUR,
    }
}

fn bucket<'a>(world: &'a mut World, caller: &Caller) -> &'a mut super::Bucket {
    let now = world.now().timestamp();
    let limit = if world.rate_limit == 0 {
        0
    } else {
        limit_of(caller)
    };
    let exhausted_reset = world.buckets.get("*").map(|b| b.reset);
    let bucket = world
        .buckets
        .entry(caller.bucket.clone())
        .or_insert(super::Bucket {
            remaining: limit,
            reset: exhausted_reset.unwrap_or(now + 3600),
        });
    if bucket.reset <= now && world.rate_limit != 0 {
        bucket.remaining = limit;
        bucket.reset = now + 3600;
    }
    bucket
}

/// The answer, and whether it counts against (and reports) the primary rate limit.
fn respond(
    world: &mut World,
    method: &Method,
    path: &str,
    query: Option<&str>,
    caller: &Caller,
    body: &[u8],
) -> (Reply, bool) {
    if let Some(rest) = path.strip_prefix("/codeload/") {
        return (codeload(world, rest, query), false);
    }
    let faults = &mut world.faults;
    let now = std::time::Instant::now();
    let fault = if let Some(status) = faults.always {
        Some(status)
    } else if let Some((_, status)) = faults.until.filter(|(until, _)| *until > now) {
        Some(status)
    } else if faults.next > 0 {
        faults.next -= 1;
        Some(faults.next_status)
    } else {
        None
    };
    if let Some(status) = fault {
        return (Reply::error(status, "Server Error"), true);
    }
    if faults.secondary > 0 {
        faults.secondary -= 1;
        let retry_after = faults.secondary_retry_after;
        return (
            Reply::error(
                403,
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            )
            .header("retry-after", retry_after.to_string()),
            true,
        );
    }
    if let TokenKind::Invalid(message) = &caller.kind {
        return (Reply::error(401, message), true);
    }
    {
        let bucket = bucket(world, caller);
        if bucket.remaining == 0 {
            let message = match &caller.kind {
                TokenKind::Installation(id) => {
                    format!("API rate limit exceeded for installation ID {id}.")
                }
                _ => "API rate limit exceeded.".to_string(),
            };
            return (Reply::error(403, &message), true);
        }
        bucket.remaining -= 1;
    }
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let reply = match (method.as_str(), segments.as_slice()) {
        ("GET", ["repos", owner, repo, "installation"]) => {
            repository_installation(world, caller, owner, repo)
        }
        ("POST", ["app", "installations", id, "access_tokens"]) => {
            create_token(world, caller, id, body)
        }
        ("GET" | "POST" | "PATCH", ["repos", owner, repo, rest @ ..]) => {
            repository_route(world, method, caller, owner, repo, rest, path, query, body)
        }
        _ => Reply::error(404, "Not Found"),
    };
    (reply, true)
}

fn authenticate(world: &World, headers: &HeaderMap) -> Caller {
    let Some(value) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return Caller {
            kind: TokenKind::None,
            grant: None,
            bucket: "anonymous".into(),
        };
    };
    let credential = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
        .unwrap_or("")
        .trim();
    let invalid = |message: &str| Caller {
        kind: TokenKind::Invalid(message.to_string()),
        grant: None,
        bucket: "anonymous".into(),
    };
    if credential.matches('.').count() == 2 {
        return match verify_jwt(world, credential) {
            Ok(()) => Caller {
                kind: TokenKind::AppJwt,
                grant: None,
                bucket: format!("app:{}", world.app_id),
            },
            Err(message) => invalid(&message),
        };
    }
    match world.tokens.get(credential) {
        Some(grant) if grant.expires_at > world.now() => Caller {
            kind: grant.kind.clone(),
            grant: Some(grant.clone()),
            bucket: match &grant.kind {
                TokenKind::Installation(id) => format!("installation:{id}"),
                TokenKind::User(login) => format!("user:{login}"),
                _ => "anonymous".into(),
            },
        },
        _ => invalid("Bad credentials"),
    }
}

/// Verifies an app JWT as GitHub documents it ([`rules::JWT_MAX_LIFETIME_SECS`]).
fn verify_jwt(world: &World, token: &str) -> Result<(), String> {
    let key = jsonwebtoken::DecodingKey::from_rsa_der(&world.public_key);
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims = HashSet::new();
    validation.leeway = 0;
    let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map_err(|_| "A JSON web token could not be decoded".to_string())?
        .claims;
    let now = world.now().timestamp();
    let iat = claims["iat"].as_i64().ok_or(
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
    )?;
    let exp = claims["exp"].as_i64().ok_or(
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
    )?;
    let iss = match &claims["iss"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    if iss != Some(world.app_id) {
        return Err("'Issuer' claim ('iss') must be the app's id".into());
    }
    if iat > now + rules::JWT_MAX_IAT_AHEAD_SECS {
        return Err("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued".into());
    }
    if exp <= now {
        return Err("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires".into());
    }
    if exp - iat > rules::JWT_MAX_LIFETIME_SECS || exp - now > rules::JWT_MAX_LIFETIME_SECS {
        return Err("'Expiration time' claim ('exp') is too far in the future".into());
    }
    Ok(())
}

fn find_repo<'a>(world: &'a World, owner: &str, repo: &str) -> Option<&'a Repo> {
    world
        .repos
        .get(&format!("{owner}/{repo}").to_ascii_lowercase())
}

fn repository_installation(world: &World, caller: &Caller, owner: &str, repo: &str) -> Reply {
    if caller.kind != TokenKind::AppJwt {
        return Reply::error(401, "A JSON web token could not be decoded");
    }
    let Some(id) = find_repo(world, owner, repo).and_then(|r| r.installation) else {
        return Reply::error(404, "Not Found");
    };
    let Some(installation) = world.installations.get(&id) else {
        return Reply::error(404, "Not Found");
    };
    Reply::json(
        200,
        &json!({
            "id": id,
            "account": {"login": installation.account, "type": "Organization"},
            "app_id": world.app_id,
            "app_slug": world.app_slug,
            "target_type": "Organization",
            "repository_selection": "selected",
            "permissions": installation.permissions,
            "access_tokens_url": format!("{}/app/installations/{id}/access_tokens", world.base_url),
        }),
    )
}

fn level(value: &str) -> Option<u8> {
    match value {
        "read" => Some(1),
        "write" => Some(2),
        _ => None,
    }
}

fn create_token(world: &mut World, caller: &Caller, id: &str, body: &[u8]) -> Reply {
    if caller.kind != TokenKind::AppJwt {
        return Reply::error(401, "A JSON web token could not be decoded");
    }
    let Some((id, installation)) = id
        .parse::<u64>()
        .ok()
        .and_then(|id| world.installations.get(&id).map(|i| (id, i.clone())))
    else {
        return Reply::error(404, "Not Found");
    };
    let request: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Reply::error(400, "Problems parsing JSON"),
        }
    };
    let covered: Vec<&Repo> = world
        .repos
        .values()
        .filter(|r| r.installation == Some(id))
        .collect();
    let mut repositories: Vec<String> = Vec::new();
    let named = request["repositories"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ids = request["repository_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if named.len() + ids.len() > rules::MAX_TOKEN_REPOSITORIES {
        return Reply::error(422, "Too many repositories: at most 500 may be listed.");
    }
    let inaccessible = Reply::error(
        422,
        "There is at least one repository that does not exist or is not accessible to the parent installation.",
    );
    for name in &named {
        let found = name
            .as_str()
            .and_then(|n| covered.iter().find(|r| r.name.eq_ignore_ascii_case(n)));
        match found {
            Some(repo) => repositories.push(repo.full_name().to_ascii_lowercase()),
            None => return inaccessible,
        }
    }
    for repo_id in &ids {
        match covered.iter().find(|r| Some(r.id) == repo_id.as_u64()) {
            Some(repo) => repositories.push(repo.full_name().to_ascii_lowercase()),
            None => return inaccessible,
        }
    }
    let selection = if repositories.is_empty() {
        repositories = covered
            .iter()
            .map(|r| r.full_name().to_ascii_lowercase())
            .collect();
        "all"
    } else {
        "selected"
    };
    let mut permissions = BTreeMap::new();
    match request.get("permissions") {
        None | Some(Value::Null) => permissions = installation.permissions.clone(),
        Some(Value::Object(asked)) => {
            for (name, value) in asked {
                let granted = installation.permissions.get(name).and_then(|v| level(v));
                let wanted = value.as_str().and_then(level);
                match (granted, wanted) {
                    (Some(g), Some(w)) if w <= g => {
                        permissions
                            .insert(name.clone(), value.as_str().unwrap_or("read").to_string());
                    }
                    _ => {
                        return Reply::error(
                            422,
                            "The permissions requested are not granted to this installation.",
                        )
                    }
                }
            }
        }
        Some(_) => {
            return Reply::invalid(
                "Installation",
                "permissions",
                "invalid",
                "permissions is not an object",
            )
        }
    }
    permissions
        .entry("metadata".to_string())
        .or_insert_with(|| "read".to_string());
    let token = world.new_token("ghs");
    let expires_at =
        world.now() + chrono::Duration::seconds(rules::INSTALLATION_TOKEN_LIFETIME_SECS);
    let listed: Vec<Value> = repositories
        .iter()
        .filter_map(|key| world.repos.get(key))
        .map(repo_json)
        .collect();
    world.tokens.insert(
        token.clone(),
        Grant {
            kind: TokenKind::Installation(id),
            repositories,
            permissions: permissions.clone(),
            expires_at,
        },
    );
    Reply::json(
        201,
        &json!({
            "token": token,
            "expires_at": timestamp(expires_at),
            "permissions": permissions,
            "repository_selection": selection,
            "repositories": listed,
        }),
    )
}

/// Whether `grant` holds `name` at `needed` or above (`metadata: read` always).
fn allows(grant: &Grant, name: &str, needed: &str) -> bool {
    if name == "metadata" && needed == "read" {
        return true;
    }
    let held = grant.permissions.get(name).and_then(|v| level(v));
    matches!((held, level(needed)), (Some(h), Some(n)) if h >= n)
}

#[allow(clippy::too_many_arguments)]
fn repository_route(
    world: &mut World,
    method: &Method,
    caller: &Caller,
    owner: &str,
    repo: &str,
    rest: &[&str],
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Reply {
    let key = format!("{owner}/{repo}").to_ascii_lowercase();
    // Every repository of the double is private: a caller that cannot see it gets 404.
    let grant = match (&caller.kind, &caller.grant) {
        (TokenKind::Installation(id), Some(grant)) => {
            let covered = world
                .repos
                .get(&key)
                .is_some_and(|r| r.installation == Some(*id));
            if !covered || !grant.repositories.contains(&key) {
                return Reply::error(404, "Not Found");
            }
            grant.clone()
        }
        (TokenKind::User(_), Some(grant)) => {
            if !world.repos.contains_key(&key) || !grant.repositories.contains(&key) {
                return Reply::error(404, "Not Found");
            }
            grant.clone()
        }
        (TokenKind::AppJwt, _) => return Reply::error(403, rules::NOT_ACCESSIBLE),
        _ => return Reply::error(404, "Not Found"),
    };
    let need = |alternatives: &[(&str, &str)]| -> Result<(), Reply> {
        if alternatives.iter().any(|(n, l)| allows(&grant, n, l)) {
            Ok(())
        } else {
            Err(Reply::error(403, rules::NOT_ACCESSIBLE))
        }
    };
    let result = (|| -> Result<Reply, Reply> {
        match (method.as_str(), rest) {
            ("GET", ["pulls"]) => {
                need(&[("pull_requests", "read")])?;
                Ok(list_pulls(world, &key, path, query))
            }
            ("GET", ["pulls", number]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                Ok(Reply::json(200, &pull_json(&world.base_url, repo, pull)))
            }
            ("GET", ["pulls", number, "files"]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                let files: Vec<Value> = pull
                    .spec
                    .files
                    .iter()
                    .take(rules::MAX_PULL_FILES)
                    .map(|f| {
                        let mut file = json!({
                            "sha": format!("{:0>40}", hex(&sha256(f.filename.as_bytes()))[..12].to_string()),
                            "filename": f.filename,
                            "status": f.status,
                            "additions": 1, "deletions": 0, "changes": 1,
                        });
                        if let Some(previous) = &f.previous_filename {
                            file["previous_filename"] = json!(previous);
                        }
                        file
                    })
                    .collect();
                Ok(paged(&world.base_url, path, query, files))
            }
            ("GET", ["pulls", number, "reviews"]) => {
                need(&[("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let pull = pull_of(repo, number)?;
                let reviews: Vec<Value> = pull
                    .reviews
                    .iter()
                    .map(|r| {
                        json!({"id": r.id, "user": user_json(&r.user, "User"), "state": r.state,
                               "commit_id": r.commit_id, "body": "", "submitted_at": timestamp(world.now())})
                    })
                    .collect();
                Ok(paged(&world.base_url, path, query, reviews))
            }
            ("GET", ["compare", basehead]) => {
                need(&[("contents", "read")])?;
                compare(&world.repos[&key], basehead)
            }
            ("GET", ["branches", branch, "protection", "required_status_checks"]) => {
                need(&[("administration", "read")])?;
                let repo = &world.repos[&key];
                let contexts = repo
                    .protection
                    .get(*branch)
                    .ok_or_else(|| Reply::error(404, "Branch not protected"))?;
                Ok(Reply::json(
                    200,
                    &json!({
                        "url": format!("{}{path}", world.base_url),
                        "strict": false,
                        "contexts": contexts,
                        "checks": contexts.iter().map(|c| json!({"context": c, "app_id": null})).collect::<Vec<_>>(),
                    }),
                ))
            }
            ("GET", ["rules", "branches", branch]) => {
                need(&[("metadata", "read")])?;
                let repo = &world.repos[&key];
                let rules: Vec<Value> = repo
                    .rulesets
                    .get(*branch)
                    .map(|contexts| {
                        vec![json!({
                            "type": "required_status_checks",
                            "ruleset_source_type": "Repository",
                            "ruleset_source": repo.full_name(),
                            "ruleset_id": 1,
                            "parameters": {
                                "strict_required_status_checks_policy": false,
                                "do_not_enforce_on_create": false,
                                "required_status_checks": contexts.iter().map(|c| json!({"context": c})).collect::<Vec<_>>(),
                            }
                        })]
                    })
                    .unwrap_or_default();
                Ok(paged(&world.base_url, path, query, rules))
            }
            ("GET", ["commits", reference, "check-runs"]) => {
                need(&[("checks", "read")])?;
                let repo = &world.repos[&key];
                let sha = repo.resolve(reference).ok_or_else(not_found)?;
                // `filter` defaults to `latest`: the newest run of each name.
                let mut latest: BTreeMap<&str, &CheckRunRecord> = BTreeMap::new();
                for run in repo.check_runs.iter().filter(|r| r.head_sha == sha) {
                    latest.insert(run.name.as_str(), run);
                }
                let runs: Vec<Value> = latest
                    .values()
                    .map(|r| check_run_json(&world.base_url, repo, r))
                    .collect();
                Ok(paged_object(
                    &world.base_url,
                    path,
                    query,
                    runs,
                    "check_runs",
                    json!({}),
                ))
            }
            ("GET", ["commits", reference, "status"]) => {
                need(&[("statuses", "read")])?;
                let repo = &world.repos[&key];
                let sha = repo.resolve(reference).ok_or_else(not_found)?;
                let statuses = repo.statuses.get(&sha).cloned().unwrap_or_default();
                let state = if statuses.iter().any(|(_, s)| s == "failure" || s == "error") {
                    "failure"
                } else if statuses.is_empty() || statuses.iter().any(|(_, s)| s == "pending") {
                    "pending"
                } else {
                    "success"
                };
                let items: Vec<Value> = statuses
                    .iter()
                    .map(|(c, s)| json!({"context": c, "state": s, "description": null, "target_url": null}))
                    .collect();
                Ok(paged_object(
                    &world.base_url,
                    path,
                    query,
                    items,
                    "statuses",
                    json!({"state": state, "sha": sha}),
                ))
            }
            ("POST", ["check-runs"]) => {
                need(&[("checks", "write")])?;
                app_only(caller)?;
                create_check_run(world, &key, body)
            }
            ("PATCH", ["check-runs", id]) => {
                need(&[("checks", "write")])?;
                app_only(caller)?;
                update_check_run(world, &key, id, body)
            }
            ("GET", ["issues", number, "comments"]) => {
                need(&[("issues", "read"), ("pull_requests", "read")])?;
                let repo = &world.repos[&key];
                let number = number_of(number)
                    .filter(|n| repo.pulls.contains_key(n))
                    .ok_or_else(not_found)?;
                let comments: Vec<Value> = repo
                    .comments
                    .iter()
                    .filter(|c| c.issue_number == number)
                    .map(|c| comment_json(&world.base_url, repo, c))
                    .collect();
                Ok(paged(&world.base_url, path, query, comments))
            }
            ("POST", ["issues", number, "comments"]) => {
                need(&[("issues", "write"), ("pull_requests", "write")])?;
                let number = number_of(number)
                    .filter(|n| world.repos[&key].pulls.contains_key(n))
                    .ok_or_else(not_found)?;
                let text = comment_body(body)?;
                let (author, author_type) = author_of(world, caller);
                let id = world.id();
                let comment = CommentRecord {
                    id,
                    issue_number: number,
                    body: text,
                    author,
                    author_type,
                    history: Vec::new(),
                };
                let repo = world.repos.get_mut(&key).ok_or_else(not_found)?;
                repo.comments.push(comment.clone());
                let repo = &world.repos[&key];
                Ok(Reply::json(
                    201,
                    &comment_json(&world.base_url, repo, &comment),
                ))
            }
            ("PATCH", ["issues", "comments", id]) => {
                need(&[("issues", "write"), ("pull_requests", "write")])?;
                let text = comment_body(body)?;
                let id = number_of(id).ok_or_else(not_found)?;
                let repo = world.repos.get_mut(&key).ok_or_else(not_found)?;
                let comment = repo
                    .comments
                    .iter_mut()
                    .find(|c| c.id == id)
                    .ok_or_else(not_found)?;
                let before = std::mem::replace(&mut comment.body, text);
                super::push_bounded(&mut comment.history, before, super::MAX_HISTORY);
                let comment = comment.clone();
                let repo = &world.repos[&key];
                Ok(Reply::json(
                    200,
                    &comment_json(&world.base_url, repo, &comment),
                ))
            }
            ("GET", ["tarball", reference @ ..]) if !reference.is_empty() => {
                need(&[("contents", "read")])?;
                let reference = reference.join("/");
                let sha = world.repos[&key]
                    .resolve(&reference)
                    .ok_or_else(not_found)?;
                let token = world.new_token("dl");
                let expires_at =
                    world.now() + chrono::Duration::seconds(rules::DOWNLOAD_LINK_LIFETIME_SECS);
                world.downloads.insert(
                    token.clone(),
                    Download {
                        repo: key.clone(),
                        sha: sha.clone(),
                        expires_at,
                    },
                );
                let repo = &world.repos[&key];
                let location = format!(
                    "{}/codeload/{}/{}/legacy.tar.gz/{sha}?token={token}",
                    world.base_url, repo.owner, repo.name
                );
                let mut reply = Reply::error(302, "Found").header("location", location);
                reply.body.clear();
                Ok(reply)
            }
            _ => Err(not_found()),
        }
    })();
    result.unwrap_or_else(|refusal| refusal)
}

fn not_found() -> Reply {
    Reply::error(404, "Not Found")
}

fn pull_of<'a>(repo: &'a Repo, number: &str) -> Result<&'a PullState, Reply> {
    number_of(number)
        .and_then(|n| repo.pulls.get(&n))
        .ok_or_else(not_found)
}

fn number_of(text: &str) -> Option<u64> {
    text.parse().ok()
}

/// Check runs are written only with an app's installation token: "OAuth apps and
/// authenticated users are not able to create a check suite" ([`rules::MAX_ANNOTATIONS_PER_REQUEST`]'s page).
fn app_only(caller: &Caller) -> Result<(), Reply> {
    match caller.kind {
        TokenKind::Installation(_) => Ok(()),
        _ => Err(Reply::error(403, "You must authenticate via a GitHub App.")),
    }
}

fn author_of(world: &World, caller: &Caller) -> (String, String) {
    match &caller.kind {
        TokenKind::User(login) => (login.clone(), "User".into()),
        _ => (format!("{}[bot]", world.app_slug), "Bot".into()),
    }
}

fn comment_body(body: &[u8]) -> Result<String, Reply> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Reply::error(400, "Problems parsing JSON"))?;
    let text = value["body"].as_str().ok_or_else(|| {
        Reply::invalid("IssueComment", "body", "missing_field", "body is missing")
    })?;
    if text.chars().count() > rules::MAX_COMMENT_CHARS {
        return Err(Reply::invalid(
            "IssueComment",
            "body",
            "custom",
            "body is too long (maximum is 65536 characters)",
        ));
    }
    Ok(text.to_string())
}

const CHECK_STATUSES: &[&str] = &[
    "queued",
    "in_progress",
    "completed",
    "waiting",
    "requested",
    "pending",
];
const CHECK_CONCLUSIONS: &[&str] = &[
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
];

/// Validates a check run body as GitHub documents it; `creating` requires `name` and
/// `head_sha`.
fn check_run_fields(repo: &Repo, body: &[u8], creating: bool) -> Result<Value, Reply> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Reply::error(400, "Problems parsing JSON"))?;
    let Value::Object(fields) = &value else {
        return Err(Reply::error(400, "Problems parsing JSON"));
    };
    let string = |name: &str| -> Result<Option<&str>, Reply> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(Reply::invalid(
                "CheckRun",
                name,
                "invalid",
                &format!("{name} is not a string"),
            )),
        }
    };
    if creating {
        if string("name")?.is_none_or(str::is_empty) {
            return Err(Reply::invalid(
                "CheckRun",
                "name",
                "missing_field",
                "name is missing",
            ));
        }
        let sha = string("head_sha")?.ok_or_else(|| {
            Reply::invalid(
                "CheckRun",
                "head_sha",
                "missing_field",
                "head_sha is missing",
            )
        })?;
        if !repo.has_commit(sha) {
            return Err(Reply::error(
                422,
                &format!("No commit found for SHA: {sha}"),
            ));
        }
    }
    let status = string("status")?;
    if let Some(status) = status {
        if !CHECK_STATUSES.contains(&status) {
            return Err(Reply::invalid(
                "CheckRun",
                "status",
                "invalid",
                "status is not included in the list",
            ));
        }
    }
    let conclusion = string("conclusion")?;
    if let Some(conclusion) = conclusion {
        if !CHECK_CONCLUSIONS.contains(&conclusion) {
            return Err(Reply::invalid(
                "CheckRun",
                "conclusion",
                "invalid",
                "conclusion is not included in the list",
            ));
        }
    }
    if status == Some("completed") && conclusion.is_none() {
        return Err(Reply::invalid(
            "CheckRun",
            "conclusion",
            "missing_field",
            "conclusion is required when status is completed",
        ));
    }
    string("details_url")?;
    string("external_id")?;
    if let Some(output) = fields.get("output").filter(|o| !o.is_null()) {
        let Value::Object(output) = output else {
            return Err(Reply::invalid(
                "CheckRun",
                "output",
                "invalid",
                "output is not an object",
            ));
        };
        for required in ["title", "summary"] {
            if !output.get(required).is_some_and(Value::is_string) {
                return Err(Reply::invalid(
                    "CheckRun",
                    &format!("output.{required}"),
                    "missing_field",
                    &format!("output.{required} is missing"),
                ));
            }
        }
        for field in ["summary", "text"] {
            let chars = output
                .get(field)
                .and_then(Value::as_str)
                .map_or(0, |s| s.chars().count());
            if chars > rules::MAX_CHECK_OUTPUT_CHARS {
                return Err(Reply::error(
                    422,
                    &format!("Invalid request.\n\nOnly {} characters are allowed; {chars} were supplied.", rules::MAX_CHECK_OUTPUT_CHARS),
                ));
            }
        }
        if let Some(annotations) = output.get("annotations").and_then(Value::as_array) {
            if annotations.len() > rules::MAX_ANNOTATIONS_PER_REQUEST {
                return Err(Reply::error(
                    422,
                    &format!("Invalid request.\n\nOnly {} annotations are allowed per request; {} were supplied.", rules::MAX_ANNOTATIONS_PER_REQUEST, annotations.len()),
                ));
            }
        }
    }
    Ok(value)
}

/// Applies a validated body to a run: "Providing conclusion will automatically set the
/// status parameter to completed."
fn apply_check_run(run: &mut CheckRunRecord, fields: &Map<String, Value>) {
    let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_string);
    if let Some(name) = text("name") {
        run.name = name;
    }
    if let Some(status) = text("status") {
        run.status = status;
    }
    if let Some(conclusion) = text("conclusion") {
        run.conclusion = Some(conclusion);
        run.status = "completed".into();
    }
    if let Some(url) = text("details_url") {
        run.details_url = Some(url);
    }
    if let Some(id) = text("external_id") {
        run.external_id = Some(id);
    }
    if let Some(output) = fields.get("output").filter(|o| !o.is_null()) {
        run.output = Some(output.clone());
    }
}

fn create_check_run(world: &mut World, key: &str, body: &[u8]) -> Result<Reply, Reply> {
    let value = check_run_fields(&world.repos[key], body, true)?;
    let fields = value.as_object().cloned().unwrap_or_default();
    let id = world.id();
    let mut run = CheckRunRecord {
        id,
        name: String::new(),
        head_sha: fields["head_sha"].as_str().unwrap_or_default().to_string(),
        status: "queued".into(),
        conclusion: None,
        external_id: None,
        details_url: None,
        output: None,
        app_id: world.app_id,
        history: vec![value.clone()],
    };
    apply_check_run(&mut run, &fields);
    let repo = world.repos.get_mut(key).ok_or_else(not_found)?;
    repo.check_runs.push(run.clone());
    Ok(Reply::json(
        201,
        &check_run_json(&world.base_url, &world.repos[key], &run),
    ))
}

fn update_check_run(world: &mut World, key: &str, id: &str, body: &[u8]) -> Result<Reply, Reply> {
    let id = number_of(id).ok_or_else(not_found)?;
    let value = check_run_fields(&world.repos[key], body, false)?;
    let fields = value.as_object().cloned().unwrap_or_default();
    let repo = world.repos.get_mut(key).ok_or_else(not_found)?;
    let run = repo
        .check_runs
        .iter_mut()
        .find(|r| r.id == id)
        .ok_or_else(not_found)?;
    apply_check_run(run, &fields);
    super::push_bounded(&mut run.history, value, super::MAX_HISTORY);
    let run = run.clone();
    Ok(Reply::json(
        200,
        &check_run_json(&world.base_url, &world.repos[key], &run),
    ))
}

fn compare(repo: &Repo, basehead: &str) -> Result<Reply, Reply> {
    let (base, head) = basehead.split_once("...").ok_or_else(not_found)?;
    let base_sha = repo.resolve(base).ok_or_else(not_found)?;
    let head_sha = repo.resolve(head).ok_or_else(not_found)?;
    let (status, ahead, behind) = if base_sha == head_sha {
        ("identical", 0, 0)
    } else if repo
        .pulls
        .values()
        .any(|p| p.spec.head_sha == head_sha && p.base_sha == base_sha)
    {
        // A pull request's head is one commit ahead of the base it was opened on.
        ("ahead", 1, 0)
    } else if repo.pulls.values().any(|p| p.spec.head_sha == head_sha) {
        // Its base moved on since: the head is behind the new base too.
        ("diverged", 1, 1)
    } else {
        return Err(Reply::error(
            404,
            &format!("No common ancestor between {base} and {head}."),
        ));
    };
    Ok(Reply::json(
        200,
        &json!({
            "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
            "base_commit": {"sha": base_sha}, "merge_base_commit": {"sha": base_sha},
            "commits": [], "files": [],
        }),
    ))
}

fn list_pulls(world: &World, key: &str, path: &str, query: Option<&str>) -> Reply {
    let repo = &world.repos[key];
    let params = query_pairs(query);
    let state = params
        .iter()
        .find(|(k, _)| k == "state")
        .map_or("open", |(_, v)| v.as_str());
    let base = params
        .iter()
        .find(|(k, _)| k == "base")
        .map(|(_, v)| v.as_str());
    let pulls: Vec<Value> = repo
        .pulls
        .values()
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| base.is_none_or(|b| p.spec.base_ref == b))
        .map(|p| pull_json(&world.base_url, repo, p))
        .collect();
    paged(&world.base_url, path, query, pulls)
}

/// The query's pairs, values percent-decoded.
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// One page of `items` and its `Link` header: `per_page` clamped to 1..=100 (30 when
/// absent), `page` from 1.
fn page_of<T: Clone>(
    base_url: &str,
    path: &str,
    query: Option<&str>,
    items: &[T],
) -> (Vec<T>, Option<String>) {
    let raw: Vec<(String, String)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    let get = |name: &str| {
        raw.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let per_page = match get("per_page") {
        Some(0) | None => rules::DEFAULT_PER_PAGE,
        Some(n) => n.min(rules::MAX_PER_PAGE),
    };
    let page = get("page").unwrap_or(1).max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let start = (page - 1).saturating_mul(per_page).min(items.len());
    let end = (start + per_page).min(items.len());
    let url = |n: usize| {
        let mut pairs: Vec<String> = raw
            .iter()
            .filter(|(k, _)| k != "page" && k != "per_page")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.push(format!("per_page={per_page}"));
        pairs.push(format!("page={n}"));
        format!("<{base_url}{path}?{}>", pairs.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url(page + 1)));
        links.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url(1)));
        links.push(format!("{}; rel=\"prev\"", url((page - 1).min(last))));
    }
    let link = (!links.is_empty()).then(|| links.join(", "));
    (items[start..end].to_vec(), link)
}

fn paged(base_url: &str, path: &str, query: Option<&str>, items: Vec<Value>) -> Reply {
    let (page, link) = page_of(base_url, path, query, &items);
    with_link(Reply::json(200, &Value::Array(page)), link)
}

fn with_link(reply: Reply, link: Option<String>) -> Reply {
    match link {
        Some(link) => reply.header("link", link),
        None => reply,
    }
}

/// A paged list inside an object (`{"total_count": n, <field>: [...], ...extra}`).
fn paged_object(
    base_url: &str,
    path: &str,
    query: Option<&str>,
    items: Vec<Value>,
    field: &str,
    mut extra: Value,
) -> Reply {
    let total = items.len();
    let (page, link) = page_of(base_url, path, query, &items);
    extra["total_count"] = json!(total);
    extra[field] = Value::Array(page);
    with_link(Reply::json(200, &extra), link)
}

/// The tar.gz a download link serves: one top-level directory
/// `<owner>-<repo>-<short sha>/` holding the commit's files.
fn codeload(world: &World, rest: &str, query: Option<&str>) -> Reply {
    let token = query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let Some(download) = world
        .downloads
        .get(&token)
        .filter(|d| d.expires_at > world.now())
    else {
        return Reply::error(404, "Not Found");
    };
    let Some(repo) = world.repos.get(&download.repo) else {
        return Reply::error(404, "Not Found");
    };
    if !rest.ends_with(&download.sha) {
        return Reply::error(404, "Not Found");
    }
    let files = repo.commits.get(&download.sha).cloned().unwrap_or_default();
    let short: String = download
        .sha
        .chars()
        .take(rules::ARCHIVE_SHORT_SHA)
        .collect();
    let top = format!("{}-{}-{short}", repo.owner, repo.name);
    match tarball(&top, &files) {
        Ok(bytes) => Reply {
            status: 200,
            body: bytes,
            content_type: "application/x-gzip",
            headers: vec![(
                "content-disposition".into(),
                format!("attachment; filename={top}.tar.gz"),
            )],
        },
        Err(e) => Reply::error(500, &format!("could not build the archive: {e}")),
    }
}

fn tarball(top: &str, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    let mut dirs: Vec<String> = vec![format!("{top}/")];
    for path in files.keys() {
        let mut parent = String::new();
        for part in path
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
            parent.push_str(part);
            parent.push('/');
            let dir = format!("{top}/{parent}");
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    for dir in dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o775);
        header.set_size(0);
        header.set_mtime(0);
        builder.append_data(&mut header, &dir, std::io::empty())?;
    }
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o664);
        header.set_size(contents.len() as u64);
        header.set_mtime(0);
        builder.append_data(&mut header, format!("{top}/{path}"), contents.as_slice())?;
    }
    let mut encoder = builder.into_inner()?;
    encoder.flush()?;
    encoder.finish()
}

pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(crate) fn user_json(login: &str, kind: &str) -> Value {
    json!({
        "login": login,
        "id": login.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000,
        "type": kind,
        "site_admin": false,
    })
}

pub(crate) fn repo_json(repo: &Repo) -> Value {
    json!({
        "id": repo.id,
        "node_id": format!("R_{}", repo.id),
        "name": repo.name,
        "full_name": repo.full_name(),
        "private": true,
        "owner": user_json(&repo.owner, "Organization"),
        "html_url": format!("https://github.com/{}", repo.full_name()),
        "fork": false,
        "default_branch": "main",
    })
}

fn fork_json(full_name: &str) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap_or((full_name, full_name));
    json!({
        "id": full_name.bytes().fold(11u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000_000,
        "name": name, "full_name": full_name, "private": false, "fork": true,
        "owner": user_json(owner, "User"),
    })
}

pub(crate) fn pull_json(base_url: &str, repo: &Repo, pull: &PullState) -> Value {
    let spec = &pull.spec;
    let head_repo = match &spec.fork {
        Some(fork) => fork_json(fork),
        None => repo_json(repo),
    };
    let head_owner = spec
        .fork
        .as_deref()
        .and_then(|f| f.split_once('/'))
        .map_or(repo.owner.as_str(), |(o, _)| o);
    json!({
        "url": format!("{base_url}/repos/{}/pulls/{}", repo.full_name(), pull.number),
        "id": pull.id,
        "node_id": format!("PR_{}", pull.id),
        "html_url": format!("https://github.com/{}/pull/{}", repo.full_name(), pull.number),
        "number": pull.number,
        "state": pull.state,
        "locked": false,
        "title": format!("Change {}", pull.number),
        "user": user_json(&spec.author, "User"),
        "body": null,
        "draft": spec.draft,
        "merged": pull.merged,
        "mergeable": spec.mergeable,
        "mergeable_state": match spec.mergeable { Some(true) => "clean", Some(false) => "dirty", None => "unknown" },
        "merge_commit_sha": pull.merge_commit_sha,
        "head": {
            "label": format!("{head_owner}:{}", spec.head_ref),
            "ref": spec.head_ref,
            "sha": spec.head_sha,
            "user": user_json(head_owner, "User"),
            "repo": head_repo,
        },
        "base": {
            "label": format!("{}:{}", repo.owner, spec.base_ref),
            "ref": spec.base_ref,
            "sha": pull.base_sha,
            "user": user_json(&repo.owner, "Organization"),
            "repo": repo_json(repo),
        },
        "changed_files": spec.files.len(),
        "commits": 1,
    })
}

fn check_run_json(base_url: &str, repo: &Repo, run: &CheckRunRecord) -> Value {
    json!({
        "id": run.id,
        "name": run.name,
        "head_sha": run.head_sha,
        "status": run.status,
        "conclusion": run.conclusion,
        "external_id": run.external_id,
        "details_url": run.details_url,
        "output": run.output.clone().unwrap_or_else(|| json!({"title": null, "summary": null, "text": null})),
        "app": {"id": run.app_id},
        "url": format!("{base_url}/repos/{}/check-runs/{}", repo.full_name(), run.id),
    })
}

fn comment_json(base_url: &str, repo: &Repo, comment: &CommentRecord) -> Value {
    json!({
        "id": comment.id,
        "node_id": format!("IC_{}", comment.id),
        "url": format!("{base_url}/repos/{}/issues/comments/{}", repo.full_name(), comment.id),
        "html_url": format!("https://github.com/{}/pull/{}#issuecomment-{}", repo.full_name(), comment.issue_number, comment.id),
        "body": comment.body,
        "user": user_json(&comment.author, &comment.author_type),
        "issue_url": format!("{base_url}/repos/{}/issues/{}", repo.full_name(), comment.issue_number),
    })
}

fn percent_decode(text: &str) -> String {
    let hex_value = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex_value(bytes[i + 1]), hex_value(bytes[i + 2])) {
                out.push((high << 4) | low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn sha256(bytes: &[u8]) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
