// A group's runners (with `runner check` as a button for those whose role allows it), rules,
// policy sets and agent pools, read-only, and its notification destinations.
import { html, useState } from '../vendor/preact-htm-standalone.js';
import { api } from '../api.js';
import * as endpoints from '../endpoints.js';
import { whoami } from '../auth.js';
import { Notifications } from './group_notify.js';
import { auditHref } from './audit.js';
import { t, ErrorBanner, Ticked, Time, groupHref, valueText, useLoad, cls, may, manageAction, ACTION_ROLE } from '../ui.js';

/**
 * A runner check needs `manage` on the runner's group (`administer` for a shared runner of
 * the root group), as `POST .../runners/{name}/check` authorizes: `{allowed, need}`.
 */
export function checkRight(memberships, runnerGroup) {
  const action = manageAction(runnerGroup);
  return { allowed: may(memberships, action, runnerGroup), need: ACTION_ROLE[action] };
}

function RunnerCheck({ runner, me }) {
  const right = checkRight(me && me.memberships, runner.group);
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const check = async () => {
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await api('POST', endpoints.check_runner(endpoints.group(runner.group), runner.name)));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  if (!me) return null;
  if (!right.allowed) {
    return html`<p class="muted" data-test="runner-check-denied">A runner check needs the ${right.need} role on ${runner.group ? html`<code>${t(runner.group)}</code>` : 'the root group'}.</p>`;
  }
  return html`<div class="runner-check">
    <button type="button" data-test="runner-check" disabled=${busy} onClick=${check}>${busy ? 'Checking…' : 'Runner check'}</button>
    <${ErrorBanner} error=${error} />
    ${result && html`<div class="check-result" data-test="runner-check-result" data-passed=${result.passed ? 'true' : 'false'}>
      <p><strong>${result.passed ? 'All checks passed' : 'Some checks did not pass'}</strong> for organisation <code>${t(result.org ?? '')}</code>.</p>
      <ul class="checks">${(result.checks || []).map((c) => html`<li class=${`check check-${cls(c.status)}`}>
        <span class="check-status">${t(c.status ?? '')}</span>${' '}<code>${t(c.name ?? '')}</code>${' '}<span><${Ticked} text=${c.detail} /></span>
      </li>`)}</ul>
    </div>`}
  </div>`;
}

/** What a runner's `identity` block gives its jobs: the audience and each cloud's roles. */
export function identityParts(identity) {
  if (!identity) return [];
  const parts = [`audience ${identity.audience ?? ''}`];
  if (identity.aws) parts.push(`AWS plan role ${identity.aws.plan_role_arn ?? ''}`, `AWS apply role ${identity.aws.apply_role_arn ?? ''}`);
  if (identity.gcp) parts.push(`Google workload identity ${identity.gcp.workload_identity_provider ?? ''}`);
  if (identity.azure) parts.push(`Azure client ${identity.azure.client_id ?? ''}`);
  return parts;
}

function Runners({ state, me }) {
  const { data, error, loading } = state;
  const runners = (data && data.runners) || [];
  return html`<section class="card wide" data-test="runners" aria-labelledby="runners-h">
    <h2 id="runners-h">Runners</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${!loading && !error && runners.length === 0 && html`<p class="muted">No runners visible here yet: create one with <code>sortie create runner NAME -f FILE</code>.</p>`}
    <ul class="rows">${runners.map((r) => html`<li class="row" data-test="runner" data-name=${r.name} data-group=${r.group}>
      <div class="row-head">
        <strong>${t(r.id ?? r.name)}</strong>
        ${r.shared && html` <span class="badge">shared</span>`}
        ${r.inherited && !r.shared && html` <span class="badge">from <a href=${groupHref(r.group)}>${t(r.group)}</a></span>`}
      </div>
      ${r.description && html`<p>${t(r.description)}</p>`}
      <p class="muted">${r.runner_configuration ? `platform ${valueText(r.runner_configuration.type ?? '')}` : ''}
        ${r.tool ? ` · ${t(r.tool)} ${t(r.tool_version ?? '')}` : ''} · version ${t(r.version ?? '')}</p>
      ${r.identity && html`<p class="muted" data-test="runner-identity">Job identity: ${identityParts(r.identity).map((part, i) => html`${i ? ' · ' : ''}<code>${t(part)}</code>`)}</p>`}
      <${RunnerCheck} runner=${r} me=${me} />
    </li>`)}</ul>
  </section>`;
}

function Criteria({ criteria }) {
  const entries = Object.entries(criteria || {}).filter(([, v]) => v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'object' && v && Object.keys(v).length === 0));
  if (!entries.length) return html`<span class="muted">any environment</span>`;
  return entries.map(([k, v]) => html`<span class="kv-inline"><span class="label">${t(k)}</span> <code>${valueText(v)}</code></span> `);
}

function Rules({ group }) {
  const { data, error, loading } = useLoad(() => api('GET', endpoints.list_rules(endpoints.group(group))), [group]);
  const rules = (data && data.rules) || [];
  return html`<section class="card" data-test="rules" aria-labelledby="rules-h">
    <h2 id="rules-h">Rules</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${!loading && !error && rules.length === 0 && html`<p class="muted">No rules at this group: environments here take a rule of a group above, if any. Add one with <code>sortie create runner-rule --set scope=GROUP …</code>.</p>`}
    <ul class="rows">${rules.map((r) => html`<li class="row" data-test="rule" data-id=${r.id}>
      <div class="row-head"><code>${t(r.id)}</code> → <strong>${t(r.runner_id ?? '')}</strong> <span class="muted">priority ${t(r.priority ?? 0)}</span></div>
      <div><${Criteria} criteria=${r.criteria} /></div>
    </li>`)}</ul>
  </section>`;
}

function PolicySets({ group }) {
  const { data, error, loading } = useLoad(() => api('GET', endpoints.list_policy_sets(endpoints.group(group))), [group]);
  const sets = (data && data.policy_sets) || [];
  return html`<section class="card" data-test="policy-sets" aria-labelledby="policy-h">
    <h2 id="policy-h">Policy sets</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${!loading && !error && sets.length === 0 && html`<p class="muted">No policy sets at this group.</p>`}
    <ul class="rows">${sets.map(({ set, version }) => html`<li class="row" data-test="policy-set" data-name=${set && set.name}>
      <div class="row-head"><strong>${t(set && set.name)}</strong> <span class="badge">${valueText(set && set.enforcement)}</span> <span class="muted">version ${t(version ?? '')}</span></div>
      ${set && set.description && html`<p>${t(set.description)}</p>`}
      <p class="muted">${((set && set.modules) || []).length} modules${set && set.criteria ? html` · applies to <${Criteria} criteria=${set.criteria} />` : ''}${set && set.on_unavailable ? ` · when unavailable: ${valueText(set.on_unavailable)}` : ''}</p>
    </li>`)}</ul>
  </section>`;
}

function AgentPools({ group }) {
  const { data, error, loading } = useLoad(() => api('GET', endpoints.list_agent_pools(endpoints.group(group))), [group]);
  const pools = (data && data.pools) || [];
  return html`<section class="card" data-test="agent-pools" aria-labelledby="pools-h">
    <h2 id="pools-h">Agent pools</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${!loading && !error && pools.length === 0 && html`<p class="muted">No agent pools at this group.</p>`}
    <ul class="rows">${pools.map((p) => html`<li class="row" data-test="agent-pool" data-name=${p.name}>
      <div class="row-head"><strong>${t(p.name)}</strong> <code class="muted">${t(p.id ?? '')}</code></div>
      ${p.description && html`<p>${t(p.description)}</p>`}
      <p class="muted">${(p.tokens || []).length} tokens${p.oidc ? ' · OIDC trust' : ''} · created by ${t(p.created_by ?? '')} at <${Time} value=${p.created_at} /></p>
    </li>`)}</ul>
  </section>`;
}

/** `#/groups/<path>`. */
export function GroupPage({ group }) {
  // The page counts as loaded once the runners and the viewer's roles are in; each other section loads on its own.
  const runners = useLoad(() => api('GET', endpoints.list_runners(endpoints.group(group))), [group]);
  // The viewer's roles in the group's organisation: buttons follow them (the API stays the judge).
  const viewer = useLoad(() => whoami(group.split('/')[0] || undefined).catch(() => ({ memberships: [] })), [group]);
  const parts = group ? group.split('/') : [];
  return html`<main class="page group-page" data-test="group-page" data-group=${group} data-loaded=${runners.loading || viewer.loading ? undefined : 'true'}>
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Environments</a>
      ${parts.slice(0, -1).map((_, i) => html` / <a href=${groupHref(parts.slice(0, i + 1).join('/'))}>${t(parts[i])}</a>`)} /</nav>
    <div class="page-head"><h1>${group ? t(group) : '(root group)'}</h1>
      <a href=${`#/?org=${encodeURIComponent(parts[0] || '')}&q=${encodeURIComponent(group)}`}>Its environments</a>
      ${parts.length <= 1 && viewer.data && may(viewer.data.memberships, 'administer', group) && html` <a data-test="audit-link" href=${auditHref(parts[0] || '-')}>Audit trail</a>`}</div>
    <div class="grid">
      <${Runners} state=${runners} me=${viewer.data} />
      <${Rules} group=${group} />
      <${PolicySets} group=${group} />
      <${AgentPools} group=${group} />
      <${Notifications} group=${group} me=${viewer.data} />
    </div>
  </main>`;
}
