//! What happens in the demo cloud once its inventory exists: Promise flavors, workloads already
//! running without a reservation, a dozen leases of several projects spread over the next days
//! (whole hosts, instance slots and bare-metal nodes; some starting at once, some later), a host
//! in maintenance and a host that is down.
//!
//! Everything is decided by the core, in order, over the draft catalog: leases are admitted by
//! `decide::lease::create_lease` and the failures go through `decide::health::set_status`, so
//! the lease taken off the host in maintenance is healed onto another one, and the lease that
//! needs every GPU host of `az3` is degraded when one of them is down. Leases starting "now"
//! are started by the lifecycle engine when the server runs.

use super::draft::{DEMO_ZONES, Draft, class};
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::health;
use berth_core::decide::lease::{NewLease, create_lease};
use berth_core::decide::promise::create_flavor;
use berth_core::model::lease::{Affinity, ReservationSpec};
use berth_core::model::promise::Flavor;
use berth_core::{Instant, ProviderStatus, Rejection};
use std::collections::BTreeMap;
use uuid::Uuid;

const HOUR_MICROS: i64 = 3_600_000_000;

/// Ids each demo lease needs besides its reservations: the lease and its three events.
const IDS_PER_LEASE: usize = 4;

/// What a demo lease reserves: whole hosts (or nodes), or instance slots of a size
/// (vCPUs, MB, GB), each with a Blazar filter.
enum Ask {
    Hosts(u32, &'static str),
    Instances(u32, (u64, u64, u64), Affinity, &'static str),
}

/// A demo lease: name, project, user, window in hours from now, and what it reserves.
type DemoLease = (&'static str, &'static str, &'static str, (i64, i64), Ask);

const GOLD: &str = r#"["==", "$resource_class", "baremetal-gold"]"#;

/// The demo leases, in the order they are admitted.
#[rustfmt::skip]
const LEASES: [DemoLease; 13] = [
    ("5g-core-prod", "telco-core", "alice", (0, 150),
        Ask::Hosts(2, r#"["and", ["==", "$availability_zone", "az1"], ["==", "$size", "large"]]"#)),
    ("gpu-training-42", "ml-platform", "carol", (0, 72),
        Ask::Hosts(3, r#"["and", ["==", "$availability_zone", "az3"], ["==", "$gpu", true]]"#)),
    ("ml-inference", "ml-platform", "carol", (0, 120),
        Ask::Instances(6, (8, 32_768, 100), Affinity::DifferentHosts,
            r#"["==", "$availability_zone", "az3"]"#)),
    ("ci-nightly", "ci-runners", "bob", (0, 20),
        Ask::Instances(12, (4, 8_192, 40), Affinity::Any,
            r#"["and", ["==", "$availability_zone", "az1"], ["==", "$rack", "az1-r1"]]"#)),
    ("smoke-tests", "ci-runners", "bob", (0, 4),
        Ask::Instances(4, (2, 4_096, 20), Affinity::DifferentHosts,
            r#"["and", ["==", "$availability_zone", "az2"], ["==", "$rack", "az2-r4"]]"#)),
    ("postgres-bm-cluster", "dbaas", "frank", (0, 168), Ask::Hosts(3, GOLD)),
    ("transcode-q3", "media", "dave", (10, 40),
        Ask::Instances(10, (8, 16_384, 50), Affinity::Any,
            r#"["and", ["==", "$availability_zone", "az1"], ["==", "$cpu_arch", "aarch64"]]"#)),
    ("edge-upf-staging", "telco-core", "alice", (6, 54),
        Ask::Hosts(1, r#"["and", ["==", "$availability_zone", "az2"], ["==", "$size", "medium"]]"#)),
    ("render-farm", "media", "dave", (26, 74),
        Ask::Instances(6, (16, 65_536, 200), Affinity::DifferentHosts,
            r#"["and", ["==", "$availability_zone", "az2"], ["==", "$size", "large"]]"#)),
    ("genomics-batch", "research", "erin", (44, 122),
        Ask::Instances(6, (16, 65_536, 500), Affinity::Any,
            r#"["and", ["==", "$availability_zone", "az1"], ["==", "$rack", "az1-r3"]]"#)),
    ("telco-lab-bm", "telco-core", "alice", (50, 98), Ask::Hosts(2, GOLD)),
    ("climate-sim", "research", "erin", (76, 148),
        Ask::Hosts(4, r#"["and", ["==", "$availability_zone", "az2"], ["==", "$rack", "az2-r2"]]"#)),
    ("ci-weekend", "ci-runners", "bob", (100, 148),
        Ask::Instances(16, (4, 8_192, 40), Affinity::Any,
            r#"["and", ["==", "$availability_zone", "az3"], ["==", "$rack", "az3-r4"]]"#)),
];

fn spec(ask: &Ask) -> ReservationSpec {
    match *ask {
        Ask::Hosts(count, filter) => ReservationSpec::Host {
            min: count,
            max: count,
            hypervisor_properties: String::new().into(),
            resource_properties: filter.into(),
            before_end: "default".into(),
        },
        Ask::Instances(amount, (vcpus, memory_mb, disk_gb), affinity, filter) => {
            ReservationSpec::Instance {
                vcpus,
                memory_mb,
                disk_gb,
                amount,
                affinity,
                resource_properties: filter.into(),
            }
        }
    }
}

/// Hosts (by their number in each zone) running workloads without a reservation, with how
/// many `m1.xlarge` virtual machines each runs.
const WORKLOADS: [(usize, u64); 6] = [(4, 1), (5, 3), (13, 1), (14, 3), (17, 3), (20, 3)];
/// The size of those virtual machines: `m1.xlarge`.
const VM: (u64, u64, u64) = (8, 16_384, 160);

/// How many ids [`build`] draws.
pub(super) fn ids_needed() -> usize {
    // One reservation per demo lease.
    let leases = LEASES.len() * (IDS_PER_LEASE + 1);
    let vms: u64 = WORKLOADS.iter().map(|(_, n)| n).sum();
    leases + DEMO_ZONES.len() * usize::try_from(vms).unwrap_or(0)
}

/// Virtual machines already running in every zone, placed through Placement without a
/// reservation (what the capacity chart shows as allocated for the whole window).
fn workloads(draft: &mut Draft, next: &mut impl FnMut() -> Uuid) -> Result<(), Rejection> {
    let now = draft.now;
    let (vcpus, memory_mb, disk_gb) = VM;
    for zone in DEMO_ZONES {
        for (number, count) in WORKLOADS {
            let host = draft.provider_uuid(&format!("compute-{zone}-{number:02}"));
            for _ in 0..count {
                let write = ConsumerWrite {
                    consumer: next(),
                    project_id: "web-frontend".to_owned(),
                    user_id: "svc-deploy".to_owned(),
                    consumer_type: Some("INSTANCE".to_owned()),
                    generation: ConsumerGeneration::New,
                    allocations: BTreeMap::from([(
                        host,
                        BTreeMap::from([
                            (class("VCPU"), vcpus),
                            (class("MEMORY_MB"), memory_mb),
                            (class("DISK_GB"), disk_gb),
                        ]),
                    )]),
                    reservation: None,
                };
                draft.step(|c| set_allocations(c, &[write], now))?;
            }
        }
    }
    Ok(())
}

fn flavors(draft: &mut Draft) -> Result<(), Rejection> {
    let now = draft.now;
    let sizes = [
        ("m1.small", 1, 2_048, 20),
        ("m1.medium", 2, 4_096, 40),
        ("m1.large", 4, 8_192, 80),
        ("m1.xlarge", 8, 16_384, 160),
    ];
    for (name, vcpus, ram_mb, disk_gb) in sizes {
        let flavor = Flavor {
            id: name.to_owned(),
            name: name.to_owned(),
            vcpus,
            ram_mb,
            disk_gb,
            cpu_architecture: None,
            extra_specs: BTreeMap::new(),
            created_at: now,
        };
        draft.step(|c| create_flavor(c, flavor))?;
    }
    Ok(())
}

fn at(now: Instant, hours: i64) -> Instant {
    Instant::from_micros(now.as_micros() + hours * HOUR_MICROS)
}

/// Flavors, workloads, leases and two hosts out of service, decided in order over the draft.
pub(super) fn build(
    draft: &mut Draft,
    next: &mut impl FnMut() -> Uuid,
    notice_lead: berth_core::Span,
) -> Result<(), Rejection> {
    let now = draft.now;
    flavors(draft)?;
    workloads(draft, next)?;
    for (name, project, user, (start_hours, end_hours), ask) in &LEASES {
        let new = NewLease {
            id: berth_core::LeaseId::new(next()),
            name: (*name).to_owned(),
            project_id: (*project).to_owned(),
            user_id: (*user).to_owned(),
            start: at(now, *start_hours),
            end: at(now, *end_hours),
            before_end: None,
            reservations: vec![(berth_core::ReservationId::new(next()), spec(ask))],
            event_ids: [next(), next(), next()],
            notice_lead,
        };
        let horizon = at(new.start, 24);
        draft.step(|c| {
            create_lease(
                c,
                &new,
                now,
                &berth_core::decide::admission::Search::until(horizon),
            )
            .map(|(changes, _)| changes)
        })?;
    }
    let out_of_service = [
        (
            "compute-az1-03",
            ProviderStatus::Maintenance,
            "firmware upgrade (BIOS 2.19)",
        ),
        (
            "compute-az3-12",
            ProviderStatus::Down,
            "power supply failed",
        ),
    ];
    for (name, status, reason) in out_of_service {
        let uuid = draft.provider_uuid(name);
        draft.step(|c| {
            health::set_status(c, uuid, status, Some(reason.to_owned()), now)
                .map(|(changes, _)| changes)
        })?;
    }
    Ok(())
}
