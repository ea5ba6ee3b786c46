//! The pilot's refusals that keep a job from emptying an environment by accident:
//!
//! - a configuration directory with no `.tf` (or `.tf.json`) file of its own is refused
//!   whatever the operation (the backend file the pilot writes does not count), as plain
//!   Terraform refuses "No configuration files";
//! - a destroy from an implicit source (`source: {type: inline, implicit: true}`: the
//!   CLI's `run` with no `--source`) is refused;
//! - an apply whose plan destroys and creates nothing is refused when the configuration
//!   declares no resource (an empty configuration applied to a non-empty state), and, when
//!   the source was implicit, when it destroys every resource the state holds.
//!
//! The decisions are plain functions of what the pilot read: the file names and texts of
//! the configuration, the plan's counts ([`crate::summary`]) and `state list`.

use sortie_core::protocol::pilot::JobSpec;
use sortie_core::{ChangeSummary, JobPhase, Operation};

use crate::backend::BACKEND_FILE;

/// True for a file Terraform reads as configuration: `*.tf` or `*.tf.json`, other than the
/// backend file the pilot writes itself.
pub fn is_config_file(name: &str) -> bool {
    name != BACKEND_FILE && (name.ends_with(".tf") || name.ends_with(".tf.json"))
}

/// The reason to refuse a configuration directory with no configuration file of its own
/// (`path` is the source's path, empty for its root).
pub fn no_config_reason(path: &str) -> String {
    let at = if path.trim_matches('/').is_empty() {
        "the source's root".to_string()
    } else {
        format!("`{path}`")
    };
    format!(
        "refused: there is no .tf file in {at} (files in subfolders count only as modules the root calls): Terraform would see an empty configuration and plan to destroy everything the state holds; give the folder of the root module as the source"
    )
}

/// The reason to refuse `spec` before anything is fetched or run: a destroy from an
/// implicit source, or a speculative spec (a pull request's plan, which holds no
/// environment lock) that asks for anything but a plan: an apply or a destroy, an apply
/// phase, or a restore (its `state push` writes state). Fail closed: such a spec never
/// reaches terraform.
pub fn spec_refusal(spec: &JobSpec) -> Option<String> {
    if spec.operation == Operation::Destroy && spec.source.is_implicit() {
        return Some("refused: a destroy needs an explicit source, and this job's files were chosen implicitly (the CLI's current folder, no --source); run it again with --source DIR".to_string());
    }
    if !spec.speculative {
        return None;
    }
    let what = if spec.operation != Operation::Plan {
        format!(
            "{} {}",
            sortie_core::job::a_or_an(spec.operation.as_str()),
            spec.operation.as_str()
        )
    } else if spec.phase == Some(JobPhase::Apply) || spec.saved_plan_url.is_some() {
        "an apply phase".to_string()
    } else if spec.restore_state_url.is_some() {
        "a restore (it writes state)".to_string()
    } else {
        return None;
    };
    Some(format!(
        "refused: a speculative job (a pull request's plan) holds no environment lock and may only plan, and this spec asks for {what}; nothing was run"
    ))
}

/// True when one of the configuration files (name, text) declares a resource or calls a
/// module: a `resource` or `module` block in a `.tf` file, a `resource` or `module` key in a
/// `.tf.json` file. Data sources, variables, locals and outputs alone are an empty
/// configuration: they manage nothing.
pub fn declares_resources<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
    files.into_iter().any(|(name, text)| {
        if name.ends_with(".tf.json") {
            return serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .is_some_and(|o| o.contains_key("resource") || o.contains_key("module"));
        }
        text.lines().any(|line| {
            let line = line.trim_start();
            ["resource", "module"].iter().any(|block| {
                line.strip_prefix(block)
                    .is_some_and(|rest| rest.starts_with(|c: char| c == '"' || c.is_whitespace()))
            })
        })
    })
}

/// How many managed resources `state list`'s output names (data sources left out:
/// `data.x.y`, `module.m.data.x.y`).
pub fn managed_resources(state_list: &str) -> usize {
    state_list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|address| {
            let mut rest = *address;
            // `module.NAME.` prefixes (with an index or key, `module.m[0].`).
            while let Some(after) = rest.strip_prefix("module.") {
                match after.split_once('.') {
                    Some((_, tail)) => rest = tail,
                    None => break,
                }
            }
            !rest.starts_with("data.")
        })
        .count()
}

/// True when a plan with these counts may empty the state (it destroys and creates
/// nothing): only then is `state list` worth running.
pub fn may_empty(plan: &ChangeSummary) -> bool {
    plan.destroy > 0 && plan.add == 0
}

/// What the pilot knows after an apply's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanFacts {
    /// The job's operation.
    pub operation: Operation,
    /// The source was implicit ([`sortie_core::Source::is_implicit`]).
    pub implicit: bool,
    /// The configuration declares a resource or calls a module ([`declares_resources`]).
    pub declares_resources: bool,
    /// The plan's counts.
    pub plan: ChangeSummary,
    /// Managed resources in the state ([`managed_resources`]); `None` when `state list`
    /// could not tell.
    pub state_resources: Option<usize>,
}

/// The reason to refuse applying the plan `facts` describe, or `None` to go on. Only an
/// apply is ever refused here (a plan applies nothing; a destroy is meant to empty the
/// state):
///
/// - an empty configuration whose plan destroys anything: it would empty a non-empty state;
/// - from an implicit source, a plan that destroys every resource of the state and creates
///   none (when `state list` could not tell, a plan that destroys and creates nothing).
pub fn apply_refusal(facts: &PlanFacts) -> Option<String> {
    if facts.operation != Operation::Apply || !may_empty(&facts.plan) {
        return None;
    }
    let destroy = facts.plan.destroy;
    if !facts.declares_resources {
        return Some(format!(
            "refused: the configuration declares no resource (no resource or module block in its .tf files) and its plan destroys {destroy} resource(s) of the state; an apply never empties an environment: run a destroy to do that, or give the folder of the root module as the source"
        ));
    }
    let everything = facts.state_resources.is_none_or(|n| destroy as usize >= n);
    if facts.implicit && everything {
        return Some(format!(
            "refused: the plan destroys every resource of the state ({destroy}) and creates none, and the source was implicit (the CLI's current folder, no --source); if that is meant, run it again with --source DIR"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(add: u32, change: u32, destroy: u32) -> ChangeSummary {
        ChangeSummary {
            add,
            change,
            destroy,
            has_changes: None,
        }
    }

    fn facts(implicit: bool, declares: bool, p: ChangeSummary, state: Option<usize>) -> PlanFacts {
        PlanFacts {
            operation: Operation::Apply,
            implicit,
            declares_resources: declares,
            plan: p,
            state_resources: state,
        }
    }

    #[test]
    fn only_tf_files_count_and_never_the_runners_backend_file() {
        assert!(is_config_file("main.tf"));
        assert!(is_config_file("main.tf.json"));
        assert!(!is_config_file(BACKEND_FILE));
        assert!(!is_config_file("terraform.tfvars"));
        assert!(!is_config_file("terraform.tfvars.json"));
        assert!(!is_config_file("notes.json"));
        assert!(no_config_reason("").contains("no .tf file in the source's root"));
        assert!(no_config_reason("stacks/app").contains("`stacks/app`"));
    }

    #[test]
    fn resources_and_module_calls_make_a_configuration_non_empty() {
        let one = |name: &'static str, text: &'static str| declares_resources([(name, text)]);
        assert!(one("main.tf", "resource \"null_resource\" \"a\" {}\n"));
        assert!(one("main.tf", "  resource null_resource a {\n}\n"));
        assert!(one(
            "main.tf",
            "module \"net\" {\n  source = \"./modules/net\"\n}\n"
        ));
        assert!(one(
            "main.tf.json",
            r#"{"resource": {"null_resource": {"a": {}}}}"#
        ));
        assert!(one(
            "main.tf.json",
            r#"{"module": {"m": {"source": "./m"}}}"#
        ));
        assert!(!one("variables.tf", "variable \"resource\" {}\n"));
        assert!(!one(
            "main.tf",
            "# resource \"x\" \"y\" {}\ndata \"d\" \"e\" {}\noutput \"o\" { value = 1 }\n"
        ));
        assert!(!one("main.tf", "resources_note = 1\nmodules = 2\n"));
        assert!(!one("main.tf.json", r#"{"variable": {"resource": {}}}"#));
        assert!(!declares_resources(Vec::<(&str, &str)>::new()));
    }

    #[test]
    fn state_list_counts_managed_resources_only() {
        let list = "null_resource.a\ndata.template_file.t\nmodule.net.aws_vpc.main\nmodule.net.data.aws_ami.x\nmodule.a[0].module.b.null_resource.c\n\n";
        assert_eq!(managed_resources(list), 3);
        assert_eq!(managed_resources(""), 0);
    }

    #[test]
    fn an_empty_configuration_never_applies_a_plan_that_destroys() {
        for implicit in [false, true] {
            let refused = apply_refusal(&facts(implicit, false, plan(0, 0, 1), Some(1))).unwrap();
            assert!(refused.contains("declares no resource"), "{refused}");
            assert!(refused.contains("destroys 1 resource(s)"), "{refused}");
        }
        // Nothing in the state: nothing to protect.
        assert_eq!(
            apply_refusal(&facts(false, false, plan(0, 0, 0), Some(0))),
            None
        );
        // A destroy is meant to empty the state; a plan applies nothing.
        for operation in [Operation::Destroy, Operation::Plan] {
            let f = PlanFacts {
                operation,
                ..facts(true, false, plan(0, 0, 3), Some(3))
            };
            assert_eq!(apply_refusal(&f), None, "{operation:?}");
        }
    }

    #[test]
    fn an_implicit_source_may_not_destroy_everything_but_an_explicit_one_may() {
        let refused = apply_refusal(&facts(true, true, plan(0, 0, 2), Some(2))).unwrap();
        assert!(refused.contains("--source"), "{refused}");
        assert!(
            refused.contains("every resource of the state (2)"),
            "{refused}"
        );
        // Unknown state: destroying and creating nothing is taken as everything.
        assert!(apply_refusal(&facts(true, true, plan(0, 0, 2), None)).is_some());
        // Some of the state, a replacement, or an explicit source: applied.
        assert_eq!(
            apply_refusal(&facts(true, true, plan(0, 0, 1), Some(2))),
            None
        );
        assert_eq!(
            apply_refusal(&facts(true, true, plan(2, 0, 2), Some(2))),
            None
        );
        assert_eq!(
            apply_refusal(&facts(false, true, plan(0, 0, 2), Some(2))),
            None
        );
        assert_eq!(
            apply_refusal(&facts(true, true, plan(1, 0, 0), Some(0))),
            None
        );
    }

    /// A spec of `operation`, speculative or not, from a GitHub commit.
    fn spec_of(operation: &str, speculative: bool) -> JobSpec {
        serde_json::from_value(serde_json::json!({
            "job_id": "01jnx6v4k2m8q9r3s5t7w0y1za",
            "environment": "acme/web/prod",
            "operation": operation,
            "source": {"type": "github", "repository": "acme/infra", "commit": "0123456789abcdef0123456789abcdef01234567"},
            "state_storage": {"type": "local", "directory": "/tmp/state"},
            "speculative": speculative,
        }))
        .unwrap()
    }

    #[test]
    fn a_speculative_spec_may_only_plan() {
        assert_eq!(spec_refusal(&spec_of("plan", true)), None);
        for operation in ["apply", "destroy"] {
            let reason = spec_refusal(&spec_of(operation, true)).unwrap();
            assert!(
                reason.contains("speculative") && reason.contains(operation),
                "{reason}"
            );
            // Not speculative: nothing to refuse here.
            assert_eq!(spec_refusal(&spec_of(operation, false)), None);
        }
        let mut phase = spec_of("plan", true);
        phase.phase = Some(JobPhase::Apply);
        assert!(spec_refusal(&phase).unwrap().contains("apply phase"));
        let mut saved = spec_of("plan", true);
        saved.saved_plan_url = Some("https://b.s3/plan.tfplan".into());
        assert!(spec_refusal(&saved).unwrap().contains("apply phase"));
        let mut restore = spec_of("plan", true);
        restore.restore_state_url = Some("https://b.s3/state".into());
        assert!(spec_refusal(&restore).unwrap().contains("restore"));
        let mut planned = spec_of("plan", true);
        planned.phase = Some(JobPhase::Plan);
        planned.detailed_exitcode = true;
        assert_eq!(spec_refusal(&planned), None);
    }
}
