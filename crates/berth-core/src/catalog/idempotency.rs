//! Idempotency records, by key and by age.

use super::state::{Catalog, IdempotencyIndex};
use crate::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use crate::model::time::Instant;
use std::sync::Arc;

impl IdempotencyIndex {
    /// Sets or removes the record of `key`. The key and record are shared, not copied: each
    /// index holds a pointer to the one value the change carries.
    pub(super) fn set(
        &mut self,
        key: &Arc<IdempotencyKey>,
        record: Option<&Arc<IdempotencyRecord>>,
    ) {
        if let Some(old) = self.records.remove(key.as_ref()) {
            self.by_age.remove(&(old.created_at, Arc::clone(key)));
        }
        if let Some(record) = record {
            self.by_age.insert((record.created_at, Arc::clone(key)));
            self.records.insert(Arc::clone(key), Arc::clone(record));
        }
    }
}

impl Catalog {
    /// The record of an idempotency key, live or expired.
    pub fn idempotency_record(&self, key: &IdempotencyKey) -> Option<&IdempotencyRecord> {
        self.idempotency.records.get(key).map(AsRef::as_ref)
    }

    /// Every idempotency record, in no order.
    pub fn idempotency_records(
        &self,
    ) -> impl Iterator<Item = (&IdempotencyKey, &IdempotencyRecord)> {
        self.idempotency
            .records
            .iter()
            .map(|(key, record)| (key.as_ref(), record.as_ref()))
    }

    /// Keys whose record expired by `now`, oldest first.
    pub fn idempotency_expired(&self, now: Instant) -> impl Iterator<Item = &Arc<IdempotencyKey>> {
        self.idempotency
            .by_age
            .iter()
            .take_while(move |(at, key)| {
                self.idempotency
                    .records
                    .get(key.as_ref())
                    .is_some_and(|r| r.created_at == *at && !r.is_live(now))
            })
            .map(|(_, key)| key)
    }
}
