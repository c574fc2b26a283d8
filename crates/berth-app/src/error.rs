//! The application error: a domain rejection, a busy store, a request whose deadline passed
//! before it was decided, or a storage fault.

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
    /// The request's deadline passed before any of its decisions was taken: nothing was
    /// changed, and retrying is safe.
    #[error("the request timed out before it was decided; nothing was changed")]
    TimedOut,
    /// The store failed.
    #[error("storage failure")]
    Store(#[source] StoreError),
}
