// Calls to berth's JSON APIs from the browser, with the token from the token field (kept in
// localStorage) as `X-Auth-Token`, and errors turned into sentences people can act on whatever
// the surface's error format (Placement, Blazar or problem details).

import {observeServerDate} from './time.js';

const TOKEN_KEY = 'berth.token';

/** The token the page sends, or ''. */
export function token() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

/** Keeps `value` as the token (an empty value forgets it). */
export function setToken(value) {
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage may be disabled; the token then lasts for this page only.
  }
  memory = value;
}

let memory = '';

/** An API call that failed: `status` is 0 when berth could not be reached. */
export class ApiError extends Error {
  constructor(status, title, detail, path) {
    super(`${title}${detail ? `: ${detail}` : ''}`);
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.path = path;
  }
}

function detailOf(body, text) {
  if (body && typeof body === 'object') {
    const placement = Array.isArray(body.errors) && body.errors[0];
    const found = (placement && (placement.detail || placement.title)) ||
      body.error_message || body.detail || body.message || body.title;
    if (found) return String(found);
  }
  return (text || '').trim().slice(0, 300);
}

function titleOf(status) {
  switch (status) {
    case 401:
      return token()
        ? 'The token was refused (401): check the token in the Token field'
        : 'Authentication required (401): enter a token in the Token field at the top right';
    case 403:
      return 'Not allowed (403): this view needs a token with the admin role';
    case 404:
      return 'Not found (404)';
    case 503:
      return 'berth is busy or starting (503): try again in a moment';
    default:
      return status >= 500 ? `berth failed to answer (${status})` : `The request was refused (${status})`;
  }
}

/** GETs `path` and returns the parsed JSON body, or throws an {@link ApiError}. */
export async function get(path) {
  const headers = {Accept: 'application/json'};
  const secret = token() || memory;
  if (secret) headers['X-Auth-Token'] = secret;
  let response;
  try {
    response = await fetch(path, {headers, cache: 'no-store'});
  } catch (error) {
    throw new ApiError(0, 'berth cannot be reached', `${error.message || error} (is the server running?)`, path);
  }
  observeServerDate(response.headers.get('Date'));
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, titleOf(response.status), detailOf(body, text), path);
  }
  return body;
}

/** Like {@link get}, but answers `fallback` instead of throwing on 403 (views that can do
 * without admin-only data). */
export async function getOptional(path, fallback) {
  try {
    return await get(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return fallback;
    throw error;
  }
}

/** Every entry of the notification feed (`/promise/notifications`), paging with the cursor. */
export async function allNotifications(maxPages = 20) {
  const out = [];
  let after = 0;
  for (let page = 0; page < maxPages; page++) {
    const body = await get(`/promise/notifications?after=${after}&limit=1000`);
    const entries = body.notifications || [];
    out.push(...entries);
    if (!entries.length || body.next === after) break;
    after = body.next;
  }
  return out;
}
