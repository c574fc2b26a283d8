//! Points in time as integer microseconds since the Unix epoch, and lengths of time.
//!
//! The core does arithmetic on integers only; parsing and formatting of calendar dates happens at
//! the edges (the HTTP surfaces), never here. Arithmetic saturates: an instant never wraps around
//! past the far future or the far past, and a span is never negative.

/// A point in time: microseconds since 1970-01-01T00:00:00Z.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
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

    /// The span from `earlier` to this instant, or zero when `earlier` is not earlier.
    pub const fn since(self, earlier: Instant) -> Span {
        Span::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add<Span> for Instant {
    type Output = Instant;

    /// The instant `span` later, saturating at the far future.
    fn add(self, span: Span) -> Instant {
        Instant(self.0.saturating_add(span.0))
    }
}

impl std::ops::Sub<Span> for Instant {
    type Output = Instant;

    /// The instant `span` earlier, saturating at the far past.
    fn sub(self, span: Span) -> Instant {
        Instant(self.0.saturating_sub(span.0))
    }
}

/// A length of time: a count of microseconds that is never negative. Stored and sent as that
/// count, exactly as the `i64` it replaces.
///
/// ```
/// use berth_core::Instant;
/// use berth_core::model::time::Span;
/// let start = Instant::from_micros(1_000);
/// assert_eq!(start + Span::from_micros(500), Instant::from_micros(1_500));
/// assert_eq!(Instant::from_micros(1_500).since(start), Span::from_micros(500));
/// assert_eq!(start.since(Instant::from_micros(1_500)), Span::ZERO);
/// assert_eq!(Span::from_micros(-1), Span::ZERO);
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(from = "i64", into = "i64")]
#[repr(transparent)]
pub struct Span(i64);

impl Span {
    /// No time at all.
    pub const ZERO: Span = Span(0);
    /// The longest span.
    pub const MAX: Span = Span(i64::MAX);

    /// A count of microseconds; a negative count is no time at all.
    pub const fn from_micros(micros: i64) -> Span {
        if micros < 0 { Span(0) } else { Span(micros) }
    }

    /// A count of seconds (saturating).
    pub const fn from_secs(secs: i64) -> Span {
        Span::from_micros(secs.saturating_mul(1_000_000))
    }

    /// A count of minutes (saturating).
    pub const fn from_minutes(minutes: i64) -> Span {
        Span::from_secs(minutes.saturating_mul(60))
    }

    /// A count of hours (saturating).
    pub const fn from_hours(hours: i64) -> Span {
        Span::from_minutes(hours.saturating_mul(60))
    }

    /// A count of days (saturating).
    pub const fn from_days(days: i64) -> Span {
        Span::from_hours(days.saturating_mul(24))
    }

    /// The count of microseconds (never negative).
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// Whether it is no time at all.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The sum, saturating at [`Span::MAX`].
    pub const fn saturating_add(self, other: Span) -> Span {
        Span(self.0.saturating_add(other.0))
    }

    /// This span `n` times, saturating at [`Span::MAX`].
    pub const fn saturating_mul(self, n: i64) -> Span {
        Span::from_micros(self.0.saturating_mul(n))
    }
}

impl From<i64> for Span {
    /// The stored form: a count of microseconds (a negative count read as zero).
    fn from(micros: i64) -> Span {
        Span::from_micros(micros)
    }
}

impl From<Span> for i64 {
    /// The stored form: the count of microseconds.
    fn from(span: Span) -> i64 {
        span.0
    }
}
