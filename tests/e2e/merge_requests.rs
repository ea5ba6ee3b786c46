//! Issue 46 end to end: GitLab merge requests through `sortie dev`, the GitLab double
//! (strict where GitLab is), the real pilot and the machine's Terraform 1.11
//! (`terraform_data`), on the same seams as GitHub's pull requests. A merge request
//! touching two of three bound environments (under a nested group) gets two speculative
//! plans of its head commit, a commit status per environment and one note; a forged
//! delivery is refused and GitLab's retry is a duplicate; a fork's is held until a
//! deployer comments; an unmergeable one is not applied; a merge before its apply under
//! `before_merge` is named in the note; a merge request whose webhooks never came is
//! planned by the reconcile, through a GitLab outage, with one note.

use std::time::{Duration, Instant};

use serde_json::Value;
use sortie_core::vcs::report::COMMENT_MARKER;
use sortie_testkit::gitlab::{
    AccessLevel, DiffChange, GitlabDouble, MergeRequestSpec, NoteRecord, StatusRecord,
};

use crate::common::{self, terraform_data as tf, Dev};

const PROJECT: &str = "acme/platform/infra";
const SECRET: &str = "a-gitlab-secret-token-long-enough-0123";
const HEAD: &str = "7a1c2b3d4e5f60718293a4b5c6d7e8f901234567";
const BOT: &str = "sortie-bot";

struct World {
    rt: tokio::runtime::Runtime,
    gl: GitlabDouble,
    dev: Dev,
    issuer: String,
}

impl World {
    /// `sortie dev` connected to the GitLab double through the CLI, as a user would, with
    /// three environments bound to three directories of [`PROJECT`].
    fn start(prefix: &str) -> Self {
        Self::start_with(prefix, &[])
    }

    /// [`World::start`] with more `sortie dev` arguments.
    fn start_with(prefix: &str, extra_args: &[&str]) -> Self {
        // Fails, never skips, without the machine's Terraform 1.11 (`terraform_data`).
        let _ = sortie_testkit::terraform111_bin();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let gl = rt.block_on(GitlabDouble::start());
        gl.add_project(PROJECT);
        let (dev_tf, prod_tf, api_tf) = (tf("web_dev"), tf("web_prod"), tf("api_dev"));
        gl.add_commit(
            PROJECT,
            HEAD,
            &[
                ("web/dev/main.tf", dev_tf.as_bytes()),
                ("web/prod/main.tf", prod_tf.as_bytes()),
                ("api/dev/main.tf", api_tf.as_bytes()),
                ("README.md", b"infra\n"),
            ],
        );
        // A Maintainer's token with `api`: it writes statuses and notes and mints each job
        // a token that reads only this project.
        let token = gl.issue_token(PROJECT, BOT, AccessLevel::Maintainer, &["api"]);
        let dev = common::start_dev(common::DevOptions {
            prefix,
            sweep_every: 1,
            runner: Some(common::runner_binary()),
            extra_args,
            ..Default::default()
        });
        common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &common::state_bucket());
        let token_file = dev.dir.join("gitlab-token");
        let secret_file = dev.dir.join("webhook-secret");
        std::fs::write(&token_file, format!("{token}\n")).unwrap();
        std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
        let out: common::Out = common::sortie(
            &dev,
            &[
                "vcs",
                "connect",
                "gitlab",
                "acme",
                "--token-file",
                token_file.to_str().unwrap(),
                "--webhook-secret-file",
                secret_file.to_str().unwrap(),
                "--gitlab-url",
                gl.url(),
            ],
        )
        .into();
        assert_eq!(out.code, 0, "{out:?}");
        let webhook_url = format!("{}/v1/vcs/gitlab/acme/webhook", dev.url);
        assert!(
            out.stdout.contains(&webhook_url)
                && !out.stdout.contains(&token)
                && !out.stdout.contains(SECRET),
            "the webhook URL, and no secret: {out:?}"
        );
        let out: common::Out =
            common::sortie(&dev, &["-o", "json", "vcs", "get", "gitlab", "acme"]).into();
        assert_eq!(out.code, 0, "{out:?}");
        let connection: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(connection["instance_url"], gl.url(), "{connection}");
        for (name, dir) in [
            ("web-dev", "web/dev"),
            ("web-prod", "web/prod"),
            ("api-dev", "api/dev"),
        ] {
            let path = format!("acme/{name}");
            let out: common::Out = common::sortie(
                &dev,
                &[
                    "create",
                    "env",
                    &path,
                    "--type",
                    "development",
                    "--provider",
                    "gitlab",
                    "--repository",
                    PROJECT,
                    "--directory",
                    dir,
                ],
            )
            .into();
            assert_eq!(out.code, 0, "{out:?}");
        }
        let out: common::Out = common::sortie(&dev, &["get", "env", "acme/web-dev"]).into();
        assert!(
            out.stdout
                .contains(&format!("gitlab:{PROJECT} web/dev (base main")),
            "get env names the binding's host: {out:?}"
        );
        let issuer = connection["issuer"].as_str().unwrap().to_string();
        Self {
            rt,
            gl,
            dev,
            issuer,
        }
    }

    fn grant(&self, username: &str, role: &str) {
        self.dev.api(
            "POST",
            "/v1/groups/acme/-/memberships",
            Some(serde_json::json!({"role": role, "grantee": {"kind": "subject", "subject": username, "issuer": self.issuer}})),
        );
    }

    fn url(&self) -> String {
        format!("{}/v1/vcs/gitlab/acme/webhook", self.dev.url)
    }

    /// Delivers `payload` as GitLab does, with `secret` as its `X-Gitlab-Token`.
    fn deliver(&self, event: &str, payload: &Value, secret: &str) -> (u16, String) {
        let hook = self.gl.hook(&self.url(), secret);
        self.rt
            .block_on(hook.delivery(event, payload.clone()).send())
    }

    /// Comments `body` on merge request `iid` as `username`, and delivers the note.
    fn comment(&self, iid: u64, username: &str, body: &str) {
        let id = self.gl.add_user_note(PROJECT, iid, username, body);
        let payload = self.gl.payloads().note(PROJECT, iid, id);
        assert_eq!(self.deliver("Note Hook", &payload, SECRET).0, 202);
    }

    /// Waits (3 minutes at most) until the commit statuses of `HEAD` satisfy `done`.
    fn wait_statuses(
        &self,
        what: &str,
        done: impl Fn(&[StatusRecord]) -> bool,
    ) -> Vec<StatusRecord> {
        self.wait_statuses_of(HEAD, what, done)
    }

    /// Waits (3 minutes at most) until the commit statuses of `sha` satisfy `done`.
    fn wait_statuses_of(
        &self,
        sha: &str,
        what: &str,
        done: impl Fn(&[StatusRecord]) -> bool,
    ) -> Vec<StatusRecord> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let statuses = self.gl.statuses(PROJECT, sha);
            if done(&statuses) {
                return statuses;
            }
            assert!(
                Instant::now() < deadline,
                "never {what}: {statuses:#?}\n--- sortie dev log ---\n{}",
                std::fs::read_to_string(self.dev.dir.join("dev.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits (3 minutes at most) until the notes of merge request `iid` satisfy `done`.
    fn wait_notes(
        &self,
        iid: u64,
        what: &str,
        done: impl Fn(&[NoteRecord]) -> bool,
    ) -> Vec<NoteRecord> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let notes = self.gl.notes(PROJECT, iid);
            if done(&notes) {
                return notes;
            }
            assert!(
                Instant::now() < deadline,
                "never {what}: {notes:#?}\n--- sortie dev log ---\n{}",
                std::fs::read_to_string(self.dev.dir.join("dev.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Sortie's notes on `iid` other than the sticky one: its replies to commands.
    fn replies(&self, iid: u64) -> Vec<String> {
        self.gl
            .notes(PROJECT, iid)
            .into_iter()
            .filter(|n| n.author == BOT && !n.body.contains("<!-- sortie"))
            .map(|n| n.body)
            .collect()
    }

    /// Binds `acme/web-dev` to apply before the merge, with the requirement `flags`.
    fn apply_before_merge(&self, flags: &[&str]) {
        let mut args = vec!["update", "env", "acme/web-dev", "--apply", "before-merge"];
        args.extend_from_slice(flags);
        let out: common::Out = common::sortie(&self.dev, &args).into();
        assert_eq!(out.code, 0, "{out:?}");
    }

    /// Waits (2 minutes at most) for Sortie's replies on `iid`; them, joined.
    fn wait_replies(&self, iid: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.replies(iid).is_empty() {
            assert!(
                Instant::now() < deadline,
                "no reply: {:#?}",
                self.gl.notes(PROJECT, iid)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        self.replies(iid).join("\n")
    }

    /// The sticky note of `iid` now (empty when there is none).
    fn sticky(&self, iid: u64) -> String {
        self.gl
            .notes(PROJECT, iid)
            .into_iter()
            .find(|n| n.author == BOT && n.body.contains("<!-- sortie"))
            .map(|n| n.body)
            .unwrap_or_default()
    }

    /// Plans `spec` (opened) and waits for its plans to succeed on `envs` statuses.
    fn planned(&self, spec: MergeRequestSpec, envs: usize) -> u64 {
        let iid = self.gl.add_merge_request(PROJECT, spec);
        let payload = self.gl.payloads().merge_request(PROJECT, iid, "open");
        assert_eq!(self.deliver("Merge Request Hook", &payload, SECRET).0, 202);
        self.wait_statuses("the plans' success", |s| {
            s.len() == envs && s.iter().all(|s| s.status == "success")
        });
        iid
    }
}

impl World {
    /// Every job of the three environments, newest first.
    fn jobs(&self) -> Vec<Value> {
        let mut all = Vec::new();
        for env in ["web-dev", "web-prod", "api-dev"] {
            let page = self
                .dev
                .api("GET", &format!("/v1/environments/acme/{env}/-/jobs"), None);
            all.extend(page["jobs"].as_array().cloned().unwrap_or_default());
        }
        all
    }
}

fn job_of(status: &StatusRecord) -> String {
    status
        .target_url
        .as_deref()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_merge_request_touching_two_bound_environments_gets_two_plans_two_statuses_and_one_note() {
    sortie_testkit::require_aws!();
    let w = World::start("mrs");
    w.grant("octocat", "deployer");
    let iid = w.gl.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("octocat", HEAD)
            .change(DiffChange::modified("web/dev/main.tf"))
            .change(DiffChange::modified("web/prod/main.tf"))
            .change(DiffChange::modified("README.md")),
    );
    let payload = w.gl.payloads().merge_request(PROJECT, iid, "open");

    // A forged delivery (another secret token) is refused, and changes nothing.
    let (status, body) = w.deliver("Merge Request Hook", &payload, "not-the-secret-0123456789");
    assert_eq!(status, 401, "{body}");
    assert!(w.gl.statuses(PROJECT, HEAD).is_empty());

    let hook = w.gl.hook(&w.url(), SECRET);
    let delivery = hook.delivery("Merge Request Hook", payload.clone());
    let (status, body) = w.rt.block_on(delivery.send());
    assert_eq!(status, 202, "{body}");
    let statuses = w.wait_statuses("two successful statuses", |s| {
        s.len() == 2 && s.iter().all(|s| s.status == "success")
    });
    let mut names: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["sortie: acme/web-dev", "sortie: acme/web-prod"]);
    for status in &statuses {
        let id = job_of(status);
        assert!(
            status
                .target_url
                .as_deref()
                .unwrap_or_default()
                .contains("/#/jobs/"),
            "a status links to its job: {status:#?}"
        );
        let job = w.dev.job(&id);
        assert_eq!(job["speculative"], true, "{job}");
        assert_eq!(job["source"]["type"], "gitlab", "{job}");
        assert_eq!(job["source"]["project"], PROJECT, "{job}");
        assert_eq!(job["source"]["commit"], HEAD, "{job}");
        assert_eq!(job["requested_by"], "gitlab:octocat", "{job}");
        let resource = if status.name.ends_with("web-dev") {
            "web_dev"
        } else {
            "web_prod"
        };
        assert!(
            w.dev
                .log(&id)
                .contains(&format!("terraform_data.{resource}")),
            "the plan ran the merge request's own commit"
        );
        // Pending or running, then success; never back (GitLab's state machine).
        let states: Vec<&str> = status.history.iter().map(|h| h.as_str()).collect();
        assert_eq!(states.last(), Some(&"success"), "{status:#?}");
    }
    // The pilot read the archive with a token of its own, confined to the project.
    let downloads = w.gl.downloads();
    assert!(!downloads.is_empty(), "the source was downloaded");
    for d in &downloads {
        assert_eq!(
            (d.project.as_str(), d.sha.as_str()),
            (PROJECT, HEAD),
            "{d:?}"
        );
    }
    let minted = w.gl.access_tokens(PROJECT);
    assert!(
        !minted.is_empty()
            && minted
                .iter()
                .all(|t| t.scopes.iter().all(|s| s == "read_api") && t.access_level <= 20),
        "each job's token reads, and only reads, this project: {minted:#?}"
    );
    // Each token is its job's, and its pilot revoked it before Terraform ran.
    for status in &statuses {
        let id = job_of(status);
        assert!(
            minted
                .iter()
                .any(|t| t.name == format!("sortie-source-{id}") && t.revoked),
            "job {id}'s token, revoked: {minted:#?}"
        );
        let log = w.dev.log(&id);
        let (revoked, terraform) = (
            log.find("source token revoked"),
            log.find("terraform_data."),
        );
        assert!(
            revoked.is_some() && revoked < terraform,
            "revoked before Terraform ran:\n{log}"
        );
    }
    assert!(minted.iter().all(|t| t.revoked), "{minted:#?}");

    // No secret leaves by another exit: the connection's token, the webhook's secret token
    // and every job's source token are in no job log, no job, and not in `sortie dev`'s log.
    let mut secrets: Vec<String> = minted.iter().map(|t| t.token.clone()).collect();
    secrets.push(
        std::fs::read_to_string(w.dev.dir.join("gitlab-token"))
            .unwrap()
            .trim()
            .to_string(),
    );
    secrets.push(SECRET.to_string());
    let dev_log = std::fs::read_to_string(w.dev.dir.join("dev.log")).unwrap_or_default();
    for status in &statuses {
        let id = job_of(status);
        let (log, job) = (w.dev.log(&id), w.dev.job(&id).to_string());
        for secret in &secrets {
            assert!(!secret.is_empty());
            for (what, text) in [("job log", &log), ("job", &job), ("dev.log", &dev_log)] {
                assert!(!text.contains(secret.as_str()), "a secret is in the {what}");
            }
        }
    }

    // One note, edited in place, naming both environments and not the third.
    let notes = w.wait_notes(iid, "a note naming both environments", |n| {
        n.iter()
            .any(|n| n.body.contains("acme/web-dev") && n.body.contains("acme/web-prod"))
    });
    let ours: Vec<&NoteRecord> = notes.iter().filter(|n| n.author == BOT).collect();
    assert_eq!(ours.len(), 1, "{notes:#?}");
    assert!(!ours[0].body.contains("acme/api-dev"), "{}", ours[0].body);
    for resource in ["web_dev", "web_prod"] {
        assert!(
            ours[0]
                .body
                .contains(&format!("# terraform_data.{resource} will be created")),
            "the note holds each environment's diff: {}",
            ours[0].body
        );
    }

    // GitLab's retry of the same delivery (the same Idempotency-Key) is a duplicate.
    let (status, body) = w.rt.block_on(delivery.send());
    assert_eq!(status, 202, "{body}");
    assert!(body.contains("duplicate"), "{body}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(w.gl.statuses(PROJECT, HEAD).len(), 2);
    assert_eq!(
        w.gl.notes(PROJECT, iid)
            .iter()
            .filter(|n| n.author == BOT)
            .count(),
        1
    );
}

#[test]
fn a_fork_merge_request_is_not_planned_until_a_deployer_comments() {
    sortie_testkit::require_aws!();
    let w = World::start("mrfork");
    w.grant("alice", "deployer");
    let iid = w.gl.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("mallory", HEAD)
            .from_fork("mallory/infra")
            .change(DiffChange::modified("api/dev/main.tf")),
    );
    let payload = w.gl.payloads().merge_request(PROJECT, iid, "open");
    assert_eq!(w.deliver("Merge Request Hook", &payload, SECRET).0, 202);
    let note = w.wait_notes(iid, "the sticky note", |n| {
        n.iter()
            .any(|n| n.author == BOT && n.body.contains("/sortie plan"))
    });
    assert!(!note.is_empty());
    assert!(
        w.jobs().iter().all(|j| j["operation"] != "plan"),
        "nothing of the fork ran"
    );

    // The fork's author cannot allow it; a deployer can.
    w.comment(iid, "mallory", "/sortie plan");
    w.comment(iid, "alice", "/sortie plan");
    // GitLab takes no status for a fork's commit in the target project (the double refuses
    // it as GitLab does): the note carries the plan instead.
    let notes = w.wait_notes(iid, "the plan in the note", |n| {
        n.iter()
            .any(|n| n.author == BOT && n.body.contains("# terraform_data.api_dev will be created"))
    });
    assert_eq!(
        notes
            .iter()
            .filter(|n| n.body.contains(COMMENT_MARKER))
            .count(),
        1,
        "one sticky note: {notes:#?}"
    );
    let plan = w
        .jobs()
        .into_iter()
        .find(|j| j["operation"] == "plan")
        .expect("the deployer's plan");
    assert_eq!(plan["requested_by"], "gitlab:alice", "{plan}");
    assert_eq!(plan["state"], "succeeded", "{plan}");
    assert!(
        w.gl.statuses(PROJECT, HEAD).is_empty(),
        "no status was taken on the fork's commit"
    );
    let replies = w.replies(iid);
    assert!(
        replies
            .iter()
            .any(|r| r.contains("mallory") && r.contains("deployer")),
        "the fork's author is told which role is missing: {replies:#?}"
    );
}

#[test]
fn an_unmergeable_merge_request_is_not_applied_and_says_why() {
    sortie_testkit::require_aws!();
    let w = World::start("mrconflict");
    w.grant("octocat", "deployer");
    w.apply_before_merge(&["--require-mergeable"]);
    let iid = w.planned(
        MergeRequestSpec::new("octocat", HEAD).change(DiffChange::modified("web/dev/main.tf")),
        1,
    );
    w.gl.set_conflicts(PROJECT, iid, true);
    w.comment(iid, "octocat", "/sortie apply");
    let refusal = w.wait_replies(iid);
    assert!(
        refusal.contains("Not applied") && refusal.to_lowercase().contains("merge"),
        "{refusal}"
    );
    assert!(
        w.jobs().iter().all(|j| j["operation"] != "apply"),
        "no apply was submitted"
    );
}

#[test]
fn a_merge_before_its_apply_under_before_merge_is_named_in_the_note() {
    sortie_testkit::require_aws!();
    let w = World::start("mrmerged");
    w.grant("octocat", "deployer");
    w.apply_before_merge(&[]);
    let iid = w.planned(
        MergeRequestSpec::new("octocat", HEAD).change(DiffChange::modified("web/dev/main.tf")),
        1,
    );
    let merge_sha = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c";
    w.gl.add_commit(
        PROJECT,
        merge_sha,
        &[("web/dev/main.tf", tf("web_dev").as_bytes())],
    );
    w.gl.merge(PROJECT, iid, merge_sha);
    let payload = w.gl.payloads().merge_request(PROJECT, iid, "merge");
    assert_eq!(w.deliver("Merge Request Hook", &payload, SECRET).0, 202);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !w.sticky(iid).contains("merged before its apply") {
        assert!(
            Instant::now() < deadline,
            "the note never named it: {}",
            w.sticky(iid)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        w.jobs().iter().all(|j| j["operation"] != "apply"),
        "nothing is applied after the merge under before_merge"
    );
}

#[test]
fn a_lost_webhook_is_planned_by_the_reconcile_and_a_gitlab_outage_ends_with_one_note() {
    sortie_testkit::require_aws!();
    // A reconcile every 3 s stands for AWS's 5 minutes.
    let w = World::start_with("mrlost", &["--reconcile-every", "3"]);
    w.grant("octocat", "deployer");
    // GitLab answers 502 to everything for a while, and never delivers "open": the
    // reconcile's lists fail and are tried again, and once GitLab is back the merge request
    // is found and planned.
    w.gl.fail_until_cleared(502);
    let iid = w.gl.add_merge_request(
        PROJECT,
        MergeRequestSpec::new("octocat", HEAD)
            .change(DiffChange::modified("web/dev/main.tf"))
            .change(DiffChange::modified("web/prod/main.tf")),
    );
    std::thread::sleep(Duration::from_secs(20));
    assert!(
        w.gl.statuses(PROJECT, HEAD).is_empty(),
        "nothing while GitLab is down"
    );
    w.gl.clear_faults();
    w.wait_statuses("two successful statuses with no webhook", |s| {
        s.len() == 2 && s.iter().all(|s| s.status == "success")
    });
    // Writes settle: the note is edited once more after the statuses complete at most.
    w.wait_notes(iid, "the note naming both environments", |n| {
        n.iter().any(|n| {
            n.author == BOT && n.body.contains("acme/web-dev") && n.body.contains("acme/web-prod")
        })
    });
    std::thread::sleep(Duration::from_secs(4));
    let ours =
        w.gl.notes(PROJECT, iid)
            .into_iter()
            .filter(|n| n.author == BOT)
            .count();
    assert_eq!(ours, 1, "exactly one note");
    let faults = w.gl.requests().iter().filter(|r| r.status >= 500).count();
    assert!(faults > 0, "the outage was met");
}

#[test]
fn an_apply_counts_only_approvals_given_on_the_head_even_where_gitlab_keeps_older_ones() {
    sortie_testkit::require_aws!();
    let w = World::start("mrapprove");
    w.grant("octocat", "deployer");
    w.apply_before_merge(&["--require-approvals", "1"]);
    // GitLab Free keeps approvals across pushes.
    w.gl.set_reset_approvals_on_push(PROJECT, false);
    let iid = w.planned(
        MergeRequestSpec::new("octocat", HEAD).change(DiffChange::modified("web/dev/main.tf")),
        1,
    );
    // A pilot that died before it could revoke its token: one named for an ended plan.
    let ended_plan = w
        .jobs()
        .into_iter()
        .find(|j| j["operation"] == "plan" && j["state"] == "succeeded")
        .expect("the plan ended")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let leftover = w.gl.add_access_token(
        PROJECT,
        &format!("sortie-source-{ended_plan}"),
        &["read_api"],
    );
    // Approved, then a push a minute later: GitLab still lists the approval.
    w.gl.approve(PROJECT, iid, "reviewer", HEAD);
    w.gl.advance_clock(Duration::from_secs(60));
    const NEXT: &str = "8b2d3c4e5f6071829304a5b6c7d8e9f012345678";
    w.gl.add_commit(
        PROJECT,
        NEXT,
        &[("web/dev/main.tf", tf("web_dev").as_bytes())],
    );
    w.gl.push(PROJECT, iid, NEXT, None);
    let pushed = w.gl.payloads().merge_request_push(PROJECT, iid);
    assert_eq!(w.deliver("Merge Request Hook", &pushed, SECRET).0, 202);
    w.wait_statuses_of(NEXT, "the new head's plan", |s| {
        s.len() == 1 && s[0].status == "success"
    });
    assert_eq!(w.gl.approvals(PROJECT, iid).len(), 1, "GitLab kept it");
    w.comment(iid, "octocat", "/sortie apply");
    let refusal = w.wait_replies(iid);
    assert!(
        refusal.contains("Not applied") && refusal.contains("0 of 1 approval"),
        "the older commit's approval does not count: {refusal}"
    );

    // Approved again, on the head: the apply runs Terraform.
    w.gl.advance_clock(Duration::from_secs(60));
    w.gl.approve(PROJECT, iid, "carol", NEXT);
    let approved =
        w.gl.payloads()
            .merge_request_by(PROJECT, iid, "approved", "carol");
    assert_eq!(w.deliver("Merge Request Hook", &approved, SECRET).0, 202);
    w.comment(iid, "octocat", "/sortie apply");
    let deadline = Instant::now() + Duration::from_secs(180);
    let applied = loop {
        let done = w
            .jobs()
            .into_iter()
            .find(|j| j["operation"] == "apply" && j["state"] == "succeeded");
        if let Some(job) = done {
            break job;
        }
        assert!(
            Instant::now() < deadline,
            "never applied: {:#?}\n{}",
            w.jobs(),
            std::fs::read_to_string(w.dev.dir.join("dev.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(applied["requested_by"], "gitlab:octocat", "{applied}");
    assert_eq!(applied["source"]["commit"], NEXT, "{applied}");
    let id = applied["id"].as_str().unwrap();
    assert!(
        w.dev.log(id).contains("terraform_data.web_dev"),
        "the apply ran Terraform"
    );
    // The report of a job's end revoked the dead pilot's token; every other token was
    // revoked by its own pilot.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !w.gl.access_tokens(PROJECT).iter().all(|t| t.revoked) {
        assert!(
            Instant::now() < deadline,
            "a source token outlived its job: {:#?}",
            w.gl.access_tokens(PROJECT)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(w
        .gl
        .access_tokens(PROJECT)
        .iter()
        .any(|t| t.token == leftover && t.revoked));
}
