//! `sortie whoami`: the API URL, the subject the API authenticated, the credential's
//! source (by name, never the token), the caller's memberships and the organisations it
//! holds a role in.

use serde::Serialize;
use serde_json::Value;
use sortie_client::endpoints;

use crate::args::{Output, Whoami};
use crate::client::Api;
use crate::exit::CliError;
use crate::output::{details, emit, table};

/// What `whoami` prints.
#[derive(Debug, Serialize)]
struct WhoamiView {
    api_url: String,
    api_url_from: String,
    credential: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    overrides: Vec<String>,
    subject: String,
    issuer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    org: Option<String>,
    memberships: Vec<Value>,
    /// The organisations the API lists for the caller's subject (`organisations`).
    organisations: Vec<String>,
}

/// `whoami [--org ORG]`.
pub async fn whoami(api: &Api, args: Whoami, out: Output) -> Result<(), CliError> {
    let call = endpoints::whoami().query([("org", args.org.as_deref())]);
    let answer: Value = api.get(&call).await?;
    let resolved = api.resolved();
    let view = WhoamiView {
        api_url: api.base_url().to_string(),
        api_url_from: resolved.url_source(),
        credential: resolved.credential(),
        overrides: resolved.overrides(),
        subject: text(&answer["subject"]),
        issuer: text(&answer["issuer"]),
        org: answer["org"].as_str().map(str::to_string),
        memberships: answer["memberships"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        organisations: answer["organisations"]
            .as_array()
            .map(|orgs| {
                orgs.iter()
                    .filter_map(|o| o.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    emit(&view, out, || {
        let mut pairs = vec![
            (
                "api",
                format!("{} (from {})", view.api_url, view.api_url_from),
            ),
            ("subject", view.subject.clone()),
            ("issuer", view.issuer.clone()),
            ("credential", view.credential.clone()),
            ("organisations", organisations_line(&view)),
        ];
        for note in &view.overrides {
            pairs.push(("note", note.clone()));
        }
        let mut text = details(&pairs);
        text.push('\n');
        if view.memberships.is_empty() {
            let scope = match &view.org {
                Some(org) => format!("on the root group or in `{org}`"),
                None => "on the root group (add --org ORG for an organisation's)".to_string(),
            };
            text.push_str(&format!("no memberships {scope}\n"));
        } else {
            text.push_str(&table(
                &["GROUP", "ROLE"],
                view.memberships
                    .iter()
                    .map(|m| {
                        let group = m["group"].as_str().unwrap_or_default();
                        vec![
                            if group.is_empty() {
                                "(root)".to_string()
                            } else {
                                group.to_string()
                            },
                            m["role"].as_str().unwrap_or("-").to_string(),
                        ]
                    })
                    .collect(),
            ));
        }
        text
    })
}

/// The `organisations` line: the organisations named, or none and how to get a role in one.
fn organisations_line(view: &WhoamiView) -> String {
    let root_role = view.memberships.iter().find_map(|m| {
        (m["group"].as_str() == Some("")).then(|| m["role"].as_str().unwrap_or("-").to_string())
    });
    if let Some(role) = root_role {
        // A role on the root group holds in every organisation, listed or not.
        let named = if view.organisations.is_empty() {
            String::new()
        } else {
            format!(": {}", view.organisations.join(", "))
        };
        return format!("every organisation (you are {role} of the root group){named}");
    }
    if view.organisations.is_empty() {
        format!(
            "none: ask an organisation's administrator for a role \
             (sortie members grant --group ORG --role viewer --subject {})",
            view.subject
        )
    } else {
        view.organisations.join(", ")
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("-").to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{organisations_line, WhoamiView};

    fn view(memberships: Vec<serde_json::Value>, organisations: &[&str]) -> WhoamiView {
        WhoamiView {
            api_url: "http://127.0.0.1:8080".into(),
            api_url_from: "SORTIE_API_URL".into(),
            credential: "SORTIE_TOKEN".into(),
            overrides: vec![],
            subject: "alice".into(),
            issuer: "sortie-dev".into(),
            org: None,
            memberships,
            organisations: organisations.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn a_root_owner_is_in_every_organisation_and_a_member_of_none_is_told_how_to_join() {
        let root = view(vec![json!({"group": "", "role": "owner"})], &[]);
        assert_eq!(
            organisations_line(&root),
            "every organisation (you are owner of the root group)"
        );
        let member = view(vec![json!({"group": "acme", "role": "viewer"})], &["acme"]);
        assert_eq!(organisations_line(&member), "acme");
        let nobody = view(vec![], &[]);
        assert!(organisations_line(&nobody).starts_with("none: ask"));
    }
}
