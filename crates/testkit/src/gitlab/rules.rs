//! The rules GitLab documents that the double enforces, each with its page.

/// Every request is authenticated with `PRIVATE-TOKEN: <token>` or `Authorization: Bearer
/// <token>` (or the `private_token` query parameter); a missing or unknown token is 401
/// `{"message":"401 Unauthorized"}`.
/// <https://docs.gitlab.com/api/rest/authentication/>
pub const UNAUTHORIZED: &str = "401 Unauthorized";

/// An expired token is 401 `{"error":"invalid_token","error_description":...}` (the
/// rack-oauth2 body `lib/api/api_guard.rb` renders); personal, group and project access
/// tokens "expire at midnight UTC on the expiry date".
/// <https://docs.gitlab.com/user/profile/personal_access_tokens/#access-token-expiration>
pub const EXPIRED_TOKEN: &str =
    "Token is expired. You can either do re-authorization or token refresh.";
/// A revoked token is 401 with this description (same guard, same page: "Revoke a token to
/// immediately invalidate it").
pub const REVOKED_TOKEN: &str = "Token was revoked. You have to re-authorize from the user.";

/// A token without a scope the endpoint accepts is 403 `{"error":"insufficient_scope",
/// "error_description": ..., "scope": "<accepted scopes>"}`: `api` grants read and write,
/// `read_api` reads only; `read_repository` covers only Git over HTTP and the Repository
/// Files API, and `write_repository` "does not support API authentication".
/// <https://docs.gitlab.com/user/profile/personal_access_tokens/#personal-access-token-scopes>
pub const INSUFFICIENT_SCOPE: &str =
    "The request requires higher privileges than provided by the access token.";
/// The scopes a read (GET) accepts.
pub const READ_SCOPES: &[&str] = &["api", "read_api"];
/// The scopes a write accepts.
pub const WRITE_SCOPES: &[&str] = &["api"];

/// A project the caller cannot see (every project here is private) is 404 `{"message":
/// "404 Project Not Found"}`; a project is named by its numeric id or its URL-encoded full
/// path (`acme%2Fplatform%2Finfra`, nested groups allowed). "Path parameters that are
/// required to be URL-encoded must be followed. If not, it doesn't match an API endpoint and
/// responds with a 404": an unencoded path is `{"error":"404 Not Found"}`.
/// <https://docs.gitlab.com/api/rest/#namespaced-paths>,
/// <https://docs.gitlab.com/api/rest/#path-parameters>
pub const PROJECT_NOT_FOUND: &str = "404 Project Not Found";

/// Offset pagination: `page` from 1, `per_page` 20 by default and at most 100; answers carry
/// `x-page`, `x-per-page`, `x-next-page`, `x-prev-page`, `x-total`, `x-total-pages` and a
/// `Link` with `rel="prev"`, `"next"`, `"first"`, `"last"`.
/// <https://docs.gitlab.com/api/rest/#offset-based-pagination>
pub const DEFAULT_PER_PAGE: usize = 20;
/// The largest `per_page` (same page); a larger one is clamped.
pub const MAX_PER_PAGE: usize = 100;

/// `detailed_merge_status` takes one of the documented values (`not_open`, `draft_status`,
/// `checking`, `conflict`, `need_rebase`, `discussions_not_resolved`, `ci_must_pass`,
/// `ci_still_running`, `not_approved`, `mergeable`, ...); `has_conflicts` is `false` unless
/// `merge_status` is `cannot_be_merged`; `include_diverged_commits_count=true` adds
/// `diverged_commits_count`. Lists default to every state (`state=all`), newest first.
/// <https://docs.gitlab.com/api/merge_requests/#merge-status>,
/// <https://docs.gitlab.com/api/merge_requests/#list-project-merge-requests>
pub const MERGE_REQUESTS_PAGE: &str = "https://docs.gitlab.com/api/merge_requests/";

/// `GET .../merge_requests/:iid/diffs` (GitLab 15.7 and later) pages with the common
/// pagination parameters: 20 files by default, at most 100 a page.
/// <https://docs.gitlab.com/api/merge_requests/#list-merge-request-diffs>
pub const DIFFS_PAGE: &str = "https://docs.gitlab.com/api/merge_requests/#list-merge-request-diffs";

/// `GET .../merge_requests/:iid/versions`: the merge request's diff versions, newest first
/// (paged like every list), each with `id`, `head_commit_sha`, `base_commit_sha`,
/// `start_commit_sha` (the target's head when the version was made), `created_at`,
/// `merge_request_id`, `state`, `real_size` (a string) and `patch_id_sha`. GitLab makes one
/// when the merge request is opened and one each time its source branch moves; a merge
/// request that does not exist is 404.
/// <https://docs.gitlab.com/api/merge_requests/#get-merge-request-diff-versions>
pub const VERSIONS_PAGE: &str =
    "https://docs.gitlab.com/api/merge_requests/#get-merge-request-diff-versions";

/// Approving with a `sha` that is not the merge request's HEAD is `409 Conflict`
/// ("SHA does not match HEAD of source branch"); approving twice, or a closed merge request,
/// is 401. "By default, adding a new commit to a merge request resets any existing
/// approvals" (`reset_approvals_on_push`, on by default). Each of `approved_by` carries
/// `approved_at`, when that approval was given (GitLab's `API::Entities::Approvals` exposes
/// the approval's `created_at` as `approved_at`; older instances send no time).
/// <https://docs.gitlab.com/api/merge_request_approvals/#approve-merge-request>,
/// <https://gitlab.com/gitlab-org/gitlab/-/blob/master/lib/api/entities/approvals.rb>,
/// <https://docs.gitlab.com/user/project/merge_requests/approvals/settings/#remove-all-approvals-when-commits-are-added-to-the-source-branch>
pub const APPROVALS_PAGE: &str = "https://docs.gitlab.com/api/merge_request_approvals/";

/// Commit statuses: `state` is one of `pending`, `running`, `success`, `failed`,
/// `canceled`, `skipped`; `description`, `ref` and `target_url` "Must be 255 characters or
/// fewer"; `target_url` must be an http(s) URL; an unknown commit is `404 Commit Not Found`.
/// A status of the same name, ref and author still pending or running is updated through
/// GitLab's job state machine, and an impossible transition is 400 "Cannot transition status
/// via :run from :running (Reason(s): Status cannot transition via \"run\")".
/// <https://docs.gitlab.com/api/commits/#set-commit-pipeline-status>,
/// <https://github.com/samcontesse/gitlab-merge-request-resource/issues/79>,
/// <https://github.com/runatlantis/atlantis/pull/1971>
pub const MAX_STATUS_FIELD_CHARS: usize = 255;

/// A note's body is "Limited to 1,000,000 characters"; a longer one is 400 `400 Bad request -
/// Note {:note=>["is too long (maximum is 1000000 characters)"]}`. Notes list newest first
/// by default (`sort=desc`); only a note's author may edit it (403).
/// <https://docs.gitlab.com/api/notes/#create-new-merge-request-note>
pub const MAX_NOTE_CHARS: usize = 1_000_000;

/// `GET /projects/:id/repository/archive[.format]?sha=<sha>`: the archive's one top-level
/// directory is `<project path>-<ref>-<sha>` (the API always appends the sha, so a sha ref
/// gives `<path>-<sha>-<sha>`); an unknown ref is `404 File Not Found`. Downloading code
/// needs at least the Reporter role on a private project.
/// <https://docs.gitlab.com/api/repositories/#get-file-archive>,
/// <https://docs.gitlab.com/user/permissions/#repository>
pub const ARCHIVE_PAGE: &str = "https://docs.gitlab.com/api/repositories/#get-file-archive";

/// Project access tokens: `name` and `scopes` required; `access_level` 40 by default and not
/// above the creator's; `expires_at` a date at most 365 days ahead (the default when
/// omitted); created with a personal access token of a Maintainer or Owner ("You cannot
/// authenticate with a project access token"); the token value is shown once; revoking
/// answers 204, an unknown token 404. The token's bot user is a member of that project only.
/// <https://docs.gitlab.com/api/project_access_tokens/>,
/// <https://docs.gitlab.com/user/project/settings/project_access_tokens/>
pub const MAX_TOKEN_LIFETIME_DAYS: i64 = 365;

/// A token revokes itself with `DELETE /personal_access_tokens/self` whatever its scope
/// (GitLab 15.4 and later: "Allow tokens with any scope to use the self-revocation API",
/// gitlab-org/gitlab!94463); it answers 204, and the token is refused from then on. A project
/// access token is its bot user's personal access token, so it may too. The project's
/// tokens are listed (`GET /projects/:id/access_tokens`, never their values) by a
/// Maintainer, `state=active|inactive` filtering from GitLab 17.2.
/// <https://docs.gitlab.com/api/personal_access_tokens/#revoke-a-personal-access-token>,
/// <https://docs.gitlab.com/api/project_access_tokens/#list-all-project-access-tokens>
pub const SELF_REVOKE: &str = "DELETE /personal_access_tokens/self";
/// The project access token scopes GitLab lists.
pub const PROJECT_TOKEN_SCOPES: &[&str] = &[
    "api",
    "read_api",
    "read_registry",
    "write_registry",
    "read_repository",
    "write_repository",
    "create_runner",
    "manage_runner",
    "ai_features",
    "k8s_proxy",
    "self_rotate",
];

/// A throttled request is 429 with `Retry-After` and `RateLimit-Name`, `-Limit`,
/// `-Observed`, `-Remaining`, `-Reset` and `-ResetTime`, body `Retry later`.
/// <https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/#response-headers>
pub const RATE_LIMIT_NAME: &str = "throttle_authenticated_api";

/// Webhook deliveries carry `X-Gitlab-Event` (`"<EVENT> Hook"`), `X-Gitlab-Token` (the secret
/// token as plain text), `X-Gitlab-Instance`, `X-Gitlab-Webhook-UUID` (one per webhook),
/// `X-Gitlab-Event-UUID` and, from GitLab 17.4, `Idempotency-Key`: "Unique ID consistent
/// across webhook retries".
/// <https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers>
pub const USER_AGENT: &str = "GitLab/18.6.0-double";

/// A status is posted to a commit on a branch: with no `ref` given, GitLab takes the first
/// branch of the project that contains the commit, and answers 404 `404 References for
/// commit Not Found` when none does. A fork's merge request's commits are in the target
/// project only under `refs/merge-requests/:iid/head`, so a status for them posted to the
/// target project is refused; the fork's project takes it, from its Developers
/// (gitlab-org/gitlab#374133, gitlab-org/gitlab#16491).
/// <https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>
pub const FORK_STATUS: &str = "404 References for commit Not Found";
