// The plan diff (`GET /v1/jobs/{id}/plan`, crates/core/src/plan/view.rs): resources grouped
// by action, each a <details> with its changed attributes before -> after; replacements
// marked with the attributes that force them; no-op resources collapsed.
import { html, useEffect, useState } from "../vendor/preact-htm-standalone.js";
import { api, query } from "../api.js";
import * as endpoints from "../endpoints.js";
import { Ticked } from "../ui.js";
import { ErrorBox, TERMINAL, text, valueText, VALUE_MAX } from "./common.js";

/** The order of the groups and how each is titled. */
export const ACTIONS = [
  ["create", "Create", "+"],
  ["update", "Update in place", "~"],
  ["replace", "Replace", "-/+"],
  ["delete", "Destroy", "-"],
  ["read", "Read", "<="],
  ["no-op", "No change", " "],
];

/** What the API puts in place of a sensitive value (crates/core/src/plan/redact.rs). */
export const SENSITIVE_MARKER = "(sensitive value)";

/** The most plan pages read (1,000 resources each). */
export const MAX_PAGES = 10;

/** Terraform's summary: creates and replaces add, replaces and deletes destroy. */
export function summaryLine(counts) {
  const c = counts ?? {};
  const add = (c.create ?? 0) + (c.replace ?? 0);
  const change = c.update ?? 0;
  const destroy = (c.delete ?? 0) + (c.replace ?? 0);
  return `${add} to add, ${change} to change, ${destroy} to destroy`;
}

/** Resource changes by action, in [`ACTIONS`] order, only the actions present. */
export function groupByAction(changes) {
  const by = new Map(ACTIONS.map(([a]) => [a, []]));
  for (const r of changes ?? []) (by.get(r.action) ?? by.get("no-op")).push(r);
  return ACTIONS.filter(([a]) => by.get(a).length > 0).map(([a, title, sym]) => ({ action: a, title, sym, resources: by.get(a) }));
}

/** What Terraform prints for a value known only after apply. */
export const UNKNOWN = "(known after apply)";

/**
 * `value` as compact text with each part at one of `paths` (the API's `unknown_paths`:
 * steps joined by dots, `1` a list's second element) read `(known after apply)`, as
 * Terraform prints a list or an object that is partly unknown; never `null` for them.
 */
export function withUnknowns(value, paths) {
  const exact = new Set(Array.isArray(paths) ? paths.map(String) : []);
  // Every proper prefix of an unknown path (`a`, `a.b` of `a.b.c`): a part to open. One set
  // lookup per part, so a hostile plan's 10,000 unknown elements stay linear.
  const above = new Set();
  for (const p of exact) {
    for (let i = p.indexOf("."); i >= 0; i = p.indexOf(".", i + 1)) above.add(p.slice(0, i));
  }
  const inner = (v, here) => {
    if (exact.has(here)) return UNKNOWN;
    const open = here === "" ? exact.size > 0 : above.has(here);
    if (!open) return JSON.stringify(v === undefined ? null : v);
    const step = (k) => (here === "" ? String(k) : `${here}.${k}`);
    if (Array.isArray(v)) return `[${v.map((x, i) => inner(x, step(i))).join(",")}]`;
    if (v !== null && typeof v === "object") {
      return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${inner(x, step(k))}`).join(",")}}`;
    }
    return UNKNOWN;
  };
  const s = text(inner(value, ""));
  return s.length > VALUE_MAX ? `${s.slice(0, VALUE_MAX)}…` : s;
}

function Value({ value, unknown, unknownPaths }) {
  if (unknown) return html`<span class="plan-unknown">${UNKNOWN}</span>`;
  if (Array.isArray(unknownPaths) && unknownPaths.length > 0) {
    return html`<code class="plan-value">${withUnknowns(value, unknownPaths)}</code>`;
  }
  if (value === SENSITIVE_MARKER) return html`<span class="sensitive">(sensitive)</span>`;
  if (value === null || value === undefined) return html`<span class="plan-null">null</span>`;
  return html`<code class="plan-value">${valueText(value)}</code>`;
}

/** The symbol Terraform prints before one attribute or output of a change with `action`. */
export function attrSymbol(action, change) {
  if (action === "read") return "+";
  if (action !== "update" && action !== "replace") {
    return (ACTIONS.find(([a]) => a === action) ?? ["", "", " "])[2];
  }
  const before = change.before === null || change.before === undefined;
  const after = (change.after === null || change.after === undefined) && !change.after_unknown &&
    !(Array.isArray(change.unknown_paths) && change.unknown_paths.length > 0);
  return before ? "+" : after ? "-" : "~";
}

function Attr({ change, action }) {
  const path = String(change.path ?? "");
  const showBefore = action !== "create";
  // What goes says so: its old value, then `→ null`, as Terraform's `-> null`.
  const showAfter = true;
  const sym = attrSymbol(action, change);
  return html`<li class=${`plan-attr${change.forces_replacement ? " plan-attr-forces" : ""}`} data-test="plan-attr" data-name=${path}>
    <span class="plan-attr-sym" data-test="plan-attr-sym" aria-hidden="true">${sym} </span><span class="plan-attr-name">${text(path)}</span>${": "}
    ${showBefore ? html`<span class="plan-before"><${Value} value=${change.before} /></span>` : null}
    ${showBefore && showAfter ? html`<span class="plan-arrow"> → </span>` : null}
    ${showAfter ? html`<span class="plan-after"><${Value} value=${change.after} unknown=${change.after_unknown} unknownPaths=${change.unknown_paths} /></span>` : null}
    ${change.forces_replacement ? html` <span class="plan-forces">forces replacement</span>` : null}
  </li>`;
}

function Resource({ r }) {
  const changes = Array.isArray(r.changes) ? r.changes : [];
  const replacePaths = Array.isArray(r.replace_paths) ? r.replace_paths : [];
  return html`<details class=${`plan-resource plan-${r.action}`} data-test="plan-resource" data-address=${String(r.address ?? "")}>
    <summary>
      <span class="plan-address">${text(r.address)}</span>
      ${r.action === "replace"
        ? html` <span class="plan-replace" data-test="plan-replace">must be replaced${replacePaths.length > 0 ? ` (forced by ${replacePaths.join(", ")})` : ""}</span>`
        : null}
    </summary>
    ${changes.length === 0
      ? html`<p class="muted">No attribute changes listed.</p>`
      : html`<ul class="plan-attrs">${changes.map((c) => html`<${Attr} change=${c} action=${r.action} />`)}</ul>`}
  </details>`;
}

function Group({ g }) {
  const body = g.resources.map((r) => html`<${Resource} r=${r} key=${r.address} />`);
  return html`<section class=${`plan-group plan-${g.action}`} data-test="plan-group" data-action=${g.action}>
    <h3><span class="plan-sym">${g.sym}</span> ${g.title} (${g.resources.length})</h3>
    ${g.action === "no-op"
      ? html`<details class="plan-noop"><summary>Show ${g.resources.length} unchanged</summary>${body}</details>`
      : body}
  </section>`;
}

function OutputChanges({ changes }) {
  const shown = (changes ?? []).filter((o) => o.action !== "no-op");
  if (shown.length === 0) return null;
  return html`<section class="plan-outputs" data-test="plan-outputs">
    <h3>Output changes</h3>
    <ul class="plan-attrs">
      ${shown.map((o) => html`<${Attr} change=${{ ...o, path: o.name }} action=${o.action} />`)}
    </ul>
  </section>`;
}

/** Reads every page of the plan (at most [`MAX_PAGES`]). Null when the job has none (404). */
async function readPlan(id) {
  let page;
  try {
    page = await api("GET", endpoints.get_job_plan(id));
  } catch (e) {
    if (e && e.status === 404) return null;
    throw e;
  }
  const plan = { ...page, resource_changes: [...(page.resource_changes ?? [])], truncated: false };
  let cursor = page.next_cursor;
  for (let n = 1; cursor && n < MAX_PAGES; n++) {
    const next = await api("GET", endpoints.get_job_plan(id) + query({ cursor }));
    plan.resource_changes.push(...(next.resource_changes ?? []));
    cursor = next.next_cursor;
  }
  plan.truncated = !!cursor;
  return plan;
}

/**
 * Whether the API may hold plan data for `job` (a JobView), so the page asks for it: every
 * job once its task was launched (an apply without review uploads its plan too, and a
 * policy-denied apply keeps the plan it was denied for), or one that reports a plan
 * phase, a change summary or a policy result. Only a job still queued or being
 * dispatched, with none of those, has none yet. The API decides: a 404 is "none (yet)".
 */
export function hasPlan(job) {
  if (!job) return false;
  if (job.plan_phase || job.summary || job.policy) return true;
  return job.state !== "queued" && job.state !== "dispatching";
}

/** How long after a 404 the plan of a job that has not ended is asked for again. */
export const PLAN_RETRY_MS = 3000;

/** `[data-test=plan]` of `job`: read once the job may have one, again after a 404 until it has ended. */
export function Plan({ job }) {
  const id = job.id;
  const wanted = hasPlan(job);
  const ended = TERMINAL.has(job.state);
  const [plan, setPlan] = useState(wanted ? undefined : null);
  const [error, setError] = useState(null);
  const [retry, setRetry] = useState(0);
  const found = !!plan;
  // What may turn a 404 into a plan: asked again when one of these changes.
  const facts = `${job.state}|${!!job.summary}|${!!job.policy}|${!!job.plan_phase}`;
  useEffect(() => {
    if (!wanted) {
      setPlan(null);
      return undefined;
    }
    // A plan once read never changes: it is not read again.
    if (found) return undefined;
    let live = true;
    let timer = null;
    readPlan(id).then(
      (p) => {
        if (!live) return;
        setPlan(p);
        setError(null);
        if (p === null && !ended) timer = setTimeout(() => live && setRetry((n) => n + 1), PLAN_RETRY_MS);
      },
      (e) => live && setError(e),
    );
    return () => {
      live = false;
      if (timer !== null) clearTimeout(timer);
    };
  }, [id, wanted, ended, retry, facts]);
  const absent = plan === null || (plan && plan.available === false);
  return html`<section class="card job-section" data-test="plan">
    <h2>Plan</h2>
    <${ErrorBox} error=${error} />
    ${plan === undefined && !error ? html`<p class="muted">Loading the plan…</p>` : null}
    ${absent
      ? html`<p class="muted" data-test="plan-absent">${plan?.reason ? html`No plan data: <${Ticked} text=${plan.reason} />` : "This job has no plan (yet)."}</p>`
      : null}
    ${plan && plan.available !== false &&
    html`<p class="plan-summary" data-test="plan-summary">${summaryLine(plan.counts)}</p>
      ${groupByAction(plan.resource_changes).map((g) => html`<${Group} g=${g} key=${g.action} />`)}
      ${plan.truncated ? html`<p class="muted">Only the first ${plan.resource_changes.length} of ${plan.total_resources} resources are shown.</p>` : null}
      <${OutputChanges} changes=${plan.output_changes} />`}
  </section>`;
}
