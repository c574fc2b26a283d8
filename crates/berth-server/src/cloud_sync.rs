//! Keeping provider clouds' capacity current: every interval (`[provider_clouds]
//! sync_interval_seconds`, 30 s by default) berth reads each registered cloud's Placement, with
//! the microversion Nova uses, and hands what it read to the core's sync decision, which writes
//! only what differs through the normal write path.
//!
//! One read: `GET /resource_providers` (at most [`PROVIDER_CLOUD_PROVIDERS_MAX`] providers);
//! then, for each provider new to berth or whose generation moved, its inventories, usages,
//! traits and aggregates. A cloud whose generations all stand costs one request. Tokens are
//! kept between reads and renewed when Placement answers 401 (the sealed password opens with
//! the configured key). No remote call runs under the writer lock: the write comes after.
//!
//! A read that fails (unreachable, refused, an answer that is not Placement's or too large)
//! marks the cloud unknown; the next good read clears that. Each state is a metric,
//! `berth_provider_cloud_up{provider="<id>"}`, and the in-memory board below keeps the time of
//! the last attempt and success for `GET /promise/providers`.

use crate::clock::SystemClock;
use crate::clouds::CloudClient;
use crate::keystone::Secret;
use berth_app::{Berth, Clock as _};
use berth_core::Instant;
use berth_core::catalog::provider_cloud_of;
use berth_core::limits::{PROVIDER_CLOUD_ANSWER_BYTES_MAX, PROVIDER_CLOUD_PROVIDERS_MAX};
use berth_core::model::cloud::{
    ProviderCloud, RemoteDetails, RemoteInventory, RemoteProvider, RemoteSnapshot,
    local_provider_uuid,
};
use berth_core::model::id::ProviderId;
use berth_core::model::name::{ResourceClass, TraitName};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often clouds are read when the configuration does not say.
pub const SYNC_INTERVAL_DEFAULT: Duration = Duration::from_secs(30);
/// The Placement microversion berth reads with (Nova's).
pub const PLACEMENT_VERSION: &str = "placement 1.39";

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

/// A token and the Placement endpoint its catalog gave.
struct Session {
    token: Secret,
    placement_url: String,
}

/// The background task that reads provider clouds.
pub struct CloudSync {
    berth: Arc<Berth>,
    client: Arc<CloudClient>,
    board: SyncBoard,
    sessions: HashMap<Uuid, Session>,
}

impl CloudSync {
    /// A task reading clouds through `client` into `berth`, reporting on `board`.
    pub fn new(berth: Arc<Berth>, client: Arc<CloudClient>, board: SyncBoard) -> CloudSync {
        CloudSync {
            berth,
            client,
            board,
            sessions: HashMap::new(),
        }
    }

    /// Reads every cloud each `interval` (the first time one interval after the start) until
    /// `stop`.
    pub async fn run(mut self, interval: Duration, stop: CancellationToken) {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
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
        self.sessions.retain(|id, _| ids.contains(id));
        self.board.retain(&ids);
        for cloud in &clouds {
            self.sync_one(cloud).await;
        }
    }

    async fn sync_one(&mut self, cloud: &ProviderCloud) {
        let id = cloud.id;
        let provider = id.to_string();
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
                self.sessions.remove(&id);
                self.board.record(id, SystemClock.now(), false);
                metrics::gauge!("berth_provider_cloud_up", "provider" => provider).set(0.0);
                tracing::warn!(provider = %id, %error, "provider cloud unreachable");
                if let Err(error) = self.berth.provider_cloud_unreachable(id, error).await {
                    tracing::warn!(provider = %id, %error, "provider cloud state not written");
                }
            }
        }
    }

    /// Reads `cloud`'s Placement: every provider, and the details of those that changed.
    async fn read_cloud(&mut self, cloud: &ProviderCloud) -> Result<RemoteSnapshot, String> {
        let listing: Listing = self.get(cloud, "/resource_providers").await?;
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
                            .map(|p| (*r, p.generation()))
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
        let inventories: Inventories = self.get(cloud, &format!("{base}/inventories")).await?;
        let usages: Usages = self.get(cloud, &format!("{base}/usages")).await?;
        let traits: Traits = self.get(cloud, &format!("{base}/traits")).await?;
        let aggregates: Aggregates = self.get(cloud, &format!("{base}/aggregates")).await?;
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
        for (name, used) in usages.usages {
            out.usages.insert(class(&name)?, used);
        }
        out.traits = traits
            .traits
            .iter()
            .filter_map(|t| TraitName::parse(t))
            .collect();
        out.aggregates = aggregates.aggregates.into_iter().collect();
        Ok(out)
    }

    /// Authenticates against the cloud's Keystone with its sealed password.
    async fn login(&self, cloud: &ProviderCloud) -> Result<Session, String> {
        let key = self
            .client
            .key()
            .ok_or("no [provider_clouds] credential_key is configured to open the credentials")?;
        let credentials = key
            .open(cloud.id, &cloud.sealed_credentials)
            .ok_or("the credentials do not open with the configured key")?;
        let connected = self
            .client
            .connect(
                &cloud.auth_url,
                &cloud.username,
                &Secret::new(credentials.password),
                &cloud.project,
                cloud.region.as_deref(),
            )
            .await
            .map_err(|error| error.to_string())?;
        Ok(Session {
            token: connected.token,
            placement_url: connected.placement_url,
        })
    }

    /// `GET` of a Placement path, authenticating first when needed and once more on a 401.
    async fn get<T: DeserializeOwned>(
        &mut self,
        cloud: &ProviderCloud,
        path: &str,
    ) -> Result<T, String> {
        for attempt in 0..2 {
            if !self.sessions.contains_key(&cloud.id) {
                let session = self.login(cloud).await?;
                self.sessions.insert(cloud.id, session);
            }
            let session = &self.sessions[&cloud.id];
            let url = format!("{}{path}", session.placement_url);
            let (status, body) = self
                .client
                .placement_get(
                    &url,
                    &session.token,
                    PLACEMENT_VERSION,
                    PROVIDER_CLOUD_ANSWER_BYTES_MAX,
                )
                .await?;
            if status == 401 && attempt == 0 {
                self.sessions.remove(&cloud.id);
                continue;
            }
            if status != 200 {
                return Err(format!("Placement answered {status} to GET {url}"));
            }
            return serde_json::from_slice(&body).map_err(|error| {
                format!("Placement's answer to GET {url} is not as expected: {error}")
            });
        }
        Err(format!("Placement refused a fresh token for GET {path}"))
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
struct Usages {
    usages: BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
struct Traits {
    traits: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Aggregates {
    aggregates: Vec<Uuid>,
}
