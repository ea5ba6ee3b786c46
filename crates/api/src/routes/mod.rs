//! The route table: each route is one line below, and its handler's `#[utoipa::path]`
//! declares the rest once (method, path template, credential in `security(...)`,
//! OpenAPI entry). [`Route`] reads them back ([`Route::method_and_path`], [`Route::auth`]); the
//! router, the OpenAPI document and the SAM template test are built from [`Route::ALL`].
//! Paths that contain `/` end at the `/-/` separator, which [`separator`] turns into one
//! segment before routing.

mod agent_pools;
pub mod audit;
mod environments;
mod expiry;
mod identity;
mod job_views;
mod jobs;
mod locks;
mod log_uploads;
mod logs;
mod memberships;
mod meta;
mod notifications;
mod pilot_callbacks;
mod plans;
mod policy_sets;
mod reply;
mod router;
mod rules;
mod runners;
pub mod separator;
mod state_versions;
mod triggers;
pub mod vcs;
#[macro_use]
mod table;
#[cfg(test)]
mod tests;
mod whoami;

pub(crate) use agent_pools::*;
pub(crate) use audit::{__path_list_audit, list_audit};
pub(crate) use environments::*;
pub(crate) use expiry::*;
pub(crate) use identity::*;
pub(crate) use jobs::*;
pub(crate) use locks::*;
pub(crate) use log_uploads::*;
pub(crate) use logs::*;
pub(crate) use memberships::*;
pub(crate) use meta::*;
pub(crate) use notifications::*;
pub(crate) use pilot_callbacks::*;
pub(crate) use plans::*;
pub(crate) use policy_sets::*;
pub(crate) use reply::{manage_action, Reply};
pub(crate) use router::build;
pub(crate) use rules::*;
pub(crate) use runners::*;
pub(crate) use state_versions::*;
pub(crate) use table::documented;
pub use table::Auth;
pub(crate) use triggers::*;
pub(crate) use vcs::*;
pub(crate) use whoami::*;

route_table! {
    Health => health,
    OpenApi => openapi_json,
    Whoami => whoami,
    ListRunners => list_runners,
    CreateRunner => create_runner,
    GetRunner => get_runner,
    UpdateRunner => update_runner,
    DeleteRunner => delete_runner,
    CheckRunner => check_runner,
    ListRules => list_rules,
    CreateRule => create_rule,
    GetRule => get_rule,
    UpdateRule => update_rule,
    DeleteRule => delete_rule,
    ListPolicySets => list_policy_sets,
    CreatePolicySet => create_policy_set,
    GetPolicySet => get_policy_set,
    UpdatePolicySet => update_policy_set,
    DeletePolicySet => delete_policy_set,
    ListNotifications => list_notifications,
    CreateNotification => create_notification,
    GetNotification => get_notification,
    UpdateNotification => update_notification,
    DeleteNotification => delete_notification,
    RotateNotificationSecret => rotate_notification_secret,
    ListNotificationDeliveries => list_notification_deliveries,
    RedeliverNotification => redeliver_notification,
    TestNotification => test_notification,
    ListEnvironments => list_environments,
    CreateEnvironment => create_environment,
    ListMemberships => list_memberships,
    GrantMembership => grant_membership,
    RevokeMembership => revoke_membership,
    GetEnvironment => get_environment,
    UpdateEnvironment => update_environment,
    DeleteEnvironment => delete_environment,
    RefreshRunner => refresh_runner,
    LockEnvironment => lock_environment,
    UnlockEnvironment => unlock_environment,
    ExtendEnvironment => extend_environment,
    FreezeGroup => freeze_group,
    UnfreezeGroup => unfreeze_group,
    SetGroupExpiry => set_group_expiry,
    GetGroupExpiry => get_group_expiry,
    ListJobs => list_jobs,
    SubmitJob => submit_job,
    GetJob => get_job,
    CancelJob => cancel_job,
    GetJobLogs => get_job_logs,
    GetJobSpec => get_job_spec,
    GetJobSensitiveVariables => get_job_sensitive_variables,
    MintIdentityToken => mint_identity_token,
    PutJobSummary => put_job_summary,
    CreateUpload => create_upload,
    CreateLogUploads => create_log_uploads,
    PutUploadProblems => put_upload_problems,
    ReportJobExit => report_job_exit,
    PutJobTool => put_job_tool,
    PutJobState => put_job_state,
    ApproveJob => approve_job,
    DiscardJob => discard_job,
    GetJobOutputs => get_job_outputs,
    GetJobPlan => get_job_plan,
    GetEnvironmentOutputs => get_environment_outputs,
    CreateAgentPool => create_agent_pool,
    ListAgentPools => list_agent_pools,
    GetAgentPool => get_agent_pool,
    DeleteAgentPool => delete_agent_pool,
    CreatePoolToken => create_pool_token,
    RevokePoolToken => revoke_pool_token,
    ClaimJob => claim_job,
    AgentHeartbeat => agent_heartbeat,
    AgentExit => agent_exit,
    ListStateVersions => list_state_versions,
    GetStateVersion => get_state_version,
    RestoreStateVersion => restore_state_version,
    GetEnvironmentTriggers => get_environment_triggers,
    ConnectGithub => connect_github,
    GetGithubConnection => get_github_connection,
    DeleteGithubConnection => delete_github_connection,
    GithubWebhook => github_webhook,
    ConnectGitlab => connect_gitlab,
    GetGitlabConnection => get_gitlab_connection,
    DeleteGitlabConnection => delete_gitlab_connection,
    GitlabWebhook => gitlab_webhook,
    GetOpenidConfiguration => openid_configuration,
    GetJwks => jwks,
    ListAudit => list_audit,
}

/// The API's own URL as a caller reached it: the configured public URL, else the request's
/// `Host` and `X-Forwarded-Proto` (API Gateway sets both; `sortie dev` is reached
/// directly). Given to the runners agents start, and as a connection's webhook URL.
pub(crate) fn public_url(state: &crate::AppState, headers: &axum::http::HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.trim_end_matches('/').to_string();
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let scheme = header("x-forwarded-proto").unwrap_or("http");
    format!("{scheme}://{}", header("host").unwrap_or("localhost"))
}
