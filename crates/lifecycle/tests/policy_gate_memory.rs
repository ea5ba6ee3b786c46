//! Issue 41 item 5's proof: the policy gate ends a job whose `plan.json` is 30 MiB (20,000
//! resources) in a process capped at 128 MiB of address space, as a 128 MB Lambda function
//! would have to, and evaluates it in a process given the gating functions' memory figure;
//! the peak resident set of each is reported.
//!
//! `scripts/with-moto.sh cargo test -p sortie-lifecycle --test policy_gate_memory`. The test (this
//! binary's `main`) writes the plan to S3 on moto, then runs this same binary again as the
//! gate's process, under `prlimit --as=<cap>` and `/usr/bin/time`, with
//! `MALLOC_ARENA_MAX=1` and a current-thread runtime: RLIMIT_AS counts address space, not
//! memory used, and glibc reserves 64 MiB of it for each thread's malloc arena (the parser
//! runs on one blocking thread, with a 2 MiB stack). The child reads the plan through the
//! real S3 client (HEAD, then ranges streamed into the parser) and a mandatory set denies
//! the one public object among the 20,000 (`on_unavailable: fail`).
//!
//! regorus's value of a plan is about five times its JSON (157 MiB for this one), so a
//! 128 MB function cannot hold it: there the gate reads the size alone and the job ends
//! failed by `on_unavailable`, saying why, in bounded memory; at 512 MB it is evaluated.

use std::process::{Command, ExitCode};
use std::sync::Arc;

use serde_json::{json, Value};

/// The cap on the gate's process: 128 MiB of address space.
const CAP_BYTES: u64 = 128 * 1024 * 1024;
/// The plan: 20,000 resources in about 30 MiB of JSON.
const RESOURCES: usize = 20_000;
const CHILD: &str = "SORTIE_GATE_MEMORY_CHILD";
/// A Fargate runner (never launched here).
const RUNNER_SPEC: &str = "runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: sortie-ext-7f3a
  region: us-east-1
  cluster: runners
  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1
  container_name: runner
  subnets: [subnet-0123456789abcdef0]
  security_groups: [sg-0123456789abcdef0]
state_storage_configuration:
  type: s3
  bucket: acme-state
  region: us-east-1
";

fn main() -> ExitCode {
    match std::env::var(CHILD) {
        Ok(spec) => child(&spec),
        Err(_) => parent(),
    }
}

/// One resource of the plan, in `resource_changes` and in `planned_values`: about 1.5 KB.
fn resource(i: usize) -> (Value, Value) {
    let acl = if i == 12_345 {
        "public-read"
    } else {
        "private"
    };
    let after = json!({
        "bucket": format!("acme-data-{:05}", i % 97),
        "key": format!("objects/{i:05}/data.json"),
        "acl": acl,
        "content_type": "application/json",
        "storage_class": "STANDARD",
        "server_side_encryption": "aws:kms",
        "tags": {"team": "payments", "cost_center": format!("cc-{}", i % 13), "index": i.to_string()},
        "metadata": {"owner": "platform", "purpose": format!("{i:05}-{}", "x".repeat(194 + i % 40))},
    });
    let address = format!("aws_s3_object.data[{i}]");
    let change = json!({
        "address": address, "mode": "managed", "type": "aws_s3_object", "name": "data",
        "index": i, "provider_name": "registry.terraform.io/hashicorp/aws",
        "change": {
            "actions": ["create"], "before": null, "after": after.clone(),
            "after_unknown": {"id": true, "etag": true, "version_id": true, "tags_all": true},
            "before_sensitive": false, "after_sensitive": {"tags": {}, "metadata": {}},
        },
    });
    let planned = json!({
        "address": address, "mode": "managed", "type": "aws_s3_object", "name": "data",
        "index": i, "provider_name": "registry.terraform.io/hashicorp/aws",
        "schema_version": 0, "values": after, "sensitive_values": {"tags": {}, "metadata": {}},
    });
    (change, planned)
}

/// `terraform show -json` of a plan creating [`RESOURCES`] objects.
fn plan_json() -> Vec<u8> {
    let (changes, planned): (Vec<Value>, Vec<Value>) = (0..RESOURCES).map(resource).unzip();
    serde_json::to_vec(&json!({
        "format_version": "1.2",
        "terraform_version": "1.11.4",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {"root_module": {}},
    }))
    .expect("the plan serialises")
}

fn parent() -> ExitCode {
    // The fast tier (no local AWS) skips, as `require_aws!` does for the harnessed tests;
    // `make test` runs it under scripts/with-moto.sh.
    let Some(aws) = sortie_testkit::aws_tier() else {
        return ExitCode::SUCCESS;
    };
    let endpoint = aws.endpoint;
    let plan = plan_json();
    let size = plan.len();
    assert!(
        (30 * 1024 * 1024..=32 * 1024 * 1024).contains(&size),
        "the plan is about 30 MiB: {size} bytes"
    );
    let bucket = sortie_testkit::unique("gate-memory");
    let key = "fixtures/plan.json";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let config = sortie_testkit::sdk_config_at(&endpoint).await;
        let s3 = sortie_testkit::s3_client(&config);
        s3.create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .expect("bucket");
        s3.put_object()
            .bucket(&bucket)
            .key(key)
            .body(plan.into())
            .send()
            .await
            .expect("upload the plan");
    });
    // As a 128 MB function: the plan's value would not fit (about five bytes a byte), so the
    // gate reads its size, never its bytes, and the set's `on_unavailable: fail` ends the job.
    let small = run_child(&endpoint, &bucket, key, CAP_BYTES, 128);
    assert!(
        small.ended.starts_with("failed policy_denied: ")
            && small
                .ended
                .contains("this function can check within its 128 MiB of memory"),
        "the job ends, failed by policy, saying why: {}",
        small.ended
    );
    // As a function given the gating memory figure (infra/template.yaml): the plan is read,
    // streamed into the evaluator, and the set denies the one public object.
    let gating = run_child(
        &endpoint,
        &bucket,
        key,
        GATE_MEMORY_MB << 20,
        GATE_MEMORY_MB,
    );
    assert!(
        gating
            .ended
            .starts_with("failed policy_denied: acme/public: aws_s3_object.data[12345] is public"),
        "the job ends, failed by the deny: {}",
        gating.ended
    );
    ExitCode::SUCCESS
}

/// The memory figure of the functions that run the gate (infra/template.yaml).
const GATE_MEMORY_MB: u64 = 512;

/// What the gate's process reported.
struct Run {
    ended: String,
}

/// Runs the gate's process under `cap` bytes of address space, as a function of
/// `memory_mb`; reports its end and its peak resident set.
fn run_child(endpoint: &str, bucket: &str, key: &str, cap: u64, memory_mb: u64) -> Run {
    let exe = std::env::current_exe().expect("this binary");
    let out = Command::new("prlimit")
        .arg(format!("--as={cap}"))
        .arg("--")
        .arg("/usr/bin/time")
        .arg("-f")
        .arg("peak_rss_kb=%M elapsed_s=%e user_s=%U")
        .arg(exe)
        .env(CHILD, format!("{endpoint} {bucket} {key}"))
        .env("MALLOC_ARENA_MAX", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string())
        .output()
        .expect("run the gate's process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "the gate's process failed under the {cap}-byte cap: {stderr}"
    );
    let ended = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ended: "))
        .expect("the child reports the job's end")
        .to_string();
    let times = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("peak_rss_kb="))
        .expect("/usr/bin/time reports the peak");
    let (peak, times) = times.split_once(' ').unwrap_or((times, ""));
    let peak_kb: u64 = peak.parse().expect("a number of KiB");
    println!(
        "policy_gate_memory: as a {memory_mb} MB function, cap {cap} bytes of address space: peak RSS {peak_kb} KiB ({:.1} MiB), {times}; ended: {ended}",
        peak_kb as f64 / 1024.0
    );
    assert!(peak_kb * 1024 < cap);
    Run { ended }
}

/// The gate's process: a job whose plan phase ends, its `plan.json` the 30 MiB fixture.
fn child(spec: &str) -> ExitCode {
    let mut parts = spec.split(' ');
    let (Some(endpoint), Some(bucket), Some(key)) = (parts.next(), parts.next(), parts.next())
    else {
        eprintln!("policy_gate_memory child: bad spec {spec:?}");
        return ExitCode::FAILURE;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!("at start: {}", vm_status());
    match rt.block_on(gate(endpoint, bucket, key)) {
        Ok(line) => {
            println!("at end: {}", vm_status());
            println!("ended: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("policy_gate_memory child: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The process's address space and resident set, now and at their peaks (kB).
fn vm_status() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| {
            ["VmPeak", "VmSize", "VmHWM", "VmRSS"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn gate(endpoint: &str, bucket: &str, key: &str) -> Result<String, String> {
    use sortie_core::{JobRequest, JobState, Outcome};
    use sortie_store::{EnvironmentStore, JobStore, RunnerStore};
    let config = sortie_testkit::sdk_config_at(endpoint).await;
    let s3 = sortie_testkit::s3_client(&config);
    let store = Arc::new(sortie_store::MemoryStore::new());
    let mut jobs = sortie_lifecycle::JobService {
        store: store.clone(),
        queue: Arc::new(Discard),
        bus: Arc::new(Discard),
        secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
        gate: Default::default(),
    };
    jobs.gate.memory_bytes = sortie_lifecycle::PolicyGate::lambda_memory_bytes();
    jobs.gate.artifacts = Some(Arc::new(sortie_store::S3Artifacts::new(
        s3.clone(),
        bucket.to_string(),
    )));
    let runner = sortie_core::Runner {
        id: sortie_core::RunnerId::parse("acme/fargate").unwrap(),
        spec: sortie_core::RunnerSpec::parse(RUNNER_SPEC).map_err(|e| format!("{e:?}"))?,
    };
    store
        .create_runner(&runner)
        .await
        .map_err(|e| e.to_string())?;
    let env = sortie_core::Environment {
        settings: Default::default(),
        path: sortie_core::EnvPath::parse("acme/data/prod").unwrap(),
        env_type: "production".into(),
        labels: Default::default(),
        tags: Default::default(),
        runner: sortie_core::RunnerLink {
            runner_id: runner.id.clone(),
            rule_id: "default".into(),
            linked_by: "admin".into(),
            linked_at: chrono::Utc::now(),
        },
    };
    store
        .create_environment(&env)
        .await
        .map_err(|e| e.to_string())?;
    let rego = "package s3\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  rc.type == \"aws_s3_object\"\n  rc.change.after.acl == \"public-read\"\n  msg := concat(\" \", [rc.address, \"is public\"])\n}\n";
    sortie_lifecycle::PolicySets::new(store.clone())
        .create(
            &sortie_core::GroupPath::parse("acme").unwrap(),
            Some("public"),
            json!({"enforcement": "mandatory", "on_unavailable": "fail",
                   "modules": [{"name": "s3", "rego": rego}]}),
        )
        .await
        .map_err(|e| format!("{e:?}"))?;
    let request: JobRequest = serde_json::from_value(json!({
        "operation": "apply",
        "source": {"type": "inline", "files": {"main.tf": ""}},
    }))
    .map_err(|e| e.to_string())?;
    let order = sortie_lifecycle::JobOrder::submit(
        request,
        sortie_core::sensitive::SensitiveValues::default(),
        "alice",
        None,
    );
    let id = jobs
        .submit_for(&env, order)
        .await
        .map_err(|e| format!("{e:?}"))?
        .job
        .id;
    let now = chrono::Utc::now();
    for (from, to) in [
        (JobState::Queued, JobState::Dispatching),
        (JobState::Dispatching, JobState::Running),
    ] {
        store
            .transition_job(&id, from, to, now, "test", Default::default())
            .await
            .map_err(|e| e.to_string())?;
    }
    // The runner's upload, as S3 keeps it: copied on the server, never through this process.
    s3.copy_object()
        .copy_source(format!("{bucket}/{key}"))
        .bucket(bucket)
        .key(format!("artifacts/{id}/plan.json"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let record = store.get_job(&id).await.map_err(|e| e.to_string())?;
    let how = sortie_lifecycle::EndCause::Decided {
        from: JobState::Running,
        outcome: Outcome {
            state: JobState::Succeeded,
            reason: "the runner exited with code 0".into(),
        },
    };
    let report = jobs.end(&record, how).await.map_err(|e| e.to_string())?;
    let ended = report.ended().ok_or("the job did not end")?;
    Ok(format!("{} {}", ended.job.state, ended.job.reason()))
}

/// A queue and a bus that keep nothing.
struct Discard;

#[async_trait::async_trait]
impl sortie_store::JobQueue for Discard {
    async fn send_message(
        &self,
        _: &sortie_store::JobMessage,
        _: i32,
    ) -> Result<(), sortie_store::StoreError> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl sortie_lifecycle::Bus for Discard {
    async fn job_ended(
        &self,
        _: &sortie_store::JobRecord,
    ) -> Result<(), sortie_lifecycle::LifecycleError> {
        Ok(())
    }
}
