//! The fence end to end: capacity leases hold is kept from Placement consumers that present no
//! reservation, while the lease is pending or active; holders present their reservation by
//! aggregate, by class or with `reservation=`; the lease's start raises the reservation
//! aggregates and classes and its end lowers them and removes the consumers still allocated
//! against it; `--fence-unreserved false` is strict Placement; and bad presentations are refused.

use crate::blazar_leases::{
    LEASES, create, enroll, kinds, lease_body, minutes, now_micros, records, rfc3339, tomorrow,
    wait_for_status,
};
use crate::support::{Options, TestApp, detail};
use berth_core::model::fence::FREEPOOL_AGGREGATE;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const MV: &str = "1.39";
const CANDIDATES: &str = "/placement/allocation_candidates";
const HOUR: i64 = 3_600_000_000;
/// The lease's project under noauth (the caller is `admin` of project `admin`).
const OWNER: &str = "admin";
/// A project that holds no lease.
const STRANGER: &str = "tenant-b";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

/// A consumer uuid of these tests.
fn consumer(n: u32) -> String {
    format!("f0000000-0000-4000-8000-{n:012}")
}

/// The resource class of an instance reservation.
fn class_of(reservation: &str) -> String {
    format!(
        "CUSTOM_RESERVATION_{}",
        reservation.to_uppercase().replace('-', "_")
    )
}

/// Enrolls `n` hosts of 8 VCPU, 16 GiB and 100 GB named `{prefix}-{i}`; returns their
/// Placement uuids in enrolment order.
async fn enroll_hosts(app: &TestApp, prefix: &str, n: usize) -> Vec<String> {
    let mut names = Vec::with_capacity(n);
    for idx in 0..n {
        let name = format!("{prefix}-{idx}");
        enroll(app, &name, "az1", 8).await;
        names.push(name);
    }
    let (status, body) = app.get("/placement/resource_providers", Some(MV)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["resource_providers"].as_array().expect("providers");
    names
        .iter()
        .map(|name| {
            listed
                .iter()
                .find(|p| p["name"] == json!(name))
                .map(|p| text(&p["uuid"]))
                .unwrap_or_else(|| panic!("host {name} is not a Placement provider: {body}"))
        })
        .collect()
}

/// A `physical:host` reservation of exactly `n` hosts, any of them.
fn host_reservation(n: u32) -> Value {
    json!({"resource_type": "physical:host", "min": n, "max": n,
           "hypervisor_properties": "", "resource_properties": ""})
}

/// A `virtual:instance` reservation of `amount` anti-affine instances of `vcpus` VCPU, 4 GiB
/// and 10 GB.
fn instance_reservation(vcpus: u64, amount: u32) -> Value {
    json!({"resource_type": "virtual:instance", "vcpus": vcpus, "memory_mb": 4096,
           "disk_gb": 10, "amount": amount, "affinity": false})
}

/// A lease's reservation of a resource type: its id and the provider uuids it holds.
fn reservation(lease: &Value, resource_type: &str) -> (String, BTreeSet<String>) {
    let found = lease["reservations"]
        .as_array()
        .expect("reservations")
        .iter()
        .find(|r| r["resource_type"] == resource_type)
        .unwrap_or_else(|| panic!("no {resource_type} reservation in {lease}"));
    let hosts = found["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .map(|a| text(&a["provider_uuid"]))
        .collect();
    (text(&found["id"]), hosts)
}

/// `GET /allocation_candidates?{query}` at 1.39.
async fn candidates(app: &TestApp, query: &str) -> (StatusCode, Value) {
    app.get(&format!("{CANDIDATES}?{query}"), Some(MV)).await
}

/// The root providers the candidates of `query` use.
async fn offered(app: &TestApp, query: &str) -> BTreeSet<String> {
    let (status, body) = candidates(app, query).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    body["allocation_requests"]
        .as_array()
        .expect("requests")
        .iter()
        .flat_map(|r| {
            r["allocations"]
                .as_object()
                .expect("dict form")
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The aggregates of a provider.
async fn aggregates(app: &TestApp, uuid: &str) -> BTreeSet<String> {
    let path = format!("/placement/resource_providers/{uuid}/aggregates");
    let (status, body) = app.get(&path, Some(MV)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["aggregates"]
        .as_array()
        .expect("aggregates")
        .iter()
        .map(text)
        .collect()
}

/// The names of every resource class.
async fn resource_classes(app: &TestApp) -> BTreeSet<String> {
    let (status, body) = app.get("/placement/resource_classes", Some(MV)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["resource_classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| text(&c["name"]))
        .collect()
}

/// The inventory totals of a provider, by class.
async fn inventory_total(app: &TestApp, uuid: &str, class: &str) -> Option<u64> {
    let path = format!("/placement/resource_providers/{uuid}/inventories");
    let (status, body) = app.get(&path, Some(MV)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["inventories"][class]["total"].as_u64()
}

/// Who writes an allocation: a consumer (by number) of a project, of a consumer type.
#[derive(Clone, Copy)]
struct By<'a> {
    consumer: u32,
    project: &'a str,
    kind: &'a str,
}

/// An `INSTANCE` consumer of `project`.
fn by(consumer: u32, project: &str) -> By<'_> {
    By {
        consumer,
        project,
        kind: "INSTANCE",
    }
}

impl<'a> By<'a> {
    fn typed(self, kind: &'a str) -> By<'a> {
        By { kind, ..self }
    }
}

/// `PUT /allocations/{consumer}` at 1.39 of a new consumer holding `resources` on `provider`.
async fn allocate(
    app: &TestApp,
    who: By<'_>,
    provider: &str,
    resources: Value,
) -> (StatusCode, Value) {
    let body = json!({"allocations": {provider: {"resources": resources}}, "project_id": who.project,
                      "user_id": "u1", "consumer_generation": null, "consumer_type": who.kind});
    let path = format!("/placement/allocations/{}", consumer(who.consumer));
    app.call(Method::PUT, &path, Some(MV), Some(body)).await
}

/// The providers a consumer holds allocations on.
async fn allocations_of(app: &TestApp, consumer: &str) -> BTreeSet<String> {
    let (status, body) = app
        .get(&format!("/placement/allocations/{consumer}"), Some(MV))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["allocations"]
        .as_object()
        .expect("allocations")
        .keys()
        .cloned()
        .collect()
}

async fn remove_consumer(app: &TestApp, consumer: &str) {
    let path = format!("/placement/allocations/{consumer}");
    let (status, body) = app.call(Method::DELETE, &path, Some(MV), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

/// The status of a lease.
async fn status_of(app: &TestApp, id: &str) -> String {
    let (status, body) = app.get(&format!("{LEASES}/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    text(&body["lease"]["status"])
}

/// Creates a lease starting now and ending at `end` (a request date), waits (bounded) until
/// it is ACTIVE.
async fn running_lease(app: &TestApp, name: &str, end: &str, reservations: Value) -> Value {
    let created = tokio::time::Instant::now();
    let lease = create(app, lease_body(name, "now", end, reservations)).await;
    let id = text(&lease["id"]);
    wait_for_status(app, &id, "ACTIVE", created + Duration::from_secs(3))
        .await
        .unwrap_or_else(|| panic!("lease {id} did not start within 3 s"))
}

/// Asserts that a 409 answer is a fence refusal.
fn assert_fenced(status: StatusCode, body: &Value, what: &str) {
    assert_eq!(status, StatusCode::CONFLICT, "{what}: {body}");
    assert!(
        detail(body).contains("reserved by leases"),
        "{what}: a fence refusal: {body}"
    );
}

fn set(items: &[&String]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).clone()).collect()
}

// ---------------------------------------------------------------------------------------------
// 1. A running lease: hosts and slots fenced, presented by their holders, freed at the end
// ---------------------------------------------------------------------------------------------

/// What the scenario's lease holds.
struct Held {
    lease: String,
    host_res: String,
    host_hosts: BTreeSet<String>,
    inst_res: String,
    inst_hosts: BTreeSet<String>,
    free: BTreeSet<String>,
    all: BTreeSet<String>,
}

impl Held {
    fn new(lease: &Value, all: &[String]) -> Held {
        let (host_res, host_hosts) = reservation(lease, "physical:host");
        let (inst_res, inst_hosts) = reservation(lease, "virtual:instance");
        let all: BTreeSet<String> = all.iter().cloned().collect();
        let free = all
            .iter()
            .filter(|h| !host_hosts.contains(*h) && !inst_hosts.contains(*h))
            .cloned()
            .collect();
        Held {
            lease: text(&lease["id"]),
            host_res,
            host_hosts,
            inst_res,
            inst_hosts,
            free,
            all,
        }
    }

    fn unfenced_by_hosts(&self) -> BTreeSet<String> {
        self.all.difference(&self.host_hosts).cloned().collect()
    }
}

/// Unreserved queries never see the host reservation's hosts, and see on the instance hosts
/// only what is left outside the reservation (8 - 4 VCPU, 16384 - 4096 MB).
async fn check_unreserved_candidates(app: &TestApp, held: &Held) {
    assert_eq!(held.host_hosts.len(), 3);
    assert_eq!(held.inst_hosts.len(), 4, "anti-affine: four hosts");
    assert!(held.host_hosts.is_disjoint(&held.inst_hosts));
    let wide = held.unfenced_by_hosts();
    assert_eq!(offered(app, "resources=VCPU:1").await, wide);
    assert_eq!(offered(app, "resources=VCPU:4").await, wide);
    assert_eq!(offered(app, "resources=VCPU:5").await, held.free);
    assert_eq!(offered(app, "resources=MEMORY_MB:12288").await, wide);
    assert_eq!(offered(app, "resources=MEMORY_MB:12289").await, held.free);
    assert_eq!(
        offered(app, "resources=VCPU:1&preemptible=false").await,
        wide
    );
    // Preemptible requests may borrow what is fenced.
    assert_eq!(
        offered(app, "resources=VCPU:8&preemptible=true").await,
        held.all
    );
}

/// The reservation aggregates are on the held hosts, the freepool on every (reservable) host,
/// and the instance reservation's class has one unit per slot on its hosts.
async fn check_raised(app: &TestApp, held: &Held) {
    let freepool = FREEPOOL_AGGREGATE.to_string();
    for host in &held.all {
        let mut wanted = BTreeSet::from([freepool.clone()]);
        if held.host_hosts.contains(host) {
            wanted.insert(held.host_res.clone());
        }
        if held.inst_hosts.contains(host) {
            wanted.insert(held.inst_res.clone());
        }
        assert_eq!(aggregates(app, host).await, wanted, "aggregates of {host}");
    }
    let class = class_of(&held.inst_res);
    assert!(
        resource_classes(app).await.contains(&class),
        "{class} is listed"
    );
    for host in &held.all {
        let expected = held.inst_hosts.contains(host).then_some(1);
        assert_eq!(inventory_total(app, host, &class).await, expected, "{host}");
    }
}

/// The holders' queries get the reservation's capacity and nothing else.
async fn check_holders_candidates(app: &TestApp, held: &Held) {
    let (host_res, inst_res) = (&held.host_res, &held.inst_res);
    let class = class_of(inst_res);
    assert_eq!(
        offered(app, &format!("resources=VCPU:1&member_of={host_res}")).await,
        held.host_hosts
    );
    assert_eq!(
        offered(app, &format!("resources=VCPU:8&reservation={host_res}")).await,
        held.host_hosts,
        "the whole host is the holder's"
    );
    assert_eq!(
        offered(app, &format!("resources={class}:1,VCPU:4")).await,
        held.inst_hosts
    );
    assert_eq!(
        offered(
            app,
            &format!("resources=VCPU:4,MEMORY_MB:4096&reservation={inst_res}")
        )
        .await,
        held.inst_hosts
    );
    assert!(
        offered(app, &format!("resources={class}:2,VCPU:4"))
            .await
            .is_empty(),
        "one slot per host"
    );
}

/// Unreserved writes are kept out of the fence; the four instances and a holder of the host
/// reservation get in; a fifth instance does not.
async fn check_writes(app: &TestApp, held: &Held) {
    let host = held.host_hosts.iter().next().expect("a held host");
    let first_inst = held.inst_hosts.iter().next().expect("an instance host");
    let class = class_of(&held.inst_res);
    let (status, body) = allocate(app, by(1, STRANGER), host, json!({"VCPU": 1})).await;
    assert_fenced(status, &body, "unreserved on a held host");
    let (status, body) = allocate(app, by(1, STRANGER), first_inst, json!({"VCPU": 5})).await;
    assert_fenced(status, &body, "unreserved into an instance host's slots");
    // What is left outside the slot is anyone's.
    let (status, body) = allocate(app, by(1, STRANGER), first_inst, json!({"VCPU": 4})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // A preemptible consumer may borrow a held host.
    let (status, body) = allocate(
        app,
        by(2, STRANGER).typed("PREEMPTIBLE"),
        host,
        json!({"VCPU": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "preemptible: {body}");
    remove_consumer(app, &consumer(2)).await;
    // The lease's project presents the host reservation by allocating on its host.
    let (status, body) = allocate(
        app,
        by(10, OWNER),
        host,
        json!({"VCPU": 8, "MEMORY_MB": 16384}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "presented: {body}");
    let slot = json!({class.clone(): 1, "VCPU": 4, "MEMORY_MB": 4096});
    for (idx, inst_host) in held.inst_hosts.iter().enumerate() {
        let n = 11 + u32::try_from(idx).expect("small");
        let (status, body) = allocate(app, by(n, OWNER), inst_host, slot.clone()).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "instance {n}: {body}");
    }
    let (status, body) = allocate(app, by(15, OWNER), first_inst, slot.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "a fifth instance: {body}");
    // Reserved consumers use the fence, they do not add to it: 4 VCPU are still left outside.
    assert_eq!(
        offered(app, "resources=VCPU:4").await,
        held.unfenced_by_hosts()
            .difference(&BTreeSet::from([first_inst.clone()]))
            .cloned()
            .collect()
    );
    assert!(
        offered(app, &format!("resources={class}:1,VCPU:4"))
            .await
            .is_empty(),
        "every slot is taken"
    );
}

/// After the end: every host offers its full capacity, the aggregates and the class are gone,
/// the reserved consumers were removed and recorded, the unreserved one stays.
async fn check_lowered(app: &TestApp, held: &Held) {
    let first_inst = held.inst_hosts.iter().next().expect("an instance host");
    assert_eq!(
        allocations_of(app, &consumer(1)).await,
        BTreeSet::from([first_inst.clone()]),
        "an unreserved consumer outlives the lease"
    );
    remove_consumer(app, &consumer(1)).await;
    for n in 10..15 {
        assert!(
            allocations_of(app, &consumer(n)).await.is_empty(),
            "consumer {n}"
        );
    }
    let (status, body) = candidates(app, "resources=VCPU:8,MEMORY_MB:16384,DISK_GB:100").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        offered(app, "resources=VCPU:8,MEMORY_MB:16384,DISK_GB:100").await,
        held.all
    );
    for summary in body["provider_summaries"]
        .as_object()
        .expect("summaries")
        .values()
    {
        assert_eq!(summary["resources"]["VCPU"]["used"], 0, "{summary}");
    }
    let freepool = FREEPOOL_AGGREGATE.to_string();
    for host in &held.all {
        assert_eq!(
            aggregates(app, host).await,
            BTreeSet::from([freepool.clone()]),
            "{host}"
        );
    }
    let class = class_of(&held.inst_res);
    assert!(
        !resource_classes(app).await.contains(&class),
        "{class} is gone"
    );
    let record = records(app, &held.lease).await;
    let terminated: BTreeSet<String> = record
        .iter()
        .filter(|r| r["type"] == "consumer.terminated")
        .map(|r| text(&r["details"]["consumer"]))
        .collect();
    let expected: BTreeSet<String> = (10..15).map(consumer).collect();
    assert_eq!(terminated, expected, "{:?}", kinds(&record));
    // An ended reservation cannot be presented any more.
    let (status, body) = candidates(
        app,
        &format!("resources=VCPU:1&reservation={}", held.inst_res),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(detail(&body).contains("ended"), "{body}");
}

#[tokio::test]
async fn a_running_lease_fences_its_capacity_until_it_ends() {
    let app = TestApp::spawn().await;
    let hosts = enroll_hosts(&app, "fence", 10).await;
    let end_micros = now_micros() + 5_000_000;
    let reservations = json!([host_reservation(3), instance_reservation(4, 4)]);
    let lease = running_lease(&app, "fenced", &rfc3339(end_micros), reservations).await;
    let held = Held::new(&lease, &hosts);
    assert_eq!(held.free.len(), 3, "{lease}");

    check_unreserved_candidates(&app, &held).await;
    check_raised(&app, &held).await;
    check_holders_candidates(&app, &held).await;
    check_writes(&app, &held).await;
    assert_eq!(
        status_of(&app, &held.lease).await,
        "ACTIVE",
        "the checks above ran inside the lease's window (a machine too slow fails here)"
    );

    let left = u64::try_from(end_micros - now_micros()).unwrap_or(0);
    let deadline =
        tokio::time::Instant::now() + Duration::from_micros(left) + Duration::from_secs(3);
    wait_for_status(&app, &held.lease, "TERMINATED", deadline)
        .await
        .expect("TERMINATED within 3 s of its end");
    check_lowered(&app, &held).await;
}

// ---------------------------------------------------------------------------------------------
// 2. A pending lease already fences what it will hold
// ---------------------------------------------------------------------------------------------

/// Enrolls a host outside the freepool (`reservable: false`); returns its Placement uuid.
async fn enroll_spare(app: &TestApp, name: &str) -> String {
    let body =
        json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100, "reservable": false});
    let (status, created) = app
        .call(Method::POST, "/reservation/v1/os-hosts", None, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let path = format!("/placement/resource_providers?name={name}");
    let (status, listed) = app.get(&path, Some(MV)).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    text(&listed["resource_providers"][0]["uuid"])
}

/// Before the start: unreserved writes stay out of the held host (even the lease's own
/// project's: nothing is presented before the start) and out of the future slot.
async fn check_pending_writes(app: &TestApp, held_host: &str, inst_host: &str, host_res: &str) {
    for project in [STRANGER, OWNER] {
        let (status, body) = allocate(app, by(1, project), held_host, json!({"VCPU": 1})).await;
        assert_fenced(status, &body, &format!("{project} before the start"));
    }
    let (status, body) = allocate(app, by(1, STRANGER), inst_host, json!({"VCPU": 3})).await;
    assert_fenced(status, &body, "into future slots");
    let (status, body) = allocate(app, by(1, STRANGER), inst_host, json!({"VCPU": 2})).await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "beside the future slot: {body}"
    );
    remove_consumer(app, &consumer(1)).await;
    let query = format!("resources=VCPU:1&reservation={host_res}");
    let (status, body) = candidates(app, &query).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(detail(&body).contains("not_started"), "{body}");
}

/// Nothing is raised before the start: only the freepool, on reservable hosts only.
async fn check_not_raised(app: &TestApp, hosts: &[String], spare: &str) {
    let freepool = FREEPOOL_AGGREGATE.to_string();
    for host in hosts {
        let found = aggregates(app, host).await;
        assert_eq!(found, BTreeSet::from([freepool.clone()]), "{host}");
    }
    let found = aggregates(app, spare).await;
    assert!(found.is_empty(), "not reservable, not in the freepool");
    let classes = resource_classes(app).await;
    assert!(!classes.iter().any(|c| c.starts_with("CUSTOM_RESERVATION_")));
}

#[tokio::test]
async fn a_pending_lease_fences_its_hosts_ahead_of_its_start() {
    let app = TestApp::spawn().await;
    let hosts = enroll_hosts(&app, "later", 4).await;
    let spare = enroll_spare(&app, "spare").await;
    let t = tomorrow();
    let reservations = json!([host_reservation(2), instance_reservation(6, 1)]);
    let body = lease_body("later", &minutes(t), &minutes(t + HOUR), reservations);
    let lease = create(&app, body).await;
    assert_eq!(lease["status"], "PENDING");
    let (host_res, held) = reservation(&lease, "physical:host");
    let (_, inst_hosts) = reservation(&lease, "virtual:instance");
    let inst_host = inst_hosts.iter().next().expect("an instance host").clone();
    let free: Vec<&String> = hosts
        .iter()
        .filter(|h| !held.contains(*h) && **h != inst_host)
        .collect();
    assert_eq!(free.len(), 1, "{lease}");

    let everyone_else = set(&[free[0], &spare, &inst_host]);
    assert_eq!(offered(&app, "resources=VCPU:1").await, everyone_else);
    assert_eq!(offered(&app, "resources=VCPU:2").await, everyone_else);
    let left = set(&[free[0], &spare]);
    assert_eq!(offered(&app, "resources=VCPU:3").await, left, "8 - 6 VCPU");
    let held_host = held.iter().next().expect("a held host");
    check_pending_writes(&app, held_host, &inst_host, &host_res).await;
    check_not_raised(&app, &hosts, &spare).await;

    // Deleting the lease takes the fence down.
    let path = format!("{LEASES}/{}", text(&lease["id"]));
    let (status, body) = app.call(Method::DELETE, &path, None, None).await;
    assert!(status.is_success(), "{body}");
    let mut all: BTreeSet<String> = hosts.iter().cloned().collect();
    all.insert(spare);
    assert_eq!(offered(&app, "resources=VCPU:8").await, all);
}

// ---------------------------------------------------------------------------------------------
// 3. --fence-unreserved false: strict Placement
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn without_the_fence_placement_is_strict_and_member_of_excludes_reservations() {
    let app = TestApp::spawn_with(Options {
        fence_unreserved: Some(false),
        ..Options::default()
    })
    .await;
    let hosts = enroll_hosts(&app, "strict", 4).await;
    let all: BTreeSet<String> = hosts.iter().cloned().collect();
    let reservations = json!([host_reservation(2), instance_reservation(6, 1)]);
    let lease = running_lease(&app, "strict", &minutes(tomorrow()), reservations).await;
    let (host_res, held) = reservation(&lease, "physical:host");
    let (inst_res, inst_hosts) = reservation(&lease, "virtual:instance");
    let inst_host = inst_hosts.iter().next().expect("an instance host").clone();

    assert_eq!(offered(&app, "resources=VCPU:1").await, all);
    assert_eq!(
        offered(&app, "resources=VCPU:8").await,
        all,
        "nothing is kept"
    );
    let unheld: BTreeSet<String> = all.difference(&held).cloned().collect();
    assert_eq!(
        offered(&app, &format!("resources=VCPU:1&member_of=!{host_res}")).await,
        unheld
    );
    let mut neither = unheld.clone();
    neither.remove(&inst_host);
    assert_eq!(neither.len(), 1);
    assert_eq!(
        offered(
            &app,
            &format!("resources=VCPU:1&member_of=!in:{host_res},{inst_res}")
        )
        .await,
        neither
    );
    // The reservations are still raised, and their holders still get only what they hold.
    let held_host = held.iter().next().expect("a held host");
    assert!(aggregates(&app, held_host).await.contains(&host_res));
    assert_eq!(
        offered(&app, &format!("resources=VCPU:1&reservation={host_res}")).await,
        held
    );
    let (status, body) = allocate(&app, by(1, STRANGER), held_host, json!({"VCPU": 1})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "strict Placement: {body}");
    let (status, body) = allocate(&app, by(2, STRANGER), &inst_host, json!({"VCPU": 8})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "strict Placement: {body}");
    remove_consumer(&app, &consumer(2)).await;
    let class = class_of(&inst_res);
    let (status, body) =
        allocate(&app, by(3, OWNER), &inst_host, json!({class: 2, "VCPU": 6})).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a presented allocation stays within its reservation: {body}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Bad presentations
// ---------------------------------------------------------------------------------------------

/// Allocations that present the instance reservation wrongly are refused.
async fn refuse_bad_allocations(
    app: &TestApp,
    inst_res: &str,
    inst_hosts: &BTreeSet<String>,
    host_host: &str,
) {
    let class = class_of(inst_res);
    let mut inst = inst_hosts.iter();
    let (a, b) = (inst.next().expect("one"), inst.next().expect("two"));
    let slot = json!({class.clone(): 1, "VCPU": 4, "MEMORY_MB": 4096});
    let (status, body) = allocate(app, by(1, STRANGER), a, slot.clone()).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "another project's reservation: {body}"
    );
    let cases = [
        (
            "two slots on a host with one",
            a.as_str(),
            json!({class.clone(): 2, "VCPU": 4}),
        ),
        (
            "more than a slot's size",
            a.as_str(),
            json!({class.clone(): 1, "VCPU": 5}),
        ),
        (
            "a class the slot has not",
            a.as_str(),
            json!({class.clone(): 1, "VCPU": 4, "VGPU": 1}),
        ),
        (
            "a host outside the reservation",
            host_host,
            json!({class.clone(): 1, "VCPU": 4}),
        ),
    ];
    for (what, host, resources) in cases {
        let (status, body) = allocate(app, by(1, OWNER), host, resources).await;
        assert_eq!(status, StatusCode::CONFLICT, "{what}: {body}");
    }
    for (n, host) in [(2, a), (3, b)] {
        let (status, body) = allocate(app, by(n, OWNER), host, slot.clone()).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }
    let (status, body) = allocate(app, by(4, OWNER), b, slot).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a third instance of two: {body}"
    );
}

/// Candidate queries that present nothing usable, or misspell `preemptible`, are refused.
async fn refuse_bad_queries(app: &TestApp, future_res: &str) {
    let unknown = uuid::Uuid::from_u128(0xdead).to_string();
    let (status, body) = candidates(app, &format!("resources=VCPU:1&reservation={unknown}")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(detail(&body).contains("unknown"), "{body}");
    let (status, body) = candidates(app, "resources=VCPU:1&reservation=not-a-uuid").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) =
        candidates(app, &format!("resources=VCPU:1&reservation={future_res}")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(detail(&body).contains("not_started"), "{body}");
    let (status, body) = app
        .get(
            &format!("{CANDIDATES}?resources=VCPU:1&preemptible=true"),
            Some("1.37"),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "preemptible needs 1.38: {body}"
    );
    let (status, body) = candidates(app, "resources=VCPU:1&preemptible=maybe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn bad_presentations_are_refused() {
    let app = TestApp::spawn().await;
    enroll_hosts(&app, "bad", 3).await;
    let t = tomorrow();
    let reservations = json!([host_reservation(1), instance_reservation(4, 2)]);
    let lease = running_lease(&app, "now", &minutes(t), reservations).await;
    let (_, host_hosts) = reservation(&lease, "physical:host");
    let (inst_res, inst_hosts) = reservation(&lease, "virtual:instance");
    let later = create(
        &app,
        lease_body(
            "later",
            &minutes(t + HOUR),
            &minutes(t + 2 * HOUR),
            json!([host_reservation(1)]),
        ),
    )
    .await;
    let (future_res, _) = reservation(&later, "physical:host");
    let host_host = host_hosts.iter().next().expect("a held host");
    refuse_bad_allocations(&app, &inst_res, &inst_hosts, host_host).await;
    refuse_bad_queries(&app, &future_res).await;
}

// ---------------------------------------------------------------------------------------------
// 5. Gaps found while writing these tests (each test fails until the bug it names is fixed)
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_holders_query_is_offered_no_more_than_its_reservation_holds() {
    let app = TestApp::spawn().await;
    enroll_hosts(&app, "slot", 2).await;
    let lease = running_lease(
        &app,
        "slot",
        &minutes(tomorrow()),
        json!([instance_reservation(4, 1)]),
    )
    .await;
    let (inst_res, inst_hosts) = reservation(&lease, "virtual:instance");
    let inst_host = inst_hosts.iter().next().expect("an instance host").clone();
    let class = class_of(&inst_res);
    // The write is refused: a slot is 4 VCPU.
    let (status, body) = allocate(
        &app,
        by(1, OWNER),
        &inst_host,
        json!({class.clone(): 1, "VCPU": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // A query that presents an instance reservation is confined to what it holds per host:
    // 5 VCPU do not fit a 4-VCPU slot, so nothing is offered (and the write would be refused).
    for query in [
        format!("resources=VCPU:5&reservation={inst_res}"),
        format!("resources={class}:1,VCPU:5"),
    ] {
        assert!(
            offered(&app, &query).await.is_empty(),
            "{query}: nothing fits in a 4-VCPU slot"
        );
    }
}

#[tokio::test]
async fn naming_a_reservation_among_other_aggregates_does_not_lift_the_fence_elsewhere() {
    let app = TestApp::spawn().await;
    let hosts = enroll_hosts(&app, "anyof", 3).await;
    let reservations = json!([host_reservation(1), instance_reservation(4, 1)]);
    let lease = running_lease(&app, "anyof", &minutes(tomorrow()), reservations).await;
    let (host_res, held) = reservation(&lease, "physical:host");
    let (_, inst_hosts) = reservation(&lease, "virtual:instance");
    let inst_host = inst_hosts.iter().next().expect("an instance host").clone();
    let free: BTreeSet<String> = hosts
        .iter()
        .filter(|h| !held.contains(*h) && **h != inst_host)
        .cloned()
        .collect();
    // Not presented (no class, not a held host): the write is fenced.
    let (status, body) = allocate(&app, by(1, OWNER), &inst_host, json!({"VCPU": 5})).await;
    assert_fenced(status, &body, "5 VCPU beside a 4-VCPU slot");
    // Naming a reservation among other aggregates presents it only on its own hosts: the rest
    // of the freepool stays fenced for this query.
    let query = format!("resources=VCPU:5&member_of=in:{host_res},{FREEPOOL_AGGREGATE}");
    let expected: BTreeSet<String> = held.union(&free).cloned().collect();
    assert_eq!(offered(&app, &query).await, expected, "{query}");
}

#[tokio::test]
async fn a_held_hosts_nested_providers_are_fenced_with_it() {
    let app = TestApp::spawn().await;
    let hosts = enroll_hosts(&app, "tree", 2).await;
    let mut children = Vec::new();
    for (idx, host) in hosts.iter().enumerate() {
        let child = app
            .create_provider(&format!("tree-{idx}-numa0"), Some(host))
            .await;
        let body = json!({"resource_provider_generation": 0,
                          "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}});
        let path = format!("/placement/resource_providers/{child}/inventories");
        let (status, body) = app.call(Method::PUT, &path, Some(MV), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        children.push(child);
    }
    let lease = running_lease(
        &app,
        "tree",
        &minutes(tomorrow()),
        json!([host_reservation(1)]),
    )
    .await;
    let (_, held) = reservation(&lease, "physical:host");
    let held_idx = hosts
        .iter()
        .position(|h| held.contains(h))
        .expect("a held host");
    let child = &children[held_idx];
    // The fence covers the whole tree of a held host: its nested providers are held with it.
    let query = "resources=MEMORY_MB:8192";
    let child_offered = offered(&app, query).await.contains(child);
    let (status, body) = allocate(&app, by(1, STRANGER), child, json!({"MEMORY_MB": 1024})).await;
    assert!(
        !child_offered && status == StatusCode::CONFLICT,
        "inside the held host {held:?}: {query} offers its child: {child_offered}; \
         an unreserved write on the child: {status} {body}"
    );
}

#[tokio::test]
async fn a_host_whose_nested_providers_are_in_use_is_not_free() {
    let app = TestApp::spawn().await;
    let hosts = enroll_hosts(&app, "busy", 1).await;
    let child = app.create_provider("busy-0-numa0", Some(&hosts[0])).await;
    let body = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}});
    let path = format!("/placement/resource_providers/{child}/inventories");
    let (status, body) = app.call(Method::PUT, &path, Some(MV), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = allocate(&app, by(1, STRANGER), &child, json!({"VCPU": 2})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let t = tomorrow();
    let request = lease_body(
        "busy",
        &minutes(t),
        &minutes(t + HOUR),
        json!([host_reservation(1)]),
    );
    let (status, body) = app.call(Method::POST, LEASES, None, Some(request)).await;
    // A host is free as a whole only when nothing in its tree is in use.
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn without_the_fence_the_reshaper_is_strict_placement_too() {
    let app = TestApp::spawn_with(Options {
        fence_unreserved: Some(false),
        ..Options::default()
    })
    .await;
    enroll_hosts(&app, "reshape", 2).await;
    let lease = running_lease(
        &app,
        "reshape",
        &minutes(tomorrow()),
        json!([host_reservation(1)]),
    )
    .await;
    let (_, held) = reservation(&lease, "physical:host");
    let host = held.iter().next().expect("a held host");
    let (status, body) = allocate(&app, by(1, STRANGER), host, json!({"VCPU": 1})).await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "PUT is strict Placement: {body}"
    );
    // A reshape names at least one provider's inventories: the host's, unchanged.
    let (_, inventories) = app
        .call(
            Method::GET,
            &format!("/placement/resource_providers/{host}/inventories"),
            Some("1.38"),
            None,
        )
        .await;
    let body = json!({"inventories": {host: inventories}, "allocations": {consumer(2): {
        "allocations": {host: {"resources": {"VCPU": 1}}}, "project_id": STRANGER, "user_id": "u1",
        "consumer_generation": null, "consumer_type": "INSTANCE"}}});
    let (status, body) = app
        .call(
            Method::POST,
            "/placement/reshaper",
            Some("1.38"),
            Some(body),
        )
        .await;
    // With the fence off, the reshaper is strict Placement too.
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

#[tokio::test]
async fn a_preemptible_consumer_cannot_become_an_instance_inside_the_fence() {
    let app = TestApp::spawn().await;
    enroll_hosts(&app, "launder", 2).await;
    let lease = running_lease(
        &app,
        "launder",
        &minutes(tomorrow()),
        json!([host_reservation(1)]),
    )
    .await;
    let (_, held) = reservation(&lease, "physical:host");
    let host = held.iter().next().expect("a held host");
    let (status, body) = allocate(
        &app,
        by(1, STRANGER).typed("PREEMPTIBLE"),
        host,
        json!({"VCPU": 2}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "a preemptible consumer borrows: {body}"
    );
    let body = json!({"allocations": {host: {"resources": {"VCPU": 2}}}, "project_id": STRANGER,
                      "user_id": "u1", "consumer_generation": 1, "consumer_type": "INSTANCE"});
    let path = format!("/placement/allocations/{}", consumer(1));
    let (status, body) = app.call(Method::PUT, &path, Some(MV), Some(body)).await;
    // What a borrower holds was lent, not given: it cannot become unreserved in place.
    assert_fenced(
        status,
        &body,
        "a preemptible consumer turned into an instance on a held host",
    );
}
