//! The `eks` launcher's pure parts: the Job built from a runner's configuration, the
//! `pod_template` overlay, and how a Job's status becomes the job's outcome.

use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::{
    task_outcome, EnvPath, Job, JobId, JobRequest, JobState, Operation, RunnerConfiguration,
    RunnerId, RunnerSpec,
};
use sortie_launch::eks::job::{build_job, env_label, label_value, RUNNER_CONTAINER};
use sortie_launch::eks::status::job_status;
use sortie_launch::{LaunchError, LaunchSpec, TaskStatus};

const RUNNER: &str = r#"
runner_configuration:
  type: eks
  role_arn: arn:aws:iam::123456789012:role/launcher
  external_id: ext-123456
  region: eu-west-1
  cluster: prod
  timeout_seconds: 3600
  job:
    namespace: sortie-jobs
    service_account: terraform
    image: registry.example.com/sortie-runner:1.2.3
    image_pull_policy: IfNotPresent
    image_pull_secrets: [regcred]
    node_selector: { karpenter.sh/capacity-type: on-demand }
    tolerations: [{ key: dedicated, operator: Equal, value: terraform, effect: NoSchedule }]
    annotations: { karpenter.sh/do-not-disrupt: "true" }
    resources: { requests: { cpu: 500m, memory: 1Gi }, limits: { memory: 2Gi } }
    ttl_seconds_after_finished: 600
    active_deadline_seconds: 7200
    env: { TF_LOG: INFO, TF_VAR_db: "overridden by the secret" }
    secrets: { TF_VAR_db: db-creds/password }
state_storage_configuration: { type: kubernetes }
"#;

fn job_on(runner_yaml: &str) -> Job {
    let mut job = Job::new(
        JobId::new("01jnx6v4k2m8q9r3s5t7w0y1za"),
        EnvPath::parse("acme/payments/prod").unwrap(),
        RunnerId::parse("acme/eks").unwrap(),
        JobRequest::parse(r#"{"operation":"apply","files":{"main.tf":""}}"#).unwrap(),
        "alice".to_string(),
        Utc::now(),
    );
    job.runner_spec = Some(RunnerSpec::parse(runner_yaml).expect("a valid runner"));
    job
}

fn eks(job: &Job) -> &sortie_core::runner::EksRunner {
    match &job.runner_spec.as_ref().unwrap().runner_configuration {
        RunnerConfiguration::Eks(c) => c,
        other => panic!("{other:?}"),
    }
}

fn spec(job: &Job) -> LaunchSpec<'_> {
    LaunchSpec {
        job,
        token: "job-token-1",
        api_url: "https://api.sortie.example",
        attempt: 2,
    }
}

fn built(job: &Job) -> Value {
    serde_json::to_value(build_job(eks(job), &spec(job)).expect("a Job")).unwrap()
}

#[test]
fn the_job_matches_the_runner_configuration_field_by_field() {
    let job = job_on(RUNNER);
    let k = built(&job);
    assert_eq!(k["apiVersion"], "batch/v1");
    assert_eq!(k["kind"], "Job");
    // The job, its environment, organisation and runner: the launcher-role session is
    // shared by many jobs and names none of them, so the Job itself says whose it is.
    let labels = json!({
        "sortie.dev/job-id": "01jnx6v4k2m8q9r3s5t7w0y1za",
        "sortie.dev/attempt": "2",
        "sortie.dev/env": "acme.payments.prod",
        "sortie.dev/org": "acme",
        "sortie.dev/runner": "acme.eks",
    });
    assert_eq!(
        k["metadata"],
        json!({
            "generateName": "sortie-t7w0y1za-",
            "namespace": "sortie-jobs",
            "labels": labels,
            "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                "sortie.dev/env": "acme/payments/prod",
                "sortie.dev/runner": "acme/eks",
            },
        })
    );
    let s = &k["spec"];
    assert_eq!(s["backoffLimit"], 0);
    assert_eq!(s["ttlSecondsAfterFinished"], 600);
    assert_eq!(s["activeDeadlineSeconds"], 7200);
    let t = &s["template"];
    assert_eq!(t["metadata"]["labels"], labels);
    let pod = &t["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["serviceAccountName"], "terraform");
    assert_eq!(
        pod["automountServiceAccountToken"], true,
        "kubernetes state storage needs the service account's token"
    );
    assert_eq!(
        pod["nodeSelector"],
        json!({"karpenter.sh/capacity-type": "on-demand"})
    );
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "dedicated", "operator": "Equal", "value": "terraform", "effect": "NoSchedule"}])
    );
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["name"], RUNNER_CONTAINER);
    assert_eq!(c["image"], "registry.example.com/sortie-runner:1.2.3");
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}})
    );
    assert_eq!(
        c["securityContext"],
        json!({"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}})
    );
    assert_eq!(
        c["env"],
        json!([
            {"name": "TF_LOG", "value": "INFO"},
            {"name": "TF_VAR_db", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password", "optional": false}}},
            {"name": "SORTIE_JOB_ID", "value": "01jnx6v4k2m8q9r3s5t7w0y1za"},
            {"name": "SORTIE_JOB_TOKEN", "value": "job-token-1"},
            {"name": "SORTIE_API_URL", "value": "https://api.sortie.example"},
            {"name": "SORTIE_GROUP", "value": "acme/payments"},
            {"name": "SORTIE_ENVIRONMENT", "value": "acme/payments/prod"},
            {"name": "SORTIE_OPERATION", "value": "apply"},
            {"name": "SORTIE_REQUESTED_BY", "value": "alice"},
        ]),
        "a secret is a secretKeyRef, never a value, and wins over a plain variable of its name; the job's built-in variables come last"
    );
    assert!(
        !k.to_string().contains("overridden by the secret"),
        "the plain value a secret replaces is not in the Job"
    );
}

#[test]
fn the_hardened_defaults_hold_unless_the_runner_asks_and_the_image_has_a_default() {
    let minimal = |automount: bool| {
        format!("runner_configuration:\n  type: eks\n  role_arn: arn:aws:iam::123456789012:role/l\n  external_id: ext-123456\n  region: us-east-1\n  cluster: c\n  job: {{ namespace: ns, service_account: sa, automount_service_account_token: {automount} }}\nstate_storage_configuration: {{ type: s3, bucket: state-bucket, region: us-east-1 }}\n")
    };
    let off = built(&job_on(&minimal(false)));
    assert_eq!(
        off["spec"]["template"]["spec"]["automountServiceAccountToken"],
        false
    );
    let job = job_on(&minimal(true));
    let k = built(&job);
    let pod = &k["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert_eq!(
        pod["containers"][0]["image"],
        sortie_core::runner::DEFAULT_EKS_IMAGE
    );
    assert!(k["spec"].get("ttlSecondsAfterFinished").is_none());
    assert!(k["spec"].get("activeDeadlineSeconds").is_none());
    assert!(pod.get("nodeSelector").is_none() && pod.get("tolerations").is_none());
    assert!(pod["containers"][0].get("resources").is_none());
}

#[test]
fn the_pod_template_overlay_merges_containers_by_name_and_replaces_atomic_lists() {
    let overlay = r#"
    pod_template:
      metadata:
        labels: { team: payments, sortie.dev/job-id: forged }
      spec:
        restartPolicy: OnFailure
        nodeSelector: { pool: terraform }
        tolerations: [{ operator: Exists }]
        imagePullSecrets: [{ name: other-cred }]
        volumes: [{ name: cache, emptyDir: {} }]
        containers:
          - name: sortie-runner
            image: my-own-registry.com/sortie-runner:9.9.9
            env:
              - { name: EXTRA, value: "1" }
              - { name: SORTIE_JOB_TOKEN, value: stolen }
              - { name: SORTIE_ENVIRONMENT, value: forged }
              - { name: TF_LOG, value: DEBUG }
            volumeMounts: [{ name: cache, mountPath: /cache }]
          - name: proxy
            image: envoyproxy/envoy:v1.30
"#;
    let yaml = RUNNER.replace(
        "    secrets: { TF_VAR_db: db-creds/password }\n",
        &format!("    secrets: {{ TF_VAR_db: db-creds/password }}\n{overlay}"),
    );
    let job = job_on(&yaml);
    let k = built(&job);
    let t = &k["spec"]["template"];
    let pod = &t["spec"];
    // Mappings merge key by key; Sortie's labels are set again after the overlay.
    assert_eq!(t["metadata"]["labels"]["team"], "payments");
    assert_eq!(
        t["metadata"]["labels"]["sortie.dev/job-id"],
        "01jnx6v4k2m8q9r3s5t7w0y1za"
    );
    assert_eq!(pod["restartPolicy"], "Never", "set again after the overlay");
    // Atomic: the overlay's replaces the generated.
    assert_eq!(pod["nodeSelector"], json!({"pool": "terraform"}));
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
    // Keyed by name: merged, a new name appended.
    assert_eq!(
        pod["imagePullSecrets"],
        json!([{"name": "regcred"}, {"name": "other-cred"}])
    );
    assert_eq!(pod["volumes"], json!([{"name": "cache", "emptyDir": {}}]));
    let containers = pod["containers"].as_array().unwrap();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec![RUNNER_CONTAINER, "proxy"]);
    let runner = &containers[0];
    assert_eq!(runner["image"], "my-own-registry.com/sortie-runner:9.9.9");
    assert_eq!(
        runner["imagePullPolicy"], "IfNotPresent",
        "kept from the runner"
    );
    assert_eq!(
        runner["volumeMounts"],
        json!([{"name": "cache", "mountPath": "/cache"}])
    );
    assert_eq!(
        runner["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    let env: Vec<(String, Value)> = runner["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), v.clone()))
        .collect();
    let value = |name: &str| {
        env.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v["value"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(value("TF_LOG"), vec![json!("DEBUG")], "env merged by name");
    assert_eq!(value("EXTRA"), vec![json!("1")]);
    assert_eq!(
        value("SORTIE_JOB_TOKEN"),
        vec![json!("job-token-1")],
        "Sortie's own variables cannot be overridden"
    );
    assert_eq!(
        value("SORTIE_ENVIRONMENT"),
        vec![json!("acme/payments/prod")],
        "nor the job's built-in ones"
    );
    assert_eq!(containers[1]["image"], "envoyproxy/envoy:v1.30");
}

#[test]
fn a_job_that_cannot_be_built_fails_its_launch_in_words() {
    let bad_overlay = RUNNER.replace(
        "    secrets: { TF_VAR_db: db-creds/password }\n",
        "    secrets: { TF_VAR_db: db-creds/password }\n    pod_template: { spec: { containers: \"not a list\" } }\n",
    );
    let job = job_on(&bad_overlay);
    match build_job(eks(&job), &spec(&job)) {
        Err(LaunchError::Fatal(words)) => {
            assert!(
                words.contains("pod_template is not a Kubernetes PodTemplateSpec"),
                "{words}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A job's own secret given as an ARN: a pod cannot read it.
    let mut job = job_on(RUNNER);
    job.request.secret_refs.insert(
        "TF_VAR_key".into(),
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:key".into(),
    );
    match build_job(eks(&job), &spec(&job)) {
        Err(LaunchError::Fatal(words)) => {
            assert!(
                words.contains("TF_VAR_key") && words.contains("<secret name>/<key>"),
                "{words}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_environment_label_is_always_a_valid_label_value() {
    let long = format!("acme/{}/prod", ["very-long-team-name"; 5].join("/"));
    let label = env_label(&EnvPath::parse(&long).unwrap());
    assert!(sortie_core::limits::is_label_value(&label), "{label}");
    assert!(label.len() <= 63);
    assert_eq!(
        env_label(&EnvPath::parse("acme/payments/prod").unwrap()),
        "acme.payments.prod"
    );
    // A runner id deeper than a label value allows: cut, hashed, still valid and distinct.
    let group = ["very-long-team-name"; 5].join("/");
    let (one, two) = (
        label_value(&format!("acme/{group}/runner-one")),
        label_value(&format!("acme/{group}/runner-two")),
    );
    for l in [&one, &two] {
        assert!(sortie_core::limits::is_label_value(l), "{l}");
    }
    assert_ne!(one, two);
}

fn kube_job(conditions: Value) -> k8s_openapi::api::batch::v1::Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "sortie-t7w0y1za-abcde", "namespace": "sortie-jobs"},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

fn pod(phase: &str, state: Value) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sortie-t7w0y1za-abcde-xyz12"},
        "status": {"phase": phase, "containerStatuses": [{
            "name": RUNNER_CONTAINER, "image": "img", "imageID": "", "ready": false,
            "restartCount": 0, "state": state,
        }]},
    }))
    .unwrap()
}

fn outcome(status: TaskStatus) -> (JobState, String) {
    match status {
        TaskStatus::Stopped(stop) => {
            let o = task_outcome(Operation::Apply, &stop);
            (o.state, o.reason)
        }
        other => panic!("not stopped: {other:?}"),
    }
}

#[test]
fn complete_failed_oom_killed_and_image_pull_back_off_each_map_to_the_right_outcome() {
    let complete = kube_job(json!([{"type": "Complete", "status": "True"}]));
    let done = pod(
        "Succeeded",
        json!({"terminated": {"exitCode": 0, "reason": "Completed"}}),
    );
    let (state, reason) = outcome(job_status(&complete, &[done]));
    assert_eq!(state, JobState::Succeeded, "{reason}");

    let failed =
        kube_job(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]));
    let exited = pod(
        "Failed",
        json!({"terminated": {"exitCode": 1, "reason": "Error"}}),
    );
    let (state, reason) = outcome(job_status(&failed, &[exited]));
    assert_eq!(state, JobState::Failed);
    assert!(reason.contains("exited with code 1"), "{reason}");

    let oom = pod(
        "Failed",
        json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}),
    );
    let (state, reason) = outcome(job_status(&failed, &[oom]));
    assert_eq!(state, JobState::Failed);
    assert!(
        reason.contains("out of memory") && reason.contains("OOMKilled"),
        "{reason}"
    );

    let pending = kube_job(json!([]));
    let stuck = pod(
        "Pending",
        json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope:1\""}}),
    );
    let (state, reason) = outcome(job_status(&pending, &[stuck]));
    assert_eq!(state, JobState::Failed);
    assert!(
        reason.contains("failed to start")
            && reason.contains("ImagePullBackOff: Back-off pulling image"),
        "{reason}"
    );

    let deadline = kube_job(
        json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]),
    );
    let (state, reason) = outcome(job_status(&deadline, &[]));
    assert_eq!(state, JobState::Failed);
    assert!(
        reason.contains("DeadlineExceeded: Job was active longer"),
        "{reason}"
    );

    // Still creating, or running: not stopped.
    let creating = pod(
        "Pending",
        json!({"waiting": {"reason": "ContainerCreating"}}),
    );
    assert_eq!(job_status(&pending, &[creating]), TaskStatus::Running);
    let running = pod(
        "Running",
        json!({"running": {"startedAt": "2026-11-23T10:00:00Z"}}),
    );
    assert_eq!(job_status(&pending, &[running]), TaskStatus::Running);
    assert_eq!(job_status(&pending, &[]), TaskStatus::Running);
    // A pod that ended before the Job controller said so.
    let ended = pod(
        "Failed",
        json!({"terminated": {"exitCode": 2, "reason": "Error"}}),
    );
    let (state, reason) = outcome(job_status(&pending, &[ended]));
    assert_eq!(state, JobState::Failed);
    assert!(reason.contains("exited with code 2"), "{reason}");
}
