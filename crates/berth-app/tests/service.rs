//! Use-case tests of the service over the in-memory reference store.

mod common;

use berth_app::{AppError, Berth, CreateProvider};
use berth_core::Rejection;
use berth_store::{MemStore, Store};
use common::{CountingIds, FixedClock};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

async fn service(store: &MemStore) -> Berth {
    replica(store, 0).await
}

/// A service whose ids start at `first_id`, so that replicas never draw the same id.
async fn replica(store: &MemStore, first_id: u64) -> Berth {
    Berth::open(
        Arc::new(store.clone()),
        Arc::new(FixedClock),
        Arc::new(CountingIds(AtomicU64::new(first_id))),
    )
    .await
    .expect("open")
}

#[tokio::test]
async fn the_memory_store_conforms() {
    berth_store::testkit::run_all(|| async { MemStore::new() }).await;
}

#[tokio::test]
async fn demo_seeds_once_and_is_consistent() {
    let store = MemStore::new();
    let berth = service(&store).await;
    assert!(berth.seed_demo().await.expect("seed"));
    let (providers, hosts, nodes, zones) = berth
        .read(|c| {
            c.check_invariants().expect("invariants");
            let hosts = c
                .providers()
                .filter(|p| p.host().is_some() && p.node().is_none())
                .count();
            let nodes = c.providers().filter(|p| p.node().is_some()).count();
            let zones: std::collections::BTreeSet<_> = c
                .providers()
                .filter_map(|p| p.availability_zone().map(str::to_owned))
                .collect();
            (c.len(), hosts, nodes, zones.len())
        })
        .await
        .expect("read");
    assert_eq!(hosts, 60);
    assert_eq!(nodes, 8);
    assert_eq!(zones, 3);
    assert!(providers >= 60 + 6 + 2 + 8);
    // What happens in the demo cloud: leases of several projects, one of them degraded by the
    // host that is down, a host in maintenance, flavors and running workloads.
    let (leases, projects, degraded, out, flavors, consumers) = berth
        .read(|c| {
            let projects: std::collections::BTreeSet<_> =
                c.leases().map(|l| l.project_id.clone()).collect();
            let degraded: Vec<String> = c
                .leases()
                .filter(|l| l.degraded)
                .map(|l| l.name.to_string())
                .collect();
            let out: Vec<(String, &'static str)> = c
                .providers()
                .filter(|p| !p.is_up())
                .map(|p| (p.name().to_owned(), p.status().as_str()))
                .collect();
            (
                c.leases().count(),
                projects.len(),
                degraded,
                out,
                c.flavors().count(),
                c.consumers().count(),
            )
        })
        .await
        .expect("read");
    assert!(leases >= 12, "a dozen leases, not {leases}");
    assert!(projects >= 4, "several projects, not {projects}");
    assert_eq!(degraded, ["gpu-training-42"]);
    assert_eq!(
        out,
        [
            ("compute-az1-03".to_owned(), "maintenance"),
            ("compute-az3-12".to_owned(), "down"),
        ]
    );
    assert!(flavors >= 2 && consumers > 0);
    assert!(
        !berth.seed_demo().await.expect("second seed"),
        "a second seed changes nothing"
    );
    assert_eq!(berth.read(|c| c.len()).await.expect("read"), providers);
}

#[tokio::test]
async fn a_second_replica_sees_writes_of_the_first() {
    let store = MemStore::new();
    let first = replica(&store, 0).await;
    let second = replica(&store, 1_000).await;
    let cmd = CreateProvider {
        uuid: None,
        name: "cn1".into(),
        parent: None,
    };
    let uuid = first.create_provider(cmd.clone()).await.expect("create");
    assert!(
        second
            .read(|c| c.provider(uuid).is_some())
            .await
            .expect("read")
    );
    // The second replica decides over the fresh catalog: the duplicate is refused.
    let err = second.create_provider(cmd).await.expect_err("duplicate");
    assert!(matches!(
        err,
        AppError::Rejected(Rejection::DuplicateName(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_are_batched_without_losing_any_answer() {
    let store = MemStore::new();
    let berth = Arc::new(service(&store).await);
    let tasks: Vec<_> = (0..64u32)
        .map(|n| {
            let berth = Arc::clone(&berth);
            tokio::spawn(async move {
                let cmd = CreateProvider {
                    uuid: None,
                    name: format!("p{}", n % 8),
                    parent: None,
                };
                berth.create_provider(cmd).await
            })
        })
        .collect();
    let (mut created, mut refused) = (0, 0);
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => created += 1,
            Err(AppError::Rejected(Rejection::DuplicateName(_))) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        (created, refused),
        (8, 56),
        "each name is created once, every caller is answered"
    );
    assert_eq!(berth.read(|c| c.len()).await.expect("read"), 8);
    let stored = store.load_catalog().await.expect("load");
    assert_eq!(
        stored.providers.len(),
        8,
        "the store holds exactly what readers see"
    );
}

/// A search runs on a thread of lower priority than the runtime's (nice 10 on Linux), so that
/// it takes only the CPU the requests that are not searching leave.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn searches_run_at_a_lower_priority() {
    let store = MemStore::new();
    let berth = service(&store).await;
    let nice_of_this_thread = || {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
        // The fields after the command name, which ends at the last ')'.
        let rest = &stat[stat.rfind(')').expect("comm") + 2..];
        rest.split(' ')
            .nth(16)
            .expect("nice")
            .parse::<i32>()
            .expect("a number")
    };
    let outside = nice_of_this_thread();
    let inside = berth
        .search(move |_catalog, _stop| nice_of_this_thread())
        .await
        .expect("searched");
    assert_eq!(inside, outside + 10, "outside {outside}");
}
