//! Reading an offset-paged list: asking `page=1, 2, ...` as `x-next-page` says, within
//! bounds (<https://docs.gitlab.com/api/rest/#offset-based-pagination>).
//!
//! The next page is asked by number under the client's own API root, never by following a
//! `Link` header: the token goes with every request, and a link could name another host.

use hyper::body::Bytes;

use super::{Gitlab, PER_PAGE};
use crate::transport::{NextPage, Outgoing};
use crate::GitlabError;

/// What the walk of a list decides after one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Ask this page next.
    Next(u32),
    /// The list is whole.
    Done,
}

/// After page `page` brought `items` items and said `next`: the page to ask next, or the
/// end. GitLab's `x-next-page` decides; without it (a proxy dropped it), a full page means
/// there may be more. A next page that does not move forward is an error (a loop).
pub(crate) fn step(page: u32, items: usize, next: NextPage) -> Result<Step, &'static str> {
    if items == 0 {
        return Ok(Step::Done);
    }
    match next {
        NextPage::Last => Ok(Step::Done),
        NextPage::Page(p) if p > page => Ok(Step::Next(p)),
        NextPage::Page(_) => Err("x-next-page does not move forward"),
        NextPage::Unknown if items >= PER_PAGE => page
            .checked_add(1)
            .map(Step::Next)
            .ok_or("the page number overflows"),
        NextPage::Unknown => Ok(Step::Done),
    }
}

impl Gitlab {
    /// Reads a paged list: `path` (with or without a query, never `page` or `per_page`)
    /// asked with `per_page=100` and `page=1, 2, ...` to the end. A list that goes on past
    /// `max_pages` pages or `max_items` items is [`GitlabError::TooManyPages`], never cut
    /// silently; a last page holding more than asked is cut to `max_items`.
    pub(super) async fn walk<T>(
        &self,
        call: &'static str,
        path: &str,
        max_pages: usize,
        max_items: usize,
        items: impl Fn(&'static str, &Bytes) -> Result<Vec<T>, GitlabError>,
    ) -> Result<Vec<T>, GitlabError> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut all = Vec::new();
        let mut page: u32 = 1;
        for read in 1..=max_pages {
            let answer = self
                .send(
                    call,
                    &format!("{path}{separator}per_page={PER_PAGE}&page={page}"),
                    &Outgoing::READ,
                )
                .await?;
            let these = items(call, &answer.body)?;
            let count = these.len();
            all.extend(these);
            let next =
                step(page, count, answer.next_page()).map_err(|reason| GitlabError::Decode {
                    call,
                    reason: reason.into(),
                })?;
            match next {
                Step::Done => break,
                Step::Next(_) if read == max_pages || all.len() >= max_items => {
                    return Err(GitlabError::TooManyPages {
                        call,
                        limit: max_pages,
                    });
                }
                Step::Next(next) => page = next,
            }
        }
        all.truncate(max_items);
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_next_page_header_decides() {
        assert_eq!(step(1, 100, NextPage::Page(2)), Ok(Step::Next(2)));
        assert_eq!(step(1, 100, NextPage::Last), Ok(Step::Done));
        assert_eq!(step(3, 7, NextPage::Last), Ok(Step::Done));
        // GitLab may skip ahead; it never goes back.
        assert_eq!(step(1, 100, NextPage::Page(5)), Ok(Step::Next(5)));
        assert!(step(2, 100, NextPage::Page(2)).is_err());
        assert!(step(2, 100, NextPage::Page(1)).is_err());
    }

    #[test]
    fn without_the_header_a_full_page_asks_for_more() {
        assert_eq!(step(1, PER_PAGE, NextPage::Unknown), Ok(Step::Next(2)));
        assert_eq!(step(1, PER_PAGE - 1, NextPage::Unknown), Ok(Step::Done));
        assert!(step(u32::MAX, PER_PAGE, NextPage::Unknown).is_err());
    }

    #[test]
    fn an_empty_page_ends_the_list() {
        assert_eq!(step(4, 0, NextPage::Page(5)), Ok(Step::Done));
    }

    proptest! {
        #[test]
        fn a_walk_only_moves_forward(page in 1u32..10_000, items in 0usize..200, next in proptest::option::of(0u32..20_000), last in any::<bool>()) {
            let next = match (next, last) {
                (_, true) => NextPage::Last,
                (Some(p), false) if p > 0 => NextPage::Page(p),
                _ => NextPage::Unknown,
            };
            if let Ok(Step::Next(p)) = step(page, items, next) {
                prop_assert!(p > page);
            }
        }
    }
}
