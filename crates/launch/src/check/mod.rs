//! `runner check`: a runner's preflight, made as Sortie would launch, without launching.
//!
//! [`AwsRunnerChecker`] assumes the runner's launcher role exactly as a launch does
//! (ExternalId, session tags), then asks the target account, read-only, whether a task
//! could start there: the cluster and its capacity providers (ECS DescribeClusters), the
//! task definition and its runner container (DescribeTaskDefinition), the subnets and
//! security groups (EC2 DescribeSubnets, DescribeSecurityGroups) and whether the launcher
//! role may pass the task's roles to ECS (IAM SimulatePrincipalPolicy). It writes nothing.
//! The `ecs-fargate` checks are in `ecs`, the `eks` ones in `eks`; this module assumes the
//! role and runs them in order.

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};
use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sdk_ecs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use sortie_core::check::*;
use sortie_core::runner::{AwsAccess, EcsFargateRunner, EksRunner};
use sortie_core::{Runner, RunnerCheck, RunnerConfiguration};

use crate::ecs::{from_sdk, launcher_session};
use crate::session::{SessionScope, TAG_ENV};
use ecs::{cluster_checks, network_check, pass_role_check, task_definition_check};
use eks::{eks_access_check, eks_template_check};

mod ec2;
mod ecs;
mod eks;

/// The `sortie:env` session tag of every check. No environment path can be this (a
/// path always has a `/`), and the launcher role's `ChecksOnlyRead` statement lets a
/// session tagged with it only read.
pub const CHECK_SESSION_ENV: &str = "runner-check";

/// Checks a runner's configuration against its platform, on behalf of one organisation.
#[async_trait]
pub trait RunnerChecker: Send + Sync {
    /// Every check of `runner`, in order, for jobs of the organisation `org`. Never fails:
    /// what could not be checked is a failed or skipped check.
    async fn check(&self, runner: &Runner, org: &str) -> Vec<RunnerCheck>;
}

/// The real checker: AWS for `ecs-fargate` (and the role of `eks`) runners, and whether
/// this deployment launches `local` runners.
pub struct AwsRunnerChecker {
    base: SdkConfig,
    local: bool,
}

impl AwsRunnerChecker {
    /// A checker whose base credentials (the ones that assume roles) come from `base`.
    /// `local` is true only where a `local` launcher exists (`sortie dev`).
    pub fn new(base: SdkConfig, local: bool) -> Self {
        Self { base, local }
    }

    /// Assumes the launcher role as a launch would (ExternalId, the session tags of the
    /// runner's [`SessionScope`]), plus the tag that says it is a check: `sortie:env` =
    /// [`CHECK_SESSION_ENV`]. The session is named `sortie-check-<id>` and never cached.
    /// The deployed templates let the api function open only such sessions, and let such a
    /// session only read.
    async fn assume(&self, access: &AwsAccess, scope: &SessionScope) -> Assumed {
        let org = &scope.org;
        let id = ulid::Ulid::new().to_string().to_ascii_lowercase();
        let mut tags = scope.tags();
        tags.push((TAG_ENV, CHECK_SESSION_ENV.to_string()));
        let provider =
            launcher_session(&self.base, access, format!("sortie-check-{id}"), tags).await;
        match provider.provide_credentials().await {
            Ok(credentials) => Assumed {
                check: RunnerCheck::passed(
                    CHECK_ASSUME_ROLE,
                    format!(
                        "assumed `{}` with the ExternalId and the session tags of organisation `{org}`",
                        access.role_arn
                    ),
                ),
                credentials: Some(credentials),
            },
            Err(e) => Assumed {
                check: RunnerCheck::failed(
                    CHECK_ASSUME_ROLE,
                    format!(
                        "could not assume `{}`: {}",
                        access.role_arn,
                        DisplayErrorContext(&e)
                    ),
                ),
                credentials: None,
            },
        }
    }

    async fn check_ecs(&self, c: &EcsFargateRunner, scope: &SessionScope) -> Vec<RunnerCheck> {
        let assumed = self.assume(&c.access, scope).await;
        let mut checks = vec![assumed.check];
        let Some(credentials) = assumed.credentials else {
            for name in [
                CHECK_CLUSTER,
                CHECK_CAPACITY_PROVIDER,
                CHECK_TASK_DEFINITION,
                CHECK_NETWORK,
                CHECK_PASS_ROLE,
            ] {
                checks.push(RunnerCheck::skipped(name, CHECK_ASSUME_ROLE));
            }
            return checks;
        };
        let region = Region::new(c.access.region.clone());
        let ecs = aws_sdk_ecs::Client::from_conf(
            aws_sdk_ecs::config::Builder::from(&self.base)
                .region(region.clone())
                .credentials_provider(credentials.clone())
                .build(),
        );
        let ec2 = ec2::Ec2Query::new(&self.base, &c.access.region, credentials.clone());
        let iam = aws_sdk_iam::Client::from_conf(
            aws_sdk_iam::config::Builder::from(&self.base)
                .region(region)
                .credentials_provider(credentials)
                .build(),
        );
        let ((cluster, capacity), (task_definition, roles), network) = tokio::join!(
            cluster_checks(&ecs, c),
            task_definition_check(&ecs, c),
            network_check(&ec2, c),
        );
        checks.extend([cluster, capacity, task_definition, network]);
        checks.push(match roles {
            Some(roles) => pass_role_check(&iam, &c.access.role_arn, &roles).await,
            None => RunnerCheck::skipped(CHECK_PASS_ROLE, CHECK_TASK_DEFINITION),
        });
        checks
    }
}

impl AwsRunnerChecker {
    /// `eks`: the role, then the Job as it would be built, then DescribeCluster through the
    /// role (and the API's TLS against the cluster CA), then SelfSubjectAccessReviews for
    /// what the launcher does in the namespace.
    async fn check_eks(&self, c: &EksRunner, scope: &SessionScope) -> Vec<RunnerCheck> {
        let assumed = self.assume(&c.access, scope).await;
        let mut checks = vec![assumed.check, eks_template_check(c)];
        let Some(credentials) = assumed.credentials else {
            checks.push(RunnerCheck::skipped(CHECK_CLUSTER, CHECK_ASSUME_ROLE));
            checks.push(RunnerCheck::skipped(
                CHECK_KUBERNETES_ACCESS,
                CHECK_ASSUME_ROLE,
            ));
            return checks;
        };
        let eks = aws_sdk_eks::Client::from_conf(
            aws_sdk_eks::config::Builder::from(&self.base)
                .region(Region::new(c.access.region.clone()))
                .credentials_provider(credentials.clone())
                .build(),
        );
        let client = match crate::eks::describe_cluster(&eks, &c.cluster).await {
            Ok(client) => client,
            Err(e) => {
                checks.push(RunnerCheck::failed(CHECK_CLUSTER, e.to_string()));
                checks.push(RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER));
                return checks;
            }
        };
        let token = match crate::eks::token::bearer_token(
            &credentials,
            &c.cluster,
            &c.access.region,
            std::time::SystemTime::now(),
        ) {
            Ok(t) => t,
            Err(e) => {
                checks.push(RunnerCheck::failed(CHECK_CLUSTER, e.to_string()));
                checks.push(RunnerCheck::skipped(CHECK_KUBERNETES_ACCESS, CHECK_CLUSTER));
                return checks;
            }
        };
        let (cluster, access) = eks_access_check(&client, &token, c).await;
        checks.push(cluster);
        checks.push(access);
        checks
    }
}

/// The outcome of assuming a runner's role.
struct Assumed {
    check: RunnerCheck,
    credentials: Option<Credentials>,
}

#[async_trait]
impl RunnerChecker for AwsRunnerChecker {
    async fn check(&self, runner: &Runner, org: &str) -> Vec<RunnerCheck> {
        let scope = SessionScope {
            org: org.to_string(),
            runner: runner.id.to_string(),
        };
        match &runner.spec.runner_configuration {
            RunnerConfiguration::EcsFargate(c) => self.check_ecs(c, &scope).await,
            RunnerConfiguration::Eks(c) => self.check_eks(c, &scope).await,
            RunnerConfiguration::Local(_) if self.local => vec![RunnerCheck::passed(
                CHECK_LAUNCHER,
                "`local` runners run here, as child processes of `sortie dev`",
            )],
            RunnerConfiguration::Local(_) => {
                vec![RunnerCheck::failed(CHECK_LAUNCHER, no_launcher("local"))]
            }
            // Nothing to reach from here: the pool's agents pull its jobs. The API checks
            // that the pool exists in the runner's group when the runner is written.
            RunnerConfiguration::Agent(c) => vec![RunnerCheck::passed(
                CHECK_LAUNCHER,
                format!(
                    "`agent` runners launch nothing from Sortie: agents of pool {} pull their jobs",
                    c.pool
                ),
            )],
        }
    }
}

/// The words a job on a runner type without a launcher fails with (see `ByRunnerType`).
pub(crate) fn no_launcher(kind: &str) -> String {
    format!("no launcher for `{kind}` runners is configured here")
}

/// An AWS error in the words a launch would fail with (`<operation> failed: <code>:
/// <message>`), so a check and a job on the same runner quote AWS alike.
fn aws_words<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    operation: &str,
    err: SdkError<E>,
) -> String {
    from_sdk(operation, err).to_string()
}

/// A checker that answers the same checks for every runner (API tests).
pub struct StaticRunnerChecker(pub Vec<RunnerCheck>);

#[async_trait]
impl RunnerChecker for StaticRunnerChecker {
    async fn check(&self, _: &Runner, _: &str) -> Vec<RunnerCheck> {
        self.0.clone()
    }
}
