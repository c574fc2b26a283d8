//! `berth-load create-leases`: enrolls H hosts through Blazar's `POST /reservation/v1/os-hosts`,
//! then creates R leases through `POST /reservation/v1/leases` with C clients; every lease must
//! answer 201.
//!
//! Each lease is one small instance reservation (`virtual:instance`, VCPU 1, MEMORY_MB 512,
//! DISK_GB 1, amount 1, affinity null) over a one-hour window. Windows start the day after the
//! server's clock (read from the `Date` header of its first answer; the tool never reads the
//! local clock) and are two hours apart; each window takes at most half the hosts' VCPUs, so
//! capacity never runs out. `--seed` moves every window later, so a second run on the same
//! server finds fresh capacity.
//!
//! `--url` may be the server's base (`http://127.0.0.1:PORT`) or any URL on it (such as the
//! Placement endpoint): only its origin is used, with the `/reservation/v1/...` paths.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;

use crate::client::Target;
use crate::get::timed;
use crate::pool;
use crate::stats::Summary;

/// Prefix of every host name this tool enrolls.
pub(crate) const HOST_PREFIX: &str = "bench-host-";
/// Availability zones the hosts are spread over.
const ZONES: usize = 10;
/// VCPUs of each enrolled host.
pub(crate) const HOST_VCPUS: u64 = 64;
/// Seconds between the starts of two consecutive windows, and the length of a window.
pub(crate) const SLOT_SECONDS: i64 = 7_200;
const WINDOW_SECONDS: i64 = 3_600;
pub(crate) const DAY_SECONDS: i64 = 86_400;

/// The origin of `--url`: scheme, host and port.
pub(crate) fn origin(target: &Target) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(&target.base).context("parse --url")?;
    Ok(url.origin().ascii_serialization())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Seconds since the epoch of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn parse_http_date(text: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    let days = days_from_civil(year.parse().ok()?, month, day.parse().ok()?);
    Some(days * DAY_SECONDS + h * 3_600 + m * 60 + s)
}

/// RFC 3339 text (UTC, whole seconds) of seconds since the epoch.
pub(crate) fn rfc3339(seconds: i64) -> String {
    let (year, month, day) = civil_from_days(seconds.div_euclid(DAY_SECONDS));
    let rest = seconds.rem_euclid(DAY_SECONDS);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// Enrolls hosts `0..hosts` (an already enrolled one answers 409 and is kept); returns the
/// server's clock, in seconds since the epoch, from the first answer's `Date` header.
pub(crate) async fn enroll(
    target: &Target,
    base: &str,
    hosts: usize,
    concurrency: usize,
) -> anyhow::Result<i64> {
    let client = target.client.clone();
    let url = format!("{base}/reservation/v1/os-hosts");
    let outcome = pool::run(hosts, concurrency, target.deadline, move |index| {
        let body = json!({
            "name": format!("{HOST_PREFIX}{index:06}"),
            "vcpus": HOST_VCPUS,
            "memory_mb": 262_144,
            "local_gb": 2_000,
            "availability_zone": format!("az{}", index % ZONES),
        });
        let request = client.post(url.clone()).json(&body);
        async move {
            let response = request.send().await.context("enroll a host")?;
            let status = response.status().as_u16();
            let date = response
                .headers()
                .get(reqwest::header::DATE)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_http_date);
            let body = response.text().await.unwrap_or_default();
            match status {
                201 | 409 => Ok(date),
                _ => bail!("enroll host {index}: status {status}: {body}"),
            }
        }
    })
    .await?;
    if outcome.cut_short {
        bail!("--max-seconds reached while enrolling hosts");
    }
    let mut now = None;
    for result in outcome.results {
        now = now.or(result?);
    }
    now.context("the server's answers carry no Date header")
}

/// The body of lease `index`, named `{prefix}-{index}`; `first_start` is the first window's
/// start, in epoch seconds.
pub(crate) fn lease_body(
    prefix: &str,
    index: usize,
    per_slot: usize,
    first_start: i64,
) -> serde_json::Value {
    let start = first_start + (index / per_slot) as i64 * SLOT_SECONDS;
    json!({
        "name": format!("{prefix}-{index:07}"),
        "start_date": rfc3339(start),
        "end_date": rfc3339(start + WINDOW_SECONDS),
        "reservations": [{
            "resource_type": "virtual:instance",
            "vcpus": 1,
            "memory_mb": 512,
            "disk_gb": 1,
            "amount": 1,
            "affinity": null,
        }],
        "events": [],
    })
}

/// Enrolls the hosts, creates the leases and prints the summary; fails unless every lease
/// answered 201.
pub(crate) async fn run(
    target: &Target,
    hosts: usize,
    leases: usize,
    concurrency: usize,
    seed: u64,
    keyed: bool,
) -> anyhow::Result<()> {
    if hosts == 0 {
        bail!("--hosts must be at least 1");
    }
    let base = origin(target)?;
    let enrolling = Instant::now();
    let now = enroll(target, &base, hosts, concurrency.min(8)).await?;
    let enrolled = enrolling.elapsed();
    // Each window takes at most half of the hosts' VCPUs.
    let per_slot = hosts * HOST_VCPUS as usize / 2;
    let slots = leases.div_ceil(per_slot) as i64;
    let first_start = (now / 3_600 + 1) * 3_600 + DAY_SECONDS + seed as i64 * slots * SLOT_SECONDS;
    let client = target.client.clone();
    let url = Arc::new(format!("{base}/reservation/v1/leases"));
    let start = Instant::now();
    let outcome = pool::run(leases, concurrency, target.deadline, move |index| {
        let body = lease_body("bench-lease", index, per_slot, first_start);
        let request = client.post(url.as_str()).json(&body);
        timed(match keyed {
            true => request.header("Idempotency-Key", format!("bench-{seed}-{index}")),
            false => request,
        })
    })
    .await?;
    let summary = Summary::new(
        leases,
        &outcome.results,
        201,
        start.elapsed(),
        outcome.cut_short,
    );
    summary.print(
        &format!(
            "POST /reservation/v1/leases x{leases}{}, concurrency {concurrency}, {hosts} hosts \
             (enrolled in {:.1} s), {slots} windows from {}",
            if keyed { " with keys" } else { "" },
            enrolled.as_secs_f64(),
            rfc3339(first_start)
        ),
        target.json,
    );
    if !target.json {
        println!("  leases/second {:.1}", summary.ok_per_second());
    }
    if summary.ok != summary.finished() {
        bail!("some lease creations did not answer 201");
    }
    if summary.cut_short {
        bail!("--max-seconds reached before all leases were created");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for days in [-1, 0, 59, 365, 11_016, 11_017, 20_000, 24_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_264_870), "2026-11-21T12:41:10Z");
    }

    #[test]
    fn http_dates_parse() {
        assert_eq!(
            parse_http_date("Sat, 21 Nov 2026 12:41:10 GMT"),
            Some(1_795_264_870)
        );
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(parse_http_date("Sat, 21 Foo 2026 12:41:10 GMT"), None);
    }

    #[test]
    fn windows_never_exceed_half_the_capacity() {
        let per_slot = 10 * HOST_VCPUS as usize / 2;
        let start = |i| lease_body("bench-lease", i, per_slot, 0)["start_date"].clone();
        assert_eq!(start(0), start(per_slot - 1));
        assert_ne!(start(per_slot - 1), start(per_slot));
        assert_eq!(
            lease_body("bench-lease", per_slot, per_slot, 0)["start_date"],
            json!("1970-01-01T02:00:00Z")
        );
    }
}
