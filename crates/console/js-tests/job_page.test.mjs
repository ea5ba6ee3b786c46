// Tests of the job page's pure functions (C3, issue 29): `node --test crates/console/js-tests/`.
// The page itself (DOM, polling, the dialog) is tested in Chromium by scripts/console_test.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseAnsi, from256 } from "../assets/components/ansi.js";
import { LogBuffer, utf8Length } from "../assets/components/logbuffer.js";
import { jobRights, roleOn, groupContains, envGroup } from "../assets/components/rights.js";
import { groupByAction, summaryLine, hasPlan, withUnknowns, attrSymbol, UNKNOWN } from "../assets/components/plan.js";
import { setOutcome } from "../assets/components/policy.js";
import { sourceText, valueText } from "../assets/components/common.js";
import { isFollowing, nextRead, POLL_MS, WAITING_MS, HIDDEN_MS, BIG_PAGE } from "../assets/components/follow.js";

const E = "\x1b";
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/;

test("SGR colours and attributes become classes, reset clears them", () => {
  assert.deepEqual(parseAnsi("plain"), [{ text: "plain", classes: "" }]);
  assert.deepEqual(parseAnsi(`${E}[31mred${E}[0m ok`), [
    { text: "red", classes: "ansi-fg-1" },
    { text: " ok", classes: "" },
  ]);
  assert.deepEqual(parseAnsi(`${E}[1;92mB${E}[22mx`), [
    { text: "B", classes: "ansi-fg-10 ansi-bold" },
    { text: "x", classes: "ansi-fg-10" },
  ]);
  assert.deepEqual(parseAnsi(`${E}[2;3;4;41mX${E}[mY`), [
    { text: "X", classes: "ansi-bg-1 ansi-dim ansi-italic ansi-underline" },
    { text: "Y", classes: "" },
  ]);
});

test("256-colour and truecolour map to the nearest of the 16", () => {
  assert.deepEqual(parseAnsi(`${E}[38;5;196mX`), [{ text: "X", classes: "ansi-fg-9" }]);
  assert.deepEqual(parseAnsi(`${E}[38;2;0;0;0;44mX`), [{ text: "X", classes: "ansi-fg-0 ansi-bg-4" }]);
  assert.deepEqual(parseAnsi(`${E}[38:2::255:0:0mX`), [{ text: "X", classes: "ansi-fg-9" }]);
  assert.equal(from256(15), 15);
  assert.equal(from256(16), 0);
  assert.equal(from256(231), 15);
  assert.equal(from256(300), -1);
});

test("every other escape is dropped, never shown and never a link", () => {
  assert.deepEqual(parseAnsi(`a${E}[2Kb${E}[10;5Hc${E}[?25ld`), [{ text: "abcd", classes: "" }]);
  assert.deepEqual(parseAnsi(`${E}]8;;javascript:alert(1)${E}\\click${E}]8;;${E}\\ me`), [{ text: "click me", classes: "" }]);
  assert.deepEqual(parseAnsi(`${E}]0;title\x07x`), [{ text: "x", classes: "" }]);
  assert.deepEqual(parseAnsi(`x${E}`), [{ text: "x", classes: "" }]);
  assert.deepEqual(parseAnsi(`x${E}(By`), [{ text: "xy", classes: "" }]);
  assert.deepEqual(parseAnsi(`x${E}]8;;http://e unterminated`), [{ text: "x", classes: "" }]);
  assert.deepEqual(parseAnsi(`x\u009b31my`), [{ text: "x", classes: "" }, { text: "y", classes: "ansi-fg-1" }]);
  // Markup stays text: rendering it is Preact's text nodes' job.
  assert.deepEqual(parseAnsi(`<img src=x onerror=alert(1)>\tz\x07`), [{ text: "<img src=x onerror=alert(1)>\tz", classes: "" }]);
});

test("random escape soup never leaves a control character or a stray class", () => {
  const alphabet = [0x1b, 0x5b, 0x5d, 0x6d, 0x3b, 0x31, 0x07, 0x5c, 0x9b, 0x41, 0x3a, 0x38, 0x35, 0x32];
  let seed = 29;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
  for (let k = 0; k < 20000; k++) {
    let s = "";
    for (let j = rand(40); j > 0; j--) s += String.fromCharCode(alphabet[rand(alphabet.length)]);
    for (const span of parseAnsi(s)) {
      assert.ok(!CONTROL.test(span.text), JSON.stringify(s));
      assert.match(span.classes, /^(ansi-(fg|bg)-(1[0-5]|[0-9])|ansi-(bold|dim|italic|underline)| )*$/);
    }
  }
});

test("the log buffer joins split lines, carries colour across lines and stays bounded", () => {
  const b = new LogBuffer(1000);
  const spans = () => b.blocks.flatMap((x) => x.lines).map((l) => l.spans);
  b.push(`a${E}[31mre`);
  b.push(`d\nstill red${E}[0m\npart`);
  assert.deepEqual(spans()[0], [{ text: "a", classes: "" }, { text: "red", classes: "ansi-fg-1" }]);
  assert.deepEqual(spans()[1], [{ text: "still red", classes: "ansi-fg-1" }]);
  assert.deepEqual(b.pendingSpans, [{ text: "part", classes: "" }]);
  b.push("ial\r\nprogress 10%\rprogress 100%\n");
  assert.equal(spans()[2][0].text, "partial");
  assert.equal(spans()[3][0].text, "progress 100%");
  for (let i = 0; i < 5000; i++) b.push(`line ${i}\n`);
  assert.ok(b.count <= 1000 && b.count > 800, String(b.count));
  assert.equal(b.count + b.dropped, 5004);
  assert.equal(spans().at(-1)[0].text, "line 4999");
  b.push("tail");
  b.end();
  assert.equal(b.pendingSpans, null);
  assert.equal(spans().at(-1)[0].text, "tail");
});

test("each line knows the byte offset it starts at (UTF-8), across blocks", () => {
  assert.equal(utf8Length("aé€😀"), 1 + 2 + 3 + 4);
  const b = new LogBuffer(100000);
  const text = "plan é\n€ done\n" + "x\n".repeat(300) + "apply 😀\n";
  // Any split of the text gives the same offsets.
  for (let i = 0; i < text.length; i += 7) b.push(text.slice(i, i + 7));
  const lines = b.blocks.flatMap((x) => x.lines);
  const bytes = new TextEncoder().encode(text);
  for (const l of lines) {
    const rest = new TextDecoder().decode(bytes.slice(l.at));
    assert.ok(rest.startsWith(l.spans.map((s) => s.text).join("")), `line at ${l.at}`);
  }
  assert.equal(lines.at(-1).at, bytes.length - utf8Length("apply 😀\n"));
  assert.equal(b.blocks[1].prevAt, b.blocks[0].lines.at(-1).at);
  assert.equal(b.blocks[0].prevAt, -1);
});

const who = (subject, memberships) => ({ subject, memberships });
const awaiting = { environment: "acme/web/prod", state: "awaiting_approval", requested_by: "alice", review: { four_eyes: true } };

test("roles hold on the group and below", () => {
  assert.ok(groupContains("", "acme/x"));
  assert.ok(groupContains("acme", "acme/x"));
  assert.ok(!groupContains("ac", "acme"));
  assert.equal(envGroup("acme/web/prod"), "acme/web");
  const w = who("a", [{ group: "acme", role: "deployer" }, { group: "acme/web", role: "viewer" }]);
  assert.equal(roleOn(w, "acme/web"), "deployer");
  assert.equal(roleOn(w, "other"), null);
});

test("four eyes: the requester may discard but not approve; another deployer may approve", () => {
  let r = jobRights(awaiting, who("alice", [{ group: "acme", role: "deployer" }]));
  assert.deepEqual([r.approve, r.discard, r.cancel], [false, true, true]);
  assert.match(r.why[0], /four eyes/);
  r = jobRights(awaiting, who("bob", [{ group: "acme", role: "deployer" }]));
  assert.deepEqual([r.approve, r.why.length], [true, 0]);
  r = jobRights({ ...awaiting, review: { four_eyes: false } }, who("alice", [{ group: "", role: "owner" }]));
  assert.equal(r.approve, true);
  // Four eyes is the job's, taken at submit: a job without it may be approved by its requester.
  r = jobRights({ ...awaiting, review: undefined }, who("alice", [{ group: "acme", role: "owner" }]));
  assert.equal(r.approve, true);
});

test("a viewer may not decide or cancel; a review-level deny needs manage to approve", () => {
  let r = jobRights(awaiting, who("bob", [{ group: "acme", role: "viewer" }]));
  assert.deepEqual([r.approve, r.discard, r.cancel], [false, false, false]);
  assert.match(r.why[0], /deployer role/);
  const policy = { sets: [{ set: "s", enforcement: "review", deny: ["no"], warn: [] }] };
  r = jobRights({ ...awaiting, policy }, who("bob", [{ group: "acme", role: "deployer" }]));
  assert.equal(r.approve, false);
  assert.match(r.why[0], /maintainer/);
  r = jobRights({ ...awaiting, policy }, who("bob", [{ group: "acme", role: "maintainer" }]));
  assert.equal(r.approve, true);
  r = jobRights({ ...awaiting, state: "succeeded" }, who("bob", [{ group: "acme", role: "owner" }]));
  assert.deepEqual([r.approve, r.discard, r.cancel], [false, false, false]);
});

test("the plan groups by action in order and sums as Terraform does", () => {
  const rc = (address, action) => ({ address, action, changes: [], replace_paths: [] });
  const groups = groupByAction([rc("a", "delete"), rc("b", "create"), rc("c", "no-op"), rc("d", "replace"), rc("e", "create")]);
  assert.deepEqual(groups.map((g) => [g.action, g.resources.map((r) => r.address)]), [
    ["create", ["b", "e"]],
    ["replace", ["d"]],
    ["delete", ["a"]],
    ["no-op", ["c"]],
  ]);
  assert.equal(summaryLine({ create: 2, update: 1, delete: 1, replace: 1, read: 0, no_op: 1 }), "3 to add, 1 to change, 2 to destroy");
  assert.equal(summaryLine(undefined), "0 to add, 0 to change, 0 to destroy");
});

test("a plan is asked for once the job may have one (issue 47 item 3)", () => {
  assert.equal(hasPlan({ state: "queued", operation: "apply" }), false);
  assert.equal(hasPlan({ state: "dispatching", operation: "plan" }), false);
  assert.equal(hasPlan({ state: "awaiting_approval", operation: "apply" }), true);
  assert.equal(hasPlan({ state: "succeeded", operation: "apply", plan_phase: {} }), true);
  assert.equal(hasPlan({ state: "succeeded", operation: "plan", summary: { add: 1 } }), true);
  // An apply with approval `auto` uploads its plan while it runs...
  assert.equal(hasPlan({ state: "running", operation: "apply" }), true);
  // ...and a policy-denied apply keeps the plan it was denied for.
  const denied = { state: "failed", operation: "apply", review: { phase: "plan" }, policy: { status: "denied", sets: [] } };
  assert.equal(hasPlan(denied), true);
  assert.equal(hasPlan({ state: "succeeded", operation: "apply" }), true);
  // A job that failed before it ran is asked once: the API's 404 says "none".
  assert.equal(hasPlan({ state: "failed", operation: "plan" }), true);
});

test("a policy set's outcome", () => {
  assert.equal(setOutcome({ deny: [], warn: [] }), "passed");
  assert.equal(setOutcome({ deny: [], warn: ["w"] }), "warned");
  assert.equal(setOutcome({ deny: ["d"], warn: ["w"] }), "denied");
  assert.equal(setOutcome({ deny: [], warn: [], error: "timeout" }), "denied");
});

test("a value shows control characters as visible pictures and anything but a string as compact JSON", () => {
  assert.equal(valueText("\x1b[31mred\x07"), "\u241b[31mred\u2407");
  assert.equal(valueText("a\tb\nc"), "a\tb\nc");
  assert.equal(valueText("c1\u009bx"), "c1\ufffdx");
  assert.equal(valueText({ a: [1, "<i>"] }), '{"a":[1,"<i>"]}');
  assert.equal(valueText(null), "null");
  assert.equal(valueText("x".repeat(5000)).length, 4001);
});

test("following shows only while a runner runs a phase and the log is read live", () => {
  assert.equal(isFollowing("running", true), true);
  for (const state of ["queued", "dispatching", "awaiting_approval", "succeeded", "failed", "canceled", "timed_out", "discarded"]) {
    assert.equal(isFollowing(state, true), false, state);
  }
  assert.equal(isFollowing("running", false), false);
});

test("the log is read often while running, slower while waiting, not at all while awaiting approval", () => {
  const at = (state, bytes, more = true, hidden = false) => nextRead({ state, more, bytes, hidden });
  assert.equal(at("running", 0), POLL_MS);
  assert.equal(at("running", 10), POLL_MS);
  assert.equal(at("running", BIG_PAGE), 0);
  assert.equal(at("queued", 0), WAITING_MS);
  assert.equal(at("dispatching", 0), WAITING_MS);
  assert.ok(WAITING_MS > POLL_MS);
  // Awaiting approval: the rest of the plan's log is read, then nothing until the state changes.
  assert.equal(at("awaiting_approval", 100), POLL_MS);
  assert.equal(at("awaiting_approval", 0), null);
  // A complete log is never read again, whatever the state.
  for (const state of ["running", "succeeded", "awaiting_approval"]) assert.equal(at(state, 5, false), null);
  // A hidden page reads at most every HIDDEN_MS.
  assert.equal(at("running", 0, true, true), HIDDEN_MS);
  assert.equal(at("running", BIG_PAGE, true, true), HIDDEN_MS);
});

test("a source in words: a GitHub commit by its short sha and path, git and inline as before", () => {
  const sha = "0123456789abcdef0123456789abcdef01234567";
  assert.equal(sourceText({ type: "github", repository: "acme/infra", commit: sha }), "github:acme/infra@0123456");
  assert.equal(sourceText({ type: "github", repository: "acme/infra", commit: sha, path: "stacks/app" }), "github:acme/infra@0123456/stacks/app");
  assert.equal(sourceText({ type: "git", url: "https://h/r.git", path: "a", ref: "main" }), "git https://h/r.git //a @ main");
  assert.equal(sourceText({ type: "inline", implicit: true }), "inline (the current folder)");
  assert.equal(sourceText(null), "");
});

test("a value known only in part after apply says which part, never null (issue 47 item 5)", () => {
  // `+ buckets = [null,null]` was shown where Terraform says `(known after apply)`.
  assert.equal(withUnknowns([null, null], ["0", "1"]), `[${UNKNOWN},${UNKNOWN}]`);
  assert.equal(withUnknowns([null, "b"], ["0"]), `[${UNKNOWN},"b"]`);
  assert.equal(withUnknowns({ a: null, n: 2, deep: { x: null } }, ["a", "deep.x"]),
    `{"a":${UNKNOWN},"n":2,"deep":{"x":${UNKNOWN}}}`);
  // A part below something that is not a collection: all of it is unknown.
  assert.equal(withUnknowns(null, ["0"]), UNKNOWN);
  // No path: the value as compact JSON; hostile text stays text.
  assert.equal(withUnknowns({ k: "v" }, []), `{"k":"v"}`);
  assert.ok(!CONTROL.test(withUnknowns([`${E}[31m`, null], ["1"])));
  assert.ok(withUnknowns(["x".repeat(5000), null], ["1"]).endsWith("…"));
  // Linear: 10,000 unknown elements, one set lookup each.
  const many = Array.from({ length: 10000 }, (_, i) => String(i));
  const shown = withUnknowns(new Array(10000).fill(null), many);
  assert.ok(shown.startsWith(`[${UNKNOWN},${UNKNOWN}`));
  assert.equal(withUnknowns("x", []), `"x"`);
});

test("each attribute and output line carries Terraform's symbol: a removed output reads -", () => {
  assert.equal(attrSymbol("delete", { before: "x", after: null }), "-");
  assert.equal(attrSymbol("create", { before: null, after: "x" }), "+");
  assert.equal(attrSymbol("update", { before: "x", after: "y" }), "~");
  assert.equal(attrSymbol("update", { before: "x", after: null }), "-");
  assert.equal(attrSymbol("update", { before: null, after: "y" }), "+");
  assert.equal(attrSymbol("update", { before: "x", after: null, after_unknown: true }), "~");
  assert.equal(attrSymbol("update", { before: "x", after: [null], unknown_paths: ["0"] }), "~");
  assert.equal(attrSymbol("read", { before: null, after: "x" }), "+");
});
