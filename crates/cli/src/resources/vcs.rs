//! `sortie vcs connect|get|disconnect github|gitlab ORG`: an organisation's connection to
//! GitHub (a GitHub App) or GitLab (an access token).

use serde_json::json;
use sortie_api::routes::vcs::{ConnectionView, GitlabConnectionView};
use sortie_client::endpoints;

use crate::args::{Output, VcsCommand, VcsProviderArg};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{details, emit};

fn read_file(what: &str, path: &std::path::Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
        .map_err(|e| CliError::Usage(format!("{what} {}: {e}", path.display())))
}

fn view_text(v: &ConnectionView) -> String {
    let mut text = details(&[
        ("org", v.org.clone()),
        ("provider", v.provider.clone()),
        ("app id", v.app_id.to_string()),
        ("api", v.api_url.clone()),
        ("webhook url", v.webhook_url.clone()),
        ("issuer", v.issuer.clone()),
        ("connected by", v.created_by.clone()),
    ]);
    text.push_str(&format!(
        "\nGrant a GitHub user a role with: sortie members grant --group {} --role deployer --subject LOGIN --issuer {}\n",
        v.org, v.issuer
    ));
    text
}

fn gitlab_view_text(v: &GitlabConnectionView) -> String {
    let mut text = details(&[
        ("org", v.org.clone()),
        ("provider", v.provider.clone()),
        ("instance", v.instance_url.clone()),
        ("webhook url", v.webhook_url.clone()),
        ("issuer", v.issuer.clone()),
        ("connected by", v.created_by.clone()),
    ]);
    text.push_str(&format!(
        "\nGrant a GitLab user a role with: sortie members grant --group {} --role deployer --subject USERNAME --issuer {}\n",
        v.org, v.issuer
    ));
    text
}

/// A flag the chosen host requires (clap checks it first; this keeps the error if not).
fn required<T>(value: Option<T>, flag: &str, host: &str) -> Result<T, CliError> {
    value.ok_or_else(|| CliError::Usage(format!("{flag} is required to connect to {host}")))
}

/// Runs a `vcs` command.
pub async fn vcs(api: &Api, command: VcsCommand, out: Output) -> Result<(), CliError> {
    match command {
        VcsCommand::Connect {
            provider: VcsProviderArg::Github,
            org,
            app_id,
            private_key_file,
            webhook_secret_file,
            github_api_url,
            ..
        } => {
            let app_id = required(app_id, "--app-id", "GitHub")?;
            let private_key_file = required(private_key_file, "--private-key-file", "GitHub")?;
            let mut body = json!({
                "app_id": app_id,
                "private_key": read_file("--private-key-file", &private_key_file)?,
                "webhook_secret": read_file("--webhook-secret-file", &webhook_secret_file)?,
            });
            if let Some(url) = github_api_url {
                body["api_url"] = json!(url);
            }
            let answer = api
                .send(
                    &endpoints::connect_github(sortie_client::group(&org)),
                    Some(&body),
                    &[],
                )
                .await?;
            let view: ConnectionView = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                format!(
                    "connected {} to GitHub App {}\n\n{}\nSet the App's webhook URL to {} (content type application/json) with the same secret, and bind environments: sortie update env PATH --repository OWNER/NAME --directory DIR\n",
                    view.org, view.app_id, view_text(&view), view.webhook_url
                )
            })
        }
        VcsCommand::Connect {
            provider: VcsProviderArg::Gitlab,
            org,
            token_file,
            webhook_secret_file,
            gitlab_url,
            ..
        } => {
            let token_file = required(token_file, "--token-file", "GitLab")?;
            let mut body = json!({
                "token": read_file("--token-file", &token_file)?,
                "webhook_secret": read_file("--webhook-secret-file", &webhook_secret_file)?,
            });
            if let Some(url) = gitlab_url {
                body["instance_url"] = json!(url);
            }
            let answer = api
                .send(
                    &endpoints::connect_gitlab(sortie_client::group(&org)),
                    Some(&body),
                    &[],
                )
                .await?;
            let view: GitlabConnectionView = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                format!(
                    "connected {} to GitLab at {}\n\n{}\nAdd a webhook at {} with the same secret token, for merge request, comment and push events, and bind environments: sortie update env PATH --provider gitlab --repository GROUP/PROJECT --directory DIR\n",
                    view.org, view.instance_url, gitlab_view_text(&view), view.webhook_url
                )
            })
        }
        VcsCommand::Get {
            provider: VcsProviderArg::Github,
            org,
        } => {
            let answer = api
                .send(
                    &endpoints::get_github_connection(sortie_client::group(&org)),
                    None,
                    &[],
                )
                .await?;
            let view: ConnectionView = decode(answer.body.clone())?;
            emit(&answer.body, out, || view_text(&view))
        }
        VcsCommand::Get {
            provider: VcsProviderArg::Gitlab,
            org,
        } => {
            let answer = api
                .send(
                    &endpoints::get_gitlab_connection(sortie_client::group(&org)),
                    None,
                    &[],
                )
                .await?;
            let view: GitlabConnectionView = decode(answer.body.clone())?;
            emit(&answer.body, out, || gitlab_view_text(&view))
        }
        VcsCommand::Disconnect { provider, org } => {
            let (call, host) = match provider {
                VcsProviderArg::Github => (
                    endpoints::delete_github_connection(sortie_client::group(&org)),
                    "GitHub",
                ),
                VcsProviderArg::Gitlab => (
                    endpoints::delete_gitlab_connection(sortie_client::group(&org)),
                    "GitLab",
                ),
            };
            api.send(&call, None, &[]).await?;
            println!("disconnected {org} from {host}");
            Ok(())
        }
    }
}
