//! Every limit that AWS, Kubernetes or DynamoDB places on a value Sortie passes on, in
//! one place, each with its source.
//!
//! The policy (ARCHITECTURE.md, "Limits"): what AWS or DynamoDB would refuse at launch
//! or at write is refused at the API, with a problem at the field's path. Validation in
//! [`crate::runner`], [`crate::job`], [`crate::rule`] and [`crate::environment`] calls the
//! checks here; nothing else hard-codes a limit.
//!
//! The checks are plain Rust, not regular expressions: each documented pattern is small
//! enough to spell out, and core stays free of a regex engine. Where AWS documents a
//! regular expression, it is quoted next to the check that implements it. In AWS's
//! patterns `\w` means `[A-Za-z0-9_]`.
//!
//! Where a source is silent or ambiguous, the doc comment says which reading was chosen;
//! the choice is always the stricter one.

use serde_json::Value;

// ---------------------------------------------------------------------------------------
// Characters
// ---------------------------------------------------------------------------------------

/// True when `s` has a control character: C0 (U+0000–U+001F), DEL (U+007F) or C1
/// (U+0080–U+009F), the Unicode general category `Cc`.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// True when `s` has whitespace (any Unicode `White_Space`) or a control character.
pub fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `\w` in AWS's patterns: `[A-Za-z0-9_]`.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_hex_lower(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// ---------------------------------------------------------------------------------------
// Partitions, accounts and regions
// ---------------------------------------------------------------------------------------

/// The partitions Sortie accepts in an ARN: `aws`, `aws-cn`, `aws-us-gov`.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html>
/// (`partition`). The ISO partitions (`aws-iso`, `aws-iso-b`, `aws-iso-e`, `aws-iso-f`)
/// and `aws-eusc` are **refused**: they are isolated from the public partitions (a role
/// there can never be assumed from a control plane outside it) and Sortie is not deployed
/// in them. Add them here if it ever is.
pub const PARTITIONS: [&str; 3] = ["aws", "aws-cn", "aws-us-gov"];

/// True for one of [`PARTITIONS`].
pub fn is_partition(s: &str) -> bool {
    PARTITIONS.contains(&s)
}

/// True for a 12-digit AWS account id.
///
/// Source: <https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html>
/// ("a 12-digit number").
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// True for a region name such as `eu-west-1`, `us-gov-west-1` or `cn-north-1`: at least
/// three `-`-separated parts of `[a-z0-9]`, the last all digits, at most 32 characters.
///
/// Source: <https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html>.
/// AWS documents no pattern; the shape and the 32-character bound are this module's
/// reading of every published region code.
pub fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    s.len() <= 32
        && parts.len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(is_lower_alnum))
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The six `:`-separated parts of an ARN, with a known partition; `None` otherwise.
fn arn_parts(arn: &str) -> Option<[&str; 6]> {
    let mut it = arn.splitn(6, ':');
    let parts = [
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
    ];
    (parts[0] == "arn" && is_partition(parts[1])).then_some(parts)
}

// ---------------------------------------------------------------------------------------
// IAM role ARNs
// ---------------------------------------------------------------------------------------

/// Longest IAM role ARN: 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_Role.html> (`Arn`,
/// length 20–2048) and STS AssumeRole `RoleArn` (20–2048),
/// <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>.
pub const ROLE_ARN_MAX: usize = 2048;

/// Longest IAM role name: 64 characters of `[\w+=,.@-]+`.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html>
/// (`RoleName`, length 1–64, pattern `[\w+=,.@-]+`).
pub const ROLE_NAME_MAX: usize = 64;

/// Longest IAM path: 512 characters, `/` or `/…/` of U+0021–U+007E.
///
/// Source: <https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html>
/// (`Path`, length 1–512, pattern `(\u002F)|(\u002F[\u0021-\u007E]+\u002F)`).
pub const ROLE_PATH_MAX: usize = 512;

/// True for a character IAM allows in a role (or user) name: `[\w+=,.@-]`.
pub fn is_role_name_char(c: char) -> bool {
    is_word(c) || "+=,.@-".contains(c)
}

/// Why `arn` is not an IAM role ARN `arn:<partition>:iam::<account>:role/<path/><name>`,
/// or `None` when it is one.
pub fn role_arn_problem(arn: &str) -> Option<String> {
    if arn.len() > ROLE_ARN_MAX {
        return Some(format!("is longer than {ROLE_ARN_MAX} characters"));
    }
    if has_space_or_control(arn) {
        return Some("must not contain whitespace or control characters".into());
    }
    let Some([_, _, service, region, account, resource]) = arn_parts(arn) else {
        return Some(format!(
            "is not an ARN in a known partition ({})",
            PARTITIONS.join(", ")
        ));
    };
    if service != "iam" || !region.is_empty() || !is_account_id(account) {
        return Some("is not an IAM ARN (arn:<partition>:iam::<12-digit account>:…)".into());
    }
    let Some(rest) = resource.strip_prefix("role/") else {
        return Some("is not a role ARN (…:role/<name>)".into());
    };
    // `role/a/b/name`: the path is `/a/b/`, the name `name`.
    let (path_inner, name) = match rest.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, rest),
    };
    if name.is_empty() || name.chars().count() > ROLE_NAME_MAX {
        return Some(format!("role name must be 1 to {ROLE_NAME_MAX} characters"));
    }
    if !name.chars().all(is_role_name_char) {
        return Some("role name may only contain letters, digits and +=,.@_-".into());
    }
    if let Some(inner) = path_inner {
        let path_len = inner.len() + 2;
        if inner.is_empty() || path_len > ROLE_PATH_MAX {
            return Some(format!(
                "role path must be `/` or `/…/`, at most {ROLE_PATH_MAX} characters"
            ));
        }
        if !inner.chars().all(|c| ('\u{21}'..='\u{7e}').contains(&c)) {
            return Some("role path may only contain printable ASCII characters".into());
        }
    }
    None
}

/// True for a valid IAM role ARN (see [`role_arn_problem`]).
pub fn is_role_arn(arn: &str) -> bool {
    role_arn_problem(arn).is_none()
}

// ---------------------------------------------------------------------------------------
// STS AssumeRole
// ---------------------------------------------------------------------------------------

/// Shortest ExternalId: 2 characters.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`ExternalId`, length 2–1224, pattern `[\w+=,.@:\/-]*`).
pub const EXTERNAL_ID_MIN: usize = 2;
/// Longest ExternalId: 1224 characters (same source as [`EXTERNAL_ID_MIN`]).
pub const EXTERNAL_ID_MAX: usize = 1224;

/// Why `id` is not a valid STS ExternalId, or `None` when it is one.
pub fn external_id_problem(id: &str) -> Option<String> {
    let n = id.chars().count();
    if !(EXTERNAL_ID_MIN..=EXTERNAL_ID_MAX).contains(&n) {
        return Some(format!(
            "must be {EXTERNAL_ID_MIN} to {EXTERNAL_ID_MAX} characters long"
        ));
    }
    if !id.chars().all(|c| is_word(c) || "+=,.@:/-".contains(c)) {
        return Some("may only contain letters, digits and +=,.@:/_- (STS ExternalId)".into());
    }
    None
}

/// Shortest RoleSessionName: 2 characters.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`RoleSessionName`, length 2–64, pattern `[\w+=,.@-]*`).
pub const ROLE_SESSION_NAME_MIN: usize = 2;
/// Longest RoleSessionName: 64 characters (same source as [`ROLE_SESSION_NAME_MIN`]).
pub const ROLE_SESSION_NAME_MAX: usize = 64;

/// True for a valid RoleSessionName, such as the launcher's `sortie-<job id>`.
pub fn is_role_session_name(s: &str) -> bool {
    (ROLE_SESSION_NAME_MIN..=ROLE_SESSION_NAME_MAX).contains(&s.len())
        && s.chars().all(is_role_name_char)
}

/// Most session tags on one AssumeRole: 50.
///
/// Source: <https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html>
/// (`Tags`, "maximum number of 50 items") and `Tag`,
/// <https://docs.aws.amazon.com/STS/latest/APIReference/API_Tag.html>.
pub const SESSION_TAGS_MAX: usize = 50;
/// Longest session tag key: 128 characters (key length 1–128, source as [`SESSION_TAGS_MAX`]).
pub const SESSION_TAG_KEY_MAX: usize = 128;
/// Longest session tag value: 256 characters (value length 0–256, source as
/// [`SESSION_TAGS_MAX`]). Sortie's `sortie:env` tag carries the environment path, so an
/// environment path is at most this long (see [`crate::names::MAX_ENV_PATH_LEN`]).
pub const SESSION_TAG_VALUE_MAX: usize = 256;

/// True for a character of a session tag key or value: `[\p{L}\p{Z}\p{N}_.:/=+\-@]`.
///
/// `\p{L}` is read as [`char::is_alphabetic`] (which also admits a few combining marks),
/// `\p{Z}` as the space separators below, `\p{N}` as [`char::is_numeric`].
pub fn is_session_tag_char(c: char) -> bool {
    let separator = matches!(
        c,
        ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    );
    c.is_alphabetic() || separator || c.is_numeric() || "_.:/=+-@".contains(c)
}

/// True for a valid session tag key (1–128 characters).
pub fn is_session_tag_key(s: &str) -> bool {
    (1..=SESSION_TAG_KEY_MAX).contains(&s.chars().count()) && s.chars().all(is_session_tag_char)
}

/// True for a valid session tag value (0–256 characters).
pub fn is_session_tag_value(s: &str) -> bool {
    s.chars().count() <= SESSION_TAG_VALUE_MAX && s.chars().all(is_session_tag_char)
}

// ---------------------------------------------------------------------------------------
// ECS
// ---------------------------------------------------------------------------------------

/// Most subnets in a task's `awsvpcConfiguration`: 16.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_AwsVpcConfiguration.html>
/// (`subnets`: "You can specify up to 16 subnets").
pub const ECS_SUBNETS_MAX: usize = 16;
/// Most security groups in a task's `awsvpcConfiguration`: 5 (`securityGroups`: "up to 5
/// security groups"; source as [`ECS_SUBNETS_MAX`]).
pub const ECS_SECURITY_GROUPS_MAX: usize = 5;

/// True for an EC2 resource id `<prefix>-<8 or 17 lowercase hex digits>`.
///
/// Source: <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/resource-ids.html>
/// (ids are the prefix, a hyphen and 8 or, since 2018, 17 hexadecimal characters).
pub fn is_ec2_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|hex| matches!(hex.len(), 8 | 17) && is_hex_lower(hex))
}

/// True for a subnet id `subnet-<8 or 17 hex>` (see [`is_ec2_id`]).
pub fn is_subnet_id(s: &str) -> bool {
    is_ec2_id(s, "subnet")
}

/// True for a security group id `sg-<8 or 17 hex>` (see [`is_ec2_id`]).
pub fn is_security_group_id(s: &str) -> bool {
    is_ec2_id(s, "sg")
}

/// Longest ECS name (cluster, task definition family, container): 255 characters of
/// letters, digits, `_` and `-`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_CreateCluster.html>
/// (`clusterName`), `RegisterTaskDefinition` `family` and `ContainerDefinition` `name`
/// ("Up to 255 letters (uppercase and lowercase), numbers, underscores, and hyphens").
pub const ECS_NAME_MAX: usize = 255;

/// True for an ECS cluster, family or container name (see [`ECS_NAME_MAX`]).
pub fn is_ecs_name(s: &str) -> bool {
    (1..=ECS_NAME_MAX).contains(&s.len()) && s.chars().all(|c| is_word(c) || c == '-')
}

/// True for a RunTask `cluster`: a cluster name, or
/// `arn:<partition>:ecs:<region>:<account>:cluster/<name>`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`cluster`: "The short name or full Amazon Resource Name (ARN)").
pub fn is_ecs_cluster(s: &str) -> bool {
    is_ecs_name(s)
        || ecs_arn_resource(s)
            .and_then(|r| r.strip_prefix("cluster/"))
            .is_some_and(is_ecs_name)
}

/// True for a RunTask `taskDefinition`: `family`, `family:revision` or
/// `arn:<partition>:ecs:<region>:<account>:task-definition/family:revision`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`taskDefinition`: "The family and revision (family:revision) or full ARN").
pub fn is_task_definition(s: &str) -> bool {
    let family_revision = |s: &str| match s.split_once(':') {
        None => is_ecs_name(s),
        Some((family, revision)) => {
            is_ecs_name(family)
                && !revision.is_empty()
                && revision.len() <= 10
                && revision.bytes().all(|b| b.is_ascii_digit())
        }
    };
    family_revision(s)
        || ecs_arn_resource(s)
            .and_then(|r| r.strip_prefix("task-definition/"))
            .is_some_and(family_revision)
}

fn ecs_arn_resource(s: &str) -> Option<&str> {
    let [_, _, service, region, account, resource] = arn_parts(s)?;
    (service == "ecs" && is_region(region) && is_account_id(account) && !has_space_or_control(s))
        .then_some(resource)
}

/// The Fargate task CPU values, in CPU units.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html#fargate-tasks-size>
/// (task CPU and memory) and `TaskOverride` `cpu`/`memory`,
/// <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_TaskOverride.html>.
pub const FARGATE_CPU_VALUES: [u32; 7] = [256, 512, 1024, 2048, 4096, 8192, 16384];

/// True when `memory` MiB is a valid Fargate task memory size for `cpu` units (source as
/// [`FARGATE_CPU_VALUES`]): 256 → 512, 1024, 2048; 512 → 1–4 GiB; 1024 → 2–8 GiB;
/// 2048 → 4–16 GiB; 4096 → 8–30 GiB, each in 1 GiB steps; 8192 → 16–60 GiB in 4 GiB
/// steps; 16384 → 32–120 GiB in 8 GiB steps.
pub fn fargate_memory_ok(cpu: u32, memory: u32) -> bool {
    let (lo, hi, step) = match cpu {
        256 => return matches!(memory, 512 | 1024 | 2048),
        512 => (1024, 4096, 1024),
        1024 => (2048, 8192, 1024),
        2048 => (4096, 16384, 1024),
        4096 => (8192, 30720, 1024),
        8192 => (16384, 61440, 4096),
        16384 => (32768, 122_880, 8192),
        _ => return false,
    };
    (lo..=hi).contains(&memory) && (memory - lo).is_multiple_of(step)
}

/// Most characters in a RunTask `overrides`, JSON formatting included: 8192.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`overrides`: "A total of 8192 characters are allowed for overrides. This limit
/// includes the JSON formatting characters of the override structure.")
pub const ECS_OVERRIDES_MAX: usize = 8192;

/// Sortie's share of [`ECS_OVERRIDES_MAX`] for a runner's `env`, measured by
/// [`env_overrides_size`]: 4096. Another 2048 go to a job's `secret_refs` (which reach the
/// container as `SORTIE_SECRET_REFS`, see [`JOB_SECRET_REFS_MAX`]); the rest is left for
/// Sortie's own variables (job id, token, API URL), the container name and the structure.
/// The same bound applies to `eks` and `local` runners, so a runner can change type.
pub const RUNNER_ENV_MAX: usize = 4096;

/// Sortie's share of [`ECS_OVERRIDES_MAX`] for a job's `secret_refs`, measured as the
/// JSON text of `SORTIE_SECRET_REFS` as it appears in the overrides: 2048.
pub const JOB_SECRET_REFS_MAX: usize = 2048;

/// How many characters `env` takes in ECS overrides: each variable is
/// `{"name":"<name>","value":"<value>"},` with the name and value JSON-escaped.
pub fn env_overrides_size<'a>(env: impl IntoIterator<Item = (&'a String, &'a String)>) -> usize {
    env.into_iter()
        .map(|(k, v)| json_string_len(k) + json_string_len(v) + r#"{"name":,"value":},"#.len())
        .sum()
}

/// The length of `s` as a JSON string literal, quotes included.
pub fn json_string_len(s: &str) -> usize {
    serde_json::to_string(s)
        .map(|j| j.len())
        .unwrap_or(usize::MAX)
}

/// Longest RunTask `startedBy`: 36 characters of letters, digits, `-`, `/` and `_`.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`startedBy`: "Up to 36 letters (uppercase and lowercase), numbers, hyphens (-), forward
/// slash (/), and underscores (_) are allowed").
pub const ECS_STARTED_BY_MAX: usize = 36;

/// True for a `startedBy` value ECS documents as valid (see [`ECS_STARTED_BY_MAX`]).
pub fn is_ecs_started_by(s: &str) -> bool {
    s.len() <= ECS_STARTED_BY_MAX && s.chars().all(|c| is_word(c) || c == '-' || c == '/')
}

/// Longest RunTask `clientToken`: 64 characters.
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_RunTask.html>
/// (`clientToken`: "Up to 64 ASCII characters are allowed").
pub const ECS_CLIENT_TOKEN_MAX: usize = 64;

/// Longest ECS resource tag key (128) and value (256).
///
/// Source: <https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_Tag.html>
/// (`key` 1–128, `value` 0–256). The task's `sortie:env` tag carries the environment
/// path, bounded by [`SESSION_TAG_VALUE_MAX`], the same 256.
pub const ECS_TAG_VALUE_MAX: usize = 256;

// ---------------------------------------------------------------------------------------
// Secrets Manager and SSM Parameter Store references
// ---------------------------------------------------------------------------------------

/// Longest secret reference ARN: 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html>
/// (`SecretId`, length 1–2048).
pub const SECRET_ARN_MAX: usize = 2048;

/// Longest SSM parameter ARN: 1011 characters, the ARN prefix included.
///
/// Source: <https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_PutParameter.html>
/// (`Name`: "The maximum length for a parameter name that you create is 1011 characters.
/// This includes the characters in the ARN that precede the name you specify").
pub const SSM_PARAMETER_ARN_MAX: usize = 1011;

/// True for a Secrets Manager secret ARN or an SSM parameter ARN: a reference, never a
/// value. No whitespace or control character anywhere.
///
/// - Secrets Manager: `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>`,
///   the name of `[A-Za-z0-9/_+=.@-]` (<https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html>,
///   `Name`), optionally followed by ECS's `:<json-key>:<version-stage>:<version-id>`
///   (<https://docs.aws.amazon.com/AmazonECS/latest/developerguide/secrets-envvar-secrets-manager.html>),
///   whose parts are read as the same characters.
/// - SSM: `arn:<partition>:ssm:<region>:<account>:parameter/<name>`, the name of
///   `[A-Za-z0-9_.-/]` (<https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-su-create.html>).
pub fn is_secret_ref(s: &str) -> bool {
    if has_space_or_control(s) {
        return false;
    }
    let Some([_, _, service, region, account, resource]) = arn_parts(s) else {
        return false;
    };
    if !is_region(region) || !is_account_id(account) {
        return false;
    }
    match service {
        "secretsmanager" => {
            s.len() <= SECRET_ARN_MAX
                && resource.strip_prefix("secret:").is_some_and(|rest| {
                    let mut parts = rest.split(':');
                    let name = parts.next().unwrap_or_default();
                    let ok = |p: &str| {
                        p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "/_+=.@-".contains(c))
                    };
                    !name.is_empty() && ok(name) && parts.count() <= 3 && rest.split(':').all(ok)
                })
        }
        "ssm" => {
            s.len() <= SSM_PARAMETER_ARN_MAX
                && resource.strip_prefix("parameter/").is_some_and(|name| {
                    !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
                })
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// S3, KMS and the DynamoDB lock table
// ---------------------------------------------------------------------------------------

/// Shortest S3 bucket name: 3 characters.
///
/// Source: <https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html>
/// (general purpose buckets).
pub const BUCKET_NAME_MIN: usize = 3;
/// Longest S3 bucket name: 63 characters (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_NAME_MAX: usize = 63;
/// Prefixes S3 reserves: a bucket name must not start with one (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
/// Suffixes S3 reserves: a bucket name must not end with one (source as [`BUCKET_NAME_MIN`]).
pub const BUCKET_RESERVED_SUFFIXES: [&str; 5] =
    ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/// Why `name` is not a valid general purpose S3 bucket name, or `None` when it is one:
/// 3–63 of `[a-z0-9.-]`, starting and ending with a letter or digit, no `..`, not an IPv4
/// address, none of the reserved prefixes and suffixes.
pub fn bucket_name_problem(name: &str) -> Option<String> {
    let b = name.as_bytes();
    if !(BUCKET_NAME_MIN..=BUCKET_NAME_MAX).contains(&b.len()) {
        return Some(format!(
            "must be {BUCKET_NAME_MIN} to {BUCKET_NAME_MAX} characters long"
        ));
    }
    if !name
        .chars()
        .all(|c| is_lower_alnum(c) || c == '.' || c == '-')
    {
        return Some("may only contain lowercase letters, digits, `.` and `-`".into());
    }
    if !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return Some("must start and end with a letter or digit".into());
    }
    if name.contains("..") {
        return Some("must not contain `..`".into());
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Some("must not be formatted as an IP address".into());
    }
    if let Some(p) = BUCKET_RESERVED_PREFIXES
        .iter()
        .find(|p| name.starts_with(**p))
    {
        return Some(format!("must not start with `{p}`, which S3 reserves"));
    }
    if let Some(s) = BUCKET_RESERVED_SUFFIXES
        .iter()
        .find(|s| name.ends_with(**s))
    {
        return Some(format!("must not end with `{s}`, which S3 reserves"));
    }
    None
}

/// True for a valid general purpose S3 bucket name (see [`bucket_name_problem`]).
pub fn is_bucket_name(name: &str) -> bool {
    bucket_name_problem(name).is_none()
}

/// Longest S3 object key: 1024 bytes of UTF-8.
///
/// Source: <https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html>
/// ("The object key name … has a maximum length of 1,024 bytes").
pub const OBJECT_KEY_MAX_BYTES: usize = 1024;

/// Why `key` is not an S3 object key Sortie accepts, or `None`: 1–1024 bytes and no
/// control character (S3 allows some, but they cannot survive XML 1.0 listings and are
/// the "characters to avoid" of the same page).
pub fn object_key_problem(key: &str) -> Option<String> {
    if key.is_empty() || key.len() > OBJECT_KEY_MAX_BYTES {
        return Some(format!(
            "must be 1 to {OBJECT_KEY_MAX_BYTES} bytes of UTF-8"
        ));
    }
    if has_control(key) {
        return Some("must not contain control characters".into());
    }
    None
}

/// The state object's key is `<key_prefix><environment path>/terraform.tfstate`, and
/// `use_lockfile` adds `.tflock` to it: the longest `key_prefix` that keeps the longest
/// environment path's lock file key within [`OBJECT_KEY_MAX_BYTES`].
pub const STATE_KEY_PREFIX_MAX_BYTES: usize = OBJECT_KEY_MAX_BYTES
    - crate::names::MAX_ENV_PATH_LEN
    - "/terraform.tfstate".len()
    - ".tflock".len();

/// Longest KMS key id (key id, key ARN, alias name or alias ARN): 2048 characters.
///
/// Source: <https://docs.aws.amazon.com/kms/latest/APIReference/API_Encrypt.html>
/// (`KeyId`, length 1–2048).
pub const KMS_KEY_ID_MAX: usize = 2048;

/// Shortest DynamoDB table name: 3 characters of `[a-zA-Z0-9_.-]`.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html>
/// (`TableName`, length 3–255, pattern `[a-zA-Z0-9_.-]+`).
pub const DYNAMODB_TABLE_NAME_MIN: usize = 3;
/// Longest DynamoDB table name: 255 characters (source as [`DYNAMODB_TABLE_NAME_MIN`]).
pub const DYNAMODB_TABLE_NAME_MAX: usize = 255;

/// True for a DynamoDB table name (see [`DYNAMODB_TABLE_NAME_MIN`]).
pub fn is_dynamodb_table_name(s: &str) -> bool {
    (DYNAMODB_TABLE_NAME_MIN..=DYNAMODB_TABLE_NAME_MAX).contains(&s.len())
        && s.chars().all(|c| is_word(c) || c == '.' || c == '-')
}

// ---------------------------------------------------------------------------------------
// EKS and Kubernetes
// ---------------------------------------------------------------------------------------

/// Longest EKS cluster name: 100 characters of `[0-9A-Za-z][A-Za-z0-9\-_]*`.
///
/// Source: <https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html>
/// (`name`, length 1–100, pattern `^[0-9A-Za-z][A-Za-z0-9\-_]*`).
pub const EKS_CLUSTER_NAME_MAX: usize = 100;

/// True for an EKS cluster name (see [`EKS_CLUSTER_NAME_MAX`]).
pub fn is_eks_cluster_name(s: &str) -> bool {
    (1..=EKS_CLUSTER_NAME_MAX).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(|c| is_word(c) || c == '-')
}

/// Longest Kubernetes DNS-1123 label: 63 characters.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names>
/// (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63). Namespaces are DNS labels
/// (<https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/>).
pub const DNS_LABEL_MAX: usize = 63;
/// Longest Kubernetes DNS-1123 subdomain: 253 characters, dot-separated DNS labels.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names>.
/// Service account names are DNS subdomains.
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// True for a DNS-1123 label (a namespace name).
pub fn is_dns_label(s: &str) -> bool {
    (1..=DNS_LABEL_MAX).contains(&s.len())
        && s.chars().all(|c| is_lower_alnum(c) || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// True for a DNS-1123 subdomain (a service account name, a label key prefix).
pub fn is_dns_subdomain(s: &str) -> bool {
    (1..=DNS_SUBDOMAIN_MAX).contains(&s.len())
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| is_lower_alnum(c) || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Longest name part of a Kubernetes label key (and of any qualified name): 63 characters
/// of `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>.
pub const LABEL_NAME_MAX: usize = 63;
/// Longest Kubernetes label value: 63 characters, empty or the same pattern as a name
/// (source as [`LABEL_NAME_MAX`]).
pub const LABEL_VALUE_MAX: usize = 63;

fn is_label_name(s: &str) -> bool {
    (1..=LABEL_NAME_MAX).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// True for a Kubernetes qualified name: a label key, an annotation key, a toleration key
/// or a resource name. An optional DNS subdomain prefix (≤ 253) and `/`, then a name (≤ 63).
pub fn is_label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(s),
    }
}

/// True for a Kubernetes label value: empty, or a name of at most 63 characters.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

/// Largest total size of a pod's annotations, keys and values: 256 KiB.
///
/// Source: <https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go>
/// (`TotalAnnotationSizeLimitB = 256 * (1 << 10)`).
pub const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;

// ---------------------------------------------------------------------------------------
// Container environment variables
// ---------------------------------------------------------------------------------------

/// True for an environment variable name Sortie accepts: `[A-Za-z_][A-Za-z0-9_]*`.
///
/// Source: POSIX, <https://pubs.opengroup.org/onlinepubs/9799919799/basedefs/V1_chap08.html>
/// (portable names); Kubernetes and ECS accept more, but a name outside this set cannot be
/// read by every shell Terraform providers run under.
pub fn is_env_var_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && s.chars().all(is_word)
}

// ---------------------------------------------------------------------------------------
// Files written by the runner
// ---------------------------------------------------------------------------------------

/// Longest path segment of a job file: 255 bytes (Linux `NAME_MAX`).
///
/// Source: <https://man7.org/linux/man-pages/man3/pathconf.3.html> (`_PC_NAME_MAX`, 255
/// on ext4 and overlayfs, which the runner container writes to).
pub const FILE_NAME_SEGMENT_MAX: usize = 255;
/// Longest job file path: 4096 bytes (Linux `PATH_MAX`, source as [`FILE_NAME_SEGMENT_MAX`]).
pub const FILE_PATH_MAX: usize = 4096;

// ---------------------------------------------------------------------------------------
// DynamoDB
// ---------------------------------------------------------------------------------------

/// Largest DynamoDB item: 400 KB, attribute names and values included.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-items>
/// ("The maximum item size in DynamoDB is 400 KB, which includes both attribute name
/// binary length (UTF-8 length) and attribute value lengths"). Read as 400 × 1024 bytes;
/// [`dynamodb_item_size`] estimates conservatively, so the reading does not matter
/// within the headroom below.
pub const DYNAMODB_ITEM_MAX: usize = 400 * 1024;

/// Deepest nesting of maps and lists in an attribute: 32 levels.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-attributes>
/// ("DynamoDB supports nested attributes up to 32 levels deep"). A top-level map or list
/// attribute is counted as level 1 (the stricter reading).
pub const DYNAMODB_NESTING_MAX: usize = 32;

/// Longest attribute name, map keys included: 64 KB of UTF-8, and at least 1 byte.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-naming-rules>
/// ("Attribute names must be at least one character long and less than 64 KB").
pub const DYNAMODB_NAME_MAX: usize = 65535;

/// Largest magnitude of a DynamoDB number: below 10^126.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number>
/// (positive range 1E-130 to 9.9999999999999999999999999999999999999E+125).
pub const DYNAMODB_NUMBER_MAX: f64 = 1e126;
/// Smallest non-zero magnitude of a DynamoDB number: 10^-130 (source as [`DYNAMODB_NUMBER_MAX`]).
pub const DYNAMODB_NUMBER_MIN: f64 = 1e-130;

/// The levels of the stored job item around each job variable: the `variables` map is a
/// top-level attribute of the job item (the job is flattened into it, see
/// `sortie-store`'s `JobItem`), so a variable's value sits one level down.
pub const JOB_VARIABLE_ENCLOSING_LEVELS: usize = 1;

/// The levels around an `eks` runner's `pod_template` in the deepest item that holds it:
/// a job item's `runner_spec` snapshot → `runner_configuration` → `job` → `pod_template`.
pub const POD_TEMPLATE_ENCLOSING_LEVELS: usize = 3;

/// Sortie's budget for a runner's specification in an item, by [`dynamodb_item_size`]:
/// 64 KiB. A job item carries a snapshot of it, so it must leave room for the job.
pub const RUNNER_SPEC_ITEM_MAX: usize = 64 * 1024;

/// Headroom in a job item for everything but the request and the runner snapshot: keys,
/// GSI keys, ids, the transitions, the summary, the task reference: 64 KiB.
pub const JOB_RECORD_RESERVE: usize = 64 * 1024;

/// Sortie's budget for a job request in its job item, by [`dynamodb_item_size`]:
/// [`DYNAMODB_ITEM_MAX`] − [`RUNNER_SPEC_ITEM_MAX`] − [`JOB_RECORD_RESERVE`] = 272 KiB.
pub const JOB_REQUEST_ITEM_MAX: usize =
    DYNAMODB_ITEM_MAX - RUNNER_SPEC_ITEM_MAX - JOB_RECORD_RESERVE;

/// The size DynamoDB counts for `item`, estimated conservatively by AWS's item-size rules:
/// for an object, the sum of each attribute's name (UTF-8 bytes) and value size; for
/// anything else, the size of that one value.
///
/// Value sizes (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>):
/// a string is its UTF-8 bytes; a number 1 byte per two digits plus 1 (every digit of its
/// decimal form is counted, so leading and trailing zeros only make the estimate larger);
/// null and booleans 1 byte; a list or map 3 bytes plus, per element, 1 byte, the
/// element's size and (for a map) its key's bytes.
///
/// The store checks the real item (keys and all) with this before it writes.
pub fn dynamodb_item_size(item: &Value) -> usize {
    match item {
        Value::Object(m) => m.iter().map(|(k, v)| k.len() + value_size(v)).sum(),
        other => value_size(other),
    }
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 1,
        Value::String(s) => s.len(),
        Value::Number(n) => {
            let text = n.to_string();
            let mantissa = text.split(['e', 'E']).next().unwrap_or_default();
            let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
            digits.div_ceil(2) + 1
        }
        Value::Array(a) => 3 + a.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        Value::Object(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
    }
}

/// How many levels of maps and lists `v` has: 0 for a scalar, 1 for a flat map or list.
pub fn nesting_depth(v: &Value) -> usize {
    // Iterative, so that a hostile document cannot overflow the stack here.
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, above)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        deepest = deepest.max(above + 1);
        stack.extend(children.map(|c| (c, above + 1)));
    }
    deepest
}

/// Checks a free-form value that will be stored in DynamoDB `enclosing` levels down:
/// its nesting (reported at `path`), every map key (non-empty, at most
/// [`DYNAMODB_NAME_MAX`] bytes, reported at the key's path) and every number's range.
pub fn check_dynamodb_value(
    v: &Value,
    path: &str,
    enclosing: usize,
    p: &mut crate::problems::Problems,
) {
    let depth = nesting_depth(v);
    if depth + enclosing > DYNAMODB_NESTING_MAX {
        p.push(
            path,
            format!(
                "is nested {depth} levels deep; stored with the {enclosing} level(s) around it, that is over DynamoDB's {DYNAMODB_NESTING_MAX}",
            ),
        );
        // Keys and numbers below are still checked, but not past the limit.
    }
    let mut stack = vec![(v, path.to_string(), 0usize)];
    while let Some((v, path, level)) = stack.pop() {
        if level > DYNAMODB_NESTING_MAX {
            continue;
        }
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let child_path = crate::problems::key_path(&path, k);
                    if k.is_empty() {
                        p.push(
                            &child_path,
                            "a map key must not be empty (DynamoDB refuses empty attribute names)",
                        );
                    } else if k.len() > DYNAMODB_NAME_MAX {
                        p.push(
                            &child_path,
                            format!(
                                "a map key must be at most {DYNAMODB_NAME_MAX} bytes (DynamoDB)"
                            ),
                        );
                    }
                    stack.push((child, child_path, level + 1));
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    stack.push((child, crate::problems::index(&path, i), level + 1));
                }
            }
            Value::Number(n) => {
                if let Some(x) = n.as_f64() {
                    let m = x.abs();
                    if m >= DYNAMODB_NUMBER_MAX || (m != 0.0 && m < DYNAMODB_NUMBER_MIN) {
                        p.push(
                            &path,
                            "is outside DynamoDB's number range (1e-130 to 1e126 in magnitude)",
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert!(
            !is_role_arn(&arn("a b")) && !is_role_arn(&arn("a\nb")) && !is_role_arn(&arn("a*b"))
        );
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
            is_session_tag_key("sortie:env")
                && is_session_tag_key(&"k".repeat(SESSION_TAG_KEY_MAX))
        );
        assert!(
            !is_session_tag_key("") && !is_session_tag_key(&"k".repeat(SESSION_TAG_KEY_MAX + 1))
        );
        assert!(is_session_tag_value("") && is_session_tag_value("acme/payments/prod"));
        assert!(is_session_tag_value(&"v".repeat(SESSION_TAG_VALUE_MAX)));
        assert!(!is_session_tag_value(
            &"v".repeat(SESSION_TAG_VALUE_MAX + 1)
        ));
        assert!(!is_session_tag_value("a\nb") && !is_session_tag_value("a*b"));
        assert!(is_session_tag_value("caf\u{e9} 1\u{a0}2"));
        // Sortie sends sortie:org, sortie:env and sortie:job.
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
        assert!(
            is_ecs_name(&"c".repeat(ECS_NAME_MAX)) && !is_ecs_name(&"c".repeat(ECS_NAME_MAX + 1))
        );
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
            is_eks_cluster_name("platform")
                && is_eks_cluster_name(&"e".repeat(EKS_CLUSTER_NAME_MAX))
        );
        assert!(!is_eks_cluster_name(&"e".repeat(EKS_CLUSTER_NAME_MAX + 1)));
        assert!(!is_eks_cluster_name("-platform") && !is_eks_cluster_name("plat.form"));
    }

    #[test]
    fn kubernetes_names_at_their_boundaries() {
        assert!(
            is_dns_label(&"n".repeat(DNS_LABEL_MAX))
                && !is_dns_label(&"n".repeat(DNS_LABEL_MAX + 1))
        );
        assert!(
            !is_dns_label("a-")
                && !is_dns_label("-a")
                && !is_dns_label("A")
                && !is_dns_label("a.b")
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
            is_dns_subdomain("sortie.runner")
                && !is_dns_subdomain("a..b")
                && !is_dns_subdomain("a.-b")
        );
        // Label keys: optional prefix, then a name of at most 63.
        assert!(is_label_key("disktype") && is_label_key("karpenter.sh/do-not-disrupt"));
        assert!(
            is_label_key(&"k".repeat(LABEL_NAME_MAX))
                && !is_label_key(&"k".repeat(LABEL_NAME_MAX + 1))
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
}
