//! What the core's property tests share: a catalog with a clock counted in ticks (an hour
//! each), ids handed out in order, and hosts of 8 VCPU, 16 GiB and 100 GB.

// Each test binary uses part of this module.
#![allow(dead_code)]

use berth_core::decide::inventory::{NewHost, enroll_host};
use berth_core::decide::lease::NewLease;
use berth_core::decide::lifecycle::fire_event;
use berth_core::model::lease::{PREEMPTION_NOTICE_DEFAULT, ReservationSpec};
use berth_core::model::provider::Attributes;
use berth_core::{Catalog, Change, Instant, LeaseId, ProviderId, ReservationId};
use uuid::Uuid;

/// One tick of the tests' clock: an hour.
pub(crate) const TICK: i64 = 3_600_000_000;

/// A catalog, its clock (in ticks) and the ids it hands out.
pub(crate) struct World {
    pub(crate) catalog: Catalog,
    pub(crate) now: i64,
    pub(crate) last_id: u128,
    pub(crate) hosts: Vec<ProviderId>,
}

impl World {
    /// `count` hosts `h0`, `h1`, ... (host `idx` has uuid `idx + 1`), each in the zone and with
    /// the extra capabilities `place(idx)` gives, at tick 10.
    pub(crate) fn with_hosts(
        count: u128,
        place: impl Fn(u128) -> (Option<String>, Attributes),
    ) -> World {
        let mut w = World {
            catalog: Catalog::new(),
            now: 10,
            last_id: 1_000,
            hosts: Vec::new(),
        };
        for idx in 0..count {
            let uuid = ProviderId::from_u128(idx + 1);
            let (availability_zone, attributes) = place(idx);
            let new = NewHost {
                name: format!("h{idx}"),
                uuid,
                vcpus: Some(8),
                memory_mb: Some(16_384),
                local_gb: Some(100),
                availability_zone,
                hypervisor_type: None,
                service_name: None,
                attributes,
                reservable: true,
            };
            let changes = enroll_host(&w.catalog, &new, w.at()).expect("enrolled");
            w.apply(&changes);
            w.hosts.push(uuid);
        }
        w
    }

    /// The clock as an instant.
    pub(crate) fn at(&self) -> Instant {
        Instant::from_micros(self.now * TICK)
    }

    /// The next id.
    pub(crate) fn id(&mut self) -> Uuid {
        self.last_id += 1;
        Uuid::from_u128(self.last_id)
    }

    /// Applies a decision's changes and checks the catalog's invariants.
    pub(crate) fn apply(&mut self, changes: &[Change]) {
        self.catalog.apply(changes);
        self.catalog
            .check_invariants()
            .expect("the catalog's invariants hold after every step");
    }

    /// Fires every event due now, in due order, including those the firing makes due.
    pub(crate) fn fire_due(&mut self) {
        while let Some((_, kind, id)) = self.catalog.due_events(self.at()).first().copied() {
            let changes =
                fire_event(&self.catalog, id, kind, self.at()).expect("a due event fires");
            self.apply(&changes);
        }
    }
}

/// A lease of `project` asking `spec` over ticks `[start, end)`, with fresh ids.
pub(crate) fn new_lease(
    w: &mut World,
    project: &str,
    start: i64,
    end: i64,
    spec: ReservationSpec,
) -> NewLease {
    NewLease {
        id: LeaseId::new(w.id()),
        name: "run".into(),
        project_id: project.into(),
        user_id: "u".into(),
        start: Instant::from_micros(start * TICK),
        end: Instant::from_micros(end * TICK),
        before_end: None,
        reservations: vec![(ReservationId::new(w.id()), spec)],
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: PREEMPTION_NOTICE_DEFAULT,
    }
}

/// A host reservation of one whole host, any.
pub(crate) fn one_host() -> ReservationSpec {
    one_host_where(String::new())
}

/// A host reservation of one whole host whose resource properties match `filter` (Blazar's
/// JSON filter text; empty for any).
pub(crate) fn one_host_where(filter: String) -> ReservationSpec {
    ReservationSpec::Host {
        min: 1,
        max: 1,
        hypervisor_properties: String::new().into(),
        resource_properties: filter.into(),
        before_end: "default".into(),
    }
}
