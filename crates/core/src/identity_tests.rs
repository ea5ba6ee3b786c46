use super::*;
use proptest::prelude::*;

/// A P-256 test key made with `openssl ecparam -name prime256v1 -genkey` for these tests
/// only: its PKCS#8 private key and its SubjectPublicKeyInfo, as KMS's GetPublicKey answers.
const TEST_PKCS8: &str = "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420432cf66cbb7ff0e75d78ec5b512e6fc741a7feb007978361196b539c298c0c94a14403420004a4da2e0cc5af154d436daec86f7eb9d4874f38433bd56207bd740bee2081730f53a9802f49d7498894bd186b52b1873cca1c9c2cefcf5a279330796f2fdf94f8";
const TEST_SPKI: &str = "3059301306072a8648ce3d020106082a8648ce3d03010703420004a4da2e0cc5af154d436daec86f7eb9d4874f38433bd56207bd740bee2081730f53a9802f49d7498894bd186b52b1873cca1c9c2cefcf5a279330796f2fdf94f8";

/// Signatures `openssl dgst -sha256 -sign` made with that key: DER, as KMS's Sign answers
/// (r or s of 33 bytes where its high bit is set, 32 otherwise).
const OPENSSL_SIGNATURES: [(&str, &str); 6] = [
    ("sortie message 1", "3045022078ddc53bb5686bf872cf2bd90ef65bb37e050d95e884728f1908acc87f6d8a83022100f8b7da221ea04d680e1340cd0b720522e6eda4858f68dc333fe1f38b14b69fd7"),
    ("sortie message 2", "3046022100951f02a00a29410c88cbc9ee60282eef28bfe7b78c107b0d476025e3cbd086f2022100a613aa36e769ac8b4b6448f1bea061a85f54d47817b80bf69155e72417bd0cd1"),
    ("sortie message 3", "3044022054a1159935fffe83872b84044ef0f0331db7dcaaad3f6ba7e3f33f10222021ed02200456df4ee28a9772b8b6ddcff40a5c465f1a9efc483dd6f9a64aee74312315f8"),
    ("sortie message 4", "3045022100b367b330288be37c749e0eccd57cf217451a034efdc433db42e888b7ae3d68a9022013cd28c33a8d0179698f01b6dae8ed2d1c9a053f472151962281b2e1d15573c0"),
    ("sortie message 5", "3045022100f39431c8dae478aabe5765428a2da86685dc663d4f2f53ad21811b2b33717ed202207a4206e9abcce4076312be5427603c116da2bd6aaae1ddbedbf932add40adda2"),
    ("sortie message 6", "3045022100afdb1d5da2623e32b293d3da01bee11258dea7d31172735116d50e482b81318c02201e198262d96ebfa5b3dccff04c98b68f54de2592915f344f8aaba75d8765778b"),
];

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn env() -> EnvPath {
    EnvPath::parse("acme/payments/prod").unwrap()
}

fn facts(env: &EnvPath, operation: Operation) -> JobFacts<'_> {
    JobFacts {
        job_id: "01jnx6v4k2m8q9r3s5t7w0y1za",
        environment: env,
        operation,
        requested_by: "alice",
    }
}

/// Claims from `https://sortie.example.com` for `sts.amazonaws.com`, about `env()`.
fn claims(
    operation: Operation,
    phase: Phase,
    at: DateTime<Utc>,
    lifetime: Duration,
) -> Result<JobIdentityClaims, IdentityError> {
    let env = env();
    JobIdentityClaims::new(
        "https://sortie.example.com",
        "sts.amazonaws.com",
        &facts(&env, operation),
        phase,
        at,
        lifetime,
    )
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn the_subject_names_the_organisation_environment_operation_and_phase() {
    assert_eq!(
        subject(&env(), Operation::Apply, Phase::Plan),
        "org:acme:env:acme/payments/prod:op:apply:phase:plan"
    );
    assert_eq!(
        subject(&env(), Operation::Destroy, Phase::Apply),
        "org:acme:env:acme/payments/prod:op:destroy:phase:apply"
    );
}

#[test]
fn claims_carry_the_job_and_live_at_most_an_hour() {
    let env = env();
    let c = JobIdentityClaims::new(
        "https://sortie.example.com/",
        "sts.amazonaws.com",
        &facts(&env, Operation::Apply),
        Phase::Apply,
        now(),
        Duration::hours(12),
    )
    .unwrap();
    assert_eq!(c.iss, "https://sortie.example.com");
    assert_eq!(c.aud, "sts.amazonaws.com");
    assert_eq!(
        c.sub,
        "org:acme:env:acme/payments/prod:op:apply:phase:apply"
    );
    assert_eq!(c.exp - c.iat, 3600, "cut to an hour");
    assert_eq!(c.nbf, c.iat);
    assert_eq!(
        (
            c.organisation.as_str(),
            c.group.as_str(),
            c.environment.as_str()
        ),
        ("acme", "acme/payments", "acme/payments/prod")
    );
    assert_eq!(
        (c.job_id.as_str(), c.requested_by.as_str()),
        ("01jnx6v4k2m8q9r3s5t7w0y1za", "alice")
    );
    assert_eq!((c.operation.as_str(), c.phase), ("apply", Phase::Apply));
    let short = claims(Operation::Plan, Phase::Plan, now(), Duration::seconds(90)).unwrap();
    assert_eq!(short.exp - short.iat, 90);
}

#[test]
fn a_plan_has_no_apply_phase_and_bad_issuers_audiences_and_lifetimes_are_refused() {
    let env = env();
    let plan = facts(&env, Operation::Plan);
    let make = |issuer: &str, audience: &str, phase: Phase, lifetime: Duration| {
        JobIdentityClaims::new(issuer, audience, &plan, phase, now(), lifetime)
    };
    let ok = "https://sortie.example.com";
    assert!(matches!(
        make(ok, "sts", Phase::Apply, Duration::minutes(5)),
        Err(IdentityError::NoApplyPhase { .. })
    ));
    for issuer in [
        "http://sortie.example.com",
        "https://x.example/?a=b",
        "sortie",
        "",
    ] {
        assert!(
            matches!(
                make(issuer, "sts", Phase::Plan, Duration::minutes(5)),
                Err(IdentityError::Issuer { .. })
            ),
            "{issuer}"
        );
    }
    assert!(make(
        "http://127.0.0.1:8080",
        "sts",
        Phase::Plan,
        Duration::minutes(5)
    )
    .is_ok());
    for audience in ["", "a b", "a\nb", &"a".repeat(AUDIENCE_MAX + 1)] {
        assert!(
            matches!(
                make(ok, audience, Phase::Plan, Duration::minutes(5)),
                Err(IdentityError::Audience { .. })
            ),
            "{audience:?}"
        );
    }
    assert_eq!(
        make(ok, "sts", Phase::Plan, Duration::zero()),
        Err(IdentityError::Lifetime)
    );
}

#[test]
fn openssl_signatures_become_jose_signatures_a_jwt_library_verifies_with_the_jwk() {
    let jwk = jwk_from_spki(&hex(TEST_SPKI)).unwrap();
    assert_eq!(
        (
            jwk.kty.as_str(),
            jwk.crv.as_str(),
            jwk.alg.as_str(),
            jwk.use_.as_str()
        ),
        ("EC", "P-256", "ES256", "sig")
    );
    let key = jsonwebtoken::DecodingKey::from_ec_components(&jwk.x, &jwk.y).unwrap();
    for (message, der) in OPENSSL_SIGNATURES {
        let jose = jose_signature(&hex(der)).unwrap();
        let ok = jsonwebtoken::crypto::verify(
            &URL_SAFE_NO_PAD.encode(jose),
            message.as_bytes(),
            &key,
            jsonwebtoken::Algorithm::ES256,
        )
        .unwrap();
        assert!(ok, "{message}");
        let other = jsonwebtoken::crypto::verify(
            &URL_SAFE_NO_PAD.encode(jose),
            b"another message",
            &key,
            jsonwebtoken::Algorithm::ES256,
        )
        .unwrap();
        assert!(!other, "{message}: verifies only its own message");
    }
}

#[test]
fn a_token_from_the_signing_input_verifies_and_decodes_to_its_claims() {
    let claims = claims(
        Operation::Apply,
        Phase::Plan,
        Utc::now(),
        Duration::minutes(10),
    )
    .unwrap();
    let jwk = jwk_from_spki(&hex(TEST_SPKI)).unwrap();
    let input = signing_input(&JwtHeader::es256(&jwk.kid), &claims);
    // Sign the input as KMS would (here with the test key), as JOSE, then as DER and back.
    let encoding = jsonwebtoken::EncodingKey::from_ec_der(&hex(TEST_PKCS8));
    let jose_b64 =
        jsonwebtoken::crypto::sign(input.as_bytes(), &encoding, jsonwebtoken::Algorithm::ES256)
            .unwrap();
    let jose: [u8; 64] = URL_SAFE_NO_PAD
        .decode(jose_b64)
        .unwrap()
        .try_into()
        .unwrap();
    let der = der_of(&jose[..32], &jose[32..]);
    assert_eq!(jose_signature(&der).unwrap(), jose);
    let token = compact(&input, &jose);

    let key = jsonwebtoken::DecodingKey::from_ec_components(&jwk.x, &jwk.y).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&["sts.amazonaws.com"]);
    validation.set_issuer(&["https://sortie.example.com"]);
    let decoded = jsonwebtoken::decode::<JobIdentityClaims>(&token, &key, &validation).unwrap();
    assert_eq!(decoded.claims, claims);
    assert_eq!(decoded.header.kid.as_deref(), Some(jwk.kid.as_str()));
    validation.set_audience(&["another"]);
    assert!(jsonwebtoken::decode::<JobIdentityClaims>(&token, &key, &validation).is_err());
}

#[test]
fn the_jwk_is_the_keys_point_and_its_id_the_rfc_7638_thumbprint() {
    let spki = hex(TEST_SPKI);
    let jwk = jwk_from_spki(&spki).unwrap();
    assert_eq!(URL_SAFE_NO_PAD.decode(&jwk.x).unwrap(), spki[27..59]);
    assert_eq!(URL_SAFE_NO_PAD.decode(&jwk.y).unwrap(), spki[59..91]);
    let canonical = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk.x, jwk.y
    );
    assert_eq!(
        jwk.kid,
        URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
    );
    // Anything but a P-256 key is refused.
    let mut compressed = spki.clone();
    compressed[26] = 0x02;
    assert!(jwk_from_spki(&compressed).is_err());
    assert!(jwk_from_spki(&spki[..90]).is_err());
    let mut other_curve = spki.clone();
    other_curve[22] = 0x22;
    assert!(jwk_from_spki(&other_curve).is_err());
}

#[test]
fn the_discovery_document_points_at_the_keys() {
    let doc = serde_json::to_value(discovery_document("https://sortie.example.com/")).unwrap();
    assert_eq!(doc["issuer"], "https://sortie.example.com");
    assert_eq!(
        doc["jwks_uri"],
        "https://sortie.example.com/.well-known/jwks.json"
    );
    assert_eq!(doc["id_token_signing_alg_values_supported"][0], "ES256");
}

#[test]
fn malformed_der_is_refused() {
    let good = hex(OPENSSL_SIGNATURES[2].1);
    assert!(jose_signature(&good).is_ok());
    let mut trailing = good.clone();
    trailing.push(0);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("trailing byte", trailing),
        ("not a sequence", [&[0x31], &good[1..]].concat()),
        ("truncated", good[..good.len() - 1].to_vec()),
        (
            "a long-form length that fits short",
            [&[0x30, 0x81, good[1]], &good[2..]].concat(),
        ),
    ];
    // r with a needless leading zero: 02 21 00 <32 bytes whose high bit is clear>.
    let r = &good[4..36];
    let s = &good[36..];
    let mut padded = vec![0x30, (good[1] + 1), 0x02, 0x21, 0x00];
    padded.extend_from_slice(r);
    padded.extend_from_slice(s);
    cases.push(("a non-minimal integer", padded));
    // A negative r.
    let mut negative = good.clone();
    negative[4] |= 0x80;
    cases.push(("a negative integer", negative));
    // A zero r.
    cases.push(("a zero integer", der_of(&[0], &[1])));
    for (why, der) in cases {
        assert!(jose_signature(&der).is_err(), "{why}");
    }
    // Over 256 bits.
    assert!(jose_signature(&der_of(&[1; 33], &[1])).is_err());
}

/// DER of `ECDSA-Sig-Value { r, s }` from big-endian magnitudes (test side, written from
/// X.690 independently of the parser).
fn der_of(r: &[u8], s: &[u8]) -> Vec<u8> {
    fn integer(v: &[u8]) -> Vec<u8> {
        let mut v: Vec<u8> = v.iter().copied().skip_while(|b| *b == 0).collect();
        if v.is_empty() {
            v.push(0);
        } else if v[0] & 0x80 != 0 {
            v.insert(0, 0);
        }
        let mut out = vec![0x02, v.len() as u8];
        out.extend(v);
        out
    }
    let body = [integer(r), integer(s)].concat();
    let mut out = vec![0x30];
    if body.len() >= 0x80 {
        out.push(0x81);
    }
    out.push(body.len() as u8);
    out.extend(body);
    out
}

proptest! {
    /// Any r and s under 2^256 (not zero), DER-encoded, come back as their 32-byte halves.
    #[test]
    fn any_der_signature_becomes_its_padded_halves(
        r in proptest::collection::vec(any::<u8>(), 1..=32),
        s in proptest::collection::vec(any::<u8>(), 1..=32),
    ) {
        prop_assume!(r.iter().any(|b| *b != 0) && s.iter().any(|b| *b != 0));
        let jose = jose_signature(&der_of(&r, &s)).unwrap();
        let pad = |v: &[u8]| {
            let mut out = [0u8; 32];
            out[32 - v.len()..].copy_from_slice(v);
            out
        };
        prop_assert_eq!(&jose[..32], &pad(&r)[..]);
        prop_assert_eq!(&jose[32..], &pad(&s)[..]);
    }

    /// A token is refreshed once two-thirds of its life has passed, never before.
    #[test]
    fn a_token_is_refreshed_at_two_thirds_of_its_life(lifetime in 3i64..=3600, at in 0i64..=4000) {
        let claims = claims(Operation::Plan, Phase::Plan, now(), Duration::seconds(lifetime)).unwrap();
        let due = refresh_due(&claims, now() + Duration::seconds(at));
        prop_assert_eq!(due, at >= lifetime * 2 / 3);
        prop_assert!(!refresh_due(&claims, now()));
        prop_assert!(refresh_due(&claims, now() + Duration::seconds(lifetime)));
    }

    /// Whatever a job's session name holds, the AWS session name set is one STS accepts.
    #[test]
    fn the_aws_session_name_is_always_one_sts_accepts(name in ".{0,100}") {
        let setup = token_setup(&identity(), Phase::Plan, "/t", "/d", &name);
        let (_, n) = setup.env.iter().find(|(k, _)| k == "AWS_ROLE_SESSION_NAME").unwrap();
        prop_assert!(crate::limits::is_role_session_name(n), "{}", n);
    }
}

fn identity() -> RunnerIdentity {
    RunnerIdentity {
        audience: "sts.amazonaws.com".into(),
        aws: Some(AwsIdentity {
            plan_role_arn: "arn:aws:iam::123456789012:role/payments-read".into(),
            apply_role_arn: "arn:aws:iam::123456789012:role/payments-write".into(),
        }),
        gcp: Some(GcpIdentity {
            workload_identity_provider:
                "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/sortie/providers/jobs"
                    .into(),
            service_account: Some("terraform@my-project.iam.gserviceaccount.com".into()),
        }),
        azure: Some(AzureIdentity {
            client_id: "11111111-2222-3333-4444-555555555555".into(),
            tenant_id: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into(),
        }),
    }
}

#[test]
fn each_phase_gets_its_own_aws_role_and_every_cloud_reads_the_token_file() {
    let id = identity();
    assert!(id.validate("identity").is_ok());
    let token = "/run/sortie/identity/token";
    let plan = token_setup(
        &id,
        Phase::Plan,
        token,
        "/run/sortie/identity",
        "01jnx6v4k2m8q9r3s5t7w0y1za",
    );
    let apply = token_setup(
        &id,
        Phase::Apply,
        token,
        "/run/sortie/identity/",
        "01jnx6v4k2m8q9r3s5t7w0y1za",
    );
    let get = |s: &TokenSetup, k: &str| {
        s.env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        get(&plan, "AWS_ROLE_ARN"),
        "arn:aws:iam::123456789012:role/payments-read"
    );
    assert_eq!(
        get(&apply, "AWS_ROLE_ARN"),
        "arn:aws:iam::123456789012:role/payments-write"
    );
    for setup in [&plan, &apply] {
        assert_eq!(get(setup, "AWS_WEB_IDENTITY_TOKEN_FILE"), token);
        assert_eq!(
            get(setup, "AWS_ROLE_SESSION_NAME"),
            "01jnx6v4k2m8q9r3s5t7w0y1za"
        );
        assert_eq!(get(setup, "ARM_USE_OIDC"), "true");
        assert_eq!(get(setup, "ARM_OIDC_TOKEN_FILE_PATH"), token);
        assert_eq!(get(setup, "AZURE_FEDERATED_TOKEN_FILE"), token);
        assert_eq!(
            get(setup, "GOOGLE_APPLICATION_CREDENTIALS"),
            "/run/sortie/identity/gcp-credentials.json"
        );
        let (path, body) = &setup.files[0];
        assert_eq!(path, "/run/sortie/identity/gcp-credentials.json");
        let credential: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(credential["type"], "external_account");
        assert_eq!(credential["credential_source"]["file"], token);
        assert_eq!(
            credential["audience"],
            "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/sortie/providers/jobs"
        );
        assert!(credential["service_account_impersonation_url"]
            .as_str()
            .unwrap()
            .ends_with(
                "/serviceAccounts/terraform@my-project.iam.gserviceaccount.com:generateAccessToken"
            ));
    }
    let aws_only = RunnerIdentity {
        gcp: None,
        azure: None,
        ..identity()
    };
    let setup = token_setup(&aws_only, Phase::Plan, token, "/d", "j");
    assert!(setup.files.is_empty());
    assert!(setup.env.iter().all(|(k, _)| k.starts_with("AWS_")));
}

#[test]
fn a_bad_identity_block_names_each_field() {
    let mut id = identity();
    id.audience = String::new();
    id.aws.as_mut().unwrap().apply_role_arn = "arn:aws:s3:::bucket".into();
    id.gcp.as_mut().unwrap().workload_identity_provider = "projects/1/pools/x".into();
    id.gcp.as_mut().unwrap().service_account = Some("Terraform@example.com".into());
    id.azure.as_mut().unwrap().tenant_id = "not-a-guid".into();
    let paths: Vec<String> = id
        .validate("identity")
        .unwrap_err()
        .problems
        .into_iter()
        .map(|p| p.path)
        .collect();
    assert_eq!(
        paths,
        [
            "identity.audience",
            "identity.aws.apply_role_arn",
            "identity.gcp.workload_identity_provider",
            "identity.gcp.service_account",
            "identity.azure.tenant_id",
        ]
    );
    let none = RunnerIdentity {
        audience: "sts.amazonaws.com".into(),
        aws: None,
        gcp: None,
        azure: None,
    };
    assert!(none.validate("identity").is_err(), "one cloud at least");
    let parsed: Result<RunnerIdentity, _> = serde_json::from_value(
        serde_json::json!({"audience": "a", "aws": {"plan_role_arn": "x", "apply_role_arn": "y"}, "extra": 1}),
    );
    assert!(parsed.is_err(), "unknown fields are refused");
}

#[test]
fn only_a_task_that_may_apply_gets_an_apply_token() {
    use crate::JobPhase;
    for operation in [Operation::Plan, Operation::Apply, Operation::Destroy] {
        for task in [None, Some(JobPhase::Plan), Some(JobPhase::Apply)] {
            assert_eq!(phase_refusal(operation, task, Phase::Plan), None);
        }
    }
    let refused = phase_refusal(Operation::Plan, None, Phase::Apply).unwrap();
    assert!(refused.contains("no apply phase"), "{refused}");
    for operation in [Operation::Apply, Operation::Destroy] {
        assert_eq!(phase_refusal(operation, None, Phase::Apply), None);
        assert_eq!(
            phase_refusal(operation, Some(JobPhase::Apply), Phase::Apply),
            None
        );
        let refused = phase_refusal(operation, Some(JobPhase::Plan), Phase::Apply).unwrap();
        assert!(refused.contains("approved plan"), "{refused}");
    }
}

#[test]
fn a_runner_file_carries_its_identity_block_and_names_its_problems() {
    let file = r#"
runner_configuration: {type: local}
state_storage_configuration: {type: local, directory: /tmp/state}
identity:
  audience: sts.amazonaws.com
  aws:
    plan_role_arn: arn:aws:iam::123456789012:role/acme-read
    apply_role_arn: arn:aws:iam::123456789012:role/acme-write
"#;
    let spec = crate::RunnerSpec::parse(file).unwrap();
    let identity = spec.identity.expect("the identity block");
    assert_eq!(
        identity.aws.unwrap().apply_role_arn,
        "arn:aws:iam::123456789012:role/acme-write"
    );
    let bad = r#"
runner_configuration: {type: local}
state_storage_configuration: {type: local, directory: /tmp/state}
identity:
  audience: ""
  aws: {plan_role_arn: nope, apply_role_arn: arn:aws:iam::123456789012:role/w}
"#;
    let paths: Vec<String> = crate::RunnerSpec::parse(bad)
        .unwrap_err()
        .problems
        .into_iter()
        .map(|p| p.path)
        .collect();
    assert_eq!(paths, ["identity.audience", "identity.aws.plan_role_arn"]);
    let unknown = r#"
runner_configuration: {type: local}
state_storage_configuration: {type: local, directory: /tmp/state}
identity: {audience: x, aws: {plan_role_arn: a, apply_role_arn: b, extra: 1}}
"#;
    let problems = crate::RunnerSpec::parse(unknown).unwrap_err().problems;
    assert!(
        problems[0].path.starts_with("identity") && problems[0].path.ends_with("extra"),
        "{problems:?}"
    );
}
