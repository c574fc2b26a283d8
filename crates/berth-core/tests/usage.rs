//! Usage history through the public API: the updates a lease's and consumers' decisions make,
//! applied to a history as a store applies them, add up to the report one works out by hand;
//! and the report of random segments equals a tick-by-tick count of the same segments.

use berth_core::decide::admission::Search;
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::lease::{NewLease, create_lease, delete_lease};
use berth_core::model::consumer::PREEMPTIBLE;
use berth_core::model::ledger::Window;
use berth_core::model::provider::Attributes;
use berth_core::model::usage::{UsageKind, UsageSegment, UsageSource};
use berth_core::query::usage::{UNIT_HOUR, UsageTotals, close, open, report};
use berth_core::{Change, Instant, LeaseId, ProviderId, ReservationId, ResourceClass};
use proptest::prelude::*;
use std::collections::BTreeMap;
use uuid::Uuid;

mod support;
use support::{TICK, World, one_host};

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class name")
}

fn tick(n: i64) -> Instant {
    Instant::from_micros(n * TICK)
}

/// The world, the closed usage history its decisions wrote, and how many of them wrote any.
struct Recorded {
    w: World,
    history: Vec<UsageSegment>,
    writes: usize,
}

impl Recorded {
    fn apply(&mut self, changes: &[Change]) {
        let mut changes = changes.to_vec();
        let closed = close(&self.w.catalog, &mut changes, self.w.at());
        self.writes += usize::from(!closed.is_empty());
        self.history.extend(closed);
        self.w.apply(&changes);
    }

    /// The closed history and the catalog's open usage over `period`.
    fn segments(&self, period: Window) -> Vec<UsageSegment> {
        let mut all = self.history.clone();
        all.extend(open(&self.w.catalog, period, usize::MAX).expect("within the limit"));
        all
    }

    fn fire_due(&mut self) {
        while let Some((_, kind, id)) = self.w.catalog.due_events(self.w.at()).first().copied() {
            let changes =
                berth_core::decide::lifecycle::fire_event(&self.w.catalog, id, kind, self.w.at())
                    .expect("a due event fires");
            self.apply(&changes);
        }
    }

    fn write(
        &mut self,
        consumer: u128,
        project: &str,
        host: ProviderId,
        vcpus: u64,
        kind: (Option<ReservationId>, Option<&str>),
    ) {
        let allocations = match vcpus {
            0 => BTreeMap::new(),
            n => BTreeMap::from([(host, BTreeMap::from([(class("VCPU"), n)]))]),
        };
        let write = ConsumerWrite {
            reservation: kind.0,
            consumer: Uuid::from_u128(consumer),
            project_id: project.into(),
            user_id: "u".into(),
            consumer_type: kind.1.map(str::to_owned),
            generation: ConsumerGeneration::Unchecked,
            allocations,
        };
        let changes = set_allocations(&self.w.catalog, &[write], self.w.at()).expect("written");
        self.apply(&changes);
    }
}

fn hours(n: u128) -> u128 {
    n * UNIT_HOUR
}

#[test]
fn a_week_of_decisions_adds_up_to_the_report_worked_out_by_hand() {
    let mut r = Recorded {
        w: World::with_hosts(2, |_| (None, Attributes::default())),
        history: Vec::new(),
        writes: 0,
    };
    // Tick 10: "lab" leases a whole host (8 VCPU) for ticks 12 to 22.
    let reservation = ReservationId::new(r.w.id());
    let new = NewLease {
        id: LeaseId::new(r.w.id()),
        name: "week".into(),
        project_id: "lab".into(),
        user_id: "u".into(),
        start: tick(12),
        end: tick(22),
        before_end: None,
        reservations: vec![(reservation, one_host())],
        event_ids: [r.w.id(), r.w.id(), r.w.id()],
        notice_lead: berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT,
    };
    let (changes, lease) = create_lease(&r.w.catalog, &new, r.w.at(), &Search::NONE).expect("fits");
    r.apply(&changes);
    let host = lease.reservations[0].hosts[0].0;
    let other = *r.w.hosts.iter().find(|h| **h != host).expect("two hosts");
    // Tick 11: "batch" runs 1 VCPU on demand on the other host.
    r.w.now = 11;
    r.write(2, "batch", other, 1, (None, None));
    // Tick 12: the lease starts; "lab" runs 4 VCPU in it, "batch" 2 preemptible beside them.
    r.w.now = 12;
    r.fire_due();
    r.write(3, "lab", host, 4, (Some(reservation), None));
    r.write(1, "batch", host, 2, (None, Some(PREEMPTIBLE)));
    // Creating the lease, its start and the consumers' first allocations closed nothing.
    assert_eq!((r.writes, r.history.len()), (0, 0));
    // Tick 14: the preemptible work grows to 3 VCPU.
    r.w.now = 14;
    r.write(1, "batch", host, 3, (None, Some(PREEMPTIBLE)));
    // Tick 16: lab's consumer ends; tick 18: the preemptible one too; tick 20: the lease is
    // deleted two ticks early.
    r.w.now = 16;
    r.write(3, "lab", host, 0, (Some(reservation), None));
    r.w.now = 18;
    r.write(1, "batch", host, 0, (None, Some(PREEMPTIBLE)));
    r.w.now = 20;
    let changes = delete_lease(&r.w.catalog, lease.id, r.w.at()).expect("deleted");
    r.apply(&changes);
    r.w.now = 30;

    let period = Window::new(tick(10), tick(40)).expect("a period");
    let rows = report(&r.segments(period), period, r.w.at(), None);
    let lab_vcpu = rows
        .get(&("lab".to_owned(), class("VCPU")))
        .expect("lab's VCPU row");
    // Reserved 8 VCPU for ticks 12 to 20; consumed 4 for 12 to 16; lent 2 for 12 to 14 and 3
    // for 14 to 18; idle the rest.
    assert_eq!(
        *lab_vcpu,
        UsageTotals {
            reserved: hours(8 * 8),
            consumed: hours(4 * 4),
            lent: hours(2 * 2 + 3 * 4),
            idle: hours(64 - 16 - 16),
            on_demand: 0,
            preemptible: 0,
        }
    );
    let lab_memory = rows
        .get(&("lab".to_owned(), class("MEMORY_MB")))
        .expect("lab's memory");
    assert_eq!(lab_memory.reserved, hours(16_384 * 8));
    let batch = rows
        .get(&("batch".to_owned(), class("VCPU")))
        .expect("batch's row");
    // Preemptible 2 for ticks 12 to 14 and 3 for 14 to 18; on demand 1 from tick 11 to now.
    assert_eq!(batch.preemptible, hours(2 * 2 + 3 * 4));
    assert_eq!(batch.on_demand, hours(19));
    // The lease's start closed nothing: it has one reserved segment per class, closed at its
    // deletion.
    let lab_segments: Vec<&UsageSegment> = r
        .history
        .iter()
        .filter(|s| s.source == UsageSource::Lease(lease.id) && s.class == class("VCPU"))
        .collect();
    assert_eq!(lab_segments.len(), 1);
    assert_eq!(
        (lab_segments[0].since, lab_segments[0].until),
        (tick(12), Some(tick(20)))
    );
    // One project's report keeps its rows alone.
    let only = report(&r.segments(period), period, r.w.at(), Some("batch"));
    assert!(only.keys().all(|(p, _)| p == "batch") && !only.is_empty());
}

/// A segment of random kind and times, on one of two providers, in one of two classes.
fn segment() -> impl Strategy<Value = UsageSegment> {
    (
        0..4u8,
        0..2u8,
        0..2u128,
        0..2u8,
        1..5u64,
        0..20i64,
        1..10i64,
        any::<bool>(),
        0..3u128,
    )
        .prop_map(
            |(kind, project, provider, class_index, amount, since, length, open, reservation)| {
                let kind = [
                    UsageKind::Reserved,
                    UsageKind::Consumed,
                    UsageKind::OnDemand,
                    UsageKind::Preemptible,
                ][usize::from(kind)];
                UsageSegment {
                    source: UsageSource::Consumer(Uuid::from_u128(
                        u128::from(since.unsigned_abs()) + 100,
                    )),
                    kind,
                    project_id: ["p0", "p1"][usize::from(project)].to_owned(),
                    reservation: matches!(kind, UsageKind::Reserved | UsageKind::Consumed)
                        .then(|| ReservationId::new(Uuid::from_u128(reservation + 1))),
                    provider: ProviderId::from_u128(provider + 1),
                    class: class(["VCPU", "DISK_GB"][usize::from(class_index)]),
                    amount,
                    since: tick(since),
                    until: (!open || kind == UsageKind::Reserved).then(|| tick(since + length)),
                }
            },
        )
}

/// The report counted tick by tick: at each tick, what runs then, with the preemptible amount
/// of each place counted against its reservations oldest first.
fn counted(
    segments: &[UsageSegment],
    from: i64,
    to: i64,
) -> BTreeMap<(String, ResourceClass), UsageTotals> {
    let mut rows: BTreeMap<(String, ResourceClass), UsageTotals> = BTreeMap::new();
    let owner = |reservation: Option<ReservationId>| {
        segments
            .iter()
            .find(|s| s.kind == UsageKind::Reserved && s.reservation == reservation)
            .map(|s| s.project_id.clone())
    };
    let mut inside: BTreeMap<(String, ResourceClass), u128> = BTreeMap::new();
    for t in from..to {
        let at = tick(t);
        let running: Vec<&UsageSegment> = segments
            .iter()
            .filter(|s| s.since <= at && s.until.is_none_or(|u| u > at))
            .collect();
        for s in &running {
            let totals = rows
                .entry((s.project_id.clone(), s.class.clone()))
                .or_default();
            let one = u128::from(s.amount) * UNIT_HOUR;
            match s.kind {
                UsageKind::Reserved => totals.reserved += one,
                UsageKind::Consumed => {
                    totals.consumed += one;
                    if let Some(owner) = owner(s.reservation) {
                        *inside.entry((owner, s.class.clone())).or_default() += one;
                    }
                }
                UsageKind::OnDemand => totals.on_demand += one,
                UsageKind::Preemptible => totals.preemptible += one,
            }
        }
        let mut places: Vec<(ProviderId, ResourceClass)> = running
            .iter()
            .map(|s| (s.provider, s.class.clone()))
            .collect();
        places.sort();
        places.dedup();
        for (provider, class) in places {
            let here = running
                .iter()
                .filter(|s| s.provider == provider && s.class == class);
            let mut left: u64 = here
                .clone()
                .filter(|s| s.kind == UsageKind::Preemptible)
                .map(|s| s.amount)
                .sum();
            let mut reserved: Vec<&&UsageSegment> =
                here.filter(|s| s.kind == UsageKind::Reserved).collect();
            reserved.sort_by_key(|s| (s.since, s.reservation));
            for s in reserved {
                let taken = left.min(s.amount);
                left -= taken;
                rows.entry((s.project_id.clone(), class.clone()))
                    .or_default()
                    .lent += u128::from(taken) * UNIT_HOUR;
            }
        }
    }
    for ((project, class), totals) in &mut rows {
        let used = inside
            .get(&(project.clone(), class.clone()))
            .copied()
            .unwrap_or(0);
        totals.idle = totals
            .reserved
            .saturating_sub(used)
            .saturating_sub(totals.lent);
    }
    rows.retain(|_, t| *t != UsageTotals::default());
    rows
}

proptest! {
    #[test]
    fn the_report_equals_a_tick_by_tick_count(
        segments in proptest::collection::vec(segment(), 0..24),
        from in 0..15i64,
        length in 1..20i64,
        now in 0..30i64,
    ) {
        // A reservation is one lease's: its segments share one project.
        let mut segments = segments;
        let owners: BTreeMap<Option<ReservationId>, String> = segments
            .iter()
            .filter(|s| s.kind == UsageKind::Reserved)
            .map(|s| (s.reservation, s.project_id.clone()))
            .collect();
        for s in segments.iter_mut().filter(|s| s.kind == UsageKind::Reserved) {
            s.project_id.clone_from(&owners[&s.reservation]);
        }
        let period = Window::new(tick(from), tick(from + length)).expect("a period");
        let mut reported = report(&segments, period, tick(now), None);
        reported.retain(|_, t| *t != UsageTotals::default());
        prop_assert_eq!(reported, counted(&segments, from, (from + length).min(now).max(from)));
    }
}

#[test]
fn a_leases_utilization_counts_its_holds_and_what_presenting_consumers_held() {
    let lease = LeaseId::new(Uuid::from_u128(1));
    let mine = ReservationId::new(Uuid::from_u128(9));
    let other = ReservationId::new(Uuid::from_u128(8));
    let vcpu = class("VCPU");
    let segment = |source, kind, reservation, amount, since, until: Option<i64>| UsageSegment {
        source,
        kind,
        project_id: "p".into(),
        reservation: Some(reservation),
        provider: ProviderId::from_u128(1),
        class: vcpu.clone(),
        amount,
        since: tick(since),
        until: until.map(tick),
    };
    let held = UsageSource::Lease(lease);
    let consumer = UsageSource::Consumer(Uuid::from_u128(50));
    let segments = [
        // The lease held 8 from tick 0 to 4, closed at a change, and 8 from 4 on (open).
        segment(held, UsageKind::Reserved, mine, 8, 0, Some(4)),
        segment(held, UsageKind::Reserved, mine, 8, 4, None),
        // A consumer presenting it held 2 from tick 1 to 3, and 4 from 3 on.
        segment(consumer, UsageKind::Consumed, mine, 2, 1, Some(3)),
        segment(consumer, UsageKind::Consumed, mine, 4, 3, None),
        // Another lease's hold and consumer count nothing here.
        segment(
            UsageSource::Lease(LeaseId::new(Uuid::from_u128(2))),
            UsageKind::Reserved,
            other,
            8,
            0,
            None,
        ),
        segment(consumer, UsageKind::Consumed, other, 5, 0, None),
    ];
    let reservations = std::collections::BTreeSet::from([mine]);
    let period = Window::new(tick(0), tick(6)).expect("a period");
    let found =
        berth_core::query::usage::lease_utilization(&segments, lease, &reservations, period);
    assert_eq!(found.len(), 1);
    let one = &found[0];
    assert_eq!(one.class, vcpu);
    assert_eq!(one.reserved, hours(8 * 6));
    assert_eq!(one.consumed, hours(2 * 2 + 4 * 3));
    // The change at tick 4 alone moves nothing: it is no step.
    assert_eq!(
        one.steps,
        [(tick(0), 8, 0), (tick(1), 8, 2), (tick(3), 8, 4)]
    );
}
