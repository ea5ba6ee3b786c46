//! `sortie job plan ID`: a job's plan as data (`GET /v1/jobs/{id}/plan`, every page),
//! shown like `terraform show`: `+ create`, `~ update in place`, `- destroy`,
//! `-/+ replace`, `<= read`, each changed attribute with its value before and after,
//! `# forces replacement` marks, the output changes and `Plan: N to add, N to change,
//! N to destroy.` Colour only on a terminal, and never when `NO_COLOR` is set.

use std::io::IsTerminal;

use sortie_client::endpoints;
use sortie_core::plan::{render, Palette, PlanPage};

use crate::args::Output;
use crate::client::Api;
use crate::exit::CliError;
use crate::output::emit;

/// The most pages read (1,000 resources each): a bound on a runaway cursor.
const MAX_PAGES: usize = 1000;

/// Fetches every page of job `id`'s plan and prints it.
pub async fn show(api: &Api, id: &str, out: Output) -> Result<(), CliError> {
    let mut page: PlanPage = api.get(&endpoints::get_job_plan(id)).await?;
    let mut cursor = page.next_cursor.take();
    for _ in 1..MAX_PAGES {
        let Some(c) = cursor.take() else { break };
        let call = endpoints::get_job_plan(id).query([("cursor", Some(c.as_str()))]);
        let mut next: PlanPage = api.get(&call).await?;
        page.resource_changes.append(&mut next.resource_changes);
        cursor = next.next_cursor;
    }
    emit(&page, out, || render(&page, palette_for_stdout()))
}

/// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn palette_for_stdout() -> Palette {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if std::io::stdout().is_terminal() && !no_color {
        Palette::ANSI
    } else {
        Palette::PLAIN
    }
}
