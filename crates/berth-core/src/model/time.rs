//! Points in time as integer microseconds since the Unix epoch.
//!
//! The core does arithmetic on integers only; parsing and formatting of calendar dates happens at
//! the edges (the HTTP surfaces), never here.

/// A point in time: microseconds since 1970-01-01T00:00:00Z.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Instant(i64);

impl Instant {
    /// The epoch itself.
    pub const EPOCH: Instant = Instant(0);

    /// Wraps a count of microseconds since the epoch.
    pub const fn from_micros(micros: i64) -> Instant {
        Instant(micros)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }
}
