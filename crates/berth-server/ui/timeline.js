// The timeline: one row per host, time across, one bar per (lease, host) hold in the chosen
// window, coloured by project. Pending holds are hatched and lighter, active ones solid,
// degraded leases outlined in red with a marker, and a hold a host out of service can no
// longer honour is cross-hatched red. Hosts down or in maintenance are shaded from when it
// happened. Zoom and pan with the buttons, the keyboard (+ - arrows), a drag, or Ctrl + wheel.
//
// Bars carry data attributes the end-to-end tests read: data-lease-id, data-host (the Blazar
// host id), data-host-name, data-project, data-status, data-degraded, data-missing.

import {get, getOptional} from './api.js';
import {h, s, replace, projectColor, projectChip, paintSwatches, statusBadge, formatInt, registerProjects} from './dom.js';
import * as time from './time.js';

const LABEL_W = 220;
const ROW_H = 22;
const BAR_H = 16;
const AXIS_H = 50;
const GROUP_H = 26;
const CACHE_MS = 15 * 1000;

let cache = null;

/** Leases, hosts (admin) and hosts out of service (admin), fetched together and kept briefly. */
export async function load(force = false) {
  if (!force && cache && Date.now() - cache.at < CACHE_MS) return cache;
  const [leases, hosts, failures] = await Promise.all([
    get('/reservation/v1/leases'),
    getOptional('/reservation/v1/os-hosts', null),
    getOptional('/ui/api/failures', null),
  ]);
  registerProjects((leases.leases || []).map((lease) => lease.project_id));
  cache = {
    at: Date.now(),
    leases: leases.leases || [],
    hosts: hosts ? hosts.hosts || [] : null,
    failures: failures ? failures.providers || [] : null,
  };
  return cache;
}

/** Forgets what {@link load} kept. */
export function forget() {
  cache = null;
}

/** Whether a lease's window overlaps `win`. */
export function overlaps(lease, win) {
  return time.parse(lease.start_date) < win.to && time.parse(lease.end_date) > win.from;
}

/**
 * Every (lease, host) hold of the leases overlapping `win`, from each reservation's
 * `allocations`; `missing` counts what a host out of service can no longer give.
 */
export function holdsIn(leases, win) {
  const holds = new Map();
  for (const lease of leases) {
    if (!overlaps(lease, win)) continue;
    for (const reservation of lease.reservations || []) {
      const missing = reservation.missing_resources && reservation.missing_resources.hosts || [];
      for (const allocation of reservation.allocations || []) {
        const hostId = String(allocation.host_id);
        const key = `${lease.id}|${hostId}`;
        let hold = holds.get(key);
        if (!hold) {
          hold = {
            key, lease, hostId, provider: allocation.provider_uuid, slots: 0, missing: 0,
            kinds: new Set(), start: time.parse(lease.start_date), end: time.parse(lease.end_date),
          };
          holds.set(key, hold);
        }
        hold.slots += Number(allocation.slots) || 0;
        hold.kinds.add(reservation.resource_type);
        for (const lost of missing) {
          if (String(lost.host_id) === hostId) hold.missing += Number(lost.amount) || 0;
        }
      }
    }
  }
  return [...holds.values()];
}

/** Rows: hosts grouped by zone, with their state; without host details, the hosts holds name. */
export function rowsOf(data, holds, {zone = '', all = false} = {}) {
  const since = new Map((data.failures || []).filter((f) => f.host_id)
    .map((f) => [String(f.host_id), time.parse(f.since)]));
  const busy = new Set(holds.map((hold) => hold.hostId));
  let rows;
  if (data.hosts) {
    rows = data.hosts.map((host) => ({
      id: String(host.id),
      name: host.hypervisor_hostname,
      zone: host.availability_zone || 'no zone',
      status: host.status || 'up',
      reason: host.status_reason || '',
      since: since.get(String(host.id)),
      baremetal: host.hypervisor_type === 'ironic',
    }));
  } else {
    rows = [...busy].map((id) => ({id, name: `host ${id}`, zone: 'hosts', status: 'up', reason: ''}));
  }
  return rows
    .filter((row) => !zone || row.zone === zone)
    .filter((row) => all || busy.has(row.id) || row.status !== 'up')
    .sort((a, b) => a.zone.localeCompare(b.zone) || a.name.localeCompare(b.name, 'en', {numeric: true}));
}

function defs() {
  const stripes = (id, color, width, angle = 45) =>
    s('pattern', {id, width: 8, height: 8, patternUnits: 'userSpaceOnUse', patternTransform: `rotate(${angle})`},
      s('rect', {width, height: 8, fill: color}));
  return s('defs', {},
    stripes('tl-pending', 'rgba(255,255,255,0.55)', 3),
    stripes('tl-down', 'rgba(220,38,38,0.16)', 4),
    stripes('tl-maintenance', 'rgba(217,119,6,0.18)', 4),
    s('pattern', {id: 'tl-missing', width: 6, height: 6, patternUnits: 'userSpaceOnUse'},
      s('rect', {width: 6, height: 6, fill: '#fee2e2'}),
      s('path', {d: 'M0,0 L6,6 M6,0 L0,6', stroke: '#dc2626', 'stroke-width': 1.2})));
}

function axis(win, x, width, height) {
  const group = s('g', {class: 'axis'});
  const plot = width - LABEL_W;
  const minor = time.tickStep(win, plot, 64);
  const major = time.tickStep(win, plot, 130) < time.DAY ? time.DAY : time.tickStep(win, plot, 130);
  // Weekends, lightly shaded.
  for (let day = Math.floor(win.from / time.DAY) * time.DAY; day < win.to; day += time.DAY) {
    if (!time.weekend(day)) continue;
    const x0 = x(Math.max(day, win.from));
    const x1 = x(Math.min(day + time.DAY, win.to));
    group.append(s('rect', {class: 'weekend', x: x0, y: AXIS_H, width: Math.max(x1 - x0, 0), height: height - AXIS_H}));
  }
  const current = time.now();
  const nowX = current >= win.from && current <= win.to ? x(current) : -1000;
  for (const at of time.ticks(win, minor)) {
    const daily = at % time.DAY === 0;
    group.append(s('line', {class: daily ? 'grid day' : 'grid', x1: x(at), x2: x(at), y1: AXIS_H - 8, y2: height}));
    // The "now" badge sits on the hour row: labels it would cover are left out.
    if (minor < time.DAY && (x(at) + 30 < nowX - 22 || x(at) > nowX + 22)) {
      group.append(s('text', {class: 'tick', x: x(at) + 3, y: AXIS_H - 12}, time.clock(at)));
    }
  }
  for (const at of time.ticks(win, major)) {
    const next = Math.min(at + major, win.to);
    const label = major >= 7 * time.DAY ? `week of ${time.day(at)}` : time.day(at);
    if (x(next) - x(at) < 40 && minor < time.DAY) continue;
    group.append(s('line', {class: 'grid major', x1: x(at), x2: x(at), y1: 4, y2: height}));
    group.append(s('text', {class: 'tick major', x: x(at) + 4, y: 18}, label));
  }
  group.append(s('line', {class: 'axis-line', x1: LABEL_W, x2: width, y1: AXIS_H, y2: AXIS_H}),
    s('text', {class: 'axis-head', x: 12, y: 18}, 'HOSTS'),
    s('text', {class: 'axis-note', x: 12, y: AXIS_H - 12}, 'times in UTC'));
  return group;
}

function hostLabel(row, y) {
  const status = row.status || 'up';
  return s('g', {class: `host-label host-${status}`, 'data-role': 'host-row', 'data-host': row.id,
    'data-host-name': row.name, 'data-host-status': status},
  s('title', {}, `${row.name} · ${status}${row.reason ? ` — ${row.reason}` : ''}`),
  s('circle', {class: `dot ${status}`, cx: 14, cy: y + ROW_H / 2, r: 4}),
  s('text', {class: 'host-name', x: 26, y: y + ROW_H / 2 + 4}, row.name),
  status !== 'up' ? s('text', {class: `host-tag ${status}`, x: LABEL_W - 10, y: y + ROW_H / 2 + 4,
    'text-anchor': 'end'}, status === 'maintenance' ? 'MAINT' : 'DOWN') : null);
}

function label(hold) {
  const slots = hold.kinds.has('virtual:instance') ? ` ×${hold.slots}` : '';
  return `${hold.lease.name}${slots}`;
}

function bar(hold, x, y, win, handlers) {
  const lease = hold.lease;
  const status = String(lease.status || '').toUpperCase();
  const x0 = x(Math.max(hold.start, win.from));
  const x1 = x(Math.min(hold.end, win.to));
  const width = Math.max(x1 - x0, 2);
  const top = y + (ROW_H - BAR_H) / 2;
  const color = projectColor(lease.project_id);
  const missing = hold.missing > 0;
  const group = s('g', {
    class: `bar ${status.toLowerCase()}${lease.degraded ? ' degraded' : ''}${missing ? ' missing' : ''}`,
    'data-role': 'bar', 'data-lease-id': lease.id, 'data-host': hold.hostId,
    'data-host-name': handlers.hostName(hold.hostId), 'data-project': lease.project_id,
    'data-status': status, 'data-degraded': String(Boolean(lease.degraded)), 'data-missing': String(hold.missing),
    'data-slots': hold.slots, 'data-start': lease.start_date, 'data-end': lease.end_date, tabindex: 0,
  });
  group.append(s('rect', {class: 'bar-body', x: x0, y: top, width, height: BAR_H, rx: 4,
    fill: missing ? 'url(#tl-missing)' : color}));
  if (status === 'PENDING' && !missing) {
    group.append(s('rect', {class: 'bar-hatch', x: x0, y: top, width, height: BAR_H, rx: 4, fill: 'url(#tl-pending)'}));
  }
  if (lease.degraded || missing) {
    group.append(s('rect', {class: 'bar-alarm', x: x0 + 0.5, y: top + 0.5, width: Math.max(width - 1, 1),
      height: BAR_H - 1, rx: 4}));
  }
  let textX = x0 + 7;
  if (lease.degraded) {
    group.append(s('circle', {class: 'alarm-dot', cx: x0 + 10, cy: top + BAR_H / 2, r: 6}),
      s('text', {class: 'alarm-mark', x: x0 + 10, y: top + BAR_H / 2 + 4, 'text-anchor': 'middle'}, '!'));
    textX += 13;
  }
  const text = missing ? `${lease.name} — missing` : label(hold);
  const room = Math.floor((x0 + width - textX - 4) / 6.4);
  if (room >= 4) {
    group.append(s('text', {class: 'bar-label', x: textX, y: top + BAR_H / 2 + 4},
      text.length > room ? `${text.slice(0, room - 1)}…` : text));
  }
  group.addEventListener('pointerenter', (event) => handlers.hover(event, hold));
  group.addEventListener('pointermove', (event) => handlers.move(event));
  group.addEventListener('pointerleave', () => handlers.leave());
  group.addEventListener('click', () => handlers.open(lease.id));
  group.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') handlers.open(lease.id);
  });
  return group;
}

function when(hold) {
  const current = time.now();
  if (current < hold.start) return `starts ${time.relative(hold.start, current)}`;
  if (current < hold.end) return `started ${time.relative(hold.start, current)}, ends ${time.relative(hold.end, current)}`;
  return `ended ${time.relative(hold.end, current)}`;
}

function tooltipBody(hold, hostName) {
  const lease = hold.lease;
  const kinds = [...hold.kinds].map((k) => ({'physical:host': 'whole host', 'virtual:instance':
    `${hold.slots} instance slot${hold.slots === 1 ? '' : 's'}`, 'virtual:floatingip': 'addresses'}[k] || k));
  return [
    h('div', {class: 'tt-title'}, lease.name),
    h('div', {class: 'tt-row'}, projectChip(lease.project_id), statusBadge(lease.status),
      lease.degraded ? h('span', {class: 'badge degraded'}, 'degraded') : null),
    h('div', {class: 'tt-row'}, `${time.stamp(hold.start)} → ${time.stamp(hold.end)} UTC`),
    h('div', {class: 'tt-row muted'}, `${time.duration(hold.end - hold.start)} · ${when(hold)}`),
    h('div', {class: 'tt-row'}, `${hostName} · ${kinds.join(', ')}`),
    hold.missing ? h('div', {class: 'tt-row alarm'},
      `${hold.missing} ${hold.kinds.has('physical:host') ? 'host' : 'instance'}${hold.missing === 1 ? '' : 's'} missing here: the host is out of service`) : null,
    h('div', {class: 'tt-hint'}, 'Click for the lease'),
  ];
}

/** A tooltip that follows the pointer. */
export function tooltip() {
  let node = document.querySelector('body > .tooltip');
  if (!node) {
    node = h('div', {class: 'tooltip', role: 'tooltip', hidden: true});
    document.body.append(node);
  }
  return {
    node,
    show(event, children) {
      replace(node, ...children);
      paintSwatches(node);
      node.hidden = false;
      this.move(event);
    },
    move(event) {
      const pad = 14;
      const {innerWidth, innerHeight} = window;
      const rect = node.getBoundingClientRect();
      let left = event.clientX + pad;
      let top = event.clientY + pad;
      if (left + rect.width > innerWidth - 8) left = event.clientX - rect.width - pad;
      if (top + rect.height > innerHeight - 8) top = event.clientY - rect.height - pad;
      node.style.left = `${Math.max(left, 4)}px`;
      node.style.top = `${Math.max(top, 4)}px`;
    },
    hide() {
      node.hidden = true;
    },
  };
}

let tip = null;

/**
 * Draws the Gantt chart of `rows` and `holds` over `win` into an SVG `width` wide. `open` is
 * called with a lease id when a bar is clicked; `onWindow` with a new window after a drag or a
 * Ctrl + wheel (omit it for a static chart).
 */
export function gantt({rows, holds, win, width, open, onWindow}) {
  if (!tip || !tip.node.isConnected) tip = tooltip();
  const names = new Map(rows.map((row) => [row.id, row.name]));
  const layout = [];
  let y = AXIS_H + 4;
  let zone = null;
  for (const row of rows) {
    if (row.zone !== zone) {
      zone = row.zone;
      layout.push({group: zone, y});
      y += GROUP_H;
    }
    layout.push({row, y});
    y += ROW_H;
  }
  const height = y + 8;
  const plot = width - LABEL_W - 12;
  const x = (at) => LABEL_W + ((at - win.from) / (win.to - win.from)) * plot;
  const svg = s('svg', {class: 'gantt', width, height, viewBox: `0 0 ${width} ${height}`, 'data-role': 'timeline',
    'data-from': time.iso(win.from), 'data-to': time.iso(win.to), role: 'img',
    'aria-label': `Reservations per host from ${time.stamp(win.from)} to ${time.stamp(win.to)} UTC`});
  svg.append(defs());
  const counts = new Map();
  for (const row of rows) counts.set(row.zone, (counts.get(row.zone) || 0) + 1);
  layout.forEach((item, index) => {
    if (item.group) {
      svg.append(s('g', {class: 'zone-head', 'data-role': 'zone', 'data-zone': item.group},
        s('rect', {x: 0, y: item.y, width, height: GROUP_H - 2}),
        s('text', {x: 10, y: item.y + 17}, item.group),
        s('text', {class: 'zone-count', x: LABEL_W - 10, y: item.y + 17, 'text-anchor': 'end'},
          `${counts.get(item.group)} host${counts.get(item.group) === 1 ? '' : 's'}`)));
      return;
    }
    svg.append(s('rect', {class: index % 2 ? 'row odd' : 'row', x: 0, y: item.y, width, height: ROW_H}));
  });
  svg.append(axis(win, x, LABEL_W + plot, height));
  const hostRows = new Map();
  for (const item of layout) {
    if (!item.row) continue;
    hostRows.set(item.row.id, item.y);
    const row = item.row;
    if (row.status && row.status !== 'up') {
      const start = Number.isFinite(row.since) ? Math.max(row.since, win.from) : win.from;
      if (start < win.to) {
        svg.append(s('rect', {class: `outage ${row.status}`, x: x(start), y: item.y + 1, width: x(win.to) - x(start),
          height: ROW_H - 2, fill: `url(#tl-${row.status})`, 'data-role': 'outage', 'data-host': row.id}));
      }
    }
    svg.append(hostLabel(row, item.y));
  }
  svg.append(s('line', {class: 'label-edge', x1: LABEL_W, x2: LABEL_W, y1: 0, y2: height}));
  const handlers = {
    hostName: (id) => names.get(id) || `host ${id}`,
    hover: (event, hold) => tip.show(event, tooltipBody(hold, names.get(hold.hostId) || `host ${hold.hostId}`)),
    move: (event) => tip.move(event),
    leave: () => tip.hide(),
    open: (id) => {
      tip.hide();
      open(id);
    },
  };
  const bars = s('g', {class: 'bars'});
  for (const hold of holds) {
    const rowY = hostRows.get(hold.hostId);
    if (rowY === undefined) continue;
    bars.append(bar(hold, x, rowY, win, handlers));
  }
  svg.append(bars);
  const current = time.now();
  if (current >= win.from && current <= win.to) {
    svg.append(s('g', {class: 'now', 'data-role': 'now', 'data-at': time.iso(current)},
      s('line', {x1: x(current), x2: x(current), y1: AXIS_H - 6, y2: height}),
      s('rect', {x: x(current) - 20, y: AXIS_H - 22, width: 40, height: 16, rx: 8}),
      s('text', {x: x(current), y: AXIS_H - 10, 'text-anchor': 'middle'}, 'now')));
  }
  if (onWindow) interact(svg, win, plot, onWindow);
  return svg;
}

function interact(svg, win, plot, onWindow) {
  let start = null;
  svg.addEventListener('pointerdown', (event) => {
    if (event.button !== 0 || event.target.closest('.bar')) return;
    start = event.clientX;
    svg.setPointerCapture(event.pointerId);
    svg.classList.add('dragging');
  });
  svg.addEventListener('pointerup', (event) => {
    if (start === null) return;
    const moved = event.clientX - start;
    start = null;
    svg.classList.remove('dragging');
    if (Math.abs(moved) > 4) onWindow(time.pan(win, -moved / plot));
  });
  svg.addEventListener('wheel', (event) => {
    if (!event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    const box = svg.getBoundingClientRect();
    const at = win.from + ((event.clientX - box.left - LABEL_W) / plot) * (win.to - win.from);
    onWindow(time.zoom(win, event.deltaY > 0 ? 1.5 : 1 / 1.5, Math.min(Math.max(at, win.from), win.to)));
  }, {passive: false});
}

let keys = null;
document.addEventListener('keydown', (event) => {
  if (!keys || event.target.closest && event.target.closest('input, select, textarea')) return;
  if (!document.querySelector('.window-controls')) return;
  const action = {'ArrowLeft': 'earlier', 'ArrowRight': 'later', '+': 'in', '=': 'in', '-': 'out'}[event.key];
  if (action) keys(action);
});

const PRESETS = [['1 d', time.DAY], ['3 d', 3 * time.DAY], ['1 w', 8 * time.DAY], ['2 w', 14 * time.DAY], ['4 w', 28 * time.DAY]];

/** The window buttons (earlier, zoom out, zoom in, later, now, presets) and the range. */
export function windowControls(win, onChange) {
  const act = (action) => {
    const next = {
      earlier: () => time.pan(win, -0.25),
      later: () => time.pan(win, 0.25),
      in: () => time.zoom(win, 0.5),
      out: () => time.zoom(win, 2),
      now: () => time.defaultWindow(),
    }[action]();
    onChange(next);
  };
  keys = act;
  const button = (action, text, title) => h('button', {type: 'button', class: 'tool', 'data-act': action, title,
    onclick: () => act(action)}, text);
  const preset = ([text, span]) => h('button', {type: 'button', class: 'tool preset', title: `Show ${text}`,
    onclick: () => {
      const from = Math.floor((time.now() - span / 8) / time.HOUR) * time.HOUR;
      onChange({from, to: from + span});
    }}, text);
  return h('div', {class: 'window-controls'},
    h('div', {class: 'tool-group'},
      button('earlier', '◀', 'Earlier (←)'), button('out', '−', 'Zoom out (−)'),
      button('in', '+', 'Zoom in (+)'), button('later', '▶', 'Later (→)'), button('now', 'Now', 'Back to now')),
    h('div', {class: 'tool-group'}, PRESETS.map(preset)),
    h('span', {class: 'range', 'data-role': 'window', 'data-from': time.iso(win.from), 'data-to': time.iso(win.to)},
      `${time.stamp(win.from)} → ${time.stamp(win.to)} UTC`, h('span', {class: 'muted'}, ` · ${time.duration(win.to - win.from)}`)));
}

function legend(holds) {
  const projects = [...new Set(holds.map((hold) => hold.lease.project_id))].sort();
  const key = (cls, text) => h('span', {class: 'key'}, h('span', {class: `key-swatch ${cls}`}), text);
  return h('div', {class: 'legend', 'data-role': 'legend'},
    h('div', {class: 'legend-group'}, h('span', {class: 'legend-title'}, 'Projects'), projects.map(projectChip)),
    h('div', {class: 'legend-group'}, h('span', {class: 'legend-title'}, 'Status'),
      key('active', 'active'), key('pending', 'pending'), key('degraded', 'degraded lease'),
      key('missing', 'missing on a host out of service'), key('down', 'host down'),
      key('maintenance', 'host in maintenance')));
}

function summary(data, holds, rows) {
  const leases = [...new Map(holds.map((hold) => [hold.lease.id, hold.lease])).values()];
  const count = (status) => leases.filter((l) => String(l.status).toUpperCase() === status).length;
  const degraded = leases.filter((l) => l.degraded).length;
  const out = data.hosts ? rows.filter((row) => row.status && row.status !== 'up').length : null;
  const stat = (value, text, cls = '') => h('div', {class: `stat ${cls}`}, h('strong', {}, formatInt(value)), h('span', {}, text));
  return h('div', {class: 'stats', 'data-role': 'summary'},
    stat(leases.length, 'leases in window'), stat(count('ACTIVE'), 'active'), stat(count('PENDING'), 'pending'),
    stat(holds.length, 'host holds'), stat(degraded, 'degraded', degraded ? 'alarm' : ''),
    out === null ? null : stat(out, 'hosts out of service', out ? 'warn' : ''),
  );
}

function select(name, options, value, onChange, label) {
  return h('label', {class: 'field'}, h('span', {}, label),
    h('select', {name, onchange: (event) => onChange(event.target.value)},
      options.map(([key, text]) => h('option', {value: key, selected: key === value}, text))));
}

/** The timeline view. */
export async function render(main, ctx) {
  const params = ctx.params;
  const win = time.windowOf(params);
  const zone = params.get('zone') || '';
  const all = params.get('rows') === 'all';
  const data = await load(params.get('refresh') === '1');
  if (!ctx.isCurrent()) return;
  const go = (changes) => {
    const next = new URLSearchParams(params);
    next.delete('refresh');
    for (const [key, value] of Object.entries(changes)) {
      if (value === '' || value === null) next.delete(key);
      else next.set(key, value);
    }
    ctx.navigate('timeline', next, {replace: true});
  };
  const onWindow = (next) => go({from: time.iso(next.from), to: time.iso(next.to)});
  const holdsAll = holdsIn(data.leases, win);
  const rows = rowsOf(data, holdsAll, {zone, all});
  const shown = new Set(rows.map((row) => row.id));
  const holds = holdsAll.filter((hold) => shown.has(hold.hostId));
  const zones = [...new Set((data.hosts || []).map((host) => host.availability_zone).filter(Boolean))].sort();
  const chart = h('div', {class: 'chart-frame'});
  const toolbar = h('div', {class: 'toolbar'},
    windowControls(win, onWindow),
    h('div', {class: 'tool-group'},
      select('zone', [['', 'All zones'], ...zones.map((z) => [z, z])], zone, (value) => go({zone: value}), 'Zone'),
      select('rows', [['busy', 'Busy hosts'], ['all', 'All hosts']], all ? 'all' : 'busy',
        (value) => go({rows: value === 'all' ? 'all' : ''}), 'Rows'),
      h('button', {type: 'button', class: 'tool', onclick: () => go({refresh: '1'})}, 'Refresh')));
  replace(main,
    h('div', {class: 'view-head'}, h('h1', {}, 'Timeline'),
      h('p', {class: 'muted'}, 'Reservations per host. Drag or use the arrows to move, + and − to zoom; hover a bar for details, click it for the lease.')),
    data.hosts ? null : h('p', {class: 'notice'}, 'Host names and states need a token with the admin role; hosts are shown by id.'),
    toolbar, summary(data, holds, rows), chart, legend(holds));
  if (!rows.length) {
    chart.append(h('p', {class: 'empty'}, 'No reservation holds a host in this window.'));
  } else {
    const width = Math.max(chart.clientWidth || 1200, 760);
    chart.append(gantt({rows, holds, win, width, open: (id) => ctx.navigate(`lease/${encodeURIComponent(id)}`), onWindow}));
  }
  paintSwatches(main);
}
