// The lines of a followed log, kept bounded: parsed once into ANSI spans, in blocks so that
// only the newest block re-renders; the oldest blocks go once more than `max` lines are kept.
// Each line knows the byte offset it starts at, so the page can mark where the apply phase
// of a reviewed job starts (`apply_log_offset`).
import { parseAnsiFrom, plainState } from "./ansi.js";

/** The most lines kept (and so in the DOM). */
export const MAX_LINES = 20000;
/** Lines per block. */
export const BLOCK_LINES = 200;
/** The longest unfinished line kept before it is shown as a line of its own. */
export const MAX_PENDING = 64 * 1024;

// A line as a terminal leaves it: what follows its last carriage return.
function overwrite(line) {
  const s = line.endsWith("\r") ? line.slice(0, -1) : line;
  const i = s.lastIndexOf("\r");
  return i >= 0 ? s.slice(i + 1) : s;
}

/** The length of `s` in UTF-8 bytes. */
export function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/**
 * A log's lines: `blocks` of `{id, lines, prevAt}` (each line `{spans, at}`: its ANSI spans
 * and the byte offset it starts at; `prevAt` the offset of the line before the block) and
 * the unfinished line's spans.
 */
export class LogBuffer {
  constructor(max = MAX_LINES) {
    this.max = max;
    this.blocks = [];
    this.count = 0;
    this.dropped = 0;
    this.pending = "";
    this.pendingSpans = null;
    this.carry = plainState();
    this.nextId = 0;
    this.bytes = 0;
    this.lastAt = -1;
  }

  /** Appends log text (any split: lines may continue across calls). */
  push(data) {
    const parts = (this.pending + data).split("\n");
    this.pending = parts.pop();
    for (const raw of parts) this.addLine(raw);
    if (this.pending.length > MAX_PENDING) {
      this.addLine(this.pending, false);
      this.pending = "";
    }
    this.pendingSpans = this.pending === "" ? null : parseAnsiFrom(overwrite(this.pending), { ...this.carry });
    this.trim();
  }

  /** The log ended: its unfinished last line becomes a line. */
  end() {
    if (this.pending !== "") this.addLine(this.pending, false);
    this.pending = "";
    this.pendingSpans = null;
    this.trim();
  }

  addLine(raw, newline = true) {
    let last = this.blocks[this.blocks.length - 1];
    if (!last || last.lines.length >= BLOCK_LINES) {
      last = { id: this.nextId++, lines: [], prevAt: this.lastAt };
      this.blocks.push(last);
    }
    const at = this.bytes;
    this.bytes += utf8Length(raw) + (newline ? 1 : 0);
    this.lastAt = at;
    last.lines.push({ spans: parseAnsiFrom(overwrite(raw), this.carry), at });
    this.count++;
  }

  trim() {
    while (this.count > this.max && this.blocks.length > 1) {
      const first = this.blocks.shift();
      this.count -= first.lines.length;
      this.dropped += first.lines.length;
    }
  }
}
