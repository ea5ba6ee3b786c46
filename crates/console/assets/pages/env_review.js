// What a reviewer of an environment wants beside its settings: the policy sets in force for
// it (the sets of its group and of every group above that the viewer may read, whose criteria
// match it, as the policy gate picks them: crates/lifecycle/src/policy_gate.rs `in_force`), and
// where its expiry comes from (its own end or TTL, else a group's default TTL: the
// environment view's `expiry`).
import { html } from '../vendor/preact-htm-standalone.js';
import { api } from '../api.js';
import * as endpoints from '../endpoints.js';
import { t, ErrorBanner, Time, groupHref, useLoad, roleOn, words } from '../ui.js';

/** The groups whose policy sets may apply to an environment of `group`: the root, then each ancestor, then the group. */
export function ancestry(group) {
  const parts = String(group ?? '').split('/').filter(Boolean);
  return ['', ...parts.map((_, i) => parts.slice(0, i + 1).join('/'))];
}

/** True when a set's criteria hold for `env` (crates/core/src/policy `PolicyCriteria::matches`). */
export function criteriaMatch(criteria, env) {
  if (!criteria) return true;
  const types = Array.isArray(criteria.env_types) ? criteria.env_types : [];
  if (types.length > 0 && !types.includes(env.env_type)) return false;
  const labels = (env && env.labels) || {};
  return Object.entries(criteria.labels || {}).every(([k, v]) => Object.prototype.hasOwnProperty.call(labels, k) && labels[k] === v);
}

/**
 * The sets in force for `env` from `listings` (`[{group, policy_sets: [{set, version}]}]`,
 * one per group read): `[{group, name, enforcement, description, version}]`, the root's first.
 */
export function setsInForce(listings, env) {
  const out = [];
  for (const l of listings || []) {
    for (const entry of (l && l.policy_sets) || []) {
      const set = (entry && entry.set) || {};
      if (!criteriaMatch(set.criteria, env)) continue;
      out.push({ group: String(l.group ?? ''), name: String(set.name ?? ''), enforcement: String(set.enforcement ?? ''), description: set.description || '', version: entry.version });
    }
  }
  return out;
}

/**
 * Where the environment's expiry comes from: `{kind, text}` with kind `fixed` (its own
 * `expires_at`), `ttl` (its own TTL), `group` (a default TTL of its group or one above,
 * maybe extended), `destroyed`, or `none`. Read from the environment view's `expiry` (the
 * API's end and source: `GET /v1/environments/{path}`).
 */
export function expirySource(env) {
  const e = (env && env.expiry) || null;
  if (env && env.destroyed) return { kind: 'destroyed', text: 'its expiry destroyed it (extend it to use it again)' };
  if (!e) return { kind: 'none', text: 'none: it does not expire' };
  if (e.source === 'expires_at') return { kind: 'fixed', text: 'set on this environment (a fixed end)' };
  if (e.source === 'ttl') return { kind: 'ttl', text: `this environment's TTL of ${e.ttl ?? env.ttl ?? ''}, counted from ${words(env.ttl_from || 'created')}` };
  return { kind: 'group', text: `the default TTL of ${e.ttl ?? ''} set on group ${e.group ?? ''}${e.extended ? ', extended' : ''}` };
}

/** The policy sets in force for `env`, read from the groups the viewer may read (`me`: whoami). */
export function PoliciesInForce({ env, me }) {
  const readable = ancestry(env.group).filter((g) => me && roleOn(me.memberships, g) !== null);
  const hidden = ancestry(env.group).length - readable.length;
  const { data, error, loading } = useLoad(async () => {
    const listings = await Promise.all(readable.map(async (g) => ({ group: g, ...(await api('GET', endpoints.list_policy_sets(endpoints.group(g)))) })));
    return setsInForce(listings, env);
  }, [env.path, env.version, readable.join('\n')]);
  const sets = data || [];
  return html`<section class="card" data-test="env-policies" aria-labelledby="env-policies-h">
    <h2 id="env-policies-h">Policy sets in force</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${data && sets.length === 0 && html`<p class="muted" data-test="env-policies-none">No policy set applies to this environment.</p>`}
    ${sets.length > 0 && html`<ul class="rows">${sets.map((s) => html`<li class="row" data-test="env-policy" data-group=${s.group} data-name=${s.name} data-enforcement=${s.enforcement}>
      <div class="row-head"><strong>${t(s.name)}</strong> <span class="badge">${words(s.enforcement)}</span>
        ${' '}<span class="muted">from <a href=${groupHref(s.group)}>${s.group ? t(s.group) : '(root group)'}</a>, version ${t(s.version ?? '')}</span></div>
      ${s.description && html`<p>${t(s.description)}</p>`}
    </li>`)}</ul>`}
    ${hidden > 0 && html`<p class="muted">Sets of ${hidden === 1 ? 'one group' : `${hidden} groups`} above your roles (such as the root group) are not listed here; a job's policy result names every set checked.</p>`}
  </section>`;
}

/** The expiry row's value: the end (when it has one) and where it comes from. */
export function ExpiryNote({ env }) {
  const source = expirySource(env);
  const at = env && env.expiry && env.expiry.at;
  return html`<span data-test="env-expiry" data-source=${source.kind}>
    ${at ? html`<${Time} value=${at} />; ` : ''}${t(source.text)}
  </span>`;
}
