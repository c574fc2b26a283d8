//! Leases: a named time window holding one or more reservations (whole hosts, instance slots,
//! floating IPs), with the events that move it through its lifecycle.
//!
//! A lease is stored and applied as one value: every decision about a lease produces its whole
//! new state ([`crate::change::Change::LeaseSet`]). What a lease holds in the capacity ledger is
//! derived from it by [`Lease::holds`], so the ledger can always be rebuilt from the leases.

use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::ledger::{Amounts, Hold, Holder, Window, address_slot};
use crate::model::name::ResourceClass;
use crate::model::promise::{Outcome, PRIORITY_DEFAULT, PromiseTerms};
use crate::model::time::{Instant, Span};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// A lease's status, as Blazar names it (upper case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaseStatus {
    /// Admitted; the window has not started.
    Pending,
    /// The window is running.
    Active,
    /// The window ended.
    Terminated,
    /// An action failed; `status_reason` says which and why.
    Error,
    /// A hold (berth): capacity an availability search fenced for a while, holding it as a
    /// pending lease would until it is turned into a lease or lapses (`lapses_at`).
    Held,
    /// Waitlisted (berth): did not fit when asked; holds nothing and is admitted when capacity
    /// frees, or lapses at its `wait_until` (`lapses_at`).
    Waiting,
    /// A hold or a waitlisted lease that lapsed (berth); it holds nothing.
    Expired,
}

impl LeaseStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseStatus::Pending => "PENDING",
            LeaseStatus::Active => "ACTIVE",
            LeaseStatus::Terminated => "TERMINATED",
            LeaseStatus::Error => "ERROR",
            LeaseStatus::Held => "HELD",
            LeaseStatus::Waiting => "WAITING",
            LeaseStatus::Expired => "EXPIRED",
        }
    }

    /// Parses the wire form (case-insensitive).
    pub fn parse(text: &str) -> Option<LeaseStatus> {
        [
            LeaseStatus::Pending,
            LeaseStatus::Active,
            LeaseStatus::Terminated,
            LeaseStatus::Error,
            LeaseStatus::Held,
            LeaseStatus::Waiting,
            LeaseStatus::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(text))
    }

    /// The status `by` moves a lease to from this one, or why it may not:
    ///
    /// | from \\ by   | `Start`    | `End`        | `Fail`  | `EndEarly`   | `Admit`   | `Lapse`   |
    /// |--------------|------------|--------------|---------|--------------|-----------|-----------|
    /// | `Pending`    | `Active`   | `Terminated` | `Error` | `Terminated` | refused   | refused   |
    /// | `Active`     | refused    | `Terminated` | `Error` | `Terminated` | refused   | refused   |
    /// | `Terminated` | refused    | refused      | `Error` | refused      | refused   | refused   |
    /// | `Error`      | `Error`    | `Error`      | `Error` | `Terminated` | refused   | refused   |
    /// | `Held`       | refused    | refused      | `Error` | `Terminated` | refused   | `Expired` |
    /// | `Waiting`    | refused    | refused      | `Error` | `Terminated` | `Pending` | `Expired` |
    /// | `Expired`    | refused    | refused      | `Error` | refused      | refused   | refused   |
    ///
    /// A lease starts and ends once; one in error stays in error through its start and end
    /// events (it keeps what it holds until it ends early or is deleted); any lease can fail.
    /// A hold or a waitlisted lease has no start or end of its own: a waitlisted one is
    /// admitted (then it is a pending lease), either lapses once.
    pub fn next(self, by: Transition) -> Result<LeaseStatus, InvalidTransition> {
        use LeaseStatus::{Active, Error, Expired, Held, Pending, Terminated, Waiting};
        match (self, by) {
            (Pending, Transition::Start) => Ok(Active),
            (Waiting, Transition::Admit) => Ok(Pending),
            (Pending | Active, Transition::End) => Ok(Terminated),
            (_, Transition::Fail) => Ok(Error),
            (Error, Transition::Start | Transition::End) => Ok(Error),
            (Pending | Active | Error | Held | Waiting, Transition::EndEarly) => Ok(Terminated),
            (Held | Waiting, Transition::Lapse) => Ok(Expired),
            (Active | Terminated | Held | Waiting | Expired, Transition::Start)
            | (Terminated | Held | Waiting | Expired, Transition::End)
            | (Terminated | Expired, Transition::EndEarly)
            | (Pending | Active | Terminated | Error | Held | Expired, Transition::Admit)
            | (Pending | Active | Terminated | Error | Expired, Transition::Lapse) => {
                Err(InvalidTransition { from: self, by })
            }
        }
    }

    /// Whether the lease is a hold or waitlisted: it has no lifecycle of its own but its lapse.
    pub fn is_parked(self) -> bool {
        matches!(self, LeaseStatus::Held | LeaseStatus::Waiting)
    }
}

/// What moves a lease from one status to another ([`LeaseStatus::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Its start event fired.
    Start,
    /// Its end event fired.
    End,
    /// An action on it failed for good.
    Fail,
    /// It ended before its end event: displaced by a higher priority, or left holding nothing
    /// at its claim deadline.
    EndEarly,
    /// A waitlisted lease fits now and is admitted.
    Admit,
    /// A hold or a waitlisted lease reached its `lapses_at`.
    Lapse,
}

/// A status change the lease lifecycle does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {} lease cannot take {by:?}", from.as_str())]
pub struct InvalidTransition {
    /// The status the lease is in.
    pub from: LeaseStatus,
    /// What was asked of it.
    pub by: Transition,
}

/// A reservation's status, as Blazar names it (lower case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReservationStatus {
    /// Waiting for the lease to start.
    Pending,
    /// Holding its resources for a running lease.
    Active,
    /// The lease ended; nothing is held any more.
    Deleted,
    /// An action on it failed.
    Error,
}

impl ReservationStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationStatus::Pending => "pending",
            ReservationStatus::Active => "active",
            ReservationStatus::Deleted => "deleted",
            ReservationStatus::Error => "error",
        }
    }
}

/// The three lifecycle events of a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// Ends the window (ordered first, so back-to-back leases hand over cleanly).
    EndLease,
    /// Warns that the window is about to end.
    BeforeEndLease,
    /// Warns preemptible consumers that the lease's start will evict them (derived: scheduled
    /// `notice_lead` before the start, not stored among the lease's events).
    PreemptionNotice,
    /// Starts the window.
    StartLease,
    /// Releases what a Promise reservation has not allocated by its claim deadline (derived
    /// from its terms, not stored among the lease's events).
    ClaimExpiry,
    /// Releases a bare-metal node claim that was not deployed by its `expires_at` (the id is
    /// the claim's, not a lease's).
    NodeClaimExpiry,
    /// Ends a hold or a waitlisted lease at its `lapses_at` (derived from the lease, not
    /// stored among its events).
    Lapse,
    /// Tells the holder of a started lease nobody consumed that it will be released (berth;
    /// derived from its [`IdleRelease`], not stored among its events).
    IdleNotice,
    /// Releases a started lease nobody consumed (derived as [`EventKind::IdleNotice`] is).
    IdleRelease,
}

impl EventKind {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::StartLease => "start_lease",
            EventKind::BeforeEndLease => "before_end_lease",
            EventKind::EndLease => "end_lease",
            EventKind::PreemptionNotice => "preemption_notice",
            EventKind::ClaimExpiry => "claim_expiry",
            EventKind::NodeClaimExpiry => "node_claim_expiry",
            EventKind::Lapse => "lapse",
            EventKind::IdleNotice => "idle_notice",
            EventKind::IdleRelease => "idle_release",
        }
    }
}

/// Where a lifecycle event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventStatus {
    /// Not yet fired.
    Undone,
    /// Fired and its action succeeded.
    Done,
    /// Fired and its action failed.
    Error,
}

impl EventStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Undone => "UNDONE",
            EventStatus::Done => "DONE",
            EventStatus::Error => "ERROR",
        }
    }
}

/// A lifecycle event of a lease, fired by the lifecycle engine when its time comes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseEvent {
    /// Its id.
    pub id: Uuid,
    /// What it does.
    pub kind: EventKind,
    /// When it is due.
    pub at: Instant,
    /// Where it stands.
    pub status: EventStatus,
    /// Creation time.
    pub created_at: Instant,
    /// Last change.
    pub updated_at: Instant,
}

/// A lease's lifecycle events: the three a lease has (start, before end, end) kept in the lease
/// itself, any other number in a list of their own. Read and changed as a slice; stored as a
/// list.
#[derive(Debug, Clone, Eq)]
pub enum LeaseEvents {
    /// The usual three, in the lease.
    Three([LeaseEvent; 3]),
    /// Any other number.
    Listed(Box<[LeaseEvent]>),
}

impl Default for LeaseEvents {
    fn default() -> LeaseEvents {
        LeaseEvents::Listed(Box::default())
    }
}

impl From<Vec<LeaseEvent>> for LeaseEvents {
    fn from(events: Vec<LeaseEvent>) -> LeaseEvents {
        match <[LeaseEvent; 3]>::try_from(events) {
            Ok(three) => LeaseEvents::Three(three),
            Err(events) => LeaseEvents::Listed(events.into()),
        }
    }
}

impl From<[LeaseEvent; 3]> for LeaseEvents {
    fn from(three: [LeaseEvent; 3]) -> LeaseEvents {
        LeaseEvents::Three(three)
    }
}

impl std::ops::Deref for LeaseEvents {
    type Target = [LeaseEvent];

    fn deref(&self) -> &[LeaseEvent] {
        match self {
            LeaseEvents::Three(three) => three,
            LeaseEvents::Listed(events) => events,
        }
    }
}

impl std::ops::DerefMut for LeaseEvents {
    fn deref_mut(&mut self) -> &mut [LeaseEvent] {
        match self {
            LeaseEvents::Three(three) => three,
            LeaseEvents::Listed(events) => events,
        }
    }
}

/// Equal when they list the same events, however they keep them.
impl PartialEq for LeaseEvents {
    fn eq(&self, other: &LeaseEvents) -> bool {
        **self == **other
    }
}

impl<'a> IntoIterator for &'a LeaseEvents {
    type Item = &'a LeaseEvent;
    type IntoIter = std::slice::Iter<'a, LeaseEvent>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut LeaseEvents {
    type Item = &'a mut LeaseEvent;
    type IntoIter = std::slice::IterMut<'a, LeaseEvent>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl Serialize for LeaseEvents {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LeaseEvents {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<LeaseEvents, D::Error> {
        Vec::<LeaseEvent>::deserialize(deserializer).map(LeaseEvents::from)
    }
}

/// How the instances of an instance reservation are spread over hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Affinity {
    /// All on one host (`affinity: true`).
    SameHost,
    /// Each on a different host (`affinity: false`).
    DifferentHosts,
    /// Packed onto any hosts (`affinity: null`).
    Any,
}

/// What a reservation asks for. Filters are kept as the text the client sent (Blazar echoes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationSpec {
    /// `physical:host`: between `min` and `max` whole hosts.
    Host {
        /// Fewest hosts that will do.
        min: u32,
        /// Most hosts wanted.
        max: u32,
        /// Filter on host fields.
        hypervisor_properties: Box<str>,
        /// Filter on host fields and extra capabilities.
        resource_properties: Box<str>,
        /// Action before the end (`default`, `snapshot`, ...), echoed.
        before_end: Box<str>,
    },
    /// `virtual:instance`: `amount` instance slots of one size.
    Instance {
        /// VCPUs per instance.
        vcpus: u64,
        /// MEMORY_MB per instance.
        memory_mb: u64,
        /// DISK_GB per instance.
        disk_gb: u64,
        /// Number of instances.
        amount: u32,
        /// Spreading rule.
        affinity: Affinity,
        /// Filter on host fields and extra capabilities.
        resource_properties: Box<str>,
    },
    /// `virtual:floatingip`: `amount` addresses of one network.
    FloatingIp {
        /// The external network.
        network_id: Box<str>,
        /// Number of addresses.
        amount: u32,
        /// Addresses that must be among those reserved.
        required_floatingips: Vec<String>,
    },
}

impl ReservationSpec {
    /// What `slots` instances of an instance reservation take, by class; `None` for the other
    /// kinds of reservation.
    pub fn instance_amounts(&self, slots: u64) -> Option<Vec<(ResourceClass, u64)>> {
        match self {
            ReservationSpec::Instance {
                vcpus,
                memory_mb,
                disk_gb,
                ..
            } => Some(instance_amounts(*vcpus, *memory_mb, *disk_gb, slots)),
            _ => None,
        }
    }

    /// Blazar's `resource_type`.
    pub fn resource_type(&self) -> &'static str {
        match self {
            ReservationSpec::Host { .. } => "physical:host",
            ReservationSpec::Instance { .. } => "virtual:instance",
            ReservationSpec::FloatingIp { .. } => "virtual:floatingip",
        }
    }

    /// How much is asked: hosts (`max`), instances or addresses.
    pub fn amount(&self) -> u32 {
        match self {
            ReservationSpec::Host { max, .. } => *max,
            ReservationSpec::Instance { amount, .. }
            | ReservationSpec::FloatingIp { amount, .. } => *amount,
        }
    }
}

/// One reservation of a lease, with what it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Its id.
    pub id: ReservationId,
    /// What it asks for.
    pub spec: ReservationSpec,
    /// Where it stands.
    pub status: ReservationStatus,
    /// Hosts it holds, with the number of instance slots on each (1 for a whole host), in
    /// provider order.
    pub hosts: Box<[(ProviderId, u32)]>,
    /// Floating IPs it holds.
    pub floating_ips: Box<[Uuid]>,
    /// What it holds on providers out of service that could not be replaced: hosts (with their
    /// slots, 1 for a whole host) among `hosts`. Cleared when they return.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub missing: Box<[(ProviderId, u32)]>,
    /// Set when healing moved it to other hosts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources_changed: bool,
    /// Creation time.
    pub created_at: Instant,
    /// Last change.
    pub updated_at: Instant,
}

impl Reservation {
    /// Gives back the spare room of the one list it keeps as a `Vec`, the addresses a
    /// floating-IP reservation requires (a decoded list grows by doubling; its other lists are
    /// boxed slices, at their size).
    pub fn shrink_to_fit(&mut self) {
        if let ReservationSpec::FloatingIp {
            required_floatingips,
            ..
        } = &mut self.spec
        {
            required_floatingips.shrink_to_fit();
        }
    }

    /// How many hosts (host reservations) or instances (instance reservations) are missing.
    pub fn missing_amount(&self) -> u32 {
        self.missing.iter().map(|(_, n)| *n).sum()
    }

    /// Records `slots` on `host` as missing.
    pub fn add_missing(&mut self, host: ProviderId, slots: u32) {
        self.missing = self
            .missing
            .iter()
            .copied()
            .chain([(host, slots)])
            .collect();
    }

    /// Forgets what was missing on `host`; whether something was.
    pub fn clear_missing(&mut self, host: ProviderId) -> bool {
        if !self.missing.iter().any(|(h, _)| *h == host) {
            return false;
        }
        self.missing = self
            .missing
            .iter()
            .copied()
            .filter(|(h, _)| *h != host)
            .collect();
        true
    }

    /// Keeps `missing` within what the reservation still holds (after its hosts changed).
    pub fn reconcile_missing(&mut self) {
        let hosts = &self.hosts;
        self.missing = self
            .missing
            .iter()
            .filter_map(|&(host, n)| {
                let held = hosts.iter().find(|(h, _)| *h == host)?.1;
                let n = n.min(held);
                (n > 0).then_some((host, n))
            })
            .collect();
    }

    /// The slots (1 for a whole host) the reservation holds on `host`, if it holds it.
    pub fn slots_on(&self, host: ProviderId) -> Option<u32> {
        self.hosts.iter().find(|(h, _)| *h == host).map(|(_, n)| *n)
    }

    /// What an instance reservation holds on `host`, by class: its slots there times the
    /// instance size. `None` for other kinds, or when it does not hold `host`.
    pub fn share_on(&self, host: ProviderId) -> Option<Vec<(ResourceClass, u64)>> {
        let slots = self.slots_on(host)?;
        self.spec.instance_amounts(u64::from(slots))
    }

    /// The holds this reservation places in the ledger over `window`.
    pub fn holds(&self, window: Window) -> Vec<Hold> {
        let host = |host: ProviderId, exclusive: bool, amounts: Amounts| Hold {
            reservation: self.id,
            host,
            window,
            exclusive,
            amounts,
        };
        match &self.spec {
            ReservationSpec::Host { .. } => self
                .hosts
                .iter()
                .map(|(uuid, _)| host(*uuid, true, Amounts::default()))
                .collect(),
            ReservationSpec::Instance { .. } => self
                .hosts
                .iter()
                .map(|(uuid, slots)| {
                    let amounts = self.spec.instance_amounts(u64::from(*slots));
                    host(*uuid, false, amounts.unwrap_or_default().into())
                })
                .collect(),
            ReservationSpec::FloatingIp { .. } => self
                .floating_ips
                .iter()
                .map(|fip| host(address_slot(*fip), true, Amounts::default()))
                .collect(),
        }
    }
}

/// The amounts `slots` instances of one size take, by class (classes of size 0 left out).
pub fn instance_amounts(
    vcpus: u64,
    memory_mb: u64,
    disk_gb: u64,
    slots: u64,
) -> Vec<(ResourceClass, u64)> {
    // One shared instance of each name: a million holds share three strings.
    static CLASSES: std::sync::LazyLock<[ResourceClass; 3]> = std::sync::LazyLock::new(|| {
        ["VCPU", "MEMORY_MB", "DISK_GB"]
            .map(|name| ResourceClass::parse(name).expect("invariant: standard class names parse"))
    });
    CLASSES
        .iter()
        .zip([vcpus, memory_mb, disk_gb])
        .filter(|(_, size)| *size > 0)
        .map(|(class, size)| (class.clone(), size.saturating_mul(slots)))
        .collect()
}

/// A project a lease's owner lets consume the lease's reservations (berth): its consumers
/// present them as the owner's do, and together hold no more of each class in `cap` than the
/// cap says (classes it does not name are bounded only by the reservations themselves).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// The project it is shared with (never the lease's own).
    pub project_id: String,
    /// The most of each class the project's consumers may hold inside the lease at once.
    pub cap: std::collections::BTreeMap<ResourceClass, u64>,
    /// When it was shared, or its cap last changed.
    pub updated_at: Instant,
}

/// The projects a lease is shared with, by project id; boxed on the lease, as few leases are
/// shared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shares(pub Vec<Share>);

impl Shares {
    /// The share of `project`, if it has one.
    pub fn of(&self, project: &str) -> Option<&Share> {
        self.0.iter().find(|s| s.project_id == project)
    }
}

/// Which series (berth) a lease is an occurrence of: the leases a recurring lease request
/// created, one per occurrence, admitted together.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Occurrence {
    /// The series' id (no lease has it).
    pub series_id: Uuid,
    /// Its place in the series, from 0 (the request's own window).
    pub index: u32,
    /// How many occurrences the series was created with.
    pub count: u32,
    /// The recurrence rule, as the client sent it.
    pub rule: Box<str>,
}

/// A lease.
///
/// Stored as one JSON document naming every field at its top level, whether the lease keeps it
/// in itself or in [`LeaseRare`]: written from the lease as it is (`impl Serialize`), read
/// through [`LeaseDocument`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "LeaseDocument")]
pub struct Lease {
    /// Its id.
    pub id: LeaseId,
    /// Its name (not unique, as in Blazar).
    pub name: Box<str>,
    /// Owning project (shared: the catalog keeps one copy of each project's id).
    pub project_id: Arc<str>,
    /// Owning user (shared as the project is).
    pub user_id: Arc<str>,
    /// Start of the window.
    pub start: Instant,
    /// End of the window (exclusive).
    pub end: Instant,
    /// Where it stands.
    pub status: LeaseStatus,
    /// Set when a reservation lost resources.
    pub degraded: bool,
    /// Its reservations.
    pub reservations: Box<[Reservation]>,
    /// Its lifecycle events.
    pub events: LeaseEvents,
    /// How long before the start preemptible consumers in its way are told they will be evicted.
    pub notice_lead: Span,
    /// Whether that notice went out.
    pub preemption_noticed: bool,
    /// When a hold or a waitlisted lease lapses (berth): a hold's expiry, a waitlisted lease's
    /// `wait_until`.
    pub lapses_at: Option<Instant>,
    /// What few leases have: read and changed through the lease's methods
    /// ([`Lease::terms`], [`Lease::set_terms`], ...).
    pub rare: Rare,
    /// Creation time.
    pub created_at: Instant,
    /// Last change.
    pub updated_at: Instant,
}

/// What few leases have, kept apart from the lease so that a lease without any of it is smaller
/// (a catalog holds every lease: [`Rare`] is one pointer where these fields took 56 bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRare {
    /// Why it is in `Error`, when it is.
    pub status_reason: Option<Box<str>>,
    /// What makes it a Promise reservation, when it is one.
    pub terms: Option<PromiseTerms>,
    /// How it ended early, when it did (expired claim, preempted).
    pub outcome: Option<Outcome>,
    /// The series (berth) it is an occurrence of, when it was created with a recurrence rule.
    pub series: Option<Occurrence>,
    /// The projects it is shared with (berth), when it is shared.
    pub shares: Option<Shares>,
    /// The operator's release of unconsumed leases, as it stood when the lease was created
    /// (berth), when it was on.
    pub idle: Option<IdleRelease>,
}

impl LeaseRare {
    /// None of it.
    const NONE: LeaseRare = LeaseRare {
        status_reason: None,
        terms: None,
        outcome: None,
        series: None,
        shares: None,
        idle: None,
    };
}

/// A lease's [`LeaseRare`], allocated only while the lease has some of it. Two are equal when
/// they hold the same, allocated or not.
#[derive(Debug, Clone, Default)]
pub struct Rare(Option<Box<LeaseRare>>);

impl Rare {
    /// What it holds.
    pub fn get(&self) -> &LeaseRare {
        self.0.as_deref().unwrap_or(&LeaseRare::NONE)
    }

    /// Changes what it holds with `edit`: allocated only when `edit` leaves something, given
    /// back once it holds nothing.
    fn edit(&mut self, edit: impl FnOnce(&mut LeaseRare)) {
        match &mut self.0 {
            Some(rare) => {
                edit(rare);
                if **rare == LeaseRare::NONE {
                    self.0 = None;
                }
            }
            None => {
                let mut rare = LeaseRare::default();
                edit(&mut rare);
                if rare != LeaseRare::NONE {
                    self.0 = Some(Box::new(rare));
                }
            }
        }
    }

    /// What it holds, to change in place (none when it holds nothing: nothing to change).
    fn get_mut(&mut self) -> Option<&mut LeaseRare> {
        self.0.as_deref_mut()
    }
}

impl PartialEq for Rare {
    fn eq(&self, other: &Rare) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Rare {}

impl From<LeaseRare> for Rare {
    fn from(rare: LeaseRare) -> Rare {
        let mut out = Rare::default();
        out.edit(|r| *r = rare);
        out
    }
}

/// A lease as stored, read: a JSON document with every field at its top level, in the order
/// `impl Serialize for Lease` writes them.
#[derive(Debug, Deserialize)]
struct LeaseDocument {
    id: LeaseId,
    name: Box<str>,
    project_id: Arc<str>,
    user_id: Arc<str>,
    start: Instant,
    end: Instant,
    status: LeaseStatus,
    status_reason: Option<Box<str>>,
    degraded: bool,
    reservations: Box<[Reservation]>,
    events: LeaseEvents,
    #[serde(rename = "notice_lead_micros", default = "notice_lead_default")]
    notice_lead: Span,
    #[serde(default)]
    preemption_noticed: bool,
    #[serde(default)]
    terms: Option<PromiseTerms>,
    #[serde(default)]
    lapses_at: Option<Instant>,
    #[serde(default)]
    outcome: Option<Outcome>,
    #[serde(default)]
    series: Option<Occurrence>,
    #[serde(default)]
    shares: Option<Shares>,
    #[serde(default)]
    idle: Option<IdleRelease>,
    created_at: Instant,
    updated_at: Instant,
}

impl From<LeaseDocument> for Lease {
    fn from(d: LeaseDocument) -> Lease {
        let rare = LeaseRare {
            status_reason: d.status_reason,
            terms: d.terms,
            outcome: d.outcome,
            series: d.series,
            shares: d.shares,
            idle: d.idle,
        };
        Lease {
            id: d.id,
            name: d.name,
            project_id: d.project_id,
            user_id: d.user_id,
            start: d.start,
            end: d.end,
            status: d.status,
            degraded: d.degraded,
            reservations: d.reservations,
            events: d.events,
            notice_lead: d.notice_lead,
            preemption_noticed: d.preemption_noticed,
            lapses_at: d.lapses_at,
            rare: rare.into(),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// The fields of [`LeaseDocument`] that `impl Serialize for Lease` writes whether set or not.
const LEASE_FIELDS_ALWAYS_WRITTEN: usize = 15;

/// Writes the lease as [`LeaseDocument`] reads it, without copying it: every field at the top
/// level, in the document's order, the optional ones but `status_reason` left out when unset.
impl Serialize for Lease {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        /// Writes `value` under `name`, or leaves the field out when it is unset.
        fn optional<S: SerializeStruct, T: Serialize>(
            document: &mut S,
            name: &'static str,
            value: Option<&T>,
        ) -> Result<(), S::Error> {
            match value {
                Some(value) => document.serialize_field(name, value),
                None => document.skip_field(name),
            }
        }
        let rare = self.rare.get();
        // The fields written: formats that write the count first (CBOR, MessagePack) read a
        // larger count as a document cut short.
        let set = [
            rare.terms.is_some(),
            self.lapses_at.is_some(),
            rare.outcome.is_some(),
            rare.series.is_some(),
            rare.shares.is_some(),
            rare.idle.is_some(),
        ];
        let len = LEASE_FIELDS_ALWAYS_WRITTEN + set.iter().filter(|&&s| s).count();
        let mut document = serializer.serialize_struct("Lease", len)?;
        document.serialize_field("id", &self.id)?;
        document.serialize_field("name", &self.name)?;
        document.serialize_field("project_id", &self.project_id)?;
        document.serialize_field("user_id", &self.user_id)?;
        document.serialize_field("start", &self.start)?;
        document.serialize_field("end", &self.end)?;
        document.serialize_field("status", &self.status)?;
        document.serialize_field("status_reason", &rare.status_reason)?;
        document.serialize_field("degraded", &self.degraded)?;
        document.serialize_field("reservations", &self.reservations)?;
        document.serialize_field("events", &self.events)?;
        document.serialize_field("notice_lead_micros", &self.notice_lead)?;
        document.serialize_field("preemption_noticed", &self.preemption_noticed)?;
        optional(&mut document, "terms", rare.terms.as_ref())?;
        optional(&mut document, "lapses_at", self.lapses_at.as_ref())?;
        optional(&mut document, "outcome", rare.outcome.as_ref())?;
        optional(&mut document, "series", rare.series.as_ref())?;
        optional(&mut document, "shares", rare.shares.as_ref())?;
        optional(&mut document, "idle", rare.idle.as_ref())?;
        document.serialize_field("created_at", &self.created_at)?;
        document.serialize_field("updated_at", &self.updated_at)?;
        document.end()
    }
}

/// What few leases have ([`LeaseRare`]), read and changed.
impl Lease {
    /// Why it is in `Error`, when it is.
    pub fn status_reason(&self) -> Option<&str> {
        self.rare.get().status_reason.as_deref()
    }

    /// Sets why it is in `Error`.
    pub fn set_status_reason(&mut self, reason: Option<Box<str>>) {
        self.rare.edit(|r| r.status_reason = reason);
    }

    /// What makes it a Promise reservation, when it is one.
    pub fn terms(&self) -> Option<&PromiseTerms> {
        self.rare.get().terms.as_ref()
    }

    /// Its Promise terms, to change in place.
    pub fn terms_mut(&mut self) -> Option<&mut PromiseTerms> {
        self.rare.get_mut().and_then(|r| r.terms.as_mut())
    }

    /// Makes it a Promise reservation with `terms`, or not.
    pub fn set_terms(&mut self, terms: Option<PromiseTerms>) {
        self.rare.edit(|r| r.terms = terms);
    }

    /// How it ended early, when it did.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.rare.get().outcome.as_ref()
    }

    /// Sets how it ended early.
    pub fn set_outcome(&mut self, outcome: Option<Outcome>) {
        self.rare.edit(|r| r.outcome = outcome);
    }

    /// The series it is an occurrence of, when it is one.
    pub fn series(&self) -> Option<&Occurrence> {
        self.rare.get().series.as_ref()
    }

    /// Makes it an occurrence of a series, or not.
    pub fn set_series(&mut self, series: Option<Occurrence>) {
        self.rare.edit(|r| r.series = series);
    }

    /// The projects it is shared with, when it is shared.
    pub fn shares(&self) -> Option<&Shares> {
        self.rare.get().shares.as_ref()
    }

    /// Shares it with `shares`, or with nobody.
    pub fn set_shares(&mut self, shares: Option<Shares>) {
        self.rare.edit(|r| r.shares = shares);
    }

    /// The unconsumed-lease release it was created under, when it was on.
    pub fn idle(&self) -> Option<&IdleRelease> {
        self.rare.get().idle.as_ref()
    }

    /// That release, to change in place.
    pub fn idle_mut(&mut self) -> Option<&mut IdleRelease> {
        self.rare.get_mut().and_then(|r| r.idle.as_mut())
    }

    /// Sets the unconsumed-lease release it is under.
    pub fn set_idle(&mut self, idle: Option<IdleRelease>) {
        self.rare.edit(|r| r.idle = idle);
    }
}

impl Lease {
    /// Gives back the spare room of its reservations' lists ([`Reservation::shrink_to_fit`]),
    /// as a lease kept for long should: the catalog does so for the leases a store loads.
    pub fn shrink_to_fit(&mut self) {
        self.reservations
            .iter_mut()
            .for_each(Reservation::shrink_to_fit);
    }

    /// The share of `project` in the lease, when the lease is shared with it.
    pub fn share_of(&self, project: &str) -> Option<&Share> {
        self.shares().and_then(|s| s.of(project))
    }

    /// Whether `project` may present the lease's reservations: it owns the lease or the lease
    /// is shared with it.
    pub fn usable_by(&self, project: &str) -> bool {
        *self.project_id == *project || self.share_of(project).is_some()
    }

    /// The lease's window.
    pub fn window(&self) -> Window {
        Window::new(self.start, self.end).expect("invariant: a lease ends after it starts")
    }

    /// Whether the lease still holds capacity (it has not ended).
    pub fn holds_capacity(&self) -> bool {
        !matches!(
            self.status,
            LeaseStatus::Terminated | LeaseStatus::Waiting | LeaseStatus::Expired
        ) && !self.ended()
    }

    /// Every hold of every reservation, or nothing once the lease has ended.
    pub fn holds(&self) -> Vec<Hold> {
        self.holds_by_reservation().flatten().collect()
    }

    /// The holds of one of its reservations, or nothing once the lease has ended.
    pub fn holds_of(&self, reservation: ReservationId) -> Vec<Hold> {
        match self.reservations.iter().find(|r| r.id == reservation) {
            Some(held) if self.holds_capacity() => held.holds(self.window()),
            _ => Vec::new(),
        }
    }

    /// The holds of each reservation, one list per reservation, or nothing once the lease has
    /// ended.
    pub fn holds_by_reservation(&self) -> impl Iterator<Item = Vec<Hold>> + '_ {
        let window = self.holds_capacity().then(|| self.window());
        window.into_iter().flat_map(move |window| {
            self.reservations
                .iter()
                .map(move |reservation| reservation.holds(window))
        })
    }

    /// The event of a kind.
    pub fn event(&self, kind: EventKind) -> Option<&LeaseEvent> {
        self.events.iter().find(|e| e.kind == kind)
    }

    /// The events not yet fired, as `(due, kind)`, with the preemption notice when one is due
    /// before the start.
    /// A hold or a waitlisted lease has only its lapse pending.
    pub fn pending_events(&self) -> impl Iterator<Item = (Instant, EventKind)> + '_ {
        let parked = self.status.is_parked();
        let notice = self.notice_at().map(|at| (at, EventKind::PreemptionNotice));
        let expiry = self.expiry_at().map(|at| (at, EventKind::ClaimExpiry));
        let lapse = self
            .lapses_at
            .filter(|_| parked)
            .map(|at| (at, EventKind::Lapse));
        self.events
            .iter()
            .filter(move |e| e.status == EventStatus::Undone && !parked)
            .map(|e| (e.at, e.kind))
            .chain(notice)
            .chain(expiry)
            .chain(lapse)
            .chain(self.idle_due())
    }

    /// The unconsumed-lease release's next step, `(due, IdleNotice | IdleRelease)`: the notice
    /// `notice` before the release, never before the start, then the release `after` the start;
    /// none once a consumer presented one of its reservations, for a lease that would end by
    /// then anyway, or once it holds nothing.
    pub fn idle_due(&self) -> Option<(Instant, EventKind)> {
        let idle = self.idle()?;
        let release = self.start + idle.after;
        let live = !self.status.is_parked() && self.holds_capacity() && release < self.end;
        if idle.consumed || !live {
            return None;
        }
        Some(match idle.noticed {
            false => (
                (release - idle.notice).max(self.start),
                EventKind::IdleNotice,
            ),
            true => (release, EventKind::IdleRelease),
        })
    }

    /// When the claim deadline of a Promise reservation falls due, while the lease still holds
    /// capacity and has not passed it.
    pub fn expiry_at(&self) -> Option<Instant> {
        let at = self.terms()?.expiry?;
        (self.holds_capacity() && at < self.end).then_some(at)
    }

    /// Its priority (Blazar leases have the default).
    pub fn priority(&self) -> u32 {
        self.terms().map_or(PRIORITY_DEFAULT, |t| t.priority)
    }

    /// When the preemption notice is due, while it has not gone out and the lease has not
    /// started (floating-IP-only leases evict nobody; a hold, a waitlisted lease and one that
    /// holds nothing give no notice).
    pub fn notice_at(&self) -> Option<Instant> {
        let fences = self
            .reservations
            .iter()
            .any(|r| !matches!(r.spec, ReservationSpec::FloatingIp { .. }));
        let waits = self.status.is_parked() || !self.holds_capacity();
        (fences && !self.preemption_noticed && !self.started() && !waits)
            .then(|| self.start - self.notice_lead)
    }

    /// Whether the window has started (its start event fired).
    pub fn started(&self) -> bool {
        self.event(EventKind::StartLease)
            .is_some_and(|e| e.status != EventStatus::Undone)
    }

    /// Settles a lease that stops holding anything: every event not yet fired is marked done
    /// and every reservation deleted, at `now`.
    pub fn settle(&mut self, now: Instant) {
        for event in &mut self.events {
            if event.status == EventStatus::Undone {
                event.status = EventStatus::Done;
                event.updated_at = now;
            }
        }
        for reservation in &mut self.reservations {
            reservation.status = ReservationStatus::Deleted;
            reservation.updated_at = now;
        }
    }

    /// Whether the window has ended (its end event fired).
    pub fn ended(&self) -> bool {
        self.event(EventKind::EndLease)
            .is_some_and(|e| e.status != EventStatus::Undone)
    }
}

/// The ledger keeps a lease rather than a copy of its holds.
impl Holder for Lease {
    fn holds_by_reservation(&self) -> Vec<Vec<Hold>> {
        Lease::holds_by_reservation(self).collect()
    }

    fn holds_of(&self, reservation: ReservationId) -> Vec<Hold> {
        Lease::holds_of(self, reservation)
    }
}

impl LeaseRecord {
    /// The project of the lease the entry is about, when the entry names it.
    pub fn project_id(&self) -> Option<String> {
        serde_json::from_str::<serde_json::Value>(&self.details)
            .ok()?
            .get("project_id")?
            .as_str()
            .map(str::to_owned)
    }
}

/// A floating IP address registered for reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloatingIp {
    /// Its id.
    pub id: Uuid,
    /// The external network it belongs to.
    pub network_id: String,
    /// The subnet, when known.
    pub subnet_id: Option<String>,
    /// The address, in canonical text form.
    pub address: String,
    /// Whether leases may take it.
    pub reservable: bool,
    /// Registration time.
    pub created_at: Instant,
    /// Last change.
    pub updated_at: Instant,
}

/// One entry of the durable lifecycle record (the outbox notifications are delivered from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The lease.
    pub lease_id: LeaseId,
    /// What happened, for example `lease.create`, `lease.event.start_lease`, `lease.delete`.
    pub kind: String,
    /// When.
    pub at: Instant,
    /// Details as a JSON object (statuses, reasons, what changed).
    pub details: String,
}

/// The operator's release of unconsumed leases (berth), stamped on each lease as it is created:
/// a lease none of whose reservations a consumer presented `after` its start is released then
/// (it ends early, freeing what it held), and its holder is told `notice` before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleRelease {
    /// How long after its start an unconsumed lease is released.
    pub after: Span,
    /// How long before the release its holder is told.
    pub notice: Span,
    /// Whether a consumer presented one of its reservations (then nothing is released).
    #[serde(default)]
    pub consumed: bool,
    /// Whether the notice went out.
    #[serde(default)]
    pub noticed: bool,
}

impl IdleRelease {
    /// The policy of `after` and `notice`, for a lease not yet consumed nor told.
    pub fn new(after: Span, notice: Span) -> IdleRelease {
        IdleRelease {
            after,
            notice,
            consumed: false,
            noticed: false,
        }
    }
}

/// The default lead of the preemption notice: 2 minutes.
pub const PREEMPTION_NOTICE_DEFAULT: Span = Span::from_minutes(2);

fn notice_lead_default() -> Span {
    PREEMPTION_NOTICE_DEFAULT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ledger::Ledger;

    /// The window from `start` to `end` microseconds, and the reservation and provider ids.
    fn win(start: i64, end: i64) -> Window {
        Window::new(Instant::from_micros(start), Instant::from_micros(end)).expect("a window")
    }

    fn res(n: u128) -> ReservationId {
        ReservationId::from_u128(n)
    }

    fn host(n: u128) -> ProviderId {
        ProviderId::from_u128(n)
    }

    /// A lease of `n` (ids from `n * 10`) over `window`: a host reservation of host 10 and an
    /// instance reservation of 2 slots on host 11 and 1 on host 12.
    fn lease(n: u128, window: Window) -> Lease {
        let reservation =
            |id: u128, spec: ReservationSpec, hosts: Vec<(ProviderId, u32)>| Reservation {
                id: res(id),
                spec,
                status: ReservationStatus::Pending,
                hosts: hosts.into(),
                floating_ips: Box::default(),
                missing: Box::default(),
                resources_changed: false,
                created_at: Instant::from_micros(0),
                updated_at: Instant::from_micros(0),
            };
        let whole = ReservationSpec::Host {
            min: 1,
            max: 1,
            hypervisor_properties: String::new().into(),
            resource_properties: String::new().into(),
            before_end: String::new().into(),
        };
        let instance = ReservationSpec::Instance {
            vcpus: 2,
            memory_mb: 1_024,
            disk_gb: 0,
            amount: 3,
            affinity: Affinity::Any,
            resource_properties: String::new().into(),
        };
        Lease {
            id: LeaseId::from_u128(n * 10),
            name: "lease".into(),
            project_id: "project".into(),
            user_id: "user".into(),
            start: window.start(),
            end: window.end(),
            status: LeaseStatus::Pending,
            degraded: false,
            reservations: Box::new([
                reservation(n * 10 + 1, whole, vec![(host(10), 1)]),
                reservation(n * 10 + 2, instance, vec![(host(11), 2), (host(12), 1)]),
            ]),
            events: LeaseEvents::default(),
            notice_lead: PREEMPTION_NOTICE_DEFAULT,
            preemption_noticed: false,
            lapses_at: None,
            rare: Rare::default(),
            created_at: Instant::from_micros(0),
            updated_at: Instant::from_micros(0),
        }
    }

    /// A JSON object's keys, in the order it has them.
    struct TopKeys(Vec<String>);

    impl<'de> Deserialize<'de> for TopKeys {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<TopKeys, D::Error> {
            struct Keys;
            impl<'de> serde::de::Visitor<'de> for Keys {
                type Value = TopKeys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<TopKeys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(key);
                    }
                    Ok(TopKeys(keys))
                }
            }
            deserializer.deserialize_map(Keys)
        }
    }

    /// `plain` with every optional field set: what few leases have, the lapse and the terms.
    fn with_everything_set(plain: &Lease) -> Lease {
        let mut rare = plain.clone();
        rare.set_status_reason(Some("nova down".into()));
        rare.set_outcome(Some(Outcome::Expired));
        rare.set_series(Some(Occurrence {
            series_id: Uuid::from_u128(7),
            index: 1,
            count: 3,
            rule: "FREQ=DAILY;COUNT=3".into(),
        }));
        rare.set_shares(Some(Shares(vec![Share {
            project_id: "other".into(),
            cap: [(ResourceClass::parse("VCPU").expect("a class"), 2)].into(),
            updated_at: Instant::from_micros(5),
        }])));
        let policy = IdleRelease::new(Span::from_hours(1), Span::from_minutes(10));
        rare.set_idle(Some(policy));
        rare.idle_mut().expect("idle").noticed = true;
        rare.lapses_at = Some(Instant::from_micros(3));
        rare.set_terms(Some(PromiseTerms {
            kind: crate::model::promise::PromiseKind::Capacity,
            ask: crate::model::promise::Ask::default(),
            priority: PRIORITY_DEFAULT,
            expiry: None,
            zone: None,
            provider: None,
        }));
        rare
    }

    #[test]
    fn what_few_leases_have_is_stored_at_the_top_level_and_kept_apart_only_while_set() {
        let plain = lease(1, win(0, 10));
        assert!(
            plain.rare.0.is_none(),
            "a lease without any of it allocates none"
        );
        let mut rare = with_everything_set(&plain);

        // Stored as before: each at the document's top level, and read back the same.
        let text = serde_json::to_string(&rare).expect("encode");
        let document: serde_json::Value = serde_json::from_str(&text).expect("a document");
        for field in ["status_reason", "outcome", "series", "shares", "idle"] {
            assert!(!document[field].is_null(), "{field} in {document}");
        }
        assert_eq!(document["idle"]["noticed"], true, "{document}");
        assert!(document.get("rare").is_none(), "{document}");
        // In the order documents have always had (decoding does not need it; equal leases
        // give equal bytes).
        let order = [
            "id",
            "name",
            "project_id",
            "user_id",
            "start",
            "end",
            "status",
            "status_reason",
            "degraded",
            "reservations",
            "events",
            "notice_lead_micros",
            "preemption_noticed",
            "terms",
            "lapses_at",
            "outcome",
            "series",
            "shares",
            "idle",
            "created_at",
            "updated_at",
        ];
        let keys: TopKeys = serde_json::from_str(&text).expect("a document");
        assert_eq!(keys.0, order, "{text}");
        let read: Lease = serde_json::from_value(document).expect("decode");
        assert_eq!(read, rare);
        assert_eq!(read.status_reason(), Some("nova down"));
        let plain_document = serde_json::to_value(&plain).expect("encode");
        assert!(plain_document.get("outcome").is_none(), "{plain_document}");
        assert_eq!(plain_document["status_reason"], serde_json::Value::Null);

        // Cleared one by one, it is equal to the lease that never had any, allocation given back.
        rare.lapses_at = None;
        rare.set_terms(None);
        rare.set_status_reason(None);
        rare.set_outcome(None);
        rare.set_series(None);
        rare.set_shares(None);
        assert!(rare.rare.0.is_some(), "the idle release is still set");
        assert_ne!(rare, plain);
        rare.set_idle(None);
        assert!(rare.rare.0.is_none());
        assert_eq!(rare, plain);
    }

    #[test]
    fn a_lease_declares_the_fields_it_writes_so_formats_that_count_them_read_it_back() {
        // CBOR writes a struct as a map whose length comes first, from `serialize_struct`: a
        // lease that declared a field it then left out would read as a document cut short.
        let plain = lease(1, win(0, 10));
        let full = with_everything_set(&plain);
        let clears: [fn(&mut Lease); 7] = [
            |l| l.set_terms(None),
            |l| l.lapses_at = None,
            |l| l.set_outcome(None),
            |l| l.set_series(None),
            |l| l.set_shares(None),
            |l| l.set_idle(None),
            |l| l.set_status_reason(None),
        ];
        // Each optional field set alone: every other one cleared.
        let each_alone = (0..clears.len()).map(|kept| {
            let mut one = full.clone();
            for (n, clear) in clears.iter().enumerate() {
                if n != kept {
                    clear(&mut one);
                }
            }
            one
        });
        for lease in [plain, full.clone()].into_iter().chain(each_alone) {
            let mut bytes = Vec::new();
            ciborium::into_writer(&lease, &mut bytes).expect("encode");
            let read: Lease = ciborium::from_reader(bytes.as_slice()).expect("read back whole");
            assert_eq!(read, lease);
        }
    }

    #[test]
    fn a_ledger_of_leases_reads_their_holds_from_them() {
        let leases: Vec<Arc<Lease>> = [win(0, 10), win(5, 20), win(20, 30)]
            .into_iter()
            .zip(1..)
            .map(|(window, n)| Arc::new(lease(n, window)))
            .collect();
        let of_holds = Ledger::from_holds(leases.iter().flat_map(|l| l.holds_by_reservation()));
        let bulk = Ledger::from_holders(&leases);
        let mut one_by_one = Ledger::new();
        for lease in &leases {
            assert_eq!(one_by_one.add_holder(lease), lease.holds());
        }
        for ledger in [&bulk, &one_by_one] {
            assert_eq!(*ledger, of_holds);
            assert_eq!(ledger.len(), 9);
            assert_eq!(
                ledger.holds_of(res(22)).collect::<Vec<_>>(),
                leases[1].reservations[1].holds(win(5, 20))
            );
            assert_eq!(ledger.holds_on(host(11), win(8, 9)).len(), 2);
            assert!(!ledger.is_free(host(10), win(9, 10), &[res(11)]));
            assert!(ledger.is_free(host(10), win(9, 10), &[res(11), res(21)]));
        }
        // A reservation already held as holds keeps the lease's as more holds.
        let mut mixed = Ledger::new();
        let mut extra = leases[0].holds_of(res(11));
        extra[0].host = host(13);
        mixed.add_all(extra);
        mixed.add_holder(&leases[0]);
        assert_eq!(mixed.holds_of(res(11)).count(), 2);
        for lease in &leases {
            for reservation in &lease.reservations {
                one_by_one.remove(reservation.id);
            }
        }
        assert!(one_by_one.is_empty());
        assert_eq!(one_by_one.hosts().count(), 0);
    }

    #[test]
    fn a_lease_keeps_three_events_in_itself_and_stores_them_as_a_list() {
        let event = |n: u128| LeaseEvent {
            id: Uuid::from_u128(n),
            kind: EventKind::StartLease,
            at: Instant::from_micros(0),
            status: EventStatus::Undone,
            created_at: Instant::from_micros(0),
            updated_at: Instant::from_micros(0),
        };
        let three = LeaseEvents::from(vec![event(1), event(2), event(3)]);
        assert!(matches!(three, LeaseEvents::Three(_)));
        assert_eq!(
            three,
            LeaseEvents::Listed(Box::new([event(1), event(2), event(3)]))
        );
        let two = LeaseEvents::from(vec![event(1), event(2)]);
        assert!(matches!(two, LeaseEvents::Listed(_)));
        let json = serde_json::to_string(&three).expect("encodes");
        assert_eq!(json, serde_json::to_string(&*three).expect("encodes"));
        let back: LeaseEvents = serde_json::from_str(&json).expect("decodes");
        assert!(matches!(back, LeaseEvents::Three(_)));
        assert_eq!(back, three);
    }

    #[test]
    fn the_status_table_is_exactly_the_lifecycle() {
        use LeaseStatus::{Active, Error, Expired, Held, Pending, Terminated, Waiting};
        let no = None;
        let table = [
            (
                Pending,
                [
                    Some(Active),
                    Some(Terminated),
                    Some(Error),
                    Some(Terminated),
                    no,
                    no,
                ],
            ),
            (
                Active,
                [no, Some(Terminated), Some(Error), Some(Terminated), no, no],
            ),
            (Terminated, [no, no, Some(Error), no, no, no]),
            (
                Error,
                [
                    Some(Error),
                    Some(Error),
                    Some(Error),
                    Some(Terminated),
                    no,
                    no,
                ],
            ),
            (
                Held,
                [no, no, Some(Error), Some(Terminated), no, Some(Expired)],
            ),
            (
                Waiting,
                [
                    no,
                    no,
                    Some(Error),
                    Some(Terminated),
                    Some(Pending),
                    Some(Expired),
                ],
            ),
            (Expired, [no, no, Some(Error), no, no, no]),
        ];
        let events = [
            Transition::Start,
            Transition::End,
            Transition::Fail,
            Transition::EndEarly,
            Transition::Admit,
            Transition::Lapse,
        ];
        for (from, row) in table {
            for (by, expected) in events.into_iter().zip(row) {
                let got = from.next(by);
                match expected {
                    Some(to) => assert_eq!(got, Ok(to), "{from:?} by {by:?}"),
                    None => assert_eq!(
                        got,
                        Err(InvalidTransition { from, by }),
                        "{from:?} by {by:?}"
                    ),
                }
            }
        }
        for status in [Pending, Active, Terminated, Error, Held, Waiting, Expired] {
            assert_eq!(LeaseStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn a_lease_starts_and_ends_once() {
        let active = LeaseStatus::Pending
            .next(Transition::Start)
            .expect("a pending lease starts");
        assert!(active.next(Transition::Start).is_err(), "no second start");
        let ended = active.next(Transition::End).expect("an active lease ends");
        assert_eq!(ended, LeaseStatus::Terminated);
        assert!(ended.next(Transition::End).is_err(), "no second end");
        assert!(
            ended.next(Transition::EndEarly).is_err(),
            "an ended lease cannot end early"
        );
    }
}
