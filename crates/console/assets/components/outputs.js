// A succeeded apply's outputs (`GET /v1/jobs/{id}/outputs`): sensitive ones never show a value.
import { html } from "../vendor/preact-htm-standalone.js";
import { ErrorBox, text, valueText } from "./common.js";

/** `[data-test=job-outputs]` from an OutputsView (`{outputs: {name: {sensitive, value}}}`). */
export function Outputs({ view, error, note }) {
  const entries = Object.entries(view?.outputs ?? {});
  return html`<section class="card job-section" data-test="job-outputs">
    <h2>Outputs</h2>
    <${ErrorBox} error=${error} />
    ${note ? html`<p class="muted">${note}</p>` : null}
    ${view && entries.length === 0 ? html`<p class="muted">This apply has no outputs.</p>` : null}
    ${entries.length > 0 &&
    html`<table class="outputs">
      <tbody>
        ${entries.map(
          ([name, o]) => html`<tr data-test="output" data-name=${name}>
            <th scope="row">${text(name)}</th>
            <td>
              ${o?.sensitive
                ? html`<span class="sensitive" data-test="output-sensitive">(sensitive)</span>`
                : html`<code class="output-value">${valueText(o?.value)}</code>`}
            </td>
          </tr>`,
        )}
      </tbody>
    </table>`}
  </section>`;
}
