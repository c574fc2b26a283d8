//! Create decisions made at most once per `Idempotency-Key`: the decision is given the key's
//! record as the store holds it under the writer lock, answers with the object the key's first
//! request created when the record is live, and otherwise records the key in the same changes as
//! the new object (so in the same commit). Two requests with one key are serialized by the
//! writer lock like any two decisions: the second, in the same batch or a later one, is given
//! the first's record. The records are kept by the store alone, never in memory.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::idempotency;
use berth_core::model::idempotency::Idempotent;
use berth_core::{Catalog, Change, Instant, Rejection};
use uuid::Uuid;

impl Berth {
    /// Makes a create decision once per key: `find` renders the object a replayed key names
    /// (as it is now), `id_of` names the object a new decision created. Without a key this is
    /// [`Berth::write`].
    pub(crate) async fn write_once<T: Send + 'static>(
        &self,
        key: Option<Idempotent>,
        find: fn(&Catalog, Uuid) -> Option<T>,
        id_of: fn(&T) -> Uuid,
        decide: impl FnOnce(&Catalog, Instant) -> Result<(Vec<Change>, T), Rejection> + Send + 'static,
    ) -> Result<T, AppError> {
        let Some(key) = key else {
            return self.write(decide).await;
        };
        self.write_keyed(Some(key.key.clone()), move |catalog, record, now| {
            if let Some(id) = idempotency::replay(record, &key, now)? {
                let found = find(catalog, id).ok_or(Rejection::IdempotentObjectGone(id))?;
                return Ok((Vec::new(), found));
            }
            let (mut changes, created) = decide(catalog, now)?;
            changes.push(idempotency::record(&key, id_of(&created), now));
            Ok((changes, created))
        })
        .await
    }

    /// Whether the store holds a live record of `key`: a request refused before the writer
    /// lock must then go to its decision, which answers with what the key's first request made
    /// (or refuses the key's reuse). Asked only after the snapshot that refused it was taken, so
    /// that a first request committed before that snapshot is always found.
    pub(crate) async fn seen(&self, key: Option<&Idempotent>) -> Result<bool, AppError> {
        let Some(key) = key else {
            return Ok(false);
        };
        let now = self.now();
        let record = self.store.idempotency_record(&key.key).await?;
        Ok(record.is_some_and(|r| r.is_live(now)))
    }
}
