//! A job's transition history: repeats folded, a long one cut in the middle.

use super::Transition;

/// A long history keeps this many of its first entries.
pub const HISTORY_KEEP_FIRST: usize = 8;
/// A long history keeps this many of its last entries.
pub const HISTORY_KEEP_LAST: usize = 32;
/// The most entries a job's history holds.
pub const HISTORY_MAX: usize = HISTORY_KEEP_FIRST + HISTORY_KEEP_LAST;

/// How one transition changes a stored history (what a store must write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryEdit {
    /// Append it: nothing folds, nothing is dropped.
    Append,
    /// Anything else (a fold, a drop): write the whole new history.
    Rewrite,
}

/// Records `t` on `history`: folded into the last entry when it is the same transition;
/// folded into the one before and moved to the end when that one is the same (a claim and
/// a refusal that alternate stay two entries); else appended. A history then longer than
/// [`HISTORY_MAX`] loses entries after its first [`HISTORY_KEEP_FIRST`], the transitions
/// they held added to `dropped`. Returns whether a plain append was enough.
pub fn record_transition(
    history: &mut Vec<Transition>,
    dropped: &mut u32,
    t: Transition,
) -> HistoryEdit {
    let n = history.len();
    let fold = |e: &mut Transition, t: &Transition| {
        e.count = e.count.saturating_add(t.count);
        e.last_at = Some(t.latest_at());
    };
    if let Some(last) = history.last_mut() {
        if last.same_as(&t) {
            fold(last, &t);
            return HistoryEdit::Rewrite;
        }
    }
    if n >= 2 && history[n - 2].same_as(&t) {
        let mut e = history.remove(n - 2);
        fold(&mut e, &t);
        history.push(e);
        return HistoryEdit::Rewrite;
    }
    history.push(t);
    let mut edit = HistoryEdit::Append;
    while history.len() > HISTORY_MAX {
        let gone = history.remove(HISTORY_KEEP_FIRST);
        *dropped = dropped.saturating_add(gone.count);
        edit = HistoryEdit::Rewrite;
    }
    edit
}
