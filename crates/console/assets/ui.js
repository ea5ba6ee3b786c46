// Small shared pieces of the console's pages: links, times, values and the error banner.
// Everything here renders API data as text children or attributes, never as HTML.
import { html, useEffect, useState, useRef } from './vendor/preact-htm-standalone.js';

/** `#/env/<path>`: each segment of the environment path encoded, slashes kept. */
export function envHref(path) {
  return `#/env/${String(path).split('/').map(encodeURIComponent).join('/')}`;
}

/** `#/groups/<path>`: each segment encoded, slashes kept; the root group is `-`. */
export function groupHref(path) {
  return path ? `#/groups/${String(path).split('/').map(encodeURIComponent).join('/')}` : '#/groups/-';
}

/** `#/jobs/<id>`. */
export function jobHref(id) {
  return `#/jobs/${encodeURIComponent(String(id))}`;
}

/** A class-safe token from an API word (`awaiting_approval` -> `awaiting_approval`). */
export function cls(word) {
  return String(word ?? '').toLowerCase().replace(/[^a-z0-9_-]/g, '');
}

/** An RFC 3339 time as `YYYY-MM-DD HH:MM:SS UTC` (the raw text when it does not parse). */
export function fmtTime(text) {
  if (!text) return '';
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) return String(text);
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How long ago, in words (`5 min ago`). */
export function ago(text) {
  const d = new Date(text);
  if (!text || Number.isNaN(d.getTime())) return '';
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** A time element: readable text, the exact value as its datetime. */
export function Time({ value }) {
  if (!value) return html`<span class="muted">never</span>`;
  return html`<time datetime=${String(value)} title=${ago(value)}>${fmtTime(value)}</time>`;
}

/**
 * An API string as display text: C0 control characters (ESC of an ANSI sequence, NUL, ...)
 * and DEL become their visible Control Pictures (ESC -> U+241B), so no escape reaches the
 * page raw; tab and newline stay.
 */
export function t(v) {
  if (v === null || v === undefined) return '';
  return String(v).replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => (c === '\u007f' ? '\u2421' : String.fromCharCode(0x2400 + c.charCodeAt(0))));
}

/** Any JSON value as text: strings as they are, the rest as compact JSON. */
export function valueText(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return t(v);
  try {
    return t(JSON.stringify(v));
  } catch (_) {
    return t(v);
  }
}

/** An API word in words: `awaiting_approval` -> `awaiting approval` (as text). */
export function words(word) {
  return t(word ?? '').replace(/_/g, ' ');
}

/** A job state in words, with a class for its colour and the exact word as `data-state`. */
export function StateWord({ state, test }) {
  return html`<span class=${`state state-${cls(state)}`} data-test=${test} data-state=${String(state ?? '')}>${words(state)}</span>`;
}

/** RFC 3339 times (`2026-11-29T12:10:38.5Z`) inside an API sentence. */
const RFC3339 = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})/g;

/** An API sentence with its RFC 3339 times in the console's one format (`fmtTime`). */
export function timesIn(sentence) {
  return String(sentence ?? '').replace(RFC3339, (m) => fmtTime(m));
}

/** The error banner: the API's message and the fields at fault, as text. */
export function ErrorBanner({ error, onDismiss }) {
  if (!error) return null;
  const fields = Array.isArray(error.fields) ? error.fields : [];
  return html`<div class="banner banner-error" data-test="error" role="alert">
    <p class="banner-message"><${Ticked} text=${error.message ?? error} /></p>
    ${fields.length > 0 && html`<ul class="banner-fields">
      ${fields.map((f) => html`<li><code class="field-name">${t(f.field)}</code>${' '}<span><${Ticked} text=${f.problem} /></span></li>`)}
    </ul>`}
    ${onDismiss && html`<button type="button" class="link-button" onClick=${onDismiss}>Dismiss</button>`}
  </div>`;
}

/**
 * Loads `load()` once per change of `deps`: answers {data, error, loading, reload}.
 * A reply to an old request never overwrites a newer one.
 */
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const seq = useRef(0);
  const run = () => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    Promise.resolve()
      .then(load)
      .then(
        (data) => mine === seq.current && setState({ data, error: null, loading: false }),
        (error) => mine === seq.current && setState({ data: null, error, loading: false }),
      );
  };
  useEffect(run, deps);
  return { ...state, reload: run };
}

/** The highest role among `memberships` that hold on `group` (granted on it or above). */
export function roleOn(memberships, group) {
  const order = ['viewer', 'deployer', 'maintainer', 'owner'];
  let best = -1;
  for (const m of memberships || []) {
    const g = String(m.group ?? '');
    const holds = g === '' || group === g || String(group).startsWith(`${g}/`);
    if (holds) best = Math.max(best, order.indexOf(m.role));
  }
  return best < 0 ? null : order[best];
}

/** True when `role` is at least `least` (viewer < deployer < maintainer < owner). */
export function atLeast(role, least) {
  const order = ['viewer', 'deployer', 'maintainer', 'owner'];
  return role !== null && order.indexOf(role) >= order.indexOf(least);
}

/** The least role each API action needs (crates/core/src/auth.rs `Action::required_role`). */
export const ACTION_ROLE = { read: 'viewer', deploy: 'deployer', manage: 'maintainer', administer: 'owner' };

/** Managing what a group holds: `administer` at the root group, `manage` below (crates/api `manage_action`). */
export function manageAction(group) {
  return group ? 'manage' : 'administer';
}

/** True when `memberships` allow `action` (`read`, `deploy`, `manage`, `administer`) on `group`. */
export function may(memberships, action, group) {
  return atLeast(roleOn(memberships, group), ACTION_ROLE[action] ?? 'owner');
}

/** A job's change summary: its own, else its plan phase's; null when it has none. */
export function jobSummary(job) {
  return (job && (job.summary || (job.plan_phase && job.plan_phase.summary))) || null;
}

/** A change summary as `+1 ~0 -2`; '' for none. */
export function countsLine(summary) {
  if (!summary) return '';
  const n = (v) => (Number.isFinite(Number(v)) ? Number(v) : 0);
  return `+${n(summary.add)} ~${n(summary.change)} -${n(summary.destroy)}`;
}

/** Why a failed or timed-out job ended: the reason of the transition into its state; '' otherwise. */
export function failureReason(job) {
  if (!job || (job.state !== 'failed' && job.state !== 'timed_out')) return '';
  const into = (job.transitions || []).filter((tr) => tr && tr.to === job.state);
  return into.length ? String(into[into.length - 1].reason ?? '') : '';
}

/** `text` cut to `max` characters, marked with `…` when cut. */
export function clip(text, max) {
  const s = String(text ?? '');
  return s.length > max ? `${s.slice(0, Math.max(max - 1, 0))}…` : s;
}

/** The organisation of a group or environment path: its first segment. */
export function orgOf(path) {
  return String(path || '').split('/')[0] || '';
}

/** `#/?org=<org>`: the tree of one organisation. */
export function orgHref(org) {
  return `#/?org=${encodeURIComponent(String(org))}`;
}

/**
 * Which organisations the tree opens, and which it lists as links, when the viewer signs in.
 * `pinned` is `?org=`; `listed` is whoami's `organisations` (granted to the viewer by
 * subject); `fromRoles` the organisations of whoami's non-root memberships; `remembered`
 * those opened before in this tab. A pinned org is opened alone; one listed org is opened;
 * several are links (with the remembered ones opened); none falls back to the roles and the
 * remembered, and `ask` says the viewer must name one. At most `max` are opened.
 */
export function orgChoice({ pinned = '', listed = [], fromRoles = [], remembered = [], max = 10 }) {
  const clean = (list) => [...new Set((Array.isArray(list) ? list : []).filter((o) => typeof o === 'string' && o))];
  if (pinned) return { open: [pinned], links: [], ask: false };
  const names = clean(listed);
  if (names.length === 1) return { open: names, links: [], ask: false };
  if (names.length > 1) return { open: clean(remembered).slice(0, max), links: names, ask: false };
  const open = clean([...fromRoles, ...remembered]).slice(0, max);
  return { open, links: [], ask: open.length === 0 };
}

/**
 * What the tree shows of its organisation picker (the Open form and the list of the viewer's
 * organisations): `picker` only while no organisation is open (or the viewer asked to switch),
 * `switchLink` (a small "switch organisation" link back to it) when one is open and the viewer
 * knows of several. `toOpen`: the organisations being opened (null until whoami answered);
 * `opened`: how many loaded; `known`: how many distinct organisations the viewer knows of.
 */
export function orgPicker({ done = false, toOpen = null, opened = 0, known = 0, switching = false }) {
  const undecided = !done && toOpen === null;
  const open = done ? opened > 0 : Array.isArray(toOpen) && toOpen.length > 0;
  return { picker: switching || (!open && !undecided), switchLink: open && !switching && known > 1 };
}

function decodeSegments(rest) {
  return rest
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch (_) {
        return s;
      }
    })
    .join('/');
}

/** The route of a location hash: {name, ...params}. */
export function parseRoute(hash) {
  const raw = String(hash || '').replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  if (path === '/' || path === '') return { name: 'tree', params };
  if (path === '/signin') return { name: 'signin', params };
  if (path.startsWith('/env/')) return { name: 'env', path: decodeSegments(path.slice(5)), params };
  if (path.startsWith('/jobs/')) return { name: 'job', id: decodeSegments(path.slice(6)), params };
  if (path.startsWith('/audit/')) return { name: 'audit', org: decodeSegments(path.slice(7)) || '-', params };
  if (path === '/groups' || path.startsWith('/groups/')) {
    const g = decodeSegments(path.slice(8));
    return { name: 'group', path: g === '-' ? '' : g, params };
  }
  return { name: 'missing', params };
}

/** True when the viewer may decide `job`: it awaits approval, the viewer deploys there, and four eyes do not forbid it. */
export function mayDecide(job, me, group) {
  if (!job || job.state !== 'awaiting_approval' || !me) return false;
  if (!atLeast(roleOn(me.memberships, group), 'deployer')) return false;
  return !(job.review && job.review.four_eyes && job.requested_by === me.subject);
}

/**
 * A sentence of the API with `backticked` names split out: `[{text, code}]`, `code` true for
 * the names (shown as `<code>`, as text); an unpaired backtick stays text.
 */
export function tickSplit(sentence) {
  const parts = String(sentence ?? '').split('`');
  if (parts.length % 2 === 0) return [{ text: String(sentence ?? ''), code: false }];
  return parts.map((text, i) => ({ text, code: i % 2 === 1 })).filter((p) => p.text !== '');
}

/** `text` with its `backticked` names as `<code>` (all as text, never markup), its RFC 3339 times in the console's format (`timesIn`). */
export const Ticked = ({ text }) => tickSplit(timesIn(text)).map((p) => (p.code ? html`<code>${t(p.text)}</code>` : t(p.text)));
