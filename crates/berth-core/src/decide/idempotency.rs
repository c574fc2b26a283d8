//! Idempotency decisions: whether a request's key replays an earlier result, and the changes
//! that record a key (pruning expired records as they go). See [`crate::model::idempotency`].

use crate::catalog::Catalog;
use crate::change::Change;
use crate::limits::{IDEMPOTENCY_KEY_LEN_MAX, IDEMPOTENCY_PRUNE_MAX};
use crate::model::idempotency::{IdempotencyRecord, Idempotent};
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::sync::Arc;
use uuid::Uuid;

/// The object an earlier request with this key created, if a live record names one:
/// `Ok(Some(id))` for the same request, `Ok(None)` for a key not seen (or expired), and
/// [`Rejection::IdempotencyKeyReused`] for a key seen with a different request.
pub fn replay(
    catalog: &Catalog,
    request: &Idempotent,
    now: Instant,
) -> Result<Option<Uuid>, Rejection> {
    let Some(record) = catalog
        .idempotency_record(&request.key)
        .filter(|r| r.is_live(now))
    else {
        return Ok(None);
    };
    match record.fingerprint == request.fingerprint {
        true => Ok(Some(record.object_id)),
        false => Err(Rejection::IdempotencyKeyReused(request.key.key.clone())),
    }
}

/// The changes that record `request` as having created `object_id` at `now`, and remove up to
/// [`IDEMPOTENCY_PRUNE_MAX`] expired records. Every recording decision prunes at least as many
/// expired records as it adds (while there are any), so the records never outnumber the keys
/// seen in the last [`crate::model::idempotency::IDEMPOTENCY_TTL`] plus what was there
/// before.
pub fn record(
    catalog: &Catalog,
    request: &Idempotent,
    object_id: Uuid,
    now: Instant,
) -> Vec<Change> {
    assert!(!request.key.key.is_empty());
    assert!(request.key.key.len() <= IDEMPOTENCY_KEY_LEN_MAX);
    let mut changes: Vec<Change> = catalog
        .idempotency_expired(now)
        .filter(|key| key.as_ref() != &request.key)
        .take(IDEMPOTENCY_PRUNE_MAX)
        .map(|key| Change::IdempotencySet {
            key: Arc::clone(key),
            record: None,
        })
        .collect();
    changes.push(Change::IdempotencySet {
        key: Arc::new(request.key.clone()),
        record: Some(Arc::new(IdempotencyRecord {
            fingerprint: request.fingerprint.clone(),
            object_id,
            created_at: now,
        })),
    });
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::idempotency::{IDEMPOTENCY_TTL, IdempotencyKey};

    fn request(project: &str, key: &str, fingerprint: &str) -> Idempotent {
        Idempotent {
            key: IdempotencyKey {
                project_id: project.to_owned(),
                route: "POST /reservation/v1/leases".to_owned(),
                key: key.to_owned(),
            },
            fingerprint: fingerprint.to_owned(),
        }
    }

    const T0: Instant = Instant::from_micros(1_700_000_000_000_000);

    fn at(micros: i64) -> Instant {
        Instant::from_micros(T0.as_micros() + micros)
    }

    #[test]
    fn a_key_replays_its_object_for_the_same_request_only() {
        let mut catalog = Catalog::new();
        let first = request("p1", "k", "f1");
        assert_eq!(replay(&catalog, &first, T0), Ok(None));
        let object = Uuid::from_u128(7);
        catalog.apply(&record(&catalog, &first, object, T0));
        catalog.check_invariants().expect("invariants");
        assert_eq!(replay(&catalog, &first, at(1)), Ok(Some(object)));
        assert_eq!(
            replay(&catalog, &request("p1", "k", "f2"), at(1)),
            Err(Rejection::IdempotencyKeyReused("k".into()))
        );
        // Another project's same key is another key.
        assert_eq!(replay(&catalog, &request("p2", "k", "f2"), at(1)), Ok(None));
        // Expired: the key is free again, and recording it anew replaces the record.
        let later = at(IDEMPOTENCY_TTL.as_micros());
        assert_eq!(replay(&catalog, &request("p1", "k", "f2"), later), Ok(None));
        let changes = record(
            &catalog,
            &request("p1", "k", "f2"),
            Uuid::from_u128(8),
            later,
        );
        assert_eq!(
            changes.len(),
            1,
            "the key's own record is replaced, not pruned"
        );
        catalog.apply(&changes);
        catalog.check_invariants().expect("invariants");
        assert_eq!(
            replay(&catalog, &request("p1", "k", "f2"), later),
            Ok(Some(Uuid::from_u128(8)))
        );
    }

    #[test]
    fn recording_prunes_a_bounded_number_of_expired_records() {
        let mut catalog = Catalog::new();
        let n_old = IDEMPOTENCY_PRUNE_MAX + 4;
        for n in 0..n_old {
            let old = request("p1", &format!("old-{n}"), "f");
            let changes = record(&catalog, &old, Uuid::from_u128(n as u128), at(n as i64));
            catalog.apply(&changes);
        }
        assert_eq!(catalog.idempotency_records().count(), n_old);
        let later = at(IDEMPOTENCY_TTL.as_micros() + n_old as i64);
        let changes = record(
            &catalog,
            &request("p1", "new", "f"),
            Uuid::from_u128(99),
            later,
        );
        assert_eq!(changes.len(), IDEMPOTENCY_PRUNE_MAX + 1);
        catalog.apply(&changes);
        catalog.check_invariants().expect("invariants");
        // The oldest went first.
        let left: Vec<&str> = catalog
            .idempotency_records()
            .map(|(key, _)| key.key.as_str())
            .collect();
        let mut expected: Vec<String> = (IDEMPOTENCY_PRUNE_MAX..n_old)
            .map(|n| format!("old-{n}"))
            .collect();
        expected.push("new".into());
        let mut left: Vec<String> = left.into_iter().map(str::to_owned).collect();
        left.sort();
        expected.sort();
        assert_eq!(left, expected);
    }
}
