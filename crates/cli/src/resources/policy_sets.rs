//! Policy sets: `create`, `get`, `list`, `update` and `delete` of a group's set (`GROUP/NAME`,
//! a YAML or JSON file), and the set table.

use std::path::PathBuf;

use bytes::Bytes;
use serde_json::Value;
use sortie_api::model::PolicySetList;
use sortie_client::endpoints;
use sortie_core::policy::PolicySet;

use super::shared::{changed_meanwhile, if_match, or_dash, read_document, shown_group, split_last};
use crate::args::Output;
use crate::client::{decode, Answer, Api};
use crate::exit::CliError;
use crate::output::{emit, table};

/// The version an answer's ETag carries (`"3"` is 3).
fn version_of(answer: &Answer) -> Option<u64> {
    answer.etag.as_deref()?.trim_matches('"').parse().ok()
}

fn hint(e: CliError, group: &str) -> CliError {
    match e {
        CliError::NotFound(m) => CliError::NotFound(format!(
            "{m}\nhint: see the policy sets with `sortie list policy-sets --group {}`",
            if group.is_empty() { "''" } else { group }
        )),
        other => other,
    }
}

/// `sortie create policy-set GROUP/NAME -f FILE`.
pub(super) async fn create(
    api: &Api,
    id: String,
    file: PathBuf,
    out: Output,
) -> Result<(), CliError> {
    let (group, name) = split_last(&id);
    let (content_type, text) = read_document(&file)?;
    let answer = api
        .send_raw(
            &endpoints::create_policy_set(sortie_client::group(group), name),
            Some((content_type, Bytes::from(text))),
            &[],
        )
        .await?;
    show(
        &answer.body,
        vec![(version_of(&answer), decode(answer.body.clone())?)],
        out,
    )
}

/// `sortie get policy-set GROUP/NAME`.
pub(super) async fn get(api: &Api, id: String, out: Output) -> Result<(), CliError> {
    let (group, name) = split_last(&id);
    let answer = api
        .send(
            &endpoints::get_policy_set(sortie_client::group(group), name),
            None,
            &[],
        )
        .await
        .map_err(|e| hint(e, group))?;
    show(
        &answer.body,
        vec![(version_of(&answer), decode(answer.body.clone())?)],
        out,
    )
}

/// `sortie list policy-sets --group GROUP`.
pub(super) async fn list(api: &Api, group: String, out: Output) -> Result<(), CliError> {
    let answer = api
        .send(
            &endpoints::list_policy_sets(sortie_client::group(&group)),
            None,
            &[],
        )
        .await?;
    let list: PolicySetList = decode(answer.body.clone())?;
    show(
        &answer.body,
        list.policy_sets
            .into_iter()
            .map(|e| (Some(e.version), e.set))
            .collect(),
        out,
    )
}

/// `sortie update policy-set GROUP/NAME -f FILE`: read for the ETag, then `PUT` with `If-Match`.
pub(super) async fn update(
    api: &Api,
    id: String,
    file: PathBuf,
    out: Output,
) -> Result<(), CliError> {
    let (group, name) = split_last(&id);
    let (content_type, text) = read_document(&file)?;
    let current = api
        .send(
            &endpoints::get_policy_set(sortie_client::group(group), name),
            None,
            &[],
        )
        .await
        .map_err(|e| hint(e, group))?;
    let answer = api
        .send_raw(
            &endpoints::update_policy_set(sortie_client::group(group), name),
            Some((content_type, Bytes::from(text))),
            &if_match(&current),
        )
        .await
        .map_err(|e| {
            changed_meanwhile(
                e,
                &format!("policy set `{id}`"),
                &format!("sortie get policy-set {id}"),
            )
        })?;
    show(
        &answer.body,
        vec![(version_of(&answer), decode(answer.body.clone())?)],
        out,
    )
}

/// `sortie delete policy-set GROUP/NAME`: what was deleted, in words.
pub(super) async fn delete(api: &Api, id: String) -> Result<String, CliError> {
    let (group, name) = split_last(&id);
    api.send(
        &endpoints::delete_policy_set(sortie_client::group(group), name),
        None,
        &[],
    )
    .await
    .map_err(|e| hint(e, group))?;
    Ok(format!("policy set `{name}` of `{}`", shown_group(group)))
}

fn show(raw: &Value, sets: Vec<(Option<u64>, PolicySet)>, out: Output) -> Result<(), CliError> {
    emit(raw, out, || {
        let rows = sets
            .iter()
            .map(|(version, s)| {
                vec![
                    s.name.clone(),
                    s.enforcement.as_str().to_string(),
                    s.modules.len().to_string(),
                    criteria(s),
                    version.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
                    or_dash(s.description.clone().unwrap_or_default()),
                ]
            })
            .collect();
        table(
            &[
                "NAME",
                "ENFORCEMENT",
                "MODULES",
                "CRITERIA",
                "VERSION",
                "DESCRIPTION",
            ],
            rows,
        )
    })
}

fn criteria(s: &PolicySet) -> String {
    let Some(c) = &s.criteria else {
        return "all".into();
    };
    let mut parts: Vec<String> = Vec::new();
    if !c.env_types.is_empty() {
        parts.push(format!("type in [{}]", c.env_types.join(", ")));
    }
    parts.extend(c.labels.iter().map(|(k, v)| format!("{k}={v}")));
    if parts.is_empty() {
        "all".into()
    } else {
        parts.join(", ")
    }
}
