//! Each limit at its boundary: the largest value accepted, the next one refused.

use super::*;
use serde_json::json;

#[test]
fn role_arn_at_its_boundaries() {
    let arn = |r: &str| format!("arn:aws:iam::123456789012:role/{r}");
    assert!(is_role_arn(&arn("sortie-launcher")));
    for p in PARTITIONS {
        assert!(
            is_role_arn(&format!("arn:{p}:iam::123456789012:role/x")),
            "{p}"
        );
    }
    for p in ["aws-iso", "aws-iso-b", "awsx", "AWS", ""] {
        assert!(
            !is_role_arn(&format!("arn:{p}:iam::123456789012:role/x")),
            "{p}"
        );
    }
    // Name: 64 accepted, 65 refused, empty refused.
    assert!(is_role_arn(&arn(&"n".repeat(ROLE_NAME_MAX))));
    assert!(!is_role_arn(&arn(&"n".repeat(ROLE_NAME_MAX + 1))));
    assert!(!is_role_arn(&arn("")));
    assert!(is_role_arn(&arn("a+=,.@_-Z9")));
    assert!(!is_role_arn(&arn("a b")) && !is_role_arn(&arn("a\nb")) && !is_role_arn(&arn("a*b")));
    // Path: 512 in all (slashes included) accepted, 513 refused.
    let inner = |n: usize| "p".repeat(n - 2);
    assert!(is_role_arn(&arn(&format!("{}/x", inner(ROLE_PATH_MAX)))));
    assert!(!is_role_arn(&arn(&format!(
        "{}/x",
        inner(ROLE_PATH_MAX + 1)
    ))));
    assert!(is_role_arn(&arn("team/sub/x")));
    assert!(!is_role_arn(&arn("/x")), "empty path segment");
    assert!(!is_role_arn(&arn("team/x/")), "empty name");
    assert!(
        !is_role_arn(&arn("t\u{e9}am/x")),
        "path outside U+0021–U+007E"
    );
    // ARN length: 2048 is the bound, whatever the parts.
    assert!(role_arn_problem(&"a".repeat(ROLE_ARN_MAX + 1))
        .unwrap()
        .contains("longer"));
    assert!(!is_role_arn("arn:aws:iam::1234:role/x"));
    assert!(!is_role_arn("arn:aws:iam::123456789012:user/x"));
    assert!(!is_role_arn("arn:aws:iam:eu-west-1:123456789012:role/x"));
}

#[test]
fn external_id_and_session_names_at_their_boundaries() {
    assert!(external_id_problem(&"e".repeat(EXTERNAL_ID_MIN)).is_none());
    assert!(external_id_problem(&"e".repeat(EXTERNAL_ID_MIN - 1)).is_some());
    assert!(external_id_problem(&"e".repeat(EXTERNAL_ID_MAX)).is_none());
    assert!(external_id_problem(&"e".repeat(EXTERNAL_ID_MAX + 1)).is_some());
    assert!(external_id_problem("a+=,.@:/-_Z9").is_none());
    for bad in ["ext id", "ext\nid", "ext\u{0}", "ext*", "ext\u{e9}"] {
        assert!(external_id_problem(bad).is_some(), "{bad:?}");
    }
    // The launcher's session name is `sortie-<job id>`, a 26-character ULID.
    assert!(is_role_session_name("sortie-01HZX3K4V9Q0G5M7N8P2R6S1T3"));
    assert!(is_role_session_name(&"s".repeat(ROLE_SESSION_NAME_MAX)));
    assert!(!is_role_session_name(
        &"s".repeat(ROLE_SESSION_NAME_MAX + 1)
    ));
    assert!(!is_role_session_name("s") && !is_role_session_name("sortie:x"));
}

#[test]
fn session_tags_at_their_boundaries() {
    assert!(
        is_session_tag_key("sortie:env") && is_session_tag_key(&"k".repeat(SESSION_TAG_KEY_MAX))
    );
    assert!(!is_session_tag_key("") && !is_session_tag_key(&"k".repeat(SESSION_TAG_KEY_MAX + 1)));
    assert!(is_session_tag_value("") && is_session_tag_value("acme/payments/prod"));
    assert!(is_session_tag_value(&"v".repeat(SESSION_TAG_VALUE_MAX)));
    assert!(!is_session_tag_value(
        &"v".repeat(SESSION_TAG_VALUE_MAX + 1)
    ));
    assert!(!is_session_tag_value("a\nb") && !is_session_tag_value("a*b"));
    assert!(is_session_tag_value("caf\u{e9} 1\u{a0}2"));
    // Sortie sends sortie:org and sortie:runner (and sortie:env on a check session).
    const { assert!(SESSION_TAGS_MAX >= 3) };
}

#[test]
fn ecs_network_and_names_at_their_boundaries() {
    assert!(is_subnet_id("subnet-0123456789abcdef0") && is_subnet_id("subnet-0a1b2c3d"));
    for bad in [
        "subnet-0a",
        "subnet-0123456789ABCDEF0",
        "subnet-0123456789abcdef",
        "sg-0a1b2c3d",
        "subnet-0a1b2c3d\n",
    ] {
        assert!(!is_subnet_id(bad), "{bad:?}");
    }
    assert!(is_security_group_id("sg-0123456789abcdef0") && !is_security_group_id("sg-1"));
    assert_eq!((ECS_SUBNETS_MAX, ECS_SECURITY_GROUPS_MAX), (16, 5));
    assert!(is_ecs_name(&"c".repeat(ECS_NAME_MAX)) && !is_ecs_name(&"c".repeat(ECS_NAME_MAX + 1)));
    assert!(!is_ecs_name("") && !is_ecs_name("a b") && !is_ecs_name("a.b"));
    assert!(is_ecs_cluster("runners"));
    assert!(is_ecs_cluster(
        "arn:aws:ecs:eu-west-1:123456789012:cluster/runners"
    ));
    assert!(!is_ecs_cluster(
        "arn:aws:ecs:eu-west-1:123456789012:cluster/run ners"
    ));
    assert!(is_task_definition("sortie-runner") && is_task_definition("sortie-runner:3"));
    assert!(is_task_definition(
        "arn:aws:ecs:eu-west-1:123456789012:task-definition/sortie-runner:3"
    ));
    assert!(!is_task_definition("sortie-runner:") && !is_task_definition("sortie-runner:x"));
    // Sortie's own RunTask values.
    let job_id = "01HZX3K4V9Q0G5M7N8P2R6S1T3";
    assert!(job_id.len() <= ECS_CLIENT_TOKEN_MAX);
    assert!(is_ecs_started_by(&format!("sortie-{job_id}")));
    assert!(!is_ecs_started_by(&"s".repeat(ECS_STARTED_BY_MAX + 1)));
}

#[test]
fn fargate_pairs() {
    assert!(
        fargate_memory_ok(256, 512)
            && fargate_memory_ok(256, 2048)
            && !fargate_memory_ok(256, 4096)
    );
    assert!(fargate_memory_ok(4096, 30720) && !fargate_memory_ok(4096, 31744));
    assert!(fargate_memory_ok(16384, 122_880) && !fargate_memory_ok(16384, 131_072));
    assert!(
        fargate_memory_ok(8192, 20480) && !fargate_memory_ok(8192, 17408),
        "8 vCPU steps by 4 GiB"
    );
    assert!(!fargate_memory_ok(300, 512));
    for cpu in FARGATE_CPU_VALUES {
        assert!((0..200_000).any(|m| fargate_memory_ok(cpu, m)), "{cpu}");
    }
}

#[test]
fn env_overrides_size_counts_the_json() {
    let k = "TF_LOG".to_string();
    let v = "a\"b".to_string();
    // {"name":"TF_LOG","value":"a\"b"},
    assert_eq!(
        env_overrides_size([(&k, &v)]),
        r#"{"name":"TF_LOG","value":"a\"b"},"#.len()
    );
    assert!(is_env_var_name("_X1") && is_env_var_name("TF_VAR_x"));
    assert!(
        !is_env_var_name("")
            && !is_env_var_name("1X")
            && !is_env_var_name("A-B")
            && !is_env_var_name("A B")
    );
}

#[test]
fn secret_refs() {
    let sm = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf";
    assert!(is_secret_ref(sm));
    assert!(is_secret_ref(&format!("{sm}:password::")));
    assert!(is_secret_ref(
        "arn:aws-us-gov:ssm:us-gov-west-1:123456789012:parameter/app/token"
    ));
    for bad in [
        format!("{sm}\nhunter2"),
        format!("{sm} hunter2"),
        format!("{sm}\thunter2"),
        format!("{sm}:a:b:c:d"),
        "hunter2".into(),
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:".into(),
        "arn:aws:s3:::bucket/key".into(),
        "arn:aws:ssm:eu-west-1:123456789012:parameter/".into(),
        "arn:aws:ssm:eu-west-1:123456789012:parameter/a b".into(),
    ] {
        assert!(!is_secret_ref(&bad), "{bad:?}");
    }
    // SSM: the whole ARN is at most 1011 characters.
    let prefix = "arn:aws:ssm:eu-west-1:123456789012:parameter/";
    assert!(is_secret_ref(&format!(
        "{prefix}{}",
        "p".repeat(SSM_PARAMETER_ARN_MAX - prefix.len())
    )));
    assert!(!is_secret_ref(&format!(
        "{prefix}{}",
        "p".repeat(SSM_PARAMETER_ARN_MAX + 1 - prefix.len())
    )));
    let prefix = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:";
    assert!(is_secret_ref(&format!(
        "{prefix}{}",
        "s".repeat(SECRET_ARN_MAX - prefix.len())
    )));
    assert!(!is_secret_ref(&format!(
        "{prefix}{}",
        "s".repeat(SECRET_ARN_MAX + 1 - prefix.len())
    )));
}

#[test]
fn bucket_names_at_their_boundaries() {
    assert!(is_bucket_name("abc") && is_bucket_name(&"b".repeat(BUCKET_NAME_MAX)));
    assert!(!is_bucket_name("ab") && !is_bucket_name(&"b".repeat(BUCKET_NAME_MAX + 1)));
    assert!(is_bucket_name("sortie-state.eu") && is_bucket_name("1.2.3"));
    for bad in [
        "Sortie",
        "a_b",
        "-ab",
        "ab-",
        ".ab",
        "a..b",
        "192.168.5.4",
        "xn--ab",
        "sthree-ab",
        "amzn-s3-demo-ab",
        "ab-s3alias",
        "ab--ol-s3",
        "ab.mrap",
        "ab--x-s3",
        "ab--table-s3",
    ] {
        assert!(!is_bucket_name(bad), "{bad}");
    }
}

#[test]
fn object_keys_at_their_boundaries() {
    assert!(object_key_problem(&"k".repeat(OBJECT_KEY_MAX_BYTES)).is_none());
    assert!(object_key_problem(&"k".repeat(OBJECT_KEY_MAX_BYTES + 1)).is_some());
    // Bytes, not characters: 512 two-byte characters fit, 513 do not.
    assert!(object_key_problem(&"\u{e9}".repeat(512)).is_none());
    assert!(object_key_problem(&"\u{e9}".repeat(513)).is_some());
    assert!(object_key_problem("").is_some() && object_key_problem("a\nb").is_some());
    assert_eq!(STATE_KEY_PREFIX_MAX_BYTES, 1024 - 256 - 18 - 7);
}

#[test]
fn lock_tables_and_eks_clusters() {
    assert!(is_dynamodb_table_name("tf-locks") && !is_dynamodb_table_name("tf"));
    assert!(is_dynamodb_table_name(&"t".repeat(DYNAMODB_TABLE_NAME_MAX)));
    assert!(!is_dynamodb_table_name(
        &"t".repeat(DYNAMODB_TABLE_NAME_MAX + 1)
    ));
    assert!(!is_dynamodb_table_name("tf locks"));
    assert!(
        is_eks_cluster_name("platform") && is_eks_cluster_name(&"e".repeat(EKS_CLUSTER_NAME_MAX))
    );
    assert!(!is_eks_cluster_name(&"e".repeat(EKS_CLUSTER_NAME_MAX + 1)));
    assert!(!is_eks_cluster_name("-platform") && !is_eks_cluster_name("plat.form"));
}

#[test]
fn kubernetes_names_at_their_boundaries() {
    assert!(
        is_dns_label(&"n".repeat(DNS_LABEL_MAX)) && !is_dns_label(&"n".repeat(DNS_LABEL_MAX + 1))
    );
    assert!(
        !is_dns_label("a-") && !is_dns_label("-a") && !is_dns_label("A") && !is_dns_label("a.b")
    );
    let sub = |n: usize| {
        let label = "s".repeat(63);
        let mut s = [label.as_str(); 4].join(".");
        s.truncate(n);
        s
    };
    assert_eq!(sub(DNS_SUBDOMAIN_MAX).len(), DNS_SUBDOMAIN_MAX);
    assert!(is_dns_subdomain(&sub(DNS_SUBDOMAIN_MAX)));
    assert!(!is_dns_subdomain(&format!("{}s", sub(DNS_SUBDOMAIN_MAX))));
    assert!(
        is_dns_subdomain("sortie.runner") && !is_dns_subdomain("a..b") && !is_dns_subdomain("a.-b")
    );
    // Label keys: optional prefix, then a name of at most 63.
    assert!(is_label_key("disktype") && is_label_key("karpenter.sh/do-not-disrupt"));
    assert!(
        is_label_key(&"k".repeat(LABEL_NAME_MAX)) && !is_label_key(&"k".repeat(LABEL_NAME_MAX + 1))
    );
    assert!(is_label_key(&format!("{}/k", sub(DNS_SUBDOMAIN_MAX))));
    assert!(!is_label_key(&format!("{}s/k", sub(DNS_SUBDOMAIN_MAX))));
    for bad in ["", "/k", "a/", "-k", "k-", "k k", "a/b/c", "Example.com/k"] {
        assert!(!is_label_key(bad), "{bad:?}");
    }
    assert!(is_label_value("") && is_label_value("Ssd_1.a-b"));
    assert!(
        is_label_value(&"v".repeat(LABEL_VALUE_MAX))
            && !is_label_value(&"v".repeat(LABEL_VALUE_MAX + 1))
    );
    assert!(!is_label_value("-v") && !is_label_value("v\n"));
}

#[test]
fn item_size_follows_the_documented_rules() {
    // name "a" (1) + string "bcd" (3)
    assert_eq!(dynamodb_item_size(&json!({"a": "bcd"})), 4);
    // name (1) + null/bool (1) each
    assert_eq!(dynamodb_item_size(&json!({"n": null, "b": true})), 4);
    // name (1) + 3 digits → 2 + 1
    assert_eq!(dynamodb_item_size(&json!({"x": 123})), 4);
    // name (1) + list overhead 3 + per element (1 + 1 byte string)
    assert_eq!(dynamodb_item_size(&json!({"l": ["a", "b"]})), 1 + 3 + 2 * 2);
    // name (1) + map overhead 3 + per element (1 + key 1 + value 1)
    assert_eq!(dynamodb_item_size(&json!({"m": {"k": "v"}})), 1 + 3 + 3);
    assert_eq!(dynamodb_item_size(&json!({"m": {}})), 4);
    // UTF-8 bytes, not characters.
    assert_eq!(dynamodb_item_size(&json!({"\u{e9}": "\u{e9}"})), 4);
    // The job budget leaves room for the runner snapshot and the record.
    assert_eq!(
        JOB_REQUEST_ITEM_MAX + RUNNER_SPEC_ITEM_MAX + JOB_RECORD_RESERVE,
        DYNAMODB_ITEM_MAX
    );
}

#[test]
fn nesting_and_keys_at_their_boundaries() {
    let nested = |n: usize| (0..n).fold(json!(1), |inner, _| json!({ "a": inner }));
    assert_eq!(nesting_depth(&json!("s")), 0);
    assert_eq!(nesting_depth(&json!([])), 1);
    assert_eq!(nesting_depth(&nested(3)), 3);
    let check = |v: &Value, enclosing| {
        let mut p = crate::problems::Problems::default();
        check_dynamodb_value(v, "v", enclosing, &mut p);
        p.0.into_iter().map(|p| p.path).collect::<Vec<_>>()
    };
    assert!(check(&nested(DYNAMODB_NESTING_MAX - 1), 1).is_empty());
    assert_eq!(check(&nested(DYNAMODB_NESTING_MAX), 1), ["v"]);
    assert!(check(&nested(DYNAMODB_NESTING_MAX), 0).is_empty());
    assert_eq!(check(&json!({"a": {"": 1}}), 0), ["v.a.\"\""]);
    assert_eq!(check(&json!([{"": 1}]), 0), ["v[0].\"\""]);
    let long = "k".repeat(DYNAMODB_NAME_MAX);
    assert!(check(&json!({ long: 1 }), 0).is_empty());
    let too_long = "k".repeat(DYNAMODB_NAME_MAX + 1);
    assert_eq!(
        check(&json!({ too_long.clone(): 1 }), 0),
        [format!("v.{too_long}")]
    );
    assert_eq!(
        check(&json!({"big": 1e200, "ok": 1e125, "tiny": 1e-200}), 0).len(),
        2
    );
    // A hostile depth does not overflow the stack.
    let deep = (0..10_000).fold(json!(1), |inner, _| Value::Array(vec![inner]));
    assert_eq!(nesting_depth(&deep), 10_000);
    assert_eq!(check(&deep, 0), ["v"]);
    std::mem::forget(deep); // dropping 10k nested Vecs recursively would overflow instead
}
