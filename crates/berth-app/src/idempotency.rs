//! Create decisions made at most once per `Idempotency-Key`: the decision looks the key up in
//! the catalog under the writer lock, answers with the object the key's first request created
//! when it finds one, and otherwise records the key in the same changes as the new object (so
//! in the same commit). Two requests with one key are serialized by the writer lock like any
//! two decisions: the second, in the same batch or a later one, finds the first's record.

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
        self.write(move |catalog, now| {
            if let Some(id) = idempotency::replay(catalog, &key, now)? {
                let found = find(catalog, id).ok_or(Rejection::IdempotentObjectGone(id))?;
                return Ok((Vec::new(), found));
            }
            let (mut changes, created) = decide(catalog, now)?;
            changes.extend(idempotency::record(catalog, &key, id_of(&created), now));
            Ok((changes, created))
        })
        .await
    }
}
