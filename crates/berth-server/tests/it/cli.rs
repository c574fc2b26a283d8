//! The command-line client against a real server on port 0: its tables, its JSON and YAML, its
//! exit codes (0 success, 1 refused by berth, 2 usage or connection error), relative times,
//! availability, bare-metal claims, capacity, flavors, subscriptions, notifications,
//! completions and `--wait`.

use crate::support::TestApp;
use assert_cmd::assert::OutputAssertExt as _;
use berth_app::Clock as _;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;
use std::process::Output;
use std::time::Duration;

/// Runs `berth ARGS` with `BERTH_URL` set to `url` (when given), off the async runtime so
/// that the in-process server keeps answering.
async fn run(url: Option<&str>, args: &[&str]) -> Output {
    let url = url.map(str::to_owned);
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let mut command = assert_cmd::Command::cargo_bin("berth").expect("the berth binary");
        command
            .args(&args)
            .env_remove("BERTH_URL")
            .env_remove("BERTH_TOKEN")
            .timeout(Duration::from_secs(60));
        if let Some(url) = url {
            command.env("BERTH_URL", url);
        }
        command.output().expect("run berth")
    })
    .await
    .expect("join")
}

/// Runs `berth ARGS` against `app`.
async fn berth(app: &TestApp, args: &[&str]) -> Output {
    run(Some(&app.base), args).await
}

/// Runs `berth ARGS` against `app`, expects exit 0 and returns standard output.
async fn ok(app: &TestApp, args: &[&str]) -> String {
    let output = berth(app, args).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    output.assert().success();
    stdout
}

/// Runs `berth ARGS -o json` against `app`, expects exit 0 and parses standard output.
async fn json(app: &TestApp, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let stdout = ok(app, &args).await;
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The line of a table that contains `needle`.
fn line<'t>(table: &'t str, needle: &str) -> &'t str {
    table
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle} in:\n{table}"))
}

/// Asserts that `value` sits in the column headed `header` (left-aligned columns; the header
/// line is the first that names it).
fn in_column(table: &str, header: &str, value: &str) {
    let head = line(table, header);
    let column = head
        .find(header)
        .unwrap_or_else(|| panic!("no {header} in {head}"));
    let row = line(table, value);
    assert_eq!(
        row.find(value),
        Some(column),
        "{value} is not under {header}:\n{table}"
    );
}

/// Now, in seconds since the epoch, from the server's clock module.
fn now_seconds() -> i64 {
    berth_server::clock::SystemClock.now().as_micros() / 1_000_000
}

fn seconds_of(lease_date: &Value) -> i64 {
    let text = lease_date.as_str().expect("a date");
    let civil: jiff::civil::DateTime = text.parse().expect("a lease date");
    civil
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("UTC")
        .timestamp()
        .as_second()
}

async fn enrol(app: &TestApp, name: &str, zone: &str, gpu: bool) {
    ok(
        app,
        &[
            "host",
            "create",
            name,
            "--vcpus",
            "16",
            "--memory-mb",
            "65536",
            "--local-gb",
            "500",
            "--zone",
            zone,
            "--extra",
            &format!("gpu={gpu}"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_are_enrolled_and_listed_as_tables_json_and_yaml() {
    let app = TestApp::spawn().await;
    enrol(&app, "compute-1", "az1", true).await;
    // --url on the command line works as well as BERTH_URL.
    let created = run(
        None,
        &[
            "host",
            "create",
            "compute-2",
            "--vcpus",
            "32",
            "--memory-mb",
            "131072",
            "--zone",
            "az2",
            "--url",
            &app.base,
        ],
    )
    .await;
    created
        .assert()
        .success()
        .stdout(contains("hypervisor_hostname"))
        .stdout(contains("compute-2"));
    let table = ok(&app, &["host", "list"]).await;
    let header = table.lines().next().expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "ID",
            "NAME",
            "ZONE",
            "VCPUS",
            "MEMORY_MB",
            "LOCAL_GB",
            "RESERVABLE",
            "STATUS"
        ],
        "{table}"
    );
    assert_eq!(table.lines().count(), 3, "{table}");
    let row = line(&table, "compute-1");
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["1", "compute-1", "az1", "16", "65536", "500", "true", "up"],
        "{table}"
    );
    in_column(&table, "NAME", "compute-2");
    in_column(&table, "ZONE", "az2");
    // Numbers are right-aligned under their headers.
    let vcpus_end = header.find("VCPUS").expect("VCPUS") + "VCPUS".len();
    assert_eq!(&row[vcpus_end - 2..vcpus_end], "16", "{table}");

    let hosts = json(&app, &["host", "list"]).await;
    let names: Vec<&str> = hosts
        .as_array()
        .expect("a JSON list")
        .iter()
        .map(|h| h["hypervisor_hostname"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["compute-1", "compute-2"]);
    assert_eq!(hosts[0]["gpu"], true);
    let yaml = ok(&app, &["host", "show", "compute-1", "--output", "yaml"]).await;
    assert!(yaml.contains("hypervisor_hostname: compute-1"), "{yaml}");
    assert!(yaml.contains("gpu: true"), "{yaml}");

    // Bulk enrolment from a file; a refused entry is reported and the command exits 1.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("hosts.json");
    std::fs::write(
        &file,
        r#"[{"name": "compute-3", "vcpus": 8, "availability_zone": "az1"},
            {"name": "compute-4", "vcpus": 8, "availability_zone": "az1"},
            {"name": "compute-1", "vcpus": 8}]"#,
    )
    .expect("write");
    let file = file.display().to_string();
    let bulk = berth(&app, &["host", "create", "--from-file", &file]).await;
    bulk.assert()
        .code(1)
        .stdout(contains("compute-3"))
        .stdout(contains("compute-4"))
        .stderr(contains("host 3 (compute-1)"));
    let hosts = json(&app, &["host", "list"]).await;
    assert_eq!(hosts.as_array().map(Vec::len), Some(4), "{hosts}");
    let updated = json(&app, &["host", "update", "compute-3", "--extra", "rack=r7"]).await;
    assert_eq!(updated["rack"], "r7");
    ok(&app, &["host", "delete", "compute-4"]).await;
    let hosts = json(&app, &["host", "list"]).await;
    assert_eq!(hosts.as_array().map(Vec::len), Some(3), "{hosts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_created_with_relative_times_and_listed() {
    let app = TestApp::spawn().await;
    enrol(&app, "gpu-1", "az1", true).await;
    enrol(&app, "gpu-2", "az1", true).await;
    enrol(&app, "cpu-1", "az1", false).await;
    let before = now_seconds();
    let lease = json(
        &app,
        &[
            "lease",
            "create",
            "--name",
            "training",
            "--host",
            "min=1,max=2,filter=gpu == true",
            "--start",
            "+1h",
            "--end",
            "+3h",
        ],
    )
    .await;
    assert_eq!(lease["name"], "training");
    assert_eq!(lease["status"], "PENDING");
    let start = seconds_of(&lease["start_date"]);
    let end = seconds_of(&lease["end_date"]);
    assert!(
        (before + 3_590..=before + 3_670).contains(&start),
        "{lease}"
    );
    assert_eq!(end - start, 7_200, "{lease}");
    let reservation = &lease["reservations"][0];
    assert_eq!(reservation["resource_type"], "physical:host");
    assert_eq!(reservation["resource_properties"], r#"["==","$gpu",true]"#);
    assert_eq!(
        reservation["allocations"].as_array().map(Vec::len),
        Some(2),
        "{lease}"
    );

    let table = ok(&app, &["lease", "list"]).await;
    assert!(
        table.starts_with("ID  ") && line(&table, "ID").contains("RESERVATIONS"),
        "{table}"
    );
    let row = line(&table, "training");
    assert!(
        row.contains("PENDING") && row.contains("hosts 1-2"),
        "{table}"
    );
    in_column(&table, "STATUS", "PENDING");

    let yaml = ok(&app, &["lease", "show", "training", "-o", "yaml"]).await;
    assert!(yaml.contains("name: training"), "{yaml}");
    assert!(yaml.contains("resource_type: physical:host"), "{yaml}");
    let shown = ok(&app, &["lease", "show", "training"]).await;
    assert!(
        shown.contains("Reservations:") && shown.contains("start_lease"),
        "{shown}"
    );

    // Reservations of leases, and a reservation update.
    let id = reservation["id"].as_str().expect("id");
    let table = ok(&app, &["reservation", "list"]).await;
    in_column(&table, "ID", id);
    let updated = json(&app, &["reservation", "update", id, "--max", "1"]).await;
    assert_eq!(updated["max"], 1);

    // Instance slots and an absolute end, then delete.
    let slots = json(
        &app,
        &[
            "lease",
            "create",
            "--instance",
            "vcpus=2,memory-mb=4096,disk-gb=20,amount=3,affinity=false",
            "--start",
            "+2d",
            "--for",
            "1d",
        ],
    )
    .await;
    assert_eq!(slots["reservations"][0]["amount"], 3);
    assert_eq!(
        seconds_of(&slots["end_date"]) - seconds_of(&slots["start_date"]),
        86_400
    );
    let id = slots["id"].as_str().expect("id");
    ok(&app, &["lease", "delete", id]).await;
    let leases = json(&app, &["lease", "list"]).await;
    assert_eq!(leases.as_array().map(Vec::len), Some(1), "{leases}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lease_exits_1_with_the_reason_and_the_counter_offer() {
    let app = TestApp::spawn().await;
    enrol(&app, "only-1", "az1", true).await;
    ok(
        &app,
        &[
            "lease", "create", "--name", "first", "--host", "count=1", "--start", "+1h", "--end",
            "+3h",
        ],
    )
    .await;
    let refused = berth(
        &app,
        &[
            "lease", "create", "--name", "second", "--host", "count=1", "--start", "+2h", "--for",
            "1h",
        ],
    )
    .await;
    refused
        .assert()
        .code(1)
        .stderr(contains("refused (409): Not enough resources"))
        .stderr(contains(
            "reservation 0 (physical:host): 1 requested, 0 available",
        ))
        .stderr(contains(
            "counter-offer: the most that fits in this window is reservation 0: 0",
        ))
        .stderr(contains(
            "counter-offer: all of it fits for the same duration from",
        ));
    // For scripts, berth's body is printed too.
    let refused = berth(
        &app,
        &[
            "lease", "create", "--host", "count=1", "--start", "+2h", "--for", "1h", "-o", "json",
        ],
    )
    .await;
    refused.clone().assert().code(1);
    let body: Value = serde_json::from_slice(&refused.stdout).expect("JSON body");
    assert_eq!(body["counter_offer"]["amounts"], serde_json::json!([0]));
    assert!(
        body["counter_offer"]["earliest_start"].is_string(),
        "{body}"
    );
    // An unknown property in a filter is a refusal too (400), with berth's reason.
    berth(
        &app,
        &[
            "lease",
            "create",
            "--host",
            "filter=colour == blue",
            "--start",
            "+1h",
            "--end",
            "+2h",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("bad request (400)"))
    .stderr(contains("$colour"));
    berth(&app, &["lease", "show", "nope"])
        .await
        .assert()
        .code(1)
        .stderr(contains("not found (404)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_usage_errors_exit_2() {
    let closed = crate::support::free_port();
    let url = format!("http://127.0.0.1:{closed}");
    run(Some(&url), &["host", "list"])
        .await
        .assert()
        .code(2)
        .stderr(contains("cannot reach berth at"));
    run(None, &["lease", "list", "--url", "not a url"])
        .await
        .assert()
        .code(2)
        .stderr(contains("is not a URL"));
    for args in [
        &["host", "frobnicate"][..],
        &[
            "lease",
            "create",
            "--host",
            "count=1",
            "--start",
            "yesterday",
            "--end",
            "+1h",
        ],
        &["lease", "create", "--host", "count=1", "--end", "+1x"],
        &["lease", "create", "--host", "count=1"],
        &["availability", "--hosts", "2"],
        &["host", "list", "--output", "xml"],
    ] {
        run(Some(&url), args)
            .await
            .assert()
            .code(2)
            .stderr(contains("error: "));
    }
    // Mistakes the client finds itself, before asking berth.
    for args in [
        &["lease", "create", "--end", "+1h"][..],
        &["lease", "create", "--host", "min=x", "--end", "+1h"],
        &["lease", "create", "--host", "filter=gpu ==", "--end", "+1h"],
        &["availability", "--for", "2h"],
    ] {
        run(Some(&url), args)
            .await
            .assert()
            .code(2)
            .stderr(contains("berth: "))
            // The port is closed: had the client asked berth, it would say it cannot reach it.
            .stderr(contains("cannot reach").not());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_says_when_the_hosts_are_free() {
    let app = TestApp::spawn().await;
    enrol(&app, "gpu-1", "az1", true).await;
    enrol(&app, "gpu-2", "az2", true).await;
    enrol(&app, "cpu-1", "az1", false).await;
    let free = ok(
        &app,
        &[
            "availability",
            "--hosts",
            "2",
            "--filter",
            "gpu == true",
            "--for",
            "48h",
        ],
    )
    .await;
    assert!(
        free.starts_with("Free now: 2 hosts with gpu == true"),
        "{free}"
    );
    assert!(free.contains("(2d)"), "{free}");
    in_column(&free, "ZONE", "az2");
    ok(
        &app,
        &[
            "lease",
            "create",
            "--name",
            "busy",
            "--host",
            "count=1,filter=gpu == true,zone=az1",
            "--start",
            "now",
            "--end",
            "+1d",
        ],
    )
    .await;
    let later = ok(
        &app,
        &[
            "availability",
            "--hosts",
            "2",
            "--filter",
            "gpu == true",
            "--for",
            "48h",
        ],
    )
    .await;
    assert!(later.starts_with("Not free from"), "{later}");
    assert!(later.contains("1 of 2 hosts fit"), "{later}");
    assert!(line(&later, "Free in").contains("(2d)"), "{later}");
    let answer = json(
        &app,
        &[
            "availability",
            "--hosts",
            "2",
            "--filter",
            "gpu == true",
            "--for",
            "48h",
        ],
    )
    .await;
    assert_eq!(answer["fits"], false);
    assert!(
        answer["counter_offer"]["earliest_start"].is_string(),
        "{answer}"
    );
    // Three GPU hosts never exist: exit 1.
    berth(
        &app,
        &[
            "availability",
            "--hosts",
            "3",
            "--filter",
            "gpu == true",
            "--for",
            "1h",
        ],
    )
    .await
    .assert()
    .code(1)
    .stdout(contains("no start within the search horizon"));
    // A JSON filter is taken as it is.
    ok(
        &app,
        &[
            "availability",
            "--hosts",
            "1",
            "--filter",
            r#"["==", "$gpu", false]"#,
            "--for",
            "1h",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_enrolled_and_claimed() {
    let app = TestApp::spawn().await;
    let node = json(
        &app,
        &[
            "node",
            "create",
            "n1",
            "--resource-class",
            "baremetal-gold",
            "--provision-state",
            "available",
            "--property",
            "cores=48",
            "--trait",
            "CUSTOM_GPU",
        ],
    )
    .await;
    assert_eq!(node["properties"]["cores"], 48);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("nodes.json");
    std::fs::write(
        &file,
        r#"[{"name": "n2", "resource_class": "baremetal-gold", "provision_state": "available"},
            {"name": "n3", "resource_class": "baremetal-gold", "provision_state": "available"}]"#,
    )
    .expect("write");
    let file = file.display().to_string();
    berth(&app, &["node", "create", "--from-file", &file])
        .await
        .assert()
        .success()
        .stderr(contains("Enrolled 2 nodes"));
    let table = ok(&app, &["node", "list"]).await;
    assert_eq!(table.lines().count(), 4, "{table}");
    in_column(&table, "PROVISION_STATE", "available");
    in_column(&table, "NAME", "n3");

    let first = "11111111-1111-4111-8111-111111111111";
    let claim = json(
        &app,
        &["node", "claim", "--from", "n1,n2,n3", "--instance", first],
    )
    .await;
    assert_eq!(claim["node_uuid"], node["uuid"]);
    assert_eq!(claim["instance_uuid"], first);
    let second = "22222222-2222-4222-8222-222222222222";
    let claim2 = json(
        &app,
        &["node", "claim", "--from", "n1,n2,n3", "--instance", second],
    )
    .await;
    assert_ne!(claim2["node_uuid"], node["uuid"]);
    berth(
        &app,
        &[
            "node",
            "claim",
            "--from",
            "n1",
            "--instance",
            "33333333-3333-4333-8333-333333333333",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("refused (409)"))
    .stderr(contains("claimed"));
    let claims = ok(&app, &["claim", "list"]).await;
    in_column(&claims, "INSTANCE", first);
    let uuid = claim["uuid"].as_str().expect("uuid");
    ok(&app, &["claim", "delete", uuid]).await;
    let claims = json(&app, &["claim", "list"]).await;
    assert_eq!(claims.as_array().map(Vec::len), Some(1), "{claims}");
    let updated = json(
        &app,
        &[
            "node",
            "update",
            "n3",
            "--maintenance",
            "true",
            "--maintenance-reason",
            "fan",
        ],
    )
    .await;
    assert_eq!(updated["maintenance"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_and_flavors() {
    let app = TestApp::spawn().await;
    enrol(&app, "compute-1", "az1", false).await;
    enrol(&app, "compute-2", "az2", false).await;
    let flavor = json(
        &app,
        &[
            "flavor", "create", "m1.large", "--vcpus", "8", "--ram", "16384", "--disk", "80",
        ],
    )
    .await;
    assert_eq!(flavor["id"], "m1.large");
    let table = ok(&app, &["flavor", "list"]).await;
    assert_eq!(
        line(&table, "m1.large")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["m1.large", "m1.large", "8", "16384", "80"],
        "{table}"
    );
    let fit = ok(
        &app,
        &[
            "capacity", "show", "--zone", "az1", "--from", "now", "--to", "+2d", "--flavor",
            "m1.large",
        ],
    )
    .await;
    assert!(fit.starts_with("Zone az1, "), "{fit}");
    assert_eq!(
        line(&fit, "m1.large")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["m1.large", "2"],
        "{fit}"
    );
    let figures = ok(&app, &["capacity", "show", "--zone", "az1", "--to", "+1d"]).await;
    assert_eq!(
        line(&figures, "numCpuCores")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["numCpuCores", "16", "0", "0", "16"],
        "{figures}"
    );
    assert!(line(&figures, "MEASURE").contains("AVAILABLE"), "{figures}");
    let all = json(&app, &["capacity", "show", "--to", "+1d"]).await;
    assert_eq!(all[0]["measure"], "numCpuCores");
    assert_eq!(all[0]["capacityInformation"]["total"], 32, "{all}");
    ok(&app, &["flavor", "delete", "m1.large"]).await;
    let flavors = json(&app, &["flavor", "list"]).await;
    assert_eq!(flavors, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_and_the_notification_feed() {
    let app = TestApp::spawn_allowing_loopback().await;
    enrol(&app, "compute-1", "az1", false).await;
    let subscription = json(
        &app,
        &[
            "subscription",
            "create",
            "--callback",
            "http://127.0.0.1:9/hook",
        ],
    )
    .await;
    assert_eq!(subscription["type"], "reservation");
    // Feed-only: no callback; the condition holds at once, so it fires at once.
    ok(
        &app,
        &[
            "subscription",
            "create",
            "--capacity",
            "compute",
            "--threshold",
            "available < 1000",
            "--zone",
            "az1",
        ],
    )
    .await;
    let table = ok(&app, &["subscription", "list"]).await;
    let header = table.lines().next().expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["ID", "TYPE", "WATCHES", "CALLBACK", "CREATED"]
    );
    assert!(
        line(&table, "reservation").contains("all reservations"),
        "{table}"
    );
    assert!(
        line(&table, "capacity").contains("available numCpuCores in az1 lt 1000"),
        "{table}"
    );
    let lease = json(
        &app,
        &[
            "lease", "create", "--host", "count=1", "--start", "+1h", "--end", "+2h",
        ],
    )
    .await;
    let lease_id = lease["id"].as_str().expect("id");
    let low = json(
        &app,
        &[
            "subscription",
            "create",
            "--utilization",
            lease["name"].as_str().expect("name"),
            "--below",
            "20",
            "--for",
            "2h",
            "--class",
            "VCPU",
        ],
    )
    .await;
    assert_eq!(low["type"], "utilization", "{low}");
    assert_eq!(low["forSeconds"], 7_200, "{low}");
    let table = ok(&app, &["subscription", "list"]).await;
    assert!(
        line(&table, "utilization").contains(&format!("lease {lease_id} VCPU below 20% for 2h")),
        "{table}"
    );
    ok(
        &app,
        &[
            "subscription",
            "delete",
            low["subscriptionId"].as_str().expect("id"),
        ],
    )
    .await;
    let feed = ok(&app, &["notification", "list"]).await;
    let row = line(&feed, "lease.create");
    assert!(row.contains(lease["id"].as_str().expect("id")), "{feed}");
    assert!(row.contains("ReservationChange"), "{feed}");
    assert!(feed.contains("Next cursor: "), "{feed}");
    let page = json(&app, &["notification", "list", "--limit", "1"]).await;
    assert_eq!(page["notifications"].as_array().map(Vec::len), Some(1));
    let next = page["next"].as_u64().expect("next").to_string();
    let rest = json(&app, &["notification", "list", "--after", &next]).await;
    assert!(
        rest["notifications"]
            .as_array()
            .expect("list")
            .iter()
            .all(|n| n["cursor"].as_u64() > page["next"].as_u64()),
        "{rest}"
    );
    let mut crossed = String::new();
    for _ in 0..100 {
        let feed = ok(&app, &["notification", "list"]).await;
        if let Some(row) = feed.lines().find(|l| l.contains("CapacityChange")) {
            crossed = row.to_owned();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        crossed.contains("entered available lt 1000"),
        "the feed-only capacity subscription's notification: {crossed:?}"
    );
    let id = subscription["subscriptionId"].as_str().expect("id");
    ok(&app, &["subscription", "delete", id]).await;
    let left = json(&app, &["subscription", "list"]).await;
    assert_eq!(left.as_array().map(Vec::len), Some(1), "{left}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = run(None, &["completions", shell]).await;
        output
            .clone()
            .assert()
            .success()
            .stdout(contains("availability"));
        assert!(output.stdout.len() > 1_000, "{shell}");
    }
    run(None, &["completions", "tcsh"]).await.assert().code(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_once_the_lease_is_active() {
    let app = TestApp::spawn().await;
    enrol(&app, "compute-1", "az1", false).await;
    let output = berth(
        &app,
        &[
            "lease",
            "create",
            "--name",
            "right-away",
            "--host",
            "count=1",
            "--start",
            "now",
            "--end",
            "+1h",
            "--wait",
            "--wait-timeout",
            "30s",
        ],
    )
    .await;
    output
        .clone()
        .assert()
        .success()
        .stderr(contains("Lease right-away is ACTIVE."));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        line(&stdout, "status")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["status", "ACTIVE"],
        "{stdout}"
    );
    let leases = json(&app, &["lease", "list", "--status", "active"]).await;
    assert_eq!(leases[0]["name"], "right-away");
    // A lease that cannot start in the time given: exit 1, saying so.
    berth(
        &app,
        &[
            "lease",
            "create",
            "--host",
            "count=1",
            "--start",
            "+1h",
            "--end",
            "+2h",
            "--wait",
            "--wait-timeout",
            "1s",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("did not start within 1s"));
}

#[tokio::test]
async fn a_hold_from_availability_becomes_a_lease_and_a_lease_can_wait() {
    let app = TestApp::spawn().await;
    enrol(&app, "gpu-1", "az1", true).await;
    let start = "+1d";
    let answer = json(
        &app,
        &[
            "availability",
            "--hosts",
            "1",
            "--start",
            start,
            "--for",
            "2h",
            "--hold",
            "15m",
        ],
    )
    .await;
    assert_eq!(answer["hold"]["held"], true, "{answer}");
    let hold_id = answer["hold"]["hold_id"]
        .as_str()
        .expect("hold id")
        .to_owned();
    let text = ok(
        &app,
        &[
            "availability",
            "--hosts",
            "1",
            "--start",
            "+3d",
            "--for",
            "2h",
            "--hold",
            "10m",
        ],
    )
    .await;
    assert!(text.contains("Held from"), "{text}");
    assert!(text.contains("--hold-id"), "{text}");
    let held_start = answer["hold"]["start_date"]
        .as_str()
        .expect("start")
        .to_owned();
    let held_end = answer["hold"]["end_date"].as_str().expect("end").to_owned();
    let lease = json(
        &app,
        &[
            "lease",
            "create",
            "--name",
            "from-hold",
            "--host",
            "count=1",
            "--start",
            &format!("{held_start}Z"),
            "--end",
            &format!("{held_end}Z"),
            "--hold-id",
            &hold_id,
        ],
    )
    .await;
    assert_eq!(lease["status"], "PENDING", "{lease}");
    // The only host is taken: a second lease waits instead of being refused.
    let waiting = json(
        &app,
        &[
            "lease",
            "create",
            "--name",
            "second",
            "--host",
            "count=1",
            "--start",
            &format!("{held_start}Z"),
            "--end",
            &format!("{held_end}Z"),
            "--wait-until",
            "+2h",
        ],
    )
    .await;
    assert_eq!(waiting["status"], "WAITING", "{waiting}");
    // A bad --hold is a usage error.
    let output = berth(
        &app,
        &[
            "availability",
            "--hosts",
            "1",
            "--for",
            "2h",
            "--hold",
            "90s",
        ],
    )
    .await;
    output.assert().code(2);
}

#[tokio::test]
async fn a_recurring_lease_is_refused_with_its_conflicts_then_created_renamed_and_cancelled() {
    let app = TestApp::spawn().await;
    enrol(&app, "only-1", "az1", true).await;
    let create = [
        "lease",
        "create",
        "--name",
        "daily",
        "--host",
        "count=1",
        "--start",
        "+1h",
        "--for",
        "1h",
        "--recurrence",
        "FREQ=DAILY;COUNT=3",
    ];
    ok(
        &app,
        &[
            "lease", "create", "--name", "blocker", "--host", "count=1", "--start", "+1d", "--for",
            "3h",
        ],
    )
    .await;
    berth(&app, &create)
        .await
        .assert()
        .code(1)
        .stderr(contains("1 of the 3 occurrences do not fit"))
        .stderr(contains("occurrence 1 ("))
        .stderr(contains("nearest window: fits from"));
    ok(&app, &["lease", "delete", "blocker"]).await;
    let series = json(&app, &create).await;
    assert_eq!(
        series["leases"].as_array().map(Vec::len),
        Some(3),
        "{series}"
    );
    let id = series["id"].as_str().expect("series id").to_owned();
    let table = ok(&app, &["lease", "series", "show", &id]).await;
    let third = series["leases"][2]["id"].as_str().expect("an id");
    assert!(line(&table, third).trim_start().starts_with('2'), "{table}");
    let renamed = json(
        &app,
        &[
            "lease",
            "series",
            "update",
            &id,
            "--name",
            "standup",
            "--shift-minutes",
            "-30",
        ],
    )
    .await;
    assert_eq!(renamed["name"], "standup", "{renamed}");
    assert_ne!(
        renamed["leases"][0]["start_date"], series["leases"][0]["start_date"],
        "{renamed}"
    );
    ok(&app, &["lease", "series", "delete", &id]).await;
    berth(&app, &["lease", "series", "show", &id])
        .await
        .assert()
        .code(1)
        .stderr(contains("not found (404)"));
    berth(
        &app,
        &[
            "lease",
            "create",
            "--host",
            "count=1",
            "--end",
            "+1h",
            "--recurrence",
            "FREQ=DAILY",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("recurrence: the rule is unbounded"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_shared_listed_and_unshared() {
    let app = TestApp::spawn().await;
    enrol(&app, "shared-1", "az1", true).await;
    ok(
        &app,
        &[
            "lease", "create", "--name", "lab", "--host", "count=1", "--start", "+1h", "--for",
            "2h",
        ],
    )
    .await;
    let shared = json(
        &app,
        &[
            "lease",
            "share",
            "lab",
            "--project",
            "course-101",
            "--cap",
            "vcpu=4",
            "--cap",
            "MEMORY_MB=8192",
        ],
    )
    .await;
    assert_eq!(shared[0]["project_id"], "course-101", "{shared}");
    assert_eq!(
        shared[0]["cap"],
        serde_json::json!({"MEMORY_MB": 8192, "VCPU": 4})
    );
    let table = ok(&app, &["lease", "shares", "lab"]).await;
    in_column(&table, "CAP", "MEMORY_MB=8192,VCPU=4");
    berth(
        &app,
        &[
            "lease",
            "share",
            "lab",
            "--project",
            "course-101",
            "--cap",
            "VCPU=-1",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("cap.VCPU"));
    berth(
        &app,
        &["lease", "share", "lab", "--project", "x", "--cap", "VCPU"],
    )
    .await
    .assert()
    .code(2)
    .stderr(contains("use CLASS=N"));
    ok(
        &app,
        &["lease", "unshare", "lab", "--project", "course-101"],
    )
    .await;
    let listed = json(&app, &["lease", "shares", "lab"]).await;
    assert_eq!(listed, serde_json::json!([]), "{listed}");
    berth(
        &app,
        &["lease", "unshare", "lab", "--project", "course-101"],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("not shared with project course-101"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_shown_as_a_table_json_and_csv() {
    let app = TestApp::spawn().await;
    enrol(&app, "usage-1", "az1", false).await;
    ok(
        &app,
        &[
            "lease", "create", "--name", "used", "--host", "count=1", "--start", "now", "--for",
            "2h",
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let report = json(&app, &["usage", "--from", "-1h"]).await;
    let rows = report["usage"]["rows"].as_array().expect("rows");
    let vcpu = rows
        .iter()
        .find(|r| r["resource_class"] == "VCPU")
        .unwrap_or_else(|| panic!("no VCPU row: {report}"));
    assert!(
        vcpu["reserved_hours"].as_f64().expect("hours") > 0.0,
        "{report}"
    );
    let table = ok(&app, &["usage", "--from", "-1h", "--to", "+1h"]).await;
    in_column(&table, "CLASS", "VCPU");
    assert!(table.contains("counted until"), "{table}");
    let csv = ok(&app, &["usage", "--from", "-1h", "--csv"]).await;
    assert!(
        csv.starts_with("project_id,resource_class,reserved_hours,"),
        "{csv}"
    );
    assert!(csv.lines().any(|l| l.contains(",VCPU,")), "{csv}");
    // The lease's utilization: what it held, nothing used, by class and over time.
    let shown = json(&app, &["lease", "utilization", "used"]).await;
    let classes = shown["utilization"]["classes"].as_array().expect("classes");
    let vcpu = classes
        .iter()
        .find(|c| c["resource_class"] == "VCPU")
        .unwrap_or_else(|| panic!("no VCPU: {shown}"));
    assert_eq!(vcpu["utilization"], 0.0, "{shown}");
    assert_eq!(vcpu["steps"][0]["reserved"], 16, "the whole host: {shown}");
    let table = ok(&app, &["lease", "utilization", "used"]).await;
    in_column(&table, "UTILIZATION", "0%");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("VCPU") && l.split_whitespace().nth(3) == Some("16")),
        "a step of the whole host's 16 VCPU: {table}"
    );
    berth(&app, &["usage", "--from", "yesterday"])
        .await
        .assert()
        .code(2)
        .stderr(contains("-7d"));
    berth(&app, &["usage", "--from", "-1h", "--to", "-2h"])
        .await
        .assert()
        .code(1)
        .stderr(contains("end must be later than start"));
}

#[tokio::test]
async fn a_budget_is_set_shown_refuses_a_lease_and_is_deleted() {
    let app = TestApp::spawn().await;
    enrol(&app, "budget-1", "az1", false).await;
    let set = ok(
        &app,
        &[
            "budget", "set", "admin", "--period", "week", "--limit", "vcpu=10",
        ],
    )
    .await;
    assert!(
        set.lines()
            .any(|l| l.starts_with("admin") && l.contains("VCPU") && l.contains("10.00")),
        "{set}"
    );
    // A whole 16-VCPU host for two hours is 32 VCPU-hours, and at least 16 of them fall in one
    // week even when the lease crosses Monday: refused, exit 1, with the reason.
    berth(
        &app,
        &[
            "lease", "create", "--name", "big", "--host", "count=1", "--start", "+1d", "--for",
            "2h",
        ],
    )
    .await
    .assert()
    .code(1)
    .stderr(contains("budget of 10 VCPU-hours per week is exceeded"));
    let listed = json(&app, &["budget", "list"]).await;
    assert_eq!(listed[0]["limits"]["VCPU"], 10, "{listed}");
    berth(&app, &["budget", "set", "admin", "--limit", "VCPU=-1"])
        .await
        .assert()
        .code(1)
        .stderr(contains("limits.VCPU"));
    berth(&app, &["budget", "set", "admin", "--limit", "VCPU"])
        .await
        .assert()
        .code(2)
        .stderr(contains("use CLASS=N"));
    ok(&app, &["budget", "delete", "admin"]).await;
    berth(&app, &["budget", "show", "admin"])
        .await
        .assert()
        .code(1)
        .stderr(contains("has no budget"));
}
