// The lease list and the lease detail page: a lease's reservations (what each asked for, the
// hosts it holds, what is missing), its hosts on a small timeline, the projects it is shared with
// (and what each holds inside it), its lifecycle events, its
// lifecycle record (`/leases/{id}/events`) and the notifications sent about it
// (`/promise/notifications`, filtered by reservationId in the page).

import {allNotifications, get, getOptional} from './api.js';
import {h, replace, projectChip, statusBadge, degradedBadge, paintSwatches, shortId, empty, hostBadge,
  formatAmount, registerProjects} from './dom.js';
import * as time from './time.js';
import {gantt, holdsIn, load, rowsOf} from './timeline.js';

/** What a reservation asked for, in a few words. */
export function describe(reservation) {
  switch (reservation.resource_type) {
    case 'physical:host': {
      const range = reservation.min === reservation.max ? `${reservation.min}` : `${reservation.min}–${reservation.max}`;
      return `${range} whole host${reservation.max === 1 ? '' : 's'}`;
    }
    case 'virtual:instance':
      return `${reservation.amount} × ${reservation.vcpus} vCPU, ${formatAmount(reservation.memory_mb, 'MEMORY_MB')}, ` +
        `${formatAmount(reservation.disk_gb, 'DISK_GB')}`;
    case 'virtual:floatingip':
      return `${reservation.amount} address${reservation.amount === 1 ? '' : 'es'} on ${reservation.network_id}`;
    default:
      return reservation.resource_type;
  }
}

function hostCount(lease) {
  const hosts = new Set();
  for (const r of lease.reservations || []) for (const a of r.allocations || []) hosts.add(String(a.host_id));
  return hosts.size;
}

function leaseLink(lease) {
  return h('a', {href: `#/lease/${encodeURIComponent(lease.id)}`, class: 'lease-link'}, lease.name);
}

function windowCell(lease) {
  const start = time.parse(lease.start_date);
  const end = time.parse(lease.end_date);
  const current = time.now();
  const when = current < start ? `starts ${time.relative(start)}` : current < end ? `ends ${time.relative(end)}` : `ended ${time.relative(end)}`;
  return [h('td', {}, time.stamp(start)), h('td', {}, time.stamp(end)),
    h('td', {class: 'muted'}, `${time.duration(end - start)} · ${when}`)];
}

function select(name, options, value, onChange, label) {
  return h('label', {class: 'field'}, h('span', {}, label),
    h('select', {name, onchange: (event) => onChange(event.target.value)},
      options.map(([key, text]) => h('option', {value: key, selected: key === value}, text))));
}

/** The lease list. */
export async function render(main, ctx) {
  const params = ctx.params;
  const body = await get('/reservation/v1/leases');
  if (!ctx.isCurrent()) return;
  registerProjects((body.leases || []).map((lease) => lease.project_id));
  const all = (body.leases || []).slice().sort((a, b) => time.parse(a.start_date) - time.parse(b.start_date) ||
    a.name.localeCompare(b.name));
  const status = (params.get('status') || '').toUpperCase();
  const project = params.get('project') || '';
  const query = (params.get('q') || '').toLowerCase();
  const leases = all.filter((l) => (!status || (status === 'DEGRADED' ? l.degraded : l.status === status)) &&
    (!project || l.project_id === project) && (!query || `${l.name} ${l.id}`.toLowerCase().includes(query)));
  const projects = [...new Set(all.map((l) => l.project_id))].sort();
  const go = (changes) => {
    const next = new URLSearchParams(params);
    for (const [key, value] of Object.entries(changes)) value ? next.set(key, value) : next.delete(key);
    ctx.navigate('leases', next, {replace: true});
  };
  const search = h('input', {type: 'search', name: 'q', placeholder: 'name or id', value: params.get('q') || ''});
  search.addEventListener('change', () => go({q: search.value.trim()}));
  replace(main,
    h('div', {class: 'view-head'}, h('h1', {}, 'Leases'),
      h('p', {class: 'muted'}, `${all.length} lease${all.length === 1 ? '' : 's'} visible to this token; ${leases.length} shown.`)),
    h('div', {class: 'toolbar'}, h('div', {class: 'tool-group'},
      select('status', [['', 'Any status'], ['PENDING', 'Pending'], ['ACTIVE', 'Active'], ['TERMINATED', 'Terminated'],
        ['ERROR', 'Error'], ['DEGRADED', 'Degraded']], status, (value) => go({status: value}), 'Status'),
      select('project', [['', 'All projects'], ...projects.map((p) => [p, p])], project, (value) => go({project: value}), 'Project'),
      h('label', {class: 'field'}, h('span', {}, 'Search'), search))),
    leases.length ? h('table', {class: 'data leases', 'data-role': 'lease-list'},
      h('thead', {}, h('tr', {}, ['Lease', 'Project', 'Status', 'Start (UTC)', 'End (UTC)', 'Length', 'Reservations', 'Hosts']
        .map((title) => h('th', {}, title)))),
      h('tbody', {}, leases.map((lease) => h('tr', {'data-role': 'lease-row', 'data-lease-id': lease.id,
        'data-status': lease.status, 'data-degraded': String(Boolean(lease.degraded)), class: lease.degraded ? 'alarm-row' : ''},
      h('td', {}, leaseLink(lease), h('div', {class: 'muted mono'}, shortId(lease.id))),
      h('td', {}, projectChip(lease.project_id)),
      h('td', {}, statusBadge(lease.status), lease.degraded ? degradedBadge() : null),
      windowCell(lease),
      h('td', {}, (lease.reservations || []).map((r) => h('div', {}, describe(r)))),
      h('td', {class: 'num'}, String(hostCount(lease))))))) : empty('No lease matches.'));
  paintSwatches(main);
}

/** `1 host`, `3 instances`: how much a reservation misses. */
export function missingAmount(missing) {
  const unit = missing.amount === 1 ? String(missing.unit).replace(/s$/, '') : missing.unit;
  return `${missing.amount} ${unit}`;
}

function missingText(reservation) {
  const missing = reservation.missing_resources;
  if (!missing) return null;
  const where = (missing.hosts || []).map((host) => `${host.hypervisor_hostname || `host ${host.host_id}`} (${host.status})`);
  return h('div', {class: 'alarm', 'data-role': 'missing'}, `${missingAmount(missing)} missing on ${where.join(', ')}`);
}

function reservationsTable(lease, names) {
  return h('table', {class: 'data', 'data-role': 'reservations'},
    h('thead', {}, h('tr', {}, ['Reservation', 'Type', 'Asked for', 'Status', 'Hosts held', 'Notes'].map((t) => h('th', {}, t)))),
    h('tbody', {}, (lease.reservations || []).map((r) => h('tr', {'data-role': 'reservation', 'data-reservation-id': r.id,
      'data-resource-type': r.resource_type},
    h('td', {class: 'mono', title: r.id}, shortId(r.id)),
    h('td', {}, r.resource_type),
    h('td', {}, describe(r), r.resource_properties ? h('div', {class: 'muted mono small'}, r.resource_properties) : null),
    h('td', {}, statusBadge(r.status)),
    h('td', {}, (r.allocations || []).map((a) => h('div', {'data-role': 'reservation-host', 'data-host': a.host_id},
      names.get(String(a.host_id)) || `host ${a.host_id}`,
      r.resource_type === 'virtual:instance' ? h('span', {class: 'muted'}, ` × ${a.slots}`) : null))),
    h('td', {}, missingText(r), r.resources_changed ? h('div', {class: 'muted'}, 'moved by healing') : null)))));
}

const MICROS_KEYS = ['due', 'at', 'since', 'start', 'end'];

function detailValue(key, value) {
  if (typeof value === 'number' && MICROS_KEYS.includes(key) && value > 1e14) return `${time.stamp(value / 1000)} UTC`;
  if (value && typeof value === 'object') {
    const text = JSON.stringify(value);
    return text.length > 90 ? `${text.slice(0, 89)}…` : text;
  }
  return String(value);
}

function detailsText(details) {
  if (!details || typeof details !== 'object') return details === null || details === undefined ? '' : String(details);
  return Object.entries(details).filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k}: ${detailValue(k, v)}`).join(' · ');
}

function eventsTable(lease) {
  return h('table', {class: 'data', 'data-role': 'events'},
    h('thead', {}, h('tr', {}, ['Event', 'When (UTC)', '', 'Status'].map((t) => h('th', {}, t)))),
    h('tbody', {}, (lease.events || []).map((event) => h('tr', {'data-role': 'event', 'data-event-type': event.event_type,
      'data-status': event.status},
    h('td', {}, event.event_type.replace(/_/g, ' ')), h('td', {class: 'when'}, time.stamp(time.parse(event.time))),
    h('td', {class: 'muted'}, time.relative(time.parse(event.time))), h('td', {}, statusBadge(event.status))))));
}

function recordTable(records) {
  if (!records.length) return empty('Nothing recorded yet.');
  return h('table', {class: 'data', 'data-role': 'record'},
    h('thead', {}, h('tr', {}, ['When (UTC)', 'What', 'Details'].map((t) => h('th', {}, t)))),
    h('tbody', {}, records.map((record) => h('tr', {'data-role': 'record-entry', 'data-type': record.type},
      h('td', {class: 'when'}, time.stamp(time.parse(record.time))), h('td', {}, h('code', {}, record.type)),
      h('td', {class: 'details'}, detailsText(record.details))))));
}

function notificationsTable(notes) {
  if (!notes.length) return empty('No notification about this lease.');
  return h('table', {class: 'data', 'data-role': 'notifications'},
    h('thead', {}, h('tr', {}, ['#', 'When (UTC)', 'Type', 'Change'].map((t) => h('th', {}, t)))),
    h('tbody', {}, notes.map((entry) => {
      const note = entry.notification || {};
      return h('tr', {'data-role': 'notification', 'data-type': note.notificationType, 'data-cursor': entry.cursor},
        h('td', {class: 'mono'}, String(entry.cursor)),
        h('td', {class: 'when'}, time.stamp(Number(note.timeStamp) / 1000)),
        h('td', {}, note.notificationType), h('td', {}, h('code', {}, note.changeType)));
    })));
}

function amountsText(amounts) {
  const entries = Object.entries(amounts || {});
  return entries.length ? entries.map(([name, n]) => `${name} ${n}`).join(', ') : '—';
}

function sharesTable(shares) {
  if (!shares.length) return empty('Not shared with another project.');
  return h('table', {class: 'data', 'data-role': 'shares'},
    h('thead', {}, h('tr', {}, ['Project', 'Cap', 'Holds now', 'Since (UTC)'].map((t) => h('th', {}, t)))),
    h('tbody', {}, shares.map((share) => h('tr', {'data-role': 'share', 'data-project': share.project_id},
      h('td', {}, projectChip(share.project_id)), h('td', {}, amountsText(share.cap)),
      h('td', {}, amountsText(share.used)), h('td', {class: 'when'}, time.stamp(time.parse(share.updated_at)))))));
}

function miniTimeline(lease, data, frame, ctx) {
  const start = time.parse(lease.start_date);
  const end = time.parse(lease.end_date);
  const pad = Math.max((end - start) * 0.08, time.HOUR);
  const win = {from: start - pad, to: end + pad};
  const holds = holdsIn([lease], win);
  const ids = new Set(holds.map((hold) => hold.hostId));
  const rows = rowsOf(data, holds, {all: true}).filter((row) => ids.has(row.id));
  if (!rows.length) return;
  const width = Math.max(frame.clientWidth || 1000, 640);
  frame.append(gantt({rows, holds, win, width, open: (id) => ctx.navigate(`lease/${encodeURIComponent(id)}`)}));
}

/** The lease detail page. */
export async function renderDetail(main, ctx) {
  const id = ctx.args[0] || '';
  const [body, record, shared, notes, data] = await Promise.all([
    get(`/reservation/v1/leases/${encodeURIComponent(id)}`),
    getOptional(`/reservation/v1/leases/${encodeURIComponent(id)}/events`, {events: []}),
    getOptional(`/reservation/v1/leases/${encodeURIComponent(id)}/shares`, {shares: []}),
    allNotifications().catch(() => []),
    load(),
  ]);
  if (!ctx.isCurrent()) return;
  const lease = body.lease;
  const names = new Map((data.hosts || []).map((host) => [String(host.id), host.hypervisor_hostname]));
  const mine = notes.filter((entry) => entry.notification && entry.notification.reservationId === lease.id);
  const frame = h('div', {class: 'chart-frame small'});
  const start = time.parse(lease.start_date);
  const end = time.parse(lease.end_date);
  const down = (data.hosts || []).filter((host) => host.status !== 'up' &&
    (lease.reservations || []).some((r) => (r.allocations || []).some((a) => String(a.host_id) === String(host.id))));
  replace(main,
    h('p', {class: 'crumbs'}, h('a', {href: '#/leases'}, 'Leases'), ' / ', lease.name),
    h('div', {class: 'lease-head', 'data-role': 'lease', 'data-lease-id': lease.id, 'data-status': lease.status,
      'data-degraded': String(Boolean(lease.degraded))},
    h('h1', {}, lease.name, ' ', statusBadge(lease.status), lease.degraded ? degradedBadge() : null),
    h('dl', {class: 'facts'},
      h('dt', {}, 'Project'), h('dd', {}, projectChip(lease.project_id)),
      h('dt', {}, 'User'), h('dd', {}, lease.user_id || '—'),
      h('dt', {}, 'Window'), h('dd', {}, `${time.stamp(start)} → ${time.stamp(end)} UTC`,
        h('span', {class: 'muted'}, ` · ${time.duration(end - start)}`)),
      h('dt', {}, 'Id'), h('dd', {class: 'mono'}, lease.id),
      lease.status_reason ? [h('dt', {}, 'Reason'), h('dd', {}, lease.status_reason)] : null)),
    lease.degraded ? h('p', {class: 'notice alarm', 'data-role': 'degraded-note'},
      'This lease is degraded: part of what it reserved is on hosts out of service and could not be moved. ',
      down.length ? ['Hosts out of service: ', down.map((host) => h('span', {}, host.hypervisor_hostname, ' ', hostBadge(host.status), ' '))] : null,
      'An admin can move it with PUT /reservation/v1/os-hosts/{id}/allocation.') : null,
    h('h2', {}, 'Hosts'), frame,
    h('h2', {}, 'Reservations'), reservationsTable(lease, names),
    h('h2', {}, 'Shared with'), sharesTable(shared.shares || []),
    h('div', {class: 'columns'},
      h('section', {}, h('h2', {}, 'Lifecycle events'), eventsTable(lease)),
      h('section', {}, h('h2', {}, 'Notifications'), notificationsTable(mine))),
    h('h2', {}, 'Lifecycle record'), recordTable(record.events || []));
  miniTimeline(lease, data, frame, ctx);
  paintSwatches(main);
}
