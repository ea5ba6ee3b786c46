//! A job's access to its source: a project access token that can only read one project,
//! for a short while, and the URL of the commit's archive.
//!
//! A project access token belongs to a bot user that is a member of that one project only:
//! "you cannot use them to access resources from other projects"
//! (<https://docs.gitlab.com/user/project/settings/project_access_tokens/>). Its role is
//! Reporter, the least that may read a private project's code. Its scope is `read_api`:
//! the archive is a REST endpoint (`GET /projects/:id/repository/archive`), and GitLab's
//! API lets a token in only with `api`, or `read_api` for a `GET` (`lib/api/api.rb`:
//! `allow_access_with_scope :read_api, if: request.get? || request.head?`);
//! `read_repository` alone grants Git over HTTP and the repository files API, not the
//! archive (`lib/api/repositories.rb` allows no other scope). The token expires at
//! midnight UTC of its `expires_at` date, so a date is chosen that leaves at least
//! [`SOURCE_TOKEN_MIN_LIFETIME`]: tomorrow, or the day after late in the (UTC) day.
//!
//! Each token is the job's alone and named for it ([`source_token_name`]), and it is
//! revoked twice over: by the pilot itself as soon as the archive is downloaded
//! (`DELETE /personal_access_tokens/self`, which any token may call on itself since GitLab
//! 15.4: <https://docs.gitlab.com/api/personal_access_tokens/#revoke-a-personal-access-token>),
//! and by Sortie once the job has ended, found by its name among the project's active
//! tokens ([`Gitlab::source_tokens`]), for a pilot that died before it could.
//!
//! Creating project access tokens needs the Maintainer role on the project, and on
//! GitLab.com the Premium or Ultimate tier (self-managed: any tier).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use sortie_core::protocol::pilot::SourceAccess;

use super::{
    check_sha, decode, Gitlab, CREATE_TOKEN, LIST_TOKENS, MAX_PAGES, PER_PAGE, REVOKE_TOKEN,
};
use crate::transport::{Outgoing, Retry};
use crate::types::{ListedTokenWire, MintedTokenWire};
use crate::{encode, GitlabError, HeldSourceToken, ProjectPath, Secret, SourceGrant, SourceToken};

/// The scopes of a source token: reading the project's API, which includes its archive.
pub const SOURCE_TOKEN_SCOPES: &[&str] = &["read_api"];
/// The role of a source token: Reporter (`20`), the least that reads a private project's
/// code (<https://docs.gitlab.com/api/project_access_tokens/#create-a-project-access-token>).
pub const SOURCE_TOKEN_ACCESS_LEVEL: u8 = 20;
/// The least time a source token is valid for when minted. Its lifetime is between this and
/// this plus a day.
pub const SOURCE_TOKEN_MIN_LIFETIME: Duration = Duration::from_secs(4 * 3600);
/// The start of every source token's name (visible to the project's members); the job's id
/// follows it.
pub const SOURCE_TOKEN_PREFIX: &str = "sortie-source-";
/// The longest job id a source token is named for.
const MAX_JOB_ID_CHARS: usize = 64;

/// The name of job `job`'s source token: [`SOURCE_TOKEN_PREFIX`] and the job's id, which
/// must be 1 to 64 ASCII letters, digits, `-` or `_`.
pub fn source_token_name(job: &str) -> Result<String, GitlabError> {
    let fits = (1..=MAX_JOB_ID_CHARS).contains(&job.len())
        && job
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !fits {
        return Err(GitlabError::InvalidArgument {
            call: CREATE_TOKEN,
            field: "job",
            reason: "is not 1 to 64 letters, digits, '-' or '_'".into(),
        });
    }
    Ok(format!("{SOURCE_TOKEN_PREFIX}{job}"))
}

/// The job a token named `name` was minted for, when it is a source token's name.
pub fn job_of_source_token(name: &str) -> Option<&str> {
    let job = name.strip_prefix(SOURCE_TOKEN_PREFIX)?;
    source_token_name(job).ok().map(|_| job)
}

impl Gitlab {
    /// Mints job `job`'s source token for `project` at `now`: a project access token named
    /// for the job ([`source_token_name`]), with [`SOURCE_TOKEN_SCOPES`], the Reporter
    /// role, expiring at the first midnight (UTC) at least [`SOURCE_TOKEN_MIN_LIFETIME`]
    /// away
    /// (<https://docs.gitlab.com/api/project_access_tokens/#create-a-project-access-token>).
    /// Not sent again after a lost answer (a second token would be left unrevoked).
    pub async fn create_source_token(
        &self,
        project: &ProjectPath,
        job: &str,
        now: DateTime<Utc>,
    ) -> Result<SourceToken, GitlabError> {
        let name = source_token_name(job)?;
        let expires_on = source_token_expiry(now);
        let path = format!("/projects/{}/access_tokens", project.encoded());
        let body = serde_json::json!({
            "name": name,
            "scopes": SOURCE_TOKEN_SCOPES,
            "access_level": SOURCE_TOKEN_ACCESS_LEVEL,
            "expires_at": expires_on.format("%Y-%m-%d").to_string(),
        });
        let answer = self
            .send_json(CREATE_TOKEN, &path, &body, Retry::OnlyUnsent)
            .await?;
        let minted = decode::<MintedTokenWire>(CREATE_TOKEN, &answer.body)?;
        if minted.token.trim().is_empty() {
            return Err(GitlabError::Decode {
                call: CREATE_TOKEN,
                reason: "the token is empty".into(),
            });
        }
        // GitLab may shorten the date (an instance's maximum lifetime), never lengthen it.
        let expires_on = minted.expires_at.map_or(expires_on, |d| d.min(expires_on));
        Ok(SourceToken {
            id: minted.id,
            token: Secret::new(minted.token),
            expires_on,
            expires_at: midnight(expires_on),
            scopes: minted.scopes,
        })
    }

    /// Revokes source token `token_id` of `project`
    /// (<https://docs.gitlab.com/api/project_access_tokens/#revoke-a-project-access-token>).
    /// A token already gone (404) is done.
    pub async fn revoke_source_token(
        &self,
        project: &ProjectPath,
        token_id: u64,
    ) -> Result<(), GitlabError> {
        let path = format!("/projects/{}/access_tokens/{token_id}", project.encoded());
        match self
            .send(
                REVOKE_TOKEN,
                &path,
                &Outgoing {
                    json: None,
                    retry: Retry::Idempotent,
                },
            )
            .await
        {
            Ok(_) | Err(GitlabError::Refused { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The active source tokens of `project`, with the job each was minted for: every page
    /// of `GET /projects/:id/access_tokens?state=active`, bounded
    /// (<https://docs.gitlab.com/api/project_access_tokens/#list-all-project-access-tokens>).
    /// `state` filters only from GitLab 17.2, so revoked and inactive tokens are also left
    /// out here; so is any token not named for a job.
    pub async fn source_tokens(
        &self,
        project: &ProjectPath,
    ) -> Result<Vec<HeldSourceToken>, GitlabError> {
        let path = format!("/projects/{}/access_tokens?state=active", project.encoded());
        let listed = self
            .walk(
                LIST_TOKENS,
                &path,
                MAX_PAGES,
                MAX_PAGES * PER_PAGE,
                decode::<Vec<ListedTokenWire>>,
            )
            .await?;
        Ok(listed
            .into_iter()
            .filter(|t| t.active && !t.revoked)
            .filter_map(|t| {
                job_of_source_token(&t.name).map(|job| HeldSourceToken {
                    id: t.id,
                    job: job.to_string(),
                })
            })
            .collect())
    }

    /// Where a token revokes itself: `DELETE /personal_access_tokens/self`, open to a token
    /// of any scope since GitLab 15.4
    /// (<https://docs.gitlab.com/api/personal_access_tokens/#revoke-a-personal-access-token>;
    /// a project access token is its bot user's personal access token).
    pub fn self_revoke_url(&self) -> String {
        format!("{}/personal_access_tokens/self", self.api_url())
    }

    /// The URL of `project`'s archive of commit `sha`, a `.tar.gz`
    /// (`GET /projects/:id/repository/archive.tar.gz?sha=...`,
    /// <https://docs.gitlab.com/api/repositories/#get-file-archive>). GitLab takes the token
    /// in `PRIVATE-TOKEN` or as `Authorization: Bearer`
    /// (<https://docs.gitlab.com/api/rest/authentication/#personalprojectgroup-access-tokens>).
    pub fn archive_url(&self, project: &ProjectPath, sha: &str) -> String {
        format!(
            "{}/projects/{}/repository/archive.tar.gz?sha={}",
            self.api_url(),
            project.encoded(),
            encode(sha)
        )
    }

    /// What job `job` needs to download commit `sha` of `project`: the archive URL, a fresh
    /// source token of its own ([`Gitlab::create_source_token`]) and where the pilot
    /// revokes it ([`Gitlab::self_revoke_url`]), with the token's id.
    pub async fn source_access(
        &self,
        project: &ProjectPath,
        sha: &str,
        job: &str,
        now: DateTime<Utc>,
    ) -> Result<SourceGrant, GitlabError> {
        check_sha(CREATE_TOKEN, sha)?;
        let token = self.create_source_token(project, job, now).await?;
        Ok(SourceGrant {
            access: SourceAccess {
                url: self.archive_url(project, sha),
                token: token.token.expose().to_string(),
                expires_at: token.expires_at,
                revoke_url: Some(self.self_revoke_url()),
            },
            project: project.clone(),
            token_id: token.id,
        })
    }
}

/// 00:00:00 UTC of `date`: when a token of that `expires_at` stops working.
fn midnight(date: NaiveDate) -> DateTime<Utc> {
    date.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// The `expires_at` date of a token minted at `now`: tomorrow, or the day after when
/// tomorrow's midnight is less than [`SOURCE_TOKEN_MIN_LIFETIME`] away.
pub(crate) fn source_token_expiry(now: DateTime<Utc>) -> NaiveDate {
    let tomorrow = now.date_naive() + chrono::Days::new(1);
    let min = chrono::Duration::from_std(SOURCE_TOKEN_MIN_LIFETIME).unwrap_or_default();
    if midnight(tomorrow) - now >= min {
        tomorrow
    } else {
        tomorrow + chrono::Days::new(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    #[test]
    fn a_token_lives_until_tomorrow_or_the_day_after() {
        let at = |h, m| Utc.with_ymd_and_hms(2026, 11, 30, h, m, 0).unwrap();
        let dec_1 = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let dec_2 = NaiveDate::from_ymd_opt(2026, 12, 2).unwrap();
        assert_eq!(source_token_expiry(at(0, 0)), dec_1);
        assert_eq!(source_token_expiry(at(20, 0)), dec_1);
        assert_eq!(source_token_expiry(at(20, 1)), dec_2);
        assert_eq!(source_token_expiry(at(23, 59)), dec_2);
        assert_eq!(
            midnight(dec_1),
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
        );
        let new_year = Utc.with_ymd_and_hms(2026, 12, 31, 12, 0, 0).unwrap();
        assert_eq!(
            source_token_expiry(new_year),
            NaiveDate::from_ymd_opt(2027, 1, 1).unwrap()
        );
    }

    proptest! {
        #[test]
        fn a_token_lifetime_is_within_its_bounds(secs in 0i64..4_000_000_000) {
            let now = DateTime::from_timestamp(secs, 0).unwrap();
            let life = midnight(source_token_expiry(now)) - now;
            prop_assert!(life >= chrono::Duration::hours(4));
            prop_assert!(life <= chrono::Duration::hours(28));
        }
    }
}
