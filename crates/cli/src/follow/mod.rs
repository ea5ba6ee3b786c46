//! Jobs from the command line: `run plan|apply|destroy ENV` (with `--wait` to follow the
//! job to its end), `jobs list ENV`, and `job get|cancel|approve|discard|logs|outputs ID`
//! (`logs -f` follows).
//!
//! Following polls the job and its log about once a second. On a terminal (stderr), a
//! spinner shows the job's state and elapsed time, suspended while log lines print; with
//! no terminal there is no spinner and no colour. The log goes to standard output with
//! `-o table`, and to standard error with `-o json|yaml`, so standard output stays one
//! parseable document (the final job). A job that ends other than `succeeded` (`failed`,
//! `canceled`, `timed_out`, `discarded`) is [`CliError::JobFailed`] (exit 6). A reviewed
//! job that waits for a person stops the follow with [`CliError::AwaitingApproval`]
//! (exit 8, so a script never takes the wait for the apply's end): its plan summary, then
//! `awaiting approval: sortie job approve <id>` (waiting for a person would hold a CI job
//! for as long as the approval takes). A job reviewed only for the policy gate (approval
//! `auto`) is followed through the gate's approval to its end.
//!
//! `request` builds the job request from the flags, `watch` follows a job to its end and
//! `text` renders jobs as tables.

mod request;
mod text;
mod watch;

use chrono::{DateTime, Utc};
use http::header::HeaderName;
use serde_json::Value;
use sortie_api::model::{DecisionBody, JobView, LogsPage};
use sortie_client::endpoints;
use sortie_core::{ChangeSummary, JobState, ReviewVerdict};

use self::request::job_request;
use self::text::{job_table, submitted_table, text};
use self::watch::{finish, follow};
use crate::args::{JobCommand, Output, Run};
use crate::client::Api;
use crate::exit::CliError;
use crate::output::{change_summary as summary, emit, table, when};

/// `run plan|apply|destroy ENV`: submits the job and prints it; with `--wait`, follows it
/// to its end.
pub async fn run(api: &Api, args: Run, out: Output) -> Result<(), CliError> {
    let body = job_request(&args)?;
    let call = endpoints::submit_job(crate::resources::env_param(&args.env));
    let mut headers = Vec::new();
    if let Some(key) = &args.idempotency_key {
        headers.push((HeaderName::from_static("idempotency-key"), key.as_str()));
    }
    let answer = api.send(&call, Some(&body), &headers).await?;
    let view = job_view(answer.body.clone())?;
    if !args.wait {
        emit(&answer.body, out, || submitted_table(&view))?;
        // On standard error, so `-o json` keeps standard output one document.
        eprintln!("Follow: sortie job logs -f {}", view.job.id);
        return Ok(());
    }
    if out == Output::Table {
        println!("{}", submitted_table(&view).trim_end());
    }
    finish(follow(api, &view, out).await?, out)
}

/// `jobs list ENV`: the environment's newest jobs.
pub async fn jobs_list(api: &Api, env: &str, out: Output) -> Result<(), CliError> {
    let page: Value = api
        .get(&endpoints::list_jobs(crate::resources::env_param(env)).query([("limit", Some("50"))]))
        .await?;
    let jobs = page["jobs"].as_array().cloned().unwrap_or_default();
    let more = page["next"].is_string();
    emit(&page, out, || {
        let rows = jobs
            .iter()
            .map(|j| {
                vec![
                    text(&j["id"]),
                    text(&j["operation"]),
                    text(&j["state"]),
                    text(&j["requested_by"]),
                    j["transitions"][0]["at"]
                        .as_str()
                        .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                        .map(when)
                        .unwrap_or_else(|| "-".into()),
                    serde_json::from_value::<ChangeSummary>(j["summary"].clone())
                        .map(|s| summary(&s))
                        .unwrap_or_else(|_| "-".into()),
                    j["waiting"]["text"].as_str().unwrap_or("-").to_string(),
                ]
            })
            .collect();
        let mut t = table(
            &[
                "ID",
                "OPERATION",
                "STATE",
                "REQUESTED BY",
                "CREATED",
                "SUMMARY",
                "WAITING",
            ],
            rows,
        );
        if jobs.is_empty() {
            t = format!("no jobs in environment `{env}`\n");
        } else if more {
            t.push_str(&format!(
                "(the newest {} shown; `-o json` gives the cursor of the next page)\n",
                jobs.len()
            ));
        }
        t
    })
}

/// `job get|cancel|approve|discard|logs|outputs ID`.
pub async fn job(api: &Api, cmd: JobCommand, out: Output) -> Result<(), CliError> {
    match cmd {
        JobCommand::Get { id } => {
            let view: JobView = api.get(&endpoints::get_job(&id)).await?;
            emit(&view, out, || job_table(&view))
        }
        JobCommand::Cancel { id } => {
            let answer = api.send(&endpoints::cancel_job(&id), None, &[]).await?;
            let view = job_view(answer.body.clone())?;
            emit(&answer.body, out, || {
                let note = if view.job.state.is_terminal() {
                    format!("job {} {}\n", view.job.id, view.job.state)
                } else {
                    format!(
                        "job {}: its task is being stopped; it ends `canceled` (follow it with `sortie job logs -f {}`)\n",
                        view.job.id, view.job.id
                    )
                };
                format!("{}{note}", submitted_table(&view))
            })
        }
        JobCommand::Approve { id, comment } => {
            review(api, &id, ReviewVerdict::Approved, comment, out).await
        }
        JobCommand::Discard { id, comment } => {
            review(api, &id, ReviewVerdict::Discarded, comment, out).await
        }
        JobCommand::Outputs { id } => {
            let answer = api
                .send(&endpoints::get_job_outputs(&id), None, &[])
                .await?;
            crate::resources::show_outputs(&answer.body, out, false)
        }
        JobCommand::Plan { id } => crate::plan::show(api, &id, out).await,
        JobCommand::Logs { id, follow: false } => {
            let mut offset = 0;
            let mut data = String::new();
            let mut more;
            loop {
                let from = offset.to_string();
                let page: LogsPage = api
                    .get(&endpoints::get_job_logs(&id).query([("offset", Some(from.as_str()))]))
                    .await?;
                offset = page.next_offset;
                more = page.more;
                if page.data.is_empty() {
                    break;
                }
                data.push_str(&page.data);
            }
            let page = LogsPage {
                offset: 0,
                next_offset: offset,
                data,
                more,
                live: None,
            };
            emit(&page, out, || page.data.clone())
        }
        JobCommand::Logs { id, follow: true } => {
            let view: JobView = api.get(&endpoints::get_job(&id)).await?;
            finish(follow(api, &view, out).await?, out)
        }
    }
}

/// `job approve|discard ID [--comment TEXT]`: the decision, then the job as it is now.
async fn review(
    api: &Api,
    id: &str,
    verdict: ReviewVerdict,
    comment: Option<String>,
    out: Output,
) -> Result<(), CliError> {
    let (verb, call) = match verdict {
        ReviewVerdict::Approved => ("approve", endpoints::approve_job(id)),
        ReviewVerdict::Discarded => ("discard", endpoints::discard_job(id)),
    };
    let body = serde_json::to_value(DecisionBody { comment })
        .map_err(|e| CliError::Other(format!("could not encode the decision: {e}")))?;
    let answer = api
        .send(&call, Some(&body), &[])
        .await
        .map_err(|e| match e {
            // The API answers 404 too when the caller may not deploy to the environment;
            // a mistyped id gets the API's did-you-mean (jobs awaiting approval among them).
            CliError::NotFound(m) => CliError::NotFound(format!(
                "{m}\nhint: if `{id}` is the job you meant, to {verb} it you need the deployer role on its environment's group"
            )),
            other => other,
        })?;
    let view = job_view(answer.body.clone())?;
    emit(&answer.body, out, || {
        let id = &view.job.id;
        let note = match verdict {
            // A pull request's apply waits, approved, for its requirements to be read again.
            ReviewVerdict::Approved if view.job.state == JobState::AwaitingApproval => format!(
                "job {id} approved: its pull request's requirements are checked again, then the saved plan is applied (follow it with `sortie job logs -f {id}`)\n"
            ),
            ReviewVerdict::Approved => format!(
                "job {id} approved: {} to apply the saved plan (follow it with `sortie job logs -f {id}`)\n",
                view.job.state
            ),
            ReviewVerdict::Discarded => format!(
                "job {id} {}: nothing was applied, and {} is released\n",
                view.job.state, view.job.environment
            ),
        };
        format!("{}{note}", submitted_table(&view))
    })
}

fn job_view(body: Value) -> Result<JobView, CliError> {
    serde_json::from_value(body)
        .map_err(|e| CliError::Other(format!("the API answered a job this CLI cannot read: {e}")))
}
