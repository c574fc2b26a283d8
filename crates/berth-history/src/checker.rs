//! The linearizability checker: a Wing–Gong search with memoization (as Knossos and Porcupine
//! do it) over each key's operations apart (P-compositionality: a history is linearizable when
//! each key's is), against [`crate::model`]. An unknown write has no completion: the search may
//! linearize it at any point after its invocation, or never. The search is bounded by
//! [`SEARCH_STEPS_MAX`] per key; a key whose search reaches it is reported as unchecked, never
//! as passed.

use crate::history::{Key, Op, Outcome};
use crate::model::{State, step};
use std::collections::{BTreeMap, HashSet};

/// The most search steps (an operation tried or undone) spent on one key's history.
/// Each step may remember one (linearized set, state) pair, so this also bounds the search's
/// memory: about 2 GB for a key of 5,000 operations.
pub const SEARCH_STEPS_MAX: u64 = 2_000_000;

/// The verdict on one key's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// None exists: an anomaly. `around` is the operation the search could not get past (the
    /// first completion no ordering of what came before explains).
    Anomaly { around: Box<Op> },
    /// The search reached [`SEARCH_STEPS_MAX`] first.
    TooLarge,
}

/// The verdicts of a whole history, key by key.
#[derive(Debug, Clone)]
pub struct Report {
    /// Each key's verdict, the number of its operations and the search steps it took.
    pub keys: BTreeMap<Key, (Verdict, usize, u64)>,
}

impl Report {
    /// The keys with an anomaly.
    pub fn anomalies(&self) -> Vec<(Key, &Op)> {
        self.keys
            .iter()
            .filter_map(|(key, (verdict, _, _))| match verdict {
                Verdict::Anomaly { around } => Some((*key, around.as_ref())),
                _ => None,
            })
            .collect()
    }

    /// The keys whose search was too large.
    pub fn unchecked(&self) -> Vec<Key> {
        self.keys
            .iter()
            .filter(|(_, (verdict, _, _))| *verdict == Verdict::TooLarge)
            .map(|(key, _)| *key)
            .collect()
    }
}

/// Checks every key of `ops` apart; a provider's VCPU capacity is `capacity`.
pub fn check(ops: &[Op], capacity: u32) -> Report {
    let mut by_key: BTreeMap<Key, Vec<Op>> = BTreeMap::new();
    for op in ops {
        // A read that got no answer tells nothing and changes nothing.
        if !(op.outcome == Outcome::Unknown && op.action.is_read()) {
            by_key.entry(op.key).or_default().push(op.clone());
        }
    }
    let keys = by_key
        .into_iter()
        .map(|(key, ops)| {
            let initial = match key {
                Key::Provider(_) => State::Provider(BTreeMap::new()),
                Key::Host(_) => State::Host(BTreeMap::new()),
            };
            let (verdict, steps) = search(&ops, capacity, initial, SEARCH_STEPS_MAX);
            (key, (verdict, ops.len(), steps))
        })
        .collect();
    Report { keys }
}

/// One entry of the search's list: an operation's call or its return.
#[derive(Debug, Clone, Copy)]
struct Entry {
    op: usize,
    is_call: bool,
    prev: Option<usize>,
    next: Option<usize>,
}

/// The doubly linked list of calls and returns, in time order (a return before a call at the
/// same instant: such operations did not overlap).
struct Entries {
    entries: Vec<Entry>,
    head: Option<usize>,
    /// For each operation, the index of its call and of its return (none for unknown ones).
    of_op: Vec<(usize, Option<usize>)>,
    /// Returns still in the list.
    returns_left: usize,
}

impl Entries {
    fn new(ops: &[Op]) -> Entries {
        let mut events: Vec<(std::time::Duration, bool, usize)> = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            events.push((op.invoked, true, index));
            if let Some(completed) = op.completed {
                events.push((completed, false, index));
            }
        }
        // Returns sort before calls at the same instant (false < true).
        events.sort();
        let count = events.len();
        let mut of_op = vec![(0, None); ops.len()];
        let mut entries = Vec::with_capacity(count);
        for (position, &(_, is_call, op)) in events.iter().enumerate() {
            match is_call {
                true => of_op[op].0 = position,
                false => of_op[op].1 = Some(position),
            }
            entries.push(Entry {
                op,
                is_call,
                prev: position.checked_sub(1),
                next: (position + 1 < count).then_some(position + 1),
            });
        }
        let returns_left = ops.iter().filter(|op| op.completed.is_some()).count();
        Entries {
            entries,
            head: (count > 0).then_some(0),
            of_op,
            returns_left,
        }
    }

    fn unlink(&mut self, at: usize) {
        let Entry { prev, next, .. } = self.entries[at];
        match prev {
            Some(prev) => self.entries[prev].next = next,
            None => self.head = next,
        }
        if let Some(next) = next {
            self.entries[next].prev = prev;
        }
    }

    fn relink(&mut self, at: usize) {
        let Entry { prev, next, .. } = self.entries[at];
        match prev {
            Some(prev) => self.entries[prev].next = Some(at),
            None => self.head = Some(at),
        }
        if let Some(next) = next {
            self.entries[next].prev = Some(at);
        }
    }

    /// Takes operation `op` out of the list (its return first, then its call).
    fn lift(&mut self, op: usize) {
        let (call, ret) = self.of_op[op];
        if let Some(ret) = ret {
            self.unlink(ret);
            self.returns_left -= 1;
        }
        self.unlink(call);
    }

    /// Puts operation `op` back (in the reverse order of [`Entries::lift`]).
    fn unlift(&mut self, op: usize) {
        let (call, ret) = self.of_op[op];
        self.relink(call);
        if let Some(ret) = ret {
            self.relink(ret);
            self.returns_left += 1;
        }
    }
}

/// The set of linearized operations, a bit each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn flip(&mut self, at: usize) {
        self.0[at / 64] ^= 1 << (at % 64);
    }
}

/// The Wing–Gong search over one key's operations, at most `steps_max` steps.
pub fn check_key(ops: &[Op], capacity: u32, initial: State, steps_max: u64) -> Verdict {
    search(ops, capacity, initial, steps_max).0
}

/// The Wing–Gong search, and the steps it took.
fn search(ops: &[Op], capacity: u32, initial: State, steps_max: u64) -> (Verdict, u64) {
    let mut list = Entries::new(ops);
    let mut state = initial;
    let mut linearized = Bits(vec![0; ops.len().div_ceil(64)]);
    let mut seen: HashSet<(Bits, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut cursor = list.head;
    let mut steps = 0_u64;
    // The furthest completion the search got past, to name the anomaly.
    let mut deepest = (0, None);
    while list.returns_left > 0 {
        steps += 1;
        if steps > steps_max {
            return (Verdict::TooLarge, steps);
        }
        let Some(at) = cursor else {
            // Unreachable while a return is left: the scan meets it first.
            return (Verdict::TooLarge, steps);
        };
        let entry = list.entries[at];
        if entry.is_call {
            let op = &ops[entry.op];
            if let Some(next) = step(capacity, &state, op) {
                let mut with = linearized.clone();
                with.flip(entry.op);
                if seen.insert((with.clone(), next.clone())) {
                    stack.push((entry.op, std::mem::replace(&mut state, next)));
                    linearized = with;
                    list.lift(entry.op);
                    cursor = list.head;
                    continue;
                }
            }
            cursor = entry.next;
        } else {
            if stack.len() >= deepest.0 {
                deepest = (stack.len(), Some(entry.op));
            }
            let Some((op, previous)) = stack.pop() else {
                let around = deepest.1.unwrap_or(entry.op);
                let around = Box::new(ops[around].clone());
                return (Verdict::Anomaly { around }, steps);
            };
            state = previous;
            linearized.flip(op);
            list.unlift(op);
            cursor = list.entries[list.of_op[op].0].next;
        }
    }
    (Verdict::Linearizable, steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Action, Observation};
    use std::collections::BTreeSet;
    use std::time::Duration;

    const P: Key = Key::Provider(0);
    const H: Key = Key::Host(0);

    /// An operation on `key` from `from` to `to` milliseconds (`None`: unknown).
    fn op(key: Key, action: Action, from: u64, to: Option<u64>, outcome: Outcome) -> Op {
        Op {
            client: 0,
            key,
            action,
            invoked: Duration::from_millis(from),
            completed: to.map(Duration::from_millis),
            outcome,
        }
    }

    fn put(consumer: u8, generation: Option<u64>, units: u32) -> Action {
        Action::Put {
            consumer,
            generation,
            units,
        }
    }

    fn sees(consumers: &[(u8, u32)]) -> Outcome {
        Outcome::Read(Observation::Provider(consumers.iter().copied().collect()))
    }

    fn verdict(ops: &[Op]) -> Verdict {
        let report = check(ops, 4);
        assert_eq!(report.keys.len(), 1, "one key");
        report.keys.into_values().next().expect("a key").0
    }

    #[test]
    fn sequential_writes_within_capacity_are_linearizable() {
        let ops = [
            op(P, put(1, None, 2), 0, Some(10), Outcome::Ok),
            op(P, put(2, None, 2), 20, Some(30), Outcome::Ok),
            op(P, put(3, None, 1), 40, Some(50), Outcome::Refused),
            op(
                P,
                Action::ReadUsage,
                60,
                Some(70),
                Outcome::Read(Observation::Usage(4)),
            ),
            op(P, Action::Delete { consumer: 1 }, 80, Some(90), Outcome::Ok),
            op(
                P,
                Action::Delete { consumer: 1 },
                100,
                Some(110),
                Outcome::NotFound,
            ),
            op(P, Action::ReadProvider, 120, Some(130), sees(&[(2, 2)])),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
    }

    #[test]
    fn two_acknowledged_writes_beyond_capacity_are_an_anomaly() {
        let ops = [
            op(P, put(1, None, 3), 0, Some(50), Outcome::Ok),
            op(P, put(2, None, 3), 10, Some(40), Outcome::Ok),
        ];
        assert!(matches!(verdict(&ops), Verdict::Anomaly { .. }));
    }

    #[test]
    fn concurrent_writes_that_race_for_the_last_units_linearize_either_way() {
        let ops = [
            op(P, put(1, None, 3), 0, Some(50), Outcome::Refused),
            op(P, put(2, None, 3), 10, Some(40), Outcome::Ok),
            op(P, Action::ReadProvider, 5, Some(60), sees(&[(2, 3)])),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
        // A refusal nothing explains is an anomaly too.
        let ops = [
            op(P, put(1, None, 3), 0, Some(50), Outcome::Refused),
            op(P, Action::ReadProvider, 60, Some(70), sees(&[])),
        ];
        assert!(matches!(verdict(&ops), Verdict::Anomaly { .. }));
    }

    #[test]
    fn a_stale_consumer_generation_accepted_is_an_anomaly() {
        let ops = [
            op(P, put(1, None, 1), 0, Some(10), Outcome::Ok),
            op(P, put(1, Some(1), 2), 20, Some(40), Outcome::Ok),
            op(P, put(1, Some(1), 3), 25, Some(45), Outcome::Ok),
        ];
        assert!(matches!(verdict(&ops), Verdict::Anomaly { .. }));
        let ops = [
            op(P, put(1, None, 1), 0, Some(10), Outcome::Ok),
            op(P, put(1, Some(1), 2), 20, Some(40), Outcome::Ok),
            op(P, put(1, Some(1), 3), 25, Some(45), Outcome::Refused),
            op(
                P,
                Action::ReadConsumer { consumer: 1 },
                50,
                Some(60),
                Outcome::Read(Observation::Consumer(Some((2, 2)))),
            ),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
    }

    #[test]
    fn a_read_that_misses_an_acknowledged_write_is_an_anomaly() {
        let ops = [
            op(P, put(1, None, 2), 0, Some(10), Outcome::Ok),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[])),
        ];
        assert!(matches!(verdict(&ops), Verdict::Anomaly { .. }));
        // Overlapping the write, the read may miss it.
        let ops = [
            op(P, put(1, None, 2), 0, Some(25), Outcome::Ok),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[])),
            op(P, Action::ReadProvider, 40, Some(50), sees(&[(1, 2)])),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
    }

    #[test]
    fn an_unknown_write_may_take_effect_late_or_never_but_nothing_else_appears() {
        let ops = [
            op(P, put(1, None, 2), 0, None, Outcome::Unknown),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[])),
            op(P, Action::ReadProvider, 40, Some(50), sees(&[(1, 2)])),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
        let never = [
            op(P, put(1, None, 2), 0, None, Outcome::Unknown),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[])),
        ];
        assert_eq!(verdict(&never), Verdict::Linearizable);
        // It takes effect once: seen, then gone with nobody removing it, is an anomaly.
        let flicker = [
            op(P, put(1, None, 2), 0, None, Outcome::Unknown),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[(1, 2)])),
            op(P, Action::ReadProvider, 40, Some(50), sees(&[])),
        ];
        assert!(matches!(verdict(&flicker), Verdict::Anomaly { .. }));
        let invented = [
            op(P, put(1, None, 2), 0, None, Outcome::Unknown),
            op(P, Action::ReadProvider, 20, Some(30), sees(&[(1, 3)])),
        ];
        assert!(matches!(verdict(&invented), Verdict::Anomaly { .. }));
    }

    #[test]
    fn overlapping_leases_on_one_host_are_an_anomaly() {
        let create = |name, slots| Action::CreateLease { name, slots };
        let leases = |names: &[u32]| {
            Outcome::Read(Observation::Leases(
                names.iter().copied().collect::<BTreeSet<_>>(),
            ))
        };
        let ops = [
            op(H, create(1, 0b0011), 0, Some(50), Outcome::Ok),
            op(H, create(2, 0b0110), 10, Some(40), Outcome::Ok),
        ];
        assert!(matches!(verdict(&ops), Verdict::Anomaly { .. }));
        let ops = [
            op(H, create(1, 0b0011), 0, Some(50), Outcome::Ok),
            op(H, create(2, 0b0110), 10, Some(40), Outcome::Refused),
            op(H, create(3, 0b1100), 60, Some(70), Outcome::Ok),
            op(
                H,
                Action::DeleteLease { name: 1 },
                80,
                Some(90),
                Outcome::Ok,
            ),
            op(H, Action::ReadLeases, 100, Some(110), leases(&[3])),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
    }

    #[test]
    fn a_search_beyond_its_bound_is_reported_not_passed() {
        let ops: Vec<Op> = (0..12)
            .map(|c| op(P, put(c, None, 1), 0, Some(100), Outcome::Ok))
            .chain([op(
                P,
                Action::ReadUsage,
                200,
                Some(210),
                Outcome::Read(Observation::Usage(1)),
            )])
            .collect();
        let initial = State::Provider(BTreeMap::new());
        assert_eq!(check_key(&ops, 100, initial.clone(), 50), Verdict::TooLarge);
        assert!(matches!(
            check_key(&ops, 100, initial, SEARCH_STEPS_MAX),
            Verdict::Anomaly { .. }
        ));
    }
}
