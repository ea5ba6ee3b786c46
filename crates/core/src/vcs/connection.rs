//! A connection: how one organisation's repositories are reached on their host, through
//! which Sortie reads pull requests (merge requests on GitLab) and writes their checks and
//! comments. On GitHub it is a GitHub App installed for the organisation; on GitLab, an
//! access token and a webhook secret token. The credential and the webhook secret are kept
//! in Secrets Manager; the connection holds only their ARNs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::VcsProvider;
use crate::problems::{Fields, Problems};
use crate::ValidationError;

/// The public GitHub's REST API.
pub const GITHUB_API_URL: &str = "https://api.github.com";

/// The longest API URL accepted.
pub const API_URL_MAX: usize = 512;

/// An organisation's connection to its repositories' host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VcsConnection {
    /// The organisation it serves (a top-level group).
    pub org: String,
    /// The host: `github` or `gitlab`.
    pub provider: VcsProvider,
    /// The GitHub App's id (GitHub only: 0 on GitLab).
    #[serde(default)]
    pub app_id: u64,
    /// On GitHub, the REST API's URL: `https://api.github.com`, or a GitHub Enterprise
    /// Server's `https://<host>/api/v3`. On GitLab, the instance's URL: `https://gitlab.com`
    /// or a self-managed instance's (the API is under `/api/v4`).
    pub api_url: String,
    /// The Secrets Manager ARN of the connection's credential, never the credential: the
    /// GitHub App's private key, or the GitLab access token.
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[serde(default, alias = "private_key_secret")]
    pub credential_secret: String,
    /// The Secrets Manager ARN of the webhook secret (never the secret).
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[serde(default)]
    pub webhook_secret: String,
    /// Who connected it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// What a client sends to connect an organisation: the App's id and the API's URL (the
/// key and the webhook secret travel beside it and are never part of the record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInput {
    /// The GitHub App's id.
    pub app_id: u64,
    /// The REST API's URL.
    pub api_url: String,
}

impl ConnectionInput {
    /// Decodes and validates `{app_id, api_url?}`, reporting every problem by field.
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let app_id: Option<u64> = f.required("app_id", &mut p);
        let api_url: String = f
            .optional("api_url", &mut p)
            .unwrap_or_else(|| GITHUB_API_URL.to_string());
        if app_id == Some(0) {
            p.push("app_id", "must be a GitHub App's id (a positive number)");
        }
        if let Some(problem) = api_url_problem(&api_url) {
            p.push("api_url", problem);
        }
        f.finish(&mut p);
        match (app_id, p.0.is_empty()) {
            (Some(app_id), true) => Ok(Self {
                app_id,
                api_url: api_url.trim_end_matches('/').to_string(),
            }),
            _ => Err(ValidationError { problems: p.0 }),
        }
    }
}

/// GitLab.com, the default instance of a GitLab connection.
pub const GITLAB_URL: &str = "https://gitlab.com";

/// What a client sends to connect an organisation to GitLab: the instance's URL (the
/// access token and the webhook secret token travel beside it and are never part of the
/// record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitlabConnectionInput {
    /// The instance's URL, without a trailing slash.
    pub instance_url: String,
}

impl GitlabConnectionInput {
    /// Decodes and validates `{instance_url?}`, reporting every problem by field. The URL
    /// is the instance's root (`https://gitlab.example.com`, or under a relative root such
    /// as `https://example.com/gitlab`), never its API (`/api/v4` is added by the client).
    pub fn from_value(value: &Value) -> Result<Self, ValidationError> {
        let mut p = Problems::default();
        let Some(mut f) = Fields::new(value, "", &mut p) else {
            return Err(ValidationError { problems: p.0 });
        };
        let url: String = f
            .optional("instance_url", &mut p)
            .unwrap_or_else(|| GITLAB_URL.to_string());
        let url = url.trim_end_matches('/').to_string();
        if let Some(problem) = api_url_problem(&url) {
            p.push("instance_url", problem);
        } else if url.ends_with("/api/v4") {
            p.push(
                "instance_url",
                "must be the instance's URL, without `/api/v4` (Sortie adds it)",
            );
        }
        f.finish(&mut p);
        if p.0.is_empty() {
            Ok(Self { instance_url: url })
        } else {
            Err(ValidationError { problems: p.0 })
        }
    }
}

/// Why `url` cannot be a REST API's URL: not `https` (plain `http` only to a loopback
/// address, for local mode and tests), a query or fragment, credentials in it, or too long.
pub fn api_url_problem(url: &str) -> Option<String> {
    if url.len() > API_URL_MAX {
        return Some(format!("is longer than {API_URL_MAX} characters"));
    }
    let parsed = match url::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("is not a URL: {e}")),
    };
    let loopback = matches!(
        parsed.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(parsed.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || parsed.host_str() == Some("localhost");
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => return Some("must be https (plain http only to a loopback address)".into()),
        other => return Some(format!("must be https, not `{other}`")),
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Some("has no host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some("must not carry credentials".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Some("must not have a query or a fragment".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_id_is_required_and_the_api_defaults_to_github_com() {
        let c = ConnectionInput::from_value(&serde_json::json!({"app_id": 12})).unwrap();
        assert_eq!((c.app_id, c.api_url.as_str()), (12, GITHUB_API_URL));
        let e = ConnectionInput::from_value(&serde_json::json!({})).unwrap_err();
        assert!(e.to_string().contains("app_id"), "{e}");
        let e = ConnectionInput::from_value(&serde_json::json!({"app_id": 0})).unwrap_err();
        assert!(e.to_string().contains("app_id"), "{e}");
        let e = ConnectionInput::from_value(&serde_json::json!({"app_id": 1, "private_key": "x"}))
            .unwrap_err();
        assert!(
            e.to_string().contains("private_key"),
            "an unknown field is named: {e}"
        );
    }

    #[test]
    fn a_gitlab_instance_defaults_to_gitlab_com_and_is_its_root_not_its_api() {
        let c = GitlabConnectionInput::from_value(&serde_json::json!({})).unwrap();
        assert_eq!(c.instance_url, GITLAB_URL);
        let c = GitlabConnectionInput::from_value(
            &serde_json::json!({"instance_url": "https://git.example.com/gitlab/"}),
        )
        .unwrap();
        assert_eq!(c.instance_url, "https://git.example.com/gitlab");
        for bad in [
            "https://gitlab.example.com/api/v4",
            "http://gitlab.example.com",
            "https://token@gitlab.example.com",
        ] {
            let e = GitlabConnectionInput::from_value(&serde_json::json!({"instance_url": bad}))
                .unwrap_err();
            assert!(e.to_string().contains("instance_url"), "{bad}: {e}");
        }
        let e = GitlabConnectionInput::from_value(&serde_json::json!({"app_id": 1})).unwrap_err();
        assert!(
            e.to_string().contains("app_id"),
            "an unknown field is named: {e}"
        );
    }

    #[test]
    fn a_connection_stored_before_gitlab_came_reads_its_key_as_the_credential() {
        let old = serde_json::json!({
            "org": "acme", "provider": "github", "app_id": 7,
            "api_url": "https://api.github.com",
            "private_key_secret": "arn:key", "webhook_secret": "arn:hook",
            "created_by": "admin", "created_at": "2026-11-01T00:00:00Z"
        });
        let c: VcsConnection = serde_json::from_value(old).unwrap();
        assert_eq!(c.credential_secret, "arn:key");
    }

    #[test]
    fn an_enterprise_server_url_is_kept_without_its_trailing_slash() {
        let c = ConnectionInput::from_value(
            &serde_json::json!({"app_id": 3, "api_url": "https://ghe.example.com/api/v3/"}),
        )
        .unwrap();
        assert_eq!(c.api_url, "https://ghe.example.com/api/v3");
    }

    #[test]
    fn only_https_or_loopback_http_without_credentials_is_an_api_url() {
        for ok in [
            "https://api.github.com",
            "https://ghe.example.com/api/v3",
            "http://127.0.0.1:8080",
            "http://[::1]:9",
            "http://localhost:3000",
        ] {
            assert_eq!(api_url_problem(ok), None, "{ok}");
        }
        for bad in [
            "http://api.github.com",
            "ftp://x",
            "https://user:pw@ghe.example.com",
            "https://ghe.example.com/api/v3?x=1",
            "not a url",
            &format!("https://{}.com", "a".repeat(600)),
        ] {
            assert!(api_url_problem(bad).is_some(), "{bad}");
        }
    }
}
