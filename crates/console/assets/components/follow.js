// When the job page reads its log next, and whether it says "following": pure rules, from
// the job's state word (crates/core/src/job/state.rs) and the last page read. Only
// `running` means a runner is running a phase (plan, apply, or a reviewed job's apply
// phase); `queued` and `dispatching` wait for one, `awaiting_approval` waits for a person.

/** The pause between reads while a runner runs a phase. */
export const POLL_MS = 500;
/** The pause while the job waits for a runner (`queued`, `dispatching`): nothing is written. */
export const WAITING_MS = 2000;
/** The pause while the page is hidden: past the follow window (20 s, `protocol::logs`). */
export const HIDDEN_MS = 30000;
/** A page at least this big is followed by the next at once. */
export const BIG_PAGE = 1024 * 1024;

/** True when a runner is running one of the job's phases: the log may grow any moment. */
export const runnerRunning = (state) => state === "running";

/** `[data-test=log-following]` shows only while the log is read live and a runner runs. */
export const isFollowing = (state, live) => Boolean(live) && runnerRunning(state);

/**
 * The pause before the next read of the log, in ms, or `null` for "do not read again
 * until the job's state changes" (the page wakes the reader then).
 *
 * - `more` false: the log is complete (the job ended): `null`, for good.
 * - `awaiting_approval` and the page was empty: `null`; the plan's log is complete and
 *   nothing runs until a person decides (the decision changes the state, which wakes it).
 * - a page of `BIG_PAGE` or more: 0 (read on at once).
 * - `queued`/`dispatching` and the page was empty: `WAITING_MS`.
 * - otherwise (running, or a state not known here): `POLL_MS`.
 * A hidden page waits at least `HIDDEN_MS`.
 */
export function nextRead({ state, more, bytes, hidden }) {
  if (!more) return null;
  if (bytes === 0 && state === "awaiting_approval") return null;
  let ms = POLL_MS;
  if (bytes >= BIG_PAGE) ms = 0;
  else if (bytes === 0 && (state === "queued" || state === "dispatching")) ms = WAITING_MS;
  return hidden ? Math.max(ms, HIDDEN_MS) : ms;
}
