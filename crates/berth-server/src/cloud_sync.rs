//! Keeping provider clouds' capacity current: every interval (`[provider_clouds]
//! sync_interval_seconds`, 30 s by default) berth reads each registered cloud's Placement, with
//! the microversion Nova uses, and hands what it read to the core's sync decision, which writes
//! only what differs through the normal write path.
//!
//! One read: `GET /resource_providers` (at most [`PROVIDER_CLOUD_PROVIDERS_MAX`] providers);
//! then, for each provider new to berth or whose generation moved, its inventories, usages,
//! allocations (by consumer), traits and aggregates. A cloud whose generations all stand costs
//! one request. Tokens are kept between reads ([`CloudPlacement`]). No remote call runs under
//! the writer lock: the write comes after.
//!
//! Before each read, the allocations berth wrote into the cloud for instances whose allocations
//! berth no longer holds (their reservation ended, or they were evicted) are removed there, at
//! most [`RELEASES_PER_PASS`] a pass. A pass also runs as soon as something
//! finds berth's view of a cloud wrong ([`CloudPlacement::wake_sync`]).
//!
//! A read that fails (unreachable, refused, an answer that is not Placement's or too large)
//! marks the cloud unknown; the next good read clears that. Each state is a metric,
//! `berth_provider_cloud_up{provider="<id>"}`, and the in-memory board below keeps the time of
//! the last attempt and success for `GET /promise/providers`.

use crate::clock::SystemClock;
use crate::cloud_placement::CloudPlacement;
use berth_app::{Berth, Clock as _};
use berth_core::Instant;
use berth_core::catalog::{provider_cloud_of, remote_generation};
use berth_core::limits::PROVIDER_CLOUD_PROVIDERS_MAX;
use berth_core::model::cloud::{
    ProviderCloud, RemoteDetails, RemoteInventory, RemoteProvider, RemoteSnapshot,
    local_provider_uuid,
};
use berth_core::model::id::ProviderId;
use berth_core::model::name::{ResourceClass, TraitName};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often clouds are read when the configuration does not say.
pub const SYNC_INTERVAL_DEFAULT: Duration = Duration::from_secs(30);
/// The most allocations of ended instances removed from one cloud in one pass.
pub const RELEASES_PER_PASS: usize = 64;

/// What this process saw of each cloud's last reads.
#[derive(Debug, Clone, Default)]
pub struct SyncBoard(Arc<Mutex<HashMap<Uuid, Seen>>>);

/// One cloud's last reads, as this process saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// The last read attempted.
    pub last_attempt: Option<Instant>,
    /// The last read that succeeded.
    pub last_success: Option<Instant>,
}

impl SyncBoard {
    /// What was seen of cloud `id`.
    pub fn seen(&self, id: Uuid) -> Seen {
        self.0
            .lock()
            .expect("invariant: the board's lock is never poisoned")
            .get(&id)
            .copied()
            .unwrap_or_default()
    }

    fn record(&self, id: Uuid, at: Instant, ok: bool) {
        let mut board = self
            .0
            .lock()
            .expect("invariant: the board's lock is never poisoned");
        let seen = board.entry(id).or_default();
        seen.last_attempt = Some(at);
        if ok {
            seen.last_success = Some(at);
        }
    }

    fn retain(&self, ids: &BTreeSet<Uuid>) {
        self.0
            .lock()
            .expect("invariant: the board's lock is never poisoned")
            .retain(|id, _| ids.contains(id));
    }
}

/// The background task that reads provider clouds.
pub struct CloudSync {
    berth: Arc<Berth>,
    placement: Arc<CloudPlacement>,
    board: SyncBoard,
    /// Per cloud, the ended instances whose allocations this process removed there.
    released: HashMap<Uuid, HashSet<Uuid>>,
}

impl CloudSync {
    /// A task reading clouds through `placement` into `berth`, reporting on `board`.
    pub fn new(berth: Arc<Berth>, placement: Arc<CloudPlacement>, board: SyncBoard) -> CloudSync {
        CloudSync {
            berth,
            placement,
            board,
            released: HashMap::new(),
        }
    }

    /// Reads every cloud each `interval` (the first time one interval after the start) until
    /// `stop`.
    pub async fn run(mut self, interval: Duration, stop: CancellationToken) {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let placement = Arc::clone(&self.placement);
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
                () = placement.woken() => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.pass() => {}
            }
        }
    }

    /// One read of every registered cloud.
    async fn pass(&mut self) {
        let clouds = match self
            .berth
            .read(|c| c.provider_clouds().cloned().collect::<Vec<_>>())
            .await
        {
            Ok(clouds) => clouds,
            Err(error) => {
                tracing::warn!(%error, "provider clouds could not be listed");
                return;
            }
        };
        let ids: BTreeSet<Uuid> = clouds.iter().map(|c| c.id).collect();
        self.placement.retain(&ids);
        self.board.retain(&ids);
        self.released.retain(|id, _| ids.contains(id));
        for cloud in &clouds {
            self.sync_one(cloud).await;
        }
    }

    async fn sync_one(&mut self, cloud: &ProviderCloud) {
        let id = cloud.id;
        let provider = id.to_string();
        // Before the read, so that it sees the cloud without them.
        self.release_ended(cloud).await;
        match self.read_cloud(cloud).await {
            Ok(snapshot) => match self.berth.sync_provider_cloud(id, snapshot).await {
                Ok(written) => {
                    self.board.record(id, SystemClock.now(), true);
                    metrics::gauge!("berth_provider_cloud_up", "provider" => provider).set(1.0);
                    if written > 0 {
                        tracing::info!(provider = %id, changes = written, "provider cloud synchronised");
                    }
                }
                Err(error) => {
                    tracing::warn!(provider = %id, %error, "provider cloud sync not written")
                }
            },
            Err(error) => {
                self.placement.forget(id);
                self.board.record(id, SystemClock.now(), false);
                metrics::gauge!("berth_provider_cloud_up", "provider" => provider).set(0.0);
                tracing::warn!(provider = %id, %error, "provider cloud unreachable");
                if let Err(error) = self.berth.provider_cloud_unreachable(id, error).await {
                    tracing::warn!(provider = %id, %error, "provider cloud state not written");
                }
            }
        }
    }

    /// Removes from `cloud` the allocations berth wrote there for instances whose allocations
    /// berth no longer holds (at most [`RELEASES_PER_PASS`]; those removed are remembered).
    async fn release_ended(&mut self, cloud: &ProviderCloud) {
        let id = cloud.id;
        let ended = self
            .berth
            .read(move |catalog| {
                catalog
                    .instances()
                    .filter(|i| catalog.consumer(i.id).is_none())
                    .filter(|i| {
                        catalog
                            .provider(i.host)
                            .is_some_and(|p| provider_cloud_of(p) == Some(id))
                    })
                    .map(|i| i.id)
                    .collect::<HashSet<Uuid>>()
            })
            .await;
        let Ok(ended) = ended else { return };
        let released = self.released.entry(id).or_default();
        // What is no longer an ended instance of the cloud need not be remembered.
        released.retain(|i| ended.contains(i));
        let mut pending: Vec<Uuid> = ended
            .iter()
            .filter(|i| !released.contains(*i))
            .copied()
            .collect();
        pending.sort_unstable();
        for instance in pending.into_iter().take(RELEASES_PER_PASS) {
            match self.placement.release(cloud, instance).await {
                Ok(()) => {
                    released.insert(instance);
                }
                Err(error) => {
                    tracing::warn!(provider = %id, %instance, %error, "an ended instance's allocation was not removed from its cloud");
                    break;
                }
            }
        }
    }

    /// Reads `cloud`'s Placement: every provider, and the details of those that changed.
    async fn read_cloud(&mut self, cloud: &ProviderCloud) -> Result<RemoteSnapshot, String> {
        let listing: Listing = self.placement.get(cloud, "/resource_providers").await?;
        if listing.resource_providers.len() > PROVIDER_CLOUD_PROVIDERS_MAX {
            return Err(format!(
                "Placement lists {} resource providers, more than the {PROVIDER_CLOUD_PROVIDERS_MAX} berth imports",
                listing.resource_providers.len()
            ));
        }
        let id = cloud.id;
        let remote: Vec<Uuid> = listing.resource_providers.iter().map(|p| p.uuid).collect();
        let known: HashMap<Uuid, u64> = self
            .berth
            .read(move |catalog| {
                remote
                    .iter()
                    .filter_map(|r| {
                        let local = ProviderId::new(local_provider_uuid(id, *r));
                        catalog
                            .provider(local)
                            .filter(|p| provider_cloud_of(p) == Some(id))
                            .and_then(|p| Some((*r, remote_generation(p)?)))
                    })
                    .collect()
            })
            .await
            .map_err(|error| error.to_string())?;
        let mut providers = Vec::with_capacity(listing.resource_providers.len());
        for listed in listing.resource_providers {
            let details = match known.get(&listed.uuid) == Some(&listed.generation) {
                true => None,
                false => Some(self.details(cloud, listed.uuid).await?),
            };
            providers.push(RemoteProvider {
                uuid: listed.uuid,
                name: listed.name,
                generation: listed.generation,
                parent: listed.parent_provider_uuid,
                details,
            });
        }
        Ok(RemoteSnapshot { providers })
    }

    async fn details(
        &mut self,
        cloud: &ProviderCloud,
        uuid: Uuid,
    ) -> Result<RemoteDetails, String> {
        let base = format!("/resource_providers/{uuid}");
        let placement = &self.placement;
        let inventories: Inventories = placement.get(cloud, &format!("{base}/inventories")).await?;
        let allocations: Allocations = placement.get(cloud, &format!("{base}/allocations")).await?;
        let traits: Traits = placement.get(cloud, &format!("{base}/traits")).await?;
        let aggregates: Aggregates = placement.get(cloud, &format!("{base}/aggregates")).await?;
        let class = |name: &str| {
            ResourceClass::parse(name).ok_or_else(|| {
                format!("Placement answered a resource class berth cannot take: {name}")
            })
        };
        let mut out = RemoteDetails::default();
        for (name, record) in inventories.inventories {
            out.inventories.insert(
                class(&name)?,
                RemoteInventory {
                    total: record.total,
                    reserved: record.reserved,
                    units: [record.min_unit, record.max_unit, record.step_size],
                    allocation_ratio: record.allocation_ratio,
                },
            );
        }
        for (consumer, held) in allocations.allocations {
            let mut amounts = BTreeMap::new();
            for (name, used) in held.resources {
                amounts.insert(class(&name)?, used);
            }
            out.allocations.insert(consumer, amounts);
        }
        out.traits = traits
            .traits
            .iter()
            .filter_map(|t| TraitName::parse(t))
            .collect();
        out.aggregates = aggregates.aggregates.into_iter().collect();
        Ok(out)
    }
}

#[derive(Debug, Deserialize)]
struct Listing {
    resource_providers: Vec<Listed>,
}

#[derive(Debug, Deserialize)]
struct Listed {
    uuid: Uuid,
    name: String,
    generation: u64,
    #[serde(default)]
    parent_provider_uuid: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
struct Inventories {
    inventories: BTreeMap<String, InventoryRecord>,
}

#[derive(Debug, Deserialize)]
struct InventoryRecord {
    total: u64,
    #[serde(default)]
    reserved: u64,
    #[serde(default = "one")]
    min_unit: u64,
    #[serde(default = "max_amount")]
    max_unit: u64,
    #[serde(default = "one")]
    step_size: u64,
    #[serde(default = "ratio_one")]
    allocation_ratio: f64,
}

fn one() -> u64 {
    1
}

fn max_amount() -> u64 {
    berth_core::limits::INVENTORY_AMOUNT_MAX
}

fn ratio_one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
struct Allocations {
    allocations: BTreeMap<Uuid, Held>,
}

#[derive(Debug, Deserialize)]
struct Held {
    resources: BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
struct Traits {
    traits: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Aggregates {
    aggregates: Vec<Uuid>,
}
