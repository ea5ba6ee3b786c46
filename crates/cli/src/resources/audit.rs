//! `sortie audit …`: an organisation's audit trail, and the verification of its chain
//! (done here, from the stored bytes the API returns: the client trusts no verdict of the
//! server's).

use serde_json::json;
use sortie_api::model::{AuditList, AuditRecordView};
use sortie_client::{endpoints, Call};
use sortie_core::audit::{verify, Stored};

use crate::args::{AuditCommand, AuditFilter, Output};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{emit, table, when};

/// The most pages `audit verify` reads (1,000 entries each).
const VERIFY_PAGES: usize = 10_000;

/// One page of `org`'s trail that `filter` picks, from `cursor` on.
fn filtered_page(org: &str, filter: &AuditFilter, cursor: Option<&str>) -> Call {
    endpoints::list_audit(org).query([
        ("limit", Some("1000")),
        ("actor", filter.actor.as_deref()),
        ("action", filter.action.as_deref()),
        ("target", filter.target.as_deref()),
        ("since", filter.since.as_deref()),
        ("until", filter.until.as_deref()),
        ("cursor", cursor),
    ])
}

/// Runs `audit …`.
pub async fn audit(api: &Api, command: AuditCommand, out: Output) -> Result<(), CliError> {
    match command {
        AuditCommand::List { org, filter } => {
            let mut entries: Vec<AuditRecordView> = vec![];
            let mut cursor: Option<String> = None;
            // Filters apply within each page read: read on until `limit` entries or the end.
            for _ in 0..100 {
                let call = filtered_page(&org, &filter, cursor.as_deref());
                let answer = api.send(&call, None, &[]).await?;
                let page: AuditList = decode(answer.body)?;
                entries.extend(page.entries);
                cursor = page.next;
                if cursor.is_none() || entries.len() >= filter.limit as usize {
                    break;
                }
            }
            entries.truncate(filter.limit as usize);
            let body = json!({ "entries": entries });
            emit(&body, out, || {
                if entries.is_empty() {
                    let hint = if filter.action.is_some() {
                        " (an action is the API's operation id: create_environment, approve_job, …)"
                    } else {
                        ""
                    };
                    return format!("no audit entries in {org} match{hint}\n");
                }
                table(
                    &["WHEN", "ACTOR", "ACTION", "TARGET", "SEQ", "ID"],
                    entries
                        .iter()
                        .map(|r| match &r.entry {
                            Some(e) => vec![
                                when(e.at),
                                e.actor.subject.clone(),
                                e.action.clone(),
                                e.target.clone(),
                                r.seal
                                    .as_ref()
                                    .map(|s| s.seq.to_string())
                                    .unwrap_or_else(|| "unsealed".into()),
                                e.id.clone(),
                            ],
                            None => vec![
                                "-".into(),
                                "-".into(),
                                "(unreadable)".into(),
                                "-".into(),
                                "-".into(),
                                "-".into(),
                            ],
                        })
                        .collect(),
                )
            })
        }
        AuditCommand::Verify { org } => {
            let mut links: Vec<Stored> = vec![];
            let mut unsealed = 0usize;
            let mut head = None;
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            loop {
                if pages >= VERIFY_PAGES {
                    return Err(CliError::Other(format!(
                        "the chain of {org} is longer than {} pages; not verified",
                        VERIFY_PAGES
                    )));
                }
                pages += 1;
                let call = endpoints::list_audit(&org).query([
                    ("order", Some("oldest")),
                    ("limit", Some("1000")),
                    ("cursor", cursor.as_deref()),
                ]);
                let answer = api.send(&call, None, &[]).await?;
                let page: AuditList = decode(answer.body)?;
                if head.is_none() {
                    head = page.head.clone();
                }
                for r in page.entries {
                    match r.seal {
                        Some(seal) => links.push(Stored {
                            body: r.stored,
                            seal,
                        }),
                        None => unsealed += 1,
                    }
                }
                cursor = page.next;
                if cursor.is_none() {
                    break;
                }
            }
            // The chain's order is the seals', not the ids'.
            links.sort_by_key(|l| l.seal.seq);
            let result = verify(&org, &links).map_err(|b| b.to_string()).and_then(|v| {
                match &head {
                    Some(h) if h.seq != v.entries || h.hash != v.head => Err(format!(
                        "the chain ends at entry {} but its head is entry {}: entries were removed from its end",
                        v.entries, h.seq
                    )),
                    _ => Ok(v),
                }
            });
            let body = match &result {
                Ok(v) => json!({
                    "org": org, "verified": true, "entries": v.entries, "head": v.head,
                    "unsealed": unsealed,
                }),
                Err(broken) => json!({
                    "org": org, "verified": false, "broken": broken, "unsealed": unsealed,
                }),
            };
            emit(&body, out, || match &result {
                Ok(v) => format!(
                    "the audit chain of {org} verifies: {} sealed entries, head {}{}\n",
                    v.entries,
                    v.head,
                    unsealed_note(unsealed)
                ),
                Err(broken) => format!("the audit chain of {org} is broken: {broken}\n"),
            })?;
            match result {
                Ok(_) => Ok(()),
                Err(broken) => Err(CliError::Other(format!("audit chain broken: {broken}"))),
            }
        }
    }
}

fn unsealed_note(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(
            "; {n} newer entries are not sealed yet (the sweeper seals them within two minutes)"
        ),
    }
}
