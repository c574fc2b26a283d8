//! Usage history (berth): what each project reserved and consumed over time, by provider and
//! resource class. Each consumer and lease uses what its state says from its `updated_at` on
//! (its open usage, worked out from the catalog); a commit that changes what a source uses
//! closes the source's open usage at the commit's instant, and the store keeps the closed
//! segments alone, append-only, never loaded with the catalog. A usage report adds up the
//! closed segments that overlap its period and the open usage of a catalog as of the same
//! commit ([`crate::query::usage`]).

use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::time::Instant;
use uuid::Uuid;

/// What a span of usage is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UsageKind {
    /// Capacity a lease's reservation holds, for the lease's project.
    Reserved,
    /// A consumer's allocations inside a reservation it presented.
    Consumed,
    /// A consumer's allocations outside any reservation.
    OnDemand,
    /// A preemptible consumer's allocations (best-effort work a reservation may evict).
    Preemptible,
}

impl UsageKind {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageKind::Reserved => "reserved",
            UsageKind::Consumed => "consumed",
            UsageKind::OnDemand => "on_demand",
            UsageKind::Preemptible => "preemptible",
        }
    }

    /// Parses the stored form.
    pub fn parse(text: &str) -> Option<UsageKind> {
        [
            UsageKind::Reserved,
            UsageKind::Consumed,
            UsageKind::OnDemand,
            UsageKind::Preemptible,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
    }
}

/// Whose usage a segment is: a consumer's or a lease's. A consumer's uuid is chosen by its
/// client, so the two never share a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UsageSource {
    /// A Placement consumer.
    Consumer(Uuid),
    /// A lease (its reservations' holds).
    Lease(LeaseId),
}

impl UsageSource {
    /// The stored kind of source.
    pub fn kind(self) -> &'static str {
        match self {
            UsageSource::Consumer(_) => "consumer",
            UsageSource::Lease(_) => "lease",
        }
    }

    /// The source's uuid.
    pub fn uuid(self) -> Uuid {
        match self {
            UsageSource::Consumer(uuid) => uuid,
            UsageSource::Lease(id) => id.uuid(),
        }
    }

    /// Parses the stored form.
    pub fn parse(kind: &str, uuid: Uuid) -> Option<UsageSource> {
        match kind {
            "consumer" => Some(UsageSource::Consumer(uuid)),
            "lease" => Some(UsageSource::Lease(LeaseId::new(uuid))),
            _ => None,
        }
    }
}

/// `amount` of `class` on `provider` used as `kind` by `project_id`, from `since` until
/// `until` (exclusive; still running while `None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsageSegment {
    /// Whose usage it is.
    pub source: UsageSource,
    /// What it is.
    pub kind: UsageKind,
    /// The project using it: the lease's, or the consumer's.
    pub project_id: String,
    /// The reservation: the one holding it (reserved), or the one presented (consumed).
    pub reservation: Option<ReservationId>,
    /// Where.
    pub provider: ProviderId,
    /// Which class.
    pub class: ResourceClass,
    /// How much.
    pub amount: u64,
    /// From when.
    pub since: Instant,
    /// Until when (exclusive); `None` while it runs.
    pub until: Option<Instant>,
}

impl UsageSegment {
    /// The part of `period` the segment runs in, if any (a running one runs to its end).
    pub fn within(&self, period: Window) -> Option<Window> {
        let until = self.until.map_or(period.end(), |u| u.min(period.end()));
        Window::new(self.since.max(period.start()), until)
    }
}
