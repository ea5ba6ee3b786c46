//! Connecting an organisation to GitHub: the App's key and webhook secret kept in Secrets
//! Manager (never in the table, never returned), and what a job's `github` source needs.

use chrono::Utc;
use sortie_core::protocol::pilot::SourceAccess;
use sortie_core::vcs::connection::{ConnectionInput, GitlabConnectionInput, VcsConnection};
use sortie_core::vcs::VcsProvider;
use sortie_core::Job;
use sortie_store::StoreError;
use tracing::warn;

use super::{HostError, PullError, PullRequests};

/// The longest webhook secret accepted (GitHub's form takes any text; a key of 4 KiB is
/// already far past any real one).
pub const WEBHOOK_SECRET_MAX: usize = 4096;
/// The shortest: GitHub recommends "a random string with high entropy".
pub const WEBHOOK_SECRET_MIN: usize = 16;
/// The longest App private key accepted (an RSA 4096 key in PEM is about 3.3 KiB).
pub const PRIVATE_KEY_MAX: usize = 16 * 1024;

/// Why a connect was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConnectRefusal {
    /// A field is wrong: its path and the problem.
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
    /// Secrets Manager failed.
    #[error("the connection's secrets could not be stored: {0}")]
    Secrets(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The longest access token accepted (GitLab's are about 50 characters).
pub const GITLAB_TOKEN_MAX: usize = 1024;

/// Refuses a webhook secret shorter than [`WEBHOOK_SECRET_MIN`] or longer than
/// [`WEBHOOK_SECRET_MAX`] characters.
fn check_webhook_secret(secret: &str, host: &str) -> Result<(), ConnectRefusal> {
    let len = secret.chars().count();
    if (WEBHOOK_SECRET_MIN..=WEBHOOK_SECRET_MAX).contains(&len) {
        return Ok(());
    }
    Err(ConnectRefusal::Invalid(
        "webhook_secret",
        format!(
            "must be {WEBHOOK_SECRET_MIN} to {WEBHOOK_SECRET_MAX} characters ({host} recommends a long random string)"
        ),
    ))
}

/// What is wrong with a GitLab access token's form (never quoting it): empty, too long,
/// or not printable ASCII without spaces (it travels in a header).
fn gitlab_token_problem(token: &str) -> Option<String> {
    if token.is_empty() || token.len() > GITLAB_TOKEN_MAX {
        return Some(format!("must be 1 to {GITLAB_TOKEN_MAX} characters"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("must be printable ASCII without spaces (a GitLab access token)".into());
    }
    None
}

impl PullRequests {
    /// Connects `org` to GitHub for `by`: checks the key is an RSA private key and the
    /// secret is long enough, keeps both in Secrets Manager (names under
    /// `sortie/vcs/<org>/`, never swept as a job's), writes the connection, then deletes
    /// the secrets of the connection it replaced.
    pub async fn connect(
        &self,
        org: &str,
        input: ConnectionInput,
        private_key: &str,
        webhook_secret: &str,
        by: &str,
    ) -> Result<VcsConnection, ConnectRefusal> {
        if private_key.len() > PRIVATE_KEY_MAX {
            return Err(ConnectRefusal::Invalid(
                "private_key",
                format!("is longer than {PRIVATE_KEY_MAX} bytes"),
            ));
        }
        sortie_github::AppCredentials::check_private_key(private_key)
            .map_err(|e| ConnectRefusal::Invalid("private_key", e))?;
        check_webhook_secret(webhook_secret, "GitHub")?;
        self.store_connection(
            org,
            VcsProvider::Github,
            input.app_id,
            input.api_url,
            ("key", private_key),
            webhook_secret,
            by,
        )
        .await
    }

    /// Connects `org` to GitLab for `by`: the instance's URL, an access token (a group or
    /// project access token, kept in Secrets Manager) and the webhook's secret token. The
    /// token is checked for its form only; the first call to GitLab checks its scopes.
    pub async fn connect_gitlab(
        &self,
        org: &str,
        input: GitlabConnectionInput,
        token: &str,
        webhook_secret: &str,
        by: &str,
    ) -> Result<VcsConnection, ConnectRefusal> {
        if let Some(problem) = gitlab_token_problem(token) {
            return Err(ConnectRefusal::Invalid("token", problem));
        }
        check_webhook_secret(webhook_secret, "GitLab")?;
        self.store_connection(
            org,
            VcsProvider::Gitlab,
            0,
            input.instance_url,
            ("token", token),
            webhook_secret,
            by,
        )
        .await
    }

    /// Keeps the connection's credential and webhook secret in Secrets Manager (names under
    /// `sortie/vcs/<org>/<provider>/`, never swept as a job's), writes the connection, then
    /// deletes the secrets of the connection it replaced.
    #[allow(clippy::too_many_arguments)]
    async fn store_connection(
        &self,
        org: &str,
        provider: VcsProvider,
        app_id: u64,
        api_url: String,
        (credential_name, credential): (&str, &str),
        webhook_secret: &str,
        by: &str,
    ) -> Result<VcsConnection, ConnectRefusal> {
        let earlier = match self.store().get_connection(org, provider).await {
            Ok(c) => Some(c),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let id = sortie_core::tokens::new_id();
        let tags = [("sortie:org", org), ("sortie:vcs", provider.as_str())];
        let secrets = &self.jobs.secrets;
        let key_arn = secrets
            .create(
                &format!(
                    "sortie/vcs/{org}/{}/{credential_name}-{id}",
                    provider.as_str()
                ),
                credential,
                &tags,
            )
            .await
            .map_err(ConnectRefusal::Secrets)?;
        let hook_arn = match secrets
            .create(
                &format!("sortie/vcs/{org}/{}/webhook-{id}", provider.as_str()),
                webhook_secret,
                &tags,
            )
            .await
        {
            Ok(arn) => arn,
            Err(e) => {
                self.forget_secret(&key_arn).await;
                return Err(ConnectRefusal::Secrets(e));
            }
        };
        let connection = VcsConnection {
            org: org.to_string(),
            provider,
            app_id,
            api_url,
            credential_secret: key_arn.clone(),
            webhook_secret: hook_arn.clone(),
            created_by: by.to_string(),
            created_at: Utc::now(),
        };
        if let Err(e) = self.store().put_connection(&connection).await {
            self.forget_secret(&key_arn).await;
            self.forget_secret(&hook_arn).await;
            return Err(e.into());
        }
        if let Some(old) = earlier {
            self.forget_secret(&old.credential_secret).await;
            self.forget_secret(&old.webhook_secret).await;
        }
        Ok(connection)
    }

    /// Disconnects `org` from `provider`: deletes the connection, then its secrets.
    pub async fn disconnect(&self, org: &str, provider: VcsProvider) -> Result<(), StoreError> {
        let connection = self.store().get_connection(org, provider).await?;
        self.store().delete_connection(org, provider).await?;
        self.forget_secret(&connection.credential_secret).await;
        self.forget_secret(&connection.webhook_secret).await;
        Ok(())
    }

    async fn forget_secret(&self, arn: &str) {
        if let Err(e) = self.jobs.secrets.delete(arn).await {
            warn!(error = %e, "a connection secret could not be deleted");
        }
    }

    /// What the pilot needs to download a job's `github` or `gitlab` source: an archive
    /// URL and a token that reads only that repository, minted now through the job's
    /// organisation's connection to that host. `None` for any other source.
    pub async fn source_access(&self, job: &Job) -> Result<Option<SourceAccess>, PullError> {
        let Some((provider, repository, commit)) = job.request.source.commit_of() else {
            return Ok(None);
        };
        let org = job.environment.org();
        let connection = match self.store().get_connection(org, provider).await {
            Ok(c) => c,
            Err(StoreError::NotFound { .. }) => {
                return Err(HostError::Refused(format!(
                    "organisation `{org}` has no {} connection to read {repository} with",
                    provider.as_str()
                ))
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        let host = self.hosts.open(&connection).await?;
        Ok(Some(
            host.source_access(repository, commit, job.id.as_str())
                .await?,
        ))
    }

    /// The webhook secret of `org`'s connection to `provider`, for checking a delivery's
    /// signature (GitHub) or secret token (GitLab); `None` when the organisation has no
    /// such connection.
    pub async fn webhook_secret(
        &self,
        org: &str,
        provider: VcsProvider,
    ) -> Result<Option<String>, PullError> {
        let connection = match self.store().get_connection(org, provider).await {
            Ok(c) => c,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        self.jobs
            .secrets
            .value(&connection.webhook_secret)
            .await
            .map(Some)
            .map_err(|e| HostError::Secret(e).into())
    }
}

/// What the webhook and the connection's view read of a code host connection, without
/// the host itself: the connection, and the deliveries already taken (a webhook
/// delivered twice is handled once).
#[derive(Clone)]
pub struct Connections {
    /// The repository.
    pub store: std::sync::Arc<dyn sortie_store::Store>,
}

impl Connections {
    /// The service over `store`.
    pub fn new(store: std::sync::Arc<dyn sortie_store::Store>) -> Self {
        Self { store }
    }

    /// `org`'s connection to `provider`.
    pub async fn get(&self, org: &str, provider: VcsProvider) -> Result<VcsConnection, StoreError> {
        self.store.get_connection(org, provider).await
    }

    /// Takes `delivery` of `provider` until `until`: false when it was taken already.
    pub async fn claim_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
        until: chrono::DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.store.claim_delivery(provider, delivery, until).await
    }

    /// Forgets `delivery` (its work was not queued), so a redelivery is handled.
    pub async fn forget_delivery(
        &self,
        provider: VcsProvider,
        delivery: &str,
    ) -> Result<(), StoreError> {
        self.store.forget_delivery(provider, delivery).await
    }
}
