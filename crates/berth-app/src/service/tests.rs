//! The write path's own guarantees, tested with decisions no use case would make.

use super::*;
use berth_core::ProviderId;
use berth_core::model::provider::ProviderRow;
use berth_store::MemStore;

struct FixedClock;
impl Clock for FixedClock {
    fn now(&self) -> Instant {
        Instant::from_micros(1_700_000_000_000_000)
    }
}

struct CountingIds(std::sync::atomic::AtomicU64);
impl IdGen for CountingIds {
    fn uuid(&self) -> Uuid {
        let next = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Uuid::from_u128(u128::from(next) + 1)
    }
}

async fn open(store: &MemStore) -> Berth {
    Berth::open(
        Arc::new(store.clone()),
        Arc::new(FixedClock),
        Arc::new(CountingIds(std::sync::atomic::AtomicU64::new(0))),
    )
    .await
    .expect("open")
}

fn row(id: i64, name: &str, parent: Option<ProviderId>, now: Instant) -> ProviderRow {
    let uuid = ProviderId::from_u128(u128::try_from(id).expect("positive") + 1_000);
    ProviderRow {
        id,
        uuid,
        name: name.to_owned(),
        parent,
        root: uuid,
        generation: 0,
        availability_zone: None,
        created_at: now,
        updated_at: now,
    }
}

/// A decision whose changes would break an invariant (a provider under a parent that does not
/// exist) is caught before the commit: its caller gets an error, nothing reaches the store, and
/// the next decision is made over a catalog without it.
#[tokio::test]
async fn a_decision_that_breaks_an_invariant_is_never_committed() {
    let store = MemStore::new();
    let berth = open(&store).await;
    let orphan = berth
        .write(|_, now| {
            let missing = Some(ProviderId::from_u128(7));
            Ok((
                vec![Change::ProviderCreated(row(1, "orphan", missing, now))],
                (),
            ))
        })
        .await;
    assert!(
        orphan.is_err(),
        "the broken decision was answered {orphan:?}"
    );
    let seq = berth.read(Catalog::seq).await.expect("read");
    assert_eq!(seq, 0, "nothing was committed");

    let valid = berth
        .write(|_, now| {
            Ok((
                vec![Change::ProviderCreated(row(2, "valid", None, now))],
                (),
            ))
        })
        .await;
    assert!(valid.is_ok(), "{valid:?}");
    let reopened = open(&store).await;
    let names = reopened
        .read(|c| {
            c.providers()
                .map(|p| p.name().to_owned())
                .collect::<Vec<_>>()
        })
        .await
        .expect("read");
    assert_eq!(names, ["valid"]);
}
