// The dashboard shell: the token field, the router (views and their parameters live in the URL
// hash, for example `#/timeline?from=2030-01-01T00:00:00Z&to=2030-01-08T00:00:00Z&zone=az1`),
// and the error display. Each view renders into <main> and sets `data-state` to `ready` or
// `error` when it is done, which is what the end-to-end tests wait for (a view that shows an
// error panel under its own controls, such as the usage view's refused period, ends in `error`).

import {ApiError, get, setToken, token} from './api.js';
import {h, replace} from './dom.js';
import * as time from './time.js';
import * as timeline from './timeline.js';
import * as capacity from './capacity.js';
import * as leases from './leases.js';
import * as failures from './failures.js';
import * as usage from './usage.js';

const VIEWS = {
  timeline: timeline.render,
  capacity: capacity.render,
  leases: leases.render,
  lease: leases.renderDetail,
  usage: usage.render,
  failures: failures.render,
};

const main = document.getElementById('main');
let generation = 0;
let shown = '';

/** The current route: view name, path arguments and query parameters. */
function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query] = hash.split('?');
  const parts = (path || 'timeline').split('/').filter(Boolean).map(decodeURIComponent);
  const search = new URLSearchParams(location.search);
  const params = new URLSearchParams(query || '');
  // Parameters in the real query string (`/ui?zone=az1#/capacity`) count too; the hash wins.
  for (const [key, value] of search) if (!params.has(key)) params.set(key, value);
  return {view: parts[0] in VIEWS ? parts[0] : 'timeline', args: parts.slice(1), params};
}

/** Goes to `view` with `params` (an object or URLSearchParams); `replace` keeps history flat. */
export function navigate(view, params = {}, options = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of params instanceof URLSearchParams ? params : Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(key, value);
  }
  const text = query.toString();
  const hash = `#/${view}${text ? `?${text}` : ''}`;
  if (options.replace) history.replaceState(null, '', hash);
  else history.pushState(null, '', hash);
  show();
}

/** Renders an error readably in `node`. */
export function errorPanel(error) {
  const api = error instanceof ApiError;
  const status = api ? error.status : 'script';
  return h('section', {class: 'error-panel', role: 'alert', 'data-role': 'error', 'data-status': status},
    h('h2', {}, api ? error.title : 'The dashboard hit a problem'),
    h('p', {class: 'detail'}, api ? error.detail || '' : String(error && error.message || error)),
    api && error.path ? h('p', {class: 'path'}, 'While calling ', h('code', {}, error.path)) : null,
    api && error.status === 401 ? h('p', {}, 'berth runs with token authentication here. ',
      'Paste a token from the token file into the Token field and press Use.') : null);
}

function markNav(view) {
  for (const link of document.querySelectorAll('#nav a')) {
    link.classList.toggle('active', link.dataset.view === (view === 'lease' ? 'leases' : view));
  }
}

/** Shows the route of the current URL unless it is already shown (a hash link fires both
 * `popstate` and `hashchange`). */
function onLocation() {
  if (location.href !== shown) show();
}

async function show() {
  shown = location.href;
  const mine = ++generation;
  const {view, args, params} = route();
  markNav(view);
  const tip = document.querySelector('body > .tooltip');
  if (tip) tip.hidden = true;
  main.dataset.state = 'loading';
  main.dataset.view = view;
  const context = {
    navigate,
    errorPanel,
    params,
    args,
    isCurrent: () => mine === generation,
  };
  try {
    await VIEWS[view](main, context);
    if (mine === generation) main.dataset.state = main.querySelector('[data-role="error"]') ? 'error' : 'ready';
  } catch (error) {
    if (mine !== generation) return;
    console.error(error);
    replace(main, errorPanel(error));
    main.dataset.state = 'error';
  }
  if (mine === generation) refreshFailureCount();
}

async function refreshFailureCount() {
  const badge = document.getElementById('failure-count');
  try {
    const body = await get('/ui/api/failures');
    const count = (body.providers || []).length;
    badge.textContent = count ? String(count) : '';
    badge.hidden = !count;
  } catch {
    badge.hidden = true;
  }
}

function tick() {
  document.getElementById('clock').textContent = `${time.stamp(time.now())} UTC`;
}

function setUpToken() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token');
  input.value = token();
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    form.classList.toggle('set', Boolean(input.value.trim()));
    show();
  });
  form.classList.toggle('set', Boolean(token()));
}

setUpToken();
tick();
setInterval(tick, 30 * 1000);
window.addEventListener('popstate', onLocation);
window.addEventListener('hashchange', onLocation);
show();
