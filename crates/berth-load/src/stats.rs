//! Latency summaries: nearest-rank percentiles over a sorted list of samples, printed as text or
//! as one JSON object.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

/// One finished request: how long it took, its status (0 when no response came) and body size.
pub(crate) struct Sample {
    pub(crate) latency: Duration,
    pub(crate) status: u16,
    pub(crate) bytes: usize,
}

/// The figures of one measured run.
pub(crate) struct Summary {
    /// Requests the run meant to send.
    pub(crate) planned: usize,
    /// Count per status code (0 stands for a transport error).
    pub(crate) statuses: BTreeMap<u16, usize>,
    /// Requests that answered with the expected status.
    pub(crate) ok: usize,
    /// Wall time of the measured phase.
    pub(crate) elapsed: Duration,
    /// Latencies of every finished request, sorted.
    pub(crate) sorted: Vec<Duration>,
    /// Largest response body seen, in bytes.
    pub(crate) max_bytes: usize,
    /// The deadline stopped the run early.
    pub(crate) cut_short: bool,
}

impl Summary {
    /// Builds the summary; `expected` is the status that counts as success.
    pub(crate) fn new(
        planned: usize,
        samples: &[Sample],
        expected: u16,
        elapsed: Duration,
        cut_short: bool,
    ) -> Self {
        let mut statuses = BTreeMap::new();
        for sample in samples {
            *statuses.entry(sample.status).or_insert(0) += 1;
        }
        let mut sorted: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
        sorted.sort_unstable();
        Self {
            planned,
            ok: statuses.get(&expected).copied().unwrap_or(0),
            statuses,
            elapsed,
            sorted,
            max_bytes: samples.iter().map(|s| s.bytes).max().unwrap_or(0),
            cut_short,
        }
    }

    /// Requests that finished (any status).
    pub(crate) fn finished(&self) -> usize {
        self.sorted.len()
    }

    /// Nearest-rank percentile in milliseconds (`p` in 0..=100).
    pub(crate) fn percentile_ms(&self, p: f64) -> f64 {
        let Some(last) = self.sorted.len().checked_sub(1) else {
            return 0.0;
        };
        let count = self.sorted.len() as f64;
        let rank = ((p / 100.0) * count).ceil().max(1.0) as usize - 1;
        ms(self.sorted[rank.min(last)])
    }

    /// Successful requests per second of wall time.
    pub(crate) fn ok_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        match secs > 0.0 {
            true => self.ok as f64 / secs,
            false => 0.0,
        }
    }

    /// The summary as one JSON object.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let statuses: serde_json::Map<String, serde_json::Value> = self
            .statuses
            .iter()
            .map(|(status, count)| (status.to_string(), json!(count)))
            .collect();
        let mean = match self.sorted.is_empty() {
            true => 0.0,
            false => self.sorted.iter().map(|d| ms(*d)).sum::<f64>() / self.sorted.len() as f64,
        };
        json!({
            "planned": self.planned,
            "finished": self.finished(),
            "ok": self.ok,
            "statuses": statuses,
            "cut_short": self.cut_short,
            "elapsed_s": round3(self.elapsed.as_secs_f64()),
            "ok_per_s": round3(self.ok_per_second()),
            "min_ms": round3(self.percentile_ms(0.0)),
            "mean_ms": round3(mean),
            "median_ms": round3(self.percentile_ms(50.0)),
            "p90_ms": round3(self.percentile_ms(90.0)),
            "p99_ms": round3(self.percentile_ms(99.0)),
            "max_ms": round3(self.percentile_ms(100.0)),
            "max_response_bytes": self.max_bytes,
        })
    }

    /// Prints the summary as JSON or as a few lines of text, under a title.
    pub(crate) fn print(&self, title: &str, json: bool) {
        if json {
            println!("{}", self.to_json());
            return;
        }
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(status, count)| format!("{status}:{count}"))
            .collect();
        println!("{title}");
        println!(
            "  requests {} of {} finished, ok {}, statuses [{}]{}",
            self.finished(),
            self.planned,
            self.ok,
            statuses.join(" "),
            if self.cut_short {
                ", cut short by the deadline"
            } else {
                ""
            }
        );
        println!(
            "  latency ms: median {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
            self.percentile_ms(50.0),
            self.percentile_ms(90.0),
            self.percentile_ms(99.0),
            self.percentile_ms(100.0)
        );
        println!(
            "  throughput {:.1} ok/s over {:.3} s, largest body {} bytes",
            self.ok_per_second(),
            self.elapsed.as_secs_f64(),
            self.max_bytes
        );
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

fn round3(value: f64) -> f64 {
    (value * 1_000.0).round() / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(millis: &[u64]) -> Vec<Sample> {
        millis
            .iter()
            .map(|m| Sample {
                latency: Duration::from_millis(*m),
                status: 200,
                bytes: 10,
            })
            .collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        let summary = Summary::new(100, &samples(&values), 200, Duration::from_secs(1), false);
        assert!((summary.percentile_ms(50.0) - 50.0).abs() < 1e-9);
        assert!((summary.percentile_ms(90.0) - 90.0).abs() < 1e-9);
        assert!((summary.percentile_ms(99.0) - 99.0).abs() < 1e-9);
        assert!((summary.percentile_ms(100.0) - 100.0).abs() < 1e-9);
        assert!((summary.percentile_ms(0.0) - 1.0).abs() < 1e-9);
        assert!((summary.ok_per_second() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn empty_run_reports_zeros() {
        let summary = Summary::new(5, &[], 200, Duration::ZERO, true);
        assert_eq!(summary.finished(), 0);
        assert!(summary.percentile_ms(50.0).abs() < f64::EPSILON);
        assert_eq!(summary.to_json()["cut_short"], serde_json::json!(true));
    }
}
