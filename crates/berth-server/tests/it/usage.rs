//! The usage report over HTTP (`GET /reservation/v1/usage`): a project reads its own reserved,
//! consumed and idle hours, equal to what its lease's window and the time of the report make;
//! another project's consumers on demand are theirs alone; an admin reads every project or
//! one; CSV holds the rows JSON holds; bad input is refused naming the parameter.

use crate::blazar_leases::{minutes, now_micros};
use crate::shares::{ADMIN, OWNER, OWNER_READER, STRANGER, allocate, app, host, running_lease};
use crate::support::{TestApp, Who, parse};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const USAGE: &str = "/reservation/v1/usage";

/// A lease date as microseconds.
pub(crate) fn micros(text: &Value) -> i64 {
    let text = text
        .as_str()
        .unwrap_or_else(|| panic!("{text} is not a date"));
    berth_api::time::utc(text, &["%Y-%m-%dT%H:%M:%S%.f"])
        .unwrap_or_else(|| panic!("{text} is not a lease date"))
        .as_microsecond()
}

async fn report(app: &TestApp, who: Who<'_>, query: &str) -> (StatusCode, Value) {
    app.call_as(who, Method::GET, &format!("{USAGE}?{query}"), None)
        .await
}

/// The row of `project` and `class`.
pub(crate) fn row<'a>(report: &'a Value, project: &str, class: &str) -> &'a Value {
    report["usage"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["project_id"] == project && r["resource_class"] == class)
        .unwrap_or_else(|| panic!("no {project} {class} row in {report}"))
}

fn projects(report: &Value) -> Vec<String> {
    let mut projects: Vec<String> = report["usage"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["project_id"].as_str().expect("project").to_owned())
        .collect();
    projects.dedup();
    projects
}

fn hours(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{value} is not a number"))
}

#[tokio::test]
async fn a_project_reads_its_usage_as_json_and_csv_and_no_other_projects() {
    let app = app().await;
    // The lease takes the one host there is; the second comes after it.
    let reserved_host = host(&app, "h1").await;
    let lease = running_lease(
        &app,
        json!([{"resource_type": "physical:host", "min": 1, "max": 1}]),
    )
    .await;
    let open_host = host(&app, "h2").await;
    let (_, shown) = app
        .call_as(
            OWNER,
            Method::GET,
            &format!("/reservation/v1/leases/{lease}"),
            None,
        )
        .await;
    let start = micros(&shown["lease"]["start_date"]);
    // The owner's instance in its reservation; another project's on demand on the other host.
    let (status, body) = allocate(&app, 1, OWNER.project, &reserved_host, 2).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = allocate(&app, 2, STRANGER.project, &open_host, 1).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let since = format!(
        "start={}",
        minutes(now_micros() - 3_600_000_000).replace(' ', "%20")
    );
    let since = since.as_str();

    let (status, own) = report(&app, OWNER_READER, since).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(projects(&own), ["lab"], "{own}");
    let until = micros(&own["usage"]["counted_until"]);
    let vcpu = row(&own, "lab", "VCPU");
    // The whole host, 8 VCPU, from the lease's start until the report: history begins when the
    // lease was committed, a moment after the start it was given ("now").
    let expected = 8.0 * ((until - start) as f64) / 3.6e9;
    let reserved = hours(&vcpu["reserved_hours"]);
    assert!(
        reserved <= expected && expected - reserved < 8.0 / 3600.0,
        "{vcpu} vs {expected}"
    );
    let consumed = hours(&vcpu["consumed_hours"]);
    assert!(
        consumed > 0.0 && consumed < 2.0 * ((until - start) as f64) / 3.6e9,
        "{vcpu}"
    );
    let idle = hours(&vcpu["reserved_hours"]) - consumed;
    assert!((hours(&vcpu["idle_hours"]) - idle).abs() < 1e-6, "{vcpu}");
    assert!(hours(&row(&own, "lab", "MEMORY_MB")["reserved_hours"]) > 0.0);

    // Another project reads its own on-demand use, and nothing of the owner's.
    let (status, theirs) = report(&app, STRANGER, since).await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert_eq!(projects(&theirs), ["other"], "{theirs}");
    assert!(hours(&row(&theirs, "other", "VCPU")["on_demand_hours"]) > 0.0);
    assert!(!theirs.to_string().contains(&lease));
    let (status, _) = report(&app, STRANGER, &format!("{since}&project_id=lab")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // An admin reads every project, or the one named.
    let (status, all) = report(&app, ADMIN, since).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(projects(&all), ["lab", "other"], "{all}");
    let (_, one) = report(&app, ADMIN, &format!("{since}&project_id=other")).await;
    assert_eq!(projects(&one), ["other"], "{one}");

    // CSV: a header, then the rows JSON has, in its order.
    let response = app
        .request(Method::GET, &format!("{USAGE}?{since}&format=csv"), None)
        .header("x-project-id", ADMIN.project)
        .header("x-user-id", ADMIN.user)
        .header("x-roles", ADMIN.roles)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/csv")
    );
    let csv = response.text().await.expect("text");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "project_id,resource_class,reserved_hours,consumed_hours,lent_hours,idle_hours,on_demand_hours,preemptible_hours"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let json_rows = all["usage"]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), json_rows.len(), "{csv}");
    for (fields, json_row) in rows.iter().zip(json_rows) {
        assert_eq!(fields[0], json_row["project_id"]);
        assert_eq!(fields[1], json_row["resource_class"]);
        // Counted later than the JSON report: the same or more.
        let reserved: f64 = fields[2].parse().expect("a number");
        assert!(reserved >= hours(&json_row["reserved_hours"]), "{csv}");
    }
}

#[tokio::test]
async fn bad_usage_queries_are_refused_naming_the_parameter() {
    let app = app().await;
    for (query, named) in [
        ("", "start"),
        ("start=yesterday", "start"),
        ("start=2030-01-02%2000:00&end=2030-01-01%2000:00", "end"),
        ("start=2030-01-01%2000:00&format=xml", "format"),
        ("start=2030-01-01%2000:00&bucket=day", "bucket"),
        (
            "start=2020-01-01%2000:00&end=2022-01-01%2000:00",
            "usage_period_days",
        ),
    ] {
        let (status, body) = report(&app, OWNER, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.to_string().contains(named), "{query}: {body}");
    }
    // No role at all is refused before any of it.
    let response = parse(
        app.request(
            Method::GET,
            &format!("{USAGE}?start=2030-01-01%2000:00"),
            None,
        )
        .send()
        .await
        .expect("send"),
    )
    .await;
    assert_eq!(response.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_lease_shows_how_much_of_it_was_used_over_time() {
    let app = app().await;
    let provider = host(&app, "h1").await;
    let lease = running_lease(
        &app,
        json!([{"resource_type": "physical:host", "min": 1, "max": 1}]),
    )
    .await;
    let path = format!("/reservation/v1/leases/{lease}/utilization");
    // A consumer runs 2 VCPU in it, then a second 2 more.
    let mut sent = Vec::new();
    for n in [1, 2] {
        let before = now_micros();
        let (status, body) = allocate(&app, n, OWNER.project, &provider, 2).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        sent.push((before, now_micros()));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (status, shown) = app.call_as(OWNER_READER, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    let shown = &shown["utilization"];
    assert_eq!(shown["lease_id"], json!(lease), "{shown}");
    let until = micros(&shown["counted_until"]);
    let vcpu = shown["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .find(|c| c["resource_class"] == "VCPU")
        .unwrap_or_else(|| panic!("no VCPU in {shown}"));
    // The steps: the whole host held, then 2 used, then 4.
    let steps: Vec<(u64, u64)> = vcpu["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["reserved"].as_u64().expect("n"),
                s["consumed"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(steps, [(8, 0), (8, 2), (8, 4)], "{vcpu}");
    let (two, four) = (sent[0], sent[1]);
    let at = |n: usize| micros(&vcpu["steps"][n]["time"]);
    assert!(two.0 <= at(1) && at(1) <= two.1, "{vcpu}");
    assert!(four.0 <= at(2) && at(2) <= four.1, "{vcpu}");
    // The totals are the steps' areas; utilization is their ratio.
    let area = |n: usize, amount: u64, to: i64| amount as f64 * ((to - at(n)) as f64) / 3.6e9;
    let consumed = area(1, 2, at(2)) + area(2, 4, until);
    let reserved = area(0, 8, until);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        close(hours(&vcpu["consumed_hours"]), consumed),
        "{vcpu} vs {consumed}"
    );
    assert!(
        close(hours(&vcpu["reserved_hours"]), reserved),
        "{vcpu} vs {reserved}"
    );
    assert!(
        close(hours(&vcpu["utilization"]), consumed / reserved),
        "{vcpu}"
    );
    // Another project does not see the lease; a lease that has not started has no figures.
    let (status, _) = app.call_as(STRANGER, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, missing) = app
        .call_as(
            ADMIN,
            Method::GET,
            "/reservation/v1/leases/00000000-0000-4000-8000-000000000000/utilization",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
}
