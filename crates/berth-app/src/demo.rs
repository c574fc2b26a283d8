//! The demo cloud: a small realistic cloud, written in one transaction when the catalog is
//! empty. Three availability zones, sixty compute hosts of three sizes with typed attributes,
//! NUMA children on a few large hosts, one shared storage pool, one public IPv4 pool and eight
//! bare-metal nodes; then what happens in it ([`activity`]): flavors, a dozen leases, a host in
//! maintenance and a host that is down.

mod activity;
mod draft;

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ProviderId;
use berth_core::decide::baremetal::{NewNode, enroll_node};
use berth_core::decide::inventory::{self as decide, NewHost, NewProvider};
use berth_core::model::baremetal::ProvisionState;
use berth_core::model::inventory::FullReservation;
use berth_core::{AggregateRecord, AttrValue, Inventory, Rejection};
use draft::{DEMO_ZONES, Draft, class, text, traits};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Compute hosts per zone.
const HOSTS_PER_ZONE: usize = 20;
/// Bare-metal nodes.
const BAREMETAL_NODES: usize = 8;

struct Size {
    label: &'static str,
    vcpus: u64,
    memory_mb: u64,
    local_gb: u64,
}

const SIZES: [Size; 3] = [
    Size {
        label: "small",
        vcpus: 16,
        memory_mb: 65_536,
        local_gb: 500,
    },
    Size {
        label: "medium",
        vcpus: 32,
        memory_mb: 131_072,
        local_gb: 1_000,
    },
    Size {
        label: "large",
        vcpus: 64,
        memory_mb: 262_144,
        local_gb: 2_000,
    },
];

impl Berth {
    /// Seeds the demo inventory if the catalog is empty; returns whether it did.
    pub async fn seed_demo(&self) -> Result<bool, AppError> {
        let mut uuids = Vec::new();
        // Enough ids for every provider, aggregate and lease the demo creates.
        let wanted =
            DEMO_ZONES.len() * HOSTS_PER_ZONE * 2 + BAREMETAL_NODES + 16 + activity::ids_needed();
        for _ in 0..wanted {
            uuids.push(self.new_uuid());
        }
        let notice_lead = self.notice_lead();
        self.write(move |catalog, now| {
            if !catalog.is_empty() {
                return Ok((vec![], false));
            }
            let mut draft = Draft {
                catalog: catalog.clone(),
                changes: vec![],
                now,
            };
            let mut ids = uuids.into_iter();
            let mut next = || ids.next().expect("invariant: enough demo ids");
            build(&mut draft, &mut next)?;
            activity::build(&mut draft, &mut next, notice_lead)?;
            Ok((draft.changes, true))
        })
        .await
    }
}

fn build(draft: &mut Draft, next: &mut impl FnMut() -> Uuid) -> Result<(), Rejection> {
    let now = draft.now;
    let zone_aggregates: Vec<Uuid> = DEMO_ZONES.iter().map(|_| next()).collect();
    for (zone, aggregate) in DEMO_ZONES.iter().zip(&zone_aggregates) {
        let record = AggregateRecord {
            name: Some((*zone).to_owned()),
            metadata: BTreeMap::from([("availability_zone".to_owned(), (*zone).to_owned())]),
        };
        draft.step(|c| decide::describe_aggregate(c, *aggregate, Some(record)))?;
    }
    draft.step(|c| decide::create_trait(c, "CUSTOM_GPU"))?;
    for (zone_idx, zone) in DEMO_ZONES.iter().enumerate() {
        for host_idx in 0..HOSTS_PER_ZONE {
            let size = &SIZES[host_idx % SIZES.len()];
            let name = format!("compute-{zone}-{:02}", host_idx + 1);
            let gpu = size.label == "large" && host_idx % 2 == 1;
            let attributes = BTreeMap::from([
                ("size".to_owned(), text(size.label)),
                ("gpu".to_owned(), AttrValue::Bool(gpu)),
                (
                    "cpu_arch".to_owned(),
                    text(if host_idx % 5 == 4 {
                        "aarch64"
                    } else {
                        "x86_64"
                    }),
                ),
                (
                    "rack".to_owned(),
                    text(&format!("{zone}-r{}", host_idx / 5 + 1)),
                ),
                ("ssd".to_owned(), AttrValue::Bool(size.label != "small")),
                (
                    "cpu_ghz".to_owned(),
                    AttrValue::Number(if gpu { 3.1 } else { 2.4 }),
                ),
            ]);
            let host = NewHost {
                reservable: true,
                name: name.clone(),
                uuid: ProviderId::new(next()),
                vcpus: Some(size.vcpus),
                memory_mb: Some(size.memory_mb),
                local_gb: Some(size.local_gb),
                availability_zone: Some((*zone).to_owned()),
                hypervisor_type: Some("QEMU".to_owned()),
                service_name: Some(name.clone()),
                attributes,
            };
            draft.step(|c| decide::enroll_host(c, &host, now))?;
            let uuid = draft.provider_uuid(&name);
            let aggregates = BTreeSet::from([zone_aggregates[zone_idx]]);
            draft.step(|c| decide::set_aggregates(c, uuid, None, aggregates, now))?;
            let mut host_traits = vec!["HW_CPU_X86_AVX2", "COMPUTE_VOLUME_MULTI_ATTACH"];
            if gpu {
                host_traits.push("CUSTOM_GPU");
            }
            let generation = draft.generation(uuid);
            draft.step(|c| {
                decide::set_traits(c, uuid, Some(generation), traits(&host_traits), now)
            })?;
            // The first large host of each zone has two NUMA cells with dedicated CPUs.
            if size.label == "large" && host_idx < SIZES.len() {
                for cell in 0..2 {
                    let numa = NewProvider {
                        uuid: ProviderId::new(next()),
                        name: format!("{name}-numa{cell}"),
                        parent: Some(uuid),
                        availability_zone: Some((*zone).to_owned()),
                    };
                    let numa_uuid = numa.uuid;
                    draft.step(|c| decide::create_provider(c, &numa, now))?;
                    let pcpu = BTreeMap::from([(class("PCPU"), Inventory::simple(16))]);
                    draft.step(|c| decide::set_inventories(c, numa_uuid, None, pcpu, now))?;
                    let generation = draft.generation(numa_uuid);
                    draft.step(|c| {
                        decide::set_traits(
                            c,
                            numa_uuid,
                            Some(generation),
                            traits(&["HW_NUMA_ROOT"]),
                            now,
                        )
                    })?;
                }
            }
        }
    }
    shared_pools(draft, next, &zone_aggregates)?;
    baremetal(draft, next)
}

fn shared_pools(
    draft: &mut Draft,
    next: &mut impl FnMut() -> Uuid,
    zone_aggregates: &[Uuid],
) -> Result<(), Rejection> {
    let now = draft.now;
    let pools = [
        (
            "shared-storage-az1",
            "DISK_GB",
            100_000,
            1.0,
            Some("az1"),
            zone_aggregates[0],
        ),
        (
            "public-ipv4-pool",
            "IPV4_ADDRESS",
            254,
            1.0,
            None,
            zone_aggregates[0],
        ),
    ];
    for (name, class_name, total, ratio, zone, aggregate) in pools {
        let pool = NewProvider {
            uuid: ProviderId::new(next()),
            name: name.to_owned(),
            parent: None,
            availability_zone: zone.map(str::to_owned),
        };
        let uuid = pool.uuid;
        draft.step(|c| decide::create_provider(c, &pool, now))?;
        let record = Inventory::new(total, 0, [1, total, 1], ratio, FullReservation::Allowed)
            .expect("invariant: demo inventory is valid");
        draft.step(|c| {
            decide::set_inventories(
                c,
                uuid,
                None,
                BTreeMap::from([(class(class_name), record)]),
                now,
            )
        })?;
        let generation = draft.generation(uuid);
        draft.step(|c| {
            decide::set_traits(
                c,
                uuid,
                Some(generation),
                traits(&["MISC_SHARES_VIA_AGGREGATE"]),
                now,
            )
        })?;
        // The IP pool is shared with every zone; the storage pool with az1 only.
        let aggregates = match class_name {
            "IPV4_ADDRESS" => zone_aggregates.iter().copied().collect(),
            _ => BTreeSet::from([aggregate]),
        };
        draft.step(|c| decide::set_aggregates(c, uuid, None, aggregates, now))?;
    }
    let ip_pool = draft.provider_uuid("public-ipv4-pool");
    let attributes = BTreeMap::from([
        ("network_id".to_owned(), text("public")),
        ("cidr".to_owned(), text("203.0.113.0/24")),
    ]);
    draft.step(|c| decide::set_attributes(c, ip_pool, attributes, now))
}

/// Eight bare-metal nodes of class `baremetal-gold`, available, spread over the zones; the
/// last two have GPUs.
fn baremetal(draft: &mut Draft, next: &mut impl FnMut() -> Uuid) -> Result<(), Rejection> {
    let now = draft.now;
    for idx in 0..BAREMETAL_NODES {
        let gpu = idx + 2 >= BAREMETAL_NODES;
        let node = NewNode {
            uuid: ProviderId::new(next()),
            name: Some(format!("bm-node-{:02}", idx + 1)),
            resource_class: "baremetal-gold".to_owned(),
            properties: BTreeMap::from([
                ("cpu_arch".to_owned(), text("x86_64")),
                ("cpus".to_owned(), AttrValue::Number(48.0)),
                ("memory_mb".to_owned(), AttrValue::Number(393_216.0)),
                ("local_gb".to_owned(), AttrValue::Number(1_920.0)),
                ("gpu".to_owned(), AttrValue::Bool(gpu)),
            ]),
            traits: match gpu {
                true => vec!["CUSTOM_GPU".to_owned()],
                false => Vec::new(),
            },
            availability_zone: Some(DEMO_ZONES[idx % DEMO_ZONES.len()].to_owned()),
            provision_state: ProvisionState::Available,
        };
        draft.step(|c| enroll_node(c, &node, now))?;
    }
    Ok(())
}
