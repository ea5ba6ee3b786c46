//! The calls on checks: the contexts a branch requires, what a commit's checks and
//! statuses say, and writing Sortie's check runs.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{
    check_argument, decode, repo_path, segment, Github, Id, CREATE_CHECK_RUN, GET_BRANCH_RULES,
    GET_COMBINED_STATUS, GET_REQUIRED_CHECKS, LIST_CHECK_RUNS, PER_PAGE, UPDATE_CHECK_RUN,
};
use crate::{CheckRunBody, GithubError, Permissions, RepoRef};

impl Github {
    /// The status check contexts `branch` requires before a merge: branch protection's
    /// required status checks (a 404 means none: the branch is not protected or requires
    /// no checks;
    /// <https://docs.github.com/en/rest/branches/branch-protection#get-status-checks-protection>)
    /// and every `required_status_checks` rule of the rulesets that apply to it
    /// (<https://docs.github.com/en/rest/repos/rules#get-rules-for-a-branch>). Sorted, each
    /// once.
    pub async fn required_checks(
        &self,
        repo: &RepoRef,
        branch: &str,
    ) -> Result<Vec<String>, GithubError> {
        check_argument(GET_REQUIRED_CHECKS, "branch", branch)?;
        #[derive(Deserialize)]
        struct Protection {
            #[serde(default)]
            contexts: Vec<String>,
            #[serde(default)]
            checks: Vec<Context>,
        }
        #[derive(Deserialize)]
        struct Context {
            context: String,
        }
        #[derive(Deserialize)]
        struct Rule {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            parameters: Option<RuleParameters>,
        }
        #[derive(Deserialize)]
        struct RuleParameters {
            #[serde(default)]
            required_status_checks: Vec<Context>,
        }
        let mut required = BTreeSet::new();
        let path = format!(
            "{}/branches/{}/protection/required_status_checks",
            repo_path(repo),
            segment(branch)
        );
        match self
            .send(
                repo,
                &Permissions::PROTECTION_READ,
                GET_REQUIRED_CHECKS,
                &path,
                None,
                None,
            )
            .await
        {
            Ok(answer) => {
                let protection: Protection = decode(GET_REQUIRED_CHECKS, &answer.body)?;
                required.extend(protection.contexts);
                required.extend(protection.checks.into_iter().map(|c| c.context));
            }
            Err(GithubError::Refused { status: 404, .. }) => {}
            Err(e) => return Err(e),
        }
        let first = format!(
            "{}/rules/branches/{}?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(branch)
        );
        let rules = self
            .list(
                repo,
                &Permissions::PROTECTION_READ,
                GET_BRANCH_RULES,
                first,
                decode::<Vec<Rule>>,
            )
            .await?;
        for rule in rules {
            if rule.kind == "required_status_checks" {
                if let Some(parameters) = rule.parameters {
                    required.extend(
                        parameters
                            .required_status_checks
                            .into_iter()
                            .map(|c| c.context),
                    );
                }
            }
        }
        Ok(required.into_iter().collect())
    }

    /// What the checks of commit `sha` say, by name: `None` while pending, `Some(true)` when
    /// passed, `Some(false)` when failed. The latest check run of each name
    /// (<https://docs.github.com/en/rest/checks/runs#list-check-runs-for-a-git-reference>;
    /// `success`, `neutral` and `skipped` pass, as they do for a required check:
    /// <https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/collaborating-on-repositories-with-code-quality-features/about-status-checks#check-statuses-and-conclusions>),
    /// then the commit statuses' contexts
    /// (<https://docs.github.com/en/rest/commits/statuses#get-the-combined-status-for-a-specific-reference>).
    pub async fn head_checks(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<(String, Option<bool>)>, GithubError> {
        check_argument(LIST_CHECK_RUNS, "sha", sha)?;
        #[derive(Deserialize)]
        struct Runs {
            check_runs: Vec<Run>,
        }
        #[derive(Deserialize)]
        struct Run {
            name: String,
            status: String,
            #[serde(default)]
            conclusion: Option<String>,
        }
        #[derive(Deserialize)]
        struct Combined {
            statuses: Vec<Status>,
        }
        #[derive(Deserialize)]
        struct Status {
            context: String,
            state: String,
        }
        let first = format!(
            "{}/commits/{}/check-runs?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(sha)
        );
        let runs = self
            .list(
                repo,
                &Permissions::CHECKS_READ,
                LIST_CHECK_RUNS,
                first,
                |call, body| Ok(decode::<Runs>(call, body)?.check_runs),
            )
            .await?;
        let mut checks: Vec<(String, Option<bool>)> = runs
            .into_iter()
            .map(|run| {
                let passed = (run.status == "completed").then_some(matches!(
                    run.conclusion.as_deref(),
                    Some("success" | "neutral" | "skipped")
                ));
                (run.name, passed)
            })
            .collect();
        let first = format!(
            "{}/commits/{}/status?per_page={PER_PAGE}&page=1",
            repo_path(repo),
            segment(sha)
        );
        let statuses = self
            .list(
                repo,
                &Permissions::CHECKS_READ,
                GET_COMBINED_STATUS,
                first,
                |call, body| Ok(decode::<Combined>(call, body)?.statuses),
            )
            .await?;
        checks.extend(statuses.into_iter().map(|s| {
            let passed = match s.state.as_str() {
                "success" => Some(true),
                "failure" | "error" => Some(false),
                _ => None,
            };
            (s.context, passed)
        }));
        Ok(checks)
    }

    /// Creates a check run; its id
    /// (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>).
    pub async fn create_check_run(
        &self,
        repo: &RepoRef,
        body: &CheckRunBody,
    ) -> Result<u64, GithubError> {
        check_argument(CREATE_CHECK_RUN, "head_sha", &body.head_sha)?;
        let path = format!("{}/check-runs", repo_path(repo));
        let answer = self
            .send_json(
                repo,
                &Permissions::CHECKS_WRITE,
                CREATE_CHECK_RUN,
                &path,
                body,
            )
            .await?;
        Ok(decode::<Id>(CREATE_CHECK_RUN, &answer.body)?.id)
    }

    /// Updates check run `id`
    /// (<https://docs.github.com/en/rest/checks/runs#update-a-check-run>; the update takes
    /// no `head_sha`, so it is left out).
    pub async fn update_check_run(
        &self,
        repo: &RepoRef,
        id: u64,
        body: &CheckRunBody,
    ) -> Result<(), GithubError> {
        let path = format!("{}/check-runs/{id}", repo_path(repo));
        let mut value = serde_json::to_value(body).map_err(|e| GithubError::Decode {
            call: UPDATE_CHECK_RUN,
            reason: format!("could not encode the body: {e}"),
        })?;
        if let Some(object) = value.as_object_mut() {
            object.remove("head_sha");
        }
        self.send_json(
            repo,
            &Permissions::CHECKS_WRITE,
            UPDATE_CHECK_RUN,
            &path,
            &value,
        )
        .await
        .map(drop)
    }
}
