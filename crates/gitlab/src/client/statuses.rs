//! Setting an external commit status: one per environment, `sortie: <env>`.
//!
//! GitLab keeps a commit status as a job of a state machine: posting a state finds the
//! status of that name (and ref) still `pending` or `running` and moves it, or makes a new
//! one when the last is finished. A move the machine has no transition for (`pending`
//! twice, `running` twice, `running` back to `pending`) is refused with 400 "Cannot
//! transition status via :run from :running". The client treats that answer as done
//! ([`StatusOutcome::Kept`]) rather than reading the status first: reading costs a call on
//! every write and still races another writer, while the refusal leaves the status in the
//! state asked for, or (`running` back to `pending`) in a later one, which a later write
//! moves on.

use serde::Deserialize;

use super::{
    check_argument, check_sha, cut_chars, decode, Gitlab, LIST_STATUSES, MAX_PAGES, PER_PAGE,
    SET_STATUS,
};
use crate::transport::Retry;
use crate::{CommitState, CommitStatus, GitlabError, ProjectPath, StatusBody, StatusOutcome};

/// The most characters GitLab takes in a status's `description`, `target_url` and `ref`:
/// "Must be 255 characters or fewer"
/// (<https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>).
pub const MAX_STATUS_TEXT_CHARS: usize = 255;

impl Gitlab {
    /// Sets the external status `status.name` of commit `sha` to `status.state`
    /// (`POST /projects/:id/statuses/:sha`,
    /// <https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>). The
    /// description is cut to [`MAX_STATUS_TEXT_CHARS`]; a `target_url` or `ref` longer than
    /// that is left out. A transition GitLab's state machine refuses is
    /// [`StatusOutcome::Kept`], not an error (see the module's notes). For a merge request,
    /// `sha` must be a commit of its source branch.
    pub async fn set_status(
        &self,
        project: &ProjectPath,
        sha: &str,
        status: &StatusBody,
    ) -> Result<StatusOutcome, GitlabError> {
        check_sha(SET_STATUS, sha)?;
        check_argument(SET_STATUS, "name", &status.name)?;
        if status.name.chars().count() > MAX_STATUS_TEXT_CHARS {
            return Err(GitlabError::InvalidArgument {
                call: SET_STATUS,
                field: "name",
                reason: format!("is over {MAX_STATUS_TEXT_CHARS} characters"),
            });
        }
        let body = fit_status(status);
        let path = format!("/projects/{}/statuses/{sha}", project.encoded());
        // A repeat is answered as the first was, or with the refusal read below.
        match self
            .send_json(SET_STATUS, &path, &body, Retry::Idempotent)
            .await
        {
            Ok(answer) => {
                #[derive(Deserialize)]
                struct Set {
                    id: u64,
                    #[serde(default)]
                    status: Option<serde_json::Value>,
                }
                let set = decode::<Set>(SET_STATUS, &answer.body)?;
                let state = set
                    .status
                    .and_then(|s| serde_json::from_value::<CommitState>(s).ok())
                    .unwrap_or(status.state);
                Ok(StatusOutcome::Set { id: set.id, state })
            }
            Err(GitlabError::Refused {
                status: 400,
                message,
                ..
            }) if is_refused_transition(&message) => {
                tracing::debug!(%message, "GitLab kept the commit status's state");
                Ok(StatusOutcome::Kept { message })
            }
            Err(e) => Err(e),
        }
    }
}

impl Gitlab {
    /// The latest status of each name on commit `sha` (a merge request's head): Sortie's,
    /// other systems', and CI jobs', all pages, bounded
    /// (`GET /projects/:id/repository/commits/:sha/statuses`,
    /// <https://docs.gitlab.com/api/commits/#list-the-statuses-of-a-commit>). No `ref` is
    /// sent: it only filters.
    pub async fn head_statuses(
        &self,
        project: &ProjectPath,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, GitlabError> {
        check_sha(LIST_STATUSES, sha)?;
        let path = format!(
            "/projects/{}/repository/commits/{sha}/statuses",
            project.encoded()
        );
        self.walk(
            LIST_STATUSES,
            &path,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            decode::<Vec<CommitStatus>>,
        )
        .await
    }
}

/// The body as sent: the description cut to GitLab's limit, an over-long `target_url` or
/// `ref` left out.
fn fit_status(status: &StatusBody) -> StatusBody {
    let fits = |text: &String| text.chars().count() <= MAX_STATUS_TEXT_CHARS;
    StatusBody {
        name: status.name.clone(),
        state: status.state,
        target_url: status.target_url.clone().filter(fits),
        description: status
            .description
            .as_deref()
            .map(|d| cut_chars(d, MAX_STATUS_TEXT_CHARS).into_owned()),
        ref_name: status.ref_name.clone().filter(fits),
    }
}

/// Whether a 400's message is GitLab's refusal of a state transition: "Cannot transition
/// status via :run from :running (Reason(s): Status cannot transition via \"run\")".
fn is_refused_transition(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("cannot transition status")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_fitted_to_gitlabs_limits() {
        let long = "x".repeat(300);
        let fitted = fit_status(&StatusBody {
            name: "sortie: prod".into(),
            state: CommitState::Success,
            target_url: Some(format!("https://sortie.example.com/{long}")),
            description: Some(long.clone()),
            ref_name: Some(long),
        });
        assert_eq!(fitted.target_url, None);
        assert_eq!(fitted.ref_name, None);
        assert_eq!(
            fitted.description.unwrap().chars().count(),
            MAX_STATUS_TEXT_CHARS
        );
        let short = StatusBody {
            name: "sortie: prod".into(),
            state: CommitState::Pending,
            target_url: Some("https://sortie.example.com/jobs/1".into()),
            description: Some("queued".into()),
            ref_name: Some("feature".into()),
        };
        assert_eq!(fit_status(&short), short);
    }

    #[test]
    fn gitlabs_transition_refusal_is_recognised() {
        assert!(is_refused_transition(
            "Cannot transition status via :run from :running (Reason(s): Status cannot transition via \"run\")"
        ));
        assert!(is_refused_transition(
            "Cannot transition status via :enqueue from :pending (Reason(s): Status cannot transition via \"enqueue\")"
        ));
        assert!(!is_refused_transition("description is too long"));
        assert!(!is_refused_transition("404 Commit Not Found"));
    }
}
