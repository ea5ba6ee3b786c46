//! The job lifecycle on Fargate against moto, through the real SDK and a loopback
//! fault proxy that counts and injects at the request level.

use crate::common;

use std::sync::Arc;

use chrono::{Duration, Utc};
use common::{World, EXTERNAL_ID, ROLE};
use sortie_core::{JobState, TaskStop};
use sortie_launch::LaunchSpec;
use sortie_lifecycle::{MessageDisposition, SweepSettings};
use sortie_store::{EnvironmentStore, JobStore};

/// RunTask calls made for a job: distinct SDK invocations (an SDK-level retry of one call
/// shares its invocation id and its clientToken, so it is still one launch).
fn launches(w: &World, job_id: &str) -> usize {
    let mut ids = std::collections::BTreeSet::new();
    for r in w.proxy.requests_for("RunTask") {
        if r.json().unwrap()["startedBy"] == format!("sortie/{job_id}") {
            ids.insert(
                r.header("amz-sdk-invocation-id")
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    ids.len()
}

#[tokio::test]
async fn invariant_2_the_same_message_three_times_and_two_racing_dispatchers_give_one_run_task() {
    sortie_testkit::require_aws!();
    let w = Arc::new(World::new().await);
    let env = w.environment("acme/payments/prod", "").await;
    let (job, took) = w.submit(&env, "apply", "").await;
    assert!(took);
    for _ in 0..3 {
        assert_eq!(
            w.engine.dispatch(&World::body(&job.id), 1).await,
            MessageDisposition::Done
        );
    }
    assert_eq!(launches(&w, &job.id), 1, "three deliveries, one launch");
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::Running);
    let task = rec.task.clone().unwrap();
    assert!(rec.token_hash.is_some());

    // Two dispatchers racing on one job.
    let env2 = w.environment("acme/payments/eu", "").await;
    let (job2, _) = w.submit(&env2, "plan", "").await;
    let (a, b) = (w.clone(), w.clone());
    let (id_a, id_b) = (job2.id.clone(), job2.id.clone());
    let (ra, rb) = tokio::join!(
        tokio::spawn(async move { a.engine.dispatch(&World::body(&id_a), 1).await }),
        tokio::spawn(async move { b.engine.dispatch(&World::body(&id_b), 1).await })
    );
    assert_eq!(
        (ra.unwrap(), rb.unwrap()),
        (MessageDisposition::Done, MessageDisposition::Done)
    );
    assert_eq!(
        launches(&w, &job2.id),
        1,
        "one launch for the second job, not two"
    );

    // The RunTask request carried what the design requires.
    let run = &w.proxy.requests_for("RunTask")[0];
    let body = run.json().unwrap();
    assert_eq!(body["startedBy"], format!("sortie/{}", job.id));
    assert_eq!(
        body["clientToken"],
        format!("{}-1", job.id),
        "the first launch attempt's token"
    );
    assert_eq!(
        body["capacityProviderStrategy"][0]["capacityProvider"],
        "FARGATE"
    );
    assert_eq!(
        body["networkConfiguration"]["awsvpcConfiguration"]["securityGroups"][0],
        w.security_group.as_str()
    );
    assert_eq!(body["propagateTags"], "TASK_DEFINITION");
    let env_vars = body["overrides"]["containerOverrides"][0]["environment"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = env_vars
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"SORTIE_JOB_TOKEN")
            && names.contains(&"SORTIE_API_URL")
            && names.contains(&"SORTIE_JOB_ID")
    );
    // The token the runner got is the one whose hash the claim recorded before the launch.
    let sent = env_vars
        .iter()
        .find(|e| e["name"] == "SORTIE_JOB_TOKEN")
        .unwrap()["value"]
        .as_str()
        .unwrap();
    assert_eq!(
        rec.token_hash.as_deref(),
        Some(sortie_core::tokens::sha256_hex(sent.as_bytes()).as_str())
    );
    let claim_write = w
        .proxy
        .requests()
        .iter()
        .position(|r| r.is("UpdateItem") && r.body_str().contains("token_hash"))
        .expect("the claim records the token hash");
    let run_task = w
        .proxy
        .requests()
        .iter()
        .position(|r| r.is("RunTask"))
        .unwrap();
    assert!(
        claim_write < run_task,
        "the hash is written before the launch"
    );
    let tags: Vec<(String, String)> = body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["key"].as_str().unwrap().into(),
                t["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(tags.contains(&("sortie:job".into(), job.id.to_string())));
    assert!(tags.contains(&("sortie:env".into(), "acme/payments/prod".into())));
    // Exactly one task exists for the job, found by startedBy.
    let listed = w
        .ecs
        .list_tasks()
        .cluster(&w.cluster)
        .started_by(format!("sortie/{}", job.id))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.task_arns(), [task]);
}

/// The `Tags.member.N` of an AssumeRole form, as a map.
fn session_tags(
    form: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    (1..)
        .map_while(|i| {
            Some((
                form.get(&format!("Tags.member.{i}.Key"))?.clone(),
                form.get(&format!("Tags.member.{i}.Value"))?.clone(),
            ))
        })
        .collect()
}

/// The tags of a RunTask request body, as a map.
fn run_task_tags(body: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["key"].as_str().unwrap().to_string(),
                t["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn invariant_6_one_cached_session_per_org_and_runner_tagged_with_them_only_and_each_task_with_its_own_job(
) {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    // Two jobs of two environments, one runner: one session, assumed for the first.
    let prod = w.environment("acme/payments/prod", "").await;
    let dev = w.environment("acme/web/dev", "").await;
    let (first, _) = w.submit(&prod, "plan", "").await;
    w.engine.dispatch(&World::body(&first.id), 1).await;
    let (second, _) = w.submit(&dev, "plan", "").await;
    w.engine.dispatch(&World::body(&second.id), 1).await;
    let calls = w.proxy.requests_for("AssumeRole");
    assert_eq!(calls.len(), 1, "cached until near expiry");
    let form = calls[0].form();
    assert_eq!(form["RoleArn"], ROLE);
    assert_eq!(form["ExternalId"], EXTERNAL_ID);
    assert_eq!(form["DurationSeconds"], "900");
    // The cached session names and carries only what every job it serves shares.
    let name = &form["RoleSessionName"];
    assert_eq!(name, "sortie-acme@acme.fargate");
    assert!(!name.contains(first.id.as_str()), "{name}");
    assert_eq!(
        session_tags(&form),
        std::collections::BTreeMap::from([
            ("sortie:org".to_string(), "acme".to_string()),
            ("sortie:runner".to_string(), "acme/fargate".to_string()),
        ]),
        "no sortie:job or sortie:env on a session shared by many jobs"
    );
    // Each task carries its own job, environment, organisation and runner.
    let runs = w.proxy.requests_for("RunTask");
    assert_eq!(runs.len(), 2);
    for (run, job, env) in [
        (&runs[0], &first, "acme/payments/prod"),
        (&runs[1], &second, "acme/web/dev"),
    ] {
        let want = std::collections::BTreeMap::from([
            ("sortie:job".to_string(), job.id.to_string()),
            ("sortie:env".to_string(), env.to_string()),
            ("sortie:org".to_string(), "acme".to_string()),
            ("sortie:runner".to_string(), "acme/fargate".to_string()),
        ]);
        assert_eq!(run_task_tags(&run.json().unwrap()), want);
        // And ECS keeps them on the task.
        let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
        let kept: std::collections::BTreeMap<String, String> = w
            .ecs
            .list_tags_for_resource()
            .resource_arn(task.as_str())
            .send()
            .await
            .unwrap()
            .tags()
            .iter()
            .filter_map(|t| Some((t.key.clone()?, t.value.clone()?)))
            .filter(|(k, _)| k.starts_with("sortie:"))
            .collect();
        assert_eq!(kept, want, "the task's own tags");
    }
    // Another runner on the same role is another session: the cache key is the tags.
    let spec = w.runner_spec("");
    let other = w
        .environment_on("acme/web/qa", "acme/other", spec.clone())
        .await;
    let (third, _) = w.submit_on(&other, "acme/other", spec, "plan").await;
    w.engine.dispatch(&World::body(&third.id), 1).await;
    let calls = w.proxy.requests_for("AssumeRole");
    assert_eq!(
        calls.len(),
        2,
        "one session per (role, ExternalId, org, runner)"
    );
    let form = calls[1].form();
    assert_eq!(form["RoleSessionName"], "sortie-acme@acme.other");
    assert_eq!(session_tags(&form)["sortie:runner"], "acme/other");
    assert_eq!(w.proxy.count("RunTask"), 3);
}

#[tokio::test]
async fn invariant_4_throttling_is_retried_and_access_denied_fails_at_once_with_the_message() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    let (waiting, took) = w.submit(&env, "plan", "").await;
    assert!(!took);
    // The SDK itself retries throttling (3 attempts); Sortie's backoff takes over after that.
    w.proxy
        .inject("RunTask", 3, 400, "ThrottlingException", "Rate exceeded");
    // One retry path (issue 25 item 1): this message is done, and one new message,
    // delayed by the backoff (2 s for the first refusal), carries the next attempt.
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    let sends: Vec<_> = w
        .proxy
        .requests_for("SendMessage")
        .into_iter()
        .filter(|r| r.body_str().contains(job.id.as_str()))
        .collect();
    assert_eq!(sends.len(), 1, "one message carries the next attempt");
    assert_eq!(sends[0].json().unwrap()["DelaySeconds"], 2);
    assert_eq!(
        w.state(&job.id).await,
        JobState::Queued,
        "back in the queue, still holding the lock"
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    assert_eq!(w.state(&job.id).await, JobState::Running);
    assert_eq!(
        w.proxy.count("RunTask"),
        4,
        "three throttled attempts, then one launch"
    );

    // AccessDenied fails at once, quoting AWS, releases the environment and sends the next job.
    let env2 = w.environment("acme/payments/eu", "").await;
    let (denied, _) = w.submit(&env2, "apply", "").await;
    let (next, _) = w.submit(&env2, "plan", "").await;
    w.queued_ids().await;
    w.proxy.inject("RunTask", 1, 400, "AccessDeniedException", "User: arn:aws:sts::123456789012:assumed-role/sortie-launcher-test is not authorized to perform: ecs:RunTask");
    assert_eq!(
        w.engine.dispatch(&World::body(&denied.id), 1).await,
        MessageDisposition::Done
    );
    let rec = w.store.get_job(&denied.id).await.unwrap();
    assert_eq!(rec.job.state, JobState::Failed);
    assert!(rec.job.reason().contains("\"RunTask failed: AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/sortie-launcher-test is not authorized"), "{}", rec.job.reason());
    assert_eq!(
        w.store
            .get_environment(&env2)
            .await
            .unwrap()
            .item
            .active_job
            .as_deref(),
        Some(next.id.as_str())
    );
    assert_eq!(
        w.queued_ids().await,
        vec![next.id.clone()],
        "the next queued job is sent"
    );
    let _ = waiting;
}

#[tokio::test]
async fn invariant_2_a_crash_between_run_task_and_the_record_leaves_an_orphan_that_the_sweeper_adopts(
) {
    sortie_testkit::require_aws!();
    let w = World::with_settings(SweepSettings {
        dispatch_lease: Duration::zero(),
        ..Default::default()
    })
    .await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "apply", "").await;
    // The dispatcher claims and launches, then dies before recording the task.
    let claimed = w
        .store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed by dispatch",
            Default::default(),
        )
        .await
        .unwrap();
    let task = w
        .engine
        .launcher
        .launch(&LaunchSpec {
            job: &claimed.job,
            token: "t",
            api_url: "x",
            attempt: 1,
        })
        .await
        .unwrap();
    // The message is redelivered: no second launch.
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 2).await,
        MessageDisposition::Done
    );
    let report = w.engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(report.adopted, 1, "{report:?}");
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert_eq!(
        (rec.job.state, rec.task.as_deref()),
        (JobState::Running, Some(task.as_str()))
    );
    assert!(rec.job.reason().contains("adopted orphan task"));
    assert_eq!(w.proxy.count("RunTask"), 1, "adopted, never launched twice");
    // A second pass changes nothing.
    assert_eq!(w.engine.sweep(Utc::now()).await.unwrap().adopted, 0);
}

#[tokio::test]
async fn a_dispatch_with_no_task_after_the_lease_is_requeued_and_launched_again() {
    sortie_testkit::require_aws!();
    let w = World::with_settings(SweepSettings {
        dispatch_lease: Duration::zero(),
        ..Default::default()
    })
    .await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, _) = w.submit(&env, "plan", "").await;
    w.store
        .transition_job(
            &job.id,
            JobState::Queued,
            JobState::Dispatching,
            Utc::now(),
            "claimed by dispatch",
            Default::default(),
        )
        .await
        .unwrap();
    w.queued_ids().await;
    let report = w.engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(report.requeued, 1);
    assert_eq!(w.state(&job.id).await, JobState::Queued);
    assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
    assert_eq!(
        w.engine.dispatch(&World::body(&job.id), 1).await,
        MessageDisposition::Done
    );
    assert_eq!(w.state(&job.id).await, JobState::Running);
}

#[tokio::test]
async fn invariant_3_a_lost_send_is_resent_and_a_lost_event_is_resolved_by_describe_tasks() {
    sortie_testkit::require_aws!();
    let w = World::with_settings(SweepSettings {
        resend_after: Duration::zero(),
        silence: Duration::zero(),
        ..Default::default()
    })
    .await;
    let env = w.environment("acme/payments/prod", "").await;
    let (job, took) = w.submit(&env, "apply", "").await;
    assert!(took);
    // The API's send was lost: the sweeper re-sends it.
    let report = w
        .engine
        .sweep(Utc::now() + Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(report.resent, 1);
    assert_eq!(w.queued_ids().await, vec![job.id.clone()]);
    w.engine.dispatch(&World::body(&job.id), 1).await;
    let task = w.store.get_job(&job.id).await.unwrap().task.unwrap();
    // The task stops, and its event is lost.
    w.ecs
        .stop_task()
        .cluster(&w.cluster)
        .task(&task)
        .reason("Essential container in task exited")
        .send()
        .await
        .unwrap();
    let report = w.engine.sweep(Utc::now()).await.unwrap();
    assert_eq!(report.resolved, 1, "{report:?}");
    assert!(w.proxy.count("DescribeTasks") >= 1);
    let rec = w.store.get_job(&job.id).await.unwrap();
    assert!(rec.job.state.is_terminal());
    assert!(
        w.store
            .get_environment(&env)
            .await
            .unwrap()
            .item
            .active_job
            .is_none(),
        "released"
    );
}

#[tokio::test]
async fn poison_and_unknown_jobs_are_poison_and_a_spot_plan_runs_on_fargate_spot() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    assert!(matches!(
        w.engine.dispatch("not json", 1).await,
        MessageDisposition::Poison(_)
    ));
    assert!(matches!(
        w.engine
            .dispatch(r#"{"job_id":"01nosuchjob0000000000000000"}"#, 1)
            .await,
        MessageDisposition::Poison(_)
    ));
    assert!(matches!(
        w.engine.dispatch(r#"{"job":"x"}"#, 1).await,
        MessageDisposition::Poison(_)
    ));
    let env = w
        .environment("acme/payments/prod", "  capacity_provider: FARGATE_SPOT\n")
        .await;
    let (plan, _) = w
        .submit(&env, "plan", "  capacity_provider: FARGATE_SPOT\n")
        .await;
    w.engine.dispatch(&World::body(&plan.id), 1).await;
    let body = w.proxy.requests_for("RunTask")[0].json().unwrap();
    assert_eq!(
        body["capacityProviderStrategy"][0]["capacityProvider"],
        "FARGATE_SPOT"
    );
    let _ = TaskStop::default();
}

/// Deliver 4: the runner's `secrets`, the job's `secret_refs` and a git source's
/// `credentials_secret` reach the container as ECS `secrets` of a derived task definition
/// (`valueFrom` = the ARN), registered once per secret set; RunTask's overrides carry no ARN.
#[tokio::test]
async fn secrets_become_value_from_arns_of_a_derived_task_definition_and_never_plain_env() {
    sortie_testkit::require_aws!();
    let w = World::new().await;
    let runner_secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:runner-token-AbCdEf";
    let extra = format!("  secrets:\n    RUNNER_TOKEN: {runner_secret}\n");
    let env = w.environment("acme/payments/prod", &extra).await;
    let job_secret = "arn:aws:ssm:us-east-1:123456789012:parameter/acme/db-password";
    let git_secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:git-AbCdEf";
    let submit = |id: String| {
        let request = sortie_core::JobRequest::parse(&format!(
            r#"{{"operation":"plan","source":{{"type":"git","url":"https://git.example.com/acme/infra.git","credentials_secret":"{git_secret}"}},"secret_refs":{{"TF_VAR_db_password":"{job_secret}"}}}}"#
        ))
        .unwrap();
        let mut job = sortie_core::Job::new(
            id,
            env.clone(),
            sortie_core::RunnerId::parse("acme/fargate").unwrap(),
            request,
            "alice".into(),
            Utc::now(),
        );
        job.runner_spec = Some(w.runner_spec(&extra));
        job
    };
    let job = submit(sortie_core::tokens::new_id());
    assert!(w.store.submit_job(&job, None).await.unwrap().took_lock);
    w.engine.dispatch(&World::body(&job.id), 1).await;

    let registered = w.proxy.requests_for("RegisterTaskDefinition");
    assert_eq!(registered.len(), 1, "one derived task definition");
    let body = registered[0].json().unwrap();
    let family = body["family"].as_str().unwrap();
    assert!(family.contains("-sortie-"), "{family}");
    assert!(family.len() <= 255);
    let runner = body["containerDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "runner")
        .unwrap();
    let secrets: std::collections::BTreeMap<String, String> = runner["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["valueFrom"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        secrets,
        [
            ("RUNNER_TOKEN", runner_secret),
            ("SORTIE_GIT_CREDENTIALS", git_secret),
            ("TF_VAR_db_password", job_secret),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    );
    let run = w.proxy.requests_for("RunTask")[0].json().unwrap();
    assert!(
        run["taskDefinition"].as_str().unwrap().contains(family),
        "RunTask runs the derived family: {run}"
    );
    let overrides = run["overrides"].to_string();
    for arn in [runner_secret, job_secret, git_secret] {
        assert!(
            !overrides.contains(arn),
            "{arn} in the overrides: {overrides}"
        );
    }
    assert!(!overrides.contains("SORTIE_SECRET_REFS"), "{overrides}");

    // The same secret set again: no second registration.
    let env2 = w.environment("acme/web/dev", &extra).await;
    let mut job2 = submit(sortie_core::tokens::new_id());
    job2.environment = env2;
    w.store.submit_job(&job2, None).await.unwrap();
    w.engine.dispatch(&World::body(&job2.id), 1).await;
    assert_eq!(w.proxy.count("RegisterTaskDefinition"), 1, "cached");
    assert_eq!(w.proxy.count("RunTask"), 2);
}
