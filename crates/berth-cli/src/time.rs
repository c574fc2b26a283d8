//! Times and durations on the command line.
//!
//! A time is `now`, an offset from now (`+90s`, `+30m`, `+2h`, `+3d`, `+1w`, or combined as
//! `+1d12h`), or an absolute time: RFC 3339 with any offset (`2030-01-01T10:00:00Z`), or
//! `YYYY-MM-DD HH:MM[:SS]`, `YYYY-MM-DDTHH:MM[:SS]` and `YYYY-MM-DD`, read as UTC.
//! A duration is the same offset without the `+` (`48h`, `2d`, `1d12h`).
//! The system clock is read here, in [`now`], and nowhere else in the client.

use berth_api::time::utc;
use jiff::{SignedDuration, Timestamp};

/// A time given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// `now`: sent as `now`, so the server resolves it with its own clock.
    Now,
    /// A definite instant.
    At(Timestamp),
}

impl When {
    /// The form sent to berth: `now` or RFC 3339 in UTC.
    pub(crate) fn wire(self) -> String {
        match self {
            When::Now => "now".to_owned(),
            When::At(at) => at.to_string(),
        }
    }

    /// The instant (now, read from the clock, for `now`).
    pub(crate) fn instant(self) -> Timestamp {
        match self {
            When::Now => now(),
            When::At(at) => at,
        }
    }
}

/// Now, to the second.
#[allow(
    clippy::disallowed_methods,
    reason = "the client's one reading of the system clock"
)]
pub(crate) fn now() -> Timestamp {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("invariant: the system clock is after 1970");
    let seconds = i64::try_from(since.as_secs()).expect("invariant: seconds fit in i64");
    Timestamp::from_second(seconds).expect("invariant: the system clock is within jiff's range")
}

/// Parses a time (see the module documentation).
pub(crate) fn parse_when(text: &str) -> Result<When, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("now") {
        return Ok(When::Now);
    }
    // `+2h` from now, or `-7d` before it.
    let relative = match text.split_at_checked(1) {
        Some(("+", offset)) => Some((false, offset)),
        Some(("-", offset)) => Some((true, offset)),
        _ => None,
    };
    if let Some((before, offset)) = relative {
        let offset = parse_offset(offset).map_err(|e| format!("{text}: {e}"))?;
        let at = match before {
            false => now().checked_add(offset),
            true => now().checked_sub(offset),
        };
        return at
            .map(When::At)
            .map_err(|_| format!("{text} is too far away"));
    }
    let formats = [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ];
    utc(text, &formats)
        .or_else(|| utc(&format!("{text} 00:00"), &["%Y-%m-%d %H:%M"]))
        .map(When::At)
        .ok_or_else(|| {
            format!(
                "{text} is not a time: use now, +30m, +2h, +3d, -7d, 2030-01-01T10:00:00Z or \"2030-01-01 10:00\" (UTC)"
            )
        })
}

/// Parses a duration such as `48h`, `2d` or `1d12h` (a leading `+` is allowed).
pub(crate) fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let trimmed = text.trim();
    let offset = parse_offset(trimmed.strip_prefix('+').unwrap_or(trimmed))
        .map_err(|e| format!("{text}: {e}"))?;
    match offset.is_positive() {
        true => Ok(offset),
        false => Err(format!("{text}: a duration must be longer than zero")),
    }
}

/// `1d12h`, `90s`, `2w`: one or more numbers, each followed by a unit.
fn parse_offset(text: &str) -> Result<SignedDuration, String> {
    const HINT: &str = "use a number and a unit (s, m, h, d or w), as in 30m, 2h, 3d or 1d12h";
    if text.is_empty() {
        return Err(HINT.to_owned());
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit: i64 = match ch {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(HINT.to_owned()),
        };
        let amount: i64 = digits.parse().map_err(|_| HINT.to_owned())?;
        digits.clear();
        total = amount
            .checked_mul(unit)
            .and_then(|seconds| total.checked_add(seconds))
            .filter(|seconds| *seconds <= 100 * 365 * 86_400)
            .ok_or_else(|| "that is more than a hundred years".to_owned())?;
    }
    match digits.is_empty() {
        true => Ok(SignedDuration::from_secs(total)),
        false => Err(HINT.to_owned()),
    }
}

/// A time berth sent (RFC 3339, or Blazar's `YYYY-MM-DDTHH:MM:SS.ffffff` in UTC) shown as
/// `YYYY-MM-DD HH:MM:SS` in UTC; anything else is shown as it is.
pub(crate) fn show(text: &str) -> String {
    parse_server_time(text).map_or_else(
        || text.to_owned(),
        |at| at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
    )
}

/// Reads a time berth sent.
pub(crate) fn parse_server_time(text: &str) -> Option<Timestamp> {
    text.parse::<Timestamp>().ok().or_else(|| {
        text.parse::<jiff::civil::DateTime>()
            .ok()
            .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC).ok())
            .map(|z| z.timestamp())
    })
}

/// How far `at` is from now, in words: `now`, `in 2d 3h`, `5m ago`.
pub(crate) fn relative(at: Timestamp) -> String {
    let seconds = at.duration_since(now()).as_secs();
    let words = span(seconds.unsigned_abs());
    match seconds {
        -59..=59 => "now".to_owned(),
        s if s > 0 => format!("in {words}"),
        _ => format!("{words} ago"),
    }
}

/// `2d 3h`, `3h 20m`, `45m`, `30s`: the two largest units.
pub(crate) fn span(seconds: u64) -> String {
    let parts = [
        (seconds / 86_400, "d"),
        (seconds % 86_400 / 3_600, "h"),
        (seconds % 3_600 / 60, "m"),
        (seconds % 60, "s"),
    ];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0 || first == 3)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute_times_parse() {
        assert_eq!(parse_when("now"), Ok(When::Now));
        assert_eq!(parse_when(" NOW "), Ok(When::Now));
        let before = now();
        let When::At(later) = parse_when("+2h").expect("relative") else {
            panic!("an instant")
        };
        let offset = later.duration_since(before).as_secs();
        assert!((7_199..=7_201).contains(&offset), "{offset}");
        let When::At(mixed) = parse_when("+1d12h").expect("combined") else {
            panic!("an instant")
        };
        assert!(mixed.duration_since(before).as_secs() >= 129_599);
        let expected: Timestamp = "2030-01-01T10:00:00Z".parse().expect("timestamp");
        for text in [
            "2030-01-01T10:00:00Z",
            "2030-01-01T11:00:00+01:00",
            "2030-01-01 10:00",
            "2030-01-01 10:00:00",
            "2030-01-01T10:00",
        ] {
            assert_eq!(parse_when(text), Ok(When::At(expected)), "{text}");
        }
        assert_eq!(
            parse_when("2030-01-01").map(When::wire),
            Ok("2030-01-01T00:00:00Z".to_owned())
        );
        for bad in ["", "+", "+2", "+2x", "tomorrow", "2030-13-01", "+h"] {
            assert!(parse_when(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration("48h"), Ok(SignedDuration::from_hours(48)));
        assert_eq!(parse_duration("+2d"), Ok(SignedDuration::from_hours(48)));
        assert_eq!(parse_duration("1w"), Ok(SignedDuration::from_hours(168)));
        assert_eq!(parse_duration("90s"), Ok(SignedDuration::from_secs(90)));
        assert!(parse_duration("0h").is_err());
        assert!(parse_duration("99999999999w").is_err());
        assert_eq!(span(2 * 86_400 + 3 * 3_600 + 5), "2d 3h");
        assert_eq!(span(45 * 60), "45m");
        assert_eq!(span(30), "30s");
        assert_eq!(span(0), "0s");
        assert_eq!(span(3_600), "1h");
    }

    #[test]
    fn server_times_show_in_utc() {
        assert_eq!(show("2030-01-01T10:00:00.000000"), "2030-01-01 10:00:00");
        assert_eq!(show("2030-01-01T10:00:00.5+00:00"), "2030-01-01 10:00:00");
        assert_eq!(show("2030-01-01T10:00:00Z"), "2030-01-01 10:00:00");
        assert_eq!(show("whenever"), "whenever");
    }
}
