// The capacity chart: for one zone and one resource class, total, reserved, allocated and
// available over the window, exactly as the Promise capacity query answers them
// (`/promise/capacity/compute/query?...&showUtilization=true`). Allocated, reserved and
// available are stacked (they add up to total), total is the line on top. Hover for the
// figures at an instant; the table under the chart lists every step.
//
// Points carry data-series, data-at and data-value (the API's numbers, unformatted) for the
// end-to-end tests; the summary cards carry the query's capacityInformation.
//
// Under the chart, the same figures per provider (the query's `providers`: berth's own hosts,
// `local`, and each provider cloud whose capacity is in the zone), and, for those allowed to see
// them (admins), the registered provider clouds with the state of their synchronisation
// (`/promise/providers`).

import {get, getOptional} from './api.js';
import {h, s, replace, formatAmount, formatInt, unitOf, paintSwatches, shortId, niceMax} from './dom.js';
import * as time from './time.js';
import {tooltip, windowControls} from './timeline.js';

const SERIES = [
  {name: 'allocated', label: 'Allocated', color: '#2f6fde', note: 'used by instances'},
  {name: 'reserved', label: 'Reserved', color: '#f0a020', note: 'held by reservations, not used yet'},
  {name: 'available', label: 'Available', color: '#27ae74', note: 'neither reserved nor allocated'},
  {name: 'total', label: 'Total', color: '#1f2937', note: 'usable capacity of hosts in service'},
];
const SUMMARY = {total: 'least over the window', reserved: 'most over the window',
  allocated: 'most over the window', available: 'least over the window'};
const COMPUTE = ['VCPU', 'MEMORY_MB', 'DISK_GB'];
const MARGIN = {left: 86, right: 28, top: 26, bottom: 46};
const HEIGHT = 440;

/** The capacity query the chart draws. */
export function capacityPath(zone, resourceClass, win) {
  const query = new URLSearchParams({
    zoneId: zone,
    computeResourceTypeId: resourceClass,
    showUtilization: 'true',
    'timePeriod.startTime': time.iso(win.from),
    'timePeriod.stopTime': time.iso(win.to),
  });
  return `/promise/capacity/compute/query?${query}`;
}

/** The classes a compute capacity query measures, among those of a zone. */
export function classesOf(zone) {
  const classes = (zone && zone.resource_classes) || [];
  return classes.filter((c) => COMPUTE.includes(c) || c.startsWith('CUSTOM_'));
}

/** The steps as [{at, end, total, reserved, allocated, available}] over the window. */
export function stepsOf(answer, win) {
  const raw = answer.utilization || [];
  return raw.map((step, index) => ({
    at: time.parse(step.timestamp),
    end: index + 1 < raw.length ? time.parse(raw[index + 1].timestamp) : win.to,
    stamp: step.timestamp,
    total: step.total, reserved: step.reserved, allocated: step.allocated, available: step.available,
  }));
}

function band(steps, x, y, low, high) {
  const top = [];
  const bottom = [];
  for (const step of steps) {
    top.push([x(step.at), y(high(step))], [x(step.end), y(high(step))]);
    bottom.push([x(step.at), y(low(step))], [x(step.end), y(low(step))]);
  }
  const points = [...top, ...bottom.reverse()];
  return points.map(([px, py], i) => `${i ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`).join(' ') + ' Z';
}

function line(steps, x, y, value) {
  return steps.map((step, i) => `${i ? 'L' : 'M'}${x(step.at).toFixed(1)},${y(value(step)).toFixed(1)} ` +
    `L${x(step.end).toFixed(1)},${y(value(step)).toFixed(1)}`).join(' ');
}

function yAxis(svg, y, top, width, resourceClass) {
  const max = top;
  for (let i = 0; i <= 5; i++) {
    const value = (max * i) / 5;
    svg.append(s('line', {class: i ? 'grid' : 'axis-line', x1: MARGIN.left, x2: width - MARGIN.right, y1: y(value), y2: y(value)}),
      s('text', {class: 'tick', x: MARGIN.left - 8, y: y(value) + 4, 'text-anchor': 'end'}, formatAmount(value, resourceClass)));
  }
  svg.append(s('text', {class: 'axis-title', x: 16, y: MARGIN.top + (HEIGHT - MARGIN.top - MARGIN.bottom) / 2,
    transform: `rotate(-90 16 ${MARGIN.top + (HEIGHT - MARGIN.top - MARGIN.bottom) / 2})`, 'text-anchor': 'middle'},
  unitOf(resourceClass)));
}

function xAxis(svg, win, x, width) {
  const plot = width - MARGIN.left - MARGIN.right;
  const step = time.tickStep(win, plot, 90);
  const bottom = HEIGHT - MARGIN.bottom;
  for (const at of time.ticks(win, step)) {
    const daily = at % time.DAY === 0;
    svg.append(s('line', {class: daily ? 'grid day' : 'grid', x1: x(at), x2: x(at), y1: MARGIN.top, y2: bottom + 5}),
      s('text', {class: daily ? 'tick major' : 'tick', x: x(at), y: bottom + 20, 'text-anchor': 'middle'},
        daily ? time.day(at) : time.clock(at)));
  }
  svg.append(s('text', {class: 'axis-title', x: MARGIN.left + plot / 2, y: HEIGHT - 6, 'text-anchor': 'middle'}, 'time (UTC)'));
}

function points(steps, x, y) {
  const group = s('g', {class: 'points', 'data-role': 'points'});
  const level = {
    allocated: (st) => st.allocated,
    reserved: (st) => st.allocated + st.reserved,
    available: (st) => st.allocated + st.reserved + Math.max(st.available, 0),
    total: (st) => st.total,
  };
  for (const step of steps) {
    for (const series of SERIES) {
      group.append(s('circle', {class: `pt ${series.name}`, cx: x(step.at), cy: y(level[series.name](step)), r: 3,
        fill: series.color, 'data-role': 'point', 'data-series': series.name, 'data-at': step.stamp,
        'data-value': step[series.name]}));
    }
  }
  return group;
}

function hoverLayer(svg, steps, win, x, plot, resourceClass) {
  const tip = tooltip();
  const cross = s('line', {class: 'crosshair', y1: MARGIN.top, y2: HEIGHT - MARGIN.bottom, hidden: true});
  const area = s('rect', {class: 'hover-area', x: MARGIN.left, y: MARGIN.top, width: plot, height: HEIGHT - MARGIN.top - MARGIN.bottom});
  svg.append(cross, area);
  area.addEventListener('pointermove', (event) => {
    const box = svg.getBoundingClientRect();
    const px = event.clientX - box.left;
    const at = win.from + ((px - MARGIN.left) / plot) * (win.to - win.from);
    const step = steps.find((st) => at >= st.at && at < st.end) || steps[steps.length - 1];
    if (!step) return;
    cross.setAttribute('x1', px);
    cross.setAttribute('x2', px);
    cross.removeAttribute('hidden');
    tip.show(event, [
      h('div', {class: 'tt-title'}, `${time.stamp(at)} UTC`),
      h('div', {class: 'tt-row muted'}, `step from ${time.stamp(step.at)} to ${time.stamp(step.end)}`),
      ...SERIES.map((series) => h('div', {class: 'tt-row tt-figure'},
        h('span', {class: 'swatch', 'data-color': series.color}), h('span', {}, series.label),
        h('strong', {}, formatAmount(step[series.name], resourceClass)))),
    ]);
  });
  area.addEventListener('pointerleave', () => {
    tip.hide();
    cross.setAttribute('hidden', '');
  });
}

/** Draws the chart of `steps` over `win`, `width` wide. */
export function chart(steps, win, width, resourceClass, meta) {
  const plot = width - MARGIN.left - MARGIN.right;
  const x = (at) => MARGIN.left + ((Math.min(Math.max(at, win.from), win.to) - win.from) / (win.to - win.from)) * plot;
  const highest = Math.max(1, ...steps.map((st) => Math.max(st.total, st.allocated + st.reserved + Math.max(st.available, 0))));
  const top = niceMax(highest * 1.08);
  const y = (value) => HEIGHT - MARGIN.bottom - (Math.max(value, 0) / top) * (HEIGHT - MARGIN.top - MARGIN.bottom);
  const svg = s('svg', {class: 'capacity-chart', width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: 'img',
    'data-role': 'capacity-chart', 'data-zone': meta.zone, 'data-class': resourceClass,
    'data-from': time.iso(win.from), 'data-to': time.iso(win.to),
    'aria-label': `${resourceClass} capacity of ${meta.zone}`});
  yAxis(svg, y, top, width, resourceClass);
  xAxis(svg, win, x, width);
  const areas = s('g', {class: 'areas'});
  areas.append(
    s('path', {class: 'area allocated', d: band(steps, x, y, () => 0, (st) => st.allocated), fill: SERIES[0].color}),
    s('path', {class: 'area reserved', d: band(steps, x, y, (st) => st.allocated, (st) => st.allocated + st.reserved),
      fill: SERIES[1].color}),
    s('path', {class: 'area available', d: band(steps, x, y, (st) => st.allocated + st.reserved,
      (st) => st.allocated + st.reserved + Math.max(st.available, 0)), fill: SERIES[2].color}),
    s('path', {class: 'total-line', d: line(steps, x, y, (st) => st.total), stroke: SERIES[3].color}));
  svg.append(areas);
  const current = time.now();
  if (current >= win.from && current <= win.to) {
    svg.append(s('g', {class: 'now', 'data-role': 'now'},
      s('line', {x1: x(current), x2: x(current), y1: MARGIN.top - 8, y2: HEIGHT - MARGIN.bottom}),
      s('rect', {x: x(current) - 20, y: MARGIN.top - 22, width: 40, height: 16, rx: 8}),
      s('text', {x: x(current), y: MARGIN.top - 10, 'text-anchor': 'middle'}, 'now')));
  }
  svg.append(points(steps, x, y));
  hoverLayer(svg, steps, win, x, plot, resourceClass);
  return svg;
}

function summaryCards(info, resourceClass) {
  return h('div', {class: 'cards', 'data-role': 'capacity-summary'}, SERIES.map((series) =>
    h('div', {class: `card ${series.name}`, 'data-role': 'summary-value', 'data-series': series.name,
      'data-value': info[series.name]},
    h('div', {class: 'card-head'}, h('span', {class: 'swatch', 'data-color': series.color}), series.label),
    h('div', {class: 'card-value'}, formatAmount(info[series.name], resourceClass)),
    h('div', {class: 'card-note muted'}, `${SUMMARY[series.name]} · ${series.note}`))));
}

function stepTable(steps, resourceClass) {
  const unit = resourceClass === 'MEMORY_MB' ? ' (MB)' : resourceClass === 'DISK_GB' ? ' (GB)' : '';
  return h('details', {class: 'steps', open: steps.length <= 12},
    h('summary', {}, `${steps.length} step${steps.length === 1 ? '' : 's'} of the capacity function${unit}`),
    h('table', {class: 'data'},
      h('thead', {}, h('tr', {}, h('th', {}, 'From (UTC)'), h('th', {}, 'Until'),
        SERIES.map((series) => h('th', {class: 'num'}, series.label)))),
      h('tbody', {}, steps.map((step) => h('tr', {'data-role': 'step', 'data-at': step.stamp},
        h('td', {}, time.stamp(step.at)), h('td', {}, time.stamp(step.end)),
        SERIES.map((series) => h('td', {class: `num ${series.name === 'available' && step.available <= 0 ? 'alarm' : ''}`},
          formatInt(step[series.name]))))))));
}

async function zoneCards(zones, resourceClass, win, selected, pick) {
  const answers = await Promise.all(zones.map((zone) =>
    classesOf(zone).includes(resourceClass)
      ? get(capacityPath(zone.name, resourceClass, win).replace('showUtilization=true', 'showUtilization=false'))
        .catch(() => null)
      : null));
  return h('div', {class: 'zone-cards'}, zones.map((zone, index) => {
    const info = answers[index] && answers[index].capacityInformation;
    const share = info && info.total > 0 ? Math.max(0, Math.min(1, info.available / info.total)) : 0;
    const meter = h('span', {class: 'meter-fill'});
    const card = h('button', {type: 'button', class: `zone-card${zone.name === selected ? ' selected' : ''}`,
      'data-zone': zone.name, onclick: () => pick(zone.name)},
    h('span', {class: 'zone-name'}, zone.name),
    h('span', {class: 'muted'}, `${zone.hosts} hosts${zone.hosts_out_of_service ? `, ${zone.hosts_out_of_service} out of service` : ''}`),
    info ? h('span', {class: 'zone-figure'}, h('strong', {}, formatAmount(info.available, resourceClass)),
      ` of ${formatAmount(info.total, resourceClass)} free for the whole window`) : h('span', {class: 'muted'}, 'not measured here'),
    h('span', {class: 'meter'}, meter));
    meter.style.width = `${(share * 100).toFixed(1)}%`;
    return card;
  }));
}

const LOCAL = 'local';

function providerName(id, clouds) {
  if (id === LOCAL) return 'berth\'s own hosts';
  const cloud = clouds.find((c) => c.id === id);
  return cloud ? `cloud ${shortId(id)} (${cloud.region || 'any region'})` : `cloud ${shortId(id)}`;
}

/** The figures of each provider whose capacity is in the zone: the query's `providers`. */
function providerTable(answer, clouds, resourceClass) {
  const parts = answer.providers || [];
  if (parts.length < 2 && !parts.some((p) => p.providerId !== LOCAL)) return null;
  return h('section', {class: 'providers', 'data-role': 'provider-capacity'},
    h('h2', {}, 'By provider'),
    h('table', {class: 'data'},
      h('thead', {}, h('tr', {}, h('th', {}, 'Provider'),
        SERIES.map((series) => h('th', {class: 'num'}, series.label)))),
      h('tbody', {}, parts.map((part) => {
        const info = part.capacityInformation || {};
        return h('tr', {'data-role': 'provider-figures', 'data-provider': part.providerId},
          h('td', {title: part.providerId}, providerName(part.providerId, clouds)),
          SERIES.map((series) => h('td', {class: `num ${series.name === 'available' && info.available <= 0 ? 'alarm' : ''}`,
            'data-series': series.name, 'data-value': info[series.name]},
          formatAmount(info[series.name] ?? 0, resourceClass))));
      }))));
}

/** The registered provider clouds and their synchronisation (admins only). */
function cloudTable(clouds) {
  if (!clouds.length) return null;
  return h('section', {class: 'providers', 'data-role': 'provider-clouds'},
    h('h2', {}, 'Provider clouds'),
    h('table', {class: 'data'},
      h('thead', {}, h('tr', {}, ['Provider', 'Region', 'State', 'Since', 'Last read', 'Providers', 'Last error']
        .map((name) => h('th', {}, name)))),
      h('tbody', {}, clouds.map((cloud) => {
        const sync = cloud.sync || {};
        return h('tr', {'data-role': 'provider-cloud', 'data-provider': cloud.id, 'data-state': sync.state},
          h('td', {title: cloud.id}, shortId(cloud.id)),
          h('td', {}, cloud.region || ''),
          h('td', {}, h('span', {class: `badge sync-${sync.state}`}, sync.state || 'pending')),
          h('td', {}, sync.since ? time.stamp(time.parse(sync.since)) : ''),
          h('td', {}, sync['last-sync'] ? time.stamp(time.parse(sync['last-sync'])) : 'never'),
          h('td', {class: 'num'}, formatInt(sync.providers || 0)),
          h('td', {class: 'muted'}, sync['last-error'] || ''));
      }))));
}

function select(name, options, value, onChange, label) {
  return h('label', {class: 'field'}, h('span', {}, label),
    h('select', {name, onchange: (event) => onChange(event.target.value)},
      options.map(([key, text]) => h('option', {value: key, selected: key === value}, text))));
}

/** The capacity view. */
export async function render(main, ctx) {
  const params = ctx.params;
  const win = time.windowOf(params);
  const zones = (await get('/ui/api/zones')).zones || [];
  if (!zones.length) {
    replace(main, h('div', {class: 'view-head'}, h('h1', {}, 'Capacity')),
      h('p', {class: 'empty'}, 'There is no zone yet: enrol hosts with an availability zone.'));
    return;
  }
  const zone = zones.find((z) => z.name === params.get('zone')) || zones[0];
  const classes = classesOf(zone);
  const resourceClass = classes.includes(params.get('class')) ? params.get('class') : classes[0] || 'VCPU';
  const go = (changes) => {
    const next = new URLSearchParams(params);
    for (const [key, value] of Object.entries(changes)) next.set(key, value);
    ctx.navigate('capacity', next, {replace: true});
  };
  const path = capacityPath(zone.name, resourceClass, win);
  const [answer, cards, registered] = await Promise.all([
    get(path),
    zoneCards(zones, resourceClass, win, zone.name, (name) => go({zone: name})),
    getOptional('/promise/providers', {providers: []}),
  ]);
  const clouds = (registered && registered.providers) || [];
  if (!ctx.isCurrent()) return;
  const steps = stepsOf(answer, win);
  const frame = h('div', {class: 'chart-frame'});
  replace(main,
    h('div', {class: 'view-head'}, h('h1', {}, 'Capacity'),
      h('p', {class: 'muted'}, 'What can still be promised, per zone and resource class: the Promise capacity query\'s figures over the window.')),
    h('div', {class: 'toolbar'},
      windowControls(win, (next) => go({from: time.iso(next.from), to: time.iso(next.to)})),
      h('div', {class: 'tool-group'},
        select('zone', zones.map((z) => [z.name, z.name]), zone.name, (value) => go({zone: value}), 'Zone'),
        select('class', classes.map((c) => [c, c]), resourceClass, (value) => go({class: value}), 'Class'))),
    cards,
    h('h2', {class: 'chart-title'}, `${zone.name} · ${resourceClass}`,
      h('span', {class: 'muted'}, ` ${unitOf(resourceClass)}, ${time.stamp(win.from)} → ${time.stamp(win.to)} UTC`)),
    summaryCards(answer.capacityInformation || {}, resourceClass),
    frame,
    h('div', {class: 'legend'}, h('div', {class: 'legend-group'}, SERIES.map((series) =>
      h('span', {class: 'key'}, h('span', {class: `key-swatch series ${series.name}`, 'data-color': series.color}),
        `${series.label} — ${series.note}`)))),
    stepTable(steps, resourceClass),
    providerTable(answer, clouds, resourceClass),
    cloudTable(clouds),
    h('p', {class: 'muted source'}, 'Source: ', h('code', {}, `GET ${decodeURIComponent(path)}`)));
  const width = Math.max(frame.clientWidth || 1200, 700);
  frame.append(chart(steps, win, width, resourceClass, {zone: zone.name}));
  paintSwatches(main);
}
