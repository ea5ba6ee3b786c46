//! Notifications end to end (issue 44) through `sortie dev`: a real HTTPS receiver on
//! loopback (its own CA, trusted through `SSL_CERT_FILE`), a real job's end as the event,
//! and the guarded client.
//! - `ok` gets a signed delivery that verifies with the secret shown once;
//! - `flaky` answers 503 twice and is retried (the waits capped at a second) until it takes
//!   the delivery, with the same `X-Sortie-Delivery` each time;
//! - `gone` answers 404: given up at once, the destination unhealthy, one
//!   `sortie.notification.failed` on the bus; redelivered from its history once it answers
//!   again, and healthy again;
//! - nothing is sent to `169.254.169.254` or `10.0.0.1` (refused when written), nor to a
//!   name that resolves to `10.0.0.1` (refused when sent).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sortie_core::notify::delivery::{verify, DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use sortie_testkit::receiver::Receiver;

use crate::common::{self, DevOptions};

const MAIN_TF: &str = "resource \"terraform_data\" \"app\" {\n  input = \"notified\"\n}\n";

/// Waits (a minute at most) until `check` holds for the history of destination `name`.
fn wait_history(
    dev: &common::Dev,
    name: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let history = dev.api(
            "GET",
            &format!("/v1/groups/acme/-/notifications/{name}/deliveries"),
            None,
        )["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if check(&history) {
            return history;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: never {what}: {history:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn deliveries_are_signed_retried_given_up_on_redelivered_and_never_sent_inside() {
    sortie_testkit::require_aws!();
    let _ = sortie_testkit::terraform111_bin();
    let receiver = Receiver::start();
    let dir = sortie_testkit::scratch_dir("notify-e2e").unwrap();
    let ca = dir.join("receiver-ca.pem");
    std::fs::write(&ca, receiver.ca_pem()).unwrap();
    let ca = ca.to_string_lossy().into_owned();
    let dev = common::start_dev(DevOptions {
        prefix: "notify-e2e",
        runner: Some(common::runner_binary()),
        extra_args: &[
            "--notify-retry-cap",
            "1",
            "--resolve",
            "inside.example.com=10.0.0.1",
        ],
        env: &[("SSL_CERT_FILE", ca.as_str())],
        ..Default::default()
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (sqs, events) = rt.block_on(common::capture_events(&dev.bus, "notify-e2e"));
    let bucket = common::state_bucket();
    common::local_runner_on_s3(&dev, "tf111", ">= 1.5", &bucket);
    dev.api(
        "POST",
        "/v1/groups/acme/-/environments",
        Some(json!({"name": "web", "env_type": "development"})),
    );

    // Written: an address inside is refused before anything is stored.
    for url in ["https://169.254.169.254/latest", "https://10.0.0.1/hook"] {
        let (status, body) = dev.api_with(
            &dev.token,
            "POST",
            "/v1/groups/acme/-/notifications/inside",
            Some(json!({"type": "webhook", "url": url})),
        );
        assert_eq!(status, 400, "{url}: {body}");
        assert_eq!(body["error"]["fields"][0]["path"], "url", "{body}");
    }
    let mut secrets = std::collections::BTreeMap::new();
    for (name, url) in [
        ("ok", receiver.url("/ok")),
        ("flaky", receiver.url("/flaky")),
        ("gone", receiver.url("/gone")),
        (
            "inside",
            format!("https://inside.example.com:{}/inside", receiver.port()),
        ),
    ] {
        let made = dev.api(
            "POST",
            &format!("/v1/groups/acme/-/notifications/{name}"),
            Some(json!({"type": "webhook", "url": url, "events": ["job_completed", "job_failed"]})),
        );
        let secret = made["signing_secret"].as_str().unwrap().to_string();
        assert!(secret.starts_with("whsec_"), "{made}");
        secrets.insert(name, secret);
        // Shown once: never in a read.
        let read = dev.api(
            "GET",
            &format!("/v1/groups/acme/-/notifications/{name}"),
            None,
        );
        assert!(read.get("signing_secret").is_none(), "{read}");
    }
    receiver.script("/flaky", &[503, 503]);
    receiver.script("/gone", &[404]);

    let job = dev.api(
        "POST",
        "/v1/environments/acme/web/-/jobs",
        Some(json!({"operation": "plan", "files": {"main.tf": MAIN_TF}})),
    );
    let id = job["id"].as_str().unwrap().to_string();
    let ended = dev.wait_terminal(&id);
    assert_eq!(ended["state"], "succeeded", "{ended}");

    // ok: one delivery, signed, that verifies with the secret shown at creation.
    let ok = wait_history(&dev, "ok", "delivered", |h| {
        h.first().is_some_and(|d| d["state"] == "delivered")
    });
    assert_eq!(ok[0]["status"], 200);
    let got = receiver.received("/ok");
    assert_eq!(got.len(), 1, "{got:?}");
    let header = |r: &sortie_testkit::receiver::Received, name: &str| r.headers.get(name).cloned();
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        verify(
            secrets["ok"].as_bytes(),
            header(&got[0], TIMESTAMP_HEADER).as_deref(),
            header(&got[0], SIGNATURE_HEADER).as_deref(),
            &got[0].body,
            now,
            300
        ),
        Ok(())
    );
    // Another destination's secret does not verify it.
    assert!(verify(
        secrets["gone"].as_bytes(),
        header(&got[0], TIMESTAMP_HEADER).as_deref(),
        header(&got[0], SIGNATURE_HEADER).as_deref(),
        &got[0].body,
        now,
        300
    )
    .is_err());
    let body: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(body["detail"]["job_id"], id.as_str(), "{body}");

    // flaky: 503, 503, then taken; the same delivery id each time.
    let flaky = wait_history(&dev, "flaky", "delivered", |h| {
        h.first().is_some_and(|d| d["state"] == "delivered")
    });
    assert_eq!(flaky[0]["attempts"], 3, "{flaky:?}");
    let tries = receiver.received("/flaky");
    assert_eq!(tries.len(), 3, "{tries:?}");
    let ids: std::collections::BTreeSet<_> = tries
        .iter()
        .map(|r| header(r, DELIVERY_HEADER).unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");

    // gone: given up on the first 404, the destination unhealthy, and reported once.
    let gone = wait_history(&dev, "gone", "given up", |h| {
        h.first().is_some_and(|d| d["state"] == "gave_up")
    });
    assert_eq!(
        (gone[0]["status"].clone(), gone[0]["attempts"].clone()),
        (json!(404), json!(1))
    );
    let destination = dev.api("GET", "/v1/groups/acme/-/notifications/gone", None);
    assert_eq!(destination["health"]["healthy"], false, "{destination}");
    // Each destination given up on is reported once: `gone`, and `inside` (below).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut failed: Vec<Value> = vec![];
    while failed.len() < 2 && Instant::now() < deadline {
        let seen = rt.block_on(common::drain_events(&sqs, &events));
        failed.extend(
            seen.into_iter()
                .filter(|e| e["detail-type"] == "sortie.notification.failed"),
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut reported: Vec<&str> = failed
        .iter()
        .map(|e| e["detail"]["destination"].as_str().unwrap_or_default())
        .collect();
    reported.sort_unstable();
    assert_eq!(reported, ["gone", "inside"], "{failed:?}");

    // Redelivered from its history: the same id, taken now, and the destination healthy.
    let delivery = gone[0]["id"].as_str().unwrap();
    let again = dev.api(
        "POST",
        &format!("/v1/groups/acme/-/notifications/gone/deliveries/{delivery}/redeliver"),
        None,
    );
    assert_eq!(again["delivery"]["state"], "delivered", "{again}");
    let resent = receiver.received("/gone");
    assert_eq!(resent.len(), 2);
    assert_eq!(
        header(&resent[1], DELIVERY_HEADER).as_deref(),
        Some(delivery)
    );
    let destination = dev.api("GET", "/v1/groups/acme/-/notifications/gone", None);
    assert_eq!(destination["health"]["healthy"], true, "{destination}");

    // inside: the name resolves to 10.0.0.1, so nothing is sent; the reason says why.
    let inside = wait_history(&dev, "inside", "given up", |h| {
        h.first().is_some_and(|d| d["state"] == "gave_up")
    });
    let reason = inside[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("10.0.0.1"), "{inside:?}");
    assert!(receiver.received("/inside").is_empty());

    // A test, sent when asked, answers how it went.
    let test = dev.api("POST", "/v1/groups/acme/-/notifications/ok/test", None);
    assert_eq!(test["delivery"]["state"], "delivered", "{test}");
    assert_eq!(test["delivery"]["event_type"], "sortie.notification.test");
    assert_eq!(receiver.received("/ok").len(), 2);

    // The CLI: the same destinations, managed and tried.
    let run = |args: &[&str]| -> common::Out { common::sortie(&dev, args).into() };
    let listed = run(&["notify", "list", "acme"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    for name in ["ok", "flaky", "gone", "inside"] {
        assert!(listed.stdout.contains(name), "{listed:?}");
    }
    assert!(
        listed.stdout.contains("UNHEALTHY"),
        "inside gave up: {listed:?}"
    );
    let history = run(&["notify", "deliveries", "acme/gone"]);
    assert!(
        history.stdout.contains("gave up") && history.stdout.contains("delivered"),
        "{history:?}"
    );
    let cli_url = receiver.url("/cli");
    let made = run(&[
        "notify",
        "create",
        "acme/cli",
        "--webhook",
        &cli_url,
        "--events",
        "job_failed",
        "--environments",
        "acme/**",
    ]);
    assert_eq!(made.code, 0, "{made:?}");
    assert!(made.stdout.contains("signing secret: whsec_"), "{made:?}");
    let updated = run(&[
        "notify",
        "update",
        "acme/cli",
        "--description",
        "from the CLI",
    ]);
    assert_eq!(updated.code, 0, "{updated:?}");
    let read: Value =
        serde_json::from_str(&run(&["notify", "get", "acme/cli", "-o", "json"]).stdout).unwrap();
    assert_eq!(
        (
            read["url"].as_str(),
            read["events"].clone(),
            read["description"].as_str()
        ),
        (
            Some(cli_url.as_str()),
            json!(["job_failed"]),
            Some("from the CLI")
        ),
        "an update keeps what it does not name: {read}"
    );
    assert!(read.get("signing_secret").is_none(), "{read}");
    let tried = run(&["notify", "test", "acme/cli"]);
    assert_eq!(tried.code, 0, "{tried:?}");
    assert!(tried.stdout.contains("delivered"), "{tried:?}");
    receiver.script("/cli", &[404]);
    let refused = run(&["notify", "test", "acme/cli"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("404"), "{refused:?}");
    let rotated = run(&["notify", "rotate-secret", "acme/cli"]);
    assert!(
        rotated.stdout.contains("signing secret: whsec_"),
        "{rotated:?}"
    );
    assert_eq!(run(&["notify", "delete", "acme/cli"]).code, 0);
    assert_eq!(run(&["notify", "get", "acme/cli"]).code, 3);
}
