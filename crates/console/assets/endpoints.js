// Generated from crates/client/openapi.json by sortie_client::console_module: do not edit.
// Every path the console calls comes from here; `SORTIE_BLESS_OPENAPI=1 cargo test -p sortie-client`
// renders it again after an API change.

/** A path parameter as one segment: a group or environment path stays one segment. */
export function segment(value) {
  return encodeURIComponent(String(value));
}

/** A group path as the `{group}` parameter: the root group is `-`. */
export function group(path) {
  const p = String(path || '').replace(/^\/+|\/+$/g, '');
  return p || '-';
}

/** `GET /.well-known/jwks.json` */
export const jwks = () => `/.well-known/jwks.json`;

/** `GET /.well-known/openid-configuration` */
export const openid_configuration = () => `/.well-known/openid-configuration`;

/** `POST /v1/agent-pools` */
export const create_agent_pool = () => `/v1/agent-pools`;

/** `GET /v1/agent-pools/{id}` */
export const get_agent_pool = (id) => `/v1/agent-pools/${segment(id)}`;

/** `DELETE /v1/agent-pools/{id}` */
export const delete_agent_pool = (id) => `/v1/agent-pools/${segment(id)}`;

/** `POST /v1/agent-pools/{id}/claims` */
export const claim_job = (id) => `/v1/agent-pools/${segment(id)}/claims`;

/** `POST /v1/agent-pools/{id}/jobs/{job}/exit` */
export const agent_exit = (id, job) => `/v1/agent-pools/${segment(id)}/jobs/${segment(job)}/exit`;

/** `POST /v1/agent-pools/{id}/jobs/{job}/heartbeat` */
export const agent_heartbeat = (id, job) => `/v1/agent-pools/${segment(id)}/jobs/${segment(job)}/heartbeat`;

/** `POST /v1/agent-pools/{id}/tokens` */
export const create_pool_token = (id) => `/v1/agent-pools/${segment(id)}/tokens`;

/** `DELETE /v1/agent-pools/{id}/tokens/{token}` */
export const revoke_pool_token = (id, token) => `/v1/agent-pools/${segment(id)}/tokens/${segment(token)}`;

/** `GET /v1/environments/{environment}` */
export const get_environment = (environment) => `/v1/environments/${segment(environment)}`;

/** `PATCH /v1/environments/{environment}` */
export const update_environment = (environment) => `/v1/environments/${segment(environment)}`;

/** `DELETE /v1/environments/{environment}` */
export const delete_environment = (environment) => `/v1/environments/${segment(environment)}`;

/** `POST /v1/environments/{environment}/-/extend` */
export const extend_environment = (environment) => `/v1/environments/${segment(environment)}/-/extend`;

/** `GET /v1/environments/{environment}/-/jobs` */
export const list_jobs = (environment) => `/v1/environments/${segment(environment)}/-/jobs`;

/** `POST /v1/environments/{environment}/-/jobs` */
export const submit_job = (environment) => `/v1/environments/${segment(environment)}/-/jobs`;

/** `POST /v1/environments/{environment}/-/lock` */
export const lock_environment = (environment) => `/v1/environments/${segment(environment)}/-/lock`;

/** `GET /v1/environments/{environment}/-/outputs` */
export const get_environment_outputs = (environment) => `/v1/environments/${segment(environment)}/-/outputs`;

/** `POST /v1/environments/{environment}/-/refresh-runner` */
export const refresh_runner = (environment) => `/v1/environments/${segment(environment)}/-/refresh-runner`;

/** `GET /v1/environments/{environment}/-/state-versions` */
export const list_state_versions = (environment) => `/v1/environments/${segment(environment)}/-/state-versions`;

/** `GET /v1/environments/{environment}/-/state-versions/{id}` */
export const get_state_version = (environment, id) => `/v1/environments/${segment(environment)}/-/state-versions/${segment(id)}`;

/** `POST /v1/environments/{environment}/-/state-versions/{id}/restore` */
export const restore_state_version = (environment, id) => `/v1/environments/${segment(environment)}/-/state-versions/${segment(id)}/restore`;

/** `GET /v1/environments/{environment}/-/triggers` */
export const get_environment_triggers = (environment) => `/v1/environments/${segment(environment)}/-/triggers`;

/** `POST /v1/environments/{environment}/-/unlock` */
export const unlock_environment = (environment) => `/v1/environments/${segment(environment)}/-/unlock`;

/** `GET /v1/groups/{group}/-/agent-pools` */
export const list_agent_pools = (group) => `/v1/groups/${segment(group)}/-/agent-pools`;

/** `GET /v1/groups/{group}/-/environments` */
export const list_environments = (group) => `/v1/groups/${segment(group)}/-/environments`;

/** `POST /v1/groups/{group}/-/environments` */
export const create_environment = (group) => `/v1/groups/${segment(group)}/-/environments`;

/** `GET /v1/groups/{group}/-/expiry` */
export const get_group_expiry = (group) => `/v1/groups/${segment(group)}/-/expiry`;

/** `PUT /v1/groups/{group}/-/expiry` */
export const set_group_expiry = (group) => `/v1/groups/${segment(group)}/-/expiry`;

/** `POST /v1/groups/{group}/-/lock` */
export const freeze_group = (group) => `/v1/groups/${segment(group)}/-/lock`;

/** `GET /v1/groups/{group}/-/memberships` */
export const list_memberships = (group) => `/v1/groups/${segment(group)}/-/memberships`;

/** `POST /v1/groups/{group}/-/memberships` */
export const grant_membership = (group) => `/v1/groups/${segment(group)}/-/memberships`;

/** `DELETE /v1/groups/{group}/-/memberships/{id}` */
export const revoke_membership = (group, id) => `/v1/groups/${segment(group)}/-/memberships/${segment(id)}`;

/** `GET /v1/groups/{group}/-/notifications` */
export const list_notifications = (group) => `/v1/groups/${segment(group)}/-/notifications`;

/** `GET /v1/groups/{group}/-/notifications/{id}` */
export const get_notification = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}`;

/** `POST /v1/groups/{group}/-/notifications/{id}` */
export const create_notification = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}`;

/** `PUT /v1/groups/{group}/-/notifications/{id}` */
export const update_notification = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}`;

/** `DELETE /v1/groups/{group}/-/notifications/{id}` */
export const delete_notification = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}`;

/** `GET /v1/groups/{group}/-/notifications/{id}/deliveries` */
export const list_notification_deliveries = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}/deliveries`;

/** `POST /v1/groups/{group}/-/notifications/{id}/deliveries/{delivery}/redeliver` */
export const redeliver_notification = (group, id, delivery) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}/deliveries/${segment(delivery)}/redeliver`;

/** `POST /v1/groups/{group}/-/notifications/{id}/rotate-secret` */
export const rotate_notification_secret = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}/rotate-secret`;

/** `POST /v1/groups/{group}/-/notifications/{id}/test` */
export const test_notification = (group, id) => `/v1/groups/${segment(group)}/-/notifications/${segment(id)}/test`;

/** `GET /v1/groups/{group}/-/policy-sets` */
export const list_policy_sets = (group) => `/v1/groups/${segment(group)}/-/policy-sets`;

/** `GET /v1/groups/{group}/-/policy-sets/{id}` */
export const get_policy_set = (group, id) => `/v1/groups/${segment(group)}/-/policy-sets/${segment(id)}`;

/** `POST /v1/groups/{group}/-/policy-sets/{id}` */
export const create_policy_set = (group, id) => `/v1/groups/${segment(group)}/-/policy-sets/${segment(id)}`;

/** `PUT /v1/groups/{group}/-/policy-sets/{id}` */
export const update_policy_set = (group, id) => `/v1/groups/${segment(group)}/-/policy-sets/${segment(id)}`;

/** `DELETE /v1/groups/{group}/-/policy-sets/{id}` */
export const delete_policy_set = (group, id) => `/v1/groups/${segment(group)}/-/policy-sets/${segment(id)}`;

/** `GET /v1/groups/{group}/-/rules` */
export const list_rules = (group) => `/v1/groups/${segment(group)}/-/rules`;

/** `POST /v1/groups/{group}/-/rules` */
export const create_rule = (group) => `/v1/groups/${segment(group)}/-/rules`;

/** `GET /v1/groups/{group}/-/rules/{id}` */
export const get_rule = (group, id) => `/v1/groups/${segment(group)}/-/rules/${segment(id)}`;

/** `PUT /v1/groups/{group}/-/rules/{id}` */
export const update_rule = (group, id) => `/v1/groups/${segment(group)}/-/rules/${segment(id)}`;

/** `DELETE /v1/groups/{group}/-/rules/{id}` */
export const delete_rule = (group, id) => `/v1/groups/${segment(group)}/-/rules/${segment(id)}`;

/** `GET /v1/groups/{group}/-/runners` */
export const list_runners = (group) => `/v1/groups/${segment(group)}/-/runners`;

/** `GET /v1/groups/{group}/-/runners/{name}` */
export const get_runner = (group, name) => `/v1/groups/${segment(group)}/-/runners/${segment(name)}`;

/** `POST /v1/groups/{group}/-/runners/{name}` */
export const create_runner = (group, name) => `/v1/groups/${segment(group)}/-/runners/${segment(name)}`;

/** `PUT /v1/groups/{group}/-/runners/{name}` */
export const update_runner = (group, name) => `/v1/groups/${segment(group)}/-/runners/${segment(name)}`;

/** `DELETE /v1/groups/{group}/-/runners/{name}` */
export const delete_runner = (group, name) => `/v1/groups/${segment(group)}/-/runners/${segment(name)}`;

/** `POST /v1/groups/{group}/-/runners/{name}/check` */
export const check_runner = (group, name) => `/v1/groups/${segment(group)}/-/runners/${segment(name)}/check`;

/** `POST /v1/groups/{group}/-/unlock` */
export const unfreeze_group = (group) => `/v1/groups/${segment(group)}/-/unlock`;

/** `GET /v1/groups/{group}/-/vcs/github` */
export const get_github_connection = (group) => `/v1/groups/${segment(group)}/-/vcs/github`;

/** `PUT /v1/groups/{group}/-/vcs/github` */
export const connect_github = (group) => `/v1/groups/${segment(group)}/-/vcs/github`;

/** `DELETE /v1/groups/{group}/-/vcs/github` */
export const delete_github_connection = (group) => `/v1/groups/${segment(group)}/-/vcs/github`;

/** `GET /v1/groups/{group}/-/vcs/gitlab` */
export const get_gitlab_connection = (group) => `/v1/groups/${segment(group)}/-/vcs/gitlab`;

/** `PUT /v1/groups/{group}/-/vcs/gitlab` */
export const connect_gitlab = (group) => `/v1/groups/${segment(group)}/-/vcs/gitlab`;

/** `DELETE /v1/groups/{group}/-/vcs/gitlab` */
export const delete_gitlab_connection = (group) => `/v1/groups/${segment(group)}/-/vcs/gitlab`;

/** `GET /v1/health` */
export const health = () => `/v1/health`;

/** `GET /v1/jobs/{id}` */
export const get_job = (id) => `/v1/jobs/${segment(id)}`;

/** `POST /v1/jobs/{id}/approve` */
export const approve_job = (id) => `/v1/jobs/${segment(id)}/approve`;

/** `POST /v1/jobs/{id}/cancel` */
export const cancel_job = (id) => `/v1/jobs/${segment(id)}/cancel`;

/** `POST /v1/jobs/{id}/discard` */
export const discard_job = (id) => `/v1/jobs/${segment(id)}/discard`;

/** `POST /v1/jobs/{id}/events` */
export const report_job_exit = (id) => `/v1/jobs/${segment(id)}/events`;

/** `POST /v1/jobs/{id}/identity-token` */
export const mint_identity_token = (id) => `/v1/jobs/${segment(id)}/identity-token`;

/** `POST /v1/jobs/{id}/log-uploads` */
export const create_log_uploads = (id) => `/v1/jobs/${segment(id)}/log-uploads`;

/** `GET /v1/jobs/{id}/logs` */
export const get_job_logs = (id) => `/v1/jobs/${segment(id)}/logs`;

/** `GET /v1/jobs/{id}/outputs` */
export const get_job_outputs = (id) => `/v1/jobs/${segment(id)}/outputs`;

/** `GET /v1/jobs/{id}/plan` */
export const get_job_plan = (id) => `/v1/jobs/${segment(id)}/plan`;

/** `GET /v1/jobs/{id}/sensitive-variables` */
export const get_job_sensitive_variables = (id) => `/v1/jobs/${segment(id)}/sensitive-variables`;

/** `GET /v1/jobs/{id}/spec` */
export const get_job_spec = (id) => `/v1/jobs/${segment(id)}/spec`;

/** `PUT /v1/jobs/{id}/state` */
export const put_job_state = (id) => `/v1/jobs/${segment(id)}/state`;

/** `PUT /v1/jobs/{id}/summary` */
export const put_job_summary = (id) => `/v1/jobs/${segment(id)}/summary`;

/** `PUT /v1/jobs/{id}/tool` */
export const put_job_tool = (id) => `/v1/jobs/${segment(id)}/tool`;

/** `PUT /v1/jobs/{id}/upload-problems` */
export const put_upload_problems = (id) => `/v1/jobs/${segment(id)}/upload-problems`;

/** `POST /v1/jobs/{id}/uploads` */
export const create_upload = (id) => `/v1/jobs/${segment(id)}/uploads`;

/** `GET /v1/openapi.json` */
export const openapi_json = () => `/v1/openapi.json`;

/** `GET /v1/orgs/{org}/-/audit` */
export const list_audit = (org) => `/v1/orgs/${segment(org)}/-/audit`;

/** `POST /v1/vcs/github/{org}/webhook` */
export const github_webhook = (org) => `/v1/vcs/github/${segment(org)}/webhook`;

/** `POST /v1/vcs/gitlab/{org}/webhook` */
export const gitlab_webhook = (org) => `/v1/vcs/gitlab/${segment(org)}/webhook`;

/** `GET /v1/whoami` */
export const whoami = () => `/v1/whoami`;
