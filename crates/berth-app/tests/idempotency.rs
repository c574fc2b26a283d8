//! Idempotency records live in the store alone: a keyed create is answered from the record the
//! store holds (also by a service opened afresh over it), and a commit that records keys prunes
//! the records that expired, oldest first.

mod common;

use berth_app::{Berth, CreateLease};
use berth_core::model::idempotency::{IDEMPOTENCY_TTL, IdempotencyKey, Idempotent};
use berth_store::{MemStore, Store};
use common::{ManualClock, host, one_host_lease, open};

const T0: i64 = 1_700_000_000_000_000;
const HOUR: i64 = 3_600_000_000;

fn key(name: &str) -> IdempotencyKey {
    IdempotencyKey {
        project_id: "p1".into(),
        route: "POST /reservation/v1/leases".into(),
        key: name.into(),
    }
}

/// A lease of one host for an hour, a day after `now`, with the key `name`.
fn keyed_lease(name: &str, now: i64) -> CreateLease {
    let start = now + 24 * HOUR;
    CreateLease {
        idempotency: Some(Idempotent {
            key: key(name),
            fingerprint: "request".into(),
        }),
        ..one_host_lease(name, start, start + HOUR)
    }
}

async fn enroll(berth: &Berth, name: &str) {
    berth.enroll_host(host(name, "az1")).await.expect("enroll");
}

async fn recorded(store: &MemStore, name: &str) -> bool {
    store
        .idempotency_record(&key(name))
        .await
        .expect("read")
        .is_some()
}

#[tokio::test]
async fn a_key_is_answered_from_the_store_and_expired_records_are_pruned() {
    let store = MemStore::new();
    let clock = ManualClock::at(T0);
    let berth = open(&store, &clock, 0).await;
    enroll(&berth, "cn1").await;
    let first = berth
        .create_lease(keyed_lease("first", T0))
        .await
        .expect("created");
    assert!(recorded(&store, "first").await);
    // A service opened afresh over the store (a restart) answers the key with the first lease.
    let reopened = open(&store, &clock, 1_000).await;
    let again = reopened
        .create_lease(keyed_lease("first", T0))
        .await
        .expect("replayed");
    assert_eq!(again.id, first.id);
    // Just before the key expires, a commit that records another key leaves it.
    let before_expiry = T0 + IDEMPOTENCY_TTL.as_micros() - 1;
    clock.set(before_expiry);
    enroll(&reopened, "cn2").await;
    reopened
        .create_lease(keyed_lease("second", before_expiry))
        .await
        .expect("created");
    assert!(recorded(&store, "first").await, "still live");
    // Once it expired, the next commit that records a key prunes it; the live one stays.
    let later = T0 + IDEMPOTENCY_TTL.as_micros() + HOUR;
    clock.set(later);
    enroll(&reopened, "cn3").await;
    assert!(
        recorded(&store, "first").await,
        "a commit that records no key prunes nothing"
    );
    reopened
        .create_lease(keyed_lease("third", later))
        .await
        .expect("created");
    assert!(!recorded(&store, "first").await, "pruned");
    assert!(recorded(&store, "second").await);
    assert!(recorded(&store, "third").await);
    // The key is free again: a new request with it makes a new lease.
    let anew = reopened
        .create_lease(keyed_lease("first", later))
        .await
        .expect("created");
    assert_ne!(anew.id, first.id);
}
