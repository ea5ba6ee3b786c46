// Small pieces the job page's components share; the console-wide ones come from ../ui.js
// (the shell's), so errors, links and times look the same on every page.
import { ErrorBanner, envHref, fmtTime, groupHref, t } from "../ui.js";

export { envHref, groupHref };

/** The error box: the API's message and the fields it names, as text (`[data-test=error]`). */
export const ErrorBox = ErrorBanner;

/** A time as `YYYY-MM-DD HH:MM:SS UTC`. */
export const when = fmtTime;

/** The most characters of one value shown; longer ones are cut, marked with `…`. */
export const VALUE_MAX = 4000;

/**
 * An API string as display text: control characters (an ESC from a log pasted into a name)
 * as their visible Control Pictures, as everywhere in the console (`ui.js` `t`).
 */
export const text = (v) => t(v).replace(/[\u0080-\u009f]/g, "\ufffd");

/**
 * A JSON value as compact text: a string as itself (control characters made visible),
 * anything else as compact JSON.
 */
export function valueText(v) {
  let s;
  if (typeof v === "string") s = text(v);
  else if (v === undefined) s = "";
  else {
    try {
      s = JSON.stringify(v);
    } catch {
      s = String(v);
    }
  }
  return s.length > VALUE_MAX ? `${s.slice(0, VALUE_MAX)}…` : s;
}

/** States after which nothing follows. */
export const TERMINAL = new Set(["succeeded", "failed", "canceled", "timed_out", "discarded"]);

/**
 * A job's source in words: `inline`, a git URL (as text, never a link) with its path and
 * ref, or a GitHub commit as `github:owner/name@<short sha>/path` (the Rust `Source::label`).
 */
export function sourceText(src) {
  if (!src || typeof src !== "object") return "";
  if (src.type === "github") {
    const path = String(src.path ?? "").replace(/^\/+|\/+$/g, "");
    const sha = String(src.commit ?? "").slice(0, 7);
    return `github:${String(src.repository ?? "")}@${sha}${path ? `/${path}` : ""}`;
  }
  if (src.type !== "git") return `${String(src.type ?? "")}${src.implicit ? " (the current folder)" : ""}`;
  const path = src.path ? ` //${String(src.path)}` : "";
  const ref = src.ref ? ` @ ${String(src.ref)}` : "";
  return `git ${String(src.url ?? "")}${path}${ref}`;
}
