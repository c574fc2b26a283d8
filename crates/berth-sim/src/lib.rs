//! A deterministic simulator of berth's write path.
//!
//! The real core and the real [`Berth`] write path (its queue, group commit and catalogs) run
//! over a simulated store ([`store::SimStore`]: the in-memory reference store as the disk) on a
//! single-threaded runtime, with a simulated clock and counted ids. One `u64` seed derives
//! everything: the hosts, the bare-metal nodes, the floating IPs, and a stream of writes of every
//! kind the write path takes here (allocations created, changed with current and stale
//! generations, and deleted; inventories changed with current and stale generations; leases of
//! whole hosts, of instance slots and of floating IPs, and Promise reservations, created, retried
//! with their idempotency key and deleted; node claims made, retried, released and left to
//! expire; the clock moved, forward and sometimes back, and the lifecycle events that fall due
//! fired), some issued together so that they share a batch. The
//! process is made to die at chosen commits, before the write, between the write and the sync, or
//! between the sync and the answer; the simulator then reopens berth over what the disk kept.
//!
//! After every step it checks: (1) no capacity is promised twice, recomputed from the leases
//! and consumers ([`check::capacity`]); (2) every acknowledged write is in the catalog and
//! (3) nothing is there that was never asked for ([`check::Belief`]: what each client was told);
//! (4) the catalog in memory equals the disk's; (5) no lifecycle event fired twice or is undone,
//! and at the end none due is left; (6) a new lease or node claim sent alone is admitted exactly
//! when a reference model of admission ([`check::fits`], [`check::claimable`], holds recomputed
//! from the leases) says it fits; (7) no floating IP is promised twice; (8) no node is claimed
//! twice, nor claimed while another project's lease holds it, and a claim goes only by its
//! release or its expiry, once. A run is replayed bit for bit from its seed (`berth-sim --seed N`).

mod check;
pub mod store;

use berth_app::{
    AppError, Berth, Clock, CreateLease, CreateReservation, EnrollHost, IdGen, PriorityGrant,
};
use berth_app::{ClaimNode, EnrollNode, RegisterFloatingIp};
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite};
use berth_core::decide::baremetal::Candidates;
use berth_core::model::baremetal::ProvisionState;
use berth_core::model::consumer::Allocations;
use berth_core::model::idempotency::{IdempotencyKey, Idempotent};
use berth_core::model::inventory::Inventory;
use berth_core::model::lease::{Affinity, ReservationSpec};
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
use berth_core::model::provider::Attributes;
use berth_core::model::provider::ProviderStatus;
use berth_core::{Catalog, Instant, LeaseId, ProviderId, ResourceClass, Span};
use check::Belief;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
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
    /// Floating IPs are given without looking at the leases that hold them (in the core;
    /// feature `planted`).
    SkipFloatingIpCheck,
    /// A node claim that ends leaves its instance's allocation on the node (in the core;
    /// feature `planted`).
    ClaimKeepsNode,
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
    /// Lease and node claim decisions checked against the reference models of admission.
    pub admissions: usize,
    /// Node claims granted.
    pub claims: usize,
    /// Times the clock was moved back.
    pub jumps_back: usize,
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
        Some(Defect::SkipFloatingIpCheck) => Some(Planted::SkipFloatingIpCheck),
        Some(Defect::ClaimKeepsNode) => Some(Planted::ClaimKeepsNode),
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
    /// When (by the latest the clock has been) its last create got no answer, so that its
    /// client retries it with its key while the key's record lives.
    unanswered: Option<i64>,
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
    /// A node claim (new, or retried with its key).
    Claim {
        name: String,
    },
    /// The release of a node claim.
    ReleaseClaim {
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
    /// The bare-metal nodes, and the addresses of the floating IPs.
    nodes: Vec<ProviderId>,
    addresses: Vec<String>,
    claims: BTreeMap<String, AskedClaim>,
    /// The latest the clock has been (it may have moved back since).
    high_water: i64,
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
    /// Acknowledged, with what it made (the lease of a lease create, the claim of a claim).
    Acked(Option<Uuid>),
    /// Refused: an answer, nothing changed.
    Refused,
    /// No answer: the process died.
    Unanswered,
}

fn outcome<T>(result: Result<T, AppError>, id: impl FnOnce(T) -> Option<Uuid>) -> Outcome {
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
            nodes: Vec::new(),
            addresses: Vec::new(),
            claims: BTreeMap::new(),
            high_water: T0,
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
        self.setup_nodes().await
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

    /// Moves the clock 1 to 90 minutes (or, one time in eight, back) and fires what fell due.
    async fn tick(&mut self) -> Result<(), Failure> {
        if self.rng.chance(8) {
            return self.jump_back().await;
        }
        let minutes = 1 + i64::try_from(self.rng.below(90)).expect("small");
        self.clock.0.fetch_add(minutes * MINUTE, Ordering::Relaxed);
        self.high_water = self.high_water.max(self.now().as_micros());
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
        match self.rng.below(12) {
            10 => self.claim_write(),
            11 => self.release_write(),
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

    /// Whether a create whose answer was lost at `lost` is retried: within 12 hours, well inside
    /// the life of its key's record ([`IDEMPOTENCY_TTL`](berth_core::model::idempotency::IDEMPOTENCY_TTL)).
    fn may_retry(&self, lost: Option<i64>) -> bool {
        lost.is_some_and(|at| self.high_water - at < 12 * 60 * MINUTE)
    }

    fn lease_names(&self) -> Vec<String> {
        self.leases.keys().cloned().collect()
    }

    /// A lease create that got no answer, to retry with its key.
    fn unanswered_lease(&mut self) -> Option<String> {
        let open: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, a)| self.may_retry(a.unanswered))
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
        let spec = match self.rng.below(5) {
            0 => ReservationSpec::FloatingIp {
                network_id: NETWORK.into(),
                amount: 1 + u32::try_from(self.rng.below(2)).expect("small"),
                required_floatingips: match self.rng.chance(3) {
                    true => self
                        .rng
                        .pick(&self.addresses)
                        .cloned()
                        .into_iter()
                        .collect(),
                    false => Vec::new(),
                },
            },
            1 | 2 => ReservationSpec::Host {
                min: 1,
                max: 1,
                hypervisor_properties: String::new().into(),
                resource_properties: String::new().into(),
                before_end: "default".into(),
            },
            _ => ReservationSpec::Instance {
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
            unanswered: None,
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
            hold: None,
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
            tasks.push(self.spawn(Arc::clone(&berth), write));
        }
        // A stale generation is only stale alone: an earlier write of the same batch may have
        // moved the generation to it.
        let alone = writes.len() == 1;
        for (write, task) in writes.into_iter().zip(tasks) {
            let told = task.await.expect("invariant: a write task does not panic");
            match (expected, &write) {
                (Some(fits), Write::CreateLease { name }) => {
                    self.check_admission(name, fits, &told)?;
                }
                (Some(fits), Write::Claim { name }) => self.check_claimed(name, fits, &told)?,
                _ => {}
            }
            self.learn(write, told, alone)?;
        }
        Ok(())
    }

    /// Sends one write on a task of its own.
    fn spawn(&self, berth: Arc<Berth>, write: &Write) -> tokio::task::JoinHandle<Outcome> {
        match write {
            Write::Allocate { write, .. } => {
                let write = write.clone();
                tokio::spawn(
                    async move { outcome(berth.set_allocations(vec![write]).await, |()| None) },
                )
            }
            Write::Release { consumer } => {
                let consumer = *consumer;
                tokio::spawn(
                    async move { outcome(berth.delete_allocations(consumer).await, |()| None) },
                )
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
                    outcome(berth.create_lease(cmd).await, |lease| Some(lease.id.uuid()))
                }),
                Asking::Promise(cmd) => tokio::spawn(async move {
                    outcome(berth.create_reservation(cmd).await, |lease| {
                        Some(lease.id.uuid())
                    })
                }),
            },
            Write::Claim { name } => {
                let cmd = self.claims[name].cmd.clone();
                tokio::spawn(async move {
                    outcome(berth.claim_node(cmd).await, |claim| Some(claim.uuid))
                })
            }
            Write::ReleaseClaim { name } => {
                let id = self.claims[name].id;
                tokio::spawn(async move {
                    match id {
                        Some(id) => {
                            outcome(berth.release_claim(id, Some(CLAIMANT.into())).await, |()| {
                                None
                            })
                        }
                        None => Outcome::Refused,
                    }
                })
            }
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
        }
    }

    /// Whether the reference model of admission says `writes` is a new lease that fits, when it
    /// is one sent alone: what the model sees is then exactly the catalog its decision sees.
    fn expected_admission(&self, writes: &[Write]) -> Option<bool> {
        let name = match writes {
            [Write::CreateLease { name }] => name,
            [Write::Claim { name }] => return self.expected_claim(name),
            _ => return None,
        };
        let asked = &self.leases[name];
        // A retry may be answered by its key's record: the model decides first creates only.
        if asked.present != Belief::acked(false) || asked.unanswered.is_some() {
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
            Write::CreateLease { name } => self.learn_lease(&name, told)?,
            // A status change moves or flags leases; what they hold is checked as always.
            Write::HostStatus { .. } => {}
            Write::Claim { name } => {
                if matches!(told, Outcome::Acked(_)) {
                    self.report.claims += 1;
                }
                self.learn_claim(&name, &told)?;
            }
            Write::ReleaseClaim { name } => self.learn_release(&name, &told),
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

    /// Learns what the client of a lease create was told.
    fn learn_lease(&mut self, name: &str, told: Outcome) -> Result<(), Failure> {
        let known = self.leases[name].id;
        if let Outcome::Acked(id) = told
            && let id = id.map(LeaseId::new)
            && known.is_some()
            && known != id
        {
            return Err(self.fail(format!("{name} was created twice: {known:?} and {id:?}")));
        }
        let asked = self.leases.get_mut(name).expect("asked");
        asked.unanswered = matches!(told, Outcome::Unanswered).then_some(self.high_water);
        match told {
            Outcome::Acked(id) => {
                asked.id = id.map(LeaseId::new);
                asked.present = Belief::acked(true);
            }
            Outcome::Refused => asked.present = Belief::acked(false),
            Outcome::Unanswered => asked.present = asked.present.unknown(true),
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
        berth
            .read_local(check::floating_ips)
            .map_err(|e| self.fail(e))?;
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
        self.name_unanswered().await?;
        berth.read_local(|c| self.check_told(c))
    }

    /// Names the Promise reservations and claims whose create got no answer and which berth
    /// made all the same: their idempotency key's record, committed with them, names them.
    async fn name_unanswered(&mut self) -> Result<(), Failure> {
        let store = self.store.clone();
        let made = |key: IdempotencyKey| {
            let store = store.clone();
            async move {
                use berth_store::Store;
                let record = store.idempotency_record(&key).await;
                record.map(|found| found.map(|r| r.object_id))
            }
        };
        let mut unreadable = None;
        for asked in self.leases.values_mut() {
            if asked.id.is_some() || !matches!(asked.cmd, Asking::Promise(_)) {
                continue;
            }
            let Some(key) = asked.cmd.key().cloned() else {
                continue;
            };
            match made(key).await {
                Ok(id) => asked.id = id.map(LeaseId::new),
                Err(e) => unreadable = Some(e),
            }
        }
        for asked in self.claims.values_mut().filter(|a| a.id.is_none()) {
            let Some(key) = asked.cmd.idempotency.as_ref().map(|i| i.key.clone()) else {
                continue;
            };
            match made(key).await {
                Ok(id) => asked.id = id,
                Err(e) => unreadable = Some(e),
            }
        }
        match unreadable {
            Some(e) => Err(self.fail(format!("reading an idempotency record: {e}"))),
            None => Ok(()),
        }
    }

    /// Every object is as its clients were told (or one of the outcomes a write without an
    /// answer allows), and nothing is there that nobody asked for.
    fn check_told(&mut self, catalog: &Catalog) -> Result<(), Failure> {
        let instances: std::collections::BTreeSet<Uuid> =
            self.claims.values().map(|c| c.cmd.instance_uuid).collect();
        for (uuid, _) in catalog.consumers() {
            if !self.consumers.contains_key(&uuid) && !instances.contains(&uuid) {
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
        self.check_leases(catalog)?;
        self.check_claims(catalog)?;
        self.check_not_unfired(catalog)
    }

    /// No lease event that fired is undone (not by a restart, not by the clock moving back).
    fn check_not_unfired(&self, catalog: &Catalog) -> Result<(), Failure> {
        for (lease, kind) in &self.fired {
            let Some(current) = catalog.lease(*lease) else {
                continue;
            };
            let undone = current.events.iter().find(|e| {
                kind.strip_prefix("lease.event.") == Some(e.kind.as_str())
                    && e.status == berth_core::model::lease::EventStatus::Undone
            });
            if let Some(event) = undone {
                return Err(self.fail(format!(
                    "lease {lease}: {kind} fired, and is undone again (due at {})",
                    event.at.as_micros()
                )));
            }
        }
        Ok(())
    }

    fn check_leases(&mut self, catalog: &Catalog) -> Result<(), Failure> {
        // A Promise reservation berth names itself: one whose create got no answer is known by
        // its idempotency key's record, committed with it.
        let mut reservations: BTreeMap<LeaseId, String> = BTreeMap::new();
        for (name, asked) in &mut self.leases {
            if !matches!(asked.cmd, Asking::Promise(_)) {
                continue;
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
            .read_local(|c| {
                let leases = c.leases().map(|l| l.end);
                let claims = c.claims().map(|claim| claim.expires_at);
                leases.chain(claims).map(Instant::as_micros).max()
            })
            .unwrap_or(T0);
        self.clock
            .0
            .store(last_end.max(self.high_water) + MINUTE, Ordering::Relaxed);
        self.high_water = self.now().as_micros();
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

// Ironic-style node claims: the nodes and the floating IPs enrolled at the start, the claims
// asked for (each with an idempotency key), released, retried after a lost answer and left to
// expire, and what each client of a claim was told against the catalog; and the clock moving back.

/// The project node claims are made for (not the leases': a lease of another project reserves
/// the node it holds against them).
const CLAIMANT: &str = "metal";
/// The Ironic resource class of every simulated node.
const NODE_CLASS: &str = "baremetal-gold";
/// The external network of the simulated floating IPs.
const NETWORK: &str = "ext-net";

/// A node claim the simulator asked for, by its name.
#[derive(Debug, Clone)]
struct AskedClaim {
    cmd: ClaimNode,
    /// Its uuid, once an answer (or, after none, its idempotency record) named it.
    id: Option<Uuid>,
    present: Belief<bool>,
    /// When it expires, once seen in the catalog.
    expires_at: Option<Instant>,
    /// Whether its release was asked for (answered or not).
    released: bool,
    /// When (by the latest the clock has been) its last create got no answer.
    unanswered: Option<i64>,
}

impl Sim {
    /// Enrols one to three bare-metal nodes (`available`) and registers three to six floating IPs.
    async fn setup_nodes(&mut self) -> Result<(), Failure> {
        for n in 0..1 + self.rng.below(3) {
            let uuid = self
                .berth()
                .enroll_node(EnrollNode {
                    uuid: None,
                    name: Some(format!("node-{n}")),
                    resource_class: NODE_CLASS.into(),
                    properties: Attributes::new(),
                    traits: Vec::new(),
                    availability_zone: Some("az1".into()),
                    provision_state: ProvisionState::Available,
                })
                .await
                .map_err(|e| self.fail(format!("enrolling a node: {e}")))?;
            self.nodes.push(uuid);
        }
        for n in 0..3 + self.rng.below(4) {
            self.berth()
                .register_floating_ip(RegisterFloatingIp {
                    network_id: NETWORK.into(),
                    subnet_id: None,
                    address: format!("203.0.113.{}", 10 + n),
                })
                .await
                .map_err(|e| self.fail(format!("registering a floating IP: {e}")))?;
            self.addresses.push(format!("203.0.113.{}", 10 + n));
        }
        Ok(())
    }

    /// A new node claim: one to all of the nodes in some order, or any node of the class, held
    /// for 5 to 120 minutes, for an instance of its own.
    fn new_claim(&mut self) -> Write {
        let name = format!("claim-{}", self.claims.len());
        let candidates = match self.rng.chance(3) {
            true => Candidates::Class {
                resource_class: NODE_CLASS.into(),
                traits: Vec::new(),
                among: Vec::new(),
            },
            false => {
                let mut nodes = self.nodes.clone();
                for i in (1..nodes.len()).rev() {
                    let j = usize::try_from(self.rng.below(i as u64 + 1)).expect("small");
                    nodes.swap(i, j);
                }
                let keep = 1 + usize::try_from(self.rng.below(nodes.len() as u64)).expect("small");
                nodes.truncate(keep);
                Candidates::Nodes(nodes)
            }
        };
        let minutes = 5 + self.rng.below(116);
        let cmd = ClaimNode {
            instance_uuid: Uuid::from_u128(2u128 << 64 | self.claims.len() as u128),
            candidates,
            project_id: CLAIMANT.into(),
            user_id: "u".into(),
            ttl: Some(Duration::from_secs(minutes * 60)),
            idempotency: keyed(&name, "POST /v1/nodes/claims"),
        };
        self.claims.insert(
            name.clone(),
            AskedClaim {
                cmd,
                id: None,
                present: Belief::acked(false),
                expires_at: None,
                released: false,
                unanswered: None,
            },
        );
        Write::Claim { name }
    }

    /// A claim create that got no answer, retried with its key, or a new claim.
    fn claim_write(&mut self) -> Write {
        let open: Vec<String> = self
            .claims
            .iter()
            .filter(|(_, c)| self.may_retry(c.unanswered) && !c.released)
            .map(|(name, _)| name.clone())
            .collect();
        match self.rng.chance(3).then(|| self.rng.pick(&open).cloned()) {
            Some(Some(name)) => Write::Claim { name },
            _ => self.new_claim(),
        }
    }

    /// The release of a claim asked for (or a new claim when there is none).
    fn release_write(&mut self) -> Write {
        let names: Vec<String> = self.claims.keys().cloned().collect();
        match self.rng.pick(&names).cloned() {
            Some(name) => Write::ReleaseClaim { name },
            None => self.new_claim(),
        }
    }

    /// Whether the reference model grants claim `name`, when it is a new claim sent alone.
    fn expected_claim(&self, name: &str) -> Option<bool> {
        let asked = &self.claims[name];
        if asked.present != Belief::acked(false) || asked.id.is_some() || asked.unanswered.is_some()
        {
            return None;
        }
        Some(self.berth().read_local(|c| {
            let nodes: Vec<ProviderId> = match &asked.cmd.candidates {
                Candidates::Nodes(nodes) => nodes.clone(),
                Candidates::Class { .. } => c
                    .providers()
                    .filter(|p| p.node().is_some())
                    .map(berth_core::model::provider::Provider::uuid)
                    .collect(),
            };
            check::claimable(
                c,
                &check::ClaimAsk {
                    nodes: &nodes,
                    instance: asked.cmd.instance_uuid,
                },
            )
        }))
    }

    /// A claim the reference model grants is granted, and one it does not is refused.
    fn check_claimed(&mut self, name: &str, fits: bool, told: &Outcome) -> Result<(), Failure> {
        let granted = match told {
            Outcome::Acked(_) => true,
            Outcome::Refused => false,
            Outcome::Unanswered => return Ok(()),
        };
        self.report.admissions += 1;
        if granted != fits {
            let verb = if granted { "granted" } else { "refused" };
            let model = if fits { "grants" } else { "refuses" };
            return Err(self.fail(format!(
                "{name} was {verb}, but the reference model of a claim {model} it: {:?}",
                self.claims[name].cmd
            )));
        }
        Ok(())
    }

    /// Learns what the client of a claim was told.
    fn learn_claim(&mut self, name: &str, told: &Outcome) -> Result<(), Failure> {
        let asked = self.claims.get_mut(name).expect("asked");
        if let (Outcome::Acked(id), Some(known)) = (told, asked.id)
            && *id != Some(known)
        {
            return Err(self.fail(format!(
                "{name} was claimed twice under one key: {known} and {id:?}"
            )));
        }
        asked.unanswered = matches!(told, Outcome::Unanswered).then_some(self.high_water);
        match told {
            Outcome::Acked(id) => {
                asked.id = *id;
                asked.present = Belief::acked(true);
            }
            Outcome::Refused => asked.present = Belief::acked(false),
            Outcome::Unanswered => asked.present = asked.present.unknown(true),
        }
        Ok(())
    }

    /// Learns what the client of a release was told.
    fn learn_release(&mut self, name: &str, told: &Outcome) {
        let asked = self.claims.get_mut(name).expect("asked");
        asked.released = true;
        match told {
            Outcome::Acked(_) => asked.present = Belief::acked(false),
            Outcome::Refused => {}
            Outcome::Unanswered => asked.present = asked.present.unknown(false),
        }
    }

    /// Every claim is as its client was told, or gone because it expired (never before its
    /// expiry, never to come back); nothing is claimed that nobody asked for; and every claim's
    /// instance holds its node while the claim lasts, and nothing after.
    fn check_claims(&mut self, catalog: &Catalog) -> Result<(), Failure> {
        check::node_claims(catalog).map_err(|e| self.fail(e))?;
        let high_water = self.high_water;
        let mut asked_ids = std::collections::BTreeSet::new();
        let mut failure = None;
        for (name, asked) in &mut self.claims {
            let found = asked.id.and_then(|id| catalog.claim(id));
            if let Some(claim) = found {
                asked.expires_at = Some(claim.expires_at);
                asked_ids.insert(claim.uuid);
            }
            let instance = catalog.consumer(asked.cmd.instance_uuid).is_some();
            if instance != found.is_some() {
                failure = Some(format!(
                    "{name}: its instance holds {} but the claim is {}",
                    if instance { "a node" } else { "nothing" },
                    if found.is_some() { "there" } else { "gone" }
                ));
                break;
            }
            let expired = asked
                .expires_at
                .is_some_and(|at| at.as_micros() <= high_water);
            if found.is_none() && asked.present == Belief::acked(true) {
                if !expired {
                    failure = Some(format!(
                        "{name} ({:?}) is gone before it expired at {:?}, but the clients were told it was granted and nobody released it",
                        asked.id, asked.expires_at
                    ));
                    break;
                }
                // Its expiry fired: it is gone for good.
                asked.present = Belief::acked(false);
            }
            if let Err(e) = asked
                .present
                .observe(found.is_some(), || format!("claim {name}"))
            {
                failure = Some(e);
                break;
            }
        }
        if let Some(what) = failure {
            return Err(self.fail(what));
        }
        if let Some(stray) = catalog.claims().find(|c| !asked_ids.contains(&c.uuid)) {
            return Err(self.fail(format!("claim {} was never asked for", stray.uuid)));
        }
        Ok(())
    }

    /// Moves the clock back 1 second to 30 minutes (an NTP step), then fires what is due.
    /// What was promised is measured again from the earlier instant: a promise that only
    /// looks doubled because "now" moved back is not a decision's.
    async fn jump_back(&mut self) -> Result<(), Failure> {
        let seconds = 1 + i64::try_from(self.rng.below(1_800)).expect("small");
        let to = (self.now().as_micros() - seconds * 1_000_000).max(T0);
        self.clock.0.store(to, std::sync::atomic::Ordering::Relaxed);
        self.report.jumps_back += 1;
        let now = self.now();
        let excess = self.berth().read_local(|c| check::excess(c, now));
        self.excess = excess.map_err(|e| self.fail(format!("capacity promised twice: {e}")))?;
        self.fire().await
    }
}
