//! The rules GitHub documents that the double enforces, each with its page.

/// An app JWT must be signed RS256, its `iss` the app's id; `exp` "must be no more than 10
/// minutes into the future"; GitHub recommends `iat` 60 seconds in the past to allow for
/// clock drift, so an `iat` more than a minute ahead is refused. A refused JWT is 401.
/// <https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>
pub const JWT_MAX_LIFETIME_SECS: i64 = 600;
/// How far ahead of the double's clock an `iat` may be (the drift GitHub allows for).
pub const JWT_MAX_IAT_AHEAD_SECS: i64 = 60;

/// "The installation access token will expire after 1 hour"; at most 500 repositories may
/// be listed; a token cannot have repositories or permissions its installation lacks (422).
/// <https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app>
pub const INSTALLATION_TOKEN_LIFETIME_SECS: i64 = 3600;
/// The most repositories one token request may list (same page).
pub const MAX_TOKEN_REPOSITORIES: usize = 500;

/// `per_page`: "The number of results per page (max 100)", 30 by default; `Link` headers
/// carry `rel="next"`, `rel="last"`, `rel="first"`, `rel="prev"`.
/// <https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api>
pub const MAX_PER_PAGE: usize = 100;
/// The `per_page` when none is given (same page).
pub const DEFAULT_PER_PAGE: usize = 30;

/// "Responses include a maximum of 3000 files."
/// <https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files>
pub const MAX_PULL_FILES: usize = 3000;

/// An issue comment's body is refused over 65,536 characters (422 "Validation Failed",
/// "body is too long (maximum is 65536 characters)").
/// <https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>
pub const MAX_COMMENT_CHARS: usize = 65_536;

/// A check run's `output.summary` and `output.text`: "Maximum length: 65535 characters";
/// "The Checks API limits the number of annotations to a maximum of 50 per API request".
/// Only GitHub Apps may write check runs ("OAuth apps and authenticated users are not able
/// to create a check suite"). GitHub documents no length limit for `name` or
/// `external_id`, so the double enforces none.
/// <https://docs.github.com/en/rest/checks/runs#create-a-check-run>
pub const MAX_CHECK_OUTPUT_CHARS: usize = 65_535;
/// The most annotations in one create or update (same page).
pub const MAX_ANNOTATIONS_PER_REQUEST: usize = 50;

/// Primary rate limit of an installation token (the floor GitHub gives an installation):
/// every answer carries `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` and
/// `-resource`; when it is spent, 403 with `x-ratelimit-remaining: 0`. A secondary rate
/// limit is 403 (or 429) with a message saying so, and `retry-after` when GitHub sets one.
/// <https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api>
pub const RATE_LIMIT_PER_HOUR: u64 = 5000;

/// "Making a conditional request does not count against your primary rate limit if a 304
/// response is returned and the request was made while correctly authorized with an
/// Authorization header." Lists carry an `ETag`; `If-None-Match` with it answers 304.
/// <https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate>
pub const CONDITIONAL_REQUESTS_PAGE: &str = "https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate";

/// `GET /repos/{owner}/{repo}/tarball/{ref}` answers 302 to a download URL; "For private
/// repositories, these links are temporary and expire after five minutes." The archive's
/// one top-level directory is `<owner>-<repo>-<the commit's first 7 hex digits>/`.
/// <https://docs.github.com/en/rest/repos/contents#download-a-repository-archive-tar>
pub const DOWNLOAD_LINK_LIFETIME_SECS: i64 = 300;
/// The abbreviated commit in the archive's directory name.
pub const ARCHIVE_SHORT_SHA: usize = 7;

/// A private repository a credential cannot see answers 404 (GitHub does not reveal it
/// exists); a permission the installation token lacks answers 403 "Resource not accessible
/// by integration"; a bad or expired credential 401 "Bad credentials".
/// <https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api>
pub const NOT_ACCESSIBLE: &str = "Resource not accessible by integration";

/// Webhook deliveries carry `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID),
/// `X-Hub-Signature-256` (`sha256=` and the HMAC-SHA256 hex digest of the body under the
/// webhook's secret) and a `User-Agent` starting `GitHub-Hookshot/`.
/// <https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers>,
/// <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>
pub const HOOKSHOT_USER_AGENT: &str = "GitHub-Hookshot/sortie-double";
