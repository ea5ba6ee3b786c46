//! The calls on notes: finding Sortie's sticky note, writing and replacing it, replying.

use super::{
    check_argument, cut_chars, decode, Gitlab, Id, CREATE_NOTE, LIST_NOTES, MAX_PAGES, PER_PAGE,
    UPDATE_NOTE,
};
use crate::transport::Retry;
use crate::{GitlabError, Note, ProjectPath};

/// The most characters of a note's body: "Limited to 1,000,000 characters"
/// (<https://docs.gitlab.com/api/notes/#create-new-merge-request-note>). A longer body is
/// cut, with a line saying so.
pub const MAX_NOTE_CHARS: usize = 1_000_000;

/// What ends a body cut to fit a note.
const CUT_NOTICE: &str = "\n\n… (cut: a GitLab note holds at most 1,000,000 characters)";

impl Gitlab {
    /// The oldest note on merge request `iid` that the token's user wrote and whose body
    /// holds `marker`: Sortie's sticky note. System notes are skipped; a note someone else
    /// wrote with the marker is not Sortie's. All pages, oldest first, bounded
    /// (<https://docs.gitlab.com/api/notes/#list-all-merge-request-notes>).
    pub async fn find_note(
        &self,
        project: &ProjectPath,
        iid: u64,
        marker: &str,
    ) -> Result<Option<u64>, GitlabError> {
        check_argument(LIST_NOTES, "marker", marker)?;
        let me = self.current_user().await?;
        let path = format!(
            "/projects/{}/merge_requests/{iid}/notes?sort=asc&order_by=created_at",
            project.encoded()
        );
        let notes = self
            .walk(
                LIST_NOTES,
                &path,
                MAX_PAGES,
                MAX_PAGES * PER_PAGE,
                decode::<Vec<Note>>,
            )
            .await?;
        Ok(notes
            .into_iter()
            .find(|n| !n.system && n.author.id == me.id && n.body.contains(marker))
            .map(|n| n.id))
    }

    /// Writes a new note on merge request `iid`; its id
    /// (<https://docs.gitlab.com/api/notes/#create-new-merge-request-note>). A body over
    /// [`MAX_NOTE_CHARS`] is cut. Not sent again after a lost answer (it would be a second
    /// note).
    pub async fn create_note(
        &self,
        project: &ProjectPath,
        iid: u64,
        body: &str,
    ) -> Result<u64, GitlabError> {
        let path = format!("/projects/{}/merge_requests/{iid}/notes", project.encoded());
        let answer = self
            .send_json(
                CREATE_NOTE,
                &path,
                &serde_json::json!({ "body": fit_note(body) }),
                Retry::OnlyUnsent,
            )
            .await?;
        Ok(decode::<Id>(CREATE_NOTE, &answer.body)?.id)
    }

    /// Replaces note `note_id`'s body on merge request `iid`
    /// (<https://docs.gitlab.com/api/notes/#modify-existing-merge-request-note>). A body
    /// over [`MAX_NOTE_CHARS`] is cut.
    pub async fn update_note(
        &self,
        project: &ProjectPath,
        iid: u64,
        note_id: u64,
        body: &str,
    ) -> Result<(), GitlabError> {
        let path = format!(
            "/projects/{}/merge_requests/{iid}/notes/{note_id}",
            project.encoded()
        );
        self.send_json(
            UPDATE_NOTE,
            &path,
            &serde_json::json!({ "body": fit_note(body) }),
            Retry::Idempotent,
        )
        .await
        .map(drop)
    }

    /// Writes merge request `iid`'s one sticky note and returns its id: updates note `id`;
    /// without one (or when that note is gone), the note [`Gitlab::find_note`] finds by
    /// `marker`; else creates it. So a record lost between a note's creation and its write
    /// never makes a second note.
    pub async fn upsert_note(
        &self,
        project: &ProjectPath,
        iid: u64,
        id: Option<u64>,
        marker: &str,
        body: &str,
    ) -> Result<u64, GitlabError> {
        if let Some(id) = id {
            match self.update_note(project, iid, id, body).await {
                Ok(()) => return Ok(id),
                // Deleted by someone: found again by its marker, or written anew.
                Err(GitlabError::Refused { status: 404, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        match self.find_note(project, iid, marker).await? {
            Some(found) => {
                self.update_note(project, iid, found, body).await?;
                Ok(found)
            }
            None => self.create_note(project, iid, body).await,
        }
    }

    /// Answers on merge request `iid` with a new note (a refusal, the help); its id.
    pub async fn reply(
        &self,
        project: &ProjectPath,
        iid: u64,
        body: &str,
    ) -> Result<u64, GitlabError> {
        self.create_note(project, iid, body).await
    }
}

/// `body` cut to [`MAX_NOTE_CHARS`], ending with a line saying so when cut (the marker,
/// on the first line, stays).
pub(crate) fn fit_note(body: &str) -> std::borrow::Cow<'_, str> {
    if body.chars().count() <= MAX_NOTE_CHARS {
        return std::borrow::Cow::Borrowed(body);
    }
    let room = MAX_NOTE_CHARS - CUT_NOTICE.chars().count();
    let mut out = cut_chars(body, room + 1).into_owned();
    // `cut_chars` ends with `…`; the notice says it better.
    out.pop();
    out.push_str(CUT_NOTICE);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_that_fits_is_sent_as_it_is() {
        assert!(matches!(
            fit_note("hello"),
            std::borrow::Cow::Borrowed("hello")
        ));
        let exact = "é".repeat(MAX_NOTE_CHARS);
        assert_eq!(fit_note(&exact).chars().count(), MAX_NOTE_CHARS);
    }

    #[test]
    fn a_long_note_is_cut_to_the_limit_and_says_so() {
        let body = format!("<!-- marker -->\n{}", "x".repeat(MAX_NOTE_CHARS));
        let fitted = fit_note(&body);
        assert_eq!(fitted.chars().count(), MAX_NOTE_CHARS);
        assert!(fitted.starts_with("<!-- marker -->\n"));
        assert!(fitted.ends_with(CUT_NOTICE));
    }
}
