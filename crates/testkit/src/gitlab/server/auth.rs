//! Who a request is: a personal or project access token, checked as GitLab documents it
//! (expiry, revocation, scopes), and which projects it can see with which role.

use axum::http::HeaderMap;
use serde_json::json;

use super::{Params, Reply};
use crate::gitlab::records::AccessLevel;
use crate::gitlab::{rules, Caller, World};

/// The caller of a request that authenticated (or sent no token).
pub(crate) struct Who {
    pub(crate) username: Option<String>,
    pub(crate) bot: bool,
    pub(crate) scopes: Vec<String>,
    /// The token the request came with (a token revoking itself names no other).
    pub(crate) credential: Option<String>,
}

impl Who {
    pub(crate) fn caller(&self) -> Caller {
        match (&self.username, self.bot) {
            (None, _) => Caller::Anonymous,
            (Some(name), false) => Caller::User(name.clone()),
            (Some(name), true) => Caller::ProjectBot(name.clone()),
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.username.as_deref().unwrap_or("")
    }
}

/// What an endpoint needs of its caller.
#[derive(Clone, Copy)]
pub(crate) struct Need {
    pub(crate) scopes: &'static [&'static str],
    pub(crate) role: AccessLevel,
    /// What a request with no token gets: 404 where GitLab reads the (private) project
    /// anonymously, 401 where it calls `authenticate!` first.
    pub(crate) anonymous: u16,
}

impl Need {
    pub(crate) fn read() -> Self {
        Self {
            scopes: rules::READ_SCOPES,
            role: AccessLevel::Guest,
            anonymous: 404,
        }
    }

    pub(crate) fn write() -> Self {
        Self {
            scopes: rules::WRITE_SCOPES,
            role: AccessLevel::Guest,
            anonymous: 401,
        }
    }

    pub(crate) fn role(mut self, role: AccessLevel) -> Self {
        self.role = role;
        self
    }

    pub(crate) fn authenticated(mut self) -> Self {
        self.anonymous = 401;
        self
    }
}

fn invalid_token(description: &str) -> Reply {
    Reply::json(
        401,
        &json!({"error": "invalid_token", "error_description": description}),
    )
    .header(
        "www-authenticate",
        format!("Bearer realm=\"\", error=\"invalid_token\", error_description=\"{description}\""),
    )
}

/// The request's token, checked: unknown 401 `401 Unauthorized`, expired or revoked 401
/// `invalid_token` (rules::UNAUTHORIZED, rules::EXPIRED_TOKEN, rules::REVOKED_TOKEN).
pub(crate) fn authenticate(
    world: &World,
    headers: &HeaderMap,
    params: &Params,
) -> Result<Who, (Reply, Caller)> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string())
    };
    let credential = header("private-token")
        .or_else(|| {
            header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_string))
        })
        .or_else(|| params.text("private_token"))
        .or_else(|| params.text("access_token"));
    let Some(credential) = credential else {
        return Ok(Who {
            username: None,
            bot: false,
            scopes: Vec::new(),
            credential: None,
        });
    };
    let refused = |reply: Reply, why: &str| (reply, Caller::Refused(why.to_string()));
    let Some(token) = world.tokens.get(credential.trim()) else {
        return Err(refused(
            Reply::message(401, rules::UNAUTHORIZED),
            "unknown token",
        ));
    };
    if token.revoked {
        return Err(refused(invalid_token(rules::REVOKED_TOKEN), "revoked"));
    }
    // Tokens "expire at midnight UTC on the expiry date".
    if token
        .expires_at
        .is_some_and(|date| date <= world.now().date_naive())
    {
        return Err(refused(invalid_token(rules::EXPIRED_TOKEN), "expired"));
    }
    Ok(Who {
        username: Some(token.username.clone()),
        bot: token.bot,
        scopes: token.scopes.clone(),
        credential: Some(credential.trim().to_string()),
    })
}

/// The project `id` names (numeric id or decoded full path) if `who` may use it as `need`
/// says: no token 401 or 404, a missing scope 403 `insufficient_scope`, a project the caller
/// is no member of 404 `404 Project Not Found`, too low a role 403 `403 Forbidden`.
pub(crate) fn project(world: &World, who: &Who, id: &str, need: Need) -> Result<u64, Reply> {
    check(who, need)?;
    let username = who.name();
    let found = match id.parse::<u64>() {
        Ok(number) => world.projects.get(&number).map(|p| p.id),
        Err(_) => world.project_id(id),
    };
    let not_found = || Reply::message(404, rules::PROJECT_NOT_FOUND);
    let project_id = found.ok_or_else(not_found)?;
    let level = world.projects[&project_id]
        .members
        .get(username)
        .copied()
        .ok_or_else(not_found)?;
    if level < need.role {
        return Err(Reply::message(403, "403 Forbidden"));
    }
    Ok(project_id)
}

/// What GitLab checks before an endpoint reads its parameters: a token (401 where the
/// endpoint authenticates first, 404 where it reads the private project anonymously) and one
/// of the scopes it accepts (403 `insufficient_scope`, rules::INSUFFICIENT_SCOPE).
pub(crate) fn check(who: &Who, need: Need) -> Result<(), Reply> {
    if who.username.is_none() {
        return Err(if need.anonymous == 401 {
            Reply::message(401, rules::UNAUTHORIZED)
        } else {
            Reply::message(404, rules::PROJECT_NOT_FOUND)
        });
    }
    if !need
        .scopes
        .iter()
        .any(|s| who.scopes.iter().any(|h| h == s))
    {
        return Err(Reply::json(
            403,
            &json!({
                "error": "insufficient_scope",
                "error_description": rules::INSUFFICIENT_SCOPE,
                "scope": need.scopes.join(" "),
            }),
        ));
    }
    Ok(())
}

/// The caller's role in the project (they are a member: [`project`] checked).
pub(crate) fn level(world: &World, who: &Who, project_id: u64) -> AccessLevel {
    world.projects[&project_id]
        .members
        .get(who.name())
        .copied()
        .unwrap_or(AccessLevel::Guest)
}

/// `GET /user`: the token's own user (`api`, `read_api` or `read_user`), so a client can
/// tell its own notes apart (<https://docs.gitlab.com/api/users/>).
pub(crate) fn current_user(world: &World, who: &Who) -> Reply {
    const USER_SCOPES: &[&str] = &["api", "read_api", "read_user"];
    let need = Need {
        scopes: USER_SCOPES,
        role: AccessLevel::Guest,
        anonymous: 401,
    };
    if let Err(refusal) = check(who, need) {
        return refusal;
    }
    let mut user = super::json::user_json(world, who.name());
    user["bot"] = json!(who.bot);
    Reply::json(200, &user)
}
