// The tree of groups and environments of the organisations the viewer looks at: each
// environment's runner, last job and state, drift verdict, lock and approval wait; a
// search box (client-side) and the "awaiting my approval" filter.
import { html, useState, useEffect } from '../vendor/preact-htm-standalone.js';
import { api, query, pool } from '../api.js';
import * as endpoints from '../endpoints.js';
import { whoami } from '../auth.js';
import {
  t, words, ErrorBanner, StateWord, Ticked, envHref, groupHref, jobHref, orgOf, orgHref, orgChoice, orgPicker, valueText, mayDecide,
} from '../ui.js';

const ORGS_KEY = 'sortie.orgs';
/** Environments whose last job is read; past this many, the tree says so. */
const DETAIL_MAX = 300;
/** Calls in flight at once while reading last jobs. */
const PARALLEL = 6;
/** At most this many organisations are remembered and shown. */
const ORGS_MAX = 10;
/** How long a loaded organisation is reused (moving between tree views) before it is read again (ms). */
const FRESH_MS = 2000;

const cache = new Map();
// Another viewer may sign in next: nothing read for this one is reused.
if (typeof window !== 'undefined') window.addEventListener('sortie:auth', () => cache.clear());

function rememberedOrgs() {
  try {
    const list = JSON.parse(sessionStorage.getItem(ORGS_KEY) || '[]');
    return Array.isArray(list) ? list.filter((o) => typeof o === 'string' && o) : [];
  } catch (_) {
    return [];
  }
}

function remember(orgs) {
  const all = [...new Set([...orgs, ...rememberedOrgs()])].slice(0, ORGS_MAX);
  sessionStorage.setItem(ORGS_KEY, JSON.stringify(all));
}

/** Reads one organisation: the viewer's roles there, its environments and each one's jobs. */
async function loadOrg(org) {
  const hit = cache.get(org);
  if (hit && Date.now() - hit.at < FRESH_MS) return hit.promise;
  const promise = (async () => {
    const me = await whoami(org);
    const list = await api('GET', endpoints.list_environments(endpoints.group(org)) + query({ recursive: 'true' }));
    const envs = (list.environments || []).slice().sort((a, b) => String(a.path).localeCompare(String(b.path)));
    const detailed = envs.slice(0, DETAIL_MAX);
    const details = await pool(detailed, PARALLEL, async (env) => {
      const page = await api('GET', endpoints.list_jobs(env.path) + query({ limit: 1 }));
      const last = (page.jobs || [])[0] || null;
      let active = null;
      if (env.active_job) {
        active = last && last.id === env.active_job ? last : await api('GET', endpoints.get_job(env.active_job));
      }
      return { last, active };
    });
    const rows = envs.map((env, i) => ({ env, ...(details[i] && details[i].ok ? details[i].value : {}), failed: details[i] && !details[i].ok ? details[i].error : null }));
    return { org, me, rows, truncated: !!list.truncated, undetailed: Math.max(envs.length - DETAIL_MAX, 0) };
  })();
  cache.set(org, { at: Date.now(), promise });
  promise.catch(() => cache.delete(org));
  return promise;
}

function matches(row, needle) {
  if (!needle) return true;
  const e = row.env;
  const hay = [
    e.path, e.env_type, e.runner && e.runner.runner_id,
    ...Object.entries(e.labels || {}).map(([k, v]) => `${k}=${v}`),
    ...(e.tags || []),
    row.last && row.last.state,
    row.last && words(row.last.state),
    e.drift && e.drift.status,
    e.drift && words(e.drift.status),
  ].map((x) => String(x ?? '').toLowerCase());
  return hay.some((h) => h.includes(needle));
}

function EnvRow({ row, me }) {
  const { env, last, active, failed } = row;
  const awaiting = active && active.state === 'awaiting_approval' ? active : null;
  return html`<li class="tree-env" data-test="tree-env" data-path=${env.path}>
    <a class="env-name" data-test="env-link" href=${envHref(env.path)}>${t(env.name ?? env.path)}</a>
    <span class="env-type muted">${t(env.env_type ?? '')}</span>
    <span class="cell" title="runner"><span class="label">runner</span> <span data-test="env-runner">${t(env.runner ? env.runner.runner_id : '')}</span></span>
    <span class="cell"><span class="label">last job</span>${' '}
      ${last
        ? html`<a href=${jobHref(last.id)}><${StateWord} state=${last.state} test="env-last-job" /></a> <span class="muted">${t(last.operation ?? '')}</span>`
        : html`<span data-test="env-last-job" class="muted">${failed ? 'not read' : row.last === undefined ? 'not loaded' : 'no jobs'}</span>`}
    </span>
    <span class="cell"><span class="label">drift</span>${' '}
      <span data-test="env-drift" class=${`drift drift-${env.drift ? String(env.drift.status).replace(/[^a-z_]/g, '') : 'none'}`}>${env.drift ? words(env.drift.status) : env.drift_schedule ? 'not checked yet' : 'not scheduled'}</span>
    </span>
    ${env.lock && html`<span class="badge badge-locked" data-test="env-locked" title=${`${valueText(env.lock.by)}: ${valueText(env.lock.reason)}`}>locked</span>`}
    ${awaiting && html`<a class=${`badge badge-awaiting${mayDecide(awaiting, me, env.group) ? ' badge-mine' : ''}`} data-test="env-awaiting" href=${jobHref(awaiting.id)}>awaiting approval</a>`}
  </li>`;
}

/** The group nodes: every environment's group and its ancestors up to the organisation, and the viewer's membership groups there. */
function groupTree(org, rows, me) {
  const groups = new Set([org]);
  const add = (g) => {
    const parts = String(g).split('/');
    for (let i = 1; i <= parts.length && i <= 32; i++) groups.add(parts.slice(0, i).join('/'));
  };
  rows.forEach((r) => add(r.env.group));
  ((me && me.memberships) || []).forEach((m) => m.group && orgOf(m.group) === org && add(m.group));
  return [...groups].sort();
}

function GroupNode({ group, groups, rowsByGroup, me, depth }) {
  const children = groups.filter((g) => g.startsWith(`${group}/`) && !g.slice(group.length + 1).includes('/'));
  const envs = rowsByGroup.get(group) || [];
  return html`<li class="tree-group" data-test="tree-group" data-path=${group}>
    <a class="group-name" href=${groupHref(group)}>${t(group.split('/').pop())}/</a>
    ${(envs.length > 0 || children.length > 0) && depth < 32 && html`<ul class="tree-children">
      ${envs.map((row) => html`<${EnvRow} key=${row.env.path} row=${row} me=${me} />`)}
      ${children.map((g) => html`<${GroupNode} key=${g} group=${g} groups=${groups} rowsByGroup=${rowsByGroup} me=${me} depth=${depth + 1} />`)}
    </ul>`}
  </li>`;
}

function OrgTree({ data, needle, awaitingOnly }) {
  const me = data.me;
  const rows = data.rows.filter((r) => matches(r, needle)).filter((r) => !awaitingOnly || mayDecide(r.active, me, r.env.group));
  const rowsByGroup = new Map();
  rows.forEach((r) => {
    const g = String(r.env.group);
    if (!rowsByGroup.has(g)) rowsByGroup.set(g, []);
    rowsByGroup.get(g).push(r);
  });
  let groups = groupTree(data.org, rows, me);
  if (needle || awaitingOnly) {
    // Only the groups on the way to a shown environment, or whose path matches.
    const keep = new Set();
    groups.forEach((g) => {
      const hit = (needle && !awaitingOnly && g.toLowerCase().includes(needle)) || rowsByGroup.has(g);
      if (hit) g.split('/').forEach((_, i, parts) => keep.add(parts.slice(0, i + 1).join('/')));
    });
    groups = groups.filter((g) => keep.has(g));
  }
  const failed = data.rows.filter((r) => r.failed);
  return html`<section class="org card" aria-label=${`organisation ${data.org}`}>
    ${groups.length === 0
      ? html`<p class="muted">${awaitingOnly ? 'Nothing awaits your approval in ' : 'Nothing matches in '}<strong>${t(data.org)}</strong>.</p>`
      : html`<ul class="tree">
        <${GroupNode} group=${data.org} groups=${groups} rowsByGroup=${rowsByGroup} me=${me} depth=${0} />
      </ul>`}
    ${data.truncated && html`<p class="muted">The organisation holds more environments than one listing gives; only the first are shown.</p>`}
    ${data.undetailed > 0 && html`<p class="muted">${data.undetailed} environments beyond the first ${DETAIL_MAX} show no last job here: open them to see it.</p>`}
    ${failed.length > 0 && html`<p class="muted">The jobs of ${failed.length} environments could not be read: <${Ticked} text=${failed[0].failed.message ?? failed[0].failed} /></p>`}
  </section>`;
}

function setQuery(org, q, awaiting) {
  const s = query({ org, q, awaiting: awaiting ? '1' : '' });
  history.replaceState(null, '', `${location.pathname}${location.search}#/${s}`);
}

/**
 * `#/`: the tree, `?org=` (else the viewer's organisations from whoami's `organisations`:
 * one is opened, several are links; with none, those of its roles and those remembered, or
 * the form), `?q=`, `?awaiting=1`.
 */
export function TreePage({ params }) {
  const [needle, setNeedle] = useState(params.get('q') || '');
  const [awaitingOnly, setAwaitingOnly] = useState(params.get('awaiting') === '1');
  const [orgs, setOrgs] = useState(null);
  const [links, setLinks] = useState([]);
  const [ask, setAsk] = useState(false);
  const [known, setKnown] = useState(0);
  const [switching, setSwitching] = useState(false);
  const [orgInput, setOrgInput] = useState('');
  const [loaded, setLoaded] = useState([]);
  const [error, setError] = useState(null);
  const [done, setDone] = useState(false);
  const pinned = params.get('org') || '';

  useEffect(() => {
    let live = true;
    (async () => {
      try {
        const me = await whoami();
        const fromRoles = (me.memberships || []).map((m) => orgOf(m.group)).filter(Boolean);
        const choice = orgChoice({
          pinned, listed: me.organisations, fromRoles, remembered: rememberedOrgs(), max: ORGS_MAX,
        });
        const list = choice.open;
        if (live) {
          setOrgs(list);
          setLinks(choice.links);
          setAsk(choice.ask);
          setKnown(new Set([pinned, ...(me.organisations || []), ...fromRoles, ...rememberedOrgs()].filter(Boolean)).size);
        }
        const results = await pool(list, 3, loadOrg);
        if (!live) return;
        const ok = results.filter((r) => r.ok).map((r) => r.value);
        remember(ok.map((d) => d.org));
        setLoaded(ok);
        const bad = results.find((r) => !r.ok);
        setError(bad ? bad.error : null);
      } catch (e) {
        if (live) setError(e);
      } finally {
        if (live) setDone(true);
      }
    })();
    return () => {
      live = false;
    };
  }, [pinned]);
  useEffect(() => setSwitching(false), [pinned]);

  const onSearch = (e) => {
    setNeedle(e.currentTarget.value);
    setQuery(pinned, e.currentTarget.value, awaitingOnly);
  };
  const onAwaiting = (e) => {
    setAwaitingOnly(e.currentTarget.checked);
    setQuery(pinned, needle, e.currentTarget.checked);
  };
  const openOrg = (e) => {
    e.preventDefault();
    const o = orgInput.trim().replace(/^\/+|\/+$/g, '');
    if (o) location.hash = `#/${query({ org: o, q: needle, awaiting: awaitingOnly ? '1' : '' })}`;
  };
  const lowered = needle.trim().toLowerCase();
  const shown = orgPicker({ done, toOpen: orgs, opened: loaded.length, known, switching });
  return html`<main class="page tree-page" data-test="tree-page" data-loaded=${done ? 'true' : undefined}>
    <div class="page-head">
      <h1>Environments</h1>
      <div class="filters">
        <label class="search">
          <span class="visually-hidden">Search environments</span>
          <input type="search" data-test="search" placeholder="Search by path, type, runner, label, tag, state" value=${needle} onInput=${onSearch} />
        </label>
        <label class="check">
          <input type="checkbox" data-test="filter-awaiting" checked=${awaitingOnly} onChange=${onAwaiting} />
          ${' '}Awaiting my approval
        </label>
      </div>
    </div>
    <${ErrorBanner} error=${error} />
    ${shown.switchLink && html`<p class="org-switch"><a href="#/" data-test="org-switch" class="muted" onClick=${(e) => { e.preventDefault(); setSwitching(true); }}>switch organisation</a></p>`}
    ${shown.picker && html`<form class="org-form" onSubmit=${openOrg}>
      <label for="org-input">Organisation</label>
      <input id="org-input" data-test="org-input" placeholder=${pinned || 'acme'} value=${orgInput} onInput=${(e) => setOrgInput(e.currentTarget.value)} />
      <button type="submit" data-test="org-open">Open</button>
      ${pinned && html`<a href="#/" class="muted">all remembered organisations</a>`}
    </form>`}
    ${!done && html`<p class="muted" aria-live="polite">Loading…</p>`}
    ${shown.picker && links.length > 0 && html`<nav class="org-list card" aria-label="your organisations" data-test="org-list">
      <h2>Your organisations</h2>
      <ul>${links.map((o) => html`<li key=${o}><a data-test="org-link" data-org=${o} href=${orgHref(o)}>${t(o)}</a></li>`)}</ul>
    </nav>`}
    ${shown.picker && done && ask && html`<p class="banner banner-info" data-test="org-none">
      No organisation grants you a role by name, so there is none to open for you: name one above to see its groups and environments.
      Roles that come to you through a claim (a group claim, say) cannot be listed, since they name no one; the console remembers the organisations you open in this tab.</p>`}
    ${loaded.map((data) => html`<${OrgTree} key=${data.org} data=${data} needle=${lowered} awaitingOnly=${awaitingOnly} />`)}
  </main>`;
}
