//! `--auth keystone` against a real Keystone: the `keystone` package from PyPI, SQLite, fernet
//! tokens, served by gunicorn on 127.0.0.1 (`scripts/keystone.sh`), bootstrapped with an admin,
//! a service user for berth, a Nova-like service user, two projects with members, a project
//! reader and a system reader. berth validates every token itself; the test checks that each
//! role gets the policy's answer, that missing, garbage, unscoped, revoked and expired tokens get
//! 401 with `WWW-Authenticate: Keystone uri=...`, that a service token lets an expired user token
//! through as keystonemiddleware does, that a cached token stops working within the configured
//! bound (2 s here) after its revocation, and that with Keystone stopped a token berth has not
//! cached gets 503.
//!
//! Keystone is started by `keystone_server`; its virtualenv is `BERTH_TEST_KEYSTONE_VENV`, or `target/keystone-venv`
//! (`scripts/test.sh` installs it with `scripts/keystone.sh install`). Without it the test prints
//! a loud SKIPPED line and returns, except under `CI=true`, where that is a failure.

use crate::keystone_server::{ADMIN_PASSWORD, KeystoneApi, KeystoneServer, Scope, keystone_venv};
use crate::support::{Options, TestApp, parse};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Lifetime of every token this Keystone issues: short, so that one expires during the test
/// (tokens used later are issued just before their use, so that a slow machine does not expire
/// them first).
const TOKEN_LIFETIME: Duration = Duration::from_secs(40);
/// How long berth believes a validated token.
const CACHE_BOUND: Duration = Duration::from_secs(2);
/// Every other user's password.
const PASSWORD: &str = "berth-test-pw";

/// One call to berth with a token (and a service token).
async fn call(
    app: &TestApp,
    token: Option<&str>,
    service: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value, Option<String>) {
    let mut request = app.request(method, path, None);
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    if let Some(service) = service {
        request = request.header("X-Service-Token", service);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("call berth");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (status, body) = parse(response).await;
    (status, body, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn berth_validates_keystone_tokens_itself() {
    let Some(venv) = keystone_venv("the Keystone test") else {
        return;
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let mut keystone = KeystoneServer::start(&venv, TOKEN_LIFETIME);
    keystone.ready(&client).await;
    let ks = KeystoneApi {
        client: client.clone(),
        url: keystone.url.clone(),
    };
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;

    // Projects, users and roles.
    let project = |name: &str| json!({"name": name, "domain_id": "default"});
    let service = ks
        .create(&admin, "/projects", "project", project("service"))
        .await;
    let alpha = ks
        .create(&admin, "/projects", "project", project("alpha"))
        .await;
    let beta = ks
        .create(&admin, "/projects", "project", project("beta"))
        .await;
    let user = |name: &str| json!({"name": name, "domain_id": "default", "password": PASSWORD});
    let mut users = std::collections::BTreeMap::new();
    for name in ["berth", "nova", "alice", "bob", "rita", "sally"] {
        users.insert(name, ks.create(&admin, "/users", "user", user(name)).await);
    }
    let (member, reader, service_role) = (
        ks.role(&admin, "member").await,
        ks.role(&admin, "reader").await,
        ks.role(&admin, "service").await,
    );
    for (project, name, role) in [
        (&service, "berth", &service_role),
        (&service, "nova", &service_role),
        (&alpha, "alice", &member),
        (&beta, "bob", &member),
        (&alpha, "rita", &reader),
    ] {
        let path = format!("/projects/{project}/users/{}/roles/{role}", users[name]);
        ks.admin(&admin, Method::PUT, &path, None).await;
    }
    let path = format!("/system/users/{}/roles/{reader}", users["sally"]);
    ks.admin(&admin, Method::PUT, &path, None).await;
    // A token that will have expired by the end of the test.
    let expiring = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let expires = Instant::now() + TOKEN_LIFETIME;
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;

    // berth, validating tokens with its own service user's credentials.
    let config = keystone.dir.path().join("berth.toml");
    std::fs::write(
        &config,
        format!(
            "auth = \"keystone\"\n[keystone]\nauth_url = \"{}\"\nusername = \"berth\"\npassword = \"{PASSWORD}\"\nproject_name = \"service\"\ncache_seconds = {}\ntimeout_seconds = 2\n",
            keystone.url,
            CACHE_BOUND.as_secs()
        ),
    )
    .expect("write berth.toml");
    let app = TestApp::spawn_with(Options {
        config: Some(config),
        ..Options::default()
    })
    .await;
    let challenge = format!("Keystone uri=\"{}\"", keystone.url);

    // Each role gets the policy's answer.
    let alice = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let bob = ks.token("bob", PASSWORD, Scope::Project("beta")).await;
    let rita = ks.token("rita", PASSWORD, Scope::Project("alpha")).await;
    let nova = ks.token("nova", PASSWORD, Scope::Project("service")).await;
    let sally = ks.token("sally", PASSWORD, Scope::System).await;
    let admin_system = ks.token("admin", ADMIN_PASSWORD, Scope::System).await;
    let host = json!({"name": "compute-1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (status, _, _) = call(
        &app,
        Some(&admin),
        None,
        Method::POST,
        "/reservation/v1/os-hosts",
        Some(host.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "admin enrols a host");
    let (status, _, _) = call(
        &app,
        Some(&alice),
        None,
        Method::POST,
        "/reservation/v1/os-hosts",
        Some(host),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a member does not");
    let lease = json!({"name": "alpha-lease", "start_date": "2040-01-01 10:00",
        "end_date": "2040-01-01 12:00", "events": [],
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                          "hypervisor_properties": "", "resource_properties": ""}]});
    let (status, body, _) = call(
        &app,
        Some(&alice),
        None,
        Method::POST,
        "/reservation/v1/leases",
        Some(lease.clone()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "a member creates a lease: {body}"
    );
    let lease_id = body["lease"]["id"].as_str().expect("lease id").to_owned();
    assert_eq!(body["lease"]["project_id"], alpha.as_str(), "{body}");
    let lease_path = format!("/reservation/v1/leases/{lease_id}");
    let (status, _, _) = call(
        &app,
        Some(&rita),
        None,
        Method::POST,
        "/reservation/v1/leases",
        Some(lease),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a reader creates nothing");
    for (who, token, method, path, want) in [
        (
            "the project's reader",
            &rita,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "the project's reader",
            &rita,
            Method::DELETE,
            lease_path.as_str(),
            StatusCode::FORBIDDEN,
        ),
        (
            "another project's member",
            &bob,
            Method::GET,
            lease_path.as_str(),
            StatusCode::NOT_FOUND,
        ),
        (
            "the admin",
            &admin,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "the admin, system-scoped",
            &admin_system,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "a member",
            &alice,
            Method::GET,
            "/reservation/v1/os-hosts",
            StatusCode::FORBIDDEN,
        ),
        (
            "a member",
            &alice,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::FORBIDDEN,
        ),
        (
            "a service",
            &nova,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::OK,
        ),
        (
            "a service",
            &nova,
            Method::GET,
            "/reservation/v1/leases",
            StatusCode::FORBIDDEN,
        ),
        (
            "the admin",
            &admin,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::OK,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/promise/flavors",
            StatusCode::OK,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/reservation/v1/leases",
            StatusCode::FORBIDDEN,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/reservation/v1/os-hosts",
            StatusCode::FORBIDDEN,
        ),
        (
            "a project reader",
            &rita,
            Method::GET,
            "/promise/flavors",
            StatusCode::OK,
        ),
    ] {
        let (status, body, _) = call(&app, Some(token), None, method.clone(), path, None).await;
        assert_eq!(status, want, "{who}: {method} {path}: {body}");
    }
    let (status, body, _) = call(
        &app,
        Some(&bob),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        (status, body["leases"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0)),
        "{body}"
    );
    let (status, body, _) = call(
        &app,
        Some(&alice),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["leases"][0]["id"], lease_id.as_str(), "{body}");

    // Missing, garbage, unscoped and revoked tokens: 401 naming Keystone.
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;
    let unscoped = ks.token("alice", PASSWORD, Scope::Unscoped).await;
    let revoked = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    ks.revoke(&admin, &revoked).await;
    let garbage = "gAAAAABnot-a-token".to_owned();
    for (what, token) in [
        ("no token", None),
        ("a garbage token", Some(&garbage)),
        ("an unscoped token", Some(&unscoped)),
        ("a revoked token", Some(&revoked)),
    ] {
        let (status, body, header) = call(
            &app,
            token.map(String::as_str),
            None,
            Method::GET,
            "/reservation/v1/leases",
            None,
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
        assert_eq!(header.as_deref(), Some(challenge.as_str()), "{what}");
        assert!(
            body["error_message"].is_string(),
            "Blazar's error format: {body}"
        );
    }
    let (status, body, _) = call(
        &app,
        Some(&garbage),
        None,
        Method::GET,
        "/placement/resource_providers",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["errors"][0]["detail"].is_string(),
        "Placement's error format: {body}"
    );

    // A cached token stops working within the bound after its revocation.
    let cached = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let (status, _, _) = call(
        &app,
        Some(&cached),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    ks.revoke(&admin, &cached).await;
    let revoked_at = Instant::now();
    loop {
        let (status, _, _) = call(
            &app,
            Some(&cached),
            None,
            Method::GET,
            "/reservation/v1/leases",
            None,
        )
        .await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(
            revoked_at.elapsed() < CACHE_BOUND + Duration::from_secs(1),
            "a revoked token still works after {:?}",
            revoked_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An expired token: 401, unless a valid service token comes with it (keystonemiddleware's
    // rule for services acting on a user's behalf). berth's own token has been renewed by now.
    if let Some(left) = expires.checked_duration_since(Instant::now()) {
        tokio::time::sleep(left + Duration::from_secs(1)).await;
    }
    let (status, body, header) = call(
        &app,
        Some(&expiring),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "an expired token: {body}");
    assert_eq!(header.as_deref(), Some(challenge.as_str()));
    let nova = ks.token("nova", PASSWORD, Scope::Project("service")).await;
    let (status, body, _) = call(
        &app,
        Some(&expiring),
        Some(&nova),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an expired token with a service token: {body}"
    );
    assert_eq!(body["leases"][0]["id"], lease_id.as_str(), "{body}");
    let (status, _, _) = call(
        &app,
        Some(&expiring),
        Some(&alice),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a service token needs the service role"
    );
    let (status, _, _) = call(
        &app,
        Some(&expiring),
        Some(&garbage),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a garbage service token");

    // Keystone stopped: a token berth has not cached gets 503, never a pass.
    let fresh = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    keystone.stop();
    let started = Instant::now();
    let (status, body, _) = call(
        &app,
        Some(&fresh),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "Keystone down: {body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the timeout"
    );
    let (status, body, _) = call(
        &app,
        Some(&fresh),
        None,
        Method::GET,
        "/placement/resource_providers",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, _, _) = call(&app, None, None, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "public routes need no Keystone");
    drop(app);
}
