// Tests of the audit page's pure parts (pages/audit.js): its addresses and the chain's
// verification in the browser, held to the same figures as sortie_core::audit (the first
// link pinned below is pinned in its tests too), and one flipped byte must be named.
// The page itself is tested in Chromium by scripts/console_test.py (scripts/console_audit.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { auditHref, auditPath, sha256hex, verifyChain } from "../assets/pages/audit.js";

test("addresses: the root's chain is `-`; filters are encoded, empty ones left out", () => {
  assert.equal(auditHref(""), "#/audit/-");
  assert.equal(auditHref("acme"), "#/audit/acme");
  assert.equal(auditPath("acme", { actor: "a b", action: "", cursor: null, limit: 50 }), "/v1/orgs/acme/-/audit?actor=a+b&limit=50");
  assert.equal(auditPath("", {}), "/v1/orgs/-/-/audit");
});

/** Seals as sortie_core::audit::seal makes them. */
async function seal(org, bodies) {
  let hash = await sha256hex(`sortie-audit:${org}`);
  const out = [];
  for (const [i, stored] of bodies.entries()) {
    const digest = await sha256hex(stored);
    hash = await sha256hex(`${hash}\n${digest}`);
    out.push({ stored, seal: { seq: i + 1, digest, hash } });
  }
  return out;
}

const bodies = [1, 2, 3].map((n) => JSON.stringify({ org: "acme", id: `01j${n}`, action: "create_runner", target: `/v1/x/${n}` }));

test("the first link is the one sortie_core::audit computes", async () => {
  assert.equal(await sha256hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const [first] = await seal("acme", ['{"id":"01j1"}']);
  assert.equal(await sha256hex("sortie-audit:acme"), "71a2b9f5f6119bdc60b1c437912df66aaa94b01b53c4b9d05cf8d52255dbd049");
  assert.equal(first.seal.digest, "21d6634963750e944a45cb9ff64971724e016666511cce0364bcc7db365b8a2c");
  assert.equal(first.seal.hash, "703ddf263661aaa67b5b0a5b3ca62abca7eb06e2917d484a6d4b06bea1af76ba");
  assert.deepEqual(await verifyChain("acme", [first], first.seal), { ok: true, entries: 1, head: first.seal.hash });
});

test("a sealed chain verifies in any order, and reaches its head", async () => {
  const links = await seal("acme", bodies);
  const head = links[2].seal;
  const got = await verifyChain("acme", [links[2], links[0], links[1]], head);
  assert.deepEqual(got, { ok: true, entries: 3, head: head.hash });
});

test("one flipped byte names its entry; a gap and a cut end are named", async () => {
  const links = await seal("acme", bodies);
  const flipped = links.map((l) => ({ ...l }));
  flipped[1].stored = flipped[1].stored.replace("create_runner", "create_rumner");
  const broken = await verifyChain("acme", flipped, links[2].seal);
  assert.equal(broken.ok, false);
  assert.match(broken.problem, /^entry 2 \(01j2\) was edited/);
  const gap = await verifyChain("acme", [links[0], links[2]], links[2].seal);
  assert.equal(gap.problem, "entries 2 to 2 are missing");
  const cut = await verifyChain("acme", links.slice(0, 2), links[2].seal);
  assert.match(cut.problem, /ends at entry 2 but its head is entry 3/);
  const other = await verifyChain("other", links, links[2].seal);
  assert.match(other.problem, /chain breaks at entry 1/);
});
