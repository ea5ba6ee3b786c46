//! Project access tokens: creating one (a bot user that is a member of the one project),
//! listing them, revoking one, and a token revoking itself, as GitLab's API documents
//! (rules::MAX_TOKEN_LIFETIME_DAYS, rules::SELF_REVOKE).

use chrono::NaiveDate;
use serde_json::json;

use super::auth::{self, Need, Who};
use super::json::timestamp;
use super::paging::paged;
use super::{Params, Reply};
use crate::gitlab::records::{AccessLevel, AccessTokenRecord};
use crate::gitlab::{rules, Token, World};

pub(crate) fn create(
    world: &mut World,
    who: &Who,
    id: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let need = Need::write().authenticated();
    auth::check(who, need)?;
    let name = params.required("name")?;
    let scopes = params
        .list("scopes")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Reply::error(400, "scopes is missing"))?;
    if scopes
        .iter()
        .any(|s| !rules::PROJECT_TOKEN_SCOPES.contains(&s.as_str()))
    {
        return Err(Reply::error(400, "scopes does not have a valid value"));
    }
    let level = match params.text("access_level") {
        None => AccessLevel::Maintainer,
        Some(text) => text
            .parse::<u64>()
            .ok()
            .and_then(AccessLevel::from_value)
            .ok_or_else(|| Reply::error(400, "access_level does not have a valid value"))?,
    };
    let expires_at = match params.text("expires_at") {
        None => None,
        Some(text) => Some(
            NaiveDate::parse_from_str(&text, "%Y-%m-%d")
                .map_err(|_| Reply::error(400, "expires_at is invalid"))?,
        ),
    };
    let project_id = auth::project(world, who, id, need)?;
    // Created with a personal access token of a Maintainer or Owner; a project access token
    // cannot create one.
    let creator = auth::level(world, who, project_id);
    if who.bot || creator < AccessLevel::Maintainer {
        return Err(Reply::bad_request(
            "User does not have permission to create project access token",
        ));
    }
    if level > creator {
        return Err(Reply::bad_request(
            "Access level of the token can't be greater the access level of the user who created the token",
        ));
    }
    let today = world.now().date_naive();
    let max = today + chrono::Duration::days(rules::MAX_TOKEN_LIFETIME_DAYS);
    let expires_at = expires_at.unwrap_or(max);
    if expires_at > max {
        return Err(Reply::bad_request(&format!(
            "Expires at must be before {}",
            max.format("%Y-%m-%d")
        )));
    }
    let minted = mint(
        world,
        project_id,
        &name,
        &scopes,
        level,
        expires_at,
        who.name(),
    );
    let (token_id, user_id, value) = (minted.id, minted.user_id, minted.token);
    let created_at = timestamp(world.now());
    Ok(Reply::json(
        201,
        &json!({
            "id": token_id,
            "name": name,
            "description": null,
            "revoked": false,
            "active": true,
            "created_at": created_at,
            "last_used_at": null,
            "scopes": scopes,
            "user_id": user_id,
            "expires_at": expires_at.format("%Y-%m-%d").to_string(),
            "access_level": level.value(),
            "token": value,
        }),
    ))
}

pub(crate) fn revoke(
    world: &mut World,
    who: &Who,
    id: &str,
    token_id: &str,
) -> Result<Reply, Reply> {
    let need = Need::write().authenticated();
    let project_id = auth::project(world, who, id, need)?;
    let token_id: u64 = token_id
        .parse()
        .map_err(|_| Reply::error(400, "token_id is invalid"))?;
    let creator = auth::level(world, who, project_id);
    let project = &world.projects[&project_id];
    let index = project
        .access_tokens
        .iter()
        .position(|t| t.id == token_id && !t.revoked)
        .ok_or_else(|| {
            Reply::message(
                404,
                &format!("404 Could not find project access token with token_id: {token_id}"),
            )
        })?;
    if who.bot || creator < AccessLevel::Maintainer {
        return Err(Reply::bad_request(&format!(
            "{} cannot delete {}",
            who.name(),
            project.access_tokens[index].bot_username
        )));
    }
    let project = world.projects.get_mut(&project_id).expect("found");
    project.access_tokens[index].revoked = true;
    let value = project.access_tokens[index].token.clone();
    if let Some(token) = world.tokens.get_mut(&value) {
        token.revoked = true;
    }
    Ok(Reply {
        status: 204,
        body: Vec::new(),
        content_type: "application/json",
        headers: Vec::new(),
    })
}

/// A token just minted.
pub(crate) struct Minted {
    pub(crate) id: u64,
    pub(crate) user_id: u64,
    pub(crate) token: String,
}

/// Mints a project access token: a bot user of `project_id` alone, at `level`.
pub(crate) fn mint(
    world: &mut World,
    project_id: u64,
    name: &str,
    scopes: &[String],
    level: AccessLevel,
    expires_at: NaiveDate,
    created_by: &str,
) -> Minted {
    let token_id = world.id();
    let mut suffix = [0u8; 4];
    getrandom::fill(&mut suffix).expect("the OS random source");
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let bot = format!("project_{project_id}_bot_{suffix}");
    let user_id = world.user_id(&bot);
    let value = world.new_token();
    world.tokens.insert(
        value.clone(),
        Token {
            username: bot.clone(),
            bot: true,
            scopes: scopes.to_vec(),
            expires_at: Some(expires_at),
            revoked: false,
        },
    );
    let created_at = world.now();
    let project = world.projects.get_mut(&project_id).expect("found");
    project.members.insert(bot.clone(), level);
    project.access_tokens.push(AccessTokenRecord {
        id: token_id,
        name: name.to_string(),
        scopes: scopes.to_vec(),
        access_level: level.value(),
        expires_at: expires_at.format("%Y-%m-%d").to_string(),
        revoked: false,
        created_by: created_by.to_string(),
        bot_username: bot,
        token: value.clone(),
        created_at,
    });
    Minted {
        id: token_id,
        user_id,
        token: value,
    }
}

/// `GET /projects/:id/access_tokens`: the project's tokens, never their values, paged;
/// `state=active|inactive` filters (GitLab 17.2). Listing needs the Maintainer role
/// (<https://docs.gitlab.com/api/project_access_tokens/#list-all-project-access-tokens>).
pub(crate) fn list(
    world: &World,
    who: &Who,
    id: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let need = Need::read().authenticated();
    let project_id = auth::project(world, who, id, need)?;
    if who.bot || auth::level(world, who, project_id) < AccessLevel::Maintainer {
        return Err(Reply::message(403, "403 Forbidden"));
    }
    let state = params.text("state");
    if state
        .as_deref()
        .is_some_and(|s| s != "active" && s != "inactive")
    {
        return Err(Reply::error(400, "state does not have a valid value"));
    }
    let today = world.now().date_naive();
    let items = world.projects[&project_id]
        .access_tokens
        .iter()
        .filter_map(|t| {
            let expired = NaiveDate::parse_from_str(&t.expires_at, "%Y-%m-%d")
                .is_ok_and(|date| date <= today);
            let active = !t.revoked && !expired;
            let wanted = match state.as_deref() {
                Some("active") => active,
                Some(_) => !active,
                None => true,
            };
            wanted.then(|| {
                json!({
                    "id": t.id,
                    "name": t.name,
                    "description": null,
                    "revoked": t.revoked,
                    "active": active,
                    "created_at": timestamp(t.created_at),
                    "last_used_at": null,
                    "scopes": t.scopes,
                    "user_id": world.users.get(&t.bot_username).copied(),
                    "expires_at": t.expires_at,
                    "access_level": t.access_level,
                })
            })
        })
        .collect();
    paged(&world.base_url, path, params, items)
}

/// `DELETE /personal_access_tokens/self`: the request's own token revoked, whatever its
/// scope (GitLab 15.4 and later; a project access token is its bot's personal access
/// token). 204; no token 401 (rules::SELF_REVOKE).
pub(crate) fn revoke_self(world: &mut World, who: &Who) -> Reply {
    let Some(value) = who.credential.clone() else {
        return Reply::message(401, rules::UNAUTHORIZED);
    };
    if let Some(token) = world.tokens.get_mut(&value) {
        token.revoked = true;
    }
    for project in world.projects.values_mut() {
        for record in project
            .access_tokens
            .iter_mut()
            .filter(|t| t.token == value)
        {
            record.revoked = true;
        }
    }
    Reply {
        status: 204,
        body: Vec::new(),
        content_type: "application/json",
        headers: Vec::new(),
    }
}
