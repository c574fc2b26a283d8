//! The authorization matrix: every route of the route table (read from `/openapi.json`, with the
//! rule in force for each), tried as an admin, a service, a member of the owning project, a
//! member of another project, a reader, callers whose roles berth does not know or who have
//! none, and no one; each answer is checked against the declared rule. Project-scoped routes
//! that name one of project p1's objects must not exist for project p2 (404), and no answer to
//! p2 may carry the id of one of p1's objects. Then the attacks of a member who names its own
//! priority, and of a web page against a berth without authentication.

use crate::blazar_leases::{rfc3339, tomorrow};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const fn who(project: &'static str, user: &'static str, roles: &'static str) -> Who<'static> {
    Who {
        project,
        user,
        roles,
    }
}

const ADMIN: Who<'static> = who("admin", "root", "admin");
const SERVICE: Who<'static> = who("service", "nova", "service");
const P1: Who<'static> = who("p1", "alice", "member");
const P2: Who<'static> = who("p2", "mallory", "member");
const READER: Who<'static> = who("p1", "rita", "reader");
const OBSERVER: Who<'static> = who("p1", "oscar", "observer");
const NO_ROLE: Who<'static> = who("p1", "nemo", "");

/// The callers, in the order each route is tried (those that may change p1's objects last).
const CALLERS: [(&str, Option<Who<'static>>); 8] = [
    ("anonymous", None),
    ("observer", Some(OBSERVER)),
    ("no role", Some(NO_ROLE)),
    ("reader", Some(READER)),
    ("other project", Some(P2)),
    ("service", Some(SERVICE)),
    ("owner", Some(P1)),
    ("admin", Some(ADMIN)),
];

fn roles_of(who: Option<Who<'_>>) -> Vec<&str> {
    who.map(|w| w.roles.split(',').filter(|r| !r.is_empty()).collect())
        .unwrap_or_default()
}

/// The project the matrix names where a route reads one from the query (`project-reader`).
const NAMED_PROJECT: &str = "p1";

/// Whether `who` meets `need`, as the README documents the roles (every caller here acts in a
/// project, so every scope admits them).
fn meets(need: &str, who: Option<Who<'_>>) -> bool {
    let roles = roles_of(who);
    let has = |role: &str| roles.contains(&role);
    match need {
        "public" => true,
        "authenticated" => who.is_some(),
        "reader" => has("reader") || has("member") || has("admin"),
        "member" => has("member") || has("admin"),
        "admin" => has("admin"),
        "service" => has("admin") || has("service"),
        "service-only" => has("service"),
        "project-reader" => {
            meets("service", who)
                || (meets("reader", who) && who.is_some_and(|w| w.project == NAMED_PROJECT))
        }
        other => panic!("unknown need {other}"),
    }
}

async fn send(
    app: &TestApp,
    who: Option<Who<'_>>,
    method: Method,
    path: &str,
) -> (StatusCode, String) {
    let mut builder = app
        .request(method.clone(), path, None)
        .header("OpenStack-API-Version", "placement latest")
        .header("X-OpenStack-Ironic-API-Version", "latest");
    if let Some(who) = who {
        builder = builder
            .header("x-project-id", who.project)
            .header("x-user-id", who.user)
            .header("x-roles", who.roles);
    }
    if [Method::POST, Method::PUT, Method::PATCH].contains(&method) {
        builder = builder.json(&json!({}));
    }
    let response = builder.send().await.expect("send");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

async fn ok_as(app: &TestApp, who: Who<'_>, method: Method, path: &str, body: Value) -> Value {
    let (status, answer) = app.call_as(who, method, path, Some(body)).await;
    assert!(status.is_success(), "{path}: {status} {answer}");
    answer
}

/// p1's objects (and the inventory they live on); returns the ids by path parameter.
async fn fixtures(app: &TestApp) -> Vec<(&'static str, String)> {
    let host = ok_as(
        app,
        ADMIN,
        Method::POST,
        "/reservation/v1/os-hosts",
        json!({"name": "h1", "vcpus": 64, "memory_mb": 262_144, "local_gb": 1000,
               "availability_zone": "az1"}),
    )
    .await;
    let host_id = host["host"]["id"].as_str().expect("host id").to_owned();
    let providers = app
        .call_as(ADMIN, Method::GET, "/placement/resource_providers", None)
        .await
        .1;
    let provider = providers["resource_providers"][0]["uuid"]
        .as_str()
        .expect("provider")
        .to_owned();
    ok_as(
        app,
        ADMIN,
        Method::POST,
        "/promise/flavors",
        json!({"id": "m1.small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 20}),
    )
    .await;
    let node = ok_as(
        app,
        ADMIN,
        Method::POST,
        "/baremetal/v1/nodes",
        json!({"name": "n1", "resource_class": "baremetal-gold",
               "provision_state": "available", "properties": {"cpus": 8}}),
    )
    .await;
    let node_uuid = node["uuid"].as_str().expect("node uuid").to_owned();
    let lease = ok_as(
        app,
        P1,
        Method::POST,
        "/reservation/v1/leases",
        json!({"name": "p1-lease", "start_date": "2040-01-01 10:00", "end_date": "2040-01-01 12:00",
               "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                                 "hypervisor_properties": "", "resource_properties": ""}],
               "events": []}),
    )
    .await;
    let lease_id = lease["lease"]["id"].as_str().expect("lease id").to_owned();
    let series = ok_as(
        app,
        P1,
        Method::POST,
        "/reservation/v1/leases",
        json!({"name": "p1-series", "start_date": "2042-01-06 10:00", "end_date": "2042-01-06 12:00",
               "recurrence": "FREQ=WEEKLY;COUNT=2",
               "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}),
    )
    .await;
    let series_id = series["series"]["id"]
        .as_str()
        .expect("series id")
        .to_owned();
    let promise = ok_as(
        app,
        P1,
        Method::POST,
        "/promise/reservation/compute/create",
        json!({"startTime": "2041-01-01T10:00:00Z", "endTime": "2041-01-02T10:00:00Z",
               "computePoolReservation": {"numCpuCores": 4, "numVcInstances": 2,
                                          "virtualMemSize": 4096}}),
    )
    .await;
    let promise_id = promise["reservationData"]["reservationId"]
        .as_str()
        .expect("reservation id")
        .to_owned();
    let subscription = ok_as(
        app,
        P1,
        Method::POST,
        "/promise/reservation/subscribe",
        json!({"inputFilter": "all", "callbackUri": "https://receiver.example/hook"}),
    )
    .await;
    let subscription_id = subscription["reservationChangeSubscriptionId"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    let claim = ok_as(
        app,
        P1,
        Method::POST,
        "/baremetal/v1/reservations",
        json!({"instance_uuid": "6f1c2b3a-58a4-4a6e-9c59-0b6f3c1d2e4f",
               "node_uuid": [node_uuid]}),
    )
    .await;
    let claim_id = claim["reservation"]["uuid"]
        .as_str()
        .expect("claim uuid")
        .to_owned();
    ok_as(
        app,
        ADMIN,
        Method::POST,
        "/baremetal/v1/nodes",
        json!({"name": "n2", "resource_class": "baremetal-gold", "provision_state": "available"}),
    )
    .await;
    let allocation = app
        .request(Method::POST, "/baremetal/v1/allocations", None)
        .header("X-OpenStack-Ironic-API-Version", "1.60")
        .header("x-project-id", P1.project)
        .header("x-user-id", P1.user)
        .header("x-roles", P1.roles)
        .json(&json!({"resource_class": "baremetal-gold", "name": "p1-allocation"}))
        .send()
        .await
        .expect("allocate");
    assert_eq!(allocation.status(), StatusCode::CREATED);
    let allocation: Value = allocation.json().await.expect("allocation");
    assert_eq!(allocation["state"], "active", "{allocation}");
    let allocation_id = allocation["uuid"]
        .as_str()
        .expect("allocation uuid")
        .to_owned();
    vec![
        ("host_id", host_id),
        ("uuid", provider),
        ("node_ident", node_uuid),
        ("flavor_id", "m1.small".to_owned()),
        ("lease_id", lease_id),
        ("series_id", series_id),
        ("reservation_id", promise_id),
        ("subscription_id", subscription_id),
        ("reservation_uuid", claim_id),
        ("allocation_ident", allocation_id),
    ]
}

/// The ids of p1's own objects among the fixtures (what p2 must never see).
const P1_OBJECTS: [&str; 6] = [
    "lease_id",
    "series_id",
    "reservation_id",
    "subscription_id",
    "reservation_uuid",
    "allocation_ident",
];

fn fill(path: &str, ids: &[(&'static str, String)]) -> (String, bool) {
    let mut out = String::new();
    let mut names_p1_object = false;
    for segment in path.split('/').skip(1) {
        out.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            None => out.push_str(segment),
            Some(name) => {
                let value = match ids.iter().find(|(n, _)| *n == name) {
                    Some((n, id)) => {
                        names_p1_object |= P1_OBJECTS.contains(n);
                        id.clone()
                    }
                    None => match name {
                        "kind" => "compute".to_owned(),
                        "name" if path.contains("traits") => "CUSTOM_MATRIX".to_owned(),
                        "name" => "CUSTOM_MATRIX".to_owned(),
                        "property_name" => "gpu".to_owned(),
                        "file" => "app.js".to_owned(),
                        _ => "9b2e5f1c-0000-4000-8000-000000000001".to_owned(),
                    },
                };
                out.push_str(&value);
            }
        }
    }
    (out, names_p1_object)
}

#[tokio::test]
async fn every_route_answers_each_role_as_its_rule_declares() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let ids = fixtures(&app).await;
    let secrets: Vec<String> = ids
        .iter()
        .filter(|(n, _)| P1_OBJECTS.contains(n))
        .map(|(_, id)| id.clone())
        .collect();
    let (_, openapi) = app.get("/openapi.json", None).await;
    let mut operations = Vec::new();
    for (path, item) in openapi["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("operations") {
            let policy = &op["x-berth-policy"];
            let need = policy["role"].as_str().unwrap_or_else(|| {
                panic!("{method} {path} declares no role: {op}");
            });
            let scope = policy["scope"].as_str().expect("scope").to_owned();
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            operations.push((method, path.clone(), need.to_owned(), scope));
        }
    }
    assert!(operations.len() > 90, "{} routes", operations.len());
    // Deletions last, so that every other route still finds p1's objects.
    operations.sort_by_key(|(method, path, _, _)| (*method == Method::DELETE, path.clone()));
    let mut failures = Vec::new();
    for (method, template, need, scope) in &operations {
        let (mut path, names_p1_object) = fill(template, &ids);
        if need == "project-reader" {
            path = format!("{path}?project_id={NAMED_PROJECT}");
        }
        for (name, who) in CALLERS {
            let (status, body) = send(&app, who, method.clone(), &path).await;
            let allowed = meets(need, who);
            let expected_ok = match (need.as_str(), who) {
                ("public", _) => {
                    !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                }
                (_, None) => status == StatusCode::UNAUTHORIZED,
                _ if !allowed => status == StatusCode::FORBIDDEN,
                _ => !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN),
            };
            if !expected_ok {
                failures.push(format!(
                    "{method} {template} as {name} (needs {need}): {status}"
                ));
                continue;
            }
            if name == "other project" && allowed {
                if scope == "project" && names_p1_object && status != StatusCode::NOT_FOUND {
                    failures.push(format!(
                        "{method} {template} as another project: {status}, not 404"
                    ));
                }
                // An id the caller named itself may be echoed ("... could not be found").
                let leaked = secrets
                    .iter()
                    .find(|id| !path.contains(id.as_str()) && body.contains(id.as_str()));
                if let Some(id) = leaked {
                    failures.push(format!(
                        "{method} {template} as another project shows p1's {id}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A member cannot take another project's capacity by naming a priority: the priority is
/// lowered to the project's ceiling, said so, and another project's reservation is untouched.
/// An admin-granted priority (policy file) still displaces it.
#[tokio::test]
async fn a_named_priority_cannot_preempt_another_projects_lease() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[priority.projects]\nops = 90\n").expect("policy");
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        policy: Some(policy),
        ..Options::default()
    })
    .await;
    ok_as(
        &app,
        ADMIN,
        Method::POST,
        "/reservation/v1/os-hosts",
        json!({"name": "h1", "vcpus": 8, "memory_mb": 16_384, "local_gb": 100,
               "availability_zone": "az1"}),
    )
    .await;
    let pool = |priority: u32| {
        json!({"startTime": "2041-01-01T10:00:00Z", "endTime": "2041-01-02T10:00:00Z",
               "priority": priority,
               "computePoolReservation": {"numCpuCores": 8, "numVcInstances": 4,
                                          "virtualMemSize": 8192}})
    };
    let low = ok_as(
        &app,
        P1,
        Method::POST,
        "/promise/reservation/compute/create",
        pool(10),
    )
    .await;
    let victim = low["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();

    let (status, refused) = app
        .call_as(
            P2,
            Method::POST,
            "/promise/reservation/compute/create",
            Some(pool(100)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (_, lease) = app
        .call_as(
            P1,
            Method::GET,
            &format!("/reservation/v1/leases/{victim}"),
            None,
        )
        .await;
    assert_eq!(lease["lease"]["status"], "PENDING", "{lease}");

    // A reader may not reserve at all, whatever priority it names.
    let (status, _) = app
        .call_as(
            READER,
            Method::POST,
            "/promise/reservation/compute/create",
            Some(pool(100)),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The project an admin granted 90 displaces it; its 100 is lowered to 90 and it is said so.
    let ops = who("ops", "olga", "member");
    let made = ok_as(
        &app,
        ops,
        Method::POST,
        "/promise/reservation/compute/create",
        pool(100),
    )
    .await;
    assert_eq!(made["reservationData"]["priority"], 90, "{made}");
    assert_eq!(
        made["reservationData"]["priorityLowered"]["requested"], 100,
        "{made}"
    );
    assert_eq!(
        made["reservationData"]["priorityLowered"]["granted"], 90,
        "{made}"
    );
    let (_, lease) = app
        .call_as(
            ADMIN,
            Method::GET,
            &format!("/reservation/v1/leases/{victim}"),
            None,
        )
        .await;
    assert_ne!(lease["lease"]["status"], "PENDING", "{lease}");
}

/// Without authentication, berth answers only its own loopback origin, and a POST must be JSON:
/// a web page cannot write to it through the operator's browser, nor rebind a name to it.
#[tokio::test]
async fn noauth_refuses_what_a_web_page_could_send() {
    let app = TestApp::spawn().await;
    let url = format!(
        "{}/promise/decrease-capacity?source=Zone:az1&capacity.cores=1000",
        app.base
    );
    let form = app
        .client
        .post(&url)
        .header("content-type", "text/plain")
        .body("")
        .send()
        .await
        .expect("send");
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let cross = app
        .client
        .post(format!("{}/promise/flavors", app.base))
        .header("origin", "http://evil.example")
        .json(&json!({"id": "x", "name": "x", "vcpus": 1, "ram": 1, "disk": 1}))
        .send()
        .await
        .expect("send");
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);
    let rebound = app
        .client
        .get(format!("{}/reservation/v1/leases", app.base))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .expect("send");
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
    let (status, flavors) = app.get("/promise/flavors", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        flavors["flavors"].as_array().map(Vec::len),
        Some(0),
        "{flavors}"
    );
    // The same requests from berth's own origin work.
    let same = app
        .client
        .post(format!("{}/promise/flavors", app.base))
        .header("origin", app.base.clone())
        .json(&json!({"id": "x", "name": "x", "vcpus": 1, "ram": 1024, "disk": 1}))
        .send()
        .await
        .expect("send");
    assert!(same.status().is_success(), "{}", same.status());
}

/// Answers to one project never carry another project's reservation ids, not even inside the
/// resource class a running instance reservation raises (`CUSTOM_RESERVATION_<ID>`).
#[tokio::test]
async fn availability_does_not_name_other_projects_reservations() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    ok_as(
        &app,
        ADMIN,
        Method::POST,
        "/reservation/v1/os-hosts",
        json!({"name": "h1", "vcpus": 8, "memory_mb": 16_384, "local_gb": 100}),
    )
    .await;
    let instance = json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 1,
                          "memory_mb": 512, "disk_gb": 1, "affinity": false});
    let lease = ok_as(
        &app,
        P1,
        Method::POST,
        "/reservation/v1/leases",
        json!({"name": "running", "start_date": "now", "end_date": rfc3339(tomorrow()),
               "reservations": [instance.clone()], "events": []}),
    )
    .await;
    let lease_id = lease["lease"]["id"].as_str().expect("lease id").to_owned();
    let reservation = lease["lease"]["reservations"][0]["id"]
        .as_str()
        .expect("reservation id")
        .to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, shown) = app
            .call_as(
                P1,
                Method::GET,
                &format!("/reservation/v1/leases/{lease_id}"),
                None,
            )
            .await;
        if shown["lease"]["status"] == "ACTIVE" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (status, answer) = app
        .call_as(
            P2,
            Method::POST,
            "/reservation/v1/availability",
            Some(json!({"start_date": "now", "end_date": rfc3339(tomorrow()),
                        "reservations": [instance]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let text = answer.to_string();
    let as_class = reservation.to_uppercase().replace('-', "_");
    assert!(
        !text.contains(&reservation) && !text.contains(&as_class),
        "{text}"
    );
    assert!(text.contains("VCPU"), "{text}");
}

/// `headers` mode believes identity headers only from its trusted proxies (loopback unless
/// configured): anyone else could send them too.
#[tokio::test]
async fn identity_headers_count_only_from_a_trusted_proxy() {
    let elsewhere = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        trusted_proxies: vec!["10.0.0.0/8".to_owned()],
        ..Options::default()
    })
    .await;
    let (status, body) = elsewhere
        .call_as(ADMIN, Method::GET, "/reservation/v1/leases", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.to_string().contains("trusted proxy"), "{body}");
    let (status, _) = elsewhere.get("/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "public routes need no identity");

    let loopback = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let (status, body) = loopback
        .call_as(ADMIN, Method::GET, "/reservation/v1/leases", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Placement's routes follow Placement's policies: by default its new defaults (the reshaper is
/// a service's alone, a project's usages are its readers' and admins' and services'), only for
/// tokens scoped to a project, even an admin's; the policy file restores the deprecated
/// defaults (`enforce_new_defaults = false`) or opens a route to any caller (`authenticated`).
#[tokio::test]
async fn placement_routes_follow_placement_policy_defaults_and_the_policy_file() {
    let status_of = |app: &TestApp, who: Who<'static>, system: bool, method: Method, path| {
        let mut builder = app
            .request(method.clone(), path, Some("latest"))
            .header("x-user-id", who.user)
            .header("x-roles", who.roles);
        builder = match system {
            true => builder.header("x-system-scope", "all"),
            false => builder.header("x-project-id", who.project),
        };
        if method == Method::POST {
            builder = builder.json(&json!({}));
        }
        async move { builder.send().await.expect("send").status() }
    };
    let spawn = |policy: Option<&str>| {
        let dir = tempfile::tempdir().expect("dir");
        let file = policy.map(|text| {
            let file = dir.path().join("policy.toml");
            std::fs::write(&file, text).expect("policy");
            file
        });
        async move {
            let app = TestApp::spawn_with(Options {
                auth: Some(AuthMode::Headers),
                policy: file,
                ..Options::default()
            })
            .await;
            (app, dir)
        }
    };
    let (app, _dir) = spawn(None).await;
    let providers = "/placement/resource_providers";
    for (who, system, path, want) in [
        (ADMIN, false, providers, StatusCode::OK),
        (ADMIN, true, providers, StatusCode::FORBIDDEN),
        // berth's own cloud-wide routes take a system-scoped admin.
        (ADMIN, true, "/promise/flavors", StatusCode::OK),
    ] {
        let status = status_of(&app, who, system, Method::GET, path).await;
        assert_eq!(status, want, "{} (system: {system}) {path}", who.user);
    }
    let reshape = |app, who| status_of(app, who, false, Method::POST, "/placement/reshaper");
    assert_eq!(reshape(&app, ADMIN).await, StatusCode::FORBIDDEN);
    assert_eq!(reshape(&app, SERVICE).await, StatusCode::BAD_REQUEST);
    for (who, path, want) in [
        (READER, "/placement/usages?project_id=p1", StatusCode::OK),
        (P1, "/placement/usages?project_id=p1", StatusCode::OK),
        (
            READER,
            "/placement/usages?project_id=p2",
            StatusCode::FORBIDDEN,
        ),
        (READER, "/placement/usages", StatusCode::FORBIDDEN),
        (
            NO_ROLE,
            "/placement/usages?project_id=p1",
            StatusCode::FORBIDDEN,
        ),
        (P2, "/placement/usages?project_id=p1", StatusCode::FORBIDDEN),
        (SERVICE, "/placement/usages?project_id=p1", StatusCode::OK),
        (ADMIN, "/placement/usages?project_id=p1", StatusCode::OK),
    ] {
        let status = status_of(&app, who, false, Method::GET, path).await;
        assert_eq!(status, want, "{} {path}", who.user);
    }

    let (old, _dir) = spawn(Some("[placement]\nenforce_new_defaults = false\n")).await;
    assert_eq!(reshape(&old, ADMIN).await, StatusCode::BAD_REQUEST);
    assert_eq!(reshape(&old, P1).await, StatusCode::FORBIDDEN);
    let (_, openapi) = old.get("/openapi.json", None).await;
    assert_eq!(
        openapi["paths"]["/placement/reshaper"]["post"]["x-berth-policy"],
        json!({"role": "service-only", "scope": "project-token", "legacy_role": "admin"})
    );

    let (open, _dir) = spawn(Some(
        "[routes]\n\"GET /placement/resource_providers\" = \"authenticated\"\n",
    ))
    .await;
    // Any caller, but still only with a token scoped to a project.
    for (system, want) in [(false, StatusCode::OK), (true, StatusCode::FORBIDDEN)] {
        let status = status_of(&open, NO_ROLE, system, Method::GET, providers).await;
        assert_eq!(status, want, "system: {system}");
    }
    assert_eq!(
        open.request(Method::GET, providers, None)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::UNAUTHORIZED
    );
}
