//! An environment's approval, drift and tool settings as flags of `create env` and
//! `update env`, and the parsers of their values.

use clap::{Args, ValueEnum};

/// An environment's settings, for `create env` and `update env`. With `update env`, an
/// empty value (`''`) clears the settings that may be unset.
#[derive(Debug, Clone, Default, Args)]
pub struct EnvSettingArgs {
    /// Whether an apply or destroy waits for a person between its plan and its apply:
    /// `auto` (the default) or `required` (approve with `sortie job approve ID`).
    #[arg(long, value_enum, value_name = "auto|required")]
    pub approval: Option<ApprovalArg>,
    /// How long a job may await approval before it is discarded: `24h`, `90m`, `2d`,
    /// `1h30m` or plain seconds (5 minutes to 30 days; default 24h), as `get env` prints
    /// it. With `update env`, `''` restores the default.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub approval_timeout: Option<Clearable<u32>>,
    /// Four eyes: the approver must not be the job's requester (`--four-eyes` or
    /// `--four-eyes=true`; `--four-eyes=false` turns it off).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub four_eyes: Option<bool>,
    /// When to check for drift: a 5-field cron expression in UTC (or `@daily`, ...), at
    /// least 15 minutes apart, such as `0 */6 * * *`. With `update env`, `''` stops the
    /// checks.
    #[arg(long, value_name = "CRON", value_parser = parse_text)]
    pub drift_schedule: Option<Clearable<String>>,
    /// What a detected drift does: `off` (the default: it is reported) or `apply` (an apply
    /// is submitted, subject to the approval setting).
    #[arg(long, value_enum, value_name = "off|apply")]
    pub drift_remediation: Option<RemediationArg>,
    /// The tool jobs run, `terraform` or `opentofu` (wins over the runner's). With
    /// `update env`, `''` clears it (the runner's applies again).
    #[arg(long, value_name = "terraform|opentofu", value_parser = parse_tool)]
    pub tool: Option<Clearable<ToolArg>>,
    /// The tool's version (`tool_version`): exact (`1.5.7`) or a constraint (`~> 1.5`,
    /// `>= 1.0, < 2.0`); wins over the runner's. With `update env`, `''` clears it.
    /// `--version` is an alias.
    #[arg(long = "tool-version", visible_alias = "version", value_name = "VERSION", value_parser = parse_text)]
    pub tool_version: Option<Clearable<String>>,
    /// Upstream environments, comma-separated paths (`acme/net/vpc,acme/db/main`): an
    /// apply of one whose outputs changed submits a job here. With `update env`, `''`
    /// removes them all.
    #[arg(long, value_name = "PATHS", value_parser = parse_list)]
    pub triggers: Option<CommaList>,
    /// What a trigger submits: `plan` (the default) or `apply`.
    #[arg(long, value_enum, value_name = "plan|apply")]
    pub trigger_operation: Option<TriggerOperationArg>,
    /// Upstream output names given to triggered jobs as `TF_VAR_<name>`, comma-separated.
    /// With `update env`, `''` removes them all.
    #[arg(long, value_name = "NAMES", value_parser = parse_list)]
    pub trigger_inputs: Option<CommaList>,
    /// A lifetime such as `72h` (`s`, `m`, `h`, `d`) from creation: then `sortie:expiry`
    /// destroys the environment. At most the maximum TTL set on its groups.
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Binds the environment to a repository: `owner/name` on GitHub, the project's full
    /// path (`group/subgroup/project`) on GitLab. Pull requests (merge requests) that touch
    /// its directory are planned there, with a check and a comment. With `update env`,
    /// `''` removes the binding.
    #[arg(long, value_name = "OWNER/NAME", value_parser = parse_text)]
    pub repository: Option<Clearable<String>>,
    /// The repository's host: `github` (the default) or `gitlab`.
    #[arg(long = "provider", value_enum, value_name = "github|gitlab")]
    pub vcs_provider: Option<super::VcsProviderArg>,
    /// The directory of its configuration in the repository (default: the root).
    #[arg(long, value_name = "DIR")]
    pub directory: Option<String>,
    /// The base branch of the pull requests that plan it (default `main`).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// The changes that plan it: comma-separated globs from the repository root (default:
    /// everything under its directory), such as `web/**,modules/**/*.tf`.
    #[arg(long, value_name = "GLOBS", value_parser = parse_list)]
    pub when_modified: Option<CommaList>,
    /// When a pull request's plan is applied: `after-merge` (the default), `before-merge`
    /// or `none`.
    #[arg(
        long = "apply",
        value_enum,
        value_name = "after-merge|before-merge|none"
    )]
    pub apply_mode: Option<ApplyModeArg>,
    /// Approvals (by others than the author, on the head commit) an apply from a pull
    /// request needs: 1 to 10; `0` needs none.
    #[arg(long, value_name = "N")]
    pub require_approvals: Option<u32>,
    /// An apply from a pull request needs it mergeable (`--require-mergeable=false` to
    /// drop).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub require_mergeable: Option<bool>,
    /// An apply from a pull request needs its branch up to date with the base.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub require_undiverged: Option<bool>,
}

/// `--apply`: when a pull request's plan is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApplyModeArg {
    /// After the pull request is merged, at the merge commit.
    AfterMerge,
    /// Before it is merged, by `/sortie apply`.
    BeforeMerge,
    /// Never from the pull request.
    None,
}

impl EnvSettingArgs {
    /// True when a flag of the repository binding was given.
    pub fn binds(&self) -> bool {
        self.repository.is_some()
            || self.directory.is_some()
            || self.branch.is_some()
            || self.when_modified.is_some()
            || self.vcs_provider.is_some()
            || self.apply_mode.is_some()
            || self.require_approvals.is_some()
            || self.require_mergeable.is_some()
            || self.require_undiverged.is_some()
    }

    /// The binding these flags make of `current` (an environment's `vcs`, as JSON):
    /// `Ok(None)` when no binding flag was given, `Ok(Some(Value::Null))` to remove it.
    pub fn binding(
        &self,
        current: Option<&serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, String> {
        use serde_json::{json, Value};
        if !self.binds() {
            return Ok(None);
        }
        if self.repository == Some(Clearable::Clear) {
            return Ok(Some(Value::Null));
        }
        let mut vcs = current
            .filter(|v| v.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        if let Some(Clearable::Set(repo)) = &self.repository {
            vcs["repository"] = json!(repo);
        }
        if let Some(provider) = self.vcs_provider {
            vcs["provider"] = json!(match provider {
                super::VcsProviderArg::Github => "github",
                super::VcsProviderArg::Gitlab => "gitlab",
            });
        }
        if vcs.get("repository").is_none() {
            return Err("the binding's other flags need --repository OWNER/NAME".into());
        }
        if let Some(d) = &self.directory {
            vcs["directory"] = json!(d);
        }
        if let Some(b) = &self.branch {
            vcs["branch"] = json!(b);
        }
        if let Some(g) = &self.when_modified {
            vcs["when_modified"] = json!(g.0);
        }
        if let Some(a) = self.apply_mode {
            vcs["apply"] = json!(match a {
                ApplyModeArg::AfterMerge => "after_merge",
                ApplyModeArg::BeforeMerge => "before_merge",
                ApplyModeArg::None => "none",
            });
        }
        let mut requirements = vcs
            .get("requirements")
            .filter(|v| v.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        if let Some(n) = self.require_approvals {
            requirements["approved"] = if n == 0 { Value::Null } else { json!(n) };
        }
        if let Some(m) = self.require_mergeable {
            requirements["mergeable"] = json!(m);
        }
        if let Some(u) = self.require_undiverged {
            requirements["undiverged"] = json!(u);
        }
        if let Some(map) = requirements.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        vcs["requirements"] = requirements;
        Ok(Some(vcs))
    }
}

/// `--trigger-operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TriggerOperationArg {
    /// A plan.
    Plan,
    /// An apply (subject to the approval setting).
    Apply,
}

/// The value of one comma-separated flag (`--triggers a,b`), as one value. A newtype, not
/// `Vec<String>`: clap's derive reads an `Option<Vec<T>>` field as many values of `T`, and
/// would ask the parser's one `Vec` for a `String` (a panic when the flag is given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommaList(pub Vec<String>);

/// A comma-separated list; `''` is the empty list.
fn parse_list(s: &str) -> Result<CommaList, String> {
    Ok(CommaList(
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect(),
    ))
}

impl EnvSettingArgs {
    /// True when no setting was given.
    pub fn is_empty(&self) -> bool {
        self.approval.is_none()
            && self.approval_timeout.is_none()
            && self.four_eyes.is_none()
            && self.drift_schedule.is_none()
            && self.drift_remediation.is_none()
            && self.tool.is_none()
            && self.tool_version.is_none()
            && self.triggers.is_none()
            && self.trigger_operation.is_none()
            && self.trigger_inputs.is_none()
            && self.ttl.is_none()
            && !self.binds()
    }
}

/// A setting's new value, or `Clear` (given as `''`): `update env` then sends `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearable<T> {
    /// Set it to this value.
    Set(T),
    /// Unset it: its default, or the runner's, applies.
    Clear,
}

pub(super) fn parse_timeout(s: &str) -> Result<Clearable<u32>, String> {
    if s.is_empty() {
        return Ok(Clearable::Clear);
    }
    parse_duration(s).map(Clearable::Set)
}

/// A duration in whole seconds: plain seconds (`3600`), or numbers each with a unit
/// `d`, `h`, `m` or `s`, largest first (`24h`, `90m`, `2d`, `1h30m`).
pub fn parse_duration(s: &str) -> Result<u32, String> {
    let bad = || {
        format!("`{s}` is not a duration: give seconds (`3600`) or a number with a unit, such as `24h`, `90m`, `2d` or `1h30m`")
    };
    let text = s.trim();
    if let Ok(seconds) = text.parse::<u32>() {
        return Ok(seconds);
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        if number.is_empty() || unit >= last_unit {
            return Err(bad());
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(unit));
        last_unit = unit;
        number.clear();
    }
    if !number.is_empty() || last_unit == u64::MAX {
        return Err(bad());
    }
    u32::try_from(total).map_err(|_| bad())
}

pub(super) fn parse_text(s: &str) -> Result<Clearable<String>, String> {
    Ok(if s.is_empty() {
        Clearable::Clear
    } else {
        Clearable::Set(s.to_string())
    })
}

pub(super) fn parse_tool(s: &str) -> Result<Clearable<ToolArg>, String> {
    if s.is_empty() {
        return Ok(Clearable::Clear);
    }
    ToolArg::from_str(s, false)
        .map(Clearable::Set)
        .map_err(|_| format!("`{s}` is not a tool: `terraform` or `opentofu`"))
}

/// `--approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalArg {
    /// Plan and apply that plan at once.
    Auto,
    /// Plan, then wait for `sortie job approve` before applying the saved plan.
    Required,
}

/// `--drift-remediation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemediationArg {
    /// Report a drift, nothing more.
    Off,
    /// Submit an apply when a drift is found.
    Apply,
}

/// `--tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolArg {
    /// HashiCorp Terraform.
    Terraform,
    /// OpenTofu.
    Opentofu,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command, Update, UpdateResource};
    use clap::Parser;

    fn env_settings(args: &[&str]) -> EnvSettingArgs {
        let mut all = vec!["sortie", "update", "env", "acme/prod"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Update(Update {
                resource: UpdateResource::Env { settings, .. },
            }) => settings,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_empty_value_clears_a_setting_and_four_eyes_takes_an_optional_value() {
        let s = env_settings(&[
            "--four-eyes",
            "--drift-schedule",
            "",
            "--tool",
            "",
            "--version",
            "",
            "--approval-timeout",
            "",
        ]);
        assert_eq!(s.four_eyes, Some(true));
        assert_eq!(s.drift_schedule, Some(Clearable::Clear));
        assert_eq!(s.tool, Some(Clearable::Clear));
        assert_eq!(s.tool_version, Some(Clearable::Clear));
        assert_eq!(s.approval_timeout, Some(Clearable::Clear));
        let s = env_settings(&[
            "--four-eyes=false",
            "--approval",
            "required",
            "--approval-timeout",
            "3600",
            "--tool",
            "opentofu",
            "--tool-version",
            "~> 1.6",
            "--drift-remediation",
            "apply",
        ]);
        assert_eq!(s.four_eyes, Some(false));
        assert_eq!(s.approval, Some(ApprovalArg::Required));
        assert_eq!(s.approval_timeout, Some(Clearable::Set(3600)));
        assert_eq!(s.tool, Some(Clearable::Set(ToolArg::Opentofu)));
        assert_eq!(s.tool_version, Some(Clearable::Set("~> 1.6".into())));
        assert_eq!(s.drift_remediation, Some(RemediationArg::Apply));
        assert!(env_settings(&[]).is_empty());
        for bad in [
            &["--tool", "terraformx"][..],
            &["--approval-timeout", "1x"][..],
            &["--four-eyes=maybe"][..],
            &["--approval", "sometimes"][..],
        ] {
            let mut all = vec!["sortie", "update", "env", "acme/prod"];
            all.extend_from_slice(bad);
            assert!(Cli::try_parse_from(all).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_duration_takes_units_as_get_env_prints_them_or_plain_seconds() {
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("90m"), Ok(5_400));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("1h30m"), Ok(5_400));
        assert_eq!(parse_duration("45s"), Ok(45));
        assert_eq!(parse_duration("3600"), Ok(3_600));
        for bad in ["", "h", "1x", "30m1h", "1h1h", "-5m", "1.5h", "99999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            env_settings(&["--approval-timeout", "24h"]).approval_timeout,
            Some(Clearable::Set(86_400))
        );
    }

    #[test]
    fn triggers_and_trigger_inputs_are_lists() {
        let s = env_settings(&[
            "--triggers",
            "acme/net/vpc, acme/db/main",
            "--trigger-inputs",
            "",
        ]);
        assert_eq!(
            s.triggers,
            Some(CommaList(vec![
                "acme/net/vpc".into(),
                "acme/db/main".into()
            ]))
        );
        assert_eq!(s.trigger_inputs, Some(CommaList(vec![])));
    }
}
