//! Runners: `create`, `get`, `list`, `update` and `delete` of a runner, `runner check`,
//! and the runner table.

use std::path::PathBuf;

use bytes::Bytes;
use serde_json::Value;
use sortie_api::model::{RunnerCheckReport, RunnerList, RunnerView};
use sortie_client::endpoints;

use super::shared::{changed_meanwhile, if_match, json_word, or_dash, read_document, split_last};
use crate::args::{Output, RunnerCommand};
use crate::client::{decode, Api};
use crate::exit::CliError;
use crate::output::{details, emit, table};

/// `sortie create runner ID -f FILE`.
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
            &endpoints::create_runner(sortie_client::group(group), name),
            Some((content_type, Bytes::from(text))),
            &[],
        )
        .await?;
    show_runners(&answer.body, vec![decode(answer.body.clone())?], out)
}

/// `sortie get runner ID`.
pub(super) async fn get(api: &Api, id: String, out: Output) -> Result<(), CliError> {
    let (group, name) = split_last(&id);
    let answer = api
        .send(
            &endpoints::get_runner(sortie_client::group(group), name),
            None,
            &[],
        )
        .await
        .map_err(|e| runner_hint(e, group))?;
    show_runners(&answer.body, vec![decode(answer.body.clone())?], out)
}

/// `sortie list runners --group GROUP`.
pub(super) async fn list(api: &Api, group: String, out: Output) -> Result<(), CliError> {
    let answer = api
        .send(
            &endpoints::list_runners(sortie_client::group(&group)),
            None,
            &[],
        )
        .await?;
    let list: RunnerList = decode(answer.body.clone())?;
    let empty = list.runners.is_empty();
    show_runners(&answer.body, list.runners, out)?;
    if empty && out == Output::Table {
        eprintln!("{}", no_runners_hint(&group));
    }
    Ok(())
}

/// What an empty `list runners` says: where it looked, and where else to look.
fn no_runners_hint(group: &str) -> String {
    if group.is_empty() {
        "no shared runners (the root group's); a group's own and inherited runners: \
         `sortie list runners --group GROUP`"
            .to_string()
    } else {
        format!(
            "no runners for group `{group}`, own, inherited or shared; add one with \
             `sortie create runner {group}/NAME -f runner.yaml`"
        )
    }
}

/// `sortie update runner ID -f FILE`.
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
            &endpoints::get_runner(sortie_client::group(group), name),
            None,
            &[],
        )
        .await
        .map_err(|e| runner_hint(e, group))?;
    let if_match = if_match(&current);
    let answer = api
        .send_raw(
            &endpoints::update_runner(sortie_client::group(group), name),
            Some((content_type, Bytes::from(text))),
            &if_match,
        )
        .await
        .map_err(|e| {
            changed_meanwhile(
                e,
                &format!("runner `{id}`"),
                &format!("sortie get runner {id}"),
            )
        })?;
    show_runners(&answer.body, vec![decode(answer.body.clone())?], out)
}

/// `sortie delete runner ID`: what was deleted, in words.
pub(super) async fn delete(api: &Api, id: String) -> Result<String, CliError> {
    let (group, name) = split_last(&id);
    api.send(
        &endpoints::delete_runner(sortie_client::group(group), name),
        None,
        &[],
    )
    .await
    .map_err(|e| runner_hint(e, group))?;
    Ok(format!("runner `{id}`"))
}

/// `sortie runner check ID [--org O]`: every check's name, status and detail. A failed
/// check is not a failed command (the check ran): the exit code is 0 and `passed: false`
/// is printed.
pub async fn runner(api: &Api, command: RunnerCommand, out: Output) -> Result<(), CliError> {
    let RunnerCommand::Check { id, org } = command;
    let (group, name) = split_last(&id);
    let call =
        endpoints::check_runner(sortie_client::group(group), name).query([("org", org.as_deref())]);
    let answer = api
        .send(&call, None, &[])
        .await
        .map_err(|e| runner_hint(e, group))?;
    let report: RunnerCheckReport = decode(answer.body.clone())?;
    emit(&answer.body, out, || {
        let rows = report
            .checks
            .iter()
            .map(|c| vec![c.name.clone(), json_word(&c.status), c.detail.clone()])
            .collect();
        let mut text = details(&[
            ("runner", report.runner_id.clone()),
            ("org", report.org.clone()),
            ("passed", report.passed.to_string()),
        ]);
        text.push('\n');
        text.push_str(&table(&["CHECK", "STATUS", "DETAIL"], rows));
        if !report.passed {
            text.push_str(
                "\npassed: false (a launch on this runner would fail; see the checks above)\n",
            );
        }
        text
    })
}

pub(super) fn runner_hint(e: CliError, group: &str) -> CliError {
    match e {
        CliError::NotFound(m) => {
            let list = if group.is_empty() {
                "sortie list runners".to_string()
            } else {
                format!("sortie list runners --group {group}")
            };
            CliError::NotFound(format!("{m}\nhint: see the runners with `{list}`"))
        }
        other => other,
    }
}

/// The clouds a runner's jobs get their own identity in (`aws`, `gcp`, `azure`), or `-`.
fn identity_clouds(identity: Option<&sortie_core::identity::RunnerIdentity>) -> String {
    let Some(identity) = identity else {
        return "-".into();
    };
    let clouds: Vec<&str> = [
        ("aws", identity.aws.is_some()),
        ("gcp", identity.gcp.is_some()),
        ("azure", identity.azure.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    clouds.join(",")
}

pub(super) fn show_runners(
    raw: &Value,
    runners: Vec<RunnerView>,
    out: Output,
) -> Result<(), CliError> {
    emit(raw, out, || {
        let rows = runners
            .iter()
            .map(|r| {
                let place = if r.shared {
                    "shared"
                } else if r.inherited {
                    "inherited"
                } else {
                    "own"
                };
                vec![
                    r.runner.id.to_string(),
                    json_word(&r.runner.spec.runner_configuration),
                    json_word(&r.runner.spec.state_storage_configuration),
                    place.to_string(),
                    r.version.to_string(),
                    identity_clouds(r.runner.spec.identity.as_ref()),
                    or_dash(r.runner.spec.description.clone()),
                ]
            })
            .collect();
        table(
            &[
                "ID",
                "TYPE",
                "STATE",
                "WHERE",
                "VERSION",
                "IDENTITY",
                "DESCRIPTION",
            ],
            rows,
        )
    })
}

#[cfg(test)]
mod hint_tests {
    use super::no_runners_hint;

    #[test]
    fn an_empty_list_says_where_it_looked_and_where_else_to_look() {
        // `list runners` without `--group` printed an empty table and nothing else.
        assert!(no_runners_hint("").contains("sortie list runners --group GROUP"));
        assert!(no_runners_hint("acme/web").contains("sortie create runner acme/web/NAME"));
    }
}
