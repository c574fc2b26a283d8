//! The dashboard at `/ui`, tested as a person uses it. Its files are served with their content
//! types and caching headers, its read-only endpoints answer from the catalog, and, in headless
//! Chromium against a server seeded with the demo cloud, the timeline draws one bar per
//! (lease, host) hold the leases API reports (degraded ones marked), the capacity chart shows
//! the capacity API's figures, the lease page lists reservations, events and notifications, the
//! failures view lists the hosts out of service and the leases they affect, the usage view draws
//! a bar per project and lists the usage report's figures, and an unauthenticated page says so
//! readably. Screenshots of the timeline, the capacity chart and the usage view are saved under
//! the target directory's `ui-screenshots/` for review.
//!
//! The browser tests need Chromium: `BERTH_TEST_CHROMIUM` names it (`scripts/test.sh` installs
//! it and sets it), otherwise `chromium` is looked for on the `PATH`. Without it they print a
//! loud SKIPPED line and return, except under `CI=true`, where that is a failure.

use crate::blazar_leases::{now_micros, parse_lease_date, rfc3339};
use crate::support::{Options, TestApp};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECOND: i64 = 1_000_000;
const HOUR: i64 = 3_600 * SECOND;
const DAY: i64 = 24 * HOUR;
/// How long one Chromium run may take before the test fails (and the browser is killed).
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);
/// The virtual time the page gets to load and render, in milliseconds.
const VIRTUAL_TIME_BUDGET_MS: u32 = 10_000;
/// One browser at a time: Chromium is heavy and tests run in parallel.
static BROWSER_SLOT: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

// ---------------------------------------------------------------------------------------------
// Chromium
// ---------------------------------------------------------------------------------------------

/// Headless Chromium, run once per page with its own profile directory.
struct Browser {
    path: PathBuf,
    profile: tempfile::TempDir,
}

/// Kills a browser's whole process group unless it has exited by itself.
struct GroupGuard {
    pid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

impl Browser {
    /// The browser, or `None` after a loud skip line naming `test` (a failure under CI).
    fn find(test: &str) -> Option<Browser> {
        let named = std::env::var_os("BERTH_TEST_CHROMIUM")
            .map(PathBuf::from)
            .filter(|p| p.is_file());
        let found = named.or_else(|| {
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .find_map(|name| on_path(name))
        });
        match found {
            Some(path) => Some(Browser {
                path,
                profile: tempfile::tempdir().expect("profile dir"),
            }),
            None if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("Chromium is missing and CI needs the browser tests ({test})")
            }
            None => {
                // Straight to the process's stderr: the test harness captures `eprintln!`.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: Chromium is not installed (set BERTH_TEST_CHROMIUM or install \
                     chromium); the dashboard browser test did not run ({test})"
                );
                None
            }
        }
    }

    /// Runs Chromium headless with `args` and returns what it printed.
    async fn run(&self, args: Vec<String>) -> String {
        let _slot = BROWSER_SLOT.acquire().await.expect("browser slot");
        let path = self.path.clone();
        let dir = self.profile.path().to_owned();
        tokio::task::spawn_blocking(move || run_blocking(&path, &dir, &args))
            .await
            .expect("browser task")
    }

    /// The DOM of `url` once the page has had its virtual time budget.
    async fn dump_dom(&self, url: &str) -> String {
        self.run(vec!["--dump-dom".to_owned(), url.to_owned()])
            .await
    }

    /// A screenshot of `url` into `file`, `height` pixels tall and 1600 wide.
    async fn screenshot(&self, url: &str, file: &Path, height: u32) {
        std::fs::create_dir_all(file.parent().expect("a directory")).expect("screenshot dir");
        let _ = std::fs::remove_file(file);
        self.run(vec![
            format!("--screenshot={}", file.display()),
            format!("--window-size=1600,{height}"),
            "--hide-scrollbars".to_owned(),
            url.to_owned(),
        ])
        .await;
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "a screenshot of {url} in {}", file.display());
    }
}

fn run_blocking(path: &Path, profile: &Path, args: &[String]) -> String {
    use std::os::unix::process::CommandExt as _;
    let out_path = profile.join("stdout.txt");
    let err_path = profile.join("stderr.txt");
    let stdout = std::fs::File::create(&out_path).expect("stdout file");
    let stderr = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = Command::new(path)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--force-device-scale-factor=1",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.join("profile").display()
        ))
        .arg(format!("--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let mut guard = GroupGuard {
        pid: Some(child.id()),
    };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish within {BROWSER_TIMEOUT:?}: {}",
                tail(&err_path)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    guard.pid = None;
    assert!(
        status.success(),
        "chromium failed ({status}): {}",
        tail(&err_path)
    );
    std::fs::read_to_string(&out_path).expect("chromium output")
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut start = text.len().saturating_sub(2_000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Where screenshots go for review: `ui-screenshots/` in the target directory.
fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("ui-screenshots")
}

// ---------------------------------------------------------------------------------------------
// Reading the DOM
// ---------------------------------------------------------------------------------------------

/// The attributes of every element whose `data-role` is `role`, in document order.
fn elements(html: &str, role: &str) -> Vec<BTreeMap<String, String>> {
    tags_with(html, &format!("data-role=\"{role}\""))
}

/// The attributes of every start tag in `html` that has attribute `name`, in document order.
fn elements_with(html: &str, name: &str) -> Vec<BTreeMap<String, String>> {
    tags_with(html, &format!("{name}=\""))
}

/// The attributes of every start tag of `html` whose text holds `needle`, in document order.
fn tags_with(html: &str, needle: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = html[from..].find(needle) {
        let at = from + found;
        let start = html[..at].rfind('<').expect("inside a tag");
        let end = at + html[at..].find('>').expect("a closed tag");
        out.push(attributes(&html[start + 1..end]));
        from = end;
    }
    out
}

/// The attributes of one start tag's text (without `<` and `>`), unescaped.
fn attributes(tag: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = tag
        .trim_start()
        .split_once(char::is_whitespace)
        .map_or("", |(_, r)| r);
    loop {
        rest = rest.trim_start().trim_start_matches('/').trim_start();
        if rest.is_empty() {
            return out;
        }
        let name_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_owned();
        rest = &rest[name_end..];
        if let Some(after) = rest.strip_prefix("=\"") {
            let close = after.find('"').expect("a closed attribute value");
            out.insert(name, unescape(&after[..close]));
            rest = &after[close + 1..];
        } else {
            out.insert(name, String::new());
        }
    }
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The state the page's `<main>` ended in, with the view it shows.
fn main_state(html: &str) -> (String, String) {
    let start = html.find("<main").expect("a main element");
    let end = start + html[start..].find('>').expect("a closed tag");
    let attrs = attributes(&html[start + 1..end]);
    (
        attrs.get("data-view").cloned().unwrap_or_default(),
        attrs.get("data-state").cloned().unwrap_or_default(),
    )
}

fn assert_ready(html: &str, view: &str) {
    let errors = elements(html, "error");
    assert!(errors.is_empty(), "the page shows an error: {errors:?}");
    assert_eq!(
        main_state(html),
        (view.to_owned(), "ready".to_owned()),
        "the {view} view rendered"
    );
}

/// The figures the usage view lists for each project, in the order of its table's columns.
const USAGE_FIELDS: [&str; 6] = [
    "reserved_hours",
    "consumed_hours",
    "lent_hours",
    "idle_hours",
    "on_demand_hours",
    "preemptible_hours",
];

/// The cells of one table row's HTML that carry a `data-field`: the field, the value and the
/// text shown.
fn figure_cells(row: &str) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    let mut rest = row;
    while let Some(at) = rest.find("data-field=\"") {
        let start = rest[..at].rfind('<').expect("inside a tag");
        let end = at + rest[at..].find('>').expect("a closed tag");
        let attrs = attributes(&rest[start + 1..end]);
        let text_end = rest[end..].find('<').map_or(rest.len(), |i| end + i);
        out.push((
            attrs["data-field"].clone(),
            attrs["data-value"].parse().expect("a number"),
            unescape(&rest[end + 1..text_end]),
        ));
        rest = &rest[text_end..];
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The demo server
// ---------------------------------------------------------------------------------------------

async fn demo() -> TestApp {
    TestApp::spawn_with(Options {
        demo: true,
        ..Options::default()
    })
    .await
}

async fn leases(app: &TestApp) -> Vec<Value> {
    let (status, body) = app.get("/reservation/v1/leases", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["leases"].as_array().expect("leases").clone()
}

/// Waits until the lifecycle engine has started every demo lease that starts now.
async fn started(app: &TestApp) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = leases(app).await;
        let now = now_micros();
        let waiting = all.iter().any(|l| {
            l["status"] == "PENDING"
                && parse_lease_date(l["start_date"].as_str().expect("start")) <= now
        });
        if !waiting {
            return all;
        }
        assert!(Instant::now() < deadline, "the demo leases did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The window the browser tests pin: a day before the first lease starts, for eight days.
fn window(leases: &[Value]) -> (String, String) {
    let first = leases
        .iter()
        .map(|l| parse_lease_date(l["start_date"].as_str().expect("start")))
        .min()
        .expect("demo leases");
    let from = first - first.rem_euclid(HOUR) - DAY;
    (rfc3339(from), rfc3339(from + 8 * DAY))
}

fn micros(rfc3339_text: &str) -> i64 {
    rfc3339_text
        .parse::<jiff::Timestamp>()
        .expect("an RFC 3339 time")
        .as_microsecond()
}

/// Every (lease, host) hold of the leases overlapping `[from, to)`, with the lease's status,
/// whether it is degraded, and how much is missing on that host.
fn expected_holds(leases: &[Value], from: i64, to: i64) -> BTreeMap<(String, String), Value> {
    let mut holds = BTreeMap::new();
    for lease in leases {
        let start = parse_lease_date(lease["start_date"].as_str().expect("start"));
        let end = parse_lease_date(lease["end_date"].as_str().expect("end"));
        if start >= to || end <= from {
            continue;
        }
        for reservation in lease["reservations"].as_array().expect("reservations") {
            let missing = reservation["missing_resources"]["hosts"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for allocation in reservation["allocations"].as_array().expect("allocations") {
                let host = allocation["host_id"].as_str().expect("host id").to_owned();
                let lost: u64 = missing
                    .iter()
                    .filter(|m| m["host_id"].as_str() == Some(host.as_str()))
                    .map(|m| m["amount"].as_u64().expect("amount"))
                    .sum();
                let key = (lease["id"].as_str().expect("id").to_owned(), host);
                let entry = holds.entry(key).or_insert_with(|| {
                    serde_json::json!({
                        "status": lease["status"],
                        "degraded": lease["degraded"],
                        "missing": 0,
                    })
                });
                entry["missing"] = (entry["missing"].as_u64().expect("missing") + lost).into();
            }
        }
    }
    holds
}

// ---------------------------------------------------------------------------------------------
// Tests without a browser
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn dashboard_files_are_served_with_their_types_and_caching() {
    let app = TestApp::spawn().await;
    let mut scripts = BTreeSet::new();
    for path in ["/ui", "/ui/"] {
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers().clone();
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        assert_eq!(headers["cache-control"], "no-cache");
        assert!(headers.contains_key("etag"));
        let policy = headers["content-security-policy"].to_str().expect("csp");
        assert!(policy.contains("script-src 'self'"), "{policy}");
        let html = response.text().await.expect("html");
        for link in html.split('"').filter(|t| t.starts_with("/ui/assets/")) {
            scripts.insert(link.to_owned());
        }
    }
    assert!(scripts.contains("/ui/assets/app.js") && scripts.contains("/ui/assets/app.css"));
    // Every module the scripts import is served too.
    let mut pending: Vec<String> = scripts.iter().cloned().collect();
    let mut seen = BTreeSet::new();
    while let Some(path) = pending.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .expect("type")
            .to_owned();
        let wanted = match path.rsplit('.').next() {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            other => panic!("unexpected asset kind {other:?}"),
        };
        assert_eq!(content_type, wanted, "{path}");
        assert_eq!(response.headers()["cache-control"], "no-cache", "{path}");
        assert_eq!(
            response.headers()["x-content-type-options"],
            "nosniff",
            "{path}"
        );
        let text = response.text().await.expect("text");
        for import in text.split("from './").skip(1) {
            let name = import.split('\'').next().expect("a module name");
            pending.push(format!("/ui/assets/{name}"));
        }
    }
    assert!(seen.len() >= 8, "the page's files: {seen:?}");
    // An unchanged file is not sent again.
    let first = app
        .client
        .get(format!("{}/ui/assets/app.js", app.base))
        .send()
        .await
        .expect("send");
    let etag = first.headers()["etag"].clone();
    let again = app
        .client
        .get(format!("{}/ui/assets/app.js", app.base))
        .header("if-none-match", etag)
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let (status, body) = app.get("/ui/assets/nothing.js", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .expect("detail")
            .contains("nothing.js")
    );
    let (_, spec) = app.get("/openapi.json", None).await;
    for path in [
        "/ui",
        "/ui/",
        "/ui/assets/{file}",
        "/ui/api/zones",
        "/ui/api/failures",
    ] {
        assert!(
            spec["paths"][path]["get"].is_object(),
            "{path} is documented"
        );
    }
}

#[tokio::test]
async fn dashboard_endpoints_read_the_demo_catalog() {
    let app = demo().await;
    let (status, body) = app.get("/ui/api/zones", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let zones = body["zones"].as_array().expect("zones");
    let names: Vec<&str> = zones.iter().filter_map(|z| z["name"].as_str()).collect();
    assert_eq!(names, ["az1", "az2", "az3"]);
    for zone in zones {
        let classes: Vec<&str> = zone["resource_classes"]
            .as_array()
            .expect("classes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(classes[..3], ["VCPU", "MEMORY_MB", "DISK_GB"], "{zone}");
        assert!(classes.contains(&"CUSTOM_BAREMETAL_GOLD"), "{zone}");
        assert!(!classes.iter().any(|c| c.starts_with("CUSTOM_RESERVATION_")));
    }
    let out: u64 = zones
        .iter()
        .map(|z| z["hosts_out_of_service"].as_u64().expect("count"))
        .sum();
    assert_eq!(out, 2);

    let all = started(&app).await;
    assert!(all.len() >= 12, "a dozen demo leases");
    let degraded: Vec<&Value> = all.iter().filter(|l| l["degraded"] == true).collect();
    assert_eq!(degraded.len(), 1, "one demo lease is degraded");
    let (status, body) = app.get("/ui/api/failures", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let failures = body["providers"].as_array().expect("providers");
    let states: BTreeMap<&str, &str> = failures
        .iter()
        .map(|f| {
            (
                f["name"].as_str().expect("name"),
                f["status"].as_str().expect("status"),
            )
        })
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("compute-az1-03", "maintenance"),
            ("compute-az3-12", "down")
        ])
    );
    let down = failures
        .iter()
        .find(|f| f["status"] == "down")
        .expect("the host that is down");
    assert!(
        down["since"].is_string() && down["reason"].is_string(),
        "{down}"
    );
    let affected = down["leases"].as_array().expect("leases");
    assert_eq!(affected.len(), 1, "{down}");
    assert_eq!(affected[0]["id"], degraded[0]["id"]);
    assert_eq!(affected[0]["missing_here"], 1);
}

#[tokio::test]
async fn dashboard_endpoints_follow_the_auth_mode() {
    let dir = tempfile::tempdir().expect("dir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[tokens]]\ntoken = \"admin-secret\"\nproject_id = \"ops\"\nuser_id = \"root\"\nroles = [\"admin\"]\n\n\
         [[tokens]]\ntoken = \"member-secret\"\nproject_id = \"p1\"\nuser_id = \"alice\"\nroles = [\"member\"]\n",
    )
    .expect("write tokens");
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Token),
        tokens: Some(tokens),
        ..Options::default()
    })
    .await;
    // The page holds no data: anyone may load it, and it asks for a token.
    let page = app
        .client
        .get(format!("{}/ui", app.base))
        .send()
        .await
        .expect("send");
    assert_eq!(page.status(), StatusCode::OK);
    let call = |path: &str, token: Option<&str>| {
        let mut builder = app.client.get(format!("{}{path}", app.base));
        if let Some(token) = token {
            builder = builder.header("x-auth-token", token);
        }
        builder.send()
    };
    let status = |r: reqwest::Response| r.status();
    assert_eq!(
        status(call("/ui/api/zones", None).await.expect("send")),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(
            call("/ui/api/zones", Some("member-secret"))
                .await
                .expect("send")
        ),
        StatusCode::OK
    );
    assert_eq!(
        status(
            call("/ui/api/failures", Some("member-secret"))
                .await
                .expect("send")
        ),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(
            call("/ui/api/failures", Some("admin-secret"))
                .await
                .expect("send")
        ),
        StatusCode::OK
    );
}

// ---------------------------------------------------------------------------------------------
// Tests in the browser
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_draws_every_hold_of_the_window() {
    let Some(browser) = Browser::find("the_timeline_draws_every_hold_of_the_window") else {
        return;
    };
    let app = demo().await;
    let all = started(&app).await;
    let (from, to) = window(&all);
    let url = format!("{}/ui/#/timeline?from={from}&to={to}", app.base);
    let html = browser.dump_dom(&url).await;
    assert_ready(&html, "timeline");
    let timeline = elements(&html, "timeline");
    assert_eq!(timeline.len(), 1, "one timeline");
    assert_eq!(
        (
            timeline[0]["data-from"].as_str(),
            timeline[0]["data-to"].as_str()
        ),
        (from.as_str(), to.as_str())
    );

    let expected = expected_holds(&all, micros(&from), micros(&to));
    let bars = elements(&html, "bar");
    let drawn: BTreeMap<(String, String), &BTreeMap<String, String>> = bars
        .iter()
        .map(|bar| {
            (
                (bar["data-lease-id"].clone(), bar["data-host"].clone()),
                bar,
            )
        })
        .collect();
    assert_eq!(drawn.len(), bars.len(), "one bar per (lease, host)");
    assert_eq!(
        drawn.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "one bar per hold the leases API reports in the window"
    );
    for (key, hold) in &expected {
        let bar = drawn[key];
        assert_eq!(
            bar["data-status"],
            hold["status"].as_str().expect("status"),
            "{key:?}"
        );
        assert_eq!(
            bar["data-degraded"],
            hold["degraded"].to_string(),
            "{key:?}"
        );
        assert_eq!(bar["data-missing"], hold["missing"].to_string(), "{key:?}");
    }
    // The degraded demo lease is marked, and its hold on the host that is down is missing.
    let marked: Vec<&BTreeMap<String, String>> = bars
        .iter()
        .filter(|b| b["data-degraded"] == "true")
        .collect();
    assert_eq!(marked.len(), 3, "the three GPU hosts of the degraded lease");
    let missing: Vec<&str> = bars
        .iter()
        .filter(|b| b["data-missing"] != "0")
        .map(|b| b["data-host-name"].as_str())
        .collect();
    assert_eq!(missing, ["compute-az3-12"]);
    let statuses: BTreeSet<&str> = bars.iter().map(|b| b["data-status"].as_str()).collect();
    assert_eq!(statuses, BTreeSet::from(["ACTIVE", "PENDING"]));
    // Hosts out of service have their rows, marked.
    let rows = elements(&html, "host-row");
    let out: BTreeMap<&str, &str> = rows
        .iter()
        .filter(|r| r["data-host-status"] != "up")
        .map(|r| (r["data-host-name"].as_str(), r["data-host-status"].as_str()))
        .collect();
    assert_eq!(
        out,
        BTreeMap::from([
            ("compute-az1-03", "maintenance"),
            ("compute-az3-12", "down")
        ])
    );
    assert_eq!(elements(&html, "now").len(), 1, "now is marked");

    browser
        .screenshot(&url, &screenshot_dir().join("timeline.png"), 1_300)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_chart_shows_the_capacity_api_figures() {
    let Some(browser) = Browser::find("the_capacity_chart_shows_the_capacity_api_figures") else {
        return;
    };
    let app = demo().await;
    let all = started(&app).await;
    let (from, to) = window(&all);
    let url = format!(
        "{}/ui/#/capacity?zone=az1&class=VCPU&from={from}&to={to}",
        app.base
    );
    let html = browser.dump_dom(&url).await;
    let query = format!(
        "/promise/capacity/compute/query?zoneId=az1&computeResourceTypeId=VCPU&showUtilization=true\
         &timePeriod.startTime={from}&timePeriod.stopTime={to}"
    );
    let (status, answer) = app.get(&query, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_ready(&html, "capacity");
    let chart = elements(&html, "capacity-chart");
    assert_eq!(chart.len(), 1, "one chart");
    assert_eq!(
        (
            chart[0]["data-zone"].as_str(),
            chart[0]["data-class"].as_str()
        ),
        ("az1", "VCPU")
    );

    let series = ["allocated", "reserved", "available", "total"];
    let steps = answer["utilization"].as_array().expect("utilization");
    assert!(steps.len() > 2, "the demo leases make steps: {answer}");
    let expected: Vec<(String, String, String)> = steps
        .iter()
        .flat_map(|step| {
            series.iter().map(move |name| {
                (
                    step["timestamp"].as_str().expect("timestamp").to_owned(),
                    (*name).to_owned(),
                    step[*name].to_string(),
                )
            })
        })
        .collect();
    let drawn: Vec<(String, String, String)> = elements(&html, "point")
        .into_iter()
        .map(|p| {
            (
                p["data-at"].clone(),
                p["data-series"].clone(),
                p["data-value"].clone(),
            )
        })
        .collect();
    assert_eq!(
        drawn, expected,
        "every step of every series, as the API answers"
    );
    for card in elements(&html, "summary-value") {
        let name = card["data-series"].as_str();
        assert_eq!(
            card["data-value"],
            answer["capacityInformation"][name].to_string(),
            "{name} over the window"
        );
    }
    assert_eq!(elements(&html, "summary-value").len(), 4);
    assert_eq!(elements(&html, "step").len(), steps.len(), "the step table");
    assert!(
        elements(&html, "provider-capacity").is_empty()
            && elements(&html, "provider-clouds").is_empty(),
        "berth's own hosts only: no breakdown by provider"
    );
    let reserved = steps.iter().filter_map(|s| s["reserved"].as_i64()).max();
    let allocated = steps.iter().filter_map(|s| s["allocated"].as_i64()).max();
    assert!(
        reserved > Some(0) && allocated > Some(0),
        "the demo reserves and runs work: {answer}"
    );

    browser
        .screenshot(&url, &screenshot_dir().join("capacity.png"), 1_000)
        .await;
}

/// The usage view draws one bar per project of the chosen class and lists the usage report's
/// figures to 2 decimals; a period the report refuses is said, with its 400, under the form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_view_shows_the_usage_api_figures() {
    let Some(browser) = Browser::find("the_usage_view_shows_the_usage_api_figures") else {
        return;
    };
    let app = demo().await;
    let all = started(&app).await;
    // From an hour before the demo leases start until a few seconds after: a period that has
    // ended by the time it is read, so its figures no longer change.
    let first = all
        .iter()
        .map(|l| parse_lease_date(l["start_date"].as_str().expect("start")))
        .min()
        .expect("demo leases");
    let from = rfc3339(first - HOUR);
    let to = rfc3339(first - first.rem_euclid(SECOND) + 5 * SECOND);
    while now_micros() <= micros(&to) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, answer) = app
        .get(
            &format!("/reservation/v1/usage?start={from}&end={to}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let report = &answer["usage"];
    assert_eq!(
        report["counted_until"], report["end"],
        "the period has ended"
    );
    let expected: BTreeMap<String, Vec<f64>> = report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|row| row["resource_class"] == "VCPU")
        .map(|row| {
            (
                row["project_id"].as_str().expect("project").to_owned(),
                USAGE_FIELDS
                    .iter()
                    .map(|field| row[*field].as_f64().expect("hours"))
                    .collect(),
            )
        })
        .collect();
    assert!(
        expected.values().any(|figures| figures[0] > 0.0)
            && expected.values().any(|figures| figures[4] > 0.0),
        "the demo reserves and runs work on demand: {answer}"
    );

    let url = format!("{}/ui/#/usage?from={from}&to={to}&class=VCPU", app.base);
    let html = browser.dump_dom(&url).await;
    assert_ready(&html, "usage");
    let chart = elements(&html, "usage-chart");
    assert_eq!(chart.len(), 1, "one chart");
    assert_eq!(
        (
            chart[0]["data-class"].as_str(),
            chart[0]["data-from"].as_str(),
            chart[0]["data-to"].as_str()
        ),
        (
            "VCPU",
            report["start"].as_str().expect("start"),
            report["end"].as_str().expect("end")
        )
    );
    let counted = elements(&html, "counted-until");
    assert_eq!(counted.len(), 1, "how far it is counted is said");
    assert_eq!(
        counted[0]["data-at"],
        report["counted_until"].as_str().expect("counted")
    );

    // The table: a row per project, each figure as the API answers it, shown to 2 decimals.
    let rows = elements(&html, "usage-row");
    let shown: BTreeMap<String, Vec<(String, f64, String)>> = html
        .split("data-role=\"usage-row\"")
        .skip(1)
        .zip(&rows)
        .map(|(row, attrs)| {
            let row = row.split("</tr>").next().unwrap_or_default();
            (attrs["data-project"].clone(), figure_cells(row))
        })
        .collect();
    assert_eq!(shown.len(), rows.len(), "one row per project");
    assert_eq!(
        shown.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "a row per project with VCPU usage"
    );
    for (project, figures) in &expected {
        let cells = &shown[project];
        let fields: Vec<&str> = cells.iter().map(|(field, _, _)| field.as_str()).collect();
        assert_eq!(fields, USAGE_FIELDS, "{project}");
        for ((field, value, text), wanted) in cells.iter().zip(figures) {
            assert_eq!(value, wanted, "{project} {field}");
            let decimals = text.rsplit_once('.').map_or(0, |(_, d)| d.len());
            let number: f64 = text.replace(',', "").parse().expect("a number");
            assert!(
                decimals == 2 && (number - wanted).abs() <= 0.005 + 1e-9,
                "{project} {field}: {text} shows {wanted} to 2 decimals"
            );
        }
    }

    // The chart: one bar per project, as long as what it reserved.
    let bars = elements(&html, "usage-bar");
    let drawn: BTreeMap<String, f64> = bars
        .iter()
        .map(|bar| {
            (
                bar["data-project"].clone(),
                bar["data-reserved"].parse().expect("reserved hours"),
            )
        })
        .collect();
    assert_eq!(drawn.len(), bars.len(), "one bar per project");
    let reserved: BTreeMap<String, f64> = expected
        .iter()
        .map(|(project, figures)| (project.clone(), figures[0]))
        .collect();
    assert_eq!(drawn, reserved, "a bar per project, of its reserved hours");
    assert!(bars.iter().all(|bar| bar["data-class"] == "VCPU"));

    browser
        .screenshot(&url, &screenshot_dir().join("usage.png"), 900)
        .await;

    // A period the report refuses: its 400 under the form, which stays to correct it.
    let (status, refused) = app
        .get(
            &format!("/reservation/v1/usage?start={to}&end={from}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["error_message"].as_str().expect("error_message");
    let html = browser
        .dump_dom(&format!("{}/ui/#/usage?from={to}&to={from}", app.base))
        .await;
    assert_eq!(main_state(&html), ("usage".to_owned(), "error".to_owned()));
    let errors = elements(&html, "error");
    assert_eq!(errors.len(), 1, "one readable error");
    assert_eq!(errors[0]["data-status"], "400");
    assert!(html.contains(message), "the report's own words: {message}");
    assert_eq!(elements(&html, "usage-form").len(), 1, "the form stays");
}

/// With a provider cloud's capacity in the zone, the capacity view shows each provider's
/// figures, as the capacity query's `providers` gives them, and the cloud's synchronisation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_view_shows_each_providers_figures_and_the_clouds_state() {
    use crate::provider_sync::{
        FakeKeystone, local_berth, register_cloud, remote_berth, start_keystone,
    };
    let Some(browser) =
        Browser::find("the_capacity_view_shows_each_providers_figures_and_the_clouds_state")
    else {
        return;
    };
    let remote = remote_berth(&format!("127.0.0.1:{}", crate::support::free_port()), None).await;
    let node = remote.create_provider("cn-remote", None).await;
    remote.set_inventory(&node, 8, 16384).await;
    let keystone = start_keystone(FakeKeystone {
        placement: format!("{}/placement", remote.base),
        issued: std::sync::Arc::default(),
    })
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let app = local_berth(dir.path()).await;
    crate::blazar_leases::enroll(&app, "local-1", "RegionOne", 4).await;
    let id = register_cloud(&app, &keystone).await;
    crate::provider_clouds::until(&app, &id, "imported", |p| p["sync"]["providers"] == 1).await;
    let from = rfc3339(now_micros() + HOUR);
    let to = rfc3339(now_micros() + 2 * HOUR);
    let url = format!(
        "{}/ui/#/capacity?zone=RegionOne&class=VCPU&from={from}&to={to}",
        app.base
    );
    let html = browser.dump_dom(&url).await;
    assert_ready(&html, "capacity");
    let query = format!(
        "/promise/capacity/compute/query?zoneId=RegionOne&computeResourceTypeId=VCPU\
         &timePeriod.startTime={from}&timePeriod.stopTime={to}"
    );
    let (status, answer) = app.get(&query, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let parts = answer["providers"].as_array().expect("providers");
    assert_eq!(parts.len(), 2, "berth's own and the cloud's: {answer}");
    let expected: Vec<(String, String, String)> = parts
        .iter()
        .flat_map(|part| {
            ["allocated", "reserved", "available", "total"].map(|name| {
                (
                    part["providerId"].as_str().expect("id").to_owned(),
                    name.to_owned(),
                    part["capacityInformation"][name].to_string(),
                )
            })
        })
        .collect();
    let rows = elements(&html, "provider-figures");
    assert_eq!(rows.len(), 2, "a row per provider");
    assert_eq!(rows[0]["data-provider"], "local");
    assert_eq!(rows[1]["data-provider"], id);
    let shown: Vec<(String, String, String)> = html
        .split("data-role=\"provider-figures\"")
        .skip(1)
        .zip(&rows)
        .flat_map(|(row, attrs)| {
            let row = row.split("</tr>").next().unwrap_or_default();
            elements_with(row, "data-series")
                .into_iter()
                .map(|cell| {
                    (
                        attrs["data-provider"].clone(),
                        cell["data-series"].clone(),
                        cell["data-value"].clone(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        shown, expected,
        "each provider's figures, as the API answers"
    );
    let clouds = elements(&html, "provider-cloud");
    assert_eq!(clouds.len(), 1, "the registered cloud");
    assert_eq!(clouds[0]["data-provider"], id);
    assert_eq!(clouds[0]["data-state"], "ok");
    drop(remote);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_page_and_the_failures_view_show_what_happened() {
    let Some(browser) = Browser::find("the_lease_page_and_the_failures_view_show_what_happened")
    else {
        return;
    };
    let app = demo().await;
    let all = started(&app).await;
    let lease = all
        .iter()
        .find(|l| l["degraded"] == true)
        .expect("the degraded demo lease");
    let id = lease["id"].as_str().expect("id");
    let (status, shared) = app
        .call(
            Method::PUT,
            &format!("/reservation/v1/leases/{id}/shares/course-101"),
            None,
            Some(json!({"cap": {"VCPU": 4}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");

    let html = browser
        .dump_dom(&format!("{}/ui/#/lease/{id}", app.base))
        .await;
    assert_ready(&html, "lease");
    let head = elements(&html, "lease");
    assert_eq!(
        (
            head[0]["data-lease-id"].as_str(),
            head[0]["data-degraded"].as_str()
        ),
        (id, "true")
    );
    let reservations: Vec<String> = elements(&html, "reservation")
        .into_iter()
        .map(|r| r["data-reservation-id"].clone())
        .collect();
    let wanted: Vec<String> = lease["reservations"]
        .as_array()
        .expect("reservations")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(reservations, wanted);
    let (_, record) = app
        .get(&format!("/reservation/v1/leases/{id}/events"), None)
        .await;
    let kinds: Vec<String> = elements(&html, "record-entry")
        .into_iter()
        .map(|r| r["data-type"].clone())
        .collect();
    let recorded: Vec<String> = record["events"]
        .as_array()
        .expect("record")
        .iter()
        .map(|r| r["type"].as_str().expect("type").to_owned())
        .collect();
    assert_eq!(kinds, recorded, "the lifecycle record");
    assert!(kinds.iter().any(|k| k == "lease.degraded"), "{kinds:?}");
    let events: Vec<String> = elements(&html, "event")
        .into_iter()
        .map(|e| e["data-event-type"].clone())
        .collect();
    assert_eq!(events, ["start_lease", "before_end_lease", "end_lease"]);
    let shares: Vec<String> = elements(&html, "share")
        .into_iter()
        .map(|s| s["data-project"].clone())
        .collect();
    assert_eq!(shares, ["course-101"], "the projects it is shared with");
    let notes: Vec<String> = elements(&html, "notification")
        .into_iter()
        .map(|n| n["data-type"].clone())
        .collect();
    assert!(
        notes.iter().any(|n| n == "Failure"),
        "the degraded notification: {notes:?}"
    );
    assert_eq!(
        elements(&html, "missing").len(),
        1,
        "what is missing is said"
    );
    assert_eq!(
        elements(&html, "bar").len(),
        3,
        "the lease's hosts on its timeline"
    );

    let html = browser
        .dump_dom(&format!("{}/ui/#/failures", app.base))
        .await;
    assert_ready(&html, "failures");
    let failures: BTreeMap<String, String> = elements(&html, "failure")
        .into_iter()
        .map(|f| (f["data-host-name"].clone(), f["data-status"].clone()))
        .collect();
    assert_eq!(
        failures,
        BTreeMap::from([
            ("compute-az1-03".to_owned(), "maintenance".to_owned()),
            ("compute-az3-12".to_owned(), "down".to_owned()),
        ])
    );
    let affected: Vec<String> = elements(&html, "affected-lease")
        .into_iter()
        .map(|l| l["data-lease-id"].clone())
        .collect();
    assert_eq!(affected, [id]);
    let degraded: Vec<String> = elements(&html, "degraded-lease")
        .into_iter()
        .map(|l| l["data-lease-id"].clone())
        .collect();
    assert_eq!(degraded, [id]);

    let html = browser.dump_dom(&format!("{}/ui/#/leases", app.base)).await;
    assert_ready(&html, "leases");
    assert_eq!(
        elements(&html, "lease-row").len(),
        all.len(),
        "every lease is listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_page_says_how_to_authenticate() {
    let Some(browser) = Browser::find("without_a_token_the_page_says_how_to_authenticate") else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[tokens]]\ntoken = \"admin-secret\"\nproject_id = \"ops\"\nuser_id = \"root\"\nroles = [\"admin\"]\n",
    )
    .expect("write tokens");
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Token),
        tokens: Some(tokens),
        ..Options::default()
    })
    .await;
    let html = browser
        .dump_dom(&format!("{}/ui/#/timeline", app.base))
        .await;
    assert_eq!(
        main_state(&html),
        ("timeline".to_owned(), "error".to_owned())
    );
    let errors = elements(&html, "error");
    assert_eq!(errors.len(), 1, "one readable error");
    assert_eq!(errors[0]["data-status"], "401");
    assert!(
        html.contains("Authentication required") && html.contains("Token field"),
        "the error says what to do"
    );
}
