//! Reading a paged list: following `rel="next"` links within bounds, with an ETag on the
//! first page.

use hyper::body::Bytes;

use super::{Github, MAX_PAGES, PER_PAGE};
use crate::{Conditional, GithubError, Permissions, RepoRef};

impl Github {
    /// A whole list within the default bounds ([`MAX_PAGES`] pages of [`PER_PAGE`]).
    pub(super) async fn list<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Vec<T>, GithubError> {
        self.walk_all(
            repo,
            permissions,
            call,
            first,
            MAX_PAGES,
            MAX_PAGES * PER_PAGE,
            items,
        )
        .await
    }

    /// Reads a paged list from `first` on, following `rel="next"` links, at most
    /// `max_pages` pages and `max_items` items (then cut there). The first page is sent
    /// with `If-None-Match` when `etag` is given.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn walk<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        etag: Option<&str>,
        max_pages: usize,
        max_items: usize,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Conditional<Vec<T>>, GithubError> {
        let mut all = Vec::new();
        let mut path = first;
        let mut first_etag = None;
        for page in 1..=max_pages {
            let answer = self
                .send(
                    repo,
                    permissions,
                    call,
                    &path,
                    None,
                    etag.filter(|_| page == 1),
                )
                .await?;
            if answer.status == http::StatusCode::NOT_MODIFIED {
                return Ok(Conditional::NotModified);
            }
            if page == 1 {
                first_etag = answer.etag();
            }
            all.extend(items(call, &answer.body)?);
            if all.len() >= max_items {
                all.truncate(max_items);
                break;
            }
            match answer.next_link() {
                None => break,
                Some(next) => {
                    // Only ever follow a link to the same API: the token goes with it.
                    path = next
                        .strip_prefix(&self.inner.transport.base)
                        .filter(|rest| rest.starts_with('/'))
                        .ok_or_else(|| GithubError::Decode {
                            call,
                            reason: "a next-page link outside the API".into(),
                        })?
                        .to_string();
                    if page == max_pages {
                        return Err(GithubError::TooManyPages {
                            call,
                            limit: max_pages,
                        });
                    }
                }
            }
        }
        Ok(Conditional::Modified {
            value: all,
            etag: first_etag,
        })
    }

    /// Like [`Github::walk`] without an ETag: the list itself.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn walk_all<T>(
        &self,
        repo: &RepoRef,
        permissions: &Permissions,
        call: &'static str,
        first: String,
        max_pages: usize,
        max_items: usize,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GithubError>,
    ) -> Result<Vec<T>, GithubError> {
        match self
            .walk(
                repo,
                permissions,
                call,
                first,
                None,
                max_pages,
                max_items,
                items,
            )
            .await?
        {
            Conditional::Modified { value, .. } => Ok(value),
            // Without If-None-Match GitHub never answers 304.
            Conditional::NotModified => Ok(Vec::new()),
        }
    }
}
