//! Expiry through `sortie dev` (moto): `--ttl` on `env create`, its check against the
//! shortest TTL, and `sortie env extend PATH --by 24h` moving the end (shown as the
//! environment's `expires_at`).

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use crate::common;

#[test]
fn env_extend_moves_an_expiring_environments_end() {
    sortie_testkit::require_aws!();
    let dev = common::launch("expiry", 1, None);
    let runner = "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: local\n  directory: /tmp/sortie-expiry-state\n";
    dev.api(
        "POST",
        "/v1/groups/acme/-/runners/local",
        Some(Value::String(runner.into())),
    );
    dev.api(
        "POST",
        "/v1/groups/acme/-/rules",
        Some(json!({"id": "default", "runner_id": "acme/local"})),
    );
    let at = Utc::now() + Duration::hours(3);
    let (status, body) = dev.api_with(
        &dev.token,
        "POST",
        "/v1/groups/acme/app/-/environments",
        Some(json!({"name": "web", "env_type": "development", "expires_at": at.to_rfc3339()})),
    );
    assert_eq!(status, 201, "{body}");

    let out: common::Out =
        common::sortie(&dev, &["env", "extend", "acme/app/web", "--by", "24h"]).into();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("acme/app/web now expires at") && out.stdout.ends_with(" UTC\n"),
        "{out:?}"
    );
    let (status, env) = dev.api_with(&dev.token, "GET", "/v1/environments/acme/app/web", None);
    assert_eq!(status, 200, "{env}");
    let end: DateTime<Utc> = env["expires_at"].as_str().unwrap().parse().unwrap();
    let shown: common::Out = common::sortie(&dev, &["get", "env", "acme/app/web"]).into();
    assert!(
        shown.stdout.lines().any(|l| l.starts_with("expiry:")
            && l.contains(&end.format("%Y-%m-%d %H:%M:%S UTC").to_string())),
        "get env shows the end: {shown:?}"
    );
    assert!(
        (end - (at + Duration::hours(24))).num_seconds().abs() <= 1,
        "{end}"
    );

    let out: common::Out =
        common::sortie(&dev, &["env", "extend", "acme/app/web", "--by", "soon"]).into();
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("by"), "{out:?}");
}
