// The live log (`GET /v1/jobs/{id}/logs?offset=N`), followed as `sortie job logs -f` does
// (crates/cli/src/follow/watch.rs): from `next_offset`, every 500 ms while a runner runs a
// phase, at once after a big page, stopping when `more` is false (the job ended). While the
// job awaits approval and its log is complete nothing is read until its state changes; while
// it waits for a runner the reads slow down (`follow.js`). Each read of a running job marks
// it followed, so its pilot ships every second; a hidden page reads every 30 s, past the
// follow window, so a forgotten tab lets the pilot slow down. Errors back off; the loop ends
// when the page is left.
import { html, Component, useEffect, useLayoutEffect, useRef, useState } from "../vendor/preact-htm-standalone.js";
import { api, query } from "../api.js";
import * as endpoints from "../endpoints.js";
import { ErrorBox } from "./common.js";
import { POLL_MS, isFollowing, nextRead } from "./follow.js";
import { LogBuffer, MAX_LINES } from "./logbuffer.js";

/** Failed reads in a row before following gives up. */
export const MAX_FAILURES = 8;
/** The longest pause after failures. */
const MAX_BACKOFF_MS = 30000;

function Line({ spans }) {
  return html`<div class="log-line" data-test="log-line">${spans.map((s) =>
    s.classes ? html`<span class=${s.classes}>${s.text}</span>` : s.text,
  )}</div>`;
}

const phase = () => html`<div class="log-phase" data-test="log-phase" role="separator">apply phase (the approved plan)</div>`;

/**
 * A block of lines: renders again only when its lines grew or the apply phase's offset
 * (`phaseAt`, -1 when none) became known; the separator goes before the phase's first line.
 */
class Block extends Component {
  shouldComponentUpdate(next) {
    const p = this.props;
    return next.lines !== p.lines || next.n !== p.n || next.phaseAt !== p.phaseAt;
  }
  render({ lines, prevAt, phaseAt }) {
    return html`<div class="log-block">${lines.map((line, i) => {
      const before = i > 0 ? lines[i - 1].at : prevAt;
      const starts = phaseAt >= 0 && line.at >= phaseAt && before < phaseAt;
      return starts ? [phase(), html`<${Line} spans=${line.spans} />`] : html`<${Line} spans=${line.spans} />`;
    })}</div>`;
  }
}

/**
 * `[data-test=log]` for job `id`; `state` is the job's state as the page last read it,
 * `applyAt` a reviewed job's `apply_log_offset` (where its apply phase's lines start).
 */
export function Log({ id, state, applyAt }) {
  const buf = useRef(null);
  if (buf.current === null) buf.current = new LogBuffer(MAX_LINES);
  const box = useRef(null);
  const atBottom = useRef(true);
  const stateRef = useRef(state);
  const wake = useRef(null);
  const [version, setVersion] = useState(0);
  // `live`: the reader still reads (the log is not complete, reading has not failed for good).
  const [live, setLive] = useState(true);
  const [error, setError] = useState(null);

  useEffect(() => {
    stateRef.current = state;
    if (wake.current) wake.current();
  }, [state]);

  useEffect(() => {
    const b = new LogBuffer(MAX_LINES);
    buf.current = b;
    let stopped = false;
    let timer = null;
    let reading = false;
    let done = false;
    let offset = 0;
    let failures = 0;
    setLive(true);
    const schedule = (ms) => {
      if (!stopped) timer = setTimeout(tick, ms);
    };
    async function tick() {
      timer = null;
      reading = true;
      try {
        const page = await api("GET", endpoints.get_job_logs(id) + query({ offset }));
        if (stopped) return;
        failures = 0;
        setError(null);
        const data = typeof page.data === "string" ? page.data : "";
        if (data) b.push(data);
        if (Number.isFinite(page.next_offset) && page.next_offset >= offset) offset = page.next_offset;
        if (!page.more) {
          b.end();
          done = true;
          setVersion((v) => v + 1);
          setLive(false);
          return;
        }
        if (data) setVersion((v) => v + 1);
        // `null`: awaiting approval with the log complete; the state's change wakes it.
        const ms = nextRead({ state: stateRef.current, more: true, bytes: data.length, hidden: document.hidden });
        if (ms !== null) schedule(ms);
      } catch (e) {
        if (stopped) return;
        failures += 1;
        setError(e);
        const lasting = e && e.status >= 400 && e.status < 500 && e.status !== 429;
        if (lasting || failures >= MAX_FAILURES) {
          done = true;
          setLive(false);
          return;
        }
        schedule(Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** failures));
      } finally {
        reading = false;
      }
    }
    // Read now: the state changed or the page came back into view. A read in flight
    // schedules its successor from the new state itself.
    wake.current = () => {
      if (stopped || done || reading) return;
      if (timer !== null) clearTimeout(timer);
      schedule(0);
    };
    const onVisible = () => !document.hidden && wake.current && wake.current();
    document.addEventListener("visibilitychange", onVisible);
    schedule(0);
    return () => {
      stopped = true;
      wake.current = null;
      document.removeEventListener("visibilitychange", onVisible);
      if (timer !== null) clearTimeout(timer);
    };
  }, [id]);

  const following = isFollowing(state, live);

  useLayoutEffect(() => {
    const el = box.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [version]);

  const onScroll = () => {
    const el = box.current;
    if (el) atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 8;
  };
  const jumpEnd = () => {
    const el = box.current;
    atBottom.current = true;
    if (el) el.scrollTop = el.scrollHeight;
  };

  const b = buf.current;
  return html`<section class="card job-section log-section" data-test="log-section">
    <div class="log-toolbar">
      <h2>Log</h2>
      ${following ? html`<span class="log-following" data-test="log-following">following</span>` : null}
      <button type="button" class="log-jump" data-test="log-jump-end" onClick=${jumpEnd}>Jump to end</button>
    </div>
    <${ErrorBox} error=${error} />
    ${b.dropped > 0
      ? html`<p class="muted" data-test="log-truncated">The first ${b.dropped} lines are not shown: only the last ${MAX_LINES} are kept here.</p>`
      : null}
    <div class="log" data-test="log" ref=${box} onScroll=${onScroll} tabindex="0" role="log" aria-label="Job log">
      ${b.blocks.map(
        (bl) => html`<${Block} key=${bl.id} lines=${bl.lines} n=${bl.lines.length} prevAt=${bl.prevAt}
          phaseAt=${Number.isFinite(applyAt) ? applyAt : -1} />`,
      )}
      ${b.pendingSpans ? html`<${Line} spans=${b.pendingSpans} />` : null}
      ${b.count === 0 && !b.pendingSpans ? html`<div class="log-empty muted">No log lines yet.</div>` : null}
    </div>
  </section>`;
}
