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
//! [`SOURCE_TOKEN_MIN_LIFETIME`]: tomorrow, or the day after late in the (UTC) day. The
//! caller revokes it once the job has its source.
//!
//! Creating project access tokens needs the Maintainer role on the project, and on
//! GitLab.com the Premium or Ultimate tier (self-managed: any tier).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use sortie_core::protocol::pilot::SourceAccess;

use super::{check_sha, decode, Gitlab, CREATE_TOKEN, REVOKE_TOKEN};
use crate::transport::{Outgoing, Retry};
use crate::types::MintedTokenWire;
use crate::{encode, GitlabError, ProjectPath, Secret, SourceGrant, SourceToken};

/// The scopes of a source token: reading the project's API, which includes its archive.
pub const SOURCE_TOKEN_SCOPES: &[&str] = &["read_api"];
/// The role of a source token: Reporter (`20`), the least that reads a private project's
/// code (<https://docs.gitlab.com/api/project_access_tokens/#create-a-project-access-token>).
pub const SOURCE_TOKEN_ACCESS_LEVEL: u8 = 20;
/// The least time a source token is valid for when minted. Its lifetime is between this and
/// this plus a day.
pub const SOURCE_TOKEN_MIN_LIFETIME: Duration = Duration::from_secs(4 * 3600);
/// The name of every source token (visible to the project's members).
const SOURCE_TOKEN_NAME: &str = "sortie-source";

impl Gitlab {
    /// Mints a source token for `project` at `now`: a project access token with
    /// [`SOURCE_TOKEN_SCOPES`], the Reporter role, expiring at the first midnight (UTC) at
    /// least [`SOURCE_TOKEN_MIN_LIFETIME`] away
    /// (<https://docs.gitlab.com/api/project_access_tokens/#create-a-project-access-token>).
    /// Not sent again after a lost answer (a second token would be left unrevoked).
    pub async fn create_source_token(
        &self,
        project: &ProjectPath,
        now: DateTime<Utc>,
    ) -> Result<SourceToken, GitlabError> {
        let expires_on = source_token_expiry(now);
        let path = format!("/projects/{}/access_tokens", project.encoded());
        let body = serde_json::json!({
            "name": SOURCE_TOKEN_NAME,
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

    /// What a job needs to download commit `sha` of `project`: the archive URL and a fresh
    /// source token ([`Gitlab::create_source_token`]), with the token's id to revoke.
    pub async fn source_access(
        &self,
        project: &ProjectPath,
        sha: &str,
        now: DateTime<Utc>,
    ) -> Result<SourceGrant, GitlabError> {
        check_sha(CREATE_TOKEN, sha)?;
        let token = self.create_source_token(project, now).await?;
        Ok(SourceGrant {
            access: SourceAccess {
                url: self.archive_url(project, sha),
                token: token.token.expose().to_string(),
                expires_at: token.expires_at,
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
