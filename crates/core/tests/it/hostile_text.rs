//! The properties of the `hostile_text` fuzz target (fuzz/fuzz_targets/hostile_text.rs),
//! generated here with proptest so that they run with every `cargo test` (issue 25,
//! items 7 and 13): URLs judged by their parsed host, no control character or blank text
//! in an accepted identifier, and one meaning for an array claim.

use proptest::prelude::*;
use serde_json::{json, Value};
use sortie_core::agent_pool::OidcTrust;
use sortie_core::auth::{claim_value_matches, claim_values};
use sortie_core::environment::EnvironmentInput;
use sortie_core::limits::has_control;
use sortie_core::urls::{git_url_problem, is_loopback_host, issuer_problem, web_url};
use sortie_core::{Grantee, Problems};

/// URL-ish text: a scheme, an authority built from loopback names, userinfo tricks and
/// domains, and a tail; or any text at all.
fn url_like() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec!["http://", "https://", "HTTP://", "ftp://", ""]);
    let part = prop::sample::select(vec![
        "127.0.0.1",
        "localhost",
        "127.1",
        "[::1]",
        "0x7f.1",
        "2130706433",
        "evil.com",
        "[::ffff:127.0.0.1]",
        "@",
        ".",
        ":80",
        ":x@",
        "%2e",
        "#",
        "?",
        "/",
        "\\",
        "\n",
        " ",
    ]);
    let authority = prop::collection::vec(part, 1..5).prop_map(|v| v.concat());
    prop_oneof![
        4 => (scheme, authority, "[a-z/]{0,6}").prop_map(|(s, a, t)| format!("{s}{a}{t}")),
        1 => any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn an_accepted_plain_http_url_has_a_real_loopback_host(text in url_like()) {
        if let Ok(url) = web_url(&text) {
            prop_assert!(!has_control(&text));
            prop_assert!(url.username().is_empty() && url.password().is_none(), "{text:?}");
            let host = url.host().expect("an accepted URL has a host");
            match url.scheme() {
                "https" => {}
                "http" => prop_assert!(is_loopback_host(&host), "plain http to {host}: {text:?}"),
                other => prop_assert!(false, "scheme {other} accepted: {text:?}"),
            }
        }
        if issuer_problem(&text).is_none() {
            prop_assert!(web_url(&text).is_ok(), "{text:?}");
        }
        let trust = OidcTrust {
            issuer: text.clone(),
            audience: "sortie".into(),
            claim: "sub".into(),
            pattern: "*".into(),
        };
        if trust.problems("oidc").is_empty() {
            prop_assert!(web_url(&text).is_ok(), "{text:?}");
        }
        if git_url_problem(&text).is_none() {
            prop_assert!(!has_control(&text) && !text.chars().any(char::is_whitespace), "{text:?}");
        }
    }

    #[test]
    fn an_accepted_identifier_or_schedule_is_not_blank_and_has_no_control_character(
        text in prop_oneof![any::<String>(), "[ \\t\\n\\r\\x00-\\x1f\\x7f\\u{85}\\u{a0}a-z*:/]{0,12}"]
    ) {
        for grantee in [
            Grantee::Subject { subject: text.clone(), issuer: None },
            Grantee::ClaimPattern {
                claim: "sub".into(),
                pattern: text.clone(),
                issuer: Some(text.clone()),
            },
        ] {
            let mut p = Problems::default();
            grantee.check("grantee", &mut p);
            if p.is_empty() {
                prop_assert!(!has_control(&text) && !text.trim().is_empty(), "{text:?}");
            } else {
                prop_assert!(p.iter().all(|x| x.path.starts_with("grantee.")));
            }
        }
        let body = json!({"name": "prod", "env_type": "production", "drift_schedule": text});
        if EnvironmentInput::from_value(&body, true).is_ok() {
            prop_assert!(!has_control(&text), "a schedule with a control character: {text:?}");
        }
        let body = json!({"name": "prod", "env_type": text});
        if EnvironmentInput::from_value(&body, true).is_ok() {
            prop_assert!(!has_control(&text) && !text.trim().is_empty(), "{text:?}");
        }
    }

    #[test]
    fn the_bracketed_claim_and_its_array_are_one_list(text in any::<String>(), pattern in "[a-z*?]{0,4}") {
        let elements: Vec<&str> = text.split_whitespace().collect();
        let bracketed = Value::String(format!("[{}]", elements.join(" ")));
        let array = json!(elements);
        prop_assert_eq!(claim_values(&bracketed), claim_values(&array));
        for p in [pattern.as_str(), "*", text.as_str()] {
            prop_assert_eq!(claim_value_matches(p, &bracketed), claim_value_matches(p, &array));
        }
    }
}
