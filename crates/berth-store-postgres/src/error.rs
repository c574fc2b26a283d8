//! How the driver's errors map to the port's.

use berth_store::StoreError;

/// Maps a driver error to the port's error.
pub(crate) fn map_err(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        let code = db.code().unwrap_or_default();
        // serialization_failure, deadlock_detected, lock_not_available (lock_timeout).
        if code == "40001" || code == "40P01" || code == "55P03" {
            return StoreError::Busy;
        }
        if db.is_unique_violation() || db.is_foreign_key_violation() || db.is_check_violation() {
            return StoreError::Conflict {
                constraint: db.constraint().unwrap_or(db.message()).to_owned(),
            };
        }
    }
    StoreError::Backend(error.into())
}
