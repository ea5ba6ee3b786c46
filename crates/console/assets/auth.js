// Sign-in: the token lives in sessionStorage only (never localStorage, never a cookie).
// Local mode (`sortie dev`): paste a token it printed. Deployed: OpenID Connect
// authorization code flow with PKCE (S256) against the issuer the API trusts.
import { api, ApiError, query } from './api.js';
import * as endpoints from './endpoints.js';

const TOKEN_KEY = 'sortie.token';
const OIDC_KEY = 'sortie.oidc';
const NOTICE_KEY = 'sortie.notice';

let cachedConfig = null;
const whoamiCache = new Map();

/** The console's configuration from `<meta name="sortie-console">` (set by the server). */
export function config() {
  if (cachedConfig) return cachedConfig;
  const meta = document.querySelector('meta[name="sortie-console"]');
  let parsed = null;
  try {
    parsed = JSON.parse(meta ? meta.getAttribute('content') : '');
  } catch (_) {
    parsed = null;
  }
  if (!parsed || typeof parsed !== 'object') parsed = { mode: 'unconfigured' };
  if (parsed.mode === 'oidc' && !(parsed.client_id && parsed.issuer)) parsed = { ...parsed, mode: 'unconfigured' };
  if (parsed.mode !== 'local' && parsed.mode !== 'oidc') parsed = { ...parsed, mode: 'unconfigured' };
  cachedConfig = parsed;
  return parsed;
}

/** The signed-in token, or null. */
export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch (_) {
    return null;
  }
}

function setToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
  whoamiCache.clear();
  window.dispatchEvent(new Event('sortie:auth'));
}

/** Drops the token (and any cached identity) and shows sign-in, with `notice` there if given. */
export function signOut(notice) {
  const had = token() !== null;
  try {
    sessionStorage.removeItem(TOKEN_KEY);
    if (notice) sessionStorage.setItem(NOTICE_KEY, notice);
  } catch (_) {
    /* storage unavailable: nothing to drop */
  }
  whoamiCache.clear();
  if (had || notice) window.dispatchEvent(new Event('sortie:auth'));
}

/** A message left for the sign-in page (a session that ended), read once. */
export function takeNotice() {
  const n = sessionStorage.getItem(NOTICE_KEY);
  sessionStorage.removeItem(NOTICE_KEY);
  return n;
}

/** The caller, from `GET /v1/whoami` (with `?org=` for an organisation's memberships); cached. */
export function whoami(org) {
  const key = org || '';
  if (!whoamiCache.has(key)) {
    const p = api('GET', endpoints.whoami() + query({ org }));
    p.catch(() => whoamiCache.delete(key));
    whoamiCache.set(key, p);
  }
  return whoamiCache.get(key);
}

/** Local sign-in: checks `t` with `GET /v1/whoami`, keeps it when the API accepts it. */
export async function signInWithToken(t) {
  const trimmed = String(t || '').trim();
  if (!trimmed) throw new ApiError(400, 'invalid', 'Paste a token first.', [{ field: 'token', problem: 'is empty' }]);
  await api('GET', endpoints.whoami(), undefined, { token: trimmed });
  setToken(trimmed);
}

function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString(n = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(n)));
}

/**
 * The issuer's discovery document. Its `issuer` must be identical to the configured one
 * (OpenID Connect Discovery 1.0, section 4.3), or nothing of it is used.
 */
async function discovery(issuer) {
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let res;
  try {
    res = await fetch(url, { headers: { Accept: 'application/json' } });
  } catch (e) {
    throw new ApiError(0, 'oidc', `The identity provider could not be reached (${url})`, []);
  }
  if (!res.ok) throw new ApiError(res.status, 'oidc', `The identity provider's discovery answered ${res.status} (${url})`, []);
  const doc = await res.json().catch(() => null);
  if (!doc || typeof doc !== 'object') {
    throw new ApiError(0, 'oidc', `The identity provider's discovery answered no JSON document (${url})`, []);
  }
  if (doc.issuer !== issuer) {
    throw new ApiError(0, 'oidc', `The identity provider's discovery names another issuer than the configured ${issuer}: sign-in refused`, []);
  }
  if (!doc.authorization_endpoint || !doc.token_endpoint) {
    throw new ApiError(0, 'oidc', 'The identity provider\'s discovery names no authorization or token endpoint', []);
  }
  return doc;
}

/** The redirect URI: the console's own page, without query or hash. */
function redirectUri() {
  return `${location.origin}${location.pathname}`;
}

/** OIDC sign-in: sends the browser to the issuer with a PKCE challenge; it comes back with `?code=`. */
export async function signInOidc() {
  const cfg = config();
  const doc = await discovery(cfg.issuer);
  const verifier = randomString(48);
  const state = randomString(24);
  // The ID token may stand in for the access token: its `nonce` ties it to this sign-in.
  const nonce = randomString(24);
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  const challenge = base64url(new Uint8Array(digest));
  const back = location.hash && location.hash !== '#/signin' ? location.hash : '#/';
  sessionStorage.setItem(OIDC_KEY, JSON.stringify({ state, verifier, nonce, back }));
  const params = {
    response_type: 'code',
    client_id: cfg.client_id,
    redirect_uri: redirectUri(),
    scope: cfg.scopes || 'openid',
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    audience: cfg.audience,
  };
  const sep = doc.authorization_endpoint.includes('?') ? '&' : '?';
  location.assign(doc.authorization_endpoint + sep + query(params).slice(1));
}

/** The claims of a JWT (its payload, not verified: the API verifies the token), or null. */
export function jwtClaims(jwt) {
  const parts = String(jwt || '').split('.');
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return claims && typeof claims === 'object' && !Array.isArray(claims) ? claims : null;
  } catch (_) {
    return null;
  }
}

/** The most of an identity provider's error text shown. */
const MAX_ERROR_TEXT = 300;

/**
 * Finishes an OIDC sign-in when the page was loaded with `?code=&state=` (or `?error=`):
 * exchanges the code for a token, then removes the query from the address bar.
 * Answers true when it handled a redirect. Throws ApiError when the sign-in failed.
 *
 * `state` is checked first: an answer (or an `?error=`) that does not belong to the
 * sign-in this tab started shows none of its own text, so a crafted link cannot put
 * its words on this origin.
 */
export async function completeOidcRedirect() {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return false;
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(OIDC_KEY) || 'null');
  } catch (_) {
    saved = null;
  }
  sessionStorage.removeItem(OIDC_KEY);
  const back = (saved && saved.back) || '#/';
  history.replaceState(null, '', location.pathname + back);
  if (!saved || typeof saved.state !== 'string' || !saved.state || saved.state !== params.get('state')) {
    throw new ApiError(401, 'oidc', 'Sign-in failed: the answer does not match the sign-in this page started (state). Try again.', []);
  }
  if (params.has('error')) {
    const text = `${params.get('error')} ${params.get('error_description') || ''}`.trim().slice(0, MAX_ERROR_TEXT);
    throw new ApiError(401, 'oidc', `Sign-in was refused: ${text}`, []);
  }
  const cfg = config();
  const doc = await discovery(cfg.issuer);
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code: params.get('code'),
    redirect_uri: redirectUri(),
    client_id: cfg.client_id,
    code_verifier: saved.verifier,
  });
  let res;
  try {
    res = await fetch(doc.token_endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
      body: form.toString(),
    });
  } catch (e) {
    throw new ApiError(0, 'oidc', 'The identity provider\'s token endpoint could not be reached', []);
  }
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new ApiError(res.status, 'oidc', `The code exchange was refused: ${answer.error || res.status} ${answer.error_description || ''}`.trim(), []);
  }
  const t = answer.access_token || answer.id_token;
  if (!t) throw new ApiError(0, 'oidc', 'The identity provider answered no token', []);
  if (!answer.access_token) {
    // The ID token stands in: it must carry this sign-in's nonce.
    const claims = jwtClaims(answer.id_token);
    if (!claims || typeof saved.nonce !== 'string' || !saved.nonce || claims.nonce !== saved.nonce) {
      throw new ApiError(401, 'oidc', 'Sign-in failed: the ID token does not carry the nonce this sign-in sent. Try again.', []);
    }
  }
  setToken(t);
  return true;
}
