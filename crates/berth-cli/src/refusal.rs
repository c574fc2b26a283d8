//! What the client prints when a command fails: berth's reason for an error answer, from any
//! surface's error format, what berth added (why each reservation or node could not be had),
//! and a refused lease's counter-offer, in words.

use crate::error::CliError;
use crate::output::{self, Format};
use crate::time;
use serde_json::Value;

/// Prints why a command failed on standard error (and, for scripts asking for JSON or YAML,
/// berth's error body on standard output).
pub(crate) fn report(error: &CliError, format: Format) {
    match error {
        CliError::Usage(message) => eprintln!("berth: {message}"),
        CliError::Connection(message) => eprintln!("berth: {message}"),
        CliError::Failed(message) => eprintln!("berth: {message}"),
        CliError::Refused { status, body } => {
            if format != Format::Table
                && let Ok(text) = output::structured(format, body)
            {
                output::print(&text);
            }
            eprint!("{}", refusal_text(*status, body));
        }
    }
}

/// berth's reason for an error answer, from any surface's error format (the bare-metal API's
/// `error_message` is Ironic's fault, JSON-encoded, whose `faultstring` is the reason).
pub(crate) fn reason(body: &Value) -> String {
    let fault: Option<Value> = body
        .get("error_message")
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str(text).ok());
    let candidates = [
        fault.as_ref().and_then(|f| f.get("faultstring")),
        body.get("error_message"),
        body.pointer("/errors/0/detail"),
        body.get("detail"),
        body.get("message"),
        body.as_str().map(|_| body),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map_or_else(
            || "no reason given".to_owned(),
            |text| text.trim().to_owned(),
        )
}

/// The text printed for an error answer: the status and reason, then what berth added (why
/// each reservation or node could not be had, and the counter-offer).
fn refusal_text(status: u16, body: &Value) -> String {
    let title = match status {
        400 => "bad request",
        401 => "not authenticated",
        403 => "forbidden",
        404 => "not found",
        409 => "refused",
        413 => "request too large",
        s if s >= 500 => "server error",
        _ => "refused",
    };
    let mut reason = reason(body);
    // Blazar's message repeats the shortfalls listed below it.
    if body["reservations"].is_array()
        && let Some(at) = reason.find("; reservation ")
    {
        reason.truncate(at);
    }
    let mut out = format!("berth: {title} ({status}): {reason}\n");
    for shortfall in body["reservations"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  reservation {} ({}): {} requested, {} available{}\n",
            output::get(shortfall, "index"),
            output::get(shortfall, "resource_type"),
            output::get(shortfall, "requested"),
            output::get(shortfall, "available"),
            shortfall["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
        ));
    }
    if let Some(offer) = body.get("counter_offer").filter(|o| o.is_object()) {
        out.push_str(&counter_offer_text(offer));
    }
    for conflict in body["conflicts"].as_array().into_iter().flatten() {
        out.push_str(&conflict_text(conflict));
    }
    for node in body["nodes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  node {}: {} ({})\n",
            output::get(node, "node_uuid"),
            output::get(node, "reason"),
            output::get(node, "detail"),
        ));
    }
    for key in ["affected", "offer"] {
        if let Some(extra) = body.get(key).filter(|v| !v.is_null()) {
            out.push_str(&format!("  {key}: {extra}\n"));
        }
    }
    out
}

/// One occurrence of a refused recurring lease that does not fit, and its nearest window, in
/// words.
fn conflict_text(conflict: &Value) -> String {
    let alternative = match conflict["alternative"]["start_date"].as_str() {
        Some(start) => format!(
            "fits from {} to {} UTC",
            time::show(start),
            time::show(&output::get(&conflict["alternative"], "end_date"))
        ),
        None => "no window found within the search horizon".to_owned(),
    };
    format!(
        "  occurrence {} ({} to {} UTC) does not fit; nearest window: {alternative}\n",
        output::get(conflict, "index"),
        time::show(&output::get(conflict, "start_date")),
        time::show(&output::get(conflict, "end_date")),
    )
}

/// The counter-offer of a refused lease or availability search, in words.
pub(crate) fn counter_offer_text(offer: &Value) -> String {
    let mut out = String::new();
    if let Some(amounts) = offer["amounts"].as_array().filter(|a| !a.is_empty()) {
        let amounts: Vec<String> = amounts
            .iter()
            .enumerate()
            .map(|(i, n)| format!("reservation {i}: {n}"))
            .collect();
        out.push_str(&format!(
            "  counter-offer: the most that fits in this window is {}\n",
            amounts.join(", ")
        ));
    }
    match offer["earliest_start"].as_str() {
        Some(start) => {
            let when = time::parse_server_time(start)
                .map(|at| format!(" ({})", time::relative(at)))
                .unwrap_or_default();
            out.push_str(&format!(
                "  counter-offer: all of it fits for the same duration from {} UTC{when}\n",
                time::show(start)
            ));
        }
        None => {
            out.push_str("  counter-offer: no start within the search horizon fits all of it\n")
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasons_come_from_every_error_format() {
        assert_eq!(
            reason(&json!({"error_message": "Lease x could not be found"})),
            "Lease x could not be found"
        );
        assert_eq!(
            reason(&json!({"errors": [{"detail": "No such provider"}]})),
            "No such provider"
        );
        assert_eq!(reason(&json!({"detail": "bad", "message": "worse"})), "bad");
        assert_eq!(reason(&json!("plain text")), "plain text");
        assert_eq!(reason(&json!(null)), "no reason given");
        let ironic = r#"{"faultstring": "Node n9 could not be found", "faultcode": "Client", "debuginfo": null}"#;
        assert_eq!(
            reason(&json!({"error_message": ironic})),
            "Node n9 could not be found"
        );
    }

    #[test]
    fn a_refused_lease_shows_its_counter_offer() {
        let body = json!({
            "error_message": "Not enough resources available for the requested window",
            "reservations": [{"index": 0, "resource_type": "physical:host", "requested": 3,
                              "available": 1, "reason": "not_enough_hosts"}],
            "counter_offer": {"amounts": [1], "earliest_start": "2030-01-02T10:00:00.000000"},
        });
        let text = refusal_text(409, &body);
        assert!(
            text.starts_with("berth: refused (409): Not enough resources"),
            "{text}"
        );
        assert!(
            text.contains(
                "reservation 0 (physical:host): 3 requested, 1 available (not_enough_hosts)"
            ),
            "{text}"
        );
        assert!(
            text.contains("the most that fits in this window is reservation 0: 1"),
            "{text}"
        );
        assert!(text.contains("from 2030-01-02 10:00:00 UTC"), "{text}");
        let none = counter_offer_text(&json!({"amounts": [0], "earliest_start": null}));
        assert!(
            none.contains("no start within the search horizon"),
            "{none}"
        );
    }
}
