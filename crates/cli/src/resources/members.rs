//! `sortie members grant|revoke|list` and the membership table.

use serde_json::{json, Value};
use sortie_api::model::MembershipList;
use sortie_client::endpoints;
use sortie_core::Grantee;
use sortie_store::MembershipRecord;

use super::shared::{json_word, shown_group};
use crate::args::{MembersCommand, Output};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{emit, print_text, table};

/// `sortie members grant|revoke|list`.
pub async fn members(api: &Api, command: MembersCommand, out: Output) -> Result<(), CliError> {
    match command {
        MembersCommand::Grant {
            group,
            role,
            subject,
            claims,
            issuer,
        } => {
            let grantee = match (subject, claims.as_slice()) {
                (Some(subject), []) => Grantee::Subject {
                    subject,
                    issuer: issuer.clone(),
                },
                (None, [claim]) => {
                    let (claim, pattern) = claim.split_once('=').ok_or_else(|| {
                        CliError::Usage(format!(
                            "--claim `{claim}` is not KEY=PATTERN (e.g. sub=repo:acme/infra:*)"
                        ))
                    })?;
                    Grantee::ClaimPattern {
                        claim: claim.to_string(),
                        pattern: pattern.to_string(),
                        issuer: issuer.clone(),
                    }
                }
                _ => {
                    return Err(CliError::Usage(
                        "give either --subject SUB or one --claim KEY=PATTERN".into(),
                    ))
                }
            };
            let body = json!({"role": role, "grantee": grantee});
            let raw: Value = api
                .post(
                    &endpoints::grant_membership(sortie_client::group(&group)),
                    &body,
                )
                .await?;
            let record: MembershipRecord = decode(raw.clone())?;
            emit(&raw, out, || membership_table(&[record]))
        }
        MembersCommand::Revoke { group, id } => {
            api.send(
                &endpoints::revoke_membership(sortie_client::group(&group), &id),
                None,
                &[],
            )
            .await
            .map_err(|e| match e {
                CliError::NotFound(m) => CliError::NotFound(format!(
                    "{m}\nhint: see the memberships with `sortie members list --group {group}`"
                )),
                other => other,
            })?;
            if out == Output::Table {
                print_text(&format!(
                    "revoked membership `{id}` on `{}`",
                    shown_group(&group)
                ));
            }
            Ok(())
        }
        MembersCommand::List { group } => {
            let answer = api
                .send(
                    &endpoints::list_memberships(sortie_client::group(&group)),
                    None,
                    &[],
                )
                .await?;
            let list: MembershipList = decode(answer.body.clone())?;
            emit(&answer.body, out, || membership_table(&list.memberships))
        }
    }
}

pub(super) fn grantee_text(g: &Grantee) -> String {
    let issuer = |i: &Option<String>| {
        i.as_ref()
            .map(|i| format!(" (issuer {i})"))
            .unwrap_or_default()
    };
    match g {
        Grantee::Subject { subject, issuer: i } => format!("subject {subject}{}", issuer(i)),
        Grantee::ClaimPattern {
            claim,
            pattern,
            issuer: i,
        } => format!("claim {claim} ~ {pattern}{}", issuer(i)),
    }
}

pub(super) fn membership_table(records: &[MembershipRecord]) -> String {
    let rows = records
        .iter()
        .map(|m| {
            vec![
                m.id.clone(),
                m.membership.group.to_string(),
                json_word(&m.membership.role),
                grantee_text(&m.membership.grantee),
                m.granted_by.clone(),
            ]
        })
        .collect();
    table(&["ID", "GROUP", "ROLE", "GRANTEE", "GRANTED BY"], rows)
}
