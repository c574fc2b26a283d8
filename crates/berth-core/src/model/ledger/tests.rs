//! Tests of the ledger: worked examples, and properties against a brute-force reference model.

use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn res(n: u128) -> ReservationId {
    ReservationId::from_u128(n)
}

fn uuid(n: u128) -> ProviderId {
    ProviderId::from_u128(n)
}

fn at(micros: i64) -> Instant {
    Instant::from_micros(micros)
}

fn win(start: i64, end: i64) -> Window {
    Window::new(at(start), at(end)).expect("a non-empty window")
}

const CLASS_NAMES: [&str; 3] = ["VCPU", "MEMORY_MB", "CUSTOM_GOLD"];

fn class(i: usize) -> ResourceClass {
    ResourceClass::parse(CLASS_NAMES[i]).expect("a class name")
}

fn vcpu() -> ResourceClass {
    class(0)
}

fn hold(reservation: u128, host: u128, window: Window, vcpus: u64) -> Hold {
    Hold {
        reservation: res(reservation),
        host: uuid(host),
        window,
        exclusive: false,
        amounts: vec![(vcpu(), vcpus)].into(),
    }
}

fn exclusive(reservation: u128, host: u128, window: Window) -> Hold {
    Hold {
        reservation: res(reservation),
        host: uuid(host),
        window,
        exclusive: true,
        amounts: Amounts::default(),
    }
}

/// The ledger of `holds` added one by one, checked against the same ledger built in bulk.
fn ledger_of(holds: &[Hold]) -> Ledger {
    let mut ledger = Ledger::new();
    for h in holds {
        ledger.add(h.clone());
    }
    ledger.check_invariants().expect("invariants hold");
    for batch in [1, 2, holds.len().max(1)] {
        assert_eq!(
            Ledger::from_holds(holds.chunks(batch).map(<[Hold]>::to_vec)),
            ledger,
            "building in bulk is adding one by one"
        );
    }
    ledger
}

#[test]
fn window_new_refuses_empty_and_reversed_windows() {
    assert_eq!(Window::new(at(5), at(5)), None);
    assert_eq!(Window::new(at(6), at(5)), None);
    let w = Window::new(at(5), at(9)).expect("non-empty");
    assert_eq!((w.start, w.end), (at(5), at(9)));
    assert_eq!(w.duration(), Span::from_micros(4));
    assert_eq!(w.shifted_to(at(20)), win(20, 24));
    assert!(w.contains(at(5)) && w.contains(at(8)) && !w.contains(at(9)));
    assert!(w.overlaps(&win(8, 12)) && w.overlaps(&win(0, 6)) && w.overlaps(&win(6, 7)));
    assert!(!w.overlaps(&win(9, 12)) && !w.overlaps(&win(0, 5)));
    let empty = Window {
        start: at(7),
        end: at(7),
    };
    assert!(empty.is_empty() && !empty.overlaps(&w) && !w.overlaps(&empty));
}

#[test]
fn back_to_back_windows_do_not_conflict() {
    let ledger = ledger_of(&[exclusive(1, 10, win(0, 10)), hold(2, 11, win(0, 10), 4)]);
    assert!(ledger.is_free(uuid(10), win(10, 20), &[]));
    assert!(ledger.is_free(uuid(10), win(-5, 0), &[]));
    assert_eq!(ledger.peak(uuid(10), win(10, 20), &[]), Peak::default());
    assert_eq!(ledger.peak(uuid(11), win(10, 20), &[]), Peak::default());
    assert!(!ledger.is_free(uuid(10), win(9, 10), &[]));
    let peak = ledger.peak(uuid(10), win(5, 15), &[]);
    assert_eq!((peak.exclusive, peak.holds), (1, 1));
    let next = ledger_of(&[hold(1, 10, win(0, 10), 4), hold(2, 10, win(10, 20), 4)]);
    let both = next.peak(uuid(10), win(0, 20), &[]);
    assert_eq!((both.holds, both.amount(&vcpu())), (1, 4));
}

#[test]
fn holds_outside_the_window_do_not_count() {
    let ledger = ledger_of(&[
        hold(1, 10, win(0, 5), 8),
        hold(2, 10, win(20, 30), 16),
        hold(3, 10, win(8, 12), 2),
    ]);
    let peak = ledger.peak(uuid(10), win(6, 15), &[]);
    assert_eq!(peak.amounts, vec![(vcpu(), 2)]);
    assert_eq!(peak.holds, 1);
    assert_eq!(ledger.peak(uuid(99), win(0, 100), &[]), Peak::default());
    assert!(ledger.is_free(uuid(10), win(5, 8), &[]));
    assert!(ledger.is_free(uuid(99), win(0, 100), &[]));
}

#[test]
fn peak_is_a_maximum_over_instants_not_a_sum_of_holds() {
    let apart = ledger_of(&[hold(1, 10, win(0, 5), 4), hold(2, 10, win(6, 10), 3)]);
    let peak = apart.peak(uuid(10), win(0, 10), &[]);
    assert_eq!((peak.holds, peak.amount(&vcpu())), (1, 4));
    let overlapping = ledger_of(&[hold(1, 10, win(0, 6), 4), hold(2, 10, win(4, 10), 3)]);
    let peak = overlapping.peak(uuid(10), win(0, 10), &[]);
    assert_eq!((peak.holds, peak.amount(&vcpu())), (2, 7));
    let peak = overlapping.peak(uuid(10), win(6, 10), &[]);
    assert_eq!((peak.holds, peak.amount(&vcpu())), (1, 3));
    assert_eq!(peak.amount(&class(2)), 0);
}

#[test]
fn per_class_maxima_may_come_from_different_instants() {
    let mut memory = hold(2, 10, win(5, 10), 0);
    memory.amounts = vec![(class(1), 1024)].into();
    let ledger = ledger_of(&[hold(1, 10, win(0, 5), 4), memory]);
    let peak = ledger.peak(uuid(10), win(0, 10), &[]);
    assert_eq!(peak.amount(&vcpu()), 4);
    assert_eq!(peak.amount(&class(1)), 1024);
    assert_eq!(peak.holds, 1);
}

#[test]
fn remove_restores_prior_answers() {
    let mut ledger = ledger_of(&[hold(1, 10, win(0, 10), 4), hold(2, 11, win(3, 8), 1)]);
    let before = ledger.peak(uuid(10), win(0, 20), &[]);
    let extra = [hold(3, 10, win(5, 15), 2), exclusive(3, 11, win(0, 4))];
    for h in &extra {
        ledger.add(h.clone());
    }
    assert_eq!(ledger.peak(uuid(10), win(0, 20), &[]).amount(&vcpu()), 6);
    assert_eq!(ledger.holds_of(res(3)).count(), 2);
    assert_eq!(ledger.remove(res(3)), extra.to_vec());
    ledger.check_invariants().expect("invariants hold");
    assert_eq!(ledger.peak(uuid(10), win(0, 20), &[]), before);
    assert!(ledger.is_free(uuid(11), win(0, 3), &[]));
    assert_eq!(ledger.remove(res(3)), Vec::new());
    assert_eq!(ledger.len(), 2);
    ledger.remove(res(1));
    ledger.remove(res(2));
    assert!(ledger.is_empty());
    assert_eq!(ledger.hosts().count(), 0);
    ledger.check_invariants().expect("invariants hold");
}

#[test]
fn a_reservation_may_hold_one_host_twice() {
    let mut ledger = ledger_of(&[hold(1, 10, win(0, 10), 4), hold(1, 10, win(5, 15), 2)]);
    assert_eq!(ledger.peak(uuid(10), win(0, 20), &[]).amount(&vcpu()), 6);
    assert_eq!(ledger.peak(uuid(10), win(0, 20), &[]).holds, 2);
    assert_eq!(ledger.holds_on(uuid(10), win(9, 10)).len(), 2);
    assert_eq!(
        ledger.peak(uuid(10), win(0, 20), &[res(1)]),
        Peak::default()
    );
    assert_eq!(ledger.forget_before(at(10)), 1);
    ledger.check_invariants().expect("invariants hold");
    assert_eq!(ledger.holds_on(uuid(10), win(0, 20)).len(), 1);
    assert_eq!(ledger.remove(res(1)).len(), 1);
    assert!(ledger.is_empty());
}

#[test]
fn excluding_ignores_the_holds_of_those_reservations() {
    let ledger = ledger_of(&[
        hold(1, 10, win(0, 5), 2),
        hold(2, 10, win(5, 10), 2),
        hold(3, 10, win(2, 8), 1),
        exclusive(4, 10, win(8, 9)),
    ]);
    // Reservations 1 and 2 meet at 5 with equal levels: no breakpoint there, yet excluding 2
    // must leave [5, 8) at 1.
    assert!(!ledger.is_free(uuid(10), win(5, 10), &[res(2)]));
    assert!(ledger.is_free(uuid(10), win(5, 10), &[res(2), res(3), res(4)]));
    let peak = ledger.peak(uuid(10), win(5, 10), &[res(2)]);
    assert_eq!(
        (peak.holds, peak.exclusive, peak.amount(&vcpu())),
        (1, 1, 1)
    );
    let peak = ledger.peak(uuid(10), win(0, 8), &[res(3), res(3), res(77)]);
    assert_eq!((peak.holds, peak.amount(&vcpu())), (1, 2));
    let peak = ledger.peak(uuid(10), win(0, 10), &[res(3)]);
    assert_eq!(
        (peak.holds, peak.exclusive, peak.amount(&vcpu())),
        (2, 1, 2)
    );
    let mut without = ledger.clone();
    without.remove(res(3));
    assert_eq!(
        ledger.peak(uuid(10), win(0, 10), &[res(3)]),
        without.peak(uuid(10), win(0, 10), &[])
    );
}

#[test]
fn release_times_are_the_instants_where_use_decreases() {
    let ledger = ledger_of(&[
        hold(1, 10, win(0, 5), 2),
        hold(2, 10, win(5, 10), 2),
        hold(3, 10, win(2, 8), 1),
        hold(4, 10, win(12, 14), 1),
    ]);
    assert_eq!(
        ledger.release_times(uuid(10), at(0), at(20)),
        vec![at(8), at(10), at(14)]
    );
    assert_eq!(
        ledger.release_times(uuid(10), at(8), at(14)),
        vec![at(8), at(10)]
    );
    assert_eq!(
        ledger.release_times(uuid(10), at(9), at(8)),
        Vec::<Instant>::new()
    );
    assert_eq!(
        ledger.release_times(uuid(11), at(0), at(20)),
        Vec::<Instant>::new()
    );
}

#[test]
fn holds_on_lists_the_overlapping_holds_in_start_order() {
    let ledger = ledger_of(&[
        hold(3, 10, win(6, 9), 1),
        hold(1, 10, win(0, 100), 1),
        hold(2, 10, win(2, 5), 1),
        hold(4, 11, win(6, 9), 1),
    ]);
    let ids = |w: Window| -> Vec<ReservationId> {
        let holds = ledger.holds_on(uuid(10), w);
        holds.iter().map(|h| h.reservation).collect()
    };
    assert_eq!(ids(win(0, 50)), vec![res(1), res(2), res(3)]);
    assert_eq!(ids(win(5, 6)), vec![res(1)]);
    assert_eq!(ids(win(90, 200)), vec![res(1)]);
    assert_eq!(ids(win(100, 200)), Vec::<ReservationId>::new());
    let hosts: Vec<ProviderId> = ledger.hosts().collect();
    assert_eq!(hosts, vec![uuid(10), uuid(11)]);
}

#[test]
fn forget_before_drops_the_holds_that_ended() {
    let mut ledger = ledger_of(&[
        hold(1, 10, win(0, 5), 1),
        hold(2, 10, win(0, 10), 1),
        hold(2, 11, win(0, 4), 1),
        hold(3, 12, win(3, 5), 1),
    ]);
    assert_eq!(ledger.forget_before(at(4)), 1);
    assert_eq!(ledger.forget_before(at(5)), 2);
    ledger.check_invariants().expect("invariants hold");
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger.hosts().collect::<Vec<_>>(), vec![uuid(10)]);
    assert_eq!(ledger.holds_of(res(2)).count(), 1);
    assert_eq!(ledger.holds_of(res(1)).count(), 0);
    assert_eq!(ledger.peak(uuid(10), win(0, 20), &[]).amount(&vcpu()), 1);
    assert_eq!(ledger.forget_before(at(5)), 0);
}

#[test]
fn an_empty_window_is_stored_but_covers_nothing() {
    let mut h = hold(1, 10, win(0, 1), 3);
    h.window = Window {
        start: at(5),
        end: at(2),
    };
    let mut ledger = ledger_of(&[h.clone()]);
    assert_eq!(ledger.len(), 1);
    assert!(ledger.is_free(uuid(10), win(0, 10), &[]));
    assert!(ledger.holds_on(uuid(10), win(0, 10)).is_empty());
    assert_eq!(ledger.remove(res(1)), vec![h]);
    ledger.check_invariants().expect("invariants hold");
    assert!(ledger.is_empty());
}

#[test]
fn the_representation_is_compact() {
    assert_eq!(std::mem::size_of::<Level>(), 24);
    assert!(std::mem::size_of::<Hold>() <= 80);
    assert_eq!(std::mem::size_of::<(Instant, Level)>(), 32);
}

// ---- The reference model: a plain list of holds, levels computed instant by instant. ----

#[derive(Debug, Clone, Default, PartialEq)]
struct NaiveLevel {
    holds: u32,
    exclusive: u32,
    amounts: BTreeMap<ResourceClass, u64>,
}

#[derive(Debug, Default)]
struct Naive {
    holds: Vec<Hold>,
}

impl Naive {
    fn level(&self, host: ProviderId, t: i64, excluding: &[ReservationId]) -> NaiveLevel {
        let mut level = NaiveLevel::default();
        let covering = self.holds.iter().filter(|h| {
            h.host == host && !excluding.contains(&h.reservation) && h.window.contains(at(t))
        });
        for h in covering {
            level.holds += 1;
            level.exclusive += u32::from(h.exclusive);
            for (c, a) in h.amounts.iter().filter(|(_, a)| *a > 0) {
                *level.amounts.entry(c.clone()).or_default() += a;
            }
        }
        level
    }

    fn peak(&self, host: ProviderId, window: Window, excluding: &[ReservationId]) -> Peak {
        let mut top = NaiveLevel::default();
        for t in window.start.as_micros()..window.end.as_micros() {
            let level = self.level(host, t, excluding);
            top.holds = top.holds.max(level.holds);
            top.exclusive = top.exclusive.max(level.exclusive);
            for (c, a) in level.amounts {
                let most = top.amounts.entry(c).or_default();
                *most = (*most).max(a);
            }
        }
        Peak {
            exclusive: top.exclusive,
            holds: top.holds,
            amounts: top.amounts.into_iter().collect(),
        }
    }

    fn is_free(&self, host: ProviderId, window: Window, excluding: &[ReservationId]) -> bool {
        (window.start.as_micros()..window.end.as_micros())
            .all(|t| self.level(host, t, excluding).holds == 0)
    }

    fn release_times(&self, host: ProviderId, from: i64, until: i64) -> Vec<Instant> {
        (from..until)
            .filter(|&t| {
                let (before, now) = (self.level(host, t - 1, &[]), self.level(host, t, &[]));
                now.holds < before.holds
                    || now.exclusive < before.exclusive
                    || before
                        .amounts
                        .iter()
                        .any(|(c, a)| now.amounts.get(c).copied().unwrap_or(0) < *a)
            })
            .map(at)
            .collect()
    }

    fn holds_on(&self, host: ProviderId, window: Window) -> Vec<Hold> {
        let mut on: Vec<Hold> = self
            .holds
            .iter()
            .filter(|h| h.host == host && h.window.overlaps(&window))
            .cloned()
            .collect();
        on.sort_by_key(|h| (h.window.start, h.reservation));
        on
    }

    fn remove(&mut self, reservation: ReservationId) -> Vec<Hold> {
        let (gone, kept) = std::mem::take(&mut self.holds)
            .into_iter()
            .partition(|h| h.reservation == reservation);
        self.holds = kept;
        gone
    }

    fn forget_before(&mut self, t: Instant) -> usize {
        let before = self.holds.len();
        self.holds.retain(|h| h.window.end > t);
        before - self.holds.len()
    }

    fn hosts(&self) -> Vec<ProviderId> {
        let hosts: BTreeSet<ProviderId> = self.holds.iter().map(|h| h.host).collect();
        hosts.into_iter().collect()
    }
}

// ---- Properties. ----

const RESERVATIONS: u128 = 6;
const HOSTS: u128 = 3;

#[derive(Debug, Clone)]
enum Op {
    Add(Hold),
    Remove(u128),
    Forget(i64),
}

#[derive(Debug, Clone)]
struct Query {
    host: ProviderId,
    window: Window,
    excluding: Vec<ReservationId>,
}

fn hold_strategy() -> impl Strategy<Value = Hold> {
    let amounts = vec((0usize..3, 0u64..5), 0..3);
    (
        0..RESERVATIONS,
        0..HOSTS,
        0i64..24,
        1i64..8,
        any::<bool>(),
        amounts,
    )
        .prop_map(|(r, host, start, len, exclusive, amounts)| Hold {
            reservation: res(r),
            host: uuid(100 + host),
            window: win(start, start + len),
            exclusive,
            amounts: amounts.into_iter().map(|(c, a)| (class(c), a)).collect(),
        })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => hold_strategy().prop_map(Op::Add),
        1 => (0..RESERVATIONS + 1).prop_map(Op::Remove),
        1 => (0i64..32).prop_map(Op::Forget),
    ]
}

fn query_strategy() -> impl Strategy<Value = Query> {
    let excluding = vec(0..RESERVATIONS + 1, 0..3);
    (0..HOSTS + 1, -2i64..32, 1i64..14, excluding).prop_map(|(host, start, len, excluding)| Query {
        host: uuid(100 + host),
        window: win(start, start + len),
        excluding: excluding.into_iter().map(res).collect(),
    })
}

fn check_query(ledger: &Ledger, naive: &Naive, q: &Query) -> Result<(), TestCaseError> {
    let (host, window) = (q.host, q.window);
    prop_assert_eq!(
        ledger.peak(host, window, &[]),
        naive.peak(host, window, &[])
    );
    prop_assert_eq!(
        ledger.peak(host, window, &q.excluding),
        naive.peak(host, window, &q.excluding)
    );
    prop_assert_eq!(
        ledger.is_free(host, window, &[]),
        naive.is_free(host, window, &[])
    );
    prop_assert_eq!(
        ledger.is_free(host, window, &q.excluding),
        naive.is_free(host, window, &q.excluding)
    );
    let (from, until) = (window.start, window.end);
    prop_assert_eq!(
        ledger.release_times(host, from, until),
        naive.release_times(host, from.as_micros(), until.as_micros())
    );
    prop_assert_eq!(ledger.holds_on(host, window), naive.holds_on(host, window));
    Ok(())
}

fn check_state(ledger: &Ledger, naive: &Naive) -> Result<(), TestCaseError> {
    if let Err(broken) = ledger.check_invariants() {
        return Err(TestCaseError::fail(broken));
    }
    prop_assert_eq!(ledger.len(), naive.holds.len());
    prop_assert_eq!(ledger.is_empty(), naive.holds.is_empty());
    prop_assert_eq!(ledger.hosts().collect::<Vec<_>>(), naive.hosts());
    for r in 0..=RESERVATIONS {
        let stored: Vec<Hold> = ledger.holds_of(res(r)).collect();
        let expected: Vec<Hold> = naive
            .holds
            .iter()
            .filter(|h| h.reservation == res(r))
            .cloned()
            .collect();
        prop_assert_eq!(stored, expected);
    }
    Ok(())
}

fn apply(ledger: &mut Ledger, naive: &mut Naive, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Add(h) => {
            ledger.add(h.clone());
            naive.holds.push(h.clone());
        }
        Op::Remove(r) => prop_assert_eq!(ledger.remove(res(*r)), naive.remove(res(*r))),
        Op::Forget(t) => prop_assert_eq!(ledger.forget_before(at(*t)), naive.forget_before(at(*t))),
    }
    check_state(ledger, naive)
}

/// Every query over a grid of windows, with a few exclusion sets.
fn sweep(ledger: &Ledger, naive: &Naive) -> Result<(), TestCaseError> {
    for host in 0..=HOSTS {
        for start in (-1i64..31).step_by(3) {
            for len in [1, 2, 5, 13] {
                for excluding in [vec![], vec![res(0)], vec![res(1), res(2)]] {
                    let q = Query {
                        host: uuid(100 + host),
                        window: win(start, start + len),
                        excluding,
                    };
                    check_query(ledger, naive, &q)?;
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_query_matches_the_reference_model(
        steps in vec((op_strategy(), vec(query_strategy(), 0..4)), 1..40)
    ) {
        let mut ledger = Ledger::new();
        let mut naive = Naive::default();
        for (op, queries) in &steps {
            apply(&mut ledger, &mut naive, op)?;
            for q in queries {
                check_query(&ledger, &naive, q)?;
            }
        }
        sweep(&ledger, &naive)?;
    }

    /// Any holds (some with empty windows, zero amounts or a class twice), on few hosts and
    /// reservations, in any order and batches: the bulk-built ledger is the one built hold by
    /// hold.
    #[test]
    fn building_in_bulk_equals_adding_one_by_one(
        holds in vec((hold_strategy(), 0u8..8), 0..40),
        batch in 1usize..4,
    ) {
        let holds: Vec<Hold> = holds
            .into_iter()
            .map(|(mut h, empty)| {
                if empty == 0 {
                    h.window.end = h.window.start;
                }
                h
            })
            .collect();
        let bulk = Ledger::from_holds(holds.chunks(batch).map(<[Hold]>::to_vec));
        if let Err(broken) = bulk.check_invariants() {
            return Err(TestCaseError::fail(broken));
        }
        let mut one_by_one = Ledger::new();
        for h in &holds {
            one_by_one.add(h.clone());
        }
        prop_assert_eq!(bulk, one_by_one);
    }

    #[test]
    fn removing_everything_leaves_an_empty_ledger(holds in vec(hold_strategy(), 0..30)) {
        let mut ledger = Ledger::new();
        for h in &holds {
            ledger.add(h.clone());
        }
        for r in 0..RESERVATIONS {
            ledger.remove(res(r));
        }
        prop_assert!(ledger.is_empty());
        prop_assert_eq!(ledger.hosts().count(), 0);
        if let Err(broken) = ledger.check_invariants() {
            return Err(TestCaseError::fail(broken));
        }
    }
}
