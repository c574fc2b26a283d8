//! The model of the ledger the checker replays operations against, one key at a time: a
//! provider's consumers (`consumer -> (VCPU, generation)`, their sum within the capacity), or a
//! host's leases (`lease -> hours held`, no hour held twice).

use crate::history::{Action, Observation, Op, Outcome};
use std::collections::BTreeMap;

/// One key's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum State {
    /// A provider's consumers: VCPU and consumer generation.
    Provider(BTreeMap<u8, (u32, u64)>),
    /// A host's leases: the hours each holds, a bit per hour.
    Host(BTreeMap<u32, u8>),
}

/// What a write would do from a state: its new state when admitted, or `None` when refused.
fn admit(capacity: u32, state: &State, action: &Action) -> Option<Option<State>> {
    match (state, action) {
        (
            State::Provider(consumers),
            Action::Put {
                consumer,
                generation,
                units,
            },
        ) => {
            let current = consumers.get(consumer);
            let generation_holds = match (current, generation) {
                (None, None) => *units > 0,
                (Some(&(_, held)), Some(expected)) => held == *expected,
                _ => false,
            };
            let others: u32 = consumers
                .iter()
                .filter(|(c, _)| *c != consumer)
                .map(|(_, (u, _))| *u)
                .sum();
            if !generation_holds || others + units > capacity {
                return Some(None);
            }
            let mut next = consumers.clone();
            match units {
                0 => next.remove(consumer),
                _ => next.insert(*consumer, (*units, current.map_or(1, |(_, g)| g + 1))),
            };
            Some(Some(State::Provider(next)))
        }
        (State::Provider(consumers), Action::Delete { consumer }) => {
            let mut next = consumers.clone();
            Some(next.remove(consumer).map(|_| State::Provider(next)))
        }
        (State::Host(leases), Action::CreateLease { name, slots }) => {
            if leases.contains_key(name) || leases.values().any(|held| held & slots != 0) {
                return Some(None);
            }
            let mut next = leases.clone();
            next.insert(*name, *slots);
            Some(Some(State::Host(next)))
        }
        (State::Host(leases), Action::DeleteLease { name }) => {
            let mut next = leases.clone();
            Some(next.remove(name).map(|_| State::Host(next)))
        }
        _ => None,
    }
}

/// What a read sees in a state, or `None` when `action` is not a read of this kind of key.
fn observe(state: &State, action: &Action) -> Option<Observation> {
    match (state, action) {
        (State::Provider(consumers), Action::ReadConsumer { consumer }) => {
            Some(Observation::Consumer(consumers.get(consumer).copied()))
        }
        (State::Provider(consumers), Action::ReadProvider) => Some(Observation::Provider(
            consumers.iter().map(|(c, (u, _))| (*c, *u)).collect(),
        )),
        (State::Provider(consumers), Action::ReadUsage) => {
            Some(Observation::Usage(consumers.values().map(|(u, _)| u).sum()))
        }
        (State::Host(leases), Action::ReadLeases) => {
            Some(Observation::Leases(leases.keys().copied().collect()))
        }
        _ => None,
    }
}

/// The state after `op` took effect at one instant from `state`, or `None` when what its client
/// was told cannot follow from `state` (an unknown write may take effect or not; the caller
/// chooses to linearize it).
pub fn step(capacity: u32, state: &State, op: &Op) -> Option<State> {
    if let Some(seen) = observe(state, &op.action) {
        return match &op.outcome {
            Outcome::Read(observed) if *observed == seen => Some(state.clone()),
            _ => None,
        };
    }
    let admitted = admit(capacity, state, &op.action)?;
    match (&op.outcome, admitted) {
        (Outcome::Ok | Outcome::Unknown, Some(next)) => Some(next),
        (Outcome::Refused | Outcome::NotFound | Outcome::Unknown, None) => Some(state.clone()),
        _ => None,
    }
}
