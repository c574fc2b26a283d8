//! Request metrics in Prometheus text format: a count and a latency histogram per route, method
//! and status.
//!
//! Every label has a bounded set of values, so no request can grow the series: `method` is one of
//! the standard methods or `other`, `route` a matched route template or `unmatched` (the caller
//! passes only those), `status` a status code.
//!
//! The Prometheus recorder is process-global, so it is installed once and shared by every
//! server in the process (tests start several).

use axum::http::{Method, StatusCode};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// Latency buckets in seconds, from 100 µs to 10 s.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// A handle to render and record metrics.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// The process-wide metrics.
    pub fn global() -> Metrics {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        let handle = HANDLE.get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("berth_http_request_duration_seconds".into()),
                    &BUCKETS,
                )
                .expect("invariant: buckets are non-empty")
                .install_recorder()
                .expect("invariant: the recorder is installed once")
        });
        Metrics {
            handle: handle.clone(),
        }
    }

    /// Records one finished request.
    pub fn observe(&self, method: &Method, route: &str, status: StatusCode, elapsed: Duration) {
        let labels = [
            ("method", method_label(method).to_owned()),
            ("route", route.to_owned()),
            ("status", status.as_u16().to_string()),
        ];
        metrics::counter!("berth_http_requests_total", &labels).increment(1);
        metrics::histogram!("berth_http_request_duration_seconds", &labels)
            .record(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

/// Unlabelled figures this server renders itself (not through the process-wide recorder), in
/// Prometheus text format: each `(name, type, help, value)` with its `HELP` and `TYPE` lines.
pub fn plain_lines(figures: &[(&str, &str, &str, u64)]) -> String {
    let mut text = String::new();
    for (name, kind, help, value) in figures {
        text.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    }
    text
}

/// The `method` label: a standard method, or `other` for any extension method.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_standard_methods_become_labels() {
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        assert_eq!(method_label(&Method::OPTIONS), "OPTIONS");
        for other in ["TRACE", "CONNECT", "PROPFIND", "XYZZY", "get"] {
            let method = Method::from_bytes(other.as_bytes()).expect("a token");
            assert_eq!(method_label(&method), "other", "{other}");
        }
    }
}
