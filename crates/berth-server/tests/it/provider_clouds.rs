//! Provider clouds (Promise's `add-provider`) against a real Keystone and a second berth acting
//! as the remote cloud's Placement (registered in that Keystone's catalog as the `placement`
//! service): the seed's request as written (endpoint and names substituted) registers the cloud
//! and answers its `provider-id`, with a note that the v2.0 token URL was taken as v3; the
//! provider is listed and shown with the services berth found, never with its credentials; the
//! password is not in berth's database files; the registration survives a restart; bad
//! credentials, an unreachable endpoint, a region without Placement and an unsupported
//! provider type are refused with their reason and register nothing; removal works once.
//!
//! Without Keystone's virtualenv the Keystone part prints a loud SKIPPED line (a failure under
//! `CI=true`, see `keystone_server`); the refusals that need no Keystone always run.

use crate::keystone_server::{ADMIN_PASSWORD, KeystoneApi, KeystoneServer, Scope, keystone_venv};
use crate::support::{Options, TestApp, free_port};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The longest a test waits for a synchronisation to show (many intervals of one second).
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `check` holds of the provider cloud's description; returns it.
pub(crate) async fn until(
    app: &TestApp,
    id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, shown) = app.get(&format!("/promise/providers/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        if check(&shown["provider"]) {
            return shown["provider"].clone();
        }
        assert!(started.elapsed() < PATIENCE, "{what}: {shown}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The local inventory of `class` on `provider`: total and reserved (0, 0 without one).
pub(crate) async fn inventory(app: &TestApp, provider: &str, class: &str) -> (u64, u64) {
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{provider}/inventories"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let record = &body["inventories"][class];
    (
        record["total"].as_u64().unwrap_or(0),
        record["reserved"].as_u64().unwrap_or(0),
    )
}

/// Waits until the local inventory of VCPU on `provider` is `expected`.
pub(crate) async fn until_vcpu(app: &TestApp, provider: &str, expected: (u64, u64)) {
    let started = Instant::now();
    while inventory(app, provider, "VCPU").await != expected {
        assert!(
            started.elapsed() < PATIENCE,
            "VCPU {:?}, not {expected:?}",
            inventory(app, provider, "VCPU").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The provider cloud `id`'s node `cn-remote` (uuid `node` there) as imported into `app`: its
/// local uuid and its Placement record, named after the cloud.
pub(crate) async fn imported_node(app: &TestApp, id: &str, node: &str) -> (String, Value) {
    let cloud = uuid::Uuid::parse_str(id).expect("uuid");
    let node = uuid::Uuid::parse_str(node).expect("uuid");
    let local = uuid::Uuid::new_v5(&cloud, node.as_bytes()).to_string();
    let (status, imported) = app
        .get(
            &format!("/placement/resource_providers/{local}"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{imported}");
    assert_eq!(imported["name"], format!("{id}:cn-remote"), "{imported}");
    (local, imported)
}

/// The remote cloud's user's password.
pub(crate) const PASSWORD: &str = "promise-pw-4f1c";
/// The key berth seals credentials with in these tests.
const KEY: &str = "5f0c3a9e7d21b84c6e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f";

/// A berth configured with a credential key, reading its provider clouds every second, over
/// `database` when given.
pub(crate) async fn berth_with_key(dir: &Path, database: Option<String>) -> TestApp {
    let config = dir.join("berth-clouds.toml");
    std::fs::write(
        &config,
        format!("[provider_clouds]\ncredential_key = \"{KEY}\"\nsync_interval_seconds = 1\n"),
    )
    .expect("write the configuration");
    TestApp::spawn_with(Options {
        config: Some(config),
        database,
        ..Options::default()
    })
    .await
}

/// The seed's `add-provider` example request (12.1), with its endpoint and password
/// substituted.
fn seed_request(endpoint: &str, password: &str) -> Value {
    json!({ "provider-type": "openstack", "endpoint": endpoint, "username": "promise_user",
            "password": password, "tenant": { "name": "promise" } })
}

/// Every byte berth's SQLite database holds (the file and its write-ahead log).
fn database_bytes(database: &str) -> Vec<u8> {
    let path = database.strip_prefix("sqlite://").expect("an SQLite URL");
    let mut bytes = Vec::new();
    for suffix in ["", "-wal"] {
        if let Ok(read) = std::fs::read(format!("{path}{suffix}")) {
            bytes.extend(read);
        }
    }
    bytes
}

/// Runs `berth ARGS` against `app` (off the runtime, so the server keeps answering), expects
/// exit 0 and parses its standard output when it is JSON (else `null`).
async fn cli(app: &TestApp, args: &[&str]) -> Value {
    let url = app.base.clone();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let output = tokio::task::spawn_blocking(move || {
        assert_cmd::Command::cargo_bin("berth")
            .expect("the berth binary")
            .args(&args)
            .env("BERTH_URL", url)
            .env_remove("BERTH_TOKEN")
            .env_remove("BERTH_PROVIDER_PASSWORD")
            .timeout(Duration::from_secs(60))
            .output()
            .expect("run berth")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "berth {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or(Value::Null)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_provider_is_refused_without_a_key_or_with_a_type_berth_does_not_register() {
    let plain = TestApp::spawn().await;
    let (status, body) = plain
        .post(
            "/promise/add-provider",
            seed_request("http://127.0.0.1:9/v2.0/tokens", PASSWORD),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "provider_clouds_disabled", "{body}");
    assert_eq!(body["result"], "conflict", "{body}");

    let dir = tempfile::tempdir().expect("dir");
    let app = berth_with_key(dir.path(), None).await;
    let mut amazon = seed_request("http://127.0.0.1:9/v3", PASSWORD);
    amazon["provider-type"] = json!("amazon");
    let (status, body) = app.post("/promise/add-provider", amazon).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "provider_type_unsupported", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("openstack")),
        "names the supported type: {body}"
    );
    let mut no_tenant = seed_request("http://127.0.0.1:9/v3", PASSWORD);
    no_tenant.as_object_mut().expect("object").remove("tenant");
    let (status, body) = app.post("/promise/add-provider", no_tenant).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = app
        .post("/promise/add-provider", seed_request("not a url", PASSWORD))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Nothing listens there: unreachable, and nothing is registered.
    let unreachable = format!("http://127.0.0.1:{}/v2.0/tokens", free_port());
    let (status, body) = app
        .post(
            "/promise/add-provider",
            seed_request(&unreachable, PASSWORD),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "provider_unreachable", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("could not be reached")),
        "{body}"
    );
    let (status, body) = app.get("/promise/providers", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["providers"], json!([]), "nothing registered");
    let (status, _) = app
        .get(&format!("/promise/providers/{}", uuid::Uuid::nil()), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The remote cloud: a Keystone with a `promise` project and `promise_user`, and a berth
/// serving Placement, registered in the catalog in RegionOne, with one compute node (16 VCPU,
/// 32 GiB, 200 GB).
pub(crate) struct RemoteCloud {
    pub(crate) keystone: KeystoneServer,
    pub(crate) placement: TestApp,
    /// The compute node's uuid in the remote Placement.
    pub(crate) node: String,
}

impl RemoteCloud {
    pub(crate) async fn start(venv: &Path) -> RemoteCloud {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let mut keystone = KeystoneServer::start(venv, Duration::from_secs(3600));
        keystone.ready(&client).await;
        let placement = TestApp::spawn().await;
        let node = placement.create_provider("cn-remote", None).await;
        let ks = KeystoneApi {
            client,
            url: keystone.url.clone(),
        };
        let admin = ks
            .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
            .await;
        let project = ks
            .create(
                &admin,
                "/projects",
                "project",
                json!({"name": "promise", "domain_id": "default"}),
            )
            .await;
        let user = ks
            .create(
                &admin,
                "/users",
                "user",
                json!({"name": "promise_user", "domain_id": "default", "password": PASSWORD}),
            )
            .await;
        let member = ks.role(&admin, "member").await;
        ks.admin(
            &admin,
            Method::PUT,
            &format!("/projects/{project}/users/{user}/roles/{member}"),
            None,
        )
        .await;
        let service = ks
            .create(
                &admin,
                "/services",
                "service",
                json!({"type": "placement", "name": "placement"}),
            )
            .await;
        ks.create(
            &admin,
            "/endpoints",
            "endpoint",
            json!({"service_id": service, "interface": "public", "region_id": "RegionOne",
                   "url": format!("{}/placement", placement.base)}),
        )
        .await;
        let cloud = RemoteCloud {
            keystone,
            placement,
            node,
        };
        cloud.set_vcpus(16).await;
        cloud
    }

    /// Sets the compute node's VCPU total (its memory and disk stay).
    pub(crate) async fn set_vcpus(&self, vcpus: u64) {
        let node = &self.node;
        let inventories = json!({"resource_provider_generation": self.placement.generation(node).await,
            "inventories": {"VCPU": {"total": vcpus}, "MEMORY_MB": {"total": 32768},
                            "DISK_GB": {"total": 200}}});
        let (status, body) = self
            .placement
            .call(
                Method::PUT,
                &format!("/placement/resource_providers/{node}/inventories"),
                Some("1.39"),
                Some(inventories),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    /// The seed's endpoint form: Keystone's v2.0 token URL.
    pub(crate) fn v2_endpoint(&self) -> String {
        self.keystone.url.replace("/v3", "/v2.0/tokens")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_add_provider_registers_an_openstack_cloud_through_its_keystone() {
    let Some(venv) = keystone_venv("the provider clouds test") else {
        return;
    };
    let mut remote = RemoteCloud::start(&venv).await;
    let dir = tempfile::tempdir().expect("dir");
    let app = berth_with_key(dir.path(), None).await;

    // The seed's request as written (endpoint and password substituted).
    let (status, body) = app
        .post(
            "/promise/add-provider",
            seed_request(&remote.v2_endpoint(), PASSWORD),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], "ok", "{body}");
    let id = body["provider-id"]
        .as_str()
        .expect("provider-id")
        .to_owned();
    uuid::Uuid::parse_str(&id).expect("a uuid");
    assert!(
        body["notes"][0].as_str().is_some_and(|n| n.contains("v3")),
        "the v2.0 endpoint is noted as taken as v3: {body}"
    );

    // Listed and shown with what berth found, never with the credentials.
    let (status, list) = app.get("/promise/providers", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let providers = list["providers"].as_array().expect("providers");
    assert_eq!(providers.len(), 1, "{list}");
    let provider = &providers[0];
    assert_eq!(provider["id"], id.as_str());
    assert_eq!(provider["provider-type"], "openstack");
    assert_eq!(provider["endpoint"], remote.keystone.url.as_str());
    assert_eq!(provider["username"], "promise_user");
    assert_eq!(provider["tenant"]["name"], "promise");
    assert!(provider["tenant"]["id"].is_string(), "{provider}");
    assert_eq!(provider["region"], "RegionOne");
    assert_eq!(
        provider["services"],
        json!([{"type": "placement", "url": format!("{}/placement", remote.placement.base)}])
    );
    let text = list.to_string();
    assert!(!text.contains(PASSWORD) && !text.contains("v1:"), "{text}");
    for path in [
        format!("/promise/providers/{id}"),
        format!("/promise/providers/ResourceProvider:{id}"),
    ] {
        let (status, shown) = app.get(&path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {shown}");
        assert_eq!(&shown["provider"], provider, "{path}");
    }

    // Its capacity is read at once, and an instance berth places on it is written into its
    // Placement, with the project and user Keystone gave berth there; destroyed, it is gone
    // there too.
    until(&app, &id, "imported", |p| {
        p["sync"]["state"] == "ok" && p["sync"]["providers"] == 1
    })
    .await;
    // Imported under the cloud's id, and reserved on as local capacity is: its 16 VCPU fit
    // one reservation, and one more core does not.
    let (local, _) = imported_node(&app, &id, &remote.node).await;
    let start = crate::blazar_leases::tomorrow();
    let reserve = |cores: u64| {
        json!({"zone": "RegionOne", "provider-id": id, "start": crate::blazar_leases::rfc3339(start),
               "end": crate::blazar_leases::rfc3339(start + 86_400_000_000),
               "capacity": {"cores": cores.to_string(), "ram": "1024", "instances": "1"}})
    };
    let (status, made) = app.post("/promise/create-reservation", reserve(16)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let (status, refused) = app.post("/promise/create-reservation", reserve(1)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (status, body) = app
        .post(
            "/promise/cancel-reservation",
            json!({"reservation-id": made["reservation-id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .post(
            "/promise/flavors",
            json!({"id": "tiny", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, made) = app
        .post(
            "/promise/create-instance",
            json!({"provider-id": id, "name": "vm1", "image": "cirros", "flavor": "m1.tiny"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let instance = made["instance-id"].as_str().expect("id").to_owned();
    let path = format!("/placement/allocations/{instance}");
    let (status, held) = remote.placement.get(&path, Some("1.39")).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    assert_eq!(
        held["allocations"][&remote.node]["resources"],
        json!({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}),
        "{held}"
    );
    assert_eq!(held["project_id"], provider["tenant"]["id"], "{held}");
    assert!(
        held["user_id"]
            .as_str()
            .is_some_and(|u| !u.is_empty() && u != "promise_user"),
        "Keystone's user id: {held}"
    );
    let (status, body) = app
        .post(
            "/promise/destroy-instance",
            json!({"instance-id": instance}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, held) = remote.placement.get(&path, Some("1.39")).await;
    assert_eq!(held["allocations"], json!({}), "{held}");
    // A change in the cloud shows within the interval.
    remote.set_vcpus(32).await;
    until_vcpu(&app, &local, (32, 0)).await;

    // The same cloud, user and project again: a conflict naming the registered one.
    let (status, body) = app
        .post(
            "/promise/add-provider",
            seed_request(&remote.keystone.url, PASSWORD),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains(&id)),
        "{body}"
    );

    // Refusals, each with its reason, registering nothing.
    let (status, body) = app
        .post(
            "/promise/add-provider",
            seed_request(&remote.v2_endpoint(), "wrong-password"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "provider_credentials_refused", "{body}");
    assert_eq!(body["result"], "error", "{body}");
    let mut elsewhere = seed_request(&remote.v2_endpoint(), PASSWORD);
    elsewhere["region"] = json!("RegionTwo");
    let (status, body) = app.post("/promise/add-provider", elsewhere).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "provider_service_missing", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("RegionTwo")),
        "{body}"
    );
    let (_, list) = app.get("/promise/providers", None).await;
    assert_eq!(
        list["providers"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );

    // Sealed at rest: the password is nowhere in the database's files; a restart keeps the
    // registration.
    let (kept, database) = app.stop().await;
    let bytes = database_bytes(&database);
    assert!(!bytes.is_empty(), "the database was read");
    assert!(contains(&bytes, &id), "the provider is stored");
    assert!(!contains(&bytes, PASSWORD), "the password is stored sealed");
    let app = berth_with_key(dir.path(), Some(database)).await;
    let (status, shown) = app.get(&format!("/promise/providers/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "kept across a restart: {shown}");

    // Removed once.
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/promise/providers/{id}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/promise/providers/{id}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = app.get("/promise/providers", None).await;
    assert_eq!(list["providers"], json!([]));

    // The ETSI-style registration answers the provider made; its refusals are the same.
    let (status, made) = app
        .post(
            "/promise/providers",
            seed_request(&remote.keystone.url, PASSWORD),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["provider"]["region"], "RegionOne", "{made}");
    let made_id = made["provider"]["id"].as_str().expect("id").to_owned();
    let (status, body) = app
        .post(
            "/promise/providers",
            seed_request(&remote.keystone.url, "wrong-password"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "provider_credentials_refused", "{body}");
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/promise/providers/{made_id}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // The same through the command line, the password from a file.
    let secret = dir.path().join("password");
    std::fs::write(&secret, format!("{PASSWORD}\n")).expect("write the password");
    let secret = secret.display().to_string();
    let endpoint = remote.v2_endpoint();
    let added = cli(
        &app,
        &[
            "provider-cloud",
            "add",
            "--endpoint",
            &endpoint,
            "--username",
            "promise_user",
            "--project",
            "promise",
            "--password-file",
            &secret,
            "-o",
            "json",
        ],
    )
    .await;
    let id = added["id"].as_str().expect("the provider's id").to_owned();
    assert_eq!(added["region"], "RegionOne", "{added}");
    let listed = cli(&app, &["provider-cloud", "list", "-o", "json"]).await;
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert!(!listed.to_string().contains(PASSWORD));
    let shown = cli(&app, &["provider-cloud", "show", &id, "-o", "json"]).await;
    assert_eq!(shown["services"][0]["type"], "placement", "{shown}");
    cli(&app, &["provider-cloud", "remove", &id]).await;
    let (_, list) = app.get("/promise/providers", None).await;
    assert_eq!(list["providers"], json!([]));
    drop(kept);
    remote.keystone.stop();
}
