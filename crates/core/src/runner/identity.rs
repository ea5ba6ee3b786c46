//! A runner's `identity` block (issue 45): the audience its jobs' tokens carry, and what
//! each cloud exchanges them for. Validated here, with every problem named by its field
//! path; the tokens themselves are [`crate::identity`]'s.

use serde::{Deserialize, Serialize};

use crate::{Problem, ValidationError};

/// The most characters of a runner identity's `audience`.
pub const AUDIENCE_MAX: usize = 256;

/// What is wrong with a token audience, if anything: 1 to [`AUDIENCE_MAX`] characters,
/// no spaces or control characters.
pub fn audience_problem(audience: &str) -> Option<String> {
    if audience.is_empty() {
        return Some("must not be empty".into());
    }
    if audience.chars().count() > AUDIENCE_MAX {
        return Some(format!("must be at most {AUDIENCE_MAX} characters"));
    }
    if crate::limits::has_space_or_control(audience) {
        return Some("must not contain spaces or control characters".into());
    }
    None
}

/// A runner's `identity` block: the audience its jobs' tokens carry and what each cloud
/// does with them. At least one cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunnerIdentity {
    /// The tokens' `aud`, as the cloud's trust expects it (`sts.amazonaws.com` for AWS's
    /// IAM OIDC provider by default; the workload identity provider's allowed audience on
    /// Google Cloud; `api://AzureADTokenExchange` on Azure).
    pub audience: String,
    /// AWS: a role per phase, taken with `AssumeRoleWithWebIdentity` by the AWS provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsIdentity>,
    /// Google Cloud: workload identity federation through an external-account credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpIdentity>,
    /// Azure: a federated credential of an app registration or managed identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureIdentity>,
}

/// AWS's part of a runner identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AwsIdentity {
    /// The role a job's plan phase takes (read-only, as a rule).
    pub plan_role_arn: String,
    /// The role a job's apply phase takes.
    pub apply_role_arn: String,
}

/// Google Cloud's part of a runner identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GcpIdentity {
    /// `//iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>`.
    pub workload_identity_provider: String,
    /// A service account to impersonate, when the pool's principal is not granted roles
    /// itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
}

/// Azure's part of a runner identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AzureIdentity {
    /// The application (client) id whose federated credential trusts the tokens.
    pub client_id: String,
    /// The directory (tenant) id.
    pub tenant_id: String,
}

impl RunnerIdentity {
    /// Every problem of the block, each under `path` (such as `identity`).
    pub fn validate(&self, path: &str) -> Result<(), ValidationError> {
        let mut problems = Vec::new();
        let mut problem = |field: &str, text: String| {
            problems.push(Problem {
                path: format!("{path}.{field}"),
                problem: text,
            })
        };
        if let Some(p) = audience_problem(&self.audience) {
            problem("audience", p);
        }
        if self.aws.is_none() && self.gcp.is_none() && self.azure.is_none() {
            problem("aws", "one of aws, gcp or azure is needed".into());
        }
        if let Some(aws) = &self.aws {
            for (field, arn) in [
                ("aws.plan_role_arn", &aws.plan_role_arn),
                ("aws.apply_role_arn", &aws.apply_role_arn),
            ] {
                if let Some(p) = crate::limits::role_arn_problem(arn) {
                    problem(field, p);
                }
            }
        }
        if let Some(gcp) = &self.gcp {
            if let Some(p) = gcp_provider_problem(&gcp.workload_identity_provider) {
                problem("gcp.workload_identity_provider", p);
            }
            if let Some(account) = &gcp.service_account {
                if !is_service_account(account) {
                    problem(
                        "gcp.service_account",
                        "must be a service account's email, such as \
                         `terraform@my-project.iam.gserviceaccount.com`"
                            .into(),
                    );
                }
            }
        }
        if let Some(azure) = &self.azure {
            for (field, id) in [
                ("azure.client_id", &azure.client_id),
                ("azure.tenant_id", &azure.tenant_id),
            ] {
                if !is_uuid(id) {
                    problem(
                        field,
                        "must be a GUID such as `00000000-0000-0000-0000-000000000000`".into(),
                    );
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { problems })
        }
    }
}

/// What is wrong with a Google workload identity provider's full resource name, if anything.
fn gcp_provider_problem(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split('/').collect();
    let shaped = parts.len() == 11
        && parts[0].is_empty()
        && parts[1].is_empty()
        && parts[2] == "iam.googleapis.com"
        && parts[3] == "projects"
        && !parts[4].is_empty()
        && parts[4].len() <= 20
        && parts[4].bytes().all(|b| b.is_ascii_digit())
        && parts[5] == "locations"
        && parts[6] == "global"
        && parts[7] == "workloadIdentityPools"
        && is_gcp_id(parts[8])
        && parts[9] == "providers"
        && is_gcp_id(parts[10]);
    (!shaped).then(|| {
        "must be `//iam.googleapis.com/projects/<project number>/locations/global/\
         workloadIdentityPools/<pool>/providers/<provider>`"
            .to_string()
    })
}

/// A pool or provider id: 4 to 32 lower-case letters, digits or hyphens.
fn is_gcp_id(id: &str) -> bool {
    (4..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `<name>@<project>.iam.gserviceaccount.com` (or a Google-managed account's domain).
fn is_service_account(email: &str) -> bool {
    match email.split_once('@') {
        Some((name, domain)) => {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && domain.ends_with(".gserviceaccount.com")
                && !crate::limits::has_space_or_control(domain)
        }
        None => false,
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hexadecimal.
fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}
