// `#/audit/<org>`: an organisation's audit trail, newest first, filtered by actor, action
// and target, with "Verify chain": the browser recomputes the hash chain from the bytes the
// API returns (each entry as stored, with its seal), as `sortie audit verify` does, and
// names the first broken link. Owners of the organisation read it (the API is the judge).
import { html, useState } from '../vendor/preact-htm-standalone.js';
import { api } from '../api.js';
import * as endpoints from '../endpoints.js';
import { t, ErrorBanner, Time, useLoad, groupHref } from '../ui.js';

/** `#/audit/<org>` (`-`: the root group's configuration). */
export function auditHref(org) {
  return `#/audit/${encodeURIComponent(org || '-')}`;
}

/** `list_audit` of `org` (`-`: the root group), with `params` as its query. */
export function auditPath(org, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return endpoints.list_audit(org || '-') + (qs ? `?${qs}` : '');
}

/** Lower-case hex SHA-256 of `text`'s UTF-8 bytes. */
export async function sha256hex(text) {
  const bytes = new TextEncoder().encode(text);
  const digest = await globalThis.crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Recomputes `org`'s chain over `links` (`{stored, seal}`, any order) and `head` (the last
 * seal the API reported): `{ok: true, entries, head}` or `{ok: false, problem}` naming the
 * first broken link, in the words of `sortie audit verify` (sortie_core::audit::verify).
 */
export async function verifyChain(org, links, head) {
  const sorted = [...links].sort((a, b) => a.seal.seq - b.seal.seq);
  let hash = await sha256hex(`sortie-audit:${org}`);
  let expected = 1;
  for (const l of sorted) {
    if (l.seal.seq !== expected) {
      return { ok: false, problem: `entries ${expected} to ${l.seal.seq - 1} are missing` };
    }
    const digest = await sha256hex(l.stored);
    if (digest !== l.seal.digest) {
      let id = null;
      try { id = JSON.parse(l.stored).id ?? null; } catch { id = null; }
      return { ok: false, problem: `entry ${l.seal.seq} (${id ?? 'no longer readable'}) was edited after it was sealed` };
    }
    hash = await sha256hex(`${hash}\n${digest}`);
    if (hash !== l.seal.hash) {
      return { ok: false, problem: `the chain breaks at entry ${l.seal.seq}: an entry was removed or reordered, or its seal edited` };
    }
    expected += 1;
  }
  const entries = expected - 1;
  if (head && (head.seq !== entries || head.hash !== hash)) {
    return { ok: false, problem: `the chain ends at entry ${entries} but its head is entry ${head.seq}: entries were removed from its end` };
  }
  return { ok: true, entries, head: hash };
}

/** Every page of `org`'s trail, oldest first (at most `pages` pages of 1,000). */
async function wholeChain(org, pages = 200) {
  const links = [];
  let unsealed = 0;
  let head = null;
  let cursor = null;
  for (let i = 0; i < pages; i += 1) {
    const page = await api('GET', auditPath(org, { order: 'oldest', limit: 1000, cursor }));
    if (i === 0) head = page.head ?? null;
    for (const r of page.entries) {
      if (r.seal) links.push({ stored: r.stored, seal: r.seal });
      else unsealed += 1;
    }
    cursor = page.next ?? null;
    if (!cursor) return { links, unsealed, head };
  }
  throw new Error(`the chain of ${org} is longer than ${pages} pages`);
}

function Verify({ org }) {
  const [state, setState] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    setState(null);
    try {
      const { links, unsealed, head } = await wholeChain(org);
      setState({ ...(await verifyChain(org, links, head)), unsealed });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="actions">
    <button type="button" data-test="audit-verify" disabled=${busy} onClick=${run}>${busy ? 'Verifying…' : 'Verify chain'}</button>
    <${ErrorBanner} error=${error} />
    ${state && state.ok && html`<p data-test="audit-verified" data-ok="true" role="status">The chain verifies: ${state.entries} sealed entries, head <code>${state.head.slice(0, 16)}…</code>${state.unsealed ? `; ${state.unsealed} newer entries are not sealed yet` : ''}.</p>`}
    ${state && !state.ok && html`<p data-test="audit-verified" data-ok="false" class="badge-bad" role="alert">The chain is broken: ${t(state.problem)}.</p>`}
  </div>`;
}

function Entry({ r }) {
  const e = r.entry;
  if (!e) {
    return html`<tr data-test="audit-entry"><td colspan="6" class="muted">An entry that no longer reads as one (seal ${r.seal ? r.seal.seq : 'none'}).</td></tr>`;
  }
  return html`<tr data-test="audit-entry" data-id=${e.id} data-action=${e.action}>
    <td><${Time} value=${e.at} /></td>
    <td>${t(e.actor.subject)} <span class="badge">${t(e.actor.credential)}</span></td>
    <td><code>${t(e.action)}</code></td>
    <td><code>${t(e.target)}</code></td>
    <td>${r.seal ? html`<span data-test="audit-seq">#${r.seal.seq}</span>` : html`<span class="muted">unsealed</span>`}</td>
    <td class="muted">${t(e.source_ip ?? '')} ${t(e.request_id)}</td>
  </tr>`;
}

/** `#/audit/<org>`: the trail, its filters (kept in the address) and its verification. */
export function AuditPage({ org, params }) {
  const filters = { actor: params.get('actor') ?? '', action: params.get('action') ?? '', target: params.get('target') ?? '' };
  const [cursor, setCursor] = useState(null);
  const [earlier, setEarlier] = useState([]);
  const page = useLoad(() => api('GET', auditPath(org, { ...filters, limit: 50, cursor })), [org, params.toString(), cursor]);
  const rows = [...earlier, ...((page.data && page.data.entries) || [])];
  const submit = (ev) => {
    ev.preventDefault();
    const form = new FormData(ev.target);
    const q = new URLSearchParams();
    for (const k of ['actor', 'action', 'target']) {
      const v = String(form.get(k) ?? '').trim();
      if (v) q.set(k, v);
    }
    setEarlier([]);
    setCursor(null);
    location.hash = `${auditHref(org)}${q.toString() ? `?${q}` : ''}`;
  };
  const more = () => {
    setEarlier(rows);
    setCursor(page.data.next);
  };
  return html`<main class="page audit-page" data-test="audit-page" data-org=${org} data-loaded=${page.loading ? undefined : 'true'}>
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Environments</a> / <a href=${groupHref(org === '-' ? '' : org)}>${t(org === '-' ? '(root group)' : org)}</a> /</nav>
    <div class="page-head"><h1>Audit trail of ${t(org === '-' ? 'the root group' : org)}</h1></div>
    <section class="card wide" aria-labelledby="audit-h">
      <h2 id="audit-h" class="visually-hidden">Entries</h2>
      <form class="filters" data-test="audit-filters" onSubmit=${submit}>
        <label>Actor <input name="actor" data-test="audit-actor" value=${filters.actor} /></label>
        <label>Action <input name="action" data-test="audit-action" value=${filters.action} placeholder="create_runner" /></label>
        <label>Target starts with <input name="target" data-test="audit-target" value=${filters.target} placeholder="/v1/groups/" /></label>
        <button type="submit">Filter</button>
      </form>
      <${Verify} org=${org} />
      <${ErrorBanner} error=${page.error} />
      ${!page.loading && !page.error && rows.length === 0 && html`<p class="muted" data-test="audit-none">No entries match.</p>`}
      ${rows.length > 0 && html`<table class="table">
        <caption class="visually-hidden">Audit entries, newest first</caption>
        <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Seal</th><th scope="col">Request</th></tr></thead>
        <tbody>${rows.map((r) => html`<${Entry} r=${r} />`)}</tbody>
      </table>`}
      ${page.data && page.data.next && html`<button type="button" data-test="audit-more" onClick=${more}>Older entries</button>`}
    </section>
  </main>`;
}
