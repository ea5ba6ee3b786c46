// The console's one door to the Sortie HTTP API (same origin). Every path it calls comes from
// endpoints.js, generated from the API's OpenAPI document (a query from `query()` appended).
// Every call carries the signed-in token; a 401 from any call drops it and shows sign-in.
import { token, signOut } from './auth.js';

/** An error answer of the API: `{"error":{"code","message","fields":[{"path","problem"}]}}`. */
export class ApiError extends Error {
  constructor(status, code, message, fields) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    // Each field at fault as {field, problem} (the API calls the name `path`).
    this.fields = fields;
  }
}

/** The most pages any paging loop reads before it stops and offers "more". */
export const MAX_PAGES = 50;

/** A query string from an object, skipping null/undefined/empty values. */
export function query(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

function fieldsOf(raw) {
  if (!Array.isArray(raw)) return [];
  return raw.map((f) => ({
    field: String((f && (f.path ?? f.field)) ?? ''),
    problem: String((f && f.problem) ?? ''),
  }));
}

/**
 * Calls the API: `method` `path` (an endpoints.js path, with any `query()`), with an optional
 * JSON `body`; answers the parsed JSON (null for an empty body). Throws ApiError on any
 * non-2xx answer or network failure.
 * `opts.headers`: more request headers (such as `If-Match`); `opts.token`: a token to test.
 */
export async function api(method, path, body, opts = {}) {
  const headers = { ...(opts.headers || {}), Accept: 'application/json' };
  const t = opts.token ?? token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'network', `The API could not be reached: ${e && e.message ? e.message : e}`, []);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = null;
    }
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    const apiErr = new ApiError(
      res.status,
      String(err.code ?? `http_${res.status}`),
      String(err.message ?? `The API answered ${res.status} ${res.statusText}`),
      fieldsOf(err.fields),
    );
    // A rejected token is dropped at once, unless the caller is testing one (sign-in form).
    if (res.status === 401 && !opts.token) signOut('Your session has ended: sign in again.');
    throw apiErr;
  }
  return data;
}

/**
 * Reads a cursor-paged list: calls `path` with `params` and `cursor`, collecting
 * `answer[key]`, until the API gives no `next` or `maxPages` pages were read.
 * Answers {items, next}: `next` is the cursor to continue from, or null at the end.
 */
export async function paged(path, params, key, { maxPages = MAX_PAGES, cursor = null } = {}) {
  const items = [];
  let next = cursor;
  for (let page = 0; page < maxPages; page++) {
    const answer = await api('GET', path + query({ ...params, cursor: next }));
    items.push(...((answer && answer[key]) || []));
    next = (answer && answer.next) || null;
    if (!next) break;
  }
  return { items, next };
}

/** Runs `fn` over `items` with at most `limit` calls in flight; answers the results in order. */
export async function pool(items, limit, fn) {
  const out = new Array(items.length);
  let i = 0;
  const worker = async () => {
    while (i < items.length) {
      const mine = i++;
      try {
        out[mine] = { ok: true, value: await fn(items[mine], mine) };
      } catch (e) {
        out[mine] = { ok: false, error: e };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
