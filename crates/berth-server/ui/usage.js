// The usage view: for one resource class over a period, what each project's reservations held
// and what became of it, exactly as the usage report answers it
// (`/reservation/v1/usage?start=...&end=...`). One horizontal bar per project: its full length,
// outlined, is the reserved unit-hours, and consumed, lent and idle are stacked inside it. With a
// lease shared between projects, what another project's consumers used in a reservation leaves
// part of the outline empty, and what a project's own consumers used in another's reservation
// can reach past it. On-demand and preemptible hours, outside reservations, are written beside
// the bar. Hover a bar for its figures; the table under the chart lists them all to 2 decimals.
//
// The period lives in the URL as the report takes it (`from` and `to`: RFC 3339, Blazar's
// `%Y-%m-%d %H:%M`, or `now`; without `to` the period runs until now), so a period the report
// refuses is shown with its 400 under the form, to be corrected there.
//
// Bars carry data-project and the row's figures (unformatted, as the API answers them) for the
// end-to-end tests, and so do the table's cells (data-field, data-value).

import {ApiError, get} from './api.js';
import {h, s, replace, projectChip, paintSwatches, registerProjects, niceMax} from './dom.js';
import * as time from './time.js';

const SERIES = [
  {name: 'consumed', field: 'consumed_hours', label: 'Consumed', color: '#2f6fde',
    note: 'the project\'s consumers used it'},
  {name: 'lent', field: 'lent_hours', label: 'Lent', color: '#16a394',
    note: 'preemptible work ran in it'},
  {name: 'idle', field: 'idle_hours', label: 'Idle', color: '#f0a020',
    note: 'held and unused'},
];
const COLUMNS = [
  ['reserved_hours', 'Reserved'], ['consumed_hours', 'Consumed'], ['lent_hours', 'Lent'], ['idle_hours', 'Idle'],
  ['on_demand_hours', 'On demand'], ['preemptible_hours', 'Preemptible'],
];
const COMPUTE = ['VCPU', 'MEMORY_MB', 'DISK_GB'];
const DEFAULT_CLASS = 'VCPU';
const DEFAULT_SPAN = 7 * time.DAY;
const PRESETS = [['24 h', time.DAY], ['7 d', 7 * time.DAY], ['30 d', 30 * time.DAY], ['90 d', 90 * time.DAY]];
const LABEL_W = 190;
const BESIDE_W = 270;
const ROW_H = 34;
const BAR_H = 20;
const AXIS_H = 40;

const HOURS = new Intl.NumberFormat('en-US', {minimumFractionDigits: 2, maximumFractionDigits: 2});
const SHORT = new Intl.NumberFormat('en-US', {maximumFractionDigits: 2});
const PERCENT = new Intl.NumberFormat('en-US', {style: 'percent', maximumFractionDigits: 1});

/** `1,344.00`: unit-hours to 2 decimals. */
export function formatHours(value) {
  return HOURS.format(Number(value) || 0);
}

/** What a class's unit-hours are called. */
export function unitHours(resourceClass) {
  return {VCPU: 'vCPU-hours', MEMORY_MB: 'MB-hours', DISK_GB: 'GB-hours', IPV4_ADDRESS: 'address-hours'}[resourceClass] ||
    `${resourceClass} unit-hours`;
}

/** The period of the URL: `from` and `to` as the report takes them; no `to` is until now. */
export function periodOf(params) {
  const from = (params.get('from') || '').trim();
  const to = (params.get('to') || '').trim();
  return {from: from || time.iso(Math.floor(time.now() / time.MINUTE) * time.MINUTE - DEFAULT_SPAN), to};
}

/** The usage report the view draws. */
export function usagePath(period) {
  const query = new URLSearchParams({start: period.from});
  if (period.to) query.set('end', period.to);
  return `/reservation/v1/usage?${query}`;
}

const figure = (row, field) => Math.max(Number(row[field]) || 0, 0);

/** How long a row's bar is drawn: its reserved hours, or its stack when that is longer. */
function extent(row) {
  return Math.max(figure(row, 'reserved_hours'), SERIES.reduce((sum, series) => sum + figure(row, series.field), 0));
}

function share(part, whole) {
  return whole > 0 ? ` (${PERCENT.format(part / whole)} of reserved)` : '';
}

function rowTitle(row, resourceClass) {
  const reserved = figure(row, 'reserved_hours');
  return [`${row.project_id} · ${resourceClass}, ${unitHours(resourceClass)}`,
    `reserved ${formatHours(reserved)}`,
    ...SERIES.map((series) => `${series.label.toLowerCase()} ${formatHours(row[series.field])}${share(figure(row, series.field), reserved)}`),
    `on demand ${formatHours(row.on_demand_hours)}`, `preemptible ${formatHours(row.preemptible_hours)}`].join('\n');
}

function clip(text, room) {
  return text.length > room ? `${text.slice(0, room - 1)}…` : text;
}

/** Draws one bar per row of `rows` (one class), `width` wide, for the report's period. */
export function chart(rows, resourceClass, width, report) {
  const plot = width - LABEL_W - BESIDE_W;
  const top = niceMax(Math.max(0, ...rows.map(extent)) * 1.15);
  const x = (value) => LABEL_W + (Math.min(Math.max(value, 0), top) / top) * plot;
  const height = AXIS_H + rows.length * ROW_H + 10;
  const from = time.parse(report.start);
  const to = time.parse(report.end);
  const svg = s('svg', {class: 'usage-chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'data-role': 'usage-chart', 'data-class': resourceClass, 'data-from': report.start, 'data-to': report.end,
    'aria-label': `${resourceClass} usage per project from ${time.stamp(from)} to ${time.stamp(to)} UTC: ` +
      `${unitHours(resourceClass)} reserved, consumed, lent and idle; the table below gives the figures`});
  rows.forEach((row, index) => svg.append(s('rect', {class: index % 2 ? 'row odd' : 'row', x: 0,
    y: AXIS_H + index * ROW_H, width, height: ROW_H})));
  svg.append(s('text', {class: 'axis-head', x: 12, y: AXIS_H - 14}, 'PROJECT'),
    s('text', {class: 'axis-head', x: LABEL_W + plot + 14, y: AXIS_H - 14}, 'OUTSIDE RESERVATIONS'));
  for (let i = 0; i <= 5; i++) {
    const value = (top * i) / 5;
    svg.append(s('line', {class: i ? 'grid' : 'axis-line', x1: x(value), x2: x(value), y1: AXIS_H - 6, y2: height - 6}),
      s('text', {class: 'tick', x: x(value), y: AXIS_H - 14, 'text-anchor': ['start', 'middle', 'middle', 'middle', 'middle', 'end'][i]},
        SHORT.format(value)));
  }
  svg.append(s('line', {class: 'label-edge', x1: LABEL_W + plot, x2: LABEL_W + plot, y1: AXIS_H - 6, y2: height - 6}));
  rows.forEach((row, index) => svg.append(bar(row, resourceClass, x, AXIS_H + index * ROW_H, LABEL_W + plot)));
  return svg;
}

function bar(row, resourceClass, x, y, besideX) {
  const reserved = figure(row, 'reserved_hours');
  const barY = y + (ROW_H - BAR_H) / 2;
  const group = s('g', {class: 'usage-bar', 'data-role': 'usage-bar', 'data-project': row.project_id,
    'data-class': resourceClass, 'data-reserved': row.reserved_hours, 'data-consumed': row.consumed_hours,
    'data-lent': row.lent_hours, 'data-idle': row.idle_hours, 'data-on-demand': row.on_demand_hours,
    'data-preemptible': row.preemptible_hours},
  s('title', {}, rowTitle(row, resourceClass)),
  s('text', {class: 'project-name', x: LABEL_W - 12, y: barY + BAR_H / 2 + 4, 'text-anchor': 'end'},
    clip(String(row.project_id), 26)));
  let at = 0;
  for (const series of SERIES) {
    const value = figure(row, series.field);
    if (value > 0) {
      group.append(s('rect', {class: `segment ${series.name}`, x: x(at), y: barY,
        width: Math.max(x(at + value) - x(at), 1), height: BAR_H, fill: series.color,
        'data-series': series.name, 'data-value': row[series.field]},
      s('title', {}, `${row.project_id} · ${series.label}: ${formatHours(value)} ${unitHours(resourceClass)}` +
        `${share(value, reserved)}, ${series.note}`)));
    }
    at += value;
  }
  if (reserved > 0) {
    group.append(s('rect', {class: 'reserved-outline', x: x(0), y: barY, width: Math.max(x(reserved) - x(0), 1),
      height: BAR_H}, s('title', {}, `${row.project_id} · Reserved: ${formatHours(reserved)} ${unitHours(resourceClass)}`)));
  }
  const end = Math.max(at, reserved);
  group.append(s('text', {class: end > 0 ? 'bar-total' : 'bar-total muted', x: x(end) + 6, y: barY + BAR_H / 2 + 4},
    reserved > 0 ? formatHours(reserved) : 'no reservation'));
  group.append(s('text', {class: 'beside', x: besideX + 14, y: barY + BAR_H / 2 + 4},
    s('tspan', {class: 'beside-label'}, 'on demand '), s('tspan', {}, formatHours(row.on_demand_hours)),
    s('tspan', {class: 'beside-label'}, ' · preemptible '), s('tspan', {}, formatHours(row.preemptible_hours))));
  return group;
}

function totals(rows) {
  return Object.fromEntries(COLUMNS.map(([field]) => [field, rows.reduce((sum, row) => sum + (Number(row[field]) || 0), 0)]));
}

function summary(rows, resourceClass) {
  const sum = totals(rows);
  const idle = sum.reserved_hours > 0 ? sum.idle_hours / sum.reserved_hours : 0;
  const stat = (value, text, cls = '') => h('div', {class: `stat ${cls}`}, h('strong', {}, value), h('span', {}, text));
  return h('div', {class: 'stats', 'data-role': 'usage-summary'},
    stat(String(rows.length), `project${rows.length === 1 ? '' : 's'}`),
    stat(SHORT.format(sum.reserved_hours), `${unitHours(resourceClass)} reserved`),
    stat(SHORT.format(sum.consumed_hours), 'consumed'),
    stat(SHORT.format(sum.lent_hours), 'lent'),
    stat(SHORT.format(sum.idle_hours), 'idle'),
    sum.reserved_hours > 0 ? stat(PERCENT.format(idle), 'of reserved left idle', idle >= 0.5 ? 'warn' : '') : null,
    stat(SHORT.format(sum.on_demand_hours + sum.preemptible_hours), 'outside reservations'));
}

function figuresTable(rows, resourceClass) {
  const sum = totals(rows);
  const cells = (values, attrs = true) => COLUMNS.map(([field]) => h('td', {class: 'num',
    'data-field': attrs ? field : null, 'data-value': attrs ? values[field] : null}, formatHours(values[field])));
  return h('section', {class: 'usage-figures'},
    h('h2', {id: 'usage-figures-title'}, `Figures per project, in ${unitHours(resourceClass)}`),
    h('table', {class: 'data', 'data-role': 'usage-table', 'data-class': resourceClass,
      'aria-labelledby': 'usage-figures-title'},
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Project'),
      COLUMNS.map(([, label]) => h('th', {class: 'num', scope: 'col'}, label)))),
    h('tbody', {}, rows.map((row) => h('tr', {'data-role': 'usage-row', 'data-project': row.project_id},
      h('td', {}, projectChip(row.project_id)), cells(row)))),
    rows.length > 1 ? h('tfoot', {}, h('tr', {'data-role': 'usage-total'}, h('td', {}, 'All projects'), cells(sum, false)))
      : null));
}

function legend() {
  return h('div', {class: 'legend', 'data-role': 'usage-legend'},
    h('div', {class: 'legend-group'},
      h('span', {class: 'key'}, h('span', {class: 'key-swatch usage-reserved'}), 'Reserved — the bar\'s full length'),
      SERIES.map((series) => h('span', {class: 'key'},
        h('span', {class: `key-swatch series ${series.name}`, 'data-color': series.color}), `${series.label} — ${series.note}`))),
    h('div', {class: 'legend-group muted'},
      'On demand and preemptible: the project\'s allocations outside reservations, beside each bar.'));
}

function select(name, options, value, onChange, label) {
  return h('label', {class: 'field'}, h('span', {}, label),
    h('select', {name, onchange: (event) => onChange(event.target.value)},
      options.map(([key, text]) => h('option', {value: key, selected: key === value}, text))));
}

/** The classes to choose from: the compute ones, those of the report, and the chosen one. */
function classesOf(rows, chosen) {
  const found = new Set([...COMPUTE, chosen, ...rows.map((row) => row.resource_class)]);
  return [...COMPUTE, ...[...found].filter((c) => !COMPUTE.includes(c)).sort()];
}

/**
 * The period and class form. `answered` is the report's period in milliseconds (absent when the
 * report was refused), for the earlier and later buttons.
 */
function periodForm(period, resourceClass, classes, go, answered) {
  const from = h('input', {type: 'text', name: 'from', value: period.from, required: true, size: 22,
    spellcheck: 'false', autocomplete: 'off', placeholder: '2030-01-07T00:00:00Z', 'aria-describedby': 'usage-period-hint'});
  const to = h('input', {type: 'text', name: 'to', value: period.to, size: 22, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'now', 'aria-describedby': 'usage-period-hint'});
  const submit = (event) => {
    event.preventDefault();
    go({from: from.value.trim(), to: to.value.trim()});
  };
  const preset = ([text, span]) => h('button', {type: 'button', class: 'tool preset', title: `The last ${text} until now`,
    onclick: () => go({from: time.iso(Math.floor(time.now() / time.MINUTE) * time.MINUTE - span), to: ''})}, text);
  const shift = (direction) => {
    const span = answered.to - answered.from;
    const start = answered.from + direction * span;
    go({from: time.iso(start), to: time.iso(start + span)});
  };
  return h('form', {class: 'toolbar usage-form', 'data-role': 'usage-form', 'aria-label': 'Period and resource class',
    onsubmit: submit},
  h('div', {class: 'tool-group'},
    h('label', {class: 'field'}, h('span', {}, 'From (UTC)'), from),
    h('label', {class: 'field'}, h('span', {}, 'To (UTC)'), to),
    select('class', classes.map((c) => [c, c]), resourceClass, (value) => go({class: value}), 'Class'),
    h('button', {type: 'submit', class: 'tool'}, 'Show')),
  h('div', {class: 'tool-group'},
    answered ? h('button', {type: 'button', class: 'tool', title: 'The period before, as long', onclick: () => shift(-1)}, '◀')
      : null,
    answered ? h('button', {type: 'button', class: 'tool', title: 'The period after, as long',
      disabled: answered.to >= time.now(), onclick: () => shift(1)}, '▶') : null,
    PRESETS.map(preset)),
  h('p', {class: 'muted small usage-hint', id: 'usage-period-hint'},
    'Times in UTC: RFC 3339 (2030-01-07T00:00:00Z), 2030-01-07 00:00, or now. An empty To counts until now.'));
}

function head() {
  return h('div', {class: 'view-head'}, h('h1', {}, 'Usage'),
    h('p', {class: 'muted'}, 'What each project\'s reservations held and what became of it: the usage report\'s unit-hours per project, for one resource class.'));
}

/** The usage view. */
export async function render(main, ctx) {
  const params = ctx.params;
  const period = periodOf(params);
  const resourceClass = (params.get('class') || '').trim() || DEFAULT_CLASS;
  const go = (changes) => {
    const next = new URLSearchParams(params);
    for (const [key, value] of Object.entries(changes)) value ? next.set(key, value) : next.delete(key);
    ctx.navigate('usage', next, {replace: true});
  };
  const path = usagePath(period);
  let answer;
  try {
    answer = await get(path);
  } catch (error) {
    // A period the report refuses is said under the form, where it can be corrected.
    if (!(error instanceof ApiError) || error.status !== 400) throw error;
    if (!ctx.isCurrent()) return;
    replace(main, head(), periodForm(period, resourceClass, classesOf([], resourceClass), go, null),
      ctx.errorPanel(error));
    return;
  }
  if (!ctx.isCurrent()) return;
  const report = answer.usage || {};
  const all = report.rows || [];
  registerProjects(all.map((row) => row.project_id));
  const rows = all.filter((row) => row.resource_class === resourceClass)
    .sort((a, b) => figure(b, 'reserved_hours') - figure(a, 'reserved_hours') ||
      String(a.project_id).localeCompare(String(b.project_id)));
  const from = time.parse(report.start);
  const to = time.parse(report.end);
  const counted = time.parse(report.counted_until);
  const frame = h('div', {class: 'chart-frame'});
  replace(main,
    head(),
    periodForm(period, resourceClass, classesOf(all, resourceClass), go, {from, to}),
    h('h2', {class: 'chart-title'}, resourceClass,
      h('span', {class: 'muted'}, ` ${unitHours(resourceClass)} per project, ${time.stamp(from)} → ${time.stamp(to)} UTC`,
        ` · ${time.duration(to - from)}`)),
    h('p', {class: 'counted muted', 'data-role': 'counted-until', 'data-at': report.counted_until},
      `Counted until ${time.stamp(counted)} UTC`,
      counted < to ? ': the rest of the period has not happened yet.' : '.'),
    rows.length ? [summary(rows, resourceClass), frame, legend(), figuresTable(rows, resourceClass)]
      : h('p', {class: 'empty', 'data-role': 'usage-empty'},
        `No project reserved or used ${resourceClass} in this period${all.length ? ' (other classes have usage: choose one above)' : ''}.`),
    h('p', {class: 'muted source'}, 'Source: ', h('code', {}, `GET ${decodeURIComponent(path)}`)));
  if (rows.length) {
    const width = Math.max(frame.clientWidth || 1200, 760);
    frame.append(chart(rows, resourceClass, width, report));
  }
  paintSwatches(main);
}
