// The policy gate's result on the job record: the overall status and each set's
// enforcement level, outcome and messages.
import { html } from "../vendor/preact-htm-standalone.js";
import { text, when } from "./common.js";
import { Ticked } from "../ui.js";

/** One set's outcome word: `denied` (a deny or an evaluation error), `warned` or `passed`. */
export function setOutcome(s) {
  if ((s.deny ?? []).length > 0 || s.error) return "denied";
  if ((s.warn ?? []).length > 0) return "warned";
  return "passed";
}

const list = (kind, messages) =>
  messages.length > 0 &&
  html`<ul class=${`policy-messages policy-${kind}`}>
    ${messages.map((m) => html`<li data-test="policy-message" data-kind=${kind}><span class="policy-kind">${kind}</span> ${text(m)}</li>`)}
  </ul>`;

/** `[data-test=policy]`: the result, or a note that no policy check ran. */
export function Policy({ policy }) {
  if (!policy) {
    return html`<section class="card job-section" data-test="policy"><h2>Policy</h2><p class="muted">No policy check on this job.</p></section>`;
  }
  const sets = Array.isArray(policy.sets) ? policy.sets : [];
  return html`<section class="card job-section" data-test="policy" data-status=${String(policy.status ?? "")}>
    <h2>Policy</h2>
    <p>
      <span class=${`policy-status policy-${String(policy.status ?? "")}`} data-test="policy-status">${String(policy.status ?? "")}</span>
      ${" "}checked ${when(policy.checked_at)}
      ${policy.reason ? html`: <span class="policy-reason"><${Ticked} text=${policy.reason} /></span>` : null}
    </p>
    ${sets.length === 0 ? html`<p class="muted">No policy set applies.</p>` : null}
    <ul class="policy-sets">
      ${sets.map((s) => {
        const outcome = setOutcome(s);
        return html`<li class=${`policy-result policy-${outcome}`} data-test="policy-result" data-set=${String(s.set ?? "")} data-outcome=${outcome}>
          <span class="policy-set">${text(s.group ? `${s.group}/${s.set}` : s.set)}</span>
          ${" "}<span class="policy-enforcement" data-test="policy-enforcement">${String(s.enforcement ?? "")}</span>
          ${" "}<span class="policy-outcome">${outcome}</span>
          ${s.error ? list("error", [s.error]) : null}
          ${list("deny", s.deny ?? [])}
          ${list("warn", s.warn ?? [])}
        </li>`;
      })}
    </ul>
  </section>`;
}
