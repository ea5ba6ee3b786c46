// Tests of the console's OIDC sign-in (issue 41): `node --test crates/console/js-tests/`.
// The browser's globals auth.js uses (sessionStorage, location, history, fetch, the
// config <meta>) are stood in for here; crypto, atob and TextEncoder are Node's own.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";

const ISSUER = "https://idp.example.com/tenant";
const DISCOVERY = `${ISSUER}/.well-known/openid-configuration`;
const TOKEN_ENDPOINT = "https://idp.example.com/token";

class Storage {
  constructor() { this.m = new Map(); }
  getItem(k) { return this.m.has(k) ? this.m.get(k) : null; }
  setItem(k, v) { this.m.set(k, String(v)); }
  removeItem(k) { this.m.delete(k); }
}

/** What the page did: addresses it was sent to, requests it made. */
const seen = { assigned: [], fetched: [] };
/** The identity provider's answers: its discovery document and its token answer. */
const idp = { discovery: null, token: null };

globalThis.window = new EventTarget();
globalThis.document = {
  querySelector: () => ({
    getAttribute: () => JSON.stringify({ mode: "oidc", issuer: ISSUER, client_id: "console" }),
  }),
};
globalThis.sessionStorage = new Storage();
globalThis.location = {
  origin: "https://sortie.example.com",
  pathname: "/",
  search: "",
  hash: "#/",
  assign: (url) => seen.assigned.push(url),
};
globalThis.history = { replaceState: () => {} };
globalThis.fetch = async (url, init) => {
  seen.fetched.push(url);
  const json = url === DISCOVERY ? idp.discovery : url === TOKEN_ENDPOINT ? idp.token : null;
  return { ok: json !== null, status: json === null ? 404 : 200, json: async () => json };
};

const { signInOidc, completeOidcRedirect, token, jwtClaims } = await import("../assets/auth.js");

const goodDiscovery = () => ({
  issuer: ISSUER,
  authorization_endpoint: "https://idp.example.com/authorize",
  token_endpoint: TOKEN_ENDPOINT,
});

/** An unsigned JWT with these claims (the console never checks signatures: the API does). */
function jwt(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b64({ alg: "none" })}.${b64(claims)}.sig`;
}

beforeEach(() => {
  globalThis.sessionStorage = new Storage();
  seen.assigned.length = 0;
  seen.fetched.length = 0;
  idp.discovery = goodDiscovery();
  idp.token = null;
  location.search = "";
});

/** Starts a sign-in; answers the authorization request's parameters. */
async function started() {
  await signInOidc();
  assert.equal(seen.assigned.length, 1, "the browser is sent to the identity provider");
  return new URL(seen.assigned[0]).searchParams;
}

/** The page loaded back with this query; answers the error it showed, or null. */
async function comeBack(query) {
  location.search = query;
  try {
    await completeOidcRedirect();
    return null;
  } catch (e) {
    return e;
  }
}

const WORDS = "Your account is locked, call +1 555 0100 now";

test("an ?error= with no pending sign-in shows none of its text", async () => {
  const shown = await comeBack(`?error=access_denied&error_description=${encodeURIComponent(WORDS)}`);
  assert.ok(shown, "the answer is refused");
  assert.ok(!shown.message.includes("555"), shown.message);
  assert.ok(!shown.message.includes("access_denied"), shown.message);
});

test("an ?error= with another sign-in's state shows none of its text", async () => {
  await started();
  const shown = await comeBack(`?error=access_denied&state=forged&error_description=${encodeURIComponent(WORDS)}`);
  assert.ok(shown, "the answer is refused");
  assert.ok(!shown.message.includes("555"), shown.message);
});

test("an ?error= of the pending sign-in is shown, bounded", async () => {
  const state = (await started()).get("state");
  const shown = await comeBack(`?error=access_denied&state=${state}&error_description=${"x".repeat(5000)}`);
  assert.ok(shown.message.includes("access_denied"), shown.message);
  assert.ok(shown.message.length < 400, `${shown.message.length} characters`);
});

test("a discovery document naming another issuer is refused before the browser leaves", async () => {
  for (const issuer of ["https://evil.example.com/tenant", `${ISSUER}/`, undefined]) {
    idp.discovery = { ...goodDiscovery(), issuer };
    await assert.rejects(signInOidc(), /another issuer/);
    assert.equal(seen.assigned.length, 0, `issuer ${issuer}: not sent anywhere`);
  }
});

test("a discovery document naming another issuer is refused before the code is exchanged", async () => {
  const state = (await started()).get("state");
  idp.discovery = { ...goodDiscovery(), issuer: "https://evil.example.com" };
  idp.token = { access_token: "at" };
  const shown = await comeBack(`?code=c&state=${state}`);
  assert.match(shown.message, /another issuer/);
  assert.ok(!seen.fetched.includes(TOKEN_ENDPOINT), "the code is not sent");
  assert.equal(token(), null);
});

test("the authorization request carries a fresh random nonce", async () => {
  const first = (await started()).get("nonce");
  seen.assigned.length = 0;
  const second = (await started()).get("nonce");
  assert.ok(first && first.length >= 32, `nonce ${first}`);
  assert.notEqual(first, second);
});

test("an ID token standing in for the access token needs the sign-in's nonce", async () => {
  for (const claims of [{ sub: "alice" }, { sub: "alice", nonce: "forged" }]) {
    const state = (await started()).get("state");
    idp.token = { id_token: jwt(claims) };
    const shown = await comeBack(`?code=c&state=${state}`);
    assert.match(shown && shown.message, /nonce/, JSON.stringify(claims));
    assert.equal(token(), null, "no token is kept");
    seen.assigned.length = 0;
  }
  const params = await started();
  const good = jwt({ sub: "alice", nonce: params.get("nonce") });
  idp.token = { id_token: good };
  assert.equal(await comeBack(`?code=c&state=${params.get("state")}`), null);
  assert.equal(token(), good);
});

test("jwtClaims reads a payload and refuses what is not a JWT", () => {
  assert.deepEqual(jwtClaims(jwt({ nonce: "n", name: "Zoë" })), { nonce: "n", name: "Zoë" });
  for (const bad of ["", "a.b", "a.!!!.c", `x.${Buffer.from("[1]").toString("base64url")}.y`, null]) {
    const c = jwtClaims(bad);
    assert.ok(c === null || !("nonce" in c), String(bad));
  }
});
