//! Runner files: `RunnerSpec::parse` on YAML or JSON text (what `sortie` reads
//! from a file), and `from_value` on the API's document (POST/PUT runners).
//! A valid spec must survive the round trip through the JSON the API serves.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sortie_core::{EnvPath, RunnerSpec, StateStorageConfiguration};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = RunnerSpec::parse(text);
    if let Some(doc) = sortie_fuzz::document(data) {
        assert_eq!(RunnerSpec::from_value(&doc), parsed, "parse and from_value differ");
    }
    let spec = match parsed {
        Ok(spec) => spec,
        Err(e) => return sortie_fuzz::check_error(&e),
    };
    let served = serde_json::to_value(&spec).expect("a spec serialises");
    let back = RunnerSpec::from_value(&served)
        .unwrap_or_else(|e| panic!("a valid spec's own JSON is refused: {e}\n{served}"));
    assert_eq!(back, spec, "a spec changed through its own JSON");
    let stored: RunnerSpec = serde_json::from_value(served).expect("the stored form reads back");
    assert_eq!(stored, spec);
    let env = EnvPath::parse("acme/payments/prod").expect("fixture path");
    if let StateStorageConfiguration::S3(s3) = &spec.state_storage_configuration {
        assert!(s3.state_key(&env).ends_with("acme/payments/prod/terraform.tfstate"));
    }
    let _ = spec.state_storage_configuration.type_name();
    let _ = spec.runner_configuration.timeout_seconds();
    let _ = spec.runner_configuration.aws_access();
});
