//! Hostile text (issue 25, items 7 and 13), through the core checks the API calls:
//! - a URL the checks accept over plain http has a real loopback host (127.0.0.0/8, ::1
//!   or exactly `localhost`) once parsed, and never a user name or password; an accepted
//!   OIDC issuer or git URL has no control character;
//! - a membership's grantee, a drift schedule or an OIDC trust that is accepted has no
//!   control character and is not blank;
//! - a claim read from API Gateway's bracketed form and from the JSON array it stands for
//!   gives one list, and a pattern matches both or neither.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use sortie_core::agent_pool::OidcTrust;
use sortie_core::auth::{claim_value_matches, claim_values};
use sortie_core::environment::EnvironmentInput;
use sortie_core::limits::has_control;
use sortie_core::urls::{git_url_problem, is_loopback_host, issuer_problem, web_url};
use sortie_core::{Grantee, Problems};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    // URLs: judged by the parsed host, never by a prefix.
    if let Ok(url) = web_url(text) {
        assert!(!has_control(text));
        assert!(url.username().is_empty() && url.password().is_none(), "{text:?}");
        let host = url.host().expect("an accepted URL has a host");
        match url.scheme() {
            "https" => {}
            "http" => assert!(is_loopback_host(&host), "plain http to {host}: {text:?}"),
            other => panic!("scheme {other} accepted: {text:?}"),
        }
    }
    if issuer_problem(text).is_none() {
        assert!(web_url(text).is_ok(), "{text:?}");
    }
    let trust = OidcTrust {
        issuer: text.to_string(),
        audience: "sortie".into(),
        claim: "sub".into(),
        pattern: "*".into(),
    };
    if trust.problems("oidc").is_empty() {
        assert!(web_url(text).is_ok(), "{text:?}");
    }
    if git_url_problem(text).is_none() {
        assert!(!has_control(text) && !text.chars().any(char::is_whitespace), "{text:?}");
    }

    // Free-text identifiers: never blank, never a control character.
    for grantee in [
        Grantee::Subject {
            subject: text.to_string(),
            issuer: None,
        },
        Grantee::ClaimPattern {
            claim: "sub".into(),
            pattern: text.to_string(),
            issuer: Some(text.to_string()),
        },
    ] {
        let mut p = Problems::default();
        grantee.check("grantee", &mut p);
        if p.is_empty() {
            assert!(!has_control(text) && !text.trim().is_empty(), "{text:?}");
        } else {
            assert!(p.iter().all(|x| x.path.starts_with("grantee.")));
        }
    }
    let body = json!({"name": "prod", "env_type": "production", "drift_schedule": text});
    if EnvironmentInput::from_value(&body, true).is_ok() {
        assert!(!has_control(text), "a schedule with a control character: {text:?}");
    }

    // One meaning for a claim: the bracketed form and the array it stands for.
    let elements: Vec<&str> = text.split_whitespace().collect();
    let bracketed = Value::String(format!("[{}]", elements.join(" ")));
    let array = json!(elements);
    assert_eq!(claim_values(&bracketed), claim_values(&array), "{text:?}");
    for pattern in ["*", "a*", "*-*", text] {
        assert_eq!(
            claim_value_matches(pattern, &bracketed),
            claim_value_matches(pattern, &array),
            "{pattern:?} on {text:?}"
        );
    }
});
