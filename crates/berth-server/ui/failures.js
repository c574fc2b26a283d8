// The failures view: every host down or in maintenance, why and since when, and the leases it
// affects (those holding it now or later, and those missing something on it); then every
// degraded lease. Host states need an admin token (as in Blazar); without one, the view shows
// the degraded leases the token may see.

import {get, getOptional} from './api.js';
import {h, replace, projectChip, statusBadge, degradedBadge, hostBadge, paintSwatches, empty, registerProjects} from './dom.js';
import * as time from './time.js';
import {describe, missingAmount} from './leases.js';

function leaseRow(lease) {
  return h('tr', {'data-role': 'affected-lease', 'data-lease-id': lease.id, class: lease.degraded ? 'alarm-row' : ''},
    h('td', {}, h('a', {href: `#/lease/${encodeURIComponent(lease.id)}`}, lease.name)),
    h('td', {}, projectChip(lease.project_id)),
    h('td', {}, statusBadge(lease.status), lease.degraded ? degradedBadge() : null),
    h('td', {}, `${time.stamp(time.parse(lease.start_date))} → ${time.stamp(time.parse(lease.end_date))}`),
    h('td', {}, lease.missing_here ? h('span', {class: 'alarm'}, `${lease.missing_here} missing here`) : 'holds it'));
}

function card(provider) {
  const since = time.parse(provider.since);
  return h('section', {class: `failure ${provider.status}`, 'data-role': 'failure', 'data-host-name': provider.name,
    'data-host': provider.host_id || '', 'data-status': provider.status},
  h('div', {class: 'failure-head'},
    h('h2', {}, provider.name), hostBadge(provider.status),
    provider.availability_zone ? h('span', {class: 'muted'}, provider.availability_zone) : null,
    h('span', {class: 'spacer'}),
    h('span', {class: 'muted'}, Number.isFinite(since) ? `since ${time.stamp(since)} UTC (${time.relative(since)})` : '')),
  h('p', {class: 'reason'}, provider.reason || 'No reason given.'),
  provider.leases.length
    ? h('table', {class: 'data'},
      h('thead', {}, h('tr', {}, ['Affected lease', 'Project', 'Status', 'Window (UTC)', 'On this host'].map((t) => h('th', {}, t)))),
      h('tbody', {}, provider.leases.map(leaseRow)))
    : h('p', {class: 'muted'}, 'No lease holds this host now or later: leases that had not started were moved to other hosts.'));
}

/** The failures view. */
export async function render(main, ctx) {
  const [failures, leases] = await Promise.all([getOptional('/ui/api/failures', null), get('/reservation/v1/leases')]);
  if (!ctx.isCurrent()) return;
  registerProjects((leases.leases || []).map((lease) => lease.project_id));
  const providers = failures ? failures.providers || [] : [];
  const degraded = (leases.leases || []).filter((lease) => lease.degraded);
  replace(main,
    h('div', {class: 'view-head'}, h('h1', {}, 'Failures'),
      h('p', {class: 'muted'}, 'Hosts down or in maintenance and the reservations they affect.')),
    !failures ? h('p', {class: 'notice', 'data-role': 'needs-admin'},
      'Host states need a token with the admin role (403); the degraded leases of your project are below.')
      : providers.length ? h('div', {class: 'failures', 'data-role': 'failures'}, providers.map(card))
        : h('p', {class: 'all-clear', 'data-role': 'all-clear'}, 'Every host is in service.'),
    h('h2', {}, 'Degraded leases'),
    degraded.length ? h('table', {class: 'data', 'data-role': 'degraded-leases'},
      h('thead', {}, h('tr', {}, ['Lease', 'Project', 'Status', 'What is missing'].map((t) => h('th', {}, t)))),
      h('tbody', {}, degraded.map((lease) => h('tr', {'data-role': 'degraded-lease', 'data-lease-id': lease.id},
        h('td', {}, h('a', {href: `#/lease/${encodeURIComponent(lease.id)}`}, lease.name)),
        h('td', {}, projectChip(lease.project_id)),
        h('td', {}, statusBadge(lease.status)),
        h('td', {}, (lease.reservations || []).filter((r) => r.missing_resources).map((r) => h('div', {},
          `${describe(r)}: ${missingAmount(r.missing_resources)} missing on `,
          (r.missing_resources.hosts || []).map((host) => host.hypervisor_hostname).join(', '))))))))
      : empty('No lease is degraded.'));
  paintSwatches(main);
}
