//! The deployable infrastructure against the contracts the code assumes.
//!
//! `infra/template.yaml` (the SAM control plane), `infra/target-account.yaml`,
//! `infra/pilot.Dockerfile`, `infra/k8s/` and `samconfig.toml` are parsed and
//! checked against `sortie_settings::FUNCTIONS` (every function and every
//! environment variable it reads), the single-table layout of the store, the
//! queue and event contracts of the job lifecycle, and least privilege. No
//! AWS, no moto: these tests only read files.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};
use sortie_settings::{API_URL, BUCKET, BUS_NAME, DEV_IDENTITY, FUNCTIONS, JOBS_QUEUE_URL, TABLE};

// ------------------------------------------------------------------ loading

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Parses a CloudFormation template, turning the short forms (`!Ref X`,
/// `!GetAtt A.B`, `!Sub s`, `!If [...]`, ...) into the long JSON forms
/// (`{Ref: X}`, `{Fn::GetAtt: [A, B]}`, ...), so the checks below see one shape.
fn template(rel: &str) -> Value {
    let value: Value =
        serde_norway::from_str(&read(rel)).unwrap_or_else(|e| panic!("parsing {rel}: {e}"));
    long_form(value)
}

fn long_form(value: Value) -> Value {
    match value {
        Value::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = long_form(tagged.value);
            let (key, inner) = match name {
                "Ref" | "Condition" => (name.to_string(), inner),
                "GetAtt" => {
                    let inner = match inner {
                        Value::String(s) => {
                            let (resource, attribute) = s
                                .split_once('.')
                                .unwrap_or_else(|| panic!("bad !GetAtt {s}"));
                            Value::Sequence(vec![resource.into(), attribute.into()])
                        }
                        other => other,
                    };
                    ("Fn::GetAtt".to_string(), inner)
                }
                other => (format!("Fn::{other}"), inner),
            };
            let mut map = Mapping::new();
            map.insert(Value::String(key), inner);
            Value::Mapping(map)
        }
        Value::Sequence(seq) => Value::Sequence(seq.into_iter().map(long_form).collect()),
        Value::Mapping(map) => {
            Value::Mapping(map.into_iter().map(|(k, v)| (k, long_form(v))).collect())
        }
        other => other,
    }
}

// ------------------------------------------------------------------ access

/// The value at `path` (mapping keys), or a panic naming the path.
fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    let mut cur = value;
    for (i, key) in path.iter().enumerate() {
        cur = cur
            .get(*key)
            .unwrap_or_else(|| panic!("missing {}", path[..=i].join(".")));
    }
    cur
}

fn opt<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = value;
    for key in path {
        cur = cur.get(*key)?;
    }
    Some(cur)
}

fn string<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value:?}"))
}

/// A number written as a YAML number or a string (CloudFormation takes both).
fn number(value: &Value, what: &str) -> u64 {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("{what} is not a number: {value:?}"))
}

fn strings(value: &Value, what: &str) -> Vec<String> {
    match value {
        Value::Sequence(seq) => seq.iter().map(|v| string(v, what).to_string()).collect(),
        Value::String(s) => vec![s.clone()],
        other => panic!("{what} is not a string or a list: {other:?}"),
    }
}

/// A statement's `Action` list; none for a statement that names its actions by
/// `NotAction` (only a conditional Deny may: see the wildcard test).
fn statement_actions(statement: &Value, what: &str) -> Vec<String> {
    if statement.get("NotAction").is_some() {
        return vec![];
    }
    strings(at(statement, &["Action"]), what)
}

/// The logical id in `{Ref: X}`.
fn ref_target(value: &Value) -> Option<&str> {
    value.get("Ref").and_then(Value::as_str)
}

/// The logical id and attribute in `{Fn::GetAtt: [X, Attr]}`.
fn getatt_target(value: &Value) -> Option<(&str, &str)> {
    let seq = value.get("Fn::GetAtt")?.as_sequence()?;
    Some((seq.first()?.as_str()?, seq.get(1)?.as_str()?))
}

fn resources(template: &Value) -> &Mapping {
    at(template, &["Resources"])
        .as_mapping()
        .expect("Resources is a mapping")
}

fn resource<'a>(template: &'a Value, logical_id: &str) -> &'a Value {
    at(template, &["Resources", logical_id])
}

fn resource_type<'a>(template: &'a Value, logical_id: &str) -> &'a str {
    string(at(resource(template, logical_id), &["Type"]), logical_id)
}

fn resources_of_type<'a>(template: &'a Value, ty: &str) -> Vec<(&'a str, &'a Value)> {
    resources(template)
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(ty))
        .map(|(k, r)| (k.as_str().expect("logical id"), r))
        .collect()
}

/// A function property, falling back to `Globals.Function`.
fn function_property<'a>(template: &'a Value, logical_id: &str, property: &str) -> &'a Value {
    opt(resource(template, logical_id), &["Properties", property])
        .or_else(|| opt(template, &["Globals", "Function", property]))
        .unwrap_or_else(|| panic!("{logical_id} has no {property}, not even in Globals"))
}

/// A function's environment: `Globals.Function.Environment.Variables`
/// overlaid with its own, as SAM merges them.
fn function_env<'a>(template: &'a Value, logical_id: &str) -> BTreeMap<String, &'a Value> {
    let mut env = BTreeMap::new();
    for vars in [
        opt(
            template,
            &["Globals", "Function", "Environment", "Variables"],
        ),
        opt(
            resource(template, logical_id),
            &["Properties", "Environment", "Variables"],
        ),
    ]
    .into_iter()
    .flatten()
    {
        for (k, v) in vars.as_mapping().expect("Variables is a mapping") {
            env.insert(k.as_str().expect("variable name").to_string(), v);
        }
    }
    env
}

/// The SAM events of a function, by name.
fn events<'a>(template: &'a Value, logical_id: &str) -> Vec<(&'a str, &'a Value)> {
    opt(resource(template, logical_id), &["Properties", "Events"])
        .and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().expect("event name"), v))
                .collect()
        })
        .unwrap_or_default()
}

/// The logical id of the SQS queue DispatchFunction consumes, and its event.
fn dispatch_sqs_event(template: &Value) -> (&str, &Value) {
    let sqs: Vec<_> = events(template, "DispatchFunction")
        .into_iter()
        .filter(|(_, e)| e.get("Type").and_then(Value::as_str) == Some("SQS"))
        .collect();
    assert_eq!(
        sqs.len(),
        1,
        "DispatchFunction must have exactly one SQS event source"
    );
    let props = at(sqs[0].1, &["Properties"]);
    let (queue, attr) =
        getatt_target(at(props, &["Queue"])).expect("the SQS event's Queue is !GetAtt <queue>.Arn");
    assert_eq!(attr, "Arn");
    (queue, props)
}

fn control_plane() -> Value {
    template("infra/template.yaml")
}

fn target_account() -> Value {
    template("infra/target-account.yaml")
}

// ------------------------------------------------------------------ functions

/// The functions whose handlers can end a job, so run the policy gate.
const GATING: [&str; 3] = ["ApiFunction", "TaskEventsFunction", "SweeperFunction"];

#[test]
fn every_function_in_settings_is_in_the_template_with_its_crate_runtime_and_architecture() {
    let t = control_plane();
    assert_eq!(
        FUNCTIONS.len(),
        6,
        "api, dispatch, task-events, sweeper, pulls and notify"
    );
    for f in FUNCTIONS {
        let id = f.logical_id;
        assert_eq!(resource_type(&t, id), "AWS::Serverless::Function", "{id}");
        let r = resource(&t, id);
        assert_eq!(
            string(at(r, &["Metadata", "BuildMethod"]), id),
            "rust-cargolambda",
            "{id}"
        );
        assert_eq!(
            string(at(r, &["Metadata", "BuildProperties", "Binary"]), id),
            f.name,
            "{id}"
        );

        // CodeUri is the function's crate, and that crate builds the binary.
        let code_uri = string(at(r, &["Properties", "CodeUri"]), id);
        assert_eq!(code_uri, format!("../functions/{}", f.name), "{id} CodeUri");
        let manifest = read(&format!("functions/{}/Cargo.toml", f.name));
        assert!(
            manifest
                .lines()
                .any(|l| l.replace(' ', "") == format!("name=\"{}\"", f.name)),
            "functions/{}/Cargo.toml must be the package {}",
            f.name,
            f.name
        );

        assert_eq!(
            string(function_property(&t, id, "Runtime"), id),
            "provided.al2023",
            "{id}"
        );
        assert_eq!(
            string(function_property(&t, id, "Handler"), id),
            "bootstrap",
            "{id}"
        );
        assert_eq!(
            strings(function_property(&t, id, "Architectures"), id),
            vec!["arm64".to_string()],
            "{id}"
        );
        // The functions that run the policy gate share one larger figure (issue 41 item 5:
        // a plan's value is about five times its JSON); the others stay at 128 MB.
        let memory = if GATING.contains(&id) { 512 } else { 128 };
        assert_eq!(
            number(function_property(&t, id, "MemorySize"), id),
            memory,
            "{id} memory"
        );
    }

    // And no function that the code does not know about.
    let in_template: BTreeSet<_> = resources_of_type(&t, "AWS::Serverless::Function")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let in_code: BTreeSet<_> = FUNCTIONS.iter().map(|f| f.logical_id).collect();
    assert_eq!(in_template, in_code);
}

#[test]
fn every_function_gets_exactly_the_sortie_variables_it_reads() {
    let t = control_plane();
    for f in FUNCTIONS {
        let env = function_env(&t, f.logical_id);
        for var in f.required {
            let value = env.get(*var).unwrap_or_else(|| {
                panic!(
                    "{} reads {var}, which the template does not set",
                    f.logical_id
                )
            });
            assert!(
                !matches!(value, Value::Null) && value.as_str() != Some(""),
                "{}: {var} is empty",
                f.logical_id
            );
        }
        let set: BTreeSet<_> = env
            .keys()
            .filter(|k| k.starts_with("SORTIE_"))
            .map(String::as_str)
            .collect();
        let read: BTreeSet<_> = f.required.iter().chain(f.optional).copied().collect();
        assert_eq!(
            set, read,
            "{}: the SORTIE_ variables set must be exactly those it reads",
            f.logical_id
        );
        assert!(
            !env.contains_key(DEV_IDENTITY),
            "{} must never enable the dev identity",
            f.logical_id
        );
    }
}

#[test]
fn the_variables_point_at_the_resources_they_name() {
    let t = control_plane();
    let (jobs_queue, _) = dispatch_sqs_event(&t);
    for f in FUNCTIONS {
        let env = function_env(&t, f.logical_id);
        for (var, value) in &env {
            let target_type = |what: &str| {
                let id = ref_target(value).unwrap_or_else(|| {
                    panic!("{}: {var} must be !Ref to the {what}", f.logical_id)
                });
                (id.to_string(), resource_type(&t, id).to_string())
            };
            match var.as_str() {
                v if v == TABLE => assert_eq!(target_type("table").1, "AWS::DynamoDB::Table"),
                v if v == BUCKET => assert_eq!(target_type("bucket").1, "AWS::S3::Bucket"),
                v if v == BUS_NAME => assert_eq!(target_type("bus").1, "AWS::Events::EventBus"),
                v if v == JOBS_QUEUE_URL => {
                    let (id, ty) = target_type("jobs queue");
                    assert_eq!(ty, "AWS::SQS::Queue");
                    assert_eq!(
                        id, jobs_queue,
                        "{}: {var} must be the queue dispatch consumes",
                        f.logical_id
                    );
                }
                v if v == sortie_settings::JWT_ISSUER => {
                    assert_eq!(ref_target(value), Some("JwtIssuer"), "{var}")
                }
                v if v == sortie_settings::JWT_AUDIENCE => assert!(
                    format!("{value:?}").contains("JwtAudience"),
                    "{var} must be the JwtAudience parameter"
                ),
                v if v == sortie_settings::CONSOLE_CLIENT_ID => {
                    assert_eq!(ref_target(value), Some("ConsoleClientId"), "{var}")
                }
                v if v == sortie_settings::CONSOLE_TOKEN_ENDPOINT => {
                    assert_eq!(ref_target(value), Some("ConsoleTokenEndpoint"), "{var}")
                }
                v if v == API_URL => {
                    let text = format!("{value:?}");
                    assert!(
                        text.contains("${HttpApi}") && text.contains("PublicApiUrl"),
                        "{}: {var} must be the HttpApi's URL or the PublicApiUrl parameter: {text}",
                        f.logical_id
                    );
                }
                _ => {}
            }
        }
    }
}

#[test]
fn timeouts_fit_their_triggers() {
    let t = control_plane();
    let timeout = |id: &str| number(function_property(&t, id, "Timeout"), id);
    assert!(
        timeout("ApiFunction") <= 29,
        "API Gateway gives up after 29 s"
    );
    for f in FUNCTIONS {
        let s = timeout(f.logical_id);
        assert!((3..=900).contains(&s), "{}: timeout {s}", f.logical_id);
    }
}

// ------------------------------------------------------------------ queues

#[test]
fn jobs_queue_visibility_covers_six_dispatch_timeouts_and_redrives_after_five_receives() {
    let t = control_plane();
    let (queue, _) = dispatch_sqs_event(&t);
    assert_eq!(resource_type(&t, queue), "AWS::SQS::Queue");
    let props = at(resource(&t, queue), &["Properties"]);

    let dispatch_timeout = number(
        function_property(&t, "DispatchFunction", "Timeout"),
        "Timeout",
    );
    let visibility = number(at(props, &["VisibilityTimeout"]), "VisibilityTimeout");
    assert!(
        visibility >= 6 * dispatch_timeout,
        "visibility timeout {visibility} s < 6 x dispatch timeout {dispatch_timeout} s"
    );

    let redrive = at(props, &["RedrivePolicy"]);
    assert_eq!(
        number(at(redrive, &["maxReceiveCount"]), "maxReceiveCount"),
        5
    );
    let (dlq, attr) = getatt_target(at(redrive, &["deadLetterTargetArn"])).expect("DLQ is !GetAtt");
    assert_eq!(attr, "Arn");
    assert_eq!(resource_type(&t, dlq), "AWS::SQS::Queue");
    let dlq_props = at(resource(&t, dlq), &["Properties"]);
    assert_eq!(
        number(at(dlq_props, &["MessageRetentionPeriod"]), "retention"),
        14 * 24 * 3600
    );

    for id in [queue, dlq] {
        let p = at(resource(&t, id), &["Properties"]);
        assert!(
            p.get("SqsManagedSseEnabled").and_then(Value::as_bool) == Some(true)
                || p.get("KmsMasterKeyId").is_some(),
            "{id} must be encrypted at rest"
        );
    }
}

#[test]
fn dispatch_reports_batch_item_failures_with_parameterised_batch_and_concurrency() {
    let t = control_plane();
    let (_, props) = dispatch_sqs_event(&t);
    assert!(
        strings(
            at(props, &["FunctionResponseTypes"]),
            "FunctionResponseTypes"
        )
        .contains(&"ReportBatchItemFailures".to_string()),
        "one bad message must never fail its batch"
    );
    for path in [
        &["BatchSize"][..],
        &["ScalingConfig", "MaximumConcurrency"][..],
    ] {
        let name = ref_target(at(props, path))
            .unwrap_or_else(|| panic!("{} must be a template parameter", path.join(".")));
        let param = at(&t, &["Parameters", name]);
        assert_eq!(string(at(param, &["Type"]), name), "Number", "{name}");
    }
    let concurrency = ref_target(at(props, &["ScalingConfig", "MaximumConcurrency"])).unwrap();
    assert!(
        number(at(&t, &["Parameters", concurrency, "MinValue"]), "MinValue") >= 2,
        "SQS needs >= 2"
    );
    let batch = ref_target(at(props, &["BatchSize"])).unwrap();
    assert!(
        number(at(&t, &["Parameters", batch, "MaxValue"]), "MaxValue") <= 10,
        "no batching window: <= 10"
    );
}

// ------------------------------------------------------------------ table

#[test]
fn the_table_is_the_single_table_the_store_expects() {
    let t = control_plane();
    let tables = resources_of_type(&t, "AWS::DynamoDB::Table");
    assert_eq!(tables.len(), 1, "one table");
    let (id, table) = tables[0];
    let env_table = function_env(&t, "ApiFunction")[TABLE];
    assert_eq!(ref_target(env_table), Some(id));

    let p = at(table, &["Properties"]);
    assert_eq!(
        string(at(p, &["BillingMode"]), "BillingMode"),
        "PAY_PER_REQUEST"
    );

    let key_schema = |v: &Value| -> Vec<(String, String)> {
        v.as_sequence()
            .expect("KeySchema")
            .iter()
            .map(|k| {
                (
                    string(at(k, &["AttributeName"]), "name").into(),
                    string(at(k, &["KeyType"]), "type").into(),
                )
            })
            .collect()
    };
    let pair = |h: &str, r: &str| {
        vec![
            (h.to_string(), "HASH".to_string()),
            (r.to_string(), "RANGE".to_string()),
        ]
    };
    assert_eq!(key_schema(at(p, &["KeySchema"])), pair("pk", "sk"));

    let attrs: BTreeMap<String, String> = at(p, &["AttributeDefinitions"])
        .as_sequence()
        .expect("AttributeDefinitions")
        .iter()
        .map(|a| {
            (
                string(at(a, &["AttributeName"]), "name").into(),
                string(at(a, &["AttributeType"]), "type").into(),
            )
        })
        .collect();
    let mut want: BTreeMap<String, String> = BTreeMap::new();
    for name in [
        "pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "gsi3pk", "gsi3sk", "gsi4pk", "gsi4sk",
    ] {
        want.insert(name.into(), "S".into());
    }
    assert_eq!(attrs, want, "string keys only, and nothing else defined");

    let gsis = at(p, &["GlobalSecondaryIndexes"])
        .as_sequence()
        .expect("GSIs");
    assert_eq!(gsis.len(), 4, "gsi1..gsi4");
    for (i, gsi) in gsis.iter().enumerate() {
        let n = i + 1;
        assert_eq!(
            string(at(gsi, &["IndexName"]), "IndexName"),
            format!("gsi{n}")
        );
        assert_eq!(
            key_schema(at(gsi, &["KeySchema"])),
            pair(&format!("gsi{n}pk"), &format!("gsi{n}sk"))
        );
        assert_eq!(
            string(at(gsi, &["Projection", "ProjectionType"]), "Projection"),
            "ALL"
        );
    }

    assert_eq!(
        string(at(p, &["TimeToLiveSpecification", "AttributeName"]), "TTL"),
        "expires_at"
    );
    assert_eq!(
        at(p, &["TimeToLiveSpecification", "Enabled"]).as_bool(),
        Some(true)
    );
    assert_eq!(
        at(
            p,
            &[
                "PointInTimeRecoverySpecification",
                "PointInTimeRecoveryEnabled"
            ]
        )
        .as_bool(),
        Some(true)
    );
    assert_eq!(
        at(p, &["SSESpecification", "SSEEnabled"]).as_bool(),
        Some(true)
    );
    assert_eq!(
        string(at(table, &["DeletionPolicy"]), "DeletionPolicy"),
        "Retain"
    );
}

// ------------------------------------------------------------------ events

fn ecs_task_state_pattern_is_sortie_only(pattern: &Value, what: &str) {
    assert_eq!(
        strings(at(pattern, &["source"]), what),
        vec!["aws.ecs"],
        "{what}"
    );
    assert_eq!(
        strings(at(pattern, &["detail-type"]), what),
        vec!["ECS Task State Change"],
        "{what}"
    );
    let started_by = at(pattern, &["detail", "startedBy"])
        .as_sequence()
        .expect("startedBy list");
    assert_eq!(started_by.len(), 1, "{what}");
    assert_eq!(
        string(at(&started_by[0], &["prefix"]), what),
        sortie_launch::STARTED_BY_PREFIX,
        "{what}: only tasks started by Sortie (startedBy = sortie/<job id>)"
    );
}

#[test]
fn task_events_hears_sortie_tasks_on_the_default_bus_and_on_sortie_bus() {
    let t = control_plane();
    let buses: Vec<_> = resources_of_type(&t, "AWS::Events::EventBus");
    assert_eq!(buses.len(), 1);
    let bus = buses[0].0;

    let mut on_default = 0;
    let mut on_sortie = 0;
    for (name, event) in events(&t, "TaskEventsFunction") {
        assert_eq!(
            string(at(event, &["Type"]), name),
            "EventBridgeRule",
            "{name}"
        );
        let props = at(event, &["Properties"]);
        ecs_task_state_pattern_is_sortie_only(at(props, &["Pattern"]), name);
        assert!(
            props.get("DeadLetterConfig").is_some(),
            "{name}: undeliverable events go to a DLQ"
        );
        match props.get("EventBusName") {
            None => on_default += 1,
            Some(v) => {
                assert_eq!(ref_target(v), Some(bus), "{name}");
                on_sortie += 1;
            }
        }
    }
    assert_eq!((on_default, on_sortie), (1, 1), "one rule per bus");
}

#[test]
fn target_accounts_may_put_only_ecs_task_events_on_the_bus() {
    let t = control_plane();
    let (_, bus) = resources_of_type(&t, "AWS::Events::EventBus")[0];
    let policy = at(bus, &["Properties", "Policy", "Fn::If"])
        .as_sequence()
        .expect("!If");
    assert_eq!(string(&policy[0], "condition"), "HasTargetAccounts");
    let statement = &at(&policy[1], &["Statement"])
        .as_sequence()
        .expect("Statement")[0];
    assert_eq!(
        ref_target(at(statement, &["Principal", "AWS"])),
        Some("TargetAccountIds")
    );
    assert_eq!(
        statement_actions(statement, "Action"),
        vec!["events:PutEvents"]
    );
    assert_eq!(
        string(
            at(statement, &["Condition", "StringEquals", "events:source"]),
            "source"
        ),
        "aws.ecs"
    );
    assert_eq!(
        at(&t, &["Parameters", "TargetAccountIds", "Type"]).as_str(),
        Some("CommaDelimitedList")
    );
}

#[test]
fn the_sweeper_runs_every_minute() {
    let t = control_plane();
    let schedules: Vec<_> = events(&t, "SweeperFunction")
        .into_iter()
        .filter(|(_, e)| e.get("Type").and_then(Value::as_str) == Some("Schedule"))
        .collect();
    assert_eq!(schedules.len(), 1);
    assert_eq!(
        string(at(schedules[0].1, &["Properties", "Schedule"]), "Schedule"),
        "rate(1 minute)"
    );
}

/// Pull requests on AWS (issue 42): webhook work, job-end reports and reconciles go to one
/// queue with a DLQ after 8 receives; the pulls function consumes it reporting batch item
/// failures, and a 5-minute schedule queues the reconciles; a rule sends pull-request jobs'
/// `sortie.job.dispatched` and `sortie.job.ended` (the detail's `pull_request`, which `ended_detail` writes for
/// such jobs only) to the queue, which lets that rule alone send to it from EventBridge; the
/// api takes webhooks into it.
#[test]
fn pull_request_work_has_a_queue_a_dlq_a_handler_a_reconcile_schedule_and_a_rule_for_job_ends() {
    let t = control_plane();
    let queue = at(resource(&t, "PullQueue"), &["Properties"]);
    assert_eq!(
        number(at(queue, &["RedrivePolicy", "maxReceiveCount"]), "redrive"),
        8
    );
    let visibility = number(at(queue, &["VisibilityTimeout"]), "visibility");
    let timeout = number(
        at(resource(&t, "PullsFunction"), &["Properties", "Timeout"]),
        "timeout",
    );
    assert!(
        visibility >= 6 * timeout,
        "AWS: at least 6 x the function's timeout"
    );
    let evs = events(&t, "PullsFunction");
    let of_type = |ty: &str| {
        evs.iter()
            .filter(|(_, e)| e.get("Type").and_then(Value::as_str) == Some(ty))
            .map(|(_, e)| *e)
            .collect::<Vec<_>>()
    };
    let sqs = of_type("SQS");
    assert_eq!(sqs.len(), 1);
    assert_eq!(
        strings(
            at(sqs[0], &["Properties", "FunctionResponseTypes"]),
            "types"
        ),
        ["ReportBatchItemFailures"]
    );
    let source = format!("{:?}", at(sqs[0], &["Properties", "Queue"]));
    assert!(
        source.contains("PullQueue") && !source.contains("PullDlq"),
        "{source}"
    );
    let schedules = of_type("Schedule");
    assert_eq!(schedules.len(), 1);
    assert_eq!(
        string(at(schedules[0], &["Properties", "Schedule"]), "schedule"),
        "rate(5 minutes)"
    );
    let rule = at(resource(&t, "PullReportsRule"), &["Properties"]);
    let pattern = at(rule, &["EventPattern"]);
    assert_eq!(strings(at(pattern, &["source"]), "source"), ["sortie"]);
    // Exactly the events whose messages the pulls function reads as a report.
    assert_eq!(
        strings(at(pattern, &["detail-type"]), "detail-type"),
        sortie_lifecycle::pull_requests::REPORTED_EVENTS
    );
    assert_eq!(
        at(pattern, &["detail", "pull_request", "number"])
            .get(0)
            .and_then(|e| e.get("exists"))
            .and_then(Value::as_bool),
        Some(true)
    );
    let policy = format!("{:?}", at(resource(&t, "PullQueuePolicy"), &["Properties"]));
    assert!(
        policy.contains("events.amazonaws.com") && policy.contains("PullReportsRule"),
        "{policy}"
    );
    let api_env = at(
        resource(&t, "ApiFunction"),
        &["Properties", "Environment", "Variables"],
    );
    assert_eq!(
        ref_target(at(api_env, &["SORTIE_PULL_QUEUE_URL"])),
        Some("PullQueue")
    );
    assert!(alarms(&t)
        .iter()
        .any(|(m, r, _)| m == "AWS/SQS/ApproximateNumberOfMessagesVisible" && r == "PullDlq"));
}

/// Notifications: the rule sends exactly the events a kind is read from; the queue holds a
/// whole retry (24 hours of receives) under its redrive; the function reports batch item
/// failures; its role reads notification secrets and never writes them.
#[test]
fn the_notify_queue_hears_exactly_the_notified_events_and_holds_a_whole_retry() {
    let t = control_plane();
    let rule = at(resource(&t, "NotifyRule"), &["Properties"]);
    let pattern = at(rule, &["EventPattern"]);
    assert_eq!(strings(at(pattern, &["source"]), "source"), ["sortie"]);
    assert_eq!(
        strings(at(pattern, &["detail-type"]), "detail-type"),
        sortie_core::notify::NOTIFIED_DETAIL_TYPES
    );
    let policy = format!(
        "{:?}",
        at(resource(&t, "NotifyQueuePolicy"), &["Properties"])
    );
    assert!(
        policy.contains("events.amazonaws.com") && policy.contains("NotifyRule"),
        "{policy}"
    );
    let queue = at(resource(&t, "NotifyQueue"), &["Properties"]);
    // 30 s doubling to an hour for 24 hours is at most this many attempts.
    let mut attempts = 0;
    let (mut wait, mut spent) = (30u64, 0u64);
    while spent <= 86_400 {
        attempts += 1;
        spent += wait;
        wait = (wait * 2).min(3600);
    }
    let redrive = number(at(queue, &["RedrivePolicy", "maxReceiveCount"]), "redrive");
    assert!(
        redrive > attempts,
        "{redrive} receives hold {attempts} attempts"
    );
    let visibility = number(at(queue, &["VisibilityTimeout"]), "visibility");
    let timeout = number(
        at(resource(&t, "NotifyFunction"), &["Properties", "Timeout"]),
        "timeout",
    );
    assert!(
        visibility >= 6 * timeout,
        "AWS: at least 6 x the function's timeout"
    );
    let evs = events(&t, "NotifyFunction");
    assert_eq!(evs.len(), 1);
    assert_eq!(
        strings(
            at(evs[0].1, &["Properties", "FunctionResponseTypes"]),
            "types"
        ),
        ["ReportBatchItemFailures"]
    );
    let secrets: Vec<String> = role_statements(&t, "NotifyRole")
        .into_iter()
        .flat_map(|(sid, st)| statement_actions(&st, &sid))
        .filter(|a| a.starts_with("secretsmanager:"))
        .collect();
    assert_eq!(secrets, ["secretsmanager:GetSecretValue"]);
    assert!(alarms(&t)
        .iter()
        .any(|(m, r, _)| m == "AWS/SQS/ApproximateNumberOfMessagesVisible" && r == "NotifyDlq"));
}

#[test]
fn completion_webhooks_are_optional_and_hear_only_sortie_job_ended() {
    let t = control_plane();
    for id in [
        "WebhookConnection",
        "WebhookDestination",
        "WebhookRule",
        "WebhookRole",
    ] {
        assert_eq!(
            string(at(resource(&t, id), &["Condition"]), id),
            "HasCompletionWebhook",
            "{id} exists only with a webhook URL"
        );
    }
    let rule = at(resource(&t, "WebhookRule"), &["Properties"]);
    assert_eq!(
        strings(at(rule, &["EventPattern", "source"]), "source"),
        vec!["sortie"]
    );
    assert_eq!(
        strings(at(rule, &["EventPattern", "detail-type"]), "detail-type"),
        vec!["sortie.job.ended"]
    );
    assert_eq!(
        resource_type(&t, "WebhookDestination"),
        "AWS::Events::ApiDestination"
    );
}

// ------------------------------------------------------------------ HTTP API

#[test]
fn the_http_api_verifies_jwts_logs_and_throttles() {
    let t = control_plane();
    let apis = resources_of_type(&t, "AWS::Serverless::HttpApi");
    assert_eq!(apis.len(), 1);
    let (api, props) = (apis[0].0, at(apis[0].1, &["Properties"]));
    let auth = at(props, &["Auth"]);
    let default = string(at(auth, &["DefaultAuthorizer"]), "DefaultAuthorizer");
    let jwt = at(auth, &["Authorizers", default, "JwtConfiguration"]);
    assert_eq!(ref_target(at(jwt, &["issuer"])), Some("JwtIssuer"));
    assert_eq!(ref_target(at(jwt, &["audience"])), Some("JwtAudience"));
    let (log_group, _) =
        getatt_target(at(props, &["AccessLogSettings", "DestinationArn"])).expect("log group");
    assert_eq!(resource_type(&t, log_group), "AWS::Logs::LogGroup");
    assert!(at(props, &["DefaultRouteSettings", "ThrottlingRateLimit"])
        .get("Ref")
        .is_some());
    assert!(at(props, &["DefaultRouteSettings", "ThrottlingBurstLimit"])
        .get("Ref")
        .is_some());

    // $default goes to the api function with the JWT authorizer. The routes without it
    // are exactly those whose one declaration (the handler's `#[utoipa::path]`, read
    // through `Route::auth`) names another credential than a user's JWT: the runner's
    // (job token), the agents' (pool credential) and the open meta routes.
    let mut default_route = false;
    let unguarded: Vec<(String, String)> = sortie_api::Route::ALL
        .iter()
        .filter(|r| r.auth() != sortie_api::Auth::User)
        .map(|r| (r.method_and_path().0.to_string(), template_path(*r)))
        .collect();
    // The console's page and hashed assets: public GET routes outside the route table,
    // each with its HEAD (the console's router answers HEAD wherever it answers GET; a
    // HEAD without its route would fall to $default and its authorizer: a 401).
    let console: Vec<(String, String)> = sortie_api::console::GATEWAY_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert!(
        console.iter().all(|(m, _)| m == "GET" || m == "HEAD"),
        "{console:?}"
    );
    let console_gets: Vec<&String> = console
        .iter()
        .filter(|(m, _)| m == "GET")
        .map(|(_, p)| p)
        .collect();
    assert!(!console_gets.is_empty(), "{console:?}");
    for path in &console_gets {
        let head = ("HEAD".to_string(), path.to_string());
        assert!(
            console.contains(&head),
            "HEAD {path} is not declared: it falls to $default and answers 401"
        );
    }
    let unguarded: Vec<(String, String)> = unguarded.into_iter().chain(console.clone()).collect();
    let mut missing = unguarded.clone();
    for (name, event) in events(&t, "ApiFunction") {
        assert_eq!(string(at(event, &["Type"]), name), "HttpApi");
        let p = at(event, &["Properties"]);
        assert_eq!(ref_target(at(p, &["ApiId"])), Some(api));
        let path = string(at(p, &["Path"]), name);
        let unauthenticated =
            opt(p, &["Auth", "Authorizer"]).and_then(Value::as_str) == Some("NONE");
        if path == "$default" {
            assert!(!unauthenticated, "$default must keep the JWT authorizer");
            default_route = true;
        } else if unauthenticated {
            let key = (
                string(at(p, &["Method"]), name).to_string(),
                path.to_string(),
            );
            assert!(
                unguarded.contains(&key),
                "route {} {} skips the JWT authorizer",
                key.0,
                key.1
            );
            missing.retain(|r| r != &key);
        }
    }
    assert!(default_route, "ApiFunction serves the $default route");
    assert!(
        missing.is_empty(),
        "routes without a user's JWT that the authorizer would block: {missing:?}"
    );
    assert!(
        console.iter().all(|r| !missing.contains(r)),
        "the console's routes must be GET and HEAD routes without the JWT authorizer: {missing:?}"
    );
}

// ------------------------------------------------------------------ S3

#[test]
fn the_bucket_is_private_versioned_encrypted_tls_only_and_expires_logs() {
    let t = control_plane();
    let buckets = resources_of_type(&t, "AWS::S3::Bucket");
    assert_eq!(
        buckets.len(),
        2,
        "the artifacts bucket and the audit bucket"
    );
    let id = ref_target(function_env(&t, "ApiFunction")[BUCKET]).expect("the api's bucket");
    let bucket = resource(&t, id);
    let p = at(bucket, &["Properties"]);
    assert_eq!(
        string(at(p, &["VersioningConfiguration", "Status"]), "versioning"),
        "Enabled"
    );
    assert!(at(
        p,
        &["BucketEncryption", "ServerSideEncryptionConfiguration"]
    )
    .as_sequence()
    .is_some());
    for flag in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            at(p, &["PublicAccessBlockConfiguration", flag]).as_bool(),
            Some(true),
            "{flag}"
        );
    }
    let rules = at(p, &["LifecycleConfiguration", "Rules"])
        .as_sequence()
        .expect("rules");
    assert!(
        rules
            .iter()
            .any(|r| r.get("Prefix").and_then(Value::as_str) == Some("logs/")
                && r.get("ExpirationInDays").is_some()),
        "logs/ must expire"
    );
    assert_tls_only(&t, "AWS::S3::BucketPolicy", id);
}

/// The audit bucket keeps every export under Object Lock in compliance mode for the
/// retention parameter's days; it is versioned (Object Lock needs it), private and TLS
/// only; the sweeper, its one writer, may only put objects under `audit/`; and no role may
/// delete an object, change a retention or bypass one.
#[test]
fn the_audit_bucket_is_write_once_for_its_retention_and_only_the_sweeper_writes() {
    let t = control_plane();
    let id = ref_target(function_env(&t, "SweeperFunction")["SORTIE_AUDIT_BUCKET"])
        .expect("the sweeper's audit bucket");
    assert_eq!(id, "AuditBucket");
    let p = at(resource(&t, id), &["Properties"]);
    assert_eq!(at(p, &["ObjectLockEnabled"]).as_bool(), Some(true));
    let rule = at(p, &["ObjectLockConfiguration", "Rule", "DefaultRetention"]);
    assert_eq!(string(at(rule, &["Mode"]), "mode"), "COMPLIANCE");
    assert_eq!(ref_target(at(rule, &["Days"])), Some("AuditRetentionDays"));
    assert_eq!(
        ref_target(function_env(&t, "SweeperFunction")["SORTIE_AUDIT_EXPORT_MINUTES"]),
        Some("AuditExportMinutes")
    );
    assert_eq!(
        string(at(p, &["VersioningConfiguration", "Status"]), "versioning"),
        "Enabled"
    );
    for flag in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            at(p, &["PublicAccessBlockConfiguration", flag]).as_bool(),
            Some(true),
            "{flag}"
        );
    }
    assert_tls_only(&t, "AWS::S3::BucketPolicy", id);
    let writes: Vec<(String, Vec<String>)> = all_statements(&t)
        .into_iter()
        .filter(|(_, st)| st.get("Effect").and_then(Value::as_str) == Some("Allow"))
        .filter(|(_, st)| format!("{:?}", st.get("Resource")).contains("AuditBucket"))
        .map(|(path, st)| (path.clone(), statement_actions(&st, &path)))
        .collect();
    assert_eq!(
        writes.len(),
        1,
        "one statement names the audit bucket: {writes:?}"
    );
    assert!(writes[0].0.contains("SweeperRole"), "{writes:?}");
    assert_eq!(writes[0].1, ["s3:PutObject"]);
    for (path, st) in all_statements(&t) {
        for action in statement_actions(&st, &path) {
            assert!(
                ![
                    "s3:DeleteObject",
                    "s3:DeleteObjectVersion",
                    "s3:PutObjectRetention",
                    "s3:BypassGovernanceRetention",
                    "s3:PutBucketObjectLockConfiguration"
                ]
                .contains(&action.as_str())
                    || !format!("{:?}", st.get("Resource")).contains("AuditBucket"),
                "{path}: {action} on the audit bucket"
            );
        }
    }
}

/// A bucket policy of `ty` on `bucket` denies every request without TLS.
fn assert_tls_only(t: &Value, ty: &str, bucket: &str) {
    let policies: Vec<_> = resources_of_type(t, ty)
        .into_iter()
        .filter(|(_, p)| ref_target(at(p, &["Properties", "Bucket"])) == Some(bucket))
        .collect();
    assert_eq!(policies.len(), 1, "{bucket} has one bucket policy");
    let statements = at(
        policies[0].1,
        &["Properties", "PolicyDocument", "Statement"],
    )
    .as_sequence()
    .unwrap();
    assert!(
        statements.iter().any(|s| {
            s.get("Effect").and_then(Value::as_str) == Some("Deny")
                && opt(s, &["Condition", "Bool", "aws:SecureTransport"]).and_then(Value::as_str)
                    == Some("false")
        }),
        "{bucket} must deny requests without TLS"
    );
}

// ------------------------------------------------------------------ IAM

/// Every policy statement in a template: (where, statement).
fn statements(value: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                let key = k.as_str().unwrap_or("?");
                let here = format!("{path}.{key}");
                if key == "Statement" {
                    for (i, s) in v.as_sequence().into_iter().flatten().enumerate() {
                        // A statement may itself be !If [cond, statement, AWS::NoValue].
                        match s.get("Fn::If").and_then(Value::as_sequence) {
                            Some(branches) => {
                                for b in branches
                                    .iter()
                                    .skip(1)
                                    .filter(|b| b.get("Effect").is_some())
                                {
                                    out.push((format!("{here}[{i}]"), b.clone()));
                                }
                            }
                            None => out.push((format!("{here}[{i}]"), s.clone())),
                        }
                    }
                }
                statements(v, here, out);
            }
        }
        Value::Sequence(seq) => {
            for (i, v) in seq.iter().enumerate() {
                statements(v, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn all_statements(t: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    statements(t, String::new(), &mut out);
    assert!(!out.is_empty());
    out
}

#[test]
fn no_allow_statement_grants_a_wildcard_action_or_an_unscoped_resource() {
    // Resource "*" only where the action has no resource type, scoped by a
    // condition where IAM offers one.
    let resourceless = [
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ecr:GetAuthorizationToken",
        "ecs:ListTasks",
        "ecs:DescribeTaskDefinition",
        "ecs:RegisterTaskDefinition",
        "secretsmanager:ListSecrets",
    ];
    for (file, t) in [
        ("template.yaml", control_plane()),
        ("target-account.yaml", target_account()),
    ] {
        for (path, s) in all_statements(&t) {
            // A key policy is the key's own resource policy: "*" there means this key,
            // and the account keeps kms:* on it (AWS's default) so it stays manageable.
            if path.contains(".KeyPolicy.") {
                continue;
            }
            let effect = string(at(&s, &["Effect"]), &path);
            assert!(
                s.get("NotResource").is_none(),
                "{file}{path}: no NotResource"
            );
            if s.get("NotAction").is_some() {
                // NotAction only narrows: a Deny for the sessions its condition names.
                assert_eq!(effect, "Deny", "{file}{path}: NotAction only in a Deny");
                assert!(
                    s.get("Condition").is_some(),
                    "{file}{path}: a conditional Deny"
                );
                continue;
            }
            let actions = statement_actions(&s, &path);
            let wildcard = actions.iter().any(|a| a == "*" || a.ends_with(":*"));
            if effect == "Deny" {
                // Only the TLS-only guard may deny with a wildcard.
                if wildcard {
                    assert_eq!(
                        opt(&s, &["Condition", "Bool", "aws:SecureTransport"])
                            .and_then(Value::as_str),
                        Some("false"),
                        "{file}{path}"
                    );
                }
                continue;
            }
            assert_eq!(effect, "Allow", "{file}{path}");
            assert!(!wildcard, "{file}{path}: wildcard action in {actions:?}");
            if let Some(resource) = s.get("Resource") {
                if resource.as_str() == Some("*") {
                    assert!(
                        actions.iter().all(|a| resourceless.contains(&a.as_str())),
                        "{file}{path}: Resource \"*\" for {actions:?}"
                    );
                }
            }
        }
    }
}

/// The inline policy statements of a role, by Sid.
fn role_statements(t: &Value, role: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut policies = at(resource(t, role), &["Properties", "Policies"]);
    // Conditional policies: !If [condition, [policies], AWS::NoValue].
    if let Some(branches) = policies.get("Fn::If").and_then(Value::as_sequence) {
        policies = &branches[1];
    }
    for policy in policies.as_sequence().expect("Policies") {
        for s in at(policy, &["PolicyDocument", "Statement"])
            .as_sequence()
            .expect("Statement")
        {
            let s = match s.get("Fn::If").and_then(Value::as_sequence) {
                Some(b) => b[1].clone(),
                None => s.clone(),
            };
            let sid = s
                .get("Sid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            out.insert(sid, s);
        }
    }
    out
}

fn granted(t: &Value, role: &str) -> BTreeSet<String> {
    role_statements(t, role)
        .values()
        .flat_map(|s| statement_actions(s, role))
        .collect()
}

#[test]
fn each_function_has_its_own_role_with_only_what_it_needs() {
    let t = control_plane();
    let mut roles = BTreeSet::new();
    for f in FUNCTIONS {
        let (role, attr) = getatt_target(at(resource(&t, f.logical_id), &["Properties", "Role"]))
            .unwrap_or_else(|| panic!("{} has an explicit role", f.logical_id));
        assert_eq!(attr, "Arn");
        assert!(roles.insert(role), "{} shares its role", f.logical_id);
        assert!(
            opt(resource(&t, role), &["Properties", "ManagedPolicyArns"]).is_none(),
            "{role}: inline, scoped statements only"
        );
        let actions = granted(&t, role);
        assert!(
            actions.contains("dynamodb:Query") && actions.contains("dynamodb:PutItem"),
            "{role}"
        );
        assert!(actions.contains("sqs:SendMessage"), "{role}: {actions:?}");
    }
    let api = granted(&t, "ApiRole");
    assert!(api.contains("s3:GetObject") && api.contains("s3:PutObject"));
    // The api assumes launcher roles only as a `runner check` session, which the launcher
    // role lets only read (ChecksOnlyRead).
    for (sid, st) in role_statements(&t, "ApiRole") {
        if statement_actions(&st, &sid)
            .iter()
            .any(|a| a.starts_with("sts:"))
        {
            assert_eq!(
                opt(
                    &st,
                    &["Condition", "StringEquals", "aws:RequestTag/sortie:env"]
                )
                .and_then(Value::as_str),
                Some("runner-check"),
                "{sid}: the api opens only check sessions"
            );
            assert_eq!(
                strings(
                    at(
                        &st,
                        &["Condition", "ForAllValues:StringEquals", "aws:TagKeys"]
                    ),
                    "keys"
                ),
                ["sortie:org", "sortie:runner", "sortie:env"],
                "{sid}: a check session's tags"
            );
        }
    }
    let launcher = role_statements(&target_account(), "LauncherRole");
    let read_only = &launcher["ChecksOnlyRead"];
    assert_eq!(string(at(read_only, &["Effect"]), "Effect"), "Deny");
    assert_eq!(
        opt(
            read_only,
            &["Condition", "StringEquals", "aws:PrincipalTag/sortie:env"]
        )
        .and_then(Value::as_str),
        Some("runner-check")
    );
    let allowed_to_checks: BTreeSet<String> = strings(at(read_only, &["NotAction"]), "NotAction")
        .into_iter()
        .collect();
    for a in &allowed_to_checks {
        assert!(
            a.contains(":Describe") || a == "iam:SimulatePrincipalPolicy",
            "a check session may only read, not {a}"
        );
    }
    let task_events = granted(&t, "TaskEventsRole");
    assert!(task_events.contains("events:PutEvents"));
    assert!(!task_events.iter().any(|a| a.starts_with("sts:")));

    for role in ["DispatchRole", "SweeperRole"] {
        let st = role_statements(&t, role);
        let assume = st
            .values()
            .find(|s| statement_actions(s, role) == ["sts:AssumeRole"])
            .expect(role);
        assert_eq!(
            ref_target(at(assume, &["Resource"])),
            Some("LauncherRoleArnPattern"),
            "{role}"
        );
        let tag = st
            .values()
            .find(|s| statement_actions(s, role) == ["sts:TagSession"])
            .expect(role);
        assert_eq!(
            ref_target(at(tag, &["Resource"])),
            Some("LauncherRoleArnPattern"),
            "{role}"
        );
        assert_eq!(
            strings(
                at(
                    tag,
                    &["Condition", "ForAllValues:StringEquals", "aws:TagKeys"]
                ),
                "keys"
            ),
            ["sortie:org", "sortie:runner"],
            "{role}: a launch session is tagged with the org and the runner only"
        );
    }
    let dispatch = granted(&t, "DispatchRole");
    for a in [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
    ] {
        assert!(
            dispatch.contains(a),
            "dispatch consumes the jobs queue: {a}"
        );
    }
    let pattern = string(
        at(&t, &["Parameters", "LauncherRoleArnPattern", "Default"]),
        "pattern",
    );
    assert!(pattern.contains(":role/sortie-launcher-"), "{pattern}");
}

/// Issue 41 item 4: every role that reads the artifacts bucket (s3:GetObject on a key in
/// it) may list the bucket, unconditionally, so S3 answers 404 for a missing key rather than
/// 403, which cannot be told from a forbidden object
/// (<https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html>, "Permissions").
/// A GetObject has no `s3:prefix` in its request context, so a prefix-conditioned grant
/// would not count. The roles that read: the API (logs, plans, outputs), task-events and
/// the sweeper (the policy gate's plan.json, which it also lists for its size).
#[test]
fn every_role_that_reads_the_bucket_may_list_it_so_a_missing_key_is_a_404() {
    let t = control_plane();
    let in_bucket = |r: &Value| {
        r.get("Fn::Sub")
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with("${Bucket.Arn}/"))
    };
    let mut readers = BTreeSet::new();
    for (role, _) in resources_of_type(&t, "AWS::IAM::Role") {
        if opt(resource(&t, role), &["Properties", "Policies"]).is_none() {
            continue;
        }
        let statements = role_statements(&t, role);
        let allows = |s: &&Value| s.get("Effect").and_then(Value::as_str) == Some("Allow");
        let reads = statements.values().filter(allows).any(|s| {
            statement_actions(s, role)
                .iter()
                .any(|a| a == "s3:GetObject")
                && match s.get("Resource") {
                    Some(Value::Sequence(seq)) => seq.iter().any(in_bucket),
                    Some(r) => in_bucket(r),
                    None => false,
                }
        });
        if !reads {
            continue;
        }
        readers.insert(role);
        let lists = statements.values().filter(allows).any(|s| {
            statement_actions(s, role) == ["s3:ListBucket"]
                && s.get("Resource").and_then(getatt_target) == Some(("Bucket", "Arn"))
                && s.get("Condition").is_none()
        });
        assert!(
            lists,
            "{role} reads the artifacts bucket: it needs s3:ListBucket on it, with no \
             condition, or a missing key answers 403"
        );
    }
    assert_eq!(
        readers,
        BTreeSet::from(["ApiRole", "SweeperRole", "TaskEventsRole"]),
        "the roles that read artifacts"
    );
}

// ------------------------------------------------------------------ outputs

#[test]
fn the_outputs_name_what_deploying_needs() {
    let t = control_plane();
    for output in [
        "ApiUrl",
        "BusArn",
        "JobsQueueUrl",
        "JobsDlqUrl",
        "TableName",
    ] {
        assert!(
            opt(&t, &["Outputs", output, "Value"]).is_some(),
            "output {output}"
        );
    }
    let (bus, attr) = getatt_target(at(&t, &["Outputs", "BusArn", "Value"])).expect("BusArn");
    assert_eq!(
        (resource_type(&t, bus), attr),
        ("AWS::Events::EventBus", "Arn")
    );
}

// ------------------------------------------------------------------ target account

#[test]
fn the_launcher_role_trusts_the_control_plane_only_with_the_external_id_and_session_tags() {
    let t = target_account();
    let trust = at(
        resource(&t, "LauncherRole"),
        &["Properties", "AssumeRolePolicyDocument", "Statement"],
    )
    .as_sequence()
    .expect("trust statements");
    let by_action = |action: &str| {
        trust
            .iter()
            .find(|s| statement_actions(s, "Action") == [action])
            .unwrap_or_else(|| panic!("the trust policy allows {action}"))
    };
    let assume = by_action("sts:AssumeRole");
    let principal = format!("{:?}", at(assume, &["Principal", "AWS"]));
    assert!(principal.contains("ControlPlaneAccountId"), "{principal}");
    assert_eq!(
        ref_target(at(assume, &["Condition", "StringEquals", "sts:ExternalId"])),
        Some("ExternalId"),
        "AssumeRole only with the ExternalId"
    );
    let tag = by_action("sts:TagSession");
    for s in [assume, tag] {
        assert_eq!(
            ref_target(at(
                s,
                &["Condition", "StringEquals", "aws:RequestTag/sortie:org"]
            )),
            Some("OwnerOrg"),
            "the session's sortie:org is the org that owns the account"
        );
    }
    assert_eq!(
        strings(
            at(
                tag,
                &["Condition", "ForAllValues:StringEquals", "aws:TagKeys"]
            ),
            "keys"
        ),
        ["sortie:org", "sortie:runner", "sortie:env"],
        "only Sortie's session tags: org and runner (a cached session serves many jobs), env only for a check"
    );
    for s in [assume, tag] {
        assert_eq!(
            opt(s, &["Condition", "Null", "aws:RequestTag/sortie:runner"]).and_then(Value::as_str),
            Some("false"),
            "session tag sortie:runner is required"
        );
        for key in ["sortie:env", "sortie:job"] {
            assert!(
                opt(s, &["Condition", "Null", &format!("aws:RequestTag/{key}")]).is_none(),
                "a launch session carries no {key}: it is shared by many jobs"
            );
        }
    }
}

#[test]
fn the_launcher_may_run_only_the_runner_family_on_its_cluster_and_pass_only_runner_roles() {
    let t = target_account();
    let st = role_statements(&t, "LauncherRole");
    let run = st
        .values()
        .find(|s| statement_actions(s, "a") == ["ecs:RunTask"])
        .expect("RunTask");
    let resource = format!("{:?}", at(run, &["Resource"]));
    assert!(
        resource.contains("task-definition/${RunnerFamily}:*")
            && resource.contains("task-definition/${RunnerFamily}-sortie-*:*"),
        "the runner's family and the ones derived for secrets: {resource}"
    );
    assert!(opt(run, &["Condition", "ArnEquals", "ecs:cluster"]).is_some());

    let actions: BTreeSet<_> = st
        .values()
        .flat_map(|s| statement_actions(s, "a"))
        .collect();
    for a in [
        "ecs:StopTask",
        "ecs:DescribeTasks",
        "ecs:ListTasks",
        "ecs:TagResource",
        "ecs:DescribeTaskDefinition",
        "ecs:RegisterTaskDefinition",
        "iam:PassRole",
    ] {
        assert!(actions.contains(a), "{a}");
    }
    // Task definitions have no cluster; DescribeClusters names the cluster as its resource;
    // every task action is scoped to the cluster.
    let cluster_free = [
        "ecs:DescribeClusters",
        "ecs:TagResource",
        "ecs:DescribeTaskDefinition",
        "ecs:RegisterTaskDefinition",
    ];
    for s in st.values() {
        let acts = statement_actions(s, "a");
        if acts
            .iter()
            .any(|a| a.starts_with("ecs:") && !cluster_free.contains(&a.as_str()))
        {
            assert!(
                opt(s, &["Condition", "ArnEquals", "ecs:cluster"]).is_some(),
                "{acts:?} scoped to the cluster"
            );
        }
    }
    let pass = st
        .values()
        .find(|s| statement_actions(s, "a") == ["iam:PassRole"])
        .unwrap();
    let targets: Vec<_> = at(pass, &["Resource"])
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|r| getatt_target(r).map(|(id, _)| id.to_string()))
        .collect();
    assert_eq!(targets, ["RunnerTaskRole", "RunnerExecutionRole"]);
    assert_eq!(
        string(
            at(pass, &["Condition", "StringEquals", "iam:PassedToService"]),
            "service"
        ),
        "ecs-tasks.amazonaws.com"
    );
}

#[test]
fn the_runner_task_is_non_root_read_only_with_a_writable_work_volume() {
    let t = target_account();
    let p = at(resource(&t, "RunnerTaskDefinition"), &["Properties"]);
    assert_eq!(
        strings(at(p, &["RequiresCompatibilities"]), "compat"),
        vec!["FARGATE"]
    );
    let containers = at(p, &["ContainerDefinitions"]).as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(
        string(at(c, &["Name"]), "Name"),
        "runner",
        "the container_name dispatch overrides"
    );
    let user = string(at(c, &["User"]), "User");
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("numeric uid");
    assert_ne!(uid, 0, "non-root");
    assert_eq!(
        uid,
        dockerfile_user_uid(),
        "the task's user is the image's user"
    );
    assert_eq!(at(c, &["ReadonlyRootFilesystem"]).as_bool(), Some(true));
    // Issue 25 item 3: no container-level hard limit, so the runner container gets the
    // whole task memory, including a runner's `memory` override.
    assert!(
        c.get("Memory").is_none(),
        "the runner container has no memory limit of its own below the task's"
    );
    let work = at(c, &["MountPoints"])
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m.get("ContainerPath").and_then(Value::as_str) == Some("/work"))
        .expect("/work is mounted");
    assert_eq!(work.get("ReadOnly").and_then(Value::as_bool), Some(false));
    let volume = string(at(work, &["SourceVolume"]), "SourceVolume");
    assert!(at(p, &["Volumes"])
        .as_sequence()
        .unwrap()
        .iter()
        .any(|v| v.get("Name").and_then(Value::as_str) == Some(volume)));
    assert_eq!(
        string(at(c, &["LogConfiguration", "LogDriver"]), "LogDriver"),
        "awslogs"
    );
}

#[test]
fn the_cluster_has_fargate_and_spot_and_the_state_bucket_is_safe() {
    let t = target_account();
    let cluster = resource(&t, "Cluster");
    assert_eq!(
        string(at(cluster, &["Condition"]), "Condition"),
        "CreateClusterCondition"
    );
    assert_eq!(
        strings(at(cluster, &["Properties", "CapacityProviders"]), "cp"),
        vec!["FARGATE", "FARGATE_SPOT"]
    );
    let bucket = resource(&t, "StateBucket");
    assert_eq!(
        string(at(bucket, &["Condition"]), "Condition"),
        "CreateStateBucketCondition"
    );
    let p = at(bucket, &["Properties"]);
    assert_eq!(
        string(at(p, &["VersioningConfiguration", "Status"]), "versioning"),
        "Enabled"
    );
    assert!(p.get("BucketEncryption").is_some());
    assert_eq!(
        at(p, &["PublicAccessBlockConfiguration", "BlockPublicPolicy"]).as_bool(),
        Some(true)
    );
    assert_tls_only(&t, "AWS::S3::BucketPolicy", "StateBucket");

    // The lock table every Terraform and OpenTofu version understands.
    let lock = resource(&t, "StateLockTable");
    assert_eq!(
        string(at(lock, &["Condition"]), "Condition"),
        "CreateStateBucketCondition"
    );
    let key = &at(lock, &["Properties", "KeySchema"])
        .as_sequence()
        .unwrap()[0];
    assert_eq!(string(at(key, &["AttributeName"]), "key"), "LockID");
    let task = granted(&t, "RunnerTaskRole");
    for a in [
        "s3:GetObject",
        "s3:PutObject",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    ] {
        assert!(task.contains(a), "the runner task role may {a}");
    }
}

#[test]
fn target_accounts_forward_sortie_task_events_to_the_control_plane_bus() {
    let t = target_account();
    let rules = resources_of_type(&t, "AWS::Events::Rule");
    assert_eq!(rules.len(), 1);
    let p = at(rules[0].1, &["Properties"]);
    ecs_task_state_pattern_is_sortie_only(at(p, &["EventPattern"]), "forwarding rule");
    let target = &at(p, &["Targets"]).as_sequence().unwrap()[0];
    assert_eq!(ref_target(at(target, &["Arn"])), Some("ControlPlaneBusArn"));
    let (role, _) =
        getatt_target(at(target, &["RoleArn"])).expect("a role to put events cross-account");
    let st = role_statements(&t, role);
    let put = st.values().next().unwrap();
    assert_eq!(statement_actions(put, "a"), vec!["events:PutEvents"]);
    assert_eq!(
        ref_target(at(put, &["Resource"])),
        Some("ControlPlaneBusArn")
    );

    // The control-plane bus policy accepts exactly what this rule sends.
    let cp = control_plane();
    let (_, bus) = resources_of_type(&cp, "AWS::Events::EventBus")[0];
    let text = format!("{:?}", at(bus, &["Properties", "Policy"]));
    assert!(
        text.contains("aws.ecs") && text.contains("ECS Task State Change"),
        "{text}"
    );
}

// ------------------------------------------------------------------ EKS

fn k8s_documents() -> Vec<Value> {
    let dir = root().join("infra/k8s");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("infra/k8s")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        let text = fs::read_to_string(&file).unwrap();
        // Multi-document YAML: split on the "---" separator lines.
        let mut chunk = String::new();
        for line in text.lines().chain(std::iter::once("---")) {
            if line.trim_end() == "---" {
                let value: Value = serde_norway::from_str(&chunk)
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                if !value.is_null() {
                    docs.push(value);
                }
                chunk.clear();
            } else {
                chunk.push_str(line);
                chunk.push('\n');
            }
        }
    }
    assert!(!docs.is_empty());
    docs
}

#[test]
fn the_launcher_group_may_manage_jobs_and_read_pods_in_the_runner_namespace_only() {
    let docs = k8s_documents();
    let kind = |d: &Value| {
        d.get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    assert!(docs.iter().any(|d| kind(d) == "Namespace"));
    assert!(docs.iter().any(|d| kind(d) == "ServiceAccount"));
    assert!(
        !docs.iter().any(|d| kind(d).starts_with("Cluster")),
        "no cluster-wide grant"
    );

    let group = string(
        at(
            &target_account(),
            &["Parameters", "EksKubernetesGroup", "Default"],
        ),
        "EksKubernetesGroup",
    )
    .to_string();
    let binding = docs
        .iter()
        .find(|d| {
            kind(d) == "RoleBinding"
                && d.get("subjects")
                    .and_then(Value::as_sequence)
                    .is_some_and(|s| {
                        s.iter().any(|s| {
                            s.get("kind").and_then(Value::as_str) == Some("Group")
                                && s.get("name").and_then(Value::as_str) == Some(&group)
                        })
                    })
        })
        .expect("a RoleBinding for the launcher group of the access entry");
    let role_name = string(at(binding, &["roleRef", "name"]), "roleRef");
    let role = docs
        .iter()
        .find(|d| {
            kind(d) == "Role"
                && opt(d, &["metadata", "name"]).and_then(Value::as_str) == Some(role_name)
        })
        .expect("the bound Role");

    let mut grants: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in at(role, &["rules"]).as_sequence().unwrap() {
        let groups = strings(at(rule, &["apiGroups"]), "apiGroups");
        for res in strings(at(rule, &["resources"]), "resources") {
            for g in &groups {
                let key = if g.is_empty() {
                    res.clone()
                } else {
                    format!("{g}/{res}")
                };
                grants
                    .entry(key)
                    .or_default()
                    .extend(strings(at(rule, &["verbs"]), "verbs"));
            }
        }
    }
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let mut want = BTreeMap::new();
    // Exactly what the eks launcher calls (and `runner check` reviews): nothing more.
    want.insert(
        "batch/jobs".to_string(),
        set(&["create", "get", "list", "delete"]),
    );
    want.insert("pods".to_string(), set(&["list"]));
    assert_eq!(grants, want);
}

// ------------------------------------------------------------------ pilot image

/// The Dockerfile as logical instructions (continuations joined, comments dropped).
fn dockerfile() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in read("infra/pilot.Dockerfile").lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let full = std::mem::take(&mut pending);
        let (instruction, rest) = full.split_once(char::is_whitespace).unwrap_or((&full, ""));
        out.push((instruction.to_uppercase(), rest.trim().to_string()));
    }
    out
}

/// Instructions of the final stage.
fn final_stage() -> Vec<(String, String)> {
    let all = dockerfile();
    let last_from = all.iter().rposition(|(i, _)| i == "FROM").expect("a FROM");
    all[last_from..].to_vec()
}

fn dockerfile_user_uid() -> u32 {
    let users: Vec<_> = final_stage()
        .into_iter()
        .filter(|(i, _)| i == "USER")
        .collect();
    let (_, user) = users.last().expect("the final stage sets USER");
    user.split(':')
        .next()
        .unwrap()
        .parse()
        .expect("USER is a numeric uid, so Kubernetes runAsNonRoot can verify it")
}

#[test]
fn the_pilot_image_is_multi_stage_checksummed_non_root_with_git() {
    let all = dockerfile();
    let froms: Vec<_> = all.iter().filter(|(i, _)| i == "FROM").collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");

    let args: BTreeSet<_> = all
        .iter()
        .filter(|(i, _)| i == "ARG")
        .map(|(_, a)| a.split('=').next().unwrap().to_string())
        .collect();
    for arg in ["TERRAFORM_VERSION", "TOFU_VERSION"] {
        assert!(args.contains(arg), "ARG {arg}");
    }
    assert!(
        args.iter().any(|a| a.starts_with("TERRAFORM_SHA256")),
        "terraform checksum ARG"
    );
    assert!(
        args.iter().any(|a| a.starts_with("TOFU_SHA256")),
        "tofu checksum ARG"
    );
    for (i, a) in all.iter().filter(|(i, _)| i == "ARG") {
        if a.contains("_SHA256") {
            let sum = a.split_once('=').map(|(_, v)| v).unwrap_or("");
            assert!(
                sum.len() == 64 && sum.chars().all(|c| c.is_ascii_hexdigit()),
                "{i} {a}: a sha256"
            );
        }
    }
    let runs: String = all
        .iter()
        .filter(|(i, _)| i == "RUN")
        .map(|(_, r)| r.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        runs.contains("sha256sum -c"),
        "downloads are verified with sha256sum -c"
    );
    assert!(
        runs.contains("sortie-pilot") && runs.contains("--release"),
        "builds sortie-pilot"
    );

    let last = final_stage();
    let user = dockerfile_user_uid();
    assert_ne!(user, 0, "the final stage runs as non-root");
    let final_runs: String = last
        .iter()
        .filter(|(i, _)| i == "RUN")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(
        final_runs.contains("apk add") && final_runs.split_whitespace().any(|w| w == "git"),
        "git is installed in the final stage"
    );
    assert!(
        last.iter().any(|(i, v)| i == "WORKDIR" && v == "/work"),
        "WORKDIR /work"
    );
    assert!(
        last.iter()
            .any(|(i, v)| i == "ENTRYPOINT" && v.contains("sortie-pilot")),
        "sortie-pilot is the entrypoint"
    );
    for tool in ["terraform", "tofu", "sortie-pilot"] {
        assert!(
            last.iter().any(|(i, v)| i == "COPY"
                && v.starts_with("--from=")
                && v.contains(&format!("/{tool}"))),
            "{tool} is copied into the final stage"
        );
    }
}

// ------------------------------------------------------------------ samconfig

#[test]
fn samconfig_has_default_and_prod_and_overrides_only_real_parameters() {
    let text = read("samconfig.toml");
    let t = control_plane();
    let params = at(&t, &["Parameters"]).as_mapping().unwrap();
    for env in ["default", "prod"] {
        for section in ["global", "build", "deploy"] {
            assert!(
                text.contains(&format!("[{env}.{section}.parameters]")),
                "[{env}.{section}.parameters]"
            );
        }
    }
    assert!(text.contains("template_file = \"infra/template.yaml\""));
    assert!(
        text.contains("stack_name = \"sortie\"") && text.contains("stack_name = \"sortie-prod\"")
    );
    assert!(
        text.contains("beta_features = true"),
        "rust-cargolambda is a SAM beta feature"
    );

    // Every "Name=value" override names a parameter of the template, and
    // every parameter without a default is given in each environment.
    let mut env = "";
    let mut given: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            env = header.split('.').next().unwrap();
            continue;
        }
        if let Some(quoted) = line
            .strip_prefix('"')
            .and_then(|l| l.trim_end_matches(',').strip_suffix('"'))
        {
            if let Some((name, _)) = quoted.split_once('=') {
                assert!(
                    params.contains_key(name),
                    "samconfig [{env}] overrides unknown parameter {name}"
                );
                given.entry(env).or_default().insert(name.to_string());
            }
        }
    }
    for env in ["default", "prod"] {
        for (name, p) in params {
            let name = name.as_str().unwrap();
            if p.get("Default").is_none() {
                assert!(
                    given.get(env).is_some_and(|g| g.contains(name)),
                    "[{env}] must set {name}"
                );
            }
        }
    }
}

// ------------------------------------------------------------------ alarms

/// The alarms of the control plane, as (metric, dimension value's target, alarm).
fn alarms(t: &Value) -> Vec<(String, String, Value)> {
    resources_of_type(t, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(id, r)| {
            let p = at(r, &["Properties"]);
            let metric = format!(
                "{}/{}",
                string(at(p, &["Namespace"]), id),
                string(at(p, &["MetricName"]), id)
            );
            let dims = at(p, &["Dimensions"]).as_sequence().expect("Dimensions");
            assert_eq!(dims.len(), 1, "{id}: one dimension");
            let v = at(&dims[0], &["Value"]);
            let target = ref_target(v)
                .or_else(|| getatt_target(v).map(|(r, _)| r))
                .unwrap_or_else(|| panic!("{id}: dimension names a resource"))
                .to_string();
            // Every alarm notifies the alarm topic.
            for key in ["AlarmActions", "OKActions"] {
                let actions = at(p, &[key]).as_sequence().expect(key);
                assert_eq!(actions.len(), 1, "{id}.{key}");
                assert_eq!(ref_target(&actions[0]), Some("AlarmTopic"), "{id}.{key}");
            }
            (metric, target, p.clone())
        })
        .collect()
}

#[test]
fn alarms_watch_dlqs_function_errors_queue_age_and_the_sweeper_and_notify_the_topic() {
    let t = control_plane();
    let all = alarms(&t);
    let find = |metric: &str, target: &str| {
        all.iter()
            .find(|(m, r, _)| m == metric && r == target)
            .map(|(_, _, p)| p)
            .unwrap_or_else(|| panic!("no {metric} alarm on {target}"))
    };
    for dlq in ["JobsDlq", "EventsDlq"] {
        let p = find("AWS/SQS/ApproximateNumberOfMessagesVisible", dlq);
        assert_eq!(number(at(p, &["Threshold"]), dlq), 0);
        assert_eq!(
            string(at(p, &["ComparisonOperator"]), dlq),
            "GreaterThanThreshold"
        );
    }
    let age = find("AWS/SQS/ApproximateAgeOfOldestMessage", "JobsQueue");
    assert_eq!(
        ref_target(at(age, &["Threshold"])),
        Some("JobsQueueAgeAlarmSeconds")
    );
    for f in FUNCTIONS {
        let p = find("AWS/Lambda/Errors", f.logical_id);
        assert_eq!(number(at(p, &["Threshold"]), f.logical_id), 0);
    }
    let sweeper = find("AWS/Lambda/Invocations", "SweeperFunction");
    assert_eq!(
        string(at(sweeper, &["ComparisonOperator"]), "sweeper"),
        "LessThanThreshold"
    );
    assert_eq!(number(at(sweeper, &["Threshold"]), "sweeper"), 1);
    assert_eq!(
        string(at(sweeper, &["TreatMissingData"]), "sweeper"),
        "breaching",
        "no data at all means the sweeper is not running"
    );
    // The topic is encrypted with a key CloudWatch may use, and is an output.
    let topic = at(resource(&t, "AlarmTopic"), &["Properties"]);
    assert_eq!(ref_target(at(topic, &["KmsMasterKeyId"])), Some("AlarmKey"));
    assert_eq!(
        ref_target(at(&t, &["Outputs", "AlarmTopicArn", "Value"])),
        Some("AlarmTopic")
    );
    let key_policy = format!(
        "{:?}",
        at(resource(&t, "AlarmKey"), &["Properties", "KeyPolicy"])
    );
    assert!(
        key_policy.contains("cloudwatch.amazonaws.com"),
        "{key_policy}"
    );
}

#[test]
fn log_statements_name_log_streams_by_group_name_not_by_the_group_arn() {
    // A log group's Arn attribute already ends in ":*", so "${X.Arn}:log-stream:*"
    // would match no stream: the functions and the runner could not write their logs.
    for file in ["infra/template.yaml", "infra/target-account.yaml"] {
        let text = read(file);
        assert!(
            !text.contains("LogGroup.Arn}:log-stream"),
            "{file}: build log-stream ARNs from the log group's name"
        );
        let t = template(file);
        for (path, s) in all_statements(&t) {
            let actions = statement_actions(&s, &path);
            if actions.iter().any(|a| a == "logs:PutLogEvents") {
                let resource = format!("{:?}", at(&s, &["Resource"]));
                assert!(
                    resource.contains(":log-group:${") && resource.contains("}:log-stream:*"),
                    "{file}{path}: {resource}"
                );
            }
        }
    }
}

/// A route's path as the template writes it: the runner's routes name the job `{job}`.
fn template_path(route: sortie_api::Route) -> String {
    if route.uses_job_token() {
        route.method_and_path().1.replace("{id}", "{job}")
    } else {
        route.method_and_path().1.to_string()
    }
}

// ------------------------------------------------------------------ job secrets

/// Sensitive variables: the api creates, tags, describes, reads and deletes the secrets of
/// jobs, and every function that may end a job deletes them; each only under
/// `sortie/jobs/`. Pull requests: the api creates, reads and deletes a connection's secrets
/// and the pulls function only reads them, under `sortie/vcs/`. No other role touches
/// Secrets Manager. The sweeper alone lists secrets (to delete ended jobs' by their tag):
/// ListSecrets takes only `"*"` and returns no value, so that one statement is its only
/// action.
#[test]
fn only_job_secrets_under_sortie_jobs_are_created_read_and_deleted() {
    let t = control_plane();
    let under = |prefix: &str| {
        format!("arn:${{AWS::Partition}}:secretsmanager:${{AWS::Region}}:${{AWS::AccountId}}:secret:sortie/{prefix}/*")
    };
    let (jobs, vcs, notify) = (under("jobs"), under("vcs"), under("notify"));
    let made_read_deleted: &[&str] = &[
        "secretsmanager:CreateSecret",
        "secretsmanager:DeleteSecret",
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetSecretValue",
        "secretsmanager:TagResource",
    ];
    type Grants<'a> = &'a [(&'a str, &'a [&'a str])];
    let expected: [(&str, Grants); 6] = [
        (
            "ApiRole",
            &[
                ("jobs", made_read_deleted),
                ("vcs", made_read_deleted),
                ("notify", made_read_deleted),
            ],
        ),
        (
            "DispatchRole",
            &[("jobs", &["secretsmanager:DeleteSecret"])],
        ),
        (
            "TaskEventsRole",
            &[("jobs", &["secretsmanager:DeleteSecret"])],
        ),
        (
            "SweeperRole",
            &[
                ("jobs", &["secretsmanager:DeleteSecret"]),
                ("*", &["secretsmanager:ListSecrets"]),
            ],
        ),
        ("PullsRole", &[("vcs", &["secretsmanager:GetSecretValue"])]),
        (
            "NotifyRole",
            &[("notify", &["secretsmanager:GetSecretValue"])],
        ),
    ];
    for (role, grants) in expected {
        let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (sid, st) in role_statements(&t, role) {
            let acts = statement_actions(&st, &sid);
            if !acts.iter().any(|a| a.starts_with("secretsmanager:")) {
                continue;
            }
            let resource = at(&st, &["Resource"]);
            if acts == ["secretsmanager:ListSecrets"] && resource == &Value::from("*") {
                seen.entry("*").or_default().extend(acts);
                continue;
            }
            let sub = resource
                .get("Fn::Sub")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{role}/{sid}: one !Sub resource, got {resource:?}"));
            let prefix = if sub == jobs {
                "jobs"
            } else if sub == vcs {
                "vcs"
            } else if sub == notify {
                "notify"
            } else {
                panic!("{role}/{sid}: secrets under sortie/jobs/, sortie/vcs/ or sortie/notify/ only, got {sub}")
            };
            seen.entry(prefix).or_default().extend(acts);
        }
        let want: BTreeMap<&str, BTreeSet<String>> = grants
            .iter()
            .map(|(p, a)| (*p, a.iter().map(|a| a.to_string()).collect()))
            .collect();
        assert_eq!(seen, want, "{role}");
    }
}

// ------------------------------------------------------------------ conditions

/// A stack's parameters and pseudo parameters, for evaluating its conditions.
struct Stack {
    params: BTreeMap<String, String>,
}

impl Stack {
    /// The template's parameter defaults, overridden by `given`.
    fn new(t: &Value, given: &[(&str, &str)]) -> Self {
        let mut params = BTreeMap::new();
        if let Some(Value::Mapping(declared)) = t.get("Parameters") {
            for (name, decl) in declared {
                if let (Some(name), Some(default)) =
                    (name.as_str(), decl.get("Default").and_then(Value::as_str))
                {
                    params.insert(name.to_string(), default.to_string());
                }
            }
        }
        for (name, value) in given {
            params.insert(name.to_string(), value.to_string());
        }
        Stack { params }
    }

    /// The string value of an expression (Ref, Fn::Select, Fn::Split, literals).
    fn value(&self, v: &Value) -> Vec<String> {
        if let Some(s) = v.as_str() {
            return vec![s.to_string()];
        }
        if let Some(name) = ref_target(v) {
            let got = self
                .params
                .get(name)
                .unwrap_or_else(|| panic!("no value for Ref {name}"));
            return vec![got.clone()];
        }
        if let Some(args) = v.get("Fn::Split").and_then(Value::as_sequence) {
            let sep = string(&args[0], "Fn::Split separator");
            let whole = self.scalar(&args[1]);
            return whole.split(sep).map(str::to_string).collect();
        }
        if let Some(args) = v.get("Fn::Select").and_then(Value::as_sequence) {
            let index = number(&args[0], "Fn::Select index") as usize;
            let list = self.value(&args[1]);
            return vec![list
                .get(index)
                .unwrap_or_else(|| panic!("Fn::Select {index} of {list:?}"))
                .clone()];
        }
        panic!("cannot evaluate {v:?}");
    }

    fn scalar(&self, v: &Value) -> String {
        let mut all = self.value(v);
        assert_eq!(all.len(), 1, "{v:?} is one string");
        all.remove(0)
    }

    /// Evaluates a condition expression of template `t`.
    fn holds(&self, t: &Value, c: &Value) -> bool {
        if let Some(name) = c.get("Condition").and_then(Value::as_str) {
            return self.condition(t, name);
        }
        let seq = |key: &str| c.get(key).and_then(Value::as_sequence);
        if let Some(args) = seq("Fn::Equals") {
            return self.scalar(&args[0]) == self.scalar(&args[1]);
        }
        if let Some(args) = seq("Fn::Not") {
            return !self.holds(t, &args[0]);
        }
        if let Some(args) = seq("Fn::And") {
            return args.iter().all(|a| self.holds(t, a));
        }
        if let Some(args) = seq("Fn::Or") {
            return args.iter().any(|a| self.holds(t, a));
        }
        panic!("cannot evaluate condition {c:?}");
    }

    /// Evaluates the named condition of template `t`.
    fn condition(&self, t: &Value, name: &str) -> bool {
        self.holds(t, at(t, &["Conditions", name]))
    }
}

/// Event buses are regional: a target stack forwards task events unless it is
/// in the control plane's own account and region (issue 25, item 4).
#[test]
fn task_events_are_forwarded_when_the_account_or_the_region_differs() {
    let t = target_account();
    let bus = "arn:aws:events:eu-west-1:111122223333:event-bus/sortie";
    let forwards = |account: &str, region: &str, extra: &[(&str, &str)]| {
        let mut given = vec![
            ("AWS::AccountId", account),
            ("AWS::Region", region),
            ("ControlPlaneAccountId", "111122223333"),
            ("ControlPlaneBusArn", bus),
        ];
        given.extend_from_slice(extra);
        Stack::new(&t, &given).condition(&t, "ForwardEvents")
    };
    // The region defaults to the bus's.
    assert!(
        !forwards("111122223333", "eu-west-1", &[]),
        "same account, same region"
    );
    assert!(
        forwards("111122223333", "us-east-1", &[]),
        "same account, other region"
    );
    assert!(
        forwards("222233334444", "eu-west-1", &[]),
        "other account, same region"
    );
    assert!(
        forwards("222233334444", "us-east-1", &[]),
        "other account, other region"
    );
    // An explicit ControlPlaneRegion wins.
    let explicit = [("ControlPlaneRegion", "us-east-1")];
    assert!(!forwards("111122223333", "us-east-1", &explicit));
    assert!(forwards("111122223333", "eu-west-1", &explicit));
    assert!(forwards("222233334444", "us-east-1", &explicit));
    // Both forwarding resources hang on the condition.
    for id in ["ForwardRole", "ForwardTaskEventsRule"] {
        assert_eq!(
            string(at(resource(&t, id), &["Condition"]), id),
            "ForwardEvents"
        );
    }
}
