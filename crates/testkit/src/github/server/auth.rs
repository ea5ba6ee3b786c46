//! Who a request is: an app JWT, an installation token or a user token, verified as
//! GitHub documents it; minting installation tokens and checking a grant's permissions.

use std::collections::{BTreeMap, HashSet};

use axum::http::HeaderMap;
use serde_json::{json, Value};

use super::json::{repo_json, timestamp};
use super::{Caller, Reply};
use crate::github::rules;
use crate::github::{Grant, Repo, TokenKind, World};

pub(super) fn authenticate(world: &World, headers: &HeaderMap) -> Caller {
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

pub(super) fn repository_installation(
    world: &World,
    caller: &Caller,
    owner: &str,
    repo: &str,
) -> Reply {
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

pub(super) fn create_token(world: &mut World, caller: &Caller, id: &str, body: &[u8]) -> Reply {
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
pub(super) fn allows(grant: &Grant, name: &str, needed: &str) -> bool {
    if name == "metadata" && needed == "read" {
        return true;
    }
    let held = grant.permissions.get(name).and_then(|v| level(v));
    matches!((held, level(needed)), (Some(h), Some(n)) if h >= n)
}
