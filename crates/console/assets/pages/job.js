// The job page (`#/jobs/<id>`): state and timeline, who requested and decided, the live
// log, the plan diff, the policy results, the outputs, and Approve / Discard / Cancel.
import { html, useEffect, useState } from "../vendor/preact-htm-standalone.js";
import { api } from "../api.js";
import * as endpoints from "../endpoints.js";
import { whoami } from "../auth.js";
import { ErrorBox, envHref, groupHref, sourceText, TERMINAL, text, valueText } from "../components/common.js";
import { DecideDialog } from "../components/dialog.js";
import { Log } from "../components/log.js";
import { Outputs } from "../components/outputs.js";
import { Plan } from "../components/plan.js";
import { Policy } from "../components/policy.js";
import { envGroup, jobRights } from "../components/rights.js";
import { People, Timeline } from "../components/timeline.js";
import { StateWord, Ticked } from "../ui.js";

/** How often a job that has not ended is read again (awaiting approval: slower). */
const POLL_MS = 1000;
const AWAITING_MS = 3000;
/** Failed reads in a row before the page stops reading the job again. */
const MAX_FAILURES = 8;

/** The job, read again until it ends (backing off on errors, stopping when the page is left). */
function useJob(id) {
  const [job, setJob] = useState(null);
  const [error, setError] = useState(null);
  const [loaded, setLoaded] = useState(false);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer = null;
    let failures = 0;
    async function read() {
      timer = null;
      try {
        const view = await api("GET", endpoints.get_job(id));
        if (stopped) return;
        failures = 0;
        setJob(view);
        setError(null);
        setLoaded(true);
        if (!TERMINAL.has(view.state)) {
          timer = setTimeout(read, view.state === "awaiting_approval" ? AWAITING_MS : POLL_MS);
        }
      } catch (e) {
        if (stopped) return;
        failures += 1;
        setError(e);
        setLoaded(true);
        const lasting = e && e.status >= 400 && e.status < 500 && e.status !== 429;
        if (!lasting && failures < MAX_FAILURES) timer = setTimeout(read, Math.min(30000, POLL_MS * 2 ** failures));
      }
    }
    read();
    return () => {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
    };
  }, [id, tick]);
  // `refresh(view)`: take a JobView the API just answered, and read on from there.
  const refresh = (view) => {
    if (view && view.id) setJob(view);
    setTick((t) => t + 1);
  };
  return { job, error, loaded, refresh };
}

/** The viewer, with its memberships in the job's organisation (read once per environment). */
function useViewer(job) {
  const [who, setWho] = useState(null);
  const path = job?.environment;
  useEffect(() => {
    if (!path) return undefined;
    let live = true;
    const org = String(path).split("/")[0];
    whoami(org).then(
      (w) => live && setWho(w),
      () => live && setWho({ subject: null, memberships: [] }),
    );
    return () => {
      live = false;
    };
  }, [path]);
  return who;
}

/** A reviewed job's phase in words (`crates/core/src/job/review.rs` `JobPhase`). */
function reviewText(phase) {
  if (phase === "plan") return "(reviewed: plan phase; applied only if a person approves the plan)";
  if (phase === "apply") return "(reviewed: approved; apply phase, the saved plan)";
  return `(reviewed: ${String(phase ?? "")} phase)`;
}

function Summary({ job }) {
  const runner = String(job.runner_id ?? "");
  const variables = Object.entries(job.variables && typeof job.variables === "object" ? job.variables : {});
  return html`<dl class="job-summary">
    <dt>State</dt>
    <dd><${StateWord} state=${job.state} test="job-state" />
      ${job.waiting?.text ? html` <span class="muted" data-test="job-waiting"><${Ticked} text=${job.waiting.text} /></span>` : null}</dd>
    <dt>Operation</dt>
    <dd data-test="job-operation">${String(job.operation ?? "")}${job.drift_check ? " (drift check)" : ""}${job.restore ? " (restore)" : ""}
      ${job.review ? html` <span class="muted">${reviewText(job.review.phase)}</span>` : null}</dd>
    <dt>Environment</dt>
    <dd><a data-test="job-env" href=${envHref(job.environment)}>${text(job.environment)}</a></dd>
    <dt>Runner</dt>
    <dd data-test="job-runner">${runner.includes("/") ? html`<a href=${groupHref(envGroup(runner))}>${text(runner)}</a>` : text(runner)}</dd>
    <dt>Source</dt>
    <dd data-test="job-source">${text(sourceText(job.source))}</dd>
    ${variables.length > 0
      ? html`<dt>Variables</dt>
          <dd><ul class="job-variables" data-test="job-variables">
            ${variables.map(([k, v]) => html`<li data-test="job-variable" data-name=${k}><code>${text(k)}</code> = <code>${valueText(v)}</code></li>`)}
          </ul></dd>`
      : null}
    ${job.tool_used ? html`<dt>Tool</dt><dd>${String(job.tool_used.tool)} ${String(job.tool_used.version)}</dd>` : null}
    ${job.cancel_requested_by ? html`<dt>Cancel</dt><dd>asked by ${text(job.cancel_requested_by)}</dd>` : null}
    ${(job.upload_problems ?? []).length > 0
      ? html`<dt>Upload problems</dt><dd>${job.upload_problems.map((p) => html`<div>${text(p)}</div>`)}</dd>`
      : null}
  </dl>`;
}

function Actions({ job, rights, onDecide, onCancel, cancelError, canceling }) {
  return html`<div class="job-actions">
    ${rights.awaiting &&
    html`<button type="button" class="button-primary" data-test="approve" disabled=${!rights.approve}
        aria-describedby=${rights.why.length > 0 ? "four-eyes" : undefined} onClick=${() => onDecide("approve")}>Approve</button>
      ${rights.discard ? html`<button type="button" class="button-danger" data-test="discard" onClick=${() => onDecide("discard")}>Discard</button>` : null}`}
    ${rights.cancel
      ? html`<button type="button" data-test="cancel-job" disabled=${canceling} onClick=${onCancel}>${canceling ? "Canceling…" : "Cancel job"}</button>`
      : null}
    ${rights.awaiting && rights.why.length > 0
      ? html`<div class="four-eyes" id="four-eyes" data-test="four-eyes">${rights.why.map((w) => html`<p>${w}</p>`)}</div>`
      : null}
    <${ErrorBox} error=${cancelError} />
  </div>`;
}

/** `#/jobs/<id>`. */
export function JobPage({ id }) {
  const { job, error, loaded, refresh } = useJob(id);
  const who = useViewer(job);
  const [decide, setDecide] = useState(null);
  const [cancelError, setCancelError] = useState(null);
  const [canceling, setCanceling] = useState(false);

  const onCancel = async () => {
    setCanceling(true);
    setCancelError(null);
    try {
      refresh(await api("POST", endpoints.cancel_job(id)));
    } catch (e) {
      setCancelError(e);
    }
    setCanceling(false);
  };

  const rights = job && who ? jobRights(job, who) : null;
  const outputsReady = job && job.operation === "apply" && job.state === "succeeded";
  return html`<section class="page job-page" data-test="job-page" data-job=${id} data-loaded=${loaded ? "true" : undefined}>
    <h1>Job <code>${id}</code></h1>
    <${ErrorBox} error=${error} />
    ${!loaded ? html`<p class="muted">Loading…</p>` : null}
    ${job &&
    html`<${Summary} job=${job} />
      ${rights
        ? html`<${Actions} job=${job} rights=${rights} onDecide=${setDecide} onCancel=${onCancel}
            cancelError=${cancelError} canceling=${canceling} />`
        : null}
      ${decide &&
      html`<${DecideDialog} id=${id} job=${job} verdict=${decide}
          onDone=${(view) => (setDecide(null), refresh(view))} onClose=${() => setDecide(null)} />`}
      <section class="card job-section">
        <h2>History</h2>
        <${People} job=${job} />
        <${Timeline} job=${job} />
      </section>
      <${Plan} job=${job} />
      <${Policy} policy=${job.policy} />
      <${Log} id=${id} state=${job.state} applyAt=${job.apply_log_offset} />
      ${outputsReady
        ? html`<${JobOutputs} id=${id} />`
        : html`<${Outputs} note="Only a succeeded apply has outputs." />`}`}
  </section>`;
}

function JobOutputs({ id }) {
  const [view, setView] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    api("GET", endpoints.get_job_outputs(id)).then(
      (v) => live && setView(v),
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [id]);
  return html`<${Outputs} view=${view} error=${error} note=${!view && !error ? "Loading the outputs…" : null} />`;
}
