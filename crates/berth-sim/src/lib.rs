//! A deterministic simulator of berth's write path.
//!
//! The real core and the real [`Berth`] write path (its queue, group commit and catalogs) run
//! over a simulated store ([`store::SimStore`]: the in-memory reference store as the disk) on a
//! single-threaded runtime, with a simulated clock and counted ids. One `u64` seed derives
//! everything: the hosts, the providers, and a stream of writes of every kind the write path
//! takes here (allocations created, changed with current and stale generations, and deleted;
//! inventories changed with current and stale generations; leases of whole hosts and of instance
//! slots created, retried with their idempotency key and deleted; the clock moved, and the
//! lifecycle events that fall due fired), some issued together so that they share a batch. The
//! process is made to die at chosen commits, before the write, between the write and the sync, or
//! between the sync and the answer; the simulator then reopens berth over what the disk kept.
//!
//! After every step it checks: (1) no capacity is promised twice, recomputed from the leases
//! and consumers ([`check::capacity`]); (2) every acknowledged write is in the catalog and
//! (3) nothing is there that was never asked for ([`check::Belief`]: what each client was told);
//! (4) the catalog in memory equals the disk's; (5) no lifecycle event fired twice, and at the
//! end none due is left; (6) a new lease sent alone is admitted exactly when a reference model
//! of admission ([`check::fits`], holds recomputed from the leases) says it fits. A run is replayed bit for bit from its seed (`berth-sim --seed N`).

mod check;
pub mod store;

use berth_app::{
    AppError, Berth, Clock, CreateLease, CreateReservation, EnrollHost, IdGen, PriorityGrant,
};
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite};
use berth_core::model::consumer::Allocations;
use berth_core::model::idempotency::{IdempotencyKey, Idempotent};
use berth_core::model::inventory::Inventory;
use berth_core::model::lease::{Affinity, ReservationSpec};
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
use berth_core::model::provider::ProviderStatus;
use berth_core::{Catalog, Instant, LeaseId, ProviderId, ResourceClass, Span};
use check::Belief;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use store::{Boundary, Durability, SimStore, StoreDefect};
use uuid::Uuid;

/// What a run does.
#[derive(Debug, Clone)]
pub struct Config {
    /// The seed everything derives from.
    pub seed: u64,
    /// Steps (each one write, a few writes together, or a clock move).
    pub steps: usize,
    /// How the disk keeps commits.
    pub durability: Durability,
    /// A defect planted for a negative control: the checkers must find it.
    pub defect: Option<Defect>,
    /// Print every write and what it was told, to standard error.
    pub trace: bool,
}

/// A defect planted on purpose (a negative control).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// Recovery drops the last commit (in the simulated store).
    LoseLastCommit,
    /// Allocations are not checked against capacity (in the core; feature `planted`).
    SkipCapacityCheck,
    /// Consumer generations are not checked (in the core; feature `planted`).
    SkipGenerationCheck,
    /// A batch answers before it commits (in the write path; feature `planted`).
    AnswerBeforeCommit,
    /// A restarted process forgets which lease events fired (in the core; feature `planted`).
    RefireAfterRecovery,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Writes issued.
    pub writes: usize,
    /// Writes acknowledged.
    pub acked: usize,
    /// Writes refused (an answer).
    pub refused: usize,
    /// Writes that got no answer (the process died).
    pub unanswered: usize,
    /// Times the process died and was reopened.
    pub crashes: usize,
    /// Lifecycle events fired.
    pub events: usize,
    /// Lease decisions checked against the reference model of admission.
    pub admissions: usize,
}

/// A failed check: the seed to replay, the step, and what broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The step after which the check failed.
    pub step: usize,
    /// What broke.
    pub what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed after step {}: {}",
            self.seed, self.step, self.what
        )
    }
}

/// Runs one simulation.
pub fn run(config: &Config) -> Result<Report, Failure> {
    plant(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("invariant: a current-thread runtime builds");
    runtime.block_on(Sim::new(config).run())
}

/// Plants the defect a run asks for in berth itself (or none).
#[cfg(feature = "planted")]
fn plant(config: &Config) -> Result<(), Failure> {
    use berth_core::planted::{Defect as Planted, plant};
    plant(match config.defect {
        Some(Defect::SkipCapacityCheck) => Some(Planted::SkipCapacityCheck),
        Some(Defect::SkipGenerationCheck) => Some(Planted::SkipGenerationCheck),
        Some(Defect::AnswerBeforeCommit) => Some(Planted::AnswerBeforeCommit),
        Some(Defect::RefireAfterRecovery) => Some(Planted::RefireAfterRecovery),
        Some(Defect::LoseLastCommit) | None => None,
    });
    Ok(())
}

/// Without the feature `planted`, only the store's defect can be planted.
#[cfg(not(feature = "planted"))]
fn plant(config: &Config) -> Result<(), Failure> {
    match config.defect {
        Some(Defect::LoseLastCommit) | None => Ok(()),
        Some(other) => Err(Failure {
            seed: config.seed,
            step: 0,
            what: format!(
                "{other:?} is planted in berth itself: build berth-sim with --features planted"
            ),
        }),
    }
}

/// The first instant of every run: 2030-01-01.
const T0: i64 = 1_893_456_000_000_000;
const MINUTE: i64 = 60_000_000;
/// Consumers the allocations are written for.
const CONSUMERS: u64 = 24;
const PROJECT: &str = "sim";

/// The simulated clock: moved only by the simulator.
#[derive(Debug, Clone)]
struct SimClock(Arc<AtomicI64>);
impl Clock for SimClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.0.load(Ordering::Relaxed))
    }
}

/// Ids counted from 1, shared across restarts so that none repeats.
#[derive(Debug, Clone)]
struct SimIds(Arc<AtomicU64>);
impl IdGen for SimIds {
    fn uuid(&self) -> Uuid {
        Uuid::from_u128(u128::from(self.0.fetch_add(1, Ordering::Relaxed)) + 1)
    }
}

/// A small deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(usize::try_from(self.below(items.len() as u64)).ok()?)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// A lease the simulator asked for, by its name.
#[derive(Debug, Clone)]
struct Asked {
    cmd: Asking,
    /// Its id, once an answer (or, after none, its idempotency record) named it.
    id: Option<LeaseId>,
    present: Belief<bool>,
}

/// How a lease is asked for: a Blazar lease (named by the simulator) or a Promise reservation
/// (named `promise-<kind>` by berth, so known by its id, or by its idempotency key's record).
#[derive(Debug, Clone)]
enum Asking {
    Lease(CreateLease),
    Promise(CreateReservation),
}

impl Asking {
    fn key(&self) -> Option<&IdempotencyKey> {
        match self {
            Asking::Lease(cmd) => cmd.idempotency.as_ref().map(|i| &i.key),
            Asking::Promise(cmd) => cmd.idempotency.as_ref().map(|i| &i.key),
        }
    }
}

/// One write and what became of it.
#[derive(Debug)]
enum Write {
    Allocate {
        consumer: Uuid,
        write: ConsumerWrite,
        /// Sent with the generation after the consumer's: must be refused.
        stale: bool,
    },
    Release {
        consumer: Uuid,
    },
    Inventory {
        provider: ProviderId,
        generation: u64,
        stale: bool,
        vcpus: u64,
    },
    CreateLease {
        name: String,
    },
    DeleteLease {
        name: String,
    },
    /// A host fails, is taken into maintenance, or comes back.
    HostStatus {
        host: ProviderId,
        status: ProviderStatus,
    },
}

struct Sim {
    config: Config,
    rng: Rng,
    store: SimStore,
    clock: SimClock,
    ids: SimIds,
    berth: Option<Arc<Berth>>,
    hosts: Vec<ProviderId>,
    consumers: BTreeMap<Uuid, Belief<Option<BTreeMap<ProviderId, u64>>>>,
    inventories: BTreeMap<ProviderId, Belief<u64>>,
    leases: BTreeMap<String, Asked>,
    /// How far each provider was promised beyond its capacity after the last step.
    excess: BTreeMap<ProviderId, u64>,
    /// Providers whose inventory a write of this step may have changed.
    resized: Vec<ProviderId>,
    /// The leases in the catalog after the last step.
    before: std::collections::BTreeSet<LeaseId>,
    /// The lifecycle record read so far: where, and each lease event seen in it.
    records_read: u64,
    fired: std::collections::BTreeSet<(LeaseId, String)>,
    report: Report,
    step: usize,
}

/// The idempotency key of the create named `name` on `route` (its name is its key).
fn keyed(name: &str, route: &str) -> Option<Idempotent> {
    Some(Idempotent {
        key: IdempotencyKey {
            project_id: PROJECT.into(),
            route: route.into(),
            key: name.into(),
        },
        fingerprint: name.into(),
    })
}

/// The uuid of consumer `n`.
fn consumer_id(n: u64) -> Uuid {
    Uuid::from_u128(1u128 << 64 | u128::from(n))
}

fn vcpu() -> ResourceClass {
    ResourceClass::parse("VCPU").expect("invariant: a standard class")
}

/// What became of a write.
#[derive(Debug)]
enum Outcome {
    /// Acknowledged, with the lease it made (lease creates).
    Acked(Option<LeaseId>),
    /// Refused: an answer, nothing changed.
    Refused,
    /// No answer: the process died.
    Unanswered,
}

fn outcome<T>(result: Result<T, AppError>, id: impl FnOnce(T) -> Option<LeaseId>) -> Outcome {
    match result {
        Ok(value) => Outcome::Acked(id(value)),
        Err(AppError::Rejected(_)) => Outcome::Refused,
        Err(_) => Outcome::Unanswered,
    }
}

impl Sim {
    fn new(config: &Config) -> Sim {
        Sim {
            config: config.clone(),
            rng: Rng::new(config.seed),
            store: SimStore::new(
                config.durability,
                (config.defect == Some(Defect::LoseLastCommit))
                    .then_some(StoreDefect::LoseLastCommitOnRecovery),
            ),
            clock: SimClock(Arc::new(AtomicI64::new(T0))),
            ids: SimIds(Arc::new(AtomicU64::new(0))),
            berth: None,
            hosts: Vec::new(),
            consumers: BTreeMap::new(),
            inventories: BTreeMap::new(),
            leases: BTreeMap::new(),
            excess: BTreeMap::new(),
            resized: Vec::new(),
            before: std::collections::BTreeSet::new(),
            records_read: 0,
            fired: std::collections::BTreeSet::new(),
            report: Report::default(),
            step: 0,
        }
    }

    fn fail(&self, what: impl Into<String>) -> Failure {
        Failure {
            seed: self.config.seed,
            step: self.step,
            what: what.into(),
        }
    }

    fn berth(&self) -> Arc<Berth> {
        Arc::clone(self.berth.as_ref().expect("invariant: berth is open"))
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Opens berth over what the disk holds, as a restarted process does.
    async fn open(&mut self) -> Result<(), Failure> {
        let berth = Berth::open(
            Arc::new(self.store.clone()),
            Arc::new(self.clock.clone()),
            Arc::new(self.ids.clone()),
        )
        .await
        .map_err(|e| self.fail(format!("berth does not open over the disk: {e}")))?;
        self.berth = Some(Arc::new(berth));
        Ok(())
    }

    /// Enrolls two to four hosts before anything can crash.
    async fn setup(&mut self) -> Result<(), Failure> {
        let count = 2 + self.rng.below(3);
        for n in 0..count {
            let vcpus = 8 + self.rng.below(25);
            let id = self
                .berth()
                .enroll_host(EnrollHost {
                    name: format!("host-{n}"),
                    vcpus: Some(vcpus),
                    memory_mb: Some(65_536),
                    local_gb: Some(1_000),
                    availability_zone: Some("az1".into()),
                    hypervisor_type: None,
                    service_name: None,
                    attributes: BTreeMap::new(),
                    reservable: true,
                })
                .await
                .map_err(|e| self.fail(format!("enrolling a host: {e}")))?;
            let uuid = self
                .berth()
                .read_local(|c| c.provider_by_id(id).map(|p| p.uuid()))
                .ok_or_else(|| self.fail("an enrolled host is not in the catalog"))?;
            self.hosts.push(uuid);
            self.inventories.insert(uuid, Belief::acked(vcpus));
        }
        Ok(())
    }

    /// Runs the steps, then moves the clock past every lease and checks the events.
    async fn run(mut self) -> Result<Report, Failure> {
        self.open().await?;
        self.setup().await?;
        for step in 0..self.config.steps {
            self.step = step;
            if self.rng.chance(12) {
                let boundary = *self.rng.pick(&Boundary::ALL).expect("three boundaries");
                self.store.crash_at(1 + self.rng.below(3), boundary);
            }
            self.one_step().await?;
            if self.store.has_crashed() {
                self.restart().await?;
            }
            self.check().await?;
        }
        self.finish().await?;
        Ok(self.report)
    }

    /// The process died: reopen berth over what the disk kept.
    async fn restart(&mut self) -> Result<(), Failure> {
        self.berth = None;
        self.store.recover().await;
        self.report.crashes += 1;
        self.open().await
    }

    async fn one_step(&mut self) -> Result<(), Failure> {
        match self.rng.below(10) {
            0 => self.tick().await,
            _ => {
                let together = 1 + self.rng.below(4);
                let writes: Vec<Write> = (0..together).map(|_| self.next_write()).collect();
                self.issue(writes).await
            }
        }
    }

    /// Moves the clock 1 to 90 minutes and fires what fell due.
    async fn tick(&mut self) -> Result<(), Failure> {
        let minutes = 1 + i64::try_from(self.rng.below(90)).expect("small");
        self.clock.0.fetch_add(minutes * MINUTE, Ordering::Relaxed);
        self.fire().await
    }

    /// Fires the lifecycle events due now; a failure is only allowed when the process died.
    async fn fire(&mut self) -> Result<(), Failure> {
        match self.berth().fire_due_events().await {
            Ok(fired) => self.report.events += fired,
            Err(_) if self.store.has_crashed() => {}
            Err(e) => return Err(self.fail(format!("firing due events failed: {e}"))),
        }
        Ok(())
    }
}

impl Sim {
    /// The next write, drawn from the seed.
    fn next_write(&mut self) -> Write {
        match self.rng.below(10) {
            9 => Write::HostStatus {
                host: *self.rng.pick(&self.hosts).expect("hosts are enrolled"),
                status: *self
                    .rng
                    .pick(&[
                        ProviderStatus::Up,
                        ProviderStatus::Down,
                        ProviderStatus::Maintenance,
                    ])
                    .expect("three"),
            },
            0..=2 => self.allocate(),
            3 => Write::Release {
                consumer: consumer_id(self.rng.below(CONSUMERS)),
            },
            4 => self.inventory(),
            5 => self.new_lease(),
            6 => match self.rng.chance(2) {
                true => self.new_reservation(),
                false => self.new_lease(),
            },
            7 => match self.unanswered_lease() {
                Some(name) => Write::CreateLease { name },
                None => self.new_lease(),
            },
            _ => match self.lease_names().pop() {
                Some(_) => {
                    let names = self.lease_names();
                    let name = self.rng.pick(&names).cloned().expect("not empty");
                    Write::DeleteLease { name }
                }
                None => self.new_lease(),
            },
        }
    }

    fn lease_names(&self) -> Vec<String> {
        self.leases.keys().cloned().collect()
    }

    /// A lease create that got no answer, to retry with its key.
    fn unanswered_lease(&mut self) -> Option<String> {
        let open: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, a)| matches!(a.present, Belief::OneOf(_)))
            .map(|(name, _)| name.clone())
            .collect();
        self.rng.pick(&open).cloned()
    }

    /// An allocation for one of the consumers: new, or a change with its current generation or
    /// (sometimes) a stale one.
    fn allocate(&mut self) -> Write {
        let consumer = consumer_id(self.rng.below(CONSUMERS));
        let host = *self.rng.pick(&self.hosts).expect("hosts are enrolled");
        let amount = 1 + self.rng.below(4);
        let current = self
            .berth()
            .read_local(|c| c.consumer(consumer).map(|found| found.generation));
        let stale = current.is_some() && self.rng.chance(5);
        let generation = match current {
            None => ConsumerGeneration::New,
            Some(g) => ConsumerGeneration::Is(g + u64::from(stale)),
        };
        let mut allocations = Allocations::new();
        allocations.entry(host).or_default().insert(vcpu(), amount);
        Write::Allocate {
            consumer,
            stale,
            write: ConsumerWrite {
                consumer,
                // Not the leases' project: an allocation of their project on a host a lease
                // holds would present the lease's reservation and end with it.
                project_id: "tenant".into(),
                user_id: "u".into(),
                consumer_type: Some("INSTANCE".into()),
                generation,
                allocations,
                reservation: None,
            },
        }
    }

    /// A change of one host's VCPU total, with its generation or (sometimes) a stale one.
    fn inventory(&mut self) -> Write {
        let provider = *self.rng.pick(&self.hosts).expect("hosts are enrolled");
        let generation = self
            .berth()
            .read_local(|c| c.provider(provider).map(|p| p.generation()))
            .unwrap_or(0);
        let stale = self.rng.chance(4);
        Write::Inventory {
            provider,
            generation: generation + u64::from(stale),
            stale,
            vcpus: 4 + self.rng.below(29),
        }
    }

    /// A new lease: one whole host, or one to three instance slots, in the next hours.
    fn new_lease(&mut self) -> Write {
        let name = format!("lease-{}", self.leases.len());
        let start = self.now().as_micros()
            + (1 + i64::try_from(self.rng.below(240)).expect("small")) * MINUTE;
        let end = start + (10 + i64::try_from(self.rng.below(240)).expect("small")) * MINUTE;
        let spec = match self.rng.chance(3) {
            true => ReservationSpec::Host {
                min: 1,
                max: 1,
                hypervisor_properties: String::new().into(),
                resource_properties: String::new().into(),
                before_end: "default".into(),
            },
            false => ReservationSpec::Instance {
                vcpus: 1 + self.rng.below(4),
                memory_mb: 512,
                disk_gb: 0,
                amount: 1 + u32::try_from(self.rng.below(3)).expect("small"),
                affinity: Affinity::Any,
                resource_properties: String::new().into(),
            },
        };
        let cmd = Asking::Lease(CreateLease {
            name: name.clone(),
            project_id: PROJECT.into(),
            user_id: "u".into(),
            start: Instant::from_micros(start),
            end: Instant::from_micros(end),
            before_end: None,
            reservations: vec![spec],
            horizon: Span::from_hours(1),
            idempotency: keyed(&name, "POST /reservation/v1/leases"),
            hold: None,
        });
        self.ask(name, cmd)
    }

    /// Records a create the simulator is about to send, and the write that sends it.
    fn ask(&mut self, name: String, cmd: Asking) -> Write {
        let asked = Asked {
            cmd,
            id: None,
            present: Belief::acked(false),
        };
        self.leases.insert(name.clone(), asked);
        Write::CreateLease { name }
    }
}

impl Sim {
    /// A new Promise reservation: a compute pool of one to eight cores (sometimes with an
    /// instance count), in the next hours, of priority 0 to 2 (so that it may displace the
    /// simulator's leases, of priority 0, that have not started), sometimes with a claim
    /// deadline (at which what no instance draws on is given back).
    fn new_reservation(&mut self) -> Write {
        let name = format!("reservation-{}", self.leases.len());
        let start = self.now().as_micros()
            + (1 + i64::try_from(self.rng.below(240)).expect("small")) * MINUTE;
        let end = start + (10 + i64::try_from(self.rng.below(240)).expect("small")) * MINUTE;
        let cores = 1 + self.rng.below(8);
        let instances = match self.rng.chance(2) {
            true => 1 + self.rng.below(cores),
            false => 0,
        };
        let expiry = self
            .rng
            .chance(3)
            .then(|| start + (1 + i64::try_from(self.rng.below(30)).expect("small")) * MINUTE);
        let cmd = Asking::Promise(CreateReservation {
            kind: PromiseKind::Compute,
            ask: Ask {
                pool: Some(PoolAsk {
                    cores,
                    ram_mb: cores * 512,
                    instances,
                }),
                ..Ask::default()
            },
            start: Some(Instant::from_micros(start)),
            end: Some(Instant::from_micros(end)),
            expiry: expiry.map(Instant::from_micros),
            zone: None,
            provider: None,
            priority: u32::try_from(self.rng.below(3)).expect("small"),
            grant: PriorityGrant {
                ceiling: 100,
                across_projects: false,
            },
            project_id: PROJECT.into(),
            user_id: "u".into(),
            horizon_micros: Span::from_hours(1).as_micros(),
            idempotency: keyed(&name, "POST /promise/reservation/compute"),
        });
        self.ask(name, cmd)
    }

    /// Sends `writes` together (they may share a batch) and learns what each was told.
    async fn issue(&mut self, writes: Vec<Write>) -> Result<(), Failure> {
        // A Promise reservation is first admitted over a snapshot on a blocking thread: sent
        // with others, the order of their decisions would depend on the threads, so it goes alone.
        let (promises, writes): (Vec<Write>, Vec<Write>) = writes
            .into_iter()
            .partition(|w| matches!(w, Write::CreateLease { name } if matches!(self.leases[name].cmd, Asking::Promise(_))));
        for promise in promises {
            self.send(vec![promise]).await?;
        }
        if writes.is_empty() {
            return Ok(());
        }
        self.send(writes).await
    }

    /// Sends `writes` together, and learns what each was told.
    async fn send(&mut self, writes: Vec<Write>) -> Result<(), Failure> {
        let berth = self.berth();
        let expected = self.expected_admission(&writes);
        let mut tasks = Vec::with_capacity(writes.len());
        for write in &writes {
            let berth = Arc::clone(&berth);
            let task = match write {
                Write::Allocate { write, .. } => {
                    let write = write.clone();
                    tokio::spawn(async move {
                        outcome(berth.set_allocations(vec![write]).await, |()| None)
                    })
                }
                Write::Release { consumer } => {
                    let consumer = *consumer;
                    tokio::spawn(async move {
                        outcome(berth.delete_allocations(consumer).await, |()| None)
                    })
                }
                Write::Inventory {
                    provider,
                    generation,
                    vcpus,
                    ..
                } => {
                    let mut inventories = berth.read_local(|c| {
                        c.provider(*provider)
                            .map(|p| p.inventories().clone())
                            .unwrap_or_default()
                    });
                    inventories.insert(vcpu(), Inventory::simple(*vcpus));
                    let (provider, generation) = (*provider, *generation);
                    tokio::spawn(async move {
                        let result = berth.set_inventories(provider, generation, inventories);
                        outcome(result.await, |()| None)
                    })
                }
                Write::CreateLease { name } => match self.leases[name].cmd.clone() {
                    Asking::Lease(cmd) => tokio::spawn(async move {
                        outcome(berth.create_lease(cmd).await, |lease| Some(lease.id))
                    }),
                    Asking::Promise(cmd) => tokio::spawn(async move {
                        outcome(berth.create_reservation(cmd).await, |lease| Some(lease.id))
                    }),
                },
                Write::HostStatus { host, status } => {
                    let (host, status) = (*host, *status);
                    let id = berth.read_local(|c| c.provider(host).map(|p| p.id()));
                    tokio::spawn(async move {
                        match id {
                            Some(id) => {
                                outcome(berth.set_host_status(id, status, None).await, |_| None)
                            }
                            None => Outcome::Refused,
                        }
                    })
                }
                Write::DeleteLease { name } => {
                    let id = self.leases[name].id;
                    tokio::spawn(async move {
                        match id {
                            Some(id) => outcome(berth.delete_lease(id).await, |()| None),
                            None => Outcome::Refused,
                        }
                    })
                }
            };
            tasks.push(task);
        }
        // A stale generation is only stale alone: an earlier write of the same batch may have
        // moved the generation to it.
        let alone = writes.len() == 1;
        for (write, task) in writes.into_iter().zip(tasks) {
            let told = task.await.expect("invariant: a write task does not panic");
            if let (Some(fits), Write::CreateLease { name }) = (expected, &write) {
                self.check_admission(name, fits, &told)?;
            }
            self.learn(write, told, alone)?;
        }
        Ok(())
    }

    /// Whether the reference model of admission says `writes` is a new lease that fits, when it
    /// is one sent alone: what the model sees is then exactly the catalog its decision sees.
    fn expected_admission(&self, writes: &[Write]) -> Option<bool> {
        let [Write::CreateLease { name }] = writes else {
            return None;
        };
        let asked = &self.leases[name];
        if asked.present != Belief::acked(false) {
            return None;
        }
        match &asked.cmd {
            Asking::Lease(cmd) => {
                let [spec] = cmd.reservations.as_slice() else {
                    unreachable!("the simulator's leases have one reservation");
                };
                Some(
                    self.berth()
                        .read_local(|c| check::fits(c, spec, cmd.start, cmd.end)),
                )
            }
            // Promise reservations are checked against capacity as every lease is.
            Asking::Promise(_) => None,
        }
    }

    /// A lease that fits by the reference model of admission is admitted, and one that does not
    /// is refused.
    fn check_admission(&mut self, name: &str, fits: bool, told: &Outcome) -> Result<(), Failure> {
        let answered = match told {
            Outcome::Acked(_) => true,
            Outcome::Refused => false,
            Outcome::Unanswered => return Ok(()),
        };
        self.report.admissions += 1;
        if answered != fits {
            let verb = if answered { "admitted" } else { "refused" };
            let model = if fits { "fits" } else { "does not fit" };
            return Err(self.fail(format!(
                "{name} was {verb}, but by the reference model of admission it {model}: {:?}",
                self.leases[name].cmd
            )));
        }
        Ok(())
    }

    /// Updates what the clients were told after one write.
    fn learn(&mut self, write: Write, told: Outcome, alone: bool) -> Result<(), Failure> {
        if self.config.trace {
            eprintln!(
                "step {} at {}: {write:?} -> {told:?}",
                self.step,
                self.now().as_micros()
            );
        }
        self.report.writes += 1;
        match &told {
            Outcome::Acked(_) => self.report.acked += 1,
            Outcome::Refused => self.report.refused += 1,
            Outcome::Unanswered => self.report.unanswered += 1,
        }
        match write {
            Write::Allocate {
                consumer,
                write,
                stale,
            } => {
                if stale && alone && matches!(told, Outcome::Acked(_)) {
                    return Err(self.fail(format!(
                        "an allocation with a stale consumer generation was accepted for {consumer}"
                    )));
                }
                let new: BTreeMap<ProviderId, u64> = write
                    .allocations
                    .iter()
                    .map(|(p, by_class)| (*p, by_class.values().sum()))
                    .collect();
                if !(stale && alone) {
                    self.believe_consumer(consumer, &told, Some(new));
                }
            }
            Write::Release { consumer } => self.believe_consumer(consumer, &told, None),
            Write::Inventory {
                provider,
                stale,
                vcpus,
                ..
            } => {
                if !matches!(told, Outcome::Refused) {
                    self.resized.push(provider);
                }
                let belief = self.inventories.get_mut(&provider).expect("a host");
                match (&told, stale && alone) {
                    (Outcome::Acked(_), true) => {
                        return Err(self.fail(format!(
                            "an inventory write with a stale generation was accepted on {provider}"
                        )));
                    }
                    (Outcome::Acked(_), false) => *belief = Belief::acked(vcpus),
                    (Outcome::Unanswered, false) => *belief = belief.unknown(vcpus),
                    _ => {}
                }
            }
            Write::CreateLease { name } => {
                let known = self.leases[&name].id;
                if let Outcome::Acked(id) = told
                    && known.is_some()
                    && known != id
                {
                    return Err(
                        self.fail(format!("{name} was created twice: {known:?} and {id:?}"))
                    );
                }
                let asked = self.leases.get_mut(&name).expect("asked");
                match told {
                    Outcome::Acked(id) => {
                        asked.id = id;
                        asked.present = Belief::acked(true);
                    }
                    Outcome::Refused => asked.present = Belief::acked(false),
                    Outcome::Unanswered => asked.present = asked.present.unknown(true),
                }
            }
            // A status change moves or flags leases; what they hold is checked as always.
            Write::HostStatus { .. } => {}
            Write::DeleteLease { name } => {
                let asked = self.leases.get_mut(&name).expect("asked");
                match told {
                    Outcome::Acked(_) => asked.present = Belief::acked(false),
                    Outcome::Refused => {}
                    Outcome::Unanswered => asked.present = asked.present.unknown(false),
                }
            }
        }
        Ok(())
    }

    fn believe_consumer(
        &mut self,
        consumer: Uuid,
        told: &Outcome,
        new: Option<BTreeMap<ProviderId, u64>>,
    ) {
        let belief = self
            .consumers
            .entry(consumer)
            .or_insert(Belief::Known(None));
        match told {
            Outcome::Acked(_) => *belief = Belief::acked(new),
            Outcome::Refused => {}
            Outcome::Unanswered => *belief = belief.unknown(new),
        }
    }
}

impl Sim {
    /// The checks after every step.
    async fn check(&mut self) -> Result<(), Failure> {
        let berth = self.berth();
        let now = self.now();
        let (excess, mut held) = berth.read_local(|c| (check::excess(c, now), c.to_rows()));
        let excess = excess.map_err(|e| self.fail(format!("capacity promised twice: {e}")))?;
        for (host, over) in &excess {
            let before = self.excess.get(host).copied().unwrap_or(0);
            if *over <= before {
                continue;
            }
            if !self.resized.contains(host) {
                return Err(self.fail(format!(
                    "capacity promised twice: {host} is promised {over} beyond its capacity, {before} before this step"
                )));
            }
            // Its inventory shrank under what is promised on it: every lease that held it before
            // the step, at an instant where it is now promised beyond its capacity, must say it
            // is short.
            let silent = berth.read_local(|c| {
                let over = check::over_instants(c, *host, now);
                c.leases()
                    .filter(|l| l.holds_capacity() && !l.degraded && self.before.contains(&l.id))
                    .filter(|l| over.iter().any(|at| l.start <= *at && *at < l.end))
                    .filter(|l| {
                        l.reservations
                            .iter()
                            .any(|r| r.hosts.iter().any(|(h, _)| h == host))
                    })
                    .map(|l| l.id)
                    .min()
            });
            if let Some(lease) = silent {
                return Err(self.fail(format!(
                    "the inventory of {host} shrank under lease {lease}, which is not marked degraded"
                )));
            }
        }
        self.excess = excess;
        self.resized.clear();
        self.before = berth.read_local(|c| c.leases().map(|l| l.id).collect());
        self.check_fired_once().await?;
        let mut disk = self.store.rows().await;
        held.normalize();
        disk.normalize();
        if held != disk {
            return Err(self.fail("the catalog in memory differs from the disk's"));
        }
        berth.read_local(|c| self.check_told(c))
    }

    /// Every object is as its clients were told (or one of the outcomes a write without an
    /// answer allows), and nothing is there that nobody asked for.
    fn check_told(&mut self, catalog: &Catalog) -> Result<(), Failure> {
        for (uuid, _) in catalog.consumers() {
            if !self.consumers.contains_key(&uuid) {
                return Err(self.fail(format!("consumer {uuid} was never written")));
            }
        }
        let consumers: Vec<Uuid> = self.consumers.keys().copied().collect();
        for uuid in consumers {
            let seen = catalog.consumer(uuid).map(|c| {
                c.allocations
                    .iter()
                    .map(|(p, by_class)| (*p, by_class.values().sum()))
                    .collect::<BTreeMap<ProviderId, u64>>()
            });
            let belief = self.consumers.get_mut(&uuid).expect("listed");
            if let Err(e) = belief.observe(seen, || format!("consumer {uuid}")) {
                return Err(self.fail(e));
            }
        }
        let hosts = self.hosts.clone();
        for host in hosts {
            let seen = catalog
                .provider(host)
                .and_then(|p| p.inventories().get(&vcpu()).map(Inventory::total))
                .unwrap_or(0);
            let belief = self.inventories.get_mut(&host).expect("a host");
            if let Err(e) = belief.observe(seen, || format!("the VCPU total of {host}")) {
                return Err(self.fail(e));
            }
        }
        self.check_leases(catalog)
    }

    fn check_leases(&mut self, catalog: &Catalog) -> Result<(), Failure> {
        // A Promise reservation berth names itself: one whose create got no answer is known by
        // its idempotency key's record, committed with it.
        let mut reservations: BTreeMap<LeaseId, String> = BTreeMap::new();
        for (name, asked) in &mut self.leases {
            if !matches!(asked.cmd, Asking::Promise(_)) {
                continue;
            }
            if asked.id.is_none() {
                let key = asked.cmd.key().expect("reservations are sent with a key");
                asked.id = catalog
                    .idempotency_record(key)
                    .map(|record| LeaseId::new(record.object_id));
            }
            if let Some(id) = asked.id {
                reservations.insert(id, name.clone());
            }
        }
        let mut by_name: BTreeMap<&str, Vec<LeaseId>> = BTreeMap::new();
        for lease in catalog.leases() {
            if lease.name.starts_with("promise-") {
                if !reservations.contains_key(&lease.id) {
                    return Err(self.fail(format!("reservation {} was never asked for", lease.id)));
                }
                continue;
            }
            by_name.entry(&lease.name).or_default().push(lease.id);
        }
        for (name, ids) in &by_name {
            if !self.leases.contains_key(*name) {
                return Err(self.fail(format!("lease {name} was never asked for")));
            }
            if ids.len() > 1 {
                return Err(self.fail(format!("lease {name} exists {} times", ids.len())));
            }
        }
        let names = self.lease_names();
        for name in names {
            let asked = self.leases.get_mut(&name).expect("listed");
            let found = match asked.cmd {
                Asking::Lease(_) => by_name
                    .get(name.as_str())
                    .and_then(|ids| ids.first().copied()),
                Asking::Promise(_) => asked.id.filter(|id| catalog.lease(*id).is_some()),
            };
            if let (Some(id), Some(told)) = (found, asked.id)
                && id != told
            {
                return Err(self.fail(format!(
                    "lease {name} is {id}, but its client was told {told}"
                )));
            }
            asked.id = asked.id.or(found);
            let result = asked
                .present
                .observe(found.is_some(), || format!("lease {name}"));
            if let Err(e) = result {
                return Err(self.fail(e));
            }
        }
        Ok(())
    }

    /// Moves the clock past every lease, fires what falls due (again after any crash), and
    /// checks every event fired exactly once.
    async fn finish(&mut self) -> Result<(), Failure> {
        self.step = self.config.steps;
        let last_end = self
            .berth()
            .read_local(|c| c.leases().map(|l| l.end.as_micros()).max())
            .unwrap_or(T0);
        self.clock.0.store(
            last_end.max(self.now().as_micros()) + MINUTE,
            Ordering::Relaxed,
        );
        // Each pass fires what is due; a crash during one leaves the rest to the next.
        for _ in 0..8 {
            self.fire().await?;
            if self.store.has_crashed() {
                self.restart().await?;
                continue;
            }
            break;
        }
        // The check reads the record committed since the last step: nothing fired twice.
        self.check().await?;
        let now = self.now();
        self.berth()
            .read_local(|c| check::none_due(c, now))
            .map_err(|e| self.fail(e))
    }
}

impl Sim {
    /// Reads the lifecycle record committed since the last step: no lease event may be in it
    /// twice.
    async fn check_fired_once(&mut self) -> Result<(), Failure> {
        use berth_store::Store;
        loop {
            let page = self
                .store
                .records_after(self.records_read, 1_000)
                .await
                .map_err(|e| self.fail(format!("reading the lifecycle record: {e}")))?;
            let Some((last, _)) = page.last() else {
                return Ok(());
            };
            self.records_read = *last;
            for (_, record) in page {
                if !record.kind.starts_with("lease.event.") {
                    continue;
                }
                let key = (record.lease_id, record.kind);
                if self.fired.contains(&key) {
                    return Err(self.fail(format!("lease {}: {} fired twice", key.0, key.1)));
                }
                self.fired.insert(key);
            }
        }
    }
}
