//! The application error: a domain rejection, a busy store, or a storage fault.

use berth_core::Rejection;
use berth_store::StoreError;

/// Why a use case failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The core refused the command; the caller can fix the request.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The store is busy; retrying later may succeed.
    #[error("the database is busy")]
    Busy,
    /// The store failed.
    #[error("storage failure")]
    Store(#[source] StoreError),
}
