//! A Fargate-shaped world on moto (the AWS tier): network, cluster, task definition, table,
//! queue and bus, with every client of the code under test going through a loopback fault
//! proxy. The control plane is put together by `sortie_wiring` as the functions do it.

#![allow(dead_code)]

pub mod fast;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_ecs::types::{Compatibility, ContainerDefinition, NetworkMode};
use chrono::Utc;
use serde_json::{json, Value};
use sortie_core::{
    EnvPath, Environment, Job, JobRequest, Runner, RunnerId, RunnerLink, RunnerSpec,
};
use sortie_lifecycle::{Engine, SweepSettings};
use sortie_store::{DynamoStore, EnvironmentStore, JobStore, RunnerStore};
use sortie_testkit::proxy::FaultProxy;
use sortie_testkit::wiring;

pub const ROLE: &str = "arn:aws:iam::123456789012:role/sortie-launcher-test";
pub const EXTERNAL_ID: &str = "sortie-ext-7f3a";

pub async fn config_for(endpoint: &str) -> SdkConfig {
    sortie_testkit::sdk_config_at(endpoint).await
}

pub struct World {
    pub proxy: FaultProxy,
    pub direct: SdkConfig,
    pub engine: Arc<Engine>,
    pub store: Arc<DynamoStore>,
    pub sqs: aws_sdk_sqs::Client,
    pub ecs: aws_sdk_ecs::Client,
    pub queue_url: String,
    pub events_url: String,
    pub cluster: String,
    pub task_definition: String,
    pub subnet: String,
    pub security_group: String,
    /// The secrets of sensitive variables (in memory).
    pub secrets: Arc<sortie_launch::MemoryJobSecrets>,
}

fn network(endpoint: &str) -> (String, String) {
    let python = sortie_testkit::repo_root().join(".tools/venv/bin/python");
    let script = sortie_testkit::repo_root().join("crates/testkit/fixtures/ecs_network.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(endpoint)
        .output()
        .expect("run the network fixture");
    assert!(
        out.status.success(),
        "network fixture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["subnet"].as_str().unwrap().to_string(),
        v["security_group"].as_str().unwrap().to_string(),
    )
}

impl World {
    pub async fn new() -> Self {
        Self::with_settings(SweepSettings::default()).await
    }

    pub async fn with_settings(settings: SweepSettings) -> Self {
        let endpoint = sortie_testkit::endpoint();
        let direct = config_for(&endpoint).await;
        let proxy = FaultProxy::start(&endpoint);
        let via_proxy = config_for(&proxy.url()).await;
        let (subnet, security_group) = network(&endpoint);
        // Cluster and task definition are the target account's: made directly, not counted.
        let ecs = aws_sdk_ecs::Client::new(&direct);
        let cluster = sortie_testkit::unique("runners");
        ecs.create_cluster()
            .cluster_name(&cluster)
            .send()
            .await
            .unwrap();
        let family = sortie_testkit::unique("sortie-runner");
        let td = ecs
            .register_task_definition()
            .family(&family)
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu("256")
            .memory("512")
            .container_definitions(
                ContainerDefinition::builder()
                    .name("runner")
                    .image("sortie-runner:test")
                    .memory(512)
                    .essential(true)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let task_definition = td.task_definition.unwrap().task_definition_arn.unwrap();
        let sqs = aws_sdk_sqs::Client::new(&direct);
        let queue_url = sortie_testkit::standard_queue(&sqs, "jobs").await;
        let events_url = sortie_testkit::standard_queue(&sqs, "completed").await;
        let events_arn = sqs
            .get_queue_attributes()
            .queue_url(&events_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
            .clone();
        let eb = aws_sdk_eventbridge::Client::new(&direct);
        let bus = sortie_testkit::unique("sortie-bus");
        eb.create_event_bus().name(&bus).send().await.unwrap();
        let rule = sortie_testkit::unique("completed");
        eb.put_rule()
            .name(&rule)
            .event_bus_name(&bus)
            .event_pattern(json!({"source": ["sortie"]}).to_string())
            .send()
            .await
            .unwrap();
        eb.put_targets()
            .rule(&rule)
            .event_bus_name(&bus)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("q")
                    .arn(events_arn)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        // The control plane, through the proxy: put together as the functions do it
        // (`sortie_wiring::aws_parts` and `assemble`), with the secrets in memory.
        let resources = wiring::Resources {
            table: sortie_testkit::unique("sortie"),
            jobs_queue_url: queue_url.clone(),
            bus_name: bus,
            api_url: sortie_testkit::world::API_URL.into(),
            sweep: settings,
            ..Default::default()
        };
        let aws = wiring::aws_parts(&via_proxy, &resources, None);
        let store = aws.store;
        store.ensure_table().await.unwrap();
        let secrets = Arc::new(sortie_launch::MemoryJobSecrets::default());
        let parts = wiring::Parts {
            secrets: secrets.clone(),
            ..aws.parts
        };
        let engine = wiring::assemble(parts, resources, Some(&via_proxy), false).engine;
        Self {
            proxy,
            direct,
            engine,
            store,
            sqs,
            ecs,
            queue_url,
            events_url,
            cluster,
            task_definition,
            subnet,
            security_group,
            secrets,
        }
    }

    pub fn runner_spec(&self, extra: &str) -> RunnerSpec {
        RunnerSpec::parse(&format!(
            "runner_configuration:\n  type: ecs-fargate\n  role_arn: {ROLE}\n  external_id: {EXTERNAL_ID}\n  region: us-east-1\n  cluster: {}\n  task_definition: {}\n  container_name: runner\n  subnets: [{}]\n  security_groups: [{}]\n{extra}state_storage_configuration:\n  type: s3\n  bucket: acme-state\n  region: us-east-1\n",
            self.cluster, self.task_definition, self.subnet, self.security_group
        ))
        .unwrap()
    }

    /// Creates the runner `acme/fargate` and environment `path` linked to it.
    pub async fn environment(&self, path: &str, extra: &str) -> EnvPath {
        self.environment_on(path, "acme/fargate", self.runner_spec(extra))
            .await
    }

    /// Creates the runner `runner_id` with `spec` and environment `path` linked to it.
    pub async fn environment_on(&self, path: &str, runner_id: &str, spec: RunnerSpec) -> EnvPath {
        let runner = Runner {
            id: RunnerId::parse(runner_id).unwrap(),
            spec,
        };
        let _ = self.store.create_runner(&runner).await;
        let env = Environment {
            settings: Default::default(),
            path: EnvPath::parse(path).unwrap(),
            env_type: "production".into(),
            labels: BTreeMap::new(),
            tags: Default::default(),
            runner: RunnerLink {
                runner_id: runner.id.clone(),
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: Utc::now(),
            },
        };
        self.store.create_environment(&env).await.unwrap();
        env.path
    }

    /// Submits a job as the API does (with the runner snapshot); true if it took the lock.
    pub async fn submit(&self, env: &EnvPath, operation: &str, extra: &str) -> (Job, bool) {
        self.submit_on(env, "acme/fargate", self.runner_spec(extra), operation)
            .await
    }

    /// Submits a job on the runner `runner_id` with the snapshot `spec`.
    pub async fn submit_on(
        &self,
        env: &EnvPath,
        runner_id: &str,
        spec: RunnerSpec,
        operation: &str,
    ) -> (Job, bool) {
        let req = JobRequest::parse(&format!(
            r#"{{"operation":"{operation}","files":{{"main.tf":""}}}}"#
        ))
        .unwrap();
        let mut job = Job::new(
            sortie_core::tokens::new_id(),
            env.clone(),
            RunnerId::parse(runner_id).unwrap(),
            req,
            "alice".into(),
            Utc::now(),
        );
        job.runner_spec = Some(spec);
        let s = self.store.submit_job(&job, None).await.unwrap();
        (job, s.took_lock)
    }

    pub fn body(job_id: &str) -> String {
        json!({"job_id": job_id}).to_string()
    }

    /// Job ids of the messages in the jobs queue, removed from it.
    pub async fn drain(&self, url: &str) -> Vec<Value> {
        let mut out = vec![];
        loop {
            let got = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .send()
                .await
                .unwrap();
            let msgs = got.messages.unwrap_or_default();
            if msgs.is_empty() {
                return out;
            }
            for m in msgs {
                out.push(serde_json::from_str(m.body().unwrap()).unwrap());
                self.sqs
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    /// The events the bus delivered to the `completed` queue, removed from it.
    pub async fn events(&self) -> Vec<Value> {
        self.drain(&self.events_url).await
    }

    pub async fn queued_ids(&self) -> Vec<sortie_core::JobId> {
        self.drain(&self.queue_url)
            .await
            .iter()
            .map(|v| v["job_id"].as_str().unwrap().into())
            .collect()
    }

    /// An "ECS Task State Change" detail built from a sample in `events/`, for this task.
    pub fn event(
        sample: &str,
        job_id: &str,
        task_arn: &str,
    ) -> sortie_lifecycle::EcsTaskStateChange {
        let path = sortie_testkit::repo_root().join("events").join(sample);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["detail"]["startedBy"] = json!(format!("sortie/{job_id}"));
        v["detail"]["taskArn"] = json!(task_arn);
        // The cluster the task runs in: arn:aws:ecs:<region>:<account>:task/<cluster>/<id>.
        if let Some((head, rest)) = task_arn.split_once(":task/") {
            let cluster = rest.split('/').next().unwrap_or_default();
            v["detail"]["clusterArn"] = json!(format!("{head}:cluster/{cluster}"));
        }
        serde_json::from_value(v["detail"].clone()).unwrap()
    }

    pub async fn state(&self, id: &str) -> sortie_core::JobState {
        self.store
            .get_job(&sortie_core::JobId::from(id))
            .await
            .unwrap()
            .job
            .state
    }
}
