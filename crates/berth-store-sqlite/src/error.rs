//! How the driver's errors map to the port's.

use berth_store::StoreError;

/// Maps a driver error to the port's error.
pub(crate) fn map_err(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        let code = db.code().unwrap_or_default();
        // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
        if code == "5" || code == "6" || code == "517" || code == "262" {
            return StoreError::Busy;
        }
        if db.is_unique_violation() || db.is_foreign_key_violation() || db.is_check_violation() {
            return StoreError::Conflict {
                constraint: db.message().to_owned(),
            };
        }
    }
    StoreError::Backend(error.into())
}
