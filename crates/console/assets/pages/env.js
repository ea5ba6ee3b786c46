// One environment: settings, its pull-request binding (`vcs`, in words; maintainers set or
// remove it there: pages/env_vcs.js), the runner and why the rules pick it (`?explain=full`
// on request), outputs (sensitive ones by name only), drift, lock, jobs newest first (paged),
// and "run plan" for viewers with `deploy`.
import { html, useState, useEffect } from '../vendor/preact-htm-standalone.js';
import { api, ApiError, query } from '../api.js';
import * as endpoints from '../endpoints.js';
import { whoami } from '../auth.js';
import {
  t, ErrorBanner, StateWord, Ticked, Time, groupHref, jobHref, roleOn, atLeast, orgOf, valueText, useLoad,
  jobSummary, countsLine, failureReason, clip, words,
} from '../ui.js';
import { VcsCard } from './env_vcs.js';
import { ExpiryNote, PoliciesInForce } from './env_review.js';

/** Jobs per page of the job list. */
const JOBS_PAGE = 20;
/** Pages of jobs the "more" button loads in all. */
const JOBS_PAGES_MAX = 50;
/** Pages of a full explanation read at most. */
const EXPLAIN_PAGES_MAX = 10;

function Row({ name, children }) {
  return html`<div class="kv"><dt>${name}</dt><dd>${children}</dd></div>`;
}

function Settings({ env }) {
  const s = env;
  const labels = Object.entries(s.labels || {});
  return html`<section class="card" data-test="env-settings" aria-labelledby="settings-h">
    <h2 id="settings-h">Settings</h2>
    <dl class="kvs">
      <${Row} name="Type">${t(s.env_type ?? '')}<//>
      <${Row} name="Labels">${labels.length ? labels.map(([k, v]) => html`<span class="tag">${t(k)}=${valueText(v)}</span> `) : html`<span class="muted">none</span>`}<//>
      <${Row} name="Tags">${(s.tags || []).length ? s.tags.map((tag) => html`<span class="tag">${t(tag)}</span> `) : html`<span class="muted">none</span>`}<//>
      <${Row} name="Approval">${t(s.approval || 'auto')}${s.four_eyes ? ', four eyes' : ''}${s.approval_timeout_seconds ? `, times out after ${s.approval_timeout_seconds} s` : ''}<//>
      <${Row} name="Tool">${s.tool ? `${t(s.tool)} ${t(s.tool_version ?? '')}` : s.tool_version ? `the runner's tool, version ${t(s.tool_version)}` : html`<span class="muted">the runner's default</span>`}<//>
      ${(s.triggers || []).length > 0 && html`<${Row} name="Triggered by">${s.triggers.map((tr) => html`<code>${t(tr)}</code> `)} (${t(s.trigger_operation || 'plan')}${(s.trigger_inputs || []).length ? `; inputs ${t(s.trigger_inputs.join(', '))}` : ''})<//>`}
      <${Row} name="Expiry"><${ExpiryNote} env=${s} /><//>
      <${Row} name="Queued jobs">${t(s.queued_count ?? 0)}<//>
      <${Row} name="Version">${t(s.version ?? '')}<//>
    </dl>
  </section>`;
}

/** Words for the tally's keys (crates/core/src/rule_index/answer.rs `Tally`). */
const TALLY_WORDS = {
  outranked: 'outranked by the winner',
  not_matched: 'did not match',
  runner_not_visible: 'runner not visible at their scope',
  out_of_scope: 'out of scope (not this group or above)',
  deeper_scope: 'deeper scope',
  more_criteria: 'more criteria',
  higher_priority: 'higher priority',
  rule_id: 'rule id sorts first',
  env_type: 'environment type',
  env_path: 'path',
  labels: 'labels',
  tags: 'tags',
};
const word = (k) => TALLY_WORDS[k] || String(k).replace(/_/g, ' ');
const total = (v) => (typeof v === 'number' ? v : v && typeof v === 'object' ? Object.values(v).reduce((n, x) => n + total(x), 0) : 0);

/**
 * The rules that did not win, one line per fate with a count, nested counts named when not
 * zero: `["2 outranked by the winner (2 deeper scope)", "1 did not match (1 labels)"]`.
 * `won` and fates with no rule are left out; none at all is `[]`.
 */
export function otherRules(counts) {
  return Object.entries(counts || {})
    .filter(([k, v]) => k !== 'won' && total(v) > 0)
    .map(([k, v]) => {
      if (typeof v !== 'object') return `${total(v)} ${word(k)}`;
      const parts = Object.entries(v).filter(([, x]) => total(x) > 0).map(([sk, x]) => `${total(x)} ${word(sk)}`);
      return `${total(v)} ${word(k)}${parts.length ? ` (${parts.join(', ')})` : ''}`;
    });
}

/** The tally as one line of words (`otherRules` joined), `none` when no other rule. */
export function countsText(counts) {
  return otherRules(counts).join('; ') || 'none';
}

/** One considered rule's fate in words (crates/core/src/rule.rs `RuleVerdict`). */
export function verdictText(item) {
  const c = item || {};
  switch (c.outcome) {
    case 'won': return 'won';
    case 'lost': return `lost to ${t(c.to ?? '')}: ${t(c.because ?? '')}`;
    case 'out_of_scope': return 'out of scope';
    case 'runner_not_visible': return 'runner not visible at its scope';
    case 'not_matched': return `did not match: ${t(c.reason ?? '')}`;
    default: return t(c.outcome ?? '');
  }
}

function Considered({ item }) {
  const c = item || {};
  return html`<li class="considered" data-outcome=${t(c.outcome ?? '')}>
    rule <code>${t(c.rule_id ?? '')}</code> at <code>${t(c.scope || '(root)')}</code> → <strong>${t(c.runner_id ?? '')}</strong>
    <span class="muted"> (${t(c.criteria_count ?? 0)} criteria, priority ${t(c.priority ?? 0)})</span>:
    ${' '}<span class=${c.outcome === 'won' ? 'verdict verdict-won' : 'verdict'}>${verdictText(c)}</span>
  </li>`;
}

function Why({ env }) {
  const [full, setFull] = useState(false);
  const [answer, setAnswer] = useState(null);
  const [extra, setExtra] = useState([]);
  const [next, setNext] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const ask = async (explainFull, offset) => {
    setBusy(true);
    try {
      const params = { dry_run: 'true', explain: explainFull ? 'full' : undefined, explain_offset: offset || undefined };
      const a = await api('POST', endpoints.refresh_runner(env.path) + query(params));
      setError(null);
      if (offset) {
        setExtra((x) => [...x, ...(a.resolution.explanation || [])]);
      } else {
        setAnswer(a);
        setExtra(a.resolution.explanation || []);
      }
      setNext(a.resolution.explanation_next ?? null);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    ask(false, 0);
  }, [env.path]);
  const link = env.runner || {};
  const r = answer && answer.resolution;
  return html`<section class="card" data-test="env-why" aria-labelledby="why-h">
    <h2 id="why-h">Runner</h2>
    <p><strong class="runner-id">${t(link.runner_id ?? '')}</strong>, linked by rule <code>${t(link.rule_id ?? '')}</code>
      ${' '}by ${t(link.linked_by ?? '')} at <${Time} value=${link.linked_at} />.</p>
    <${ErrorBanner} error=${error} />
    ${r && html`<div class="why">
      ${answer.changed && html`<p class="banner banner-info">The rules now pick <strong>${t(answer.runner_id)}</strong>; a maintainer may relink it with <code>sortie env refresh-runner</code>.</p>`}
      <p>Rule <code>${t(r.rule && r.rule.id)}</code> (scope <code>${t((r.rule && r.rule.scope) || '(root)')}</code>) wins: <${Ticked} text=${r.why} /></p>
      ${(() => {
        const others = otherRules(r.counts);
        return others.length
          ? html`<div class="other-rules" data-test="other-rules"><span class="muted">Other rules:</span>
              <ul class="tally">${others.map((line) => html`<li>${t(line)}</li>`)}</ul></div>`
          : html`<p class="muted" data-test="other-rules">No other rule applies.</p>`;
      })()}
      ${full && html`<ol class="explanation" data-test="explanation">${extra.map((c) => html`<${Considered} item=${c} />`)}</ol>`}
      ${full && next !== null && extra.length < 1000 * EXPLAIN_PAGES_MAX && html`<button type="button" disabled=${busy} onClick=${() => ask(true, next)}>More rules</button>`}
    </div>`}
    ${!full && html`<button type="button" data-test="explain-full" disabled=${busy} onClick=${() => { setFull(true); ask(true, 0); }}>Explain every rule</button>`}
  </section>`;
}

function Outputs({ env }) {
  const { data, error, loading } = useLoad(async () => {
    // No successful apply, no outputs: not asked (the API would answer 404).
    if (!env.last_apply) return { none: true };
    try {
      return await api('GET', endpoints.get_environment_outputs(env.path));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return { none: e.message };
      throw e;
    }
  }, [env.path, env.last_apply && env.last_apply.job_id]);
  const entries = data && data.outputs ? Object.entries(data.outputs) : [];
  return html`<section class="card" data-test="env-outputs" aria-labelledby="outputs-h">
    <h2 id="outputs-h">Outputs</h2>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${data && data.none && html`<p class="muted">No outputs: no apply has succeeded yet.</p>`}
    ${data && data.job_id && html`<p class="muted">From apply <a href=${jobHref(data.job_id)}>${t(data.job_id)}</a>.</p>`}
    ${entries.length > 0 && html`<table class="outputs">
      <thead><tr><th scope="col" class="output-name">Name</th><th scope="col">Value</th></tr></thead>
      <tbody>${entries.map(([name, o]) => html`<tr data-test="output" data-name=${name}>
        <th scope="row" class="output-name"><code title=${t(name)}>${t(name)}</code></th>
        <td>${o && o.sensitive
          ? html`<span class="badge badge-sensitive" data-test="output-sensitive">sensitive</span>`
          : html`<code class="value">${valueText(o && o.value)}</code>`}</td>
      </tr>`)}</tbody>
    </table>`}
  </section>`;
}

function Drift({ env }) {
  const d = env.drift;
  return html`<section class="card" data-test="env-drift" aria-labelledby="drift-h">
    <h2 id="drift-h">Drift</h2>
    <dl class="kvs">
      <${Row} name="Schedule">${env.drift_schedule ? html`<code>${t(env.drift_schedule)}</code> (UTC), remediation ${t(env.drift_remediation || 'off')}` : html`<span class="muted">none</span>`}<//>
      ${env.next_drift_at && html`<${Row} name="Next check"><${Time} value=${env.next_drift_at} /><//>`}
      <${Row} name="Last verdict">${d
        ? html`<span class=${`drift drift-${t(d.status).replace(/[^a-z_]/g, '')}`} data-test="drift-verdict">${words(d.status)}</span>
          ${' '}at <${Time} value=${d.checked_at} /> by <a href=${jobHref(d.job_id)}>${t(d.job_id)}</a>
          ${d.reason && html`: <${Ticked} text=${d.reason} />`}
          ${d.remediation_job_id && html`; remediation <a href=${jobHref(d.remediation_job_id)}>${t(d.remediation_job_id)}</a>`}`
        : html`<span class="muted" data-test="drift-verdict">not checked yet</span>`}<//>
      ${env.drift_skipped && html`<${Row} name="Last skipped"><${Time} value=${env.drift_skipped.at} />: ${valueText(env.drift_skipped.reason ?? env.drift_skipped)}<//>`}
    </dl>
  </section>`;
}

function Lock({ lock }) {
  return html`<section class="card card-warn wide" data-test="env-lock" aria-labelledby="lock-h">
    <h2 id="lock-h">Locked</h2>
    <p>Locked by <strong>${t(lock.by)}</strong> at <${Time} value=${lock.at} />: ${t(lock.reason)}</p>
    <p class="muted">New jobs are refused until it is unlocked (<code>sortie env unlock</code>).</p>
  </section>`;
}

/** The most characters of a failure reason a row of the jobs table shows (the whole as its title). */
export const REASON_MAX = 80;

function JobRow({ job }) {
  const created = job.transitions && job.transitions[0] ? job.transitions[0].at : null;
  const counts = countsLine(jobSummary(job));
  const reason = failureReason(job);
  return html`<tr data-test="job-row" data-job=${job.id}>
    <td><a data-test="job-link" href=${jobHref(job.id)}><code>${t(job.id)}</code></a></td>
    <td>${t(job.operation ?? '')}${job.drift_check ? ' (drift check)' : ''}</td>
    <td><${StateWord} state=${job.state} />
      ${reason && html`<div class="job-reason" data-test="job-reason" title=${t(reason)}>${t(clip(reason, REASON_MAX))}</div>`}</td>
    <td data-test="job-counts">${counts ? html`<code class="counts">${counts}</code>` : html`<span class="muted">none</span>`}</td>
    <td>${t(job.requested_by ?? '')}</td>
    <td><${Time} value=${created || job.updated_at} /></td>
  </tr>`;
}

function Jobs({ env }) {
  const [jobs, setJobs] = useState([]);
  const [next, setNext] = useState(null);
  const [pages, setPages] = useState(0);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(true);
  const load = async (cursor) => {
    setBusy(true);
    try {
      const page = await api('GET', endpoints.list_jobs(env.path) + query({ limit: JOBS_PAGE, cursor }));
      setJobs((j) => (cursor ? [...j, ...(page.jobs || [])] : page.jobs || []));
      setNext(page.next || null);
      setPages((p) => (cursor ? p + 1 : 1));
      setError(null);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    load(null);
  }, [env.path]);
  return html`<section class="card wide" data-test="env-jobs" aria-labelledby="jobs-h">
    <h2 id="jobs-h">Jobs</h2>
    <${ErrorBanner} error=${error} />
    ${jobs.length === 0 && !busy && !error && html`<p class="muted">No jobs yet: submit one with <code>sortie run plan ${t(env.path)}</code>.</p>`}
    ${jobs.length > 0 && html`<div class="table-scroll"><table class="jobs">
      <thead><tr><th scope="col">Job</th><th scope="col">Operation</th><th scope="col">State</th><th scope="col">Changes</th><th scope="col">Requested by</th><th scope="col">Submitted</th></tr></thead>
      <tbody>${jobs.map((j) => html`<${JobRow} key=${j.id} job=${j} />`)}</tbody>
    </table></div>`}
    ${next && pages < JOBS_PAGES_MAX && html`<button type="button" data-test="jobs-more" disabled=${busy} onClick=${() => load(next)}>More jobs</button>`}
    ${next && pages >= JOBS_PAGES_MAX && html`<p class="muted">Older jobs: <code>sortie list jobs ENV</code>.</p>`}
  </section>`;
}

/** The request of the job a new plan repeats: the latest successful apply's, else the newest job's. */
async function planRequest(env) {
  let id = env.last_apply && env.last_apply.job_id;
  if (!id) {
    const page = await api('GET', endpoints.list_jobs(env.path) + query({ limit: 1 }));
    id = page.jobs && page.jobs[0] && page.jobs[0].id;
  }
  if (!id) return null;
  const job = await api('GET', endpoints.get_job(id));
  return { from: id, job };
}

function RunPlan({ env }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  // The job a new plan repeats, looked up once: undefined while looking, null when there is none.
  const [base, setBase] = useState(undefined);
  useEffect(() => {
    let live = true;
    planRequest(env).then((b) => live && setBase(b), (e) => live && (setBase(null), setError(e)));
    return () => {
      live = false;
    };
  }, [env.path]);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      const j = base.job;
      const body = { operation: 'plan', source: j.source, variables: j.variables || {}, secret_refs: j.secret_refs || {} };
      if (j.files && Object.keys(j.files).length) body.files = j.files;
      const made = await api('POST', endpoints.submit_job(env.path), body);
      location.hash = jobHref(made.id);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  if (base === null && !error) {
    return html`<div class="run-plan" data-test="run-plan-first">
      <span class="muted">The first plan needs a configuration: submit it with <code>sortie run plan ${t(env.path)}</code> from its directory. After that, this page can plan again.</span>
    </div>`;
  }
  return html`<div class="run-plan">
    <button type="button" class="button-primary" data-test="run-plan" disabled=${busy || !base} onClick=${run}>Run plan</button>
    <span class="muted">plans the configuration and variables of the latest apply (sensitive variables are not repeated)</span>
    <${ErrorBanner} error=${error} />
  </div>`;
}

/** `#/env/<path>`. */
export function EnvPage({ path }) {
  const { data, error, loading, reload } = useLoad(async () => {
    const [env, me] = await Promise.all([
      api('GET', endpoints.get_environment(path)),
      whoami(orgOf(path)).catch(() => null),
    ]);
    return { env, me };
  }, [path]);
  // The environment as a change on this page left it (the PATCH's answer), until reloaded.
  const [changed, setChanged] = useState(null);
  const env = changed && data && changed.path === data.env.path ? changed : data && data.env;
  const role = data && data.me && env ? roleOn(data.me.memberships, env.group) : null;
  const mayDeploy = atLeast(role, 'deployer');
  // PATCH /v1/environments/{path} authorizes `manage`: a maintainer or an owner.
  const mayManage = atLeast(role, 'maintainer');
  const moved = () => {
    setChanged(null);
    reload();
  };
  return html`<main class="page env-page" data-test="env-page" data-path=${path} data-loaded=${loading ? undefined : 'true'}>
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Environments</a> / ${env ? html`<a href=${groupHref(env.group)}>${t(env.group)}</a>` : ''} / </nav>
    <div class="page-head">
      <h1>${t(path)}</h1>
      ${env && mayDeploy && !env.lock && html`<${RunPlan} env=${env} />`}
    </div>
    <${ErrorBanner} error=${error} />
    ${loading && html`<p class="muted">Loading…</p>`}
    ${env && html`<div class="grid">
      ${env.lock && html`<${Lock} lock=${env.lock} />`}
      ${env.active_job && html`<p class="banner banner-info wide">Job <a href=${jobHref(env.active_job)}>${t(env.active_job)}</a> holds the environment now.</p>`}
      <${Settings} env=${env} />
      <${VcsCard} env=${env} mayManage=${mayManage} onSaved=${setChanged} onMoved=${moved} />
      <${PoliciesInForce} env=${env} me=${data.me} />
      <${Why} env=${env} />
      <${Outputs} env=${env} />
      <${Drift} env=${env} />
      <${Jobs} env=${env} />
    </div>`}
  </main>`;
}
