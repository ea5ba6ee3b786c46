//! No implicit source can destroy an environment (issue 24, item 1), end to end: the real
//! `sortie` binary against `sortie dev` on moto, with the real `sortie-pilot` and real
//! Terraform 0.11.11.
//!
//! The environment holds one resource that needs no provider plugin: Terraform 0.11 still
//! has the old managed `terraform_remote_state` (a shim of the data source), which reads a
//! local state that need not exist.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common;

use common::Dev;

const ENV: &str = "acme/demo/hello";

/// `sortie dev` with a local runner (Terraform 0.11.11, state in a fresh moto bucket), a
/// rule and the environment [`ENV`]; the state bucket's name.
fn start() -> (Dev, String) {
    let dev = common::launch("implicit", 1, Some(&common::runner_binary()));
    let bucket = common::state_bucket();
    let runner = format!(
        "tool_version: \"0.11.11\"\nrunner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: {bucket}\n  key_prefix: sortie/\n  region: us-east-1\n  endpoint: {}\n",
        sortie_testkit::endpoint()
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/runners/local",
        Some(Value::String(runner)),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/local"})),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/demo/-/environments",
        Some(json!({"name": "hello", "env_type": "development"})),
    );
    (dev, bucket)
}

fn get(dev: &Dev, path: &str) -> Value {
    let (status, v) = dev.api_with(&dev.token, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

/// The environment's jobs, newest first.
fn jobs(dev: &Dev) -> Vec<Value> {
    get(dev, &format!("/v1/environments/{ENV}/-/jobs?limit=50"))["jobs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Runs `sortie ARGS` in `cwd` with no terminal, to its end.
fn sortie(dev: &Dev, cwd: &Path, args: &[&str]) -> Output {
    common::sortie_command(dev)
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run sortie")
}

fn show(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The managed resources of the environment's Terraform 0.11 state, by address.
fn resources(bucket: &str) -> Vec<String> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let bytes = rt.block_on(async {
        let s3 = sortie_testkit::s3_client(&sortie_testkit::sdk_config().await);
        let out = s3
            .get_object()
            .bucket(bucket)
            .key(format!("sortie/{ENV}/terraform.tfstate"))
            .send()
            .await
            .expect("the state object");
        out.body.collect().await.unwrap().into_bytes().to_vec()
    });
    let state: Value = serde_json::from_slice(&bytes).unwrap();
    state["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["resources"].as_object().into_iter().flatten())
        .map(|(address, _)| address.clone())
        .collect()
}

/// The marker resource, `count` times.
fn marker(count: u32) -> String {
    format!(
        "resource \"terraform_remote_state\" \"marker\" {{\n  count   = {count}\n  backend = \"local\"\n  config {{\n    path = \"/nonexistent/sortie-marker.tfstate\"\n  }}\n}}\n"
    )
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn no_implicit_source_destroys_an_environment() {
    sortie_testkit::require_aws!();
    let (dev, bucket) = start();
    let work = sortie_testkit::scratch_dir("implicit-src").unwrap();
    // A folder whose .tf files sit only in a subfolder.
    write(&work, "infra/main.tf", &marker(1));
    write(&work, "terraform.tfvars", "unused = 1\n");
    let infra = work.join("infra");
    let infra_arg = infra.display().to_string();

    // An explicit apply creates the resource.
    let created = sortie(
        &dev,
        &work,
        &["run", "apply", ENV, "--source", &infra_arg, "--wait"],
    );
    assert_eq!(created.status.code(), Some(0), "{}", show(&created));
    assert_eq!(resources(&bucket), ["terraform_remote_state.marker"]);
    assert_eq!(jobs(&dev).len(), 1);

    // (a) From the folder above, with no --source: refused before submit, exit 1.
    let refused = sortie(&dev, &work, &["run", "apply", ENV, "--wait"]);
    assert_eq!(refused.status.code(), Some(1), "{}", show(&refused));
    let err = stderr(&refused);
    assert!(
        err.contains("no .tf file in the current folder")
            && err.contains("subfolders infra/")
            && err.contains("--source DIR"),
        "{}",
        show(&refused)
    );
    assert_eq!(jobs(&dev).len(), 1, "no job was created");

    // (b) A destroy without --source is refused, even from the folder of the configuration.
    let destroy = sortie(&dev, &infra, &["run", "destroy", ENV]);
    assert_eq!(destroy.status.code(), Some(1), "{}", show(&destroy));
    assert!(
        stderr(&destroy).contains("destroy needs an explicit --source"),
        "{}",
        show(&destroy)
    );
    assert_eq!(jobs(&dev).len(), 1, "no job was created");

    // (c) An empty configuration (variables only) applied to the non-empty state: the
    // runner refuses it after the plan, explicit source or not.
    write(
        &work,
        "vars/variables.tf",
        "variable \"region\" { default = \"us-east-1\" }\n",
    );
    let vars_arg = work.join("vars").display().to_string();
    let empty = sortie(
        &dev,
        &work,
        &["run", "apply", ENV, "--source", &vars_arg, "--wait"],
    );
    assert_eq!(empty.status.code(), Some(6), "{}", show(&empty));
    assert!(
        show(&empty).contains("declares no resource"),
        "{}",
        show(&empty)
    );
    assert_eq!(resources(&bucket), ["terraform_remote_state.marker"]);

    // From an implicit source, an apply whose plan destroys every resource and creates none
    // is submitted marked implicit, and refused by the runner, asking for --source.
    write(&work, "zero/main.tf", &marker(0));
    let all = sortie(&dev, &work.join("zero"), &["run", "apply", ENV, "--wait"]);
    assert_eq!(all.status.code(), Some(6), "{}", show(&all));
    assert!(
        stderr(&all).contains("note: no --source: sending the 1 file(s) of the current folder"),
        "{}",
        show(&all)
    );
    assert!(
        show(&all).contains("destroys every resource of the state (1) and creates none")
            && show(&all).contains("--source DIR"),
        "{}",
        show(&all)
    );
    let id = jobs(&dev)[0]["id"].as_str().unwrap().to_string();
    let newest = get(&dev, &format!("/v1/jobs/{id}"));
    assert_eq!(newest["state"], "failed", "{newest}");
    assert_eq!(
        newest["source"],
        json!({"type": "inline", "implicit": true}),
        "{newest}"
    );
    assert_eq!(resources(&bucket), ["terraform_remote_state.marker"]);
    // Its outputs are asked of an apply that failed, with the right article.
    let outputs = sortie(&dev, &work, &["job", "outputs", &id]);
    assert_eq!(outputs.status.code(), Some(3), "{}", show(&outputs));
    assert!(
        stderr(&outputs).contains("(it is an apply in state `failed`)"),
        "{}",
        show(&outputs)
    );

    // A module layout is detected and named, and its modules are sent: the plan inits them.
    write(
        &work,
        "layout/main.tf",
        "module \"app\" {\n  source = \"./modules/app\"\n}\n",
    );
    write(&work, "layout/modules/app/main.tf", &marker(1));
    write(&work, "layout/scratch/ignored.tf", "this is not HCL {");
    let plan = sortie(&dev, &work.join("layout"), &["run", "plan", ENV, "--wait"]);
    assert_eq!(plan.status.code(), Some(0), "{}", show(&plan));
    assert!(
        stderr(&plan).contains("and the local module(s) it calls: modules/app"),
        "{}",
        show(&plan)
    );
    assert_eq!(resources(&bucket), ["terraform_remote_state.marker"]);

    // The flag is part of the API's documented job request.
    let doc = get(&dev, "/v1/openapi.json");
    // A member is inline or a `$ref` to its own component (as generated clients want it).
    let resolve = |v: &serde_json::Value| match v["$ref"].as_str() {
        Some(r) => {
            doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")].clone()
        }
        None => v.clone(),
    };
    let inline = doc["components"]["schemas"]["Source"]["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .map(resolve)
        .find(|v| v.to_string().contains("\"inline\""))
        .unwrap_or_else(|| {
            panic!(
                "an inline source in {}",
                doc["components"]["schemas"]["Source"]
            )
        });
    assert_eq!(
        inline["properties"]["implicit"]["type"], "boolean",
        "{inline}"
    );
    let _ = std::fs::remove_dir_all(&work);
}
