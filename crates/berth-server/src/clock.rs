//! The wall clock: the one place berth reads the system time, and the offset fault tests may
//! give it.

use berth_app::Clock;
use berth_core::Instant;

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the injected clock is the one place that reads the time"
    )]
    fn now(&self) -> Instant {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("invariant: the system clock is after 1970");
        Instant::from_micros(
            i64::try_from(since.as_micros()).expect("invariant: microseconds fit in i64"),
        )
    }
}

/// Now, in whole seconds since the Unix epoch (for signature timestamps).
pub fn unix_seconds() -> u64 {
    u64::try_from(SystemClock.now().as_micros() / 1_000_000).unwrap_or(0)
}

/// The system clock moved by a fixed offset: what `--clock-offset-seconds` runs berth on, so a
/// fault test can give one replica a clock ahead of or behind the others'.
#[derive(Debug, Clone, Copy)]
pub struct OffsetClock {
    /// Microseconds added to the system clock.
    pub offset_micros: i64,
}

impl Clock for OffsetClock {
    fn now(&self) -> Instant {
        Instant::from_micros(
            SystemClock
                .now()
                .as_micros()
                .saturating_add(self.offset_micros),
        )
    }
}
