// ANSI escapes in a log line -> spans of text with classes. Pure: no DOM.
//
// SGR (`ESC[...m`) sets colours (`ansi-fg-N` / `ansi-bg-N`, N 0-15, 8-15 bright) and
// `ansi-bold`, `ansi-dim`, `ansi-italic`, `ansi-underline`; 256-colour and truecolour map to
// the nearest of the 16. Every other escape (other CSI, OSC titles and hyperlinks, DCS, a
// lone ESC) and every other control character is dropped: never shown, never a link.

const ESC = 0x1b;

/** A fresh SGR state: no colour, no attribute. */
export function plainState() {
  return { fg: -1, bg: -1, bold: false, dim: false, italic: false, underline: false };
}

// The 16 colours as a light-on-dark terminal (xterm) has them, for nearest-colour matching.
const PALETTE = [
  [0, 0, 0], [205, 0, 0], [0, 205, 0], [205, 205, 0], [0, 0, 238], [205, 0, 205], [0, 205, 205], [229, 229, 229],
  [127, 127, 127], [255, 0, 0], [0, 255, 0], [255, 255, 0], [92, 92, 255], [255, 0, 255], [0, 255, 255], [255, 255, 255],
];

function nearest16(r, g, b) {
  let best = 0;
  let bestD = Infinity;
  for (let i = 0; i < 16; i++) {
    const [pr, pg, pb] = PALETTE[i];
    const d = (r - pr) ** 2 + (g - pg) ** 2 + (b - pb) ** 2;
    if (d < bestD) {
      bestD = d;
      best = i;
    }
  }
  return best;
}

/** xterm's 256-colour index -> the nearest of the 16 (-1 when out of range). */
export function from256(n) {
  if (!(n >= 0 && n <= 255)) return -1;
  if (n < 16) return n;
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return nearest16(v, v, v);
  }
  const c = n - 16;
  const step = (x) => (x === 0 ? 0 : 55 + x * 40);
  return nearest16(step(Math.floor(c / 36)), step(Math.floor(c / 6) % 6), step(c % 6));
}

const num = (p) => (p === "" ? 0 : Number(p));

// An RGB triple -> the nearest of the 16, or -1 when not three bytes.
function rgb(parts) {
  const ok = parts.length === 3 && parts.every((x) => Number.isInteger(x) && x >= 0 && x <= 255);
  return ok ? nearest16(parts[0], parts[1], parts[2]) : -1;
}

function setColour(st, code, colour) {
  if (code === 38) st.fg = colour;
  else st.bg = colour;
}

/** Applies the parameters of one SGR sequence (`"1;31"`, `"38;5;208"`, `"38:2::1:2:3"`) to `st`. */
export function applySgr(st, params) {
  const groups = params === "" ? ["0"] : params.split(";");
  for (let i = 0; i < groups.length; i++) {
    if (groups[i].includes(":")) {
      // Colon sub-parameters: `38:5:n`, `38:2:[colour space]:r:g:b`, `4:n` (underline style).
      const sub = groups[i].split(":").map(num);
      if (sub[0] === 38 || sub[0] === 48) {
        let colour = -1;
        if (sub[1] === 5) colour = from256(sub[2]);
        else if (sub[1] === 2) colour = rgb(sub.length >= 6 ? sub.slice(3, 6) : sub.slice(2, 5));
        setColour(st, sub[0], colour);
      } else if (sub[0] === 4) st.underline = sub[1] !== 0;
      continue;
    }
    const c = num(groups[i]);
    if (!Number.isInteger(c)) continue;
    if (c === 0) Object.assign(st, plainState());
    else if (c === 1) st.bold = true;
    else if (c === 2) st.dim = true;
    else if (c === 3) st.italic = true;
    else if (c === 4) st.underline = true;
    else if (c === 22) st.bold = st.dim = false;
    else if (c === 23) st.italic = false;
    else if (c === 24) st.underline = false;
    else if (c >= 30 && c <= 37) st.fg = c - 30;
    else if (c >= 90 && c <= 97) st.fg = c - 90 + 8;
    else if (c === 39) st.fg = -1;
    else if (c >= 40 && c <= 47) st.bg = c - 40;
    else if (c >= 100 && c <= 107) st.bg = c - 100 + 8;
    else if (c === 49) st.bg = -1;
    else if (c === 38 || c === 48) {
      const mode = num(groups[i + 1] ?? "");
      if (mode === 5) {
        setColour(st, c, from256(num(groups[i + 2] ?? "")));
        i += 2;
      } else if (mode === 2) {
        setColour(st, c, rgb(groups.slice(i + 2, i + 5).map(num)));
        i += 4;
      } else {
        i = groups.length; // unknown form: the rest cannot be read
      }
    }
    // Anything else (blink, inverse, fonts, ...) is ignored.
  }
}

/** The classes of a state, as one `class` attribute value ("" when plain). */
export function classesOf(st) {
  const out = [];
  if (st.fg >= 0) out.push(`ansi-fg-${st.fg}`);
  if (st.bg >= 0) out.push(`ansi-bg-${st.bg}`);
  if (st.bold) out.push("ansi-bold");
  if (st.dim) out.push("ansi-dim");
  if (st.italic) out.push("ansi-italic");
  if (st.underline) out.push("ansi-underline");
  return out.join(" ");
}

// The index after a string-type sequence (OSC, DCS, ...) that starts at `i`: after its BEL
// or ST (`ESC \` or U+009C), or the end of the text.
function skipString(text, i) {
  for (let j = i; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x07 || c === 0x9c) return j + 1;
    if (c === ESC && text.charCodeAt(j + 1) === 0x5c) return j + 2;
  }
  return text.length;
}

// A CSI from `i` (the first parameter byte): [index after it, SGR parameters or null].
function readCsi(text, i) {
  let j = i;
  while (j < text.length && text.charCodeAt(j) >= 0x30 && text.charCodeAt(j) <= 0x3f) j++;
  const params = text.slice(i, j);
  const midStart = j;
  while (j < text.length && text.charCodeAt(j) >= 0x20 && text.charCodeAt(j) <= 0x2f) j++;
  const final = j < text.length ? text.charCodeAt(j) : -1;
  if (final < 0x40 || final > 0x7e) {
    // Malformed or cut short: drop the introducer and what was read.
    return [j, null];
  }
  const sgr = final === 0x6d && j === midStart && /^[0-9;:]*$/.test(params);
  return [j + 1, sgr ? params : null];
}

/**
 * Parses one piece of text from SGR state `state` (changed in place; `plainState()` when
 * absent). Returns the spans `[{text, classes}]`, adjacent equal classes merged.
 */
export function parseAnsiFrom(text, state) {
  const st = state || plainState();
  const spans = [];
  let buf = "";
  let cls = classesOf(st);
  const flush = () => {
    if (buf === "") return;
    const last = spans[spans.length - 1];
    if (last && last.classes === cls) last.text += buf;
    else spans.push({ text: buf, classes: cls });
    buf = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === ESC || c === 0x9b || c === 0x9d || c === 0x90 || c === 0x98 || c === 0x9e || c === 0x9f) {
      let kind = c;
      let at = i + 1;
      if (c === ESC) {
        const n = text.charCodeAt(i + 1);
        if (n === 0x5b) kind = 0x9b; // [ -> CSI
        else if (n === 0x5d) kind = 0x9d; // ] -> OSC
        else if (n === 0x50 || n === 0x58 || n === 0x5e || n === 0x5f) kind = 0x90; // P X ^ _
        else {
          // A two-character (or intermediates + final) escape, or a lone ESC: dropped.
          let j = i + 1;
          while (j < text.length && text.charCodeAt(j) >= 0x20 && text.charCodeAt(j) <= 0x2f) j++;
          if (j < text.length && text.charCodeAt(j) >= 0x30 && text.charCodeAt(j) <= 0x7e) j++;
          i = j;
          continue;
        }
        at = i + 2;
      }
      if (kind === 0x9b) {
        const [next, params] = readCsi(text, at);
        if (params !== null) {
          flush();
          applySgr(st, params);
          cls = classesOf(st);
        }
        i = next;
      } else {
        i = skipString(text, at);
      }
      continue;
    }
    if ((c < 0x20 && c !== 0x09) || c === 0x7f || (c >= 0x80 && c < 0xa0)) {
      i++; // other control characters: dropped
      continue;
    }
    buf += text[i];
    i++;
  }
  flush();
  return spans;
}

/** Parses `text` from the plain state: `[{text, classes}]`, no escape left in any text. */
export function parseAnsi(text) {
  return parseAnsiFrom(String(text ?? ""), plainState());
}
