//! A recorded history: every operation a client invoked, with what it was told (ok, a definite
//! refusal, or unknown) and its invoke and complete times on one monotonic clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What an operation touches: the unit the checker splits the history by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A Placement resource provider (its VCPU capacity and the consumers allocating from it).
    Provider(u8),
    /// A Blazar host (the leases that hold it whole).
    Host(u8),
}

/// What an operation asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `PUT /allocations/{consumer}`: `units` VCPU on the key's provider, with the consumer
    /// generation the client saw (`None`: the consumer must be new); `units == 0` removes the
    /// consumer (an empty allocation set).
    Put {
        consumer: u8,
        generation: Option<u64>,
        units: u32,
    },
    /// `DELETE /allocations/{consumer}`.
    Delete { consumer: u8 },
    /// `GET /allocations/{consumer}`.
    ReadConsumer { consumer: u8 },
    /// `GET /resource_providers/{uuid}/allocations`.
    ReadProvider,
    /// `GET /resource_providers/{uuid}/usages`.
    ReadUsage,
    /// `POST /leases`: lease `name` holding the key's host whole over the slots of `slots` (a
    /// bit per hour).
    CreateLease { name: u32, slots: u8 },
    /// `DELETE /leases/{id}` of lease `name`.
    DeleteLease { name: u32 },
    /// `GET /leases`, restricted to the key's host.
    ReadLeases,
}

impl Action {
    /// Whether it only reads.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            Action::ReadConsumer { .. }
                | Action::ReadProvider
                | Action::ReadUsage
                | Action::ReadLeases
        )
    }
}

/// What a read saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A consumer's VCPU and generation, or `None` when it has no allocations.
    Consumer(Option<(u32, u64)>),
    /// Every consumer allocating from a provider, with its VCPU.
    Provider(BTreeMap<u8, u32>),
    /// A provider's VCPU usage.
    Usage(u32),
    /// The leases holding a host.
    Leases(BTreeSet<u32>),
}

/// What the client was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The write was acknowledged.
    Ok,
    /// A definite refusal (409): the write had no effect, for a reason the model must share.
    Refused,
    /// 404: the consumer or lease to delete was not there.
    NotFound,
    /// A read's answer.
    Read(Observation),
    /// No answer that tells (a timeout, a lost connection, a 5xx): the write may have taken
    /// effect at any moment after its invocation, or never.
    Unknown,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The client that invoked it.
    pub client: usize,
    /// What it touches.
    pub key: Key,
    /// What it asked.
    pub action: Action,
    /// When it was invoked (since the run began).
    pub invoked: Duration,
    /// When its answer came (`None` for [`Outcome::Unknown`]: it may take effect at any later time).
    pub completed: Option<Duration>,
    /// What the client was told.
    pub outcome: Outcome,
}

/// The history being recorded by every client at once.
#[derive(Debug, Clone)]
pub struct Recorder {
    start: Instant,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A history starting now.
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The time since the run began.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Records an operation invoked at `invoked` whose answer just came (or did not: unknown).
    pub fn record(
        &self,
        client: usize,
        key: Key,
        action: Action,
        invoked: Duration,
        outcome: Outcome,
    ) {
        let completed = match outcome {
            Outcome::Unknown => None,
            _ => Some(self.now()),
        };
        let op = Op {
            client,
            key,
            action,
            invoked,
            completed,
            outcome,
        };
        self.ops.lock().expect("the history lock").push(op);
    }

    /// Everything recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().expect("the history lock").clone()
    }
}

/// Counts of a history's outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Acknowledged writes.
    pub ok: usize,
    /// Definite refusals (409, 404).
    pub refused: usize,
    /// Writes with no answer that tells.
    pub unknown: usize,
    /// Reads answered.
    pub reads: usize,
    /// Reads with no answer (they tell nothing and are left out of the check).
    pub unanswered_reads: usize,
}

/// Counts the outcomes of `ops`.
pub fn counts(ops: &[Op]) -> Counts {
    let mut counts = Counts::default();
    for op in ops {
        match op.outcome {
            Outcome::Ok => counts.ok += 1,
            Outcome::Refused | Outcome::NotFound => counts.refused += 1,
            Outcome::Read(_) => counts.reads += 1,
            Outcome::Unknown if op.action.is_read() => counts.unanswered_reads += 1,
            Outcome::Unknown => counts.unknown += 1,
        }
    }
    counts
}
