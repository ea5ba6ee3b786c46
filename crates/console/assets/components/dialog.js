// The approve / discard dialog: a native <dialog> opened with showModal, focus on the
// comment, Tab and Shift+Tab kept inside, Escape closes, Enter on confirm submits. The
// API's refusal shows in the dialog, as text.
import { html, useEffect, useRef, useState } from "../vendor/preact-htm-standalone.js";
import { api } from "../api.js";
import * as endpoints from "../endpoints.js";
import { ErrorBox, text as asText } from "./common.js";
import { setOutcome } from "./policy.js";
import { countsLine, jobSummary, words } from "../ui.js";

/** The longest comment the API takes, in bytes (crates/core DECISION_COMMENT_MAX). */
export const COMMENT_MAX = 1024;

const FOCUSABLE = "button:not([disabled]), textarea:not([disabled]), input:not([disabled]), [href], [tabindex]:not([tabindex='-1'])";

/** Tab / Shift+Tab wrap around inside `root`. */
function trapTab(e, root) {
  if (e.key !== "Tab" || !root) return;
  const items = [...root.querySelectorAll(FOCUSABLE)];
  if (items.length === 0) return;
  const first = items[0];
  const last = items[items.length - 1];
  const active = document.activeElement;
  if (e.shiftKey && (active === first || !root.contains(active))) {
    e.preventDefault();
    last.focus();
  } else if (!e.shiftKey && (active === last || !root.contains(active))) {
    e.preventDefault();
    first.focus();
  }
}

/** The policy result in words: its status, then each set's outcome (`denied: acme/tags denied (review)`). */
export function policyLine(policy) {
  if (!policy) return "no policy check";
  const sets = (Array.isArray(policy.sets) ? policy.sets : []).map(
    (s) => `${s.group ? `${s.group}/` : ""}${s.set ?? ""} ${setOutcome(s)} (${words(s.enforcement)})`,
  );
  return `${words(policy.status)}${sets.length ? `: ${sets.join(", ")}` : ""}`;
}

/** What a decision on `job` decides, as [test, name, value] rows: environment, requester, changes, policy. */
export function decisionFacts(job) {
  const j = job ?? {};
  return [
    ["decide-env", "Environment", String(j.environment ?? "")],
    ["decide-requester", "Requested by", String(j.requested_by ?? "")],
    ["decide-counts", "Changes", countsLine(jobSummary(j)) || "not reported"],
    ["decide-policy", "Policy", policyLine(j.policy)],
  ];
}

/**
 * `<dialog data-test=decide-dialog>` for `verdict` (`approve` | `discard`) on job `id`.
 * `onDone(jobView)` after the API accepted; `onClose()` when closed without a decision.
 */
export function DecideDialog({ id, job, verdict, onDone, onClose }) {
  const dialog = useRef(null);
  const comment = useRef(null);
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);

  useEffect(() => {
    // Focus goes back to what opened the dialog (the Approve or Discard button) when it closes.
    const opener = document.activeElement;
    const d = dialog.current;
    if (d && !d.open && typeof d.showModal === "function") d.showModal();
    if (comment.current) comment.current.focus();
    const closed = () => onClose();
    d?.addEventListener("close", closed);
    return () => {
      d?.removeEventListener("close", closed);
      if (d?.open) d.close();
      if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
    };
  }, []);

  const bytes = new TextEncoder().encode(text).length;
  const submit = async (e) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      // The API refuses control characters in a comment: line breaks become spaces.
      const comment = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
      const body = comment === "" ? {} : { comment };
      const path = verdict === "approve" ? endpoints.approve_job(id) : endpoints.discard_job(id);
      const view = await api("POST", path, body);
      onDone(view);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const title = verdict === "approve" ? "Approve this plan" : "Discard this plan";
  const explain =
    verdict === "approve"
      ? "A second task applies exactly the saved plan."
      : "The saved plan is thrown away and nothing is applied.";
  return html`<dialog class="decide-dialog" data-test="decide-dialog" data-verdict=${verdict} ref=${dialog}
      aria-labelledby="decide-title" onKeyDown=${(e) => trapTab(e, dialog.current)}>
    <form class="decide-form" onSubmit=${submit}>
      <h2 id="decide-title">${title}</h2>
      <p>${explain}</p>
      <dl class="decide-facts" data-test="decide-facts">
        ${decisionFacts(job).map(([test, name, value]) => html`<dt>${name}</dt><dd data-test=${test}>${asText(value)}</dd>`)}
      </dl>
      <label for="decide-comment">Comment (optional)</label>
      <textarea id="decide-comment" data-test="decide-comment" ref=${comment} rows="4" maxlength=${COMMENT_MAX}
        value=${text} onInput=${(e) => setText(e.currentTarget.value)}></textarea>
      <p class=${bytes > COMMENT_MAX ? "decide-count over" : "decide-count muted"}>${bytes} / ${COMMENT_MAX} bytes</p>
      <${ErrorBox} error=${error} />
      <div class="decide-buttons">
        <button type="button" data-test="decide-cancel" onClick=${() => dialog.current?.close()}>Cancel</button>
        <button type="submit" class=${verdict === "approve" ? "button-primary" : "button-danger"} data-test="decide-confirm" disabled=${busy}>
          ${verdict === "approve" ? "Approve" : "Discard"}
        </button>
      </div>
    </form>
  </dialog>`;
}
