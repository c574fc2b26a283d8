//! The time formats of the surfaces, for the server that writes them and the clients that read
//! them: Blazar's lease dates and record times, and civil times read as UTC.
//!
//! An instant is given as microseconds since the Unix epoch, as berth keeps it.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

/// A lease date as Blazar returns it: `%Y-%m-%dT%H:%M:%S.%f` (microseconds), UTC.
pub fn lease_time(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    Timestamp::from_second(seconds)
        .map(|t| format!("{}.{fraction:06}", t.strftime("%Y-%m-%dT%H:%M:%S")))
        .unwrap_or_default()
}

/// Blazar's format for `created_at` and `updated_at`: `YYYY-MM-DD HH:MM:SS`, UTC.
pub fn record_time(micros: i64) -> String {
    Timestamp::from_microsecond(micros)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// `text` as a UTC time written in one of the civil `formats`, or in RFC 3339 with any offset.
pub fn utc(text: &str, formats: &[&str]) -> Option<Timestamp> {
    formats
        .iter()
        .find_map(|format| DateTime::strptime(format, text).ok())
        .and_then(|dt| dt.to_zoned(TimeZone::UTC).ok())
        .map(|z| z.timestamp())
        .or_else(|| text.parse::<Timestamp>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blazar_times_are_utc_with_and_without_microseconds() {
        let at = 1_893_492_000_123_456; // 2030-01-01T10:00:00.123456Z
        assert_eq!(lease_time(at), "2030-01-01T10:00:00.123456");
        assert_eq!(record_time(at), "2030-01-01 10:00:00");
        assert_eq!(lease_time(-1), "1969-12-31T23:59:59.999999");
    }

    #[test]
    fn civil_times_read_as_utc_and_rfc_3339_keeps_its_offset() {
        let expected: Timestamp = "2030-01-01T10:00:00Z".parse().expect("timestamp");
        assert_eq!(utc("2030-01-01 10:00", &["%Y-%m-%d %H:%M"]), Some(expected));
        assert_eq!(utc("2030-01-01T11:00:00+01:00", &[]), Some(expected));
        assert_eq!(utc("2030-01-01 10:00", &["%Y-%m-%d %H:%M:%S"]), None);
    }
}
