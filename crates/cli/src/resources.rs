//! The resource verbs: create, get, list, update and delete of runners, runner rules and
//! environments (with their approval, drift and tool settings); `env refresh-runner`,
//! `env outputs`, `members` and `runner check`.
//!
//! Tables are built from the API's own types (`sortie_api::model`); `-o json|yaml` prints
//! the API's JSON as it was received.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use bytes::Bytes;
use http::Method;
use serde_json::{json, Map, Value};
use sortie_api::model::{
    domain, EnvironmentCreate, EnvironmentCreated, EnvironmentList, EnvironmentPatch,
    EnvironmentView, MembershipList, OutputsView, RefreshRunnerAnswer, ResolutionAnswer, RuleList,
    RunnerCheckReport, RunnerList, RunnerView,
};
use sortie_core::drift::DriftStatus;
use sortie_core::environment::APPROVAL_TIMEOUT_DEFAULT_SECONDS;
use sortie_core::{Considered, Criteria, Grantee, RunnerRule, Verdict};
use sortie_store::MembershipRecord;

use crate::args::{
    ApprovalArg, Clearable, CreateResource, DeleteResource, EnvCommand, GetResource, ListResource,
    MembersCommand, Output, RemediationArg, RunnerCommand, ToolArg, UpdateResource,
};
use crate::client::{decode, Answer, Api};
use crate::exit::CliError;
use crate::output::{change_summary, details, emit, print_text, table, when};

/// `sortie create ...`.
pub async fn create(api: &Api, resource: CreateResource, out: Output) -> Result<(), CliError> {
    match resource {
        CreateResource::Runner { id, file } => {
            let (group, name) = split_last(&id);
            let (content_type, text) = read_document(&file)?;
            let answer = api
                .send_raw(
                    Method::POST,
                    &runner_url(group, name),
                    Some((content_type, Bytes::from(text))),
                    &[],
                )
                .await?;
            show_runners(&answer.body, vec![decode(answer.body.clone())?], out)
        }
        CreateResource::RunnerRule { set, file } => {
            let mut doc = match &file {
                Some(path) => {
                    let (_, text) = read_document(path)?;
                    serde_norway::from_str::<Value>(&text).map_err(|e| {
                        CliError::Usage(format!(
                            "{} is not a YAML or JSON document: {e}",
                            path.display()
                        ))
                    })?
                }
                None => Value::Object(Map::new()),
            };
            if !doc.is_object() {
                return Err(CliError::Usage(
                    "a rule file must be a mapping (id, scope, runner_id, criteria, priority)"
                        .into(),
                ));
            }
            for item in &set {
                apply_set(&mut doc, item)?;
            }
            let scope = match &doc["scope"] {
                Value::String(s) => s.clone(),
                Value::Null => {
                    return Err(CliError::Usage(
                        "a rule needs its scope: --set scope=GROUP (the group it applies in)"
                            .into(),
                    ))
                }
                _ => {
                    return Err(CliError::Usage(
                        "the rule's scope must be a group path".into(),
                    ))
                }
            };
            let answer = api
                .send(
                    Method::POST,
                    &format!("{}/rules", group_url(&scope)),
                    Some(&doc),
                    &[],
                )
                .await?;
            show_rules(&answer.body, vec![decode(answer.body.clone())?], out)
        }
        CreateResource::Env {
            path,
            env_type,
            labels,
            tags,
            settings,
        } => {
            let (group, name) = split_env(&path)?;
            let settings_given = !settings.is_empty();
            let body = EnvironmentCreate {
                name: name.to_string(),
                env_type,
                labels: (!labels.is_empty())
                    .then(|| parse_pairs("--label", &labels))
                    .transpose()?,
                tags: (!tags.is_empty()).then(|| tags.into_iter().collect()),
                approval: settings.approval.map(approval),
                approval_timeout_seconds: to_set("--approval-timeout", settings.approval_timeout)?,
                four_eyes: settings.four_eyes,
                drift_schedule: to_set("--drift-schedule", settings.drift_schedule)?,
                drift_remediation: settings.drift_remediation.map(remediation),
                tool: to_set("--tool", settings.tool)?.map(tool),
                tool_version: to_set("--tool-version", settings.tool_version)?,
            };
            let body = serde_json::to_value(&body)
                .map_err(|e| CliError::Other(format!("could not encode the environment: {e}")))?;
            let answer = api
                .send(
                    Method::POST,
                    &format!("{}/environments", group_url(group)),
                    Some(&body),
                    &[],
                )
                .await?;
            let created: EnvironmentCreated = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                let mut text = env_table(std::slice::from_ref(&created.environment));
                text.push('\n');
                text.push_str(&resolution_details(&created.resolution));
                // The settings only when some were given, so a plain environment reads
                // as before.
                if !settings_given {
                    return text;
                }
                text.push('\n');
                text.push_str(&details(&settings_details(&created.environment)));
                text
            })
        }
    }
}

/// `sortie get ...`.
pub async fn get(api: &Api, resource: GetResource, out: Output) -> Result<(), CliError> {
    match resource {
        GetResource::Runner { id } => {
            let (group, name) = split_last(&id);
            let answer = api
                .send(Method::GET, &runner_url(group, name), None, &[])
                .await
                .map_err(|e| runner_hint(e, group))?;
            show_runners(&answer.body, vec![decode(answer.body.clone())?], out)
        }
        GetResource::RunnerRule { id } => {
            let (scope, rule) = split_last(&id);
            let answer = api
                .send(Method::GET, &rule_url(scope, rule), None, &[])
                .await
                .map_err(|e| rule_hint(e, scope))?;
            show_rules(&answer.body, vec![decode(answer.body.clone())?], out)
        }
        GetResource::Env { path } => {
            let (group, _) = split_env(&path)?;
            let answer = api
                .send(Method::GET, &env_url(&path), None, &[])
                .await
                .map_err(|e| env_hint(e, group))?;
            let env: EnvironmentView = decode(answer.body.clone())?;
            emit(&answer.body, out, || env_text(&env))
        }
    }
}

/// `sortie list ...`.
pub async fn list(api: &Api, resource: ListResource, out: Output) -> Result<(), CliError> {
    match resource {
        ListResource::Runners { group } => {
            let answer = api
                .send(
                    Method::GET,
                    &format!("{}/runners", group_url(&group)),
                    None,
                    &[],
                )
                .await?;
            let list: RunnerList = decode(answer.body.clone())?;
            show_runners(&answer.body, list.runners, out)
        }
        ListResource::RunnerRules { scope } => {
            let answer = api
                .send(
                    Method::GET,
                    &format!("{}/rules", group_url(&scope)),
                    None,
                    &[],
                )
                .await?;
            let list: RuleList = decode(answer.body.clone())?;
            show_rules(&answer.body, list.rules, out)
        }
        ListResource::Envs { group, recursive } => {
            // Without --recursive, the group's own are shown and the API counts the ones below.
            let query = if recursive { "?recursive=true" } else { "" };
            let answer = api
                .send(
                    Method::GET,
                    &format!("{}/environments{query}", group_url(&group)),
                    None,
                    &[],
                )
                .await?;
            let list: EnvironmentList = decode(answer.body.clone())?;
            emit(&answer.body, out, || {
                let mut t = if list.environments.is_empty() && !recursive {
                    format!("no environments in group `{}`\n", shown_group(&group))
                } else {
                    env_table(&list.environments)
                };
                if let Some(n) = list.in_subgroups.filter(|n| *n > 0) {
                    t.push_str(&format!(
                        "({n} environment{} in subgroups not shown; use --recursive)\n",
                        if n == 1 { "" } else { "s" }
                    ));
                }
                if list.truncated {
                    t.push_str(&format!(
                        "(only the first {} environments by path are shown: list a subgroup)\n",
                        list.environments.len()
                    ));
                }
                t
            })
        }
    }
}

/// `sortie update ...`: read the resource for its ETag, then change it with `If-Match`,
/// so a change made by someone else in between is a conflict, never overwritten.
pub async fn update(api: &Api, resource: UpdateResource, out: Output) -> Result<(), CliError> {
    match resource {
        UpdateResource::Runner { id, file } => {
            let (group, name) = split_last(&id);
            let (content_type, text) = read_document(&file)?;
            let url = runner_url(group, name);
            let current = api
                .send(Method::GET, &url, None, &[])
                .await
                .map_err(|e| runner_hint(e, group))?;
            let if_match = if_match(&current);
            let answer = api
                .send_raw(
                    Method::PUT,
                    &url,
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
        UpdateResource::Env {
            path,
            env_type,
            labels,
            tags,
            settings,
        } => {
            let (group, _) = split_env(&path)?;
            if env_type.is_none() && labels.is_empty() && tags.is_empty() && settings.is_empty() {
                return Err(CliError::Usage(
                    "nothing to change: give --type, --label KEY=VALUE, --tag or a setting (--approval, --approval-timeout, --four-eyes, --drift-schedule, --drift-remediation, --tool, --tool-version)".into(),
                ));
            }
            // A cleared setting is sent as `null`, which the patch type cannot say.
            let mut cleared = Vec::new();
            let approval_timeout_seconds = or_clear(
                &mut cleared,
                "approval_timeout_seconds",
                settings.approval_timeout,
            );
            let drift_schedule = or_clear(&mut cleared, "drift_schedule", settings.drift_schedule);
            let tool = or_clear(&mut cleared, "tool", settings.tool).map(tool);
            let tool_version = or_clear(&mut cleared, "tool_version", settings.tool_version);
            let patch = EnvironmentPatch {
                env_type,
                labels: (!labels.is_empty())
                    .then(|| parse_pairs("--label", &labels))
                    .transpose()?,
                tags: (!tags.is_empty()).then(|| tags.into_iter().collect()),
                approval: settings.approval.map(approval),
                approval_timeout_seconds,
                four_eyes: settings.four_eyes,
                drift_schedule,
                drift_remediation: settings.drift_remediation.map(remediation),
                tool,
                tool_version,
            };
            let mut body = serde_json::to_value(&patch)
                .map_err(|e| CliError::Other(format!("could not encode the change: {e}")))?;
            if let Some(fields) = body.as_object_mut() {
                for field in cleared {
                    fields.insert(field.to_string(), Value::Null);
                }
            }
            let url = env_url(&path);
            let current = api
                .send(Method::GET, &url, None, &[])
                .await
                .map_err(|e| env_hint(e, group))?;
            let if_match = if_match(&current);
            let answer = api
                .send(Method::PATCH, &url, Some(&body), &if_match)
                .await
                .map_err(|e| {
                    changed_meanwhile(
                        e,
                        &format!("environment `{path}`"),
                        &format!("sortie get env {path}"),
                    )
                })?;
            let env: EnvironmentView = decode(answer.body.clone())?;
            emit(&answer.body, out, || env_text(&env))
        }
    }
}

/// `sortie delete ...`.
pub async fn delete(api: &Api, resource: DeleteResource, out: Output) -> Result<(), CliError> {
    let what = match resource {
        DeleteResource::Runner { id } => {
            let (group, name) = split_last(&id);
            api.send(Method::DELETE, &runner_url(group, name), None, &[])
                .await
                .map_err(|e| runner_hint(e, group))?;
            format!("runner `{id}`")
        }
        DeleteResource::RunnerRule { id } => {
            let (scope, rule) = split_last(&id);
            api.send(Method::DELETE, &rule_url(scope, rule), None, &[])
                .await
                .map_err(|e| rule_hint(e, scope))?;
            format!("runner rule `{rule}` at `{}`", shown_group(scope))
        }
        DeleteResource::Env { path } => {
            let (group, _) = split_env(&path)?;
            api.send(Method::DELETE, &env_url(&path), None, &[])
                .await
                .map_err(|e| env_hint(e, group))?;
            format!("environment `{path}`")
        }
    };
    // The API answers 204 with no body: JSON and YAML print nothing, scripts read the code.
    if out == Output::Table {
        print_text(&format!("deleted {what}"));
    }
    Ok(())
}

/// `sortie env refresh-runner PATH [--dry-run]`: the previous and the chosen runner, the
/// winning rule and why, and every rule's fate (`explain=full`, every page). `sortie env
/// outputs PATH`: the outputs of its latest successful apply.
pub async fn env(api: &Api, command: EnvCommand, out: Output) -> Result<(), CliError> {
    let (path, dry_run) = match command {
        EnvCommand::RefreshRunner { path, dry_run } => (path, dry_run),
        EnvCommand::Outputs { path } => {
            split_env(&path)?;
            let answer = api
                .send(
                    Method::GET,
                    &format!("{}/-/outputs", env_url(&path)),
                    None,
                    &[],
                )
                .await?;
            return show_outputs(&answer.body, out, true);
        }
    };
    let (group, _) = split_env(&path)?;
    let base = format!("{}/-/refresh-runner?explain=full", env_url(&path));
    let url = if dry_run {
        format!("{base}&dry_run=true")
    } else {
        base.clone()
    };
    let answer = api
        .send(Method::POST, &url, None, &[])
        .await
        .map_err(|e| env_hint(e, group))?;
    let mut body = answer.body;
    let mut refreshed: RefreshRunnerAnswer = decode(body.clone())?;
    // Further pages of the explanation are read without changing anything again.
    while let Some(offset) = refreshed.resolution.explanation_next {
        let page = api
            .send(
                Method::POST,
                &format!("{base}&dry_run=true&explain_offset={offset}"),
                None,
                &[],
            )
            .await?;
        let page: RefreshRunnerAnswer = decode(page.body)?;
        let more = page.resolution.explanation.unwrap_or_default();
        if more.is_empty() {
            break;
        }
        refreshed
            .resolution
            .explanation
            .get_or_insert_with(Vec::new)
            .extend(more);
        refreshed.resolution.explanation_next = page.resolution.explanation_next;
    }
    if let Some(resolution) = body.get_mut("resolution") {
        if let Some(explanation) = &refreshed.resolution.explanation {
            resolution["explanation"] = serde_json::to_value(explanation)
                .map_err(|e| CliError::Other(format!("could not encode: {e}")))?;
        }
        if let Some(r) = resolution.as_object_mut() {
            r.remove("explanation_next");
        }
    }
    emit(&body, out, || refresh_text(&path, &refreshed))
}

/// `sortie members grant|revoke|list`.
pub async fn members(api: &Api, command: MembersCommand, out: Output) -> Result<(), CliError> {
    match command {
        MembersCommand::Grant {
            group,
            role,
            subject,
            claims,
        } => {
            let grantee = match (subject, claims.as_slice()) {
                (Some(subject), []) => Grantee::Subject {
                    subject,
                    issuer: None,
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
                        issuer: None,
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
                .post(&format!("{}/memberships", group_url(&group)), &body)
                .await?;
            let record: MembershipRecord = decode(raw.clone())?;
            emit(&raw, out, || membership_table(&[record]))
        }
        MembersCommand::Revoke { group, id } => {
            api.send(
                Method::DELETE,
                &format!("{}/memberships/{}", group_url(&group), enc(&id)),
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
                    Method::GET,
                    &format!("{}/memberships", group_url(&group)),
                    None,
                    &[],
                )
                .await?;
            let list: MembershipList = decode(answer.body.clone())?;
            emit(&answer.body, out, || membership_table(&list.memberships))
        }
    }
}

/// `sortie runner check ID [--org O]`: every check's name, status and detail. A failed
/// check is not a failed command (the check ran): the exit code is 0 and `passed: false`
/// is printed.
pub async fn runner(api: &Api, command: RunnerCommand, out: Output) -> Result<(), CliError> {
    let RunnerCommand::Check { id, org } = command;
    let (group, name) = split_last(&id);
    let mut url = format!("{}/check", runner_url(group, name));
    if let Some(org) = &org {
        url.push_str(&format!("?org={}", enc(org)));
    }
    let answer = api
        .send(Method::POST, &url, None, &[])
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

// ---- Paths and URLs ----

/// `GROUP/NAME` split at its last `/`; a single segment is `("", NAME)` (the root group).
fn split_last(id: &str) -> (&str, &str) {
    id.rsplit_once('/').unwrap_or(("", id))
}

/// An environment path, `GROUP/NAME`: it never lives in the root group.
fn split_env(path: &str) -> Result<(&str, &str), CliError> {
    match path.rsplit_once('/') {
        Some((group, name)) if !group.is_empty() && !name.is_empty() => Ok((group, name)),
        _ => Err(CliError::Usage(format!(
            "`{path}` is not an environment path: it is GROUP/NAME, such as acme/payments/prod"
        ))),
    }
}

/// Percent-encodes one path segment (every byte but `A-Z a-z 0-9 - . _ ~`), so a group
/// or environment path becomes one segment (`acme%2Fpayments`): the API's canonical form.
pub(crate) fn enc(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `/v1/groups/<group>/-`, the group percent-encoded as one segment (the form a
/// generated client sends); the root group's parameter is `-`: `/v1/groups/-/-`.
fn group_url(group: &str) -> String {
    if group.is_empty() {
        "/v1/groups/-/-".into()
    } else {
        format!("/v1/groups/{}/-", enc(group))
    }
}

fn runner_url(group: &str, name: &str) -> String {
    format!("{}/runners/{}", group_url(group), enc(name))
}

fn rule_url(scope: &str, id: &str) -> String {
    format!("{}/rules/{}", group_url(scope), enc(id))
}

/// `/v1/environments/<path>`, the path percent-encoded as one segment.
pub(crate) fn env_url(path: &str) -> String {
    format!("/v1/environments/{}", enc(path.trim_matches('/')))
}

fn shown_group(group: &str) -> &str {
    if group.is_empty() {
        "(root)"
    } else {
        group
    }
}

// ---- Errors with what to do next ----

fn runner_hint(e: CliError, group: &str) -> CliError {
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

fn rule_hint(e: CliError, scope: &str) -> CliError {
    match e {
        CliError::NotFound(m) => CliError::NotFound(format!(
            "{m}\nhint: see the rules with `sortie list runner-rules --scope {}`",
            if scope.is_empty() { "''" } else { scope }
        )),
        other => other,
    }
}

fn env_hint(e: CliError, group: &str) -> CliError {
    match e {
        CliError::NotFound(m) => CliError::NotFound(format!(
            "{m}\nhint: see the environments with `sortie list envs --group {group}`"
        )),
        other => other,
    }
}

/// A 412 after our own read (the only conflict a PUT of a runner or a PATCH of an
/// environment answers): someone changed the resource in between.
fn changed_meanwhile(e: CliError, what: &str, read_again: &str) -> CliError {
    match e {
        CliError::Conflict(m) => {
            CliError::Conflict(format!(
                "{what} was changed by someone else after it was read ({m}); read it again with `{read_again}` and retry"
            ))
        }
        other => other,
    }
}

fn if_match(current: &Answer) -> Vec<(&str, &str)> {
    current
        .etag
        .as_deref()
        .map(|etag| vec![("If-Match", etag)])
        .unwrap_or_default()
}

// ---- Input ----

/// A YAML or JSON file (`-` is standard input) and the content type it is sent with.
fn read_document(path: &Path) -> Result<(&'static str, String), CliError> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("could not read standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("could not read {}: {e}", path.display())))?
    };
    let content_type = if serde_json::from_str::<Value>(&text).is_ok() {
        "application/json"
    } else {
        yaml_syntax(path, &text)?;
        "application/yaml"
    };
    Ok((content_type, text))
}

/// A YAML syntax error names the file, line and column (the API would name a field).
fn yaml_syntax(path: &Path, text: &str) -> Result<(), CliError> {
    match serde_norway::from_str::<serde_norway::Value>(text) {
        Ok(_) => Ok(()),
        Err(e) => {
            let problem = e.to_string();
            let problem = problem
                .split(" at line ")
                .next()
                .unwrap_or(&problem)
                .to_string();
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            Err(CliError::Usage(format!(
                "{}: not valid YAML or JSON{at}: {problem}",
                path.display()
            )))
        }
    }
}

/// `KEY=VALUE` pairs (labels).
fn parse_pairs(flag: &str, pairs: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!("{flag} `{p}` is not KEY=VALUE"))),
        })
        .collect()
}

/// Keys whose values are always strings, whatever they look like (`--set id=123`).
fn string_key(key: &str) -> bool {
    matches!(
        key,
        "id" | "scope" | "runner_id" | "criteria.env_type" | "criteria.env_path"
    ) || key.starts_with("criteria.labels.")
}

/// Applies one `--set key.path=value`: dotted keys nest; the value is JSON when it parses
/// (numbers, booleans, lists), else a string; `criteria.tags=a,b` is a list.
fn apply_set(doc: &mut Value, item: &str) -> Result<(), CliError> {
    let malformed = |why: &str| {
        CliError::Usage(format!(
            "--set `{item}`: {why} (expected KEY=VALUE, such as criteria.env_type=production)"
        ))
    };
    let (key, raw) = item.split_once('=').ok_or_else(|| malformed("no `=`"))?;
    let segments: Vec<&str> = key.split('.').collect();
    if segments.iter().any(|s| s.trim().is_empty()) {
        return Err(malformed("the key has an empty part"));
    }
    let value = if string_key(key) {
        Value::String(raw.to_string())
    } else {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::String(_)) | Err(_) if key == "criteria.tags" => Value::Array(
                raw.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(|t| Value::String(t.to_string()))
                    .collect(),
            ),
            Ok(v) => v,
            Err(_) => Value::String(raw.to_string()),
        }
    };
    let (last, parents) = segments
        .split_last()
        .expect("split gives one segment at least");
    let mut node = doc;
    let mut walked = String::new();
    for segment in parents {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(segment);
        let map = node
            .as_object_mut()
            .ok_or_else(|| malformed(&format!("`{walked}` is a value, not a mapping")))?;
        node = map
            .entry(segment.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !node.is_object() {
            return Err(malformed(&format!("`{walked}` is already set to a value")));
        }
    }
    node.as_object_mut()
        .ok_or_else(|| malformed("its parent is not a mapping"))?
        .insert(last.to_string(), value);
    Ok(())
}

/// A setting of `create env`: an empty value, which clears, has nothing to clear there.
fn to_set<T>(flag: &str, value: Option<Clearable<T>>) -> Result<Option<T>, CliError> {
    match value {
        Some(Clearable::Set(v)) => Ok(Some(v)),
        Some(Clearable::Clear) => Err(CliError::Usage(format!(
            "{flag} '': an empty value clears a setting, which only `sortie update env` does; leave the flag out for the default"
        ))),
        None => Ok(None),
    }
}

/// A setting of `update env`: its new value, or `None` with `field` noted in `cleared`
/// (to be sent as `null`) when it is cleared.
fn or_clear<T>(
    cleared: &mut Vec<&'static str>,
    field: &'static str,
    value: Option<Clearable<T>>,
) -> Option<T> {
    match value {
        Some(Clearable::Set(v)) => Some(v),
        Some(Clearable::Clear) => {
            cleared.push(field);
            None
        }
        None => None,
    }
}

fn approval(a: ApprovalArg) -> domain::Approval {
    match a {
        ApprovalArg::Auto => domain::Approval::Auto,
        ApprovalArg::Required => domain::Approval::Required,
    }
}

fn remediation(r: RemediationArg) -> domain::DriftRemediation {
    match r {
        RemediationArg::Off => domain::DriftRemediation::Off,
        RemediationArg::Apply => domain::DriftRemediation::Apply,
    }
}

fn tool(t: ToolArg) -> domain::ToolName {
    match t {
        ToolArg::Terraform => domain::ToolName::Terraform,
        ToolArg::Opentofu => domain::ToolName::Opentofu,
    }
}

// ---- Tables ----

/// The outputs of an apply: `NAME  VALUE`, each value as compact JSON, a sensitive one as
/// `(sensitive)`. With `of_env`, a last line names the apply they come from.
pub fn show_outputs(raw: &Value, out: Output, of_env: bool) -> Result<(), CliError> {
    let view: OutputsView = decode(raw.clone())?;
    emit(raw, out, || outputs_text(&view, of_env))
}

fn outputs_text(view: &OutputsView, of_env: bool) -> String {
    if view.outputs.is_empty() {
        return format!(
            "no outputs (apply job {} on {})\n",
            view.job_id, view.environment
        );
    }
    let rows = view
        .outputs
        .iter()
        .map(|(name, o)| {
            let value = if o.sensitive {
                "(sensitive)".to_string()
            } else {
                o.value
                    .as_ref()
                    .map_or_else(|| "null".to_string(), Value::to_string)
            };
            vec![name.clone(), value]
        })
        .collect();
    let mut text = table(&["NAME", "VALUE"], rows);
    if of_env {
        text.push_str(&format!(
            "(from apply job {}, the latest successful apply of {})\n",
            view.job_id, view.environment
        ));
    }
    text
}

/// One environment: its row, then its settings and what drift detection and applies
/// recorded.
fn env_text(e: &EnvironmentView) -> String {
    let mut text = env_table(std::slice::from_ref(e));
    text.push('\n');
    text.push_str(&details(&settings_details(e)));
    text
}

/// An environment's approval, drift and tool settings, and what they recorded.
fn settings_details(e: &EnvironmentView) -> Vec<(&'static str, String)> {
    let r = &e.record;
    let s = &r.environment.settings;
    let timeout = match s.approval_timeout_seconds {
        Some(t) => span(t),
        None => format!("{} (the default)", span(APPROVAL_TIMEOUT_DEFAULT_SECONDS)),
    };
    let runners = || "- (the runner's)".to_string();
    vec![
        ("approval", s.approval.as_str().to_string()),
        ("approval timeout", timeout),
        (
            "four eyes",
            if s.four_eyes { "yes" } else { "no" }.to_string(),
        ),
        (
            "drift schedule",
            s.drift_schedule
                .as_ref()
                .map_or_else(|| "-".to_string(), |c| format!("{c} (UTC)")),
        ),
        ("drift remediation", json_word(&s.drift_remediation)),
        (
            "next drift check",
            r.next_drift_at.map_or_else(|| "-".to_string(), when),
        ),
        (
            "drift",
            r.drift
                .as_ref()
                .map_or_else(|| "- (not checked yet)".to_string(), drift_text),
        ),
        (
            "last skipped check",
            r.drift_skipped.as_ref().map_or_else(
                || "-".to_string(),
                |k| format!("{}: {}", when(k.at), k.reason),
            ),
        ),
        (
            "last apply",
            r.last_apply.as_ref().map_or_else(
                || "-".to_string(),
                |a| format!("job {} at {}", a.job_id, when(a.at)),
            ),
        ),
        (
            "tool",
            s.tool.map_or_else(runners, |t| t.as_str().to_string()),
        ),
        (
            "tool version",
            s.tool_version.clone().unwrap_or_else(runners),
        ),
    ]
}

/// `drifted (+0 ~1 -0) at <time> by job <id>`, with the reason of an `error` and the
/// remediating apply when there is one.
fn drift_text(d: &DriftStatus) -> String {
    let mut text = d.status.as_str().to_string();
    if let Some(s) = &d.summary {
        text.push_str(&format!(" ({})", change_summary(s)));
    }
    text.push_str(&format!(" at {} by job {}", when(d.checked_at), d.job_id));
    if let Some(reason) = &d.reason {
        text.push_str(&format!(": {reason}"));
    }
    if let Some(job) = &d.remediation_job_id {
        text.push_str(&format!("; remediated by apply job {job}"));
    }
    text
}

/// Seconds in the largest whole unit: `86400` is `24h`, `5400` is `90m`.
fn span(seconds: u32) -> String {
    match seconds {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A value's serde name (`passed`, `ecs-fargate`), for enums serialised as strings or
/// tagged with `type`.
fn json_word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(Value::Object(o)) => o
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string(),
        _ => "?".into(),
    }
}

fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

fn show_runners(raw: &Value, runners: Vec<RunnerView>, out: Output) -> Result<(), CliError> {
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
                    or_dash(r.runner.spec.description.clone()),
                ]
            })
            .collect();
        table(
            &["ID", "TYPE", "STATE", "WHERE", "VERSION", "DESCRIPTION"],
            rows,
        )
    })
}

fn criteria_text(c: &Criteria) -> String {
    let mut parts = vec![];
    if let Some(t) = &c.env_type {
        parts.push(format!("env_type={t}"));
    }
    if let Some(p) = &c.env_path {
        parts.push(format!("env_path={p}"));
    }
    for (k, v) in &c.labels {
        parts.push(format!("label {k}={v}"));
    }
    for t in &c.tags {
        parts.push(format!("tag {t}"));
    }
    or_dash(parts.join(", "))
}

fn show_rules(raw: &Value, rules: Vec<RunnerRule>, out: Output) -> Result<(), CliError> {
    emit(raw, out, || {
        let rows = rules
            .iter()
            .map(|r| {
                vec![
                    r.scope.to_string(),
                    r.id.clone(),
                    r.runner_id.to_string(),
                    r.priority.to_string(),
                    criteria_text(&r.criteria),
                ]
            })
            .collect();
        table(&["SCOPE", "ID", "RUNNER", "PRIORITY", "CRITERIA"], rows)
    })
}

fn labels_text(labels: &BTreeMap<String, String>) -> String {
    or_dash(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn tags_text(tags: &BTreeSet<String>) -> String {
    or_dash(tags.iter().cloned().collect::<Vec<_>>().join(","))
}

fn env_table(envs: &[EnvironmentView]) -> String {
    let rows = envs
        .iter()
        .map(|e| {
            let env = &e.record.environment;
            let lock = match &e.record.active_job {
                Some(job) => format!("{job} (+{} queued)", e.record.queued_count),
                None => "-".into(),
            };
            vec![
                env.path.to_string(),
                env.env_type.clone(),
                env.runner.runner_id.to_string(),
                env.runner.rule_id.clone(),
                labels_text(&env.labels),
                tags_text(&env.tags),
                lock,
                e.version.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "PATH",
            "TYPE",
            "RUNNER",
            "RULE",
            "LABELS",
            "TAGS",
            "ACTIVE JOB",
            "VERSION",
        ],
        rows,
    )
}

/// The winning rule and why, and how many other rules there were.
fn resolution_details(r: &ResolutionAnswer) -> String {
    let others = r.counts.total().saturating_sub(r.counts.won as usize);
    details(&[
        ("runner", r.rule.runner_id.to_string()),
        ("rule", format!("{} (scope {})", r.rule.id, r.rule.scope)),
        ("why", r.why.clone()),
        ("other rules", others.to_string()),
    ])
}

fn fate(c: &Considered) -> String {
    match &c.verdict {
        Verdict::Won => "won".into(),
        Verdict::Lost { to, because } => format!("lost to {to}: {because}"),
        Verdict::OutOfScope => "out of scope".into(),
        Verdict::RunnerNotVisible => "runner not visible at its scope".into(),
        Verdict::NotMatched { reason } => format!("not matched: {reason}"),
    }
}

fn refresh_text(path: &str, a: &RefreshRunnerAnswer) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut text = details(&[
        ("environment", path.to_string()),
        ("previous runner", a.previous_runner_id.clone()),
        ("chosen runner", a.runner_id.clone()),
        ("changed", yes_no(a.changed).to_string()),
        (
            "dry run",
            if a.dry_run {
                "yes (nothing was changed)".to_string()
            } else {
                "no".to_string()
            },
        ),
        (
            "rule",
            format!(
                "{} (scope {})",
                a.resolution.rule.id, a.resolution.rule.scope
            ),
        ),
        ("why", a.resolution.why.clone()),
    ]);
    let rows: Vec<Vec<String>> = a
        .resolution
        .explanation
        .iter()
        .flatten()
        .map(|c| {
            vec![
                c.rule_id.clone(),
                c.scope.to_string(),
                c.runner_id.to_string(),
                c.priority.to_string(),
                fate(c),
            ]
        })
        .collect();
    if !rows.is_empty() {
        text.push('\n');
        text.push_str(&table(
            &["RULE", "SCOPE", "RUNNER", "PRIORITY", "FATE"],
            rows,
        ));
    }
    text
}

fn grantee_text(g: &Grantee) -> String {
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

fn membership_table(records: &[MembershipRecord]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_at_their_last_slash_and_the_root_is_spelled_dash() {
        assert_eq!(
            split_last("acme/payments/fargate"),
            ("acme/payments", "fargate")
        );
        assert_eq!(split_last("shared"), ("", "shared"));
        assert_eq!(runner_url("", "shared"), "/v1/groups/-/-/runners/shared");
        assert_eq!(
            runner_url("acme/payments", "r 1"),
            "/v1/groups/acme%2Fpayments/-/runners/r%201"
        );
        assert_eq!(env_url("acme/prod"), "/v1/environments/acme%2Fprod");
        assert!(split_env("prod").is_err());
    }

    #[test]
    fn outputs_are_compact_json_and_sensitive_ones_are_hidden() {
        let view: OutputsView = serde_json::from_value(json!({
            "job_id": "j1", "environment": "acme/prod",
            "outputs": {
                "url": {"sensitive": false, "value": "https://x", "type": "string"},
                "ports": {"sensitive": false, "value": [80, 443]},
                "password": {"sensitive": true}
            }
        }))
        .unwrap();
        assert_eq!(
            outputs_text(&view, false),
            "NAME      VALUE\npassword  (sensitive)\nports     [80,443]\nurl       \"https://x\"\n"
        );
        assert!(outputs_text(&view, true)
            .ends_with("(from apply job j1, the latest successful apply of acme/prod)\n"));
        let none: OutputsView = serde_json::from_value(
            json!({"job_id": "j1", "environment": "acme/prod", "outputs": {}}),
        )
        .unwrap();
        assert_eq!(
            outputs_text(&none, true),
            "no outputs (apply job j1 on acme/prod)\n"
        );
    }

    #[test]
    fn a_drift_reads_as_one_line() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .to_utc();
        let mut d = DriftStatus {
            status: sortie_core::drift::DriftVerdict::Drifted,
            checked_at: at,
            job_id: "j9".into(),
            summary: Some(sortie_core::ChangeSummary {
                add: 0,
                change: 1,
                destroy: 0,
                has_changes: Some(true),
            }),
            reason: None,
            remediation_job_id: None,
        };
        assert_eq!(
            drift_text(&d),
            "drifted (+0 ~1 -0) at 2026-01-02 03:04:05 UTC by job j9"
        );
        d.status = sortie_core::drift::DriftVerdict::Error;
        d.summary = None;
        d.reason = Some("the plan failed".into());
        assert_eq!(
            drift_text(&d),
            "error at 2026-01-02 03:04:05 UTC by job j9: the plan failed"
        );
        assert_eq!(span(86400), "24h");
        assert_eq!(span(5400), "90m");
        assert_eq!(span(301), "301s");
    }

    #[test]
    fn sets_nest_parse_json_and_keep_ids_as_strings() {
        let mut doc = json!({});
        for s in [
            "scope=acme",
            "id=123",
            "runner_id=acme/fargate",
            "criteria.env_type=production",
            "criteria.labels.tier=1",
            "criteria.tags=a,b",
            "priority=5",
        ] {
            apply_set(&mut doc, s).unwrap();
        }
        assert_eq!(
            doc,
            json!({"scope": "acme", "id": "123", "runner_id": "acme/fargate",
                "criteria": {"env_type": "production", "labels": {"tier": "1"}, "tags": ["a", "b"]},
                "priority": 5})
        );
        for bad in ["noequals", "=x", "a..b=1", "priority.x=1"] {
            let e = apply_set(&mut doc, bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
    }
}
