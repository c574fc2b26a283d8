//! Usage history (berth): what each project reserved and consumed over time, by provider and
//! resource class. The store keeps it, never the catalog: a commit writes, for every consumer
//! and lease it changed, that source's new usage from the commit's instant on
//! ([`UsageUpdate`]), and a usage report reads the segments that overlap its period.

use crate::model::id::{LeaseId, ProviderId, ReservationId};
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

/// A source's usage from `at` on: its segments running at `at` end there, those that had not
/// begun are dropped (when `cuts`), and `segments` (none when it uses nothing any more, or is
/// gone) follow, none of them beginning before `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageUpdate {
    /// Whose usage changed.
    pub source: UsageSource,
    /// When.
    pub at: Instant,
    /// Whether the source used anything at or after `at` before the update: `false` for a
    /// lease just created or a consumer's first allocations, whose history a store then need
    /// not look up.
    pub cuts: bool,
    /// What it uses from then on.
    pub segments: Vec<UsageSegment>,
}

impl UsageUpdate {
    /// Applies the update to a history kept in memory, as a store applies it: the source's
    /// segments that had not begun at `at` are dropped and those running at `at` end there
    /// (when it `cuts`), and the update's segments are added.
    pub fn apply_to(&self, history: &mut Vec<UsageSegment>) {
        if self.cuts {
            history.retain(|s| s.source != self.source || s.since < self.at);
            for segment in history.iter_mut().filter(|s| s.source == self.source) {
                if segment.until.is_none_or(|until| until > self.at) {
                    segment.until = Some(self.at);
                }
            }
        }
        history.extend(self.segments.iter().cloned());
    }
}
