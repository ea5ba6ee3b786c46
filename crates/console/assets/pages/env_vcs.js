// The environment page's "Pull requests" card: its `vcs` binding (crates/core/src/vcs/binding.rs)
// in words, and for a maintainer (PATCH /v1/environments/{path} needs `manage`) a form that
// sets it or removes it, sent with If-Match of the version the page read. A 400 shows the
// API's problem next to the field it names (`vcs.repository` -> the repository input); a
// 409/412 says the environment changed meanwhile and reloads it.
import { html, useState, useEffect, useRef } from '../vendor/preact-htm-standalone.js';
import { api, ApiError } from '../api.js';
import * as endpoints from '../endpoints.js';
import { t, ErrorBanner, Ticked } from '../ui.js';

/** The words of each `apply` mode. */
export const APPLY_WORDS = {
  after_merge: 'after merge',
  before_merge: 'with /sortie apply before merge',
  none: 'never: plans only',
};

const DEFAULT_GLOB_NOTE = ' (the default: every file under the directory)';

/** `glob::Pattern::escape`: `*`, `?`, `[` and `]` bracketed, so a directory's name is literal. */
export function globEscape(text) {
  return String(text).replace(/[*?[\]]/g, (c) => `[${c}]`);
}

/** The globs a pull request's changed paths are matched against: `when_modified`, or else `<directory>/**` (`**` at the root). */
export function effectiveGlobs(vcs) {
  const given = (vcs && Array.isArray(vcs.when_modified) ? vcs.when_modified : []).map(String);
  if (given.length) return { globs: given, byDefault: false };
  const dir = String((vcs && vcs.directory) || '').replace(/\/+$/, '');
  return { globs: [dir ? `${globEscape(dir)}/**` : '**'], byDefault: true };
}

/** `https://github.com/<owner>/<name>` for a repository that is `owner/name` by GitHub's rules; null otherwise. */
export function repositoryHref(repository) {
  const m = /^([A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?)\/([A-Za-z0-9._-]{1,100})$/.exec(String(repository ?? ''));
  if (!m || m[2] === '.' || m[2] === '..') return null;
  return `https://github.com/${encodeURIComponent(m[1])}/${encodeURIComponent(m[2])}`;
}

/** What an apply from a pull request requires, one phrase each (`[]` for nothing more). */
export function requirementWords(requirements) {
  const r = requirements || {};
  const out = [];
  const n = Number(r.approved);
  if (r.approved !== undefined && r.approved !== null) {
    out.push(n === 1 ? '1 approval by someone other than the author' : `${t(r.approved)} approvals by people other than the author`);
  }
  if (r.mergeable) out.push('mergeable');
  if (r.undiverged) out.push('not behind its base branch');
  return out;
}

/**
 * A binding in words, one row per setting: `[{key, name, text, href?, globs?}]`; `[]` for
 * none. Every string is display text (`t`): the page renders it as text, never markup.
 */
export function vcsWords(vcs) {
  if (!vcs || typeof vcs !== 'object') return [];
  const { globs, byDefault } = effectiveGlobs(vcs);
  const req = requirementWords(vcs.requirements);
  const apply = String(vcs.apply || 'after_merge');
  const provider = String(vcs.provider || 'github');
  return [
    { key: 'provider', name: 'Host', text: HOSTS[provider] || t(provider) },
    // A GitLab project's instance is the connection's, not known here: no link.
    { key: 'repository', name: 'Repository', text: t(vcs.repository), href: provider === 'github' ? repositoryHref(vcs.repository) : null },
    { key: 'directory', name: 'Directory', text: vcs.directory ? t(vcs.directory) : 'the repository root' },
    { key: 'branch', name: 'Base branch', text: t(vcs.branch || 'main') },
    { key: 'when_modified', name: 'Planned when', globs: globs.map(t), byDefault,
      text: `a pull request changes a path matching ${globs.map(t).join(', ')}${byDefault ? DEFAULT_GLOB_NOTE : ''}` },
    { key: 'apply', name: 'Applied', text: APPLY_WORDS[apply] || t(apply) },
    { key: 'requirements', name: 'An apply requires', text: req.length ? req.join(', ') : 'nothing beyond a plan of the head commit and green checks' },
  ];
}

/** The hosts a binding may be on, by the API's name. */
export const HOSTS = { github: 'GitHub', gitlab: 'GitLab' };

/** The form's fields for a binding (or an empty form for none). */
export function vcsForm(vcs) {
  const v = vcs || {};
  const r = v.requirements || {};
  return {
    provider: String(v.provider || 'github'),
    repository: String(v.repository ?? ''),
    directory: String(v.directory ?? ''),
    branch: String(v.branch ?? 'main'),
    when_modified: (Array.isArray(v.when_modified) ? v.when_modified : []).join('\n'),
    apply: String(v.apply || 'after_merge'),
    approved: r.approved === undefined || r.approved === null ? '' : String(r.approved),
    mergeable: !!r.mergeable,
    undiverged: !!r.undiverged,
  };
}

/**
 * The `vcs` JSON of the form: text trimmed; an empty directory, branch, glob list or
 * approval count left out (the API's defaults: the root, `main`, `<directory>/**`, none);
 * globs one per line; a number of approvals as a number (anything else as typed, for the
 * API to name); `requirements` only when one is set.
 */
export function vcsBody(form) {
  const f = form || {};
  // The host always goes: the API's default is GitHub, so a GitLab binding saved without
  // it would move to GitHub.
  const body = { provider: String(f.provider || 'github'), repository: String(f.repository ?? '').trim() };
  const directory = String(f.directory ?? '').trim();
  if (directory) body.directory = directory;
  const branch = String(f.branch ?? '').trim();
  if (branch) body.branch = branch;
  const globs = String(f.when_modified ?? '').split(/\r?\n/).map((g) => g.trim()).filter((g) => g !== '');
  if (globs.length) body.when_modified = globs;
  body.apply = String(f.apply || 'after_merge');
  const requirements = {};
  const approved = String(f.approved ?? '').trim();
  if (approved !== '') requirements.approved = /^\d+$/.test(approved) ? Number(approved) : approved;
  if (f.mergeable) requirements.mergeable = true;
  if (f.undiverged) requirements.undiverged = true;
  if (Object.keys(requirements).length) body.requirements = requirements;
  return body;
}

/** The form's inputs, in order: each API field path under `vcs.` belongs to one. */
export const FIELDS = ['provider', 'repository', 'directory', 'branch', 'when_modified', 'apply', 'approved', 'mergeable', 'undiverged'];
const TOP = ['provider', 'repository', 'directory', 'branch', 'when_modified', 'apply'];
const REQUIRED = ['approved', 'mergeable', 'undiverged'];

/**
 * The API's problems by form input: `{repository: ['must be ...'], ...}`, with `_` for those
 * no input holds (`vcs`, `If-Match`, an unknown field). `vcs.when_modified[2]`
 * is the globs' input, `vcs.requirements.approved` the approvals'.
 */
export function problemsByField(fields) {
  const out = {};
  for (const f of Array.isArray(fields) ? fields : []) {
    const path = String((f && (f.field ?? f.path)) ?? '');
    const top = /^vcs\.([a-z_]+)(?:\[\d+\])?$/.exec(path);
    const req = /^vcs\.requirements\.([a-z_]+)$/.exec(path);
    const key = top && TOP.includes(top[1]) ? top[1] : req && REQUIRED.includes(req[1]) ? req[1] : '_';
    (out[key] = out[key] || []).push(String((f && f.problem) ?? ''));
  }
  return out;
}

function FieldError({ name, problems }) {
  if (!problems || !problems.length) return null;
  return html`<p class="field-error" id=${`vcs-${name}-error`} data-test="vcs-field-error" data-field=${name} role="alert"><${Ticked} text=${problems.join('; ')} /></p>`;
}

function VcsEdit({ env, onSaved, onMoved, onCancel }) {
  const [form, setForm] = useState(() => vcsForm(env.vcs));
  const [problems, setProblems] = useState({});
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const first = useRef(null);
  useEffect(() => {
    if (first.current) first.current.focus();
  }, []);
  const set = (name) => (e) => {
    const el = e.currentTarget;
    setForm((f) => ({ ...f, [name]: el.type === 'checkbox' ? el.checked : el.value }));
  };
  const submit = async (e) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    setProblems({});
    try {
      const updated = await api('PATCH', endpoints.update_environment(env.path), { vcs: vcsBody(form) },
        { headers: { 'If-Match': `"${env.version}"` } });
      onSaved(updated);
    } catch (err) {
      setBusy(false);
      if (err instanceof ApiError && (err.status === 409 || err.status === 412)) {
        onMoved();
        return;
      }
      const byField = err instanceof ApiError && err.status === 400 ? problemsByField(err.fields) : {};
      const named = FIELDS.filter((n) => byField[n]);
      setProblems(byField);
      if (!named.length || byField._) setError(err);
      const el = named.length && document.getElementById(`vcs-${named[0]}`);
      if (el) el.focus();
    }
  };
  const input = (name, label, extra = {}) => html`<div class="form-row">
    <label for=${`vcs-${name}`}>${label}</label>
    <input id=${`vcs-${name}`} name=${name} data-test=${`vcs-${name}`} value=${form[name]} onInput=${set(name)}
      aria-invalid=${problems[name] ? 'true' : undefined} aria-describedby=${problems[name] ? `vcs-${name}-error` : extra.hint ? `vcs-${name}-hint` : undefined}
      ref=${extra.ref} type=${extra.type || 'text'} min=${extra.min} max=${extra.max} placeholder=${extra.placeholder} autocomplete="off" />
    ${extra.hint && html`<span class="hint" id=${`vcs-${name}-hint`}>${extra.hint}</span>`}
    <${FieldError} name=${name} problems=${problems[name]} />
  </div>`;
  const check = (name, label) => html`<div class="form-check">
    <input type="checkbox" id=${`vcs-${name}`} name=${name} data-test=${`vcs-${name}`} checked=${form[name]} onChange=${set(name)}
      aria-invalid=${problems[name] ? 'true' : undefined} aria-describedby=${problems[name] ? `vcs-${name}-error` : undefined} />
    <label for=${`vcs-${name}`}>${label}</label>
    <${FieldError} name=${name} problems=${problems[name]} />
  </div>`;
  const escape = (e) => {
    if (e.key === 'Escape' && !busy) {
      e.preventDefault();
      onCancel();
    }
  };
  return html`<form class="vcs-form" data-test="vcs-form" onSubmit=${submit} onKeyDown=${escape} aria-labelledby="vcs-h" novalidate>
    <div class="form-row">
      <label for="vcs-provider">Host</label>
      <select id="vcs-provider" name="provider" data-test="vcs-provider" value=${form.provider} onChange=${set('provider')}
        aria-invalid=${problems.provider ? 'true' : undefined} aria-describedby=${problems.provider ? 'vcs-provider-error' : undefined}>
        ${Object.entries(HOSTS).map(([v, words]) => html`<option value=${v} selected=${form.provider === v}>${words}</option>`)}
      </select>
      <${FieldError} name="provider" problems=${problems.provider} />
    </div>
    ${input('repository', form.provider === 'gitlab' ? "Project (its full path, group/…/project)" : 'Repository (owner/name)', { ref: first, placeholder: form.provider === 'gitlab' ? 'acme/platform/infrastructure' : 'acme/infrastructure' })}
    ${input('directory', 'Directory', { hint: 'relative to the repository root; empty for the root' })}
    ${input('branch', 'Base branch', { placeholder: 'main' })}
    <div class="form-row">
      <label for="vcs-when_modified">Plan when these paths change (one glob per line)</label>
      <textarea id="vcs-when_modified" name="when_modified" data-test="vcs-when_modified" rows="3" value=${form.when_modified} onInput=${set('when_modified')}
        aria-invalid=${problems.when_modified ? 'true' : undefined} aria-describedby=${problems.when_modified ? 'vcs-when_modified-error' : 'vcs-when_modified-hint'}></textarea>
      <span class="hint" id="vcs-when_modified-hint">empty: every file under the directory</span>
      <${FieldError} name="when_modified" problems=${problems.when_modified} />
    </div>
    <div class="form-row">
      <label for="vcs-apply">Apply</label>
      <select id="vcs-apply" name="apply" data-test="vcs-apply" value=${form.apply} onChange=${set('apply')}
        aria-invalid=${problems.apply ? 'true' : undefined} aria-describedby=${problems.apply ? 'vcs-apply-error' : undefined}>
        ${Object.entries(APPLY_WORDS).map(([v, words]) => html`<option value=${v} selected=${form.apply === v}>${words}</option>`)}
      </select>
      <${FieldError} name="apply" problems=${problems.apply} />
    </div>
    <fieldset class="form-group">
      <legend>An apply requires</legend>
      ${input('approved', 'Approvals by others than the author (1 to 10; empty for none)', { type: 'number', min: 1, max: 10 })}
      ${check('mergeable', 'mergeable (the host can merge it and it is not a draft)')}
      ${check('undiverged', 'not behind its base branch')}
    </fieldset>
    <${ErrorBanner} error=${error} />
    <div class="form-actions">
      <button type="submit" class="button-primary" data-test="vcs-save" disabled=${busy}>Save</button>
      <button type="button" data-test="vcs-cancel" disabled=${busy} onClick=${onCancel}>Cancel</button>
    </div>
  </form>`;
}

function RemoveBinding({ env, onSaved, onMoved }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const confirm = useRef(null);
  useEffect(() => {
    if (asking && confirm.current) confirm.current.focus();
  }, [asking]);
  const remove = async () => {
    setBusy(true);
    setError(null);
    try {
      const updated = await api('PATCH', endpoints.update_environment(env.path), { vcs: null },
        { headers: { 'If-Match': `"${env.version}"` } });
      onSaved(updated);
    } catch (err) {
      setBusy(false);
      if (err instanceof ApiError && (err.status === 409 || err.status === 412)) onMoved();
      else setError(err);
    }
  };
  if (!asking) {
    return html`<button type="button" class="link-button" data-test="vcs-remove" onClick=${() => setAsking(true)}>Remove binding</button>`;
  }
  return html`<div class="vcs-confirm" role="group" aria-labelledby="vcs-confirm-q" data-test="vcs-remove-ask">
    <p id="vcs-confirm-q">Remove the binding? Pull requests will no longer plan or apply this environment.</p>
    <button type="button" class="button-danger" data-test="vcs-remove-confirm" ref=${confirm} disabled=${busy} onClick=${remove}>Remove</button>
    ${' '}<button type="button" data-test="vcs-remove-keep" disabled=${busy} onClick=${() => setAsking(false)}>Keep it</button>
    <${ErrorBanner} error=${error} />
  </div>`;
}

/**
 * The card. `mayManage`: the viewer may PATCH the environment (shows the form); `onSaved(env)`
 * with the API's answer; `onMoved()` when it changed since it was read (the page reloads it).
 */
export function VcsCard({ env, mayManage, onSaved, onMoved }) {
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState(null);
  const opener = useRef(null);
  const wasEditing = useRef(false);
  useEffect(() => {
    // Back from the form: focus returns to the button that opened it.
    if (wasEditing.current && !editing && opener.current) opener.current.focus();
    wasEditing.current = editing;
  }, [editing]);
  const saved = (updated) => {
    setEditing(false);
    setNotice(null);
    onSaved(updated);
  };
  const moved = () => {
    setNotice('Someone else changed this environment since this page read it: it has been reloaded. Check the settings and save again.');
    onMoved();
  };
  const rows = vcsWords(env.vcs);
  return html`<section class="card" data-test="env-vcs" data-bound=${env.vcs ? 'true' : 'false'} aria-labelledby="vcs-h">
    <h2 id="vcs-h">Pull requests</h2>
    ${notice && html`<p class="banner banner-info" data-test="vcs-moved" role="status">${notice}</p>`}
    ${editing
      ? html`<${VcsEdit} env=${env} onSaved=${saved} onMoved=${moved} onCancel=${() => setEditing(false)} />`
      : html`${rows.length
        ? html`<dl class="kvs" data-test="vcs-words">${rows.map((r) => html`<div class="kv" data-test="vcs-row" data-key=${r.key}><dt>${r.name}</dt><dd>${
          r.key === 'repository' && r.href
            ? html`<a href=${r.href} rel="noopener noreferrer" target="_blank" data-test="vcs-repository-link">${r.text}</a>`
            : r.globs
              ? html`a pull request changes a path matching ${r.globs.map((g, i) => html`${i ? ', ' : ''}<code>${g}</code>`)}${r.byDefault ? DEFAULT_GLOB_NOTE : ''}`
              : r.text}</dd></div>`)}</dl>`
        : html`<p class="muted" data-test="vcs-none">Not bound to a repository.</p>`}
        ${mayManage && html`<div class="form-actions">
          <button type="button" data-test=${env.vcs ? 'vcs-edit' : 'vcs-bind'} ref=${opener} onClick=${() => { setNotice(null); setEditing(true); }}>${env.vcs ? 'Edit binding' : 'Bind to a repository'}</button>
          ${env.vcs && html`<${RemoveBinding} env=${env} onSaved=${saved} onMoved=${moved} />`}
        </div>`}`}
  </section>`;
}
