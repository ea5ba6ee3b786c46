// The job's transitions as a timeline, and who requested and who decided.
import { html } from "../vendor/preact-htm-standalone.js";
import { text, when } from "./common.js";
import { StateWord, Ticked } from "../ui.js";

/** The transitions, oldest first: from -> to, when, why (folded repeats counted). */
export function Timeline({ job }) {
  const transitions = Array.isArray(job.transitions) ? job.transitions : [];
  const dropped = job.transitions_dropped || 0;
  return html`<ol class="timeline" data-test="timeline">
    ${transitions.map(
      (t, i) => html`<li class="transition" data-test="transition" data-to=${String(t.to ?? "")}>
          <span class="transition-states">
            ${t.from ? html`<${StateWord} state=${t.from} /> → ` : null}
            <${StateWord} state=${t.to} />
          </span>
          <time class="transition-at">${when(t.at)}</time>
          ${t.count > 1 ? html`<span class="transition-count">×${t.count} (last ${when(t.last_at)})</span>` : null}
          <span class="transition-reason"><${Ticked} text=${t.reason} /></span>
        </li>
        ${i === 0 && dropped > 0
          ? html`<li class="transition-dropped">${dropped} earlier transitions not kept</li>`
          : null}`,
    )}
  </ol>`;
}

/** Who requested the job and, once made, the decision (who, when, verdict, comment). */
export function People({ job }) {
  const d = job.review?.decision;
  return html`<dl class="job-people">
    <dt>Requested by</dt>
    <dd data-test="requested-by">${text(job.requested_by)}</dd>
    ${d &&
    html`<dt>Decided by</dt>
      <dd data-test="decided-by" data-verdict=${String(d.verdict ?? "")}>
        <span class="decision-by">${text(d.by)}</span>
        ${" "}<span class="decision-verdict">${String(d.verdict ?? "")}</span>
        ${" "}<time>${when(d.at)}</time>
        ${d.overrode_policy ? html` <span class="decision-override">(overrode policy)</span>` : null}
        ${d.comment ? html`<blockquote class="decision-comment">${text(d.comment)}</blockquote>` : null}
      </dd>`}
  </dl>`;
}
