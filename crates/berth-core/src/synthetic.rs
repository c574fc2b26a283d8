//! Synthetic leases for benchmarks (feature `synthetic`): the seeded generator the benchmarks
//! draw from, and the one shape of lease they all build (one instance reservation on one host,
//! three undone lifecycle events). Each benchmark draws its own figures, in its own order, so
//! that its recorded populations stay what they were.

use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{
    Affinity, EventKind, EventStatus, Lease, LeaseEvent, LeaseStatus, PREEMPTION_NOTICE_DEFAULT,
    Reservation, ReservationSpec, ReservationStatus,
};
use crate::model::time::Instant;
use uuid::Uuid;

const HOUR: i64 = 3_600_000_000;

/// A small seeded generator (SplitMix64), so that every run builds the same population.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    fn draw(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.draw() % n
    }
}

/// What one synthetic lease is made of.
#[derive(Debug, Clone, Copy)]
pub struct InstanceLease {
    /// Its number: ids are `namespace | idx << 3 | part`, and its name `lease-{idx}`.
    pub idx: usize,
    /// The high bits of its ids.
    pub namespace: u128,
    /// VCPUs per instance (2,048 MB and 10 GB of disk per VCPU).
    pub vcpus: u64,
    /// Instances, all on `host`.
    pub slots: u32,
    /// The host.
    pub host: ProviderId,
    /// Its window.
    pub start: Instant,
    /// Its end (exclusive); the before-end event is an hour earlier.
    pub end: Instant,
    /// Its creation time (and every part's).
    pub created: Instant,
}

impl InstanceLease {
    /// The pending lease, project `project`, user `user`.
    pub fn build(self) -> Lease {
        let id = |part: u128| Uuid::from_u128(self.namespace | ((self.idx as u128) << 3) | part);
        let now = self.created;
        let event = |part, kind, at| LeaseEvent {
            id: id(part),
            kind,
            at,
            status: EventStatus::Undone,
            created_at: now,
            updated_at: now,
        };
        Lease {
            id: LeaseId::new(id(0)),
            name: format!("lease-{}", self.idx).into(),
            project_id: "project".into(),
            user_id: "user".into(),
            start: self.start,
            end: self.end,
            status: LeaseStatus::Pending,
            degraded: false,
            reservations: vec![Reservation {
                id: ReservationId::new(id(1)),
                spec: ReservationSpec::Instance {
                    vcpus: self.vcpus,
                    memory_mb: self.vcpus * 2_048,
                    disk_gb: self.vcpus * 10,
                    amount: self.slots,
                    affinity: Affinity::Any,
                    resource_properties: String::new().into(),
                },
                status: ReservationStatus::Pending,
                hosts: vec![(self.host, self.slots)].into(),
                floating_ips: Box::default(),
                missing: Box::default(),
                resources_changed: false,
                created_at: now,
                updated_at: now,
            }]
            .into(),
            events: vec![
                event(2, EventKind::StartLease, self.start),
                event(
                    3,
                    EventKind::BeforeEndLease,
                    Instant::from_micros(self.end.as_micros() - HOUR),
                ),
                event(4, EventKind::EndLease, self.end),
            ]
            .into(),
            notice_lead: PREEMPTION_NOTICE_DEFAULT,
            preemption_noticed: false,
            lapses_at: None,
            rare: Default::default(),
            created_at: now,
            updated_at: now,
        }
    }
}
