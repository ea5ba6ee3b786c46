//! `sortie vcs connect|get|disconnect github ORG`: an organisation's GitHub App connection.

use serde_json::json;
use sortie_api::routes::vcs::ConnectionView;
use sortie_client::endpoints;

use crate::args::{Output, VcsCommand};
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

/// Runs a `vcs` command.
pub async fn vcs(api: &Api, command: VcsCommand, out: Output) -> Result<(), CliError> {
    match command {
        VcsCommand::Connect {
            provider: _,
            org,
            app_id,
            private_key_file,
            webhook_secret_file,
            github_api_url,
        } => {
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
        VcsCommand::Get { provider: _, org } => {
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
        VcsCommand::Disconnect { provider: _, org } => {
            api.send(
                &endpoints::delete_github_connection(sortie_client::group(&org)),
                None,
                &[],
            )
            .await?;
            println!("disconnected {org} from GitHub");
            Ok(())
        }
    }
}
