// Tests of the console shell's pure functions (C2, issue 29): `node --test crates/console/js-tests/`.
// The pages themselves are tested in Chromium by scripts/console_test.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseRoute, mayDecide, roleOn, atLeast, envHref, groupHref, jobHref, t, valueText, cls } from "../assets/ui.js";
import { query, pool } from "../assets/api.js";
import * as endpoints from "../assets/endpoints.js";

test("routes: tree, env, job, group (root as -), sign-in, unknown", () => {
  assert.equal(parseRoute("").name, "tree");
  assert.equal(parseRoute("#/?q=pay&awaiting=1").params.get("awaiting"), "1");
  assert.deepEqual({ ...parseRoute("#/env/acme/pay%2Fments/prod") }.path, "acme/pay/ments/prod");
  assert.equal(parseRoute("#/jobs/01J%3Cx").id, "01J<x");
  assert.equal(parseRoute("#/groups/acme/payments").path, "acme/payments");
  assert.equal(parseRoute("#/groups/-").path, "");
  assert.equal(parseRoute("#/signin").name, "signin");
  assert.equal(parseRoute("#/nope").name, "missing");
  // A malformed escape does not throw: the segment stays as it is.
  assert.equal(parseRoute("#/env/acme/%E0%A4%A").path, "acme/%E0%A4%A");
});

test("links are internal routes with every segment encoded, and parse back", () => {
  const hostile = ['acme/"><img src=x onerror=alert(1)>', "javascript:alert(1)", "a b/c?d#e"];
  for (const p of hostile) {
    for (const href of [envHref(p), groupHref(p), jobHref(p)]) {
      assert.ok(href.startsWith("#/"), href);
      assert.ok(!/[<>"' ?#]/.test(href.slice(2)), href);
    }
    assert.equal(parseRoute(envHref(p)).path, p.split("/").filter(Boolean).join("/"));
    assert.equal(parseRoute(jobHref(p)).id, p.split("/").filter(Boolean).join("/"));
  }
  assert.equal(groupHref(""), "#/groups/-");
});

test("API path segments: root group is -, paths are one encoded segment; query skips empties", () => {
  assert.equal(endpoints.list_rules(endpoints.group("")), "/v1/groups/-/-/rules");
  assert.equal(endpoints.list_rules(endpoints.group("acme/payments")), "/v1/groups/acme%2Fpayments/-/rules");
  assert.equal(
    endpoints.check_runner(endpoints.group("acme"), "eu west"),
    "/v1/groups/acme/-/runners/eu%20west/check",
  );
  assert.equal(endpoints.get_environment("acme/p/prod"), "/v1/environments/acme%2Fp%2Fprod");
  assert.equal(endpoints.get_job("01J<x"), "/v1/jobs/01J%3Cx");
  assert.equal(endpoints.list_jobs("acme/p/prod") + query({ limit: 1 }), "/v1/environments/acme%2Fp%2Fprod/-/jobs?limit=1");
  assert.equal(query({ a: "x y", b: "", c: null, d: undefined, e: 0 }), "?a=x%20y&e=0");
  assert.equal(query({}), "");
});

test("roles hold on the group granted and below, root on everything", () => {
  const ms = [{ group: "acme/payments", role: "deployer" }, { group: "acme", role: "viewer" }];
  assert.equal(roleOn(ms, "acme/payments/eu"), "deployer");
  assert.equal(roleOn(ms, "acme/paymentsx"), "viewer");
  assert.equal(roleOn(ms, "other"), null);
  assert.equal(roleOn([{ group: "", role: "owner" }], "any/thing"), "owner");
  assert.ok(atLeast("maintainer", "deployer"));
  assert.ok(!atLeast("viewer", "deployer"));
  assert.ok(!atLeast(null, "viewer"));
});

test("awaiting my approval: awaiting, deployer or more, and not my own request under four eyes", () => {
  const me = { subject: "alice", memberships: [{ group: "acme", role: "deployer" }] };
  const job = (over) => ({ state: "awaiting_approval", requested_by: "bob", review: { four_eyes: true }, ...over });
  assert.ok(mayDecide(job({}), me, "acme/web"));
  assert.ok(!mayDecide(job({ requested_by: "alice" }), me, "acme/web"));
  assert.ok(mayDecide(job({ requested_by: "alice", review: { four_eyes: false } }), me, "acme/web"));
  assert.ok(!mayDecide(job({ state: "running" }), me, "acme/web"));
  assert.ok(!mayDecide(job({}), { subject: "carol", memberships: [{ group: "acme", role: "viewer" }] }, "acme/web"));
  assert.ok(!mayDecide(job({}), me, "other/web"));
  assert.ok(!mayDecide(null, me, "acme"));
});

test("display text: control characters become visible pictures, never raw", () => {
  assert.equal(t("\x1b[31mred\x1b[0m"), "\u241b[31mred\u241b[0m");
  assert.equal(t("a\tb\nc"), "a\tb\nc");
  assert.equal(t("nul\x00del\x7f"), "nul\u2400del\u2421");
  assert.equal(t(null), "");
  assert.ok(!/[\x00-\x08\x0b-\x1f\x7f]/.test(valueText({ k: "\x1b]8;;http://x\x07" })));
  assert.equal(valueText("<b>"), "<b>");
  assert.equal(cls('awaiting_approval" onclick="x'), "awaiting_approvalonclickx");
});

test("pool runs every item with bounded concurrency and keeps order and failures", async () => {
  let inFlight = 0;
  let most = 0;
  const out = await pool([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight--;
    if (n === 4) throw new Error("four");
    return n * 2;
  });
  assert.ok(most <= 3);
  assert.deepEqual(out.map((r) => (r.ok ? r.value : r.error.message)), [2, 4, 6, "four", 10, 12, 14]);
});

test("the resolution's tally reads as words: other rules by fate, nested counts named when not zero", async () => {
  const { countsText, otherRules, verdictText } = await import("../assets/pages/env.js");
  // The winner is not an "other rule"; fates with no rule are left out.
  assert.deepEqual(otherRules({ won: 1, outranked: { deeper_scope: 0 }, not_matched: { env_type: 0 }, out_of_scope: 0 }), []);
  assert.equal(countsText({ won: 1, runner_not_visible: 0 }), "none");
  assert.deepEqual(
    otherRules({ won: 1, outranked: { deeper_scope: 2, more_criteria: 0, rule_id: 1 }, not_matched: { env_type: 0, labels: 3 }, out_of_scope: 4 }),
    ["3 outranked by the winner (2 deeper scope, 1 rule id sorts first)", "3 did not match (3 labels)", "4 out of scope (not this group or above)"],
  );
  // A key the console does not know yet is still shown, in words.
  assert.deepEqual(otherRules({ new_fate: 2 }), ["2 new fate"]);
  assert.equal(countsText({}), "none");
  // Never raw JSON: no braces or quotes whatever the nesting.
  for (const line of otherRules({ outranked: { a: { b: 1 } }, x: 1 })) assert.doesNotMatch(line, /[{}"]/);
  assert.equal(verdictText({ outcome: "lost", to: "default", because: "deeper_scope" }), "lost to default: deeper_scope");
  assert.equal(verdictText({ outcome: "not_matched", reason: "env_type" }), "did not match: env_type");
  assert.equal(verdictText({ outcome: "out_of_scope" }), "out of scope");
});

test("organisations after sign-in: pinned alone, one opened, several linked, none asks", async () => {
  const { orgChoice, orgHref } = await import("../assets/ui.js");
  assert.deepEqual(orgChoice({ pinned: "acme", listed: ["globex", "initech"] }), { open: ["acme"], links: [], ask: false });
  assert.deepEqual(orgChoice({ listed: ["acme"], remembered: ["globex"] }), { open: ["acme"], links: [], ask: false });
  assert.deepEqual(
    orgChoice({ listed: ["acme", "globex", "acme"], remembered: ["globex"] }),
    { open: ["globex"], links: ["acme", "globex"], ask: false },
  );
  assert.deepEqual(orgChoice({ listed: [], fromRoles: ["acme"], remembered: ["acme", "x"] }), { open: ["acme", "x"], links: [], ask: false });
  assert.deepEqual(orgChoice({ listed: undefined }), { open: [], links: [], ask: true });
  assert.deepEqual(orgChoice({ listed: [null, 3, ""] }).ask, true);
  assert.equal(orgChoice({ remembered: Array.from({ length: 30 }, (_, i) => `o${i}`), max: 10 }).open.length, 10);
  assert.equal(orgHref('a"><b?c#d'), "#/?org=a%22%3E%3Cb%3Fc%23d");
});

test("the organisation picker shows only while no organisation is open, with a way back when there are several", async () => {
  const { orgPicker } = await import("../assets/ui.js");
  // Before whoami answers: nothing (no flash of the form).
  assert.deepEqual(orgPicker({}), { picker: false, switchLink: false });
  // Opening one: the picker is hidden at once; with one known organisation, no switch link.
  assert.deepEqual(orgPicker({ toOpen: ["acme"], known: 1 }), { picker: false, switchLink: false });
  assert.deepEqual(orgPicker({ done: true, toOpen: ["acme"], opened: 1, known: 1 }), { picker: false, switchLink: false });
  // Several known: a switch link, which brings the picker back.
  assert.deepEqual(orgPicker({ done: true, toOpen: ["acme"], opened: 1, known: 3 }), { picker: false, switchLink: true });
  assert.deepEqual(orgPicker({ done: true, toOpen: ["acme"], opened: 1, known: 3, switching: true }), { picker: true, switchLink: false });
  // Nothing to open, or nothing could be loaded: the picker.
  assert.deepEqual(orgPicker({ toOpen: [], known: 0 }), { picker: true, switchLink: false });
  assert.deepEqual(orgPicker({ done: true, toOpen: ["gone"], opened: 0, known: 2 }), { picker: true, switchLink: false });
});

test("backticked names in the API's sentences are split out as code, the rest stays text", async () => {
  const { tickSplit } = await import("../assets/ui.js");
  assert.deepEqual(tickSplit("rule `default` in `acme` wins"), [
    { text: "rule ", code: false }, { text: "default", code: true }, { text: " in ", code: false },
    { text: "acme", code: true }, { text: " wins", code: false },
  ]);
  assert.deepEqual(tickSplit("one ` stray"), [{ text: "one ` stray", code: false }]);
  assert.deepEqual(tickSplit(undefined), []);
  assert.deepEqual(tickSplit("`<b>`"), [{ text: "<b>", code: true }]);
});
