//! What the console is told about its deployment, as JSON in
//! `<meta name="sortie-console" content="...">`.

use serde::Serialize;

/// The scopes the console asks the issuer for.
pub const DEFAULT_SCOPES: &str = "openid profile";

/// The console's configuration: how it signs in.
///
/// `sortie dev`: `{"mode":"local"}`. Deployed:
/// `{"mode":"oidc","issuer":…,"client_id":…,"scopes":…,"audience":…}`; an empty
/// `client_id` means sign-in is not configured (the template's `ConsoleClientId` is empty),
/// which the console says instead of failing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConsoleConfig {
    /// How the console signs in.
    #[serde(flatten)]
    pub mode: ConsoleMode,
}

/// How the console signs in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum ConsoleMode {
    /// `sortie dev`: paste one of the tokens it prints.
    #[default]
    Local,
    /// Deployed: OpenID Connect authorization code flow with PKCE.
    Oidc(OidcConfig),
}

/// OpenID Connect sign-in against the issuer the API trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OidcConfig {
    /// The issuer (`iss`) the API's JWT authorizer accepts; discovery is
    /// `<issuer>/.well-known/openid-configuration`.
    pub issuer: String,
    /// The console's OAuth client id; empty when sign-in is not configured.
    pub client_id: String,
    /// The scopes asked for (space separated).
    pub scopes: String,
    /// The audience the API accepts (the first of the authorizer's).
    pub audience: String,
    /// The token endpoint, when its origin differs from the issuer's (Cognito's hosted UI
    /// domain): only used to allow it in `connect-src`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
}

impl ConsoleConfig {
    /// `sortie dev`'s local sign-in.
    pub fn local() -> Self {
        Self {
            mode: ConsoleMode::Local,
        }
    }

    /// OIDC sign-in with [`DEFAULT_SCOPES`]; `client_id` may be empty (not configured).
    pub fn oidc(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            mode: ConsoleMode::Oidc(OidcConfig {
                issuer: issuer.into(),
                client_id: client_id.into(),
                scopes: DEFAULT_SCOPES.into(),
                audience: audience.into(),
                token_endpoint: None,
            }),
        }
    }

    /// The JSON the page reads.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the configuration serialises")
    }

    /// The origins the page may fetch from besides its own: the issuer's (discovery) and
    /// the token endpoint's; a URL that is not a plain http(s) origin is left out.
    pub fn connect_origins(&self) -> Vec<String> {
        match &self.mode {
            ConsoleMode::Local => vec![],
            ConsoleMode::Oidc(oidc) => std::iter::once(oidc.issuer.as_str())
                .chain(oidc.token_endpoint.as_deref())
                .filter_map(origin)
                .collect(),
        }
    }
}

/// `scheme://host[:port]` of an http(s) URL, lowercased, or `None` when it is not one
/// (so nothing but an origin ever reaches the Content-Security-Policy header).
pub(crate) fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next()?;
    let plain = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    (!host.is_empty() && plain).then(|| format!("{scheme}://{}", host.to_ascii_lowercase()))
}
