//! Budgets over HTTP: an admin sets a project's budget of VCPU-hours per month; a lease within
//! it is charged, one past it refused with the budget and an earlier end that fits; deleting a
//! lease refunds it; the project reads its own budget and no other; bad budgets are refused
//! naming the field; only an admin sets or removes one.

use crate::blazar_leases::{LEASES, lease_body, minutes, now_micros};
use crate::shares::{ADMIN, OWNER, OWNER_READER, STRANGER, app, host};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const BUDGET: &str = "/reservation/v1/budgets/lab";

/// 01:00 UTC on the first day of next month, in microseconds: every lease of the test falls in
/// one month.
fn next_month() -> i64 {
    let today = jiff::Timestamp::from_microsecond(now_micros())
        .expect("a time")
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let first = today
        .first_of_month()
        .checked_add(jiff::Span::new().months(1))
        .expect("a date");
    first
        .at(1, 0, 0, 0)
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("a time")
        .timestamp()
        .as_microsecond()
}

const HOUR: i64 = 3_600_000_000;

fn one_host() -> Value {
    json!([{"resource_type": "physical:host", "min": 1, "max": 1}])
}

#[tokio::test]
async fn a_budget_charges_refuses_with_what_fits_and_refunds() {
    let app = app().await;
    host(&app, "h1").await;
    host(&app, "h2").await;
    // Bad budgets, and a member's, are refused.
    for (body, named) in [
        (json!({"limits": {"VCPU": -1}}), "limits.VCPU"),
        (json!({"limits": {"VCPU": 1.5}}), "limits.VCPU"),
        (json!({"limits": {"not a class": 1}}), "limits.not a class"),
        (json!({"limits": {}}), "limits"),
        (
            json!({"period": "fortnight", "limits": {"VCPU": 1}}),
            "period",
        ),
        (json!({"limits": {"VCPU": 1}, "extra": 1}), "extra"),
    ] {
        let (status, refused) = app.call_as(ADMIN, Method::PUT, BUDGET, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        let message = refused["error_message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{named}: {refused}");
    }
    let limits = json!({"period": "month", "limits": {"VCPU": 20}});
    let (status, _) = app
        .call_as(OWNER, Method::PUT, BUDGET, Some(limits.clone()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a member sets no budget");
    let (status, set) = app.call_as(ADMIN, Method::PUT, BUDGET, Some(limits)).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set["budget"]["limits"]["VCPU"], 20, "{set}");

    // 2 hours of a whole 8-VCPU host: 16 of 20.
    let t = next_month();
    let first = lease_body("first", &minutes(t), &minutes(t + 2 * HOUR), one_host());
    let (status, first) = app.call_as(OWNER, Method::POST, LEASES, Some(first)).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let first = first["lease"]["id"].as_str().expect("id").to_owned();
    // One hour more would be 24: refused, naming the budget and an end half an hour in.
    let second = lease_body(
        "second",
        &minutes(t + 3 * HOUR),
        &minutes(t + 4 * HOUR),
        one_host(),
    );
    let (status, refused) = app
        .call_as(OWNER, Method::POST, LEASES, Some(second.clone()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let budget = &refused["budget"];
    assert_eq!(
        (
            &budget["limit_hours"],
            &budget["charged_hours"],
            &budget["asked_hours"]
        ),
        (&json!(20), &json!(16.0), &json!(8.0)),
        "{refused}"
    );
    let expected_end = berth_api::time::lease_time(t + 3 * HOUR + HOUR / 2);
    assert_eq!(
        refused["counter_offer"]["end_date"],
        json!(expected_end),
        "{refused}"
    );

    // The project reads its budget and what it was charged; another project sees none.
    let (status, own) = app.call_as(OWNER_READER, Method::GET, BUDGET, None).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    let charged = own["budget"]["periods"]
        .as_array()
        .expect("periods")
        .iter()
        .find(|p| p["charged_hours"]["VCPU"].as_f64().is_some_and(|h| h > 0.0))
        .cloned()
        .unwrap_or_else(|| panic!("no period charged: {own}"));
    assert_eq!(charged["charged_hours"]["VCPU"], 16.0, "{own}");
    assert_eq!(charged["left_hours"]["VCPU"], 4.0, "{own}");
    let (status, _) = app.call_as(STRANGER, Method::GET, BUDGET, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, listed) = app
        .call_as(STRANGER, Method::GET, "/reservation/v1/budgets", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["budgets"], json!([]), "{listed}");
    let (_, all) = app
        .call_as(ADMIN, Method::GET, "/reservation/v1/budgets", None)
        .await;
    assert_eq!(all["budgets"].as_array().map(Vec::len), Some(1), "{all}");

    // Deleting the first lease refunds it: the second fits now.
    let (status, _) = app
        .call_as(OWNER, Method::DELETE, &format!("{LEASES}/{first}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, created) = app.call_as(OWNER, Method::POST, LEASES, Some(second)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    // Removed, by an admin only; then nothing is refused for it.
    let (status, _) = app.call_as(OWNER, Method::DELETE, BUDGET, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.call_as(ADMIN, Method::DELETE, BUDGET, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.call_as(ADMIN, Method::DELETE, BUDGET, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Lease `id`'s status, as the admin reads it.
async fn status_of(app: &crate::support::TestApp, id: &str) -> Value {
    let (status, shown) = app
        .call_as(ADMIN, Method::GET, &format!("{LEASES}/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    shown["lease"]["status"].clone()
}

#[tokio::test]
async fn a_waitlisted_lease_past_its_budget_waits_until_the_budget_is_raised() {
    let app = app().await;
    host(&app, "h1").await;
    let budget = |vcpu: u64| json!({"period": "month", "limits": {"VCPU": vcpu}});
    let (status, set) = app
        .call_as(ADMIN, Method::PUT, BUDGET, Some(budget(20)))
        .await;
    assert_eq!(status, StatusCode::OK, "{set}");
    // Another project holds the host for three hours; lab waits for it over the same hours:
    // 24 VCPU-hours, past its 20.
    let t = next_month();
    let (start, end) = (minutes(t), minutes(t + 3 * HOUR));
    let other = lease_body("other", &start, &end, one_host());
    let (status, other) = app
        .call_as(STRANGER, Method::POST, LEASES, Some(other))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    let mut waiting = lease_body("waiting", &start, &end, one_host());
    waiting["on_conflict"] = json!("wait");
    waiting["wait_until"] = json!(start);
    let (status, waiting) = app
        .call_as(OWNER, Method::POST, LEASES, Some(waiting))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let id = waiting["lease"]["id"].as_str().expect("id").to_owned();
    // The host is free again, but lab's budget does not take the lease: it waits on.
    let other = other["lease"]["id"].as_str().expect("id");
    let (status, _) = app
        .call_as(STRANGER, Method::DELETE, &format!("{LEASES}/{other}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(status_of(&app, &id).await, "WAITING");
    // A lower limit changes nothing; a higher one admits it in the same commit.
    let (status, _) = app
        .call_as(ADMIN, Method::PUT, BUDGET, Some(budget(10)))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(status_of(&app, &id).await, "WAITING");
    let (status, set) = app
        .call_as(ADMIN, Method::PUT, BUDGET, Some(budget(30)))
        .await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(status_of(&app, &id).await, "PENDING");
    let (status, read) = app.call_as(OWNER, Method::GET, BUDGET, None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert!(
        read.to_string().contains("24.0"),
        "charged 24 VCPU-hours: {read}"
    );
}
