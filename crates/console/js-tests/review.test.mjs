// Tests of issue 47's console items (3, 8, 9, 10): rights as the API's actions need them,
// API messages with code and one time format, state words, the approve dialog's facts, the
// jobs table's summary and failure reason, the policy sets in force and the expiry's source.
// `node --test crates/console/js-tests/`; the pages themselves: scripts/console_review.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ACTION_ROLE, manageAction, may, words, timesIn, tickSplit, jobSummary, countsLine, failureReason, clip,
  ErrorBanner, Ticked, StateWord,
} from "../assets/ui.js";
import { decisionFacts, policyLine } from "../assets/components/dialog.js";

const { checkRight } = await import("../assets/pages/group.js");
const { ancestry, criteriaMatch, setsInForce, expirySource } = await import("../assets/pages/env_review.js");

const carol = { subject: "carol", memberships: [{ group: "acme", role: "deployer" }] };
const bob = { subject: "bob", memberships: [{ group: "acme", role: "maintainer" }] };

test("each API action needs the role crates/core/src/auth.rs names", () => {
  assert.deepEqual(ACTION_ROLE, { read: "viewer", deploy: "deployer", manage: "maintainer", administer: "owner" });
  assert.equal(manageAction("acme"), "manage");
  assert.equal(manageAction(""), "administer");
  assert.equal(may(carol.memberships, "deploy", "acme/web"), true);
  assert.equal(may(carol.memberships, "manage", "acme/web"), false);
  assert.equal(may(bob.memberships, "manage", "acme/web"), true);
  assert.equal(may(bob.memberships, "read", "other"), false);
  assert.equal(may(undefined, "read", "acme"), false);
});

test("a runner check is offered only to a role that may manage the runner's group (item 8)", () => {
  assert.deepEqual(checkRight(carol.memberships, "acme"), { allowed: false, need: "maintainer" });
  assert.deepEqual(checkRight(bob.memberships, "acme"), { allowed: true, need: "maintainer" });
  // A shared runner of the root group: administer, the owner role there.
  assert.deepEqual(checkRight(bob.memberships, ""), { allowed: false, need: "owner" });
  assert.deepEqual(checkRight([{ group: "", role: "owner" }], ""), { allowed: true, need: "owner" });
});

/** Every vnode under `node` (children followed through props). */
function* walk(node) {
  if (node === null || node === undefined || typeof node !== "object") return;
  if (Array.isArray(node)) {
    for (const n of node) yield* walk(n);
    return;
  }
  yield node;
  yield* walk(node.props && node.props.children);
}

test("an API message shows its backticked names as code, never literal backticks (item 8)", () => {
  const error = { message: "to check runner `acme/local` you need the `maintainer` role", fields: [{ field: "x", problem: "names `y`" }] };
  const nodes = [...walk(ErrorBanner({ error }))];
  const ticked = nodes.filter((n) => n.type === Ticked).map((n) => n.props.text);
  assert.deepEqual(ticked, [error.message, "names `y`"]);
  const parts = Ticked({ text: error.message });
  assert.ok(parts.every((p) => typeof p !== "string" || !p.includes("`")), JSON.stringify(parts));
  assert.deepEqual(parts.filter((p) => typeof p === "object").map((p) => p.type), ["code", "code"]);
});

test("times in the API's sentences take the console's one format (item 9)", () => {
  assert.equal(timesIn("locked at 2026-11-29T12:10:38.123456789Z by bob"), "locked at 2026-11-29 12:10:38 UTC by bob");
  assert.equal(timesIn("until 2026-11-29T13:10:38+01:00."), "until 2026-11-29 12:10:38 UTC.");
  assert.equal(timesIn("no time here"), "no time here");
  assert.equal(timesIn(undefined), "");
  assert.deepEqual(tickSplit(timesIn("`a` at 2026-01-02T03:04:05Z")), [
    { text: "a", code: true }, { text: " at 2026-01-02 03:04:05 UTC", code: false },
  ]);
});

test("states show in words, the exact word kept as data-state (item 9)", () => {
  assert.equal(words("awaiting_approval"), "awaiting approval");
  assert.equal(words("timed_out"), "timed out");
  assert.equal(words(undefined), "");
  const v = StateWord({ state: "awaiting_approval", test: "job-state" });
  assert.equal(v.props["data-state"], "awaiting_approval");
  assert.equal(v.props["data-test"], "job-state");
  assert.deepEqual([...walk(v)].map((n) => n.props.children).flat().filter((c) => typeof c === "string"), ["awaiting approval"]);
});

test("a job's change summary and failure reason (item 10)", () => {
  assert.equal(countsLine(jobSummary({ summary: { add: 1, change: 0, destroy: 2 } })), "+1 ~0 -2");
  assert.equal(countsLine(jobSummary({ plan_phase: { summary: { add: 3, change: 1, destroy: 0 } } })), "+3 ~1 -0");
  assert.equal(countsLine(jobSummary({})), "");
  const failed = {
    state: "failed",
    transitions: [{ to: "queued", reason: "submitted" }, { to: "running", reason: "launched" }, { to: "failed", reason: "policy_denied: acme/no-create: <b>x</b> would be created" }],
  };
  assert.equal(failureReason(failed), "policy_denied: acme/no-create: <b>x</b> would be created");
  assert.equal(failureReason({ ...failed, state: "succeeded" }), "");
  assert.equal(failureReason({ state: "timed_out", transitions: [] }), "");
  assert.equal(clip("abcdef", 4), "abc…");
  assert.equal(clip("abc", 4), "abc");
});

test("the approve dialog names the environment, the requester, the counts and the policy result (item 10)", () => {
  const job = {
    environment: "acme/web/review",
    requested_by: "alice",
    plan_phase: { summary: { add: 2, change: 0, destroy: 0 } },
    policy: { status: "warned", sets: [{ group: "acme", set: "tags", enforcement: "advisory", deny: [], warn: ["w"] }] },
  };
  assert.deepEqual(decisionFacts(job), [
    ["decide-env", "Environment", "acme/web/review"],
    ["decide-requester", "Requested by", "alice"],
    ["decide-counts", "Changes", "+2 ~0 -0"],
    ["decide-policy", "Policy", "warned: acme/tags warned (advisory)"],
  ]);
  assert.equal(policyLine(null), "no policy check");
  assert.equal(decisionFacts({})[2][2], "not reported");
});

test("the policy sets in force: the ancestry's sets whose criteria match (item 10)", () => {
  assert.deepEqual(ancestry("acme/web"), ["", "acme", "acme/web"]);
  assert.deepEqual(ancestry(""), [""]);
  const env = { env_type: "staging", labels: { policy: "deny", team: "web" } };
  assert.equal(criteriaMatch(undefined, env), true);
  assert.equal(criteriaMatch({ env_types: ["production"] }, env), false);
  assert.equal(criteriaMatch({ env_types: ["staging"], labels: { policy: "deny" } }, env), true);
  assert.equal(criteriaMatch({ labels: { policy: "other" } }, env), false);
  assert.equal(criteriaMatch({ labels: { toString: "x" } }, env), false);
  const listings = [
    { group: "acme", policy_sets: [
      { version: 1, set: { name: "no-create", enforcement: "mandatory", criteria: { labels: { policy: "deny" } } } },
      { version: 2, set: { name: "prod-only", enforcement: "review", criteria: { env_types: ["production"] } } },
    ] },
    { group: "acme/web", policy_sets: [{ version: 3, set: { name: "all", enforcement: "advisory" } }] },
  ];
  assert.deepEqual(setsInForce(listings, env).map((s) => `${s.group}/${s.name} ${s.enforcement} v${s.version}`), [
    "acme/no-create mandatory v1", "acme/web/all advisory v3",
  ]);
});

test("an environment's expiry says where it comes from (items 2 and 10)", () => {
  const at = "2026-12-01T00:00:00Z";
  assert.equal(expirySource({ expires_at: at, expiry: { at, source: "expires_at" } }).kind, "fixed");
  assert.equal(expirySource({ ttl: "3d", ttl_from: "last_apply", expiry: { at, source: "ttl", ttl: "3d" } }).text, "this environment's TTL of 3d, counted from last apply");
  assert.equal(expirySource({ expiry: { at, source: "group_default", ttl: "3d", group: "acme/web" } }).text, "the default TTL of 3d set on group acme/web");
  assert.equal(expirySource({ expiry: { at, source: "group_default", ttl: "7d", group: "acme", extended: true } }).text, "the default TTL of 7d set on group acme, extended");
  // A group's default that does not reach it (set after it was created) gives no end.
  assert.equal(expirySource({}).kind, "none");
  assert.equal(expirySource({ destroyed: { at } }).kind, "destroyed");
});

test("a runner's identity block reads as its audience and each cloud's roles", async () => {
  const { identityParts } = await import("../assets/pages/group.js");
  assert.deepEqual(identityParts(undefined), []);
  assert.deepEqual(
    identityParts({
      audience: "sts.amazonaws.com",
      aws: { plan_role_arn: "arn:aws:iam::1:role/read", apply_role_arn: "arn:aws:iam::1:role/write" },
      azure: { client_id: "c", tenant_id: "t" },
    }),
    [
      "audience sts.amazonaws.com",
      "AWS plan role arn:aws:iam::1:role/read",
      "AWS apply role arn:aws:iam::1:role/write",
      "Azure client c",
    ],
  );
});
