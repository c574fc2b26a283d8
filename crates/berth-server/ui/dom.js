// Small DOM helpers shared by every view: element builders for HTML and SVG, the project
// palette, status badges and number formatting. No framework, no build step.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h('a', {href: '#'}, 'text', child, ...). */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Removes every child of `node` and appends `children`. */
export function replace(node, ...children) {
  node.replaceChildren();
  return fill(node, {}, children);
}

// Sixteen colours that stay apart from each other and from the status colours (red is kept for
// trouble), ordered so that neighbours differ. A project's colour comes from a hash of its id;
// when two projects on the page would share one, the one whose name sorts later takes the next
// free colour, so the colours stay the same as long as the set of projects does.
const PALETTE = [
  '#6c5ce7', '#e07b00', '#16a394', '#8e44ad', '#0e8fb8', '#c2418f', '#3d5a99', '#b8860b',
  '#2f6fde', '#2e9e4f', '#a0522d', '#1f7a8c', '#d35f8d', '#5b8c1a', '#7a6a58', '#9a7b00',
];

function hash(text) {
  let value = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    value ^= text.charCodeAt(i);
    value = Math.imul(value, 0x01000193) >>> 0;
  }
  return value;
}

let assigned = new Map();

/** Tells the palette which projects the page shows, so that they get distinct colours. */
export function registerProjects(projects) {
  const slot = (project) => hash(project) % PALETTE.length;
  const unique = [...new Set(projects.map(String))]
    .sort((a, b) => slot(a) - slot(b) || a.localeCompare(b));
  const taken = new Set();
  assigned = new Map();
  for (const project of unique) {
    let index = slot(project);
    for (let tries = 0; tries < PALETTE.length && taken.has(index); tries++) index = (index + 1) % PALETTE.length;
    taken.add(index);
    assigned.set(project, index);
  }
}

/** The colour of a project, the same in every view. */
export function projectColor(project) {
  const key = String(project || '');
  return PALETTE[assigned.has(key) ? assigned.get(key) : hash(key) % PALETTE.length];
}

/** A coloured chip naming a project. */
export function projectChip(project) {
  return h('span', {class: 'chip', 'data-project': project},
    h('span', {class: 'swatch', 'data-color': projectColor(project)}), project || '—');
}

/** Gives every `[data-color]` swatch under `root` its colour (no inline styles: CSP). */
export function paintSwatches(root) {
  for (const node of root.querySelectorAll('[data-color]')) {
    node.style.backgroundColor = node.dataset.color;
  }
}

/** A lease or reservation status as a badge. */
export function statusBadge(status) {
  const text = String(status || 'unknown');
  return h('span', {class: `badge status-${text.toLowerCase()}`, 'data-status': text}, text.toLowerCase());
}

/** A host status (up, down, maintenance) as a badge. */
export function hostBadge(status) {
  const text = String(status || 'up');
  return h('span', {class: `badge host-${text}`, 'data-host-status': text},
    text === 'maintenance' ? 'maintenance' : text);
}

/** The degraded marker. */
export function degradedBadge() {
  return h('span', {class: 'badge degraded', title: 'Something this lease reserved is missing'}, 'degraded');
}

const INTEGER = new Intl.NumberFormat('en-US', {maximumFractionDigits: 0});
const DECIMAL = new Intl.NumberFormat('en-US', {maximumFractionDigits: 1});

/** 12,345. */
export function formatInt(value) {
  return INTEGER.format(value);
}

/** A class amount as people read it: memory in GiB or TiB, the rest as counts. */
export function formatAmount(value, resourceClass) {
  if (resourceClass === 'MEMORY_MB') {
    const gib = value / 1024;
    return Math.abs(gib) >= 1024 ? `${DECIMAL.format(gib / 1024)} TiB` : `${DECIMAL.format(gib)} GiB`;
  }
  if (resourceClass === 'DISK_GB') {
    return Math.abs(value) >= 1000 ? `${DECIMAL.format(value / 1000)} TB` : `${INTEGER.format(value)} GB`;
  }
  return INTEGER.format(value);
}

/** The unit a class is counted in. */
export function unitOf(resourceClass) {
  return {VCPU: 'vCPUs', MEMORY_MB: 'memory', DISK_GB: 'disk'}[resourceClass] ||
    resourceClass.replace(/^CUSTOM_/, '').toLowerCase().replace(/_/g, '-') + ' nodes';
}

/** The last eight characters of an id, for tables (time-ordered ids share their start). */
export function shortId(id) {
  const text = String(id || '');
  return text.length > 8 ? `…${text.slice(-8)}` : text;
}

/** An empty-state paragraph. */
export function empty(text) {
  return h('p', {class: 'empty'}, text);
}

/** The round figure (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above
 * `value`: the top of a chart's axis. */
export function niceMax(value) {
  if (value <= 0) return 1;
  const exponent = Math.pow(10, Math.floor(Math.log10(value)));
  const fraction = value / exponent;
  const nice = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((n) => n >= fraction) || 10;
  return nice * exponent;
}
