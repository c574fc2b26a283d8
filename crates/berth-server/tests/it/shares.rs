//! Shared leases over HTTP: the owner of a running lease shares it with a second project within
//! a cap; that project's Placement consumers (written by the service, as Nova writes them) and
//! Promise instances draw on it up to the cap and no further; a third project cannot; the
//! shares listing says what each project holds; revoking stops new consumption and both
//! projects hear of it in their feeds; bad shares are refused naming the field; only the owner
//! (or an admin) shares; and 32 clients racing for the last of a share never pass its cap (on
//! SQLite here, on two PostgreSQL replicas in `postgres`, with the helper marked `pub(crate)`).

use crate::blazar_leases::{LEASES, lease_body, minutes, now_micros};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const MV: &str = "1.39";
const HOUR: i64 = 3_600_000_000;

pub(crate) const ADMIN: Who<'static> = Who {
    project: "admin",
    user: "root",
    roles: "admin",
};
const SERVICE: Who<'static> = Who {
    project: "service",
    user: "nova",
    roles: "service",
};
pub(crate) const OWNER: Who<'static> = Who {
    project: "lab",
    user: "alice",
    roles: "member",
};
pub(crate) const OWNER_READER: Who<'static> = Who {
    project: "lab",
    user: "rita",
    roles: "reader",
};
pub(crate) const GUEST: Who<'static> = Who {
    project: "course",
    user: "bob",
    roles: "member",
};
pub(crate) const STRANGER: Who<'static> = Who {
    project: "other",
    user: "eve",
    roles: "member",
};

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

pub(crate) async fn app() -> TestApp {
    TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await
}

/// Enrolls host `name` with 8 VCPU and 16 GiB; returns its Placement provider's uuid.
pub(crate) async fn host(app: &TestApp, name: &str) -> String {
    let (status, created) = app
        .call_as(
            ADMIN,
            Method::POST,
            "/reservation/v1/os-hosts",
            Some(json!({"name": name, "availability_zone": "az1", "vcpus": 8,
                        "memory_mb": 16384, "local_gb": 100})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, providers) = app
        .call_as(
            ADMIN,
            Method::GET,
            &format!("/placement/resource_providers?name={name}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{providers}");
    text(&providers["resource_providers"][0]["uuid"])
}

/// A lease of `OWNER` starting now, for an hour, holding `reservations`; waits until ACTIVE.
pub(crate) async fn running_lease(app: &TestApp, reservations: Value) -> String {
    let end = minutes(now_micros() + HOUR);
    let body = lease_body("shared", "now", &end, reservations);
    let (status, created) = app.call_as(OWNER, Method::POST, LEASES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = text(&created["lease"]["id"]);
    let started = tokio::time::Instant::now();
    // The lifecycle engine starts it; the read is the admin's (no project filter).
    let deadline = started + Duration::from_secs(5);
    loop {
        let (_, shown) = app
            .call_as(ADMIN, Method::GET, &format!("{LEASES}/{id}"), None)
            .await;
        if shown["lease"]["status"] == "ACTIVE" {
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ACTIVE: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn share_path(lease: &str, project: &str) -> String {
    format!("{LEASES}/{lease}/shares/{project}")
}

/// `PUT` of a share of `lease` with `project` and `cap`, as `who`.
pub(crate) async fn share(
    app: &TestApp,
    who: Who<'_>,
    lease: &str,
    project: &str,
    cap: Value,
) -> (StatusCode, Value) {
    app.call_as(
        who,
        Method::PUT,
        &share_path(lease, project),
        Some(json!({ "cap": cap })),
    )
    .await
}

/// `DELETE` of the guest's share of `lease`, as `who`.
async fn revoke(app: &TestApp, who: Who<'_>, lease: &str) -> (StatusCode, Value) {
    app.call_as(who, Method::DELETE, &share_path(lease, GUEST.project), None)
        .await
}

/// A Placement consumer of `project` (number `n`) holding `vcpus` VCPU on `provider`, written
/// by the service as Nova writes it.
pub(crate) async fn allocate(
    app: &TestApp,
    n: u32,
    project: &str,
    provider: &str,
    vcpus: u64,
) -> (StatusCode, Value) {
    let body = json!({"allocations": {provider: {"resources": {"VCPU": vcpus}}},
                      "project_id": project, "user_id": "u", "consumer_generation": null,
                      "consumer_type": "INSTANCE"});
    let path = format!("/placement/allocations/a0000000-0000-4000-8000-{n:012}");
    let mut builder = app
        .request(Method::PUT, &path, Some(MV))
        .header("x-project-id", SERVICE.project)
        .header("x-user-id", SERVICE.user)
        .header("x-roles", SERVICE.roles);
    builder = builder.json(&body);
    crate::support::parse(builder.send().await.expect("send")).await
}

/// The notification feed as `who` sees it: its entries' notifications.
pub(crate) async fn feed(app: &TestApp, who: Who<'_>) -> Vec<Value> {
    let (status, feed) = app
        .call_as(who, Method::GET, "/promise/notifications", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{feed}");
    feed["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .map(|n| n["notification"].clone())
        .collect()
}

/// The notification feed as `who` sees it: the types of its entries.
pub(crate) async fn feed_types(app: &TestApp, who: Who<'_>) -> Vec<String> {
    feed(app, who).await.iter().map(Value::to_string).collect()
}

#[tokio::test]
async fn a_shared_lease_is_consumed_by_the_second_project_up_to_its_cap() {
    let app = app().await;
    let provider = host(&app, "h1").await;
    host(&app, "h2").await;
    let lease = running_lease(
        &app,
        json!([{"resource_type": "physical:host", "min": 1, "max": 1,
                "hypervisor_properties": "", "resource_properties": r#"["==", "$hypervisor_hostname", "h1"]"#}]),
    )
    .await;

    // Not shared: the guest's consumer on the reserved host is fenced out.
    let (status, body) = allocate(&app, 1, GUEST.project, &provider, 2).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    let (status, shared) = share(&app, OWNER, &lease, GUEST.project, json!({"VCPU": 4})).await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    assert_eq!(shared["share"]["project_id"], GUEST.project);
    assert_eq!(shared["share"]["cap"]["VCPU"], 4);
    assert_eq!(shared["share"]["used"], json!({}));

    // Within the cap, then refused past it with the cap in the answer.
    let (status, body) = allocate(&app, 1, GUEST.project, &provider, 3).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = allocate(&app, 2, GUEST.project, &provider, 2).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["errors"][0]["code"], "share_exceeded", "{body}");
    let (status, body) = allocate(&app, 2, GUEST.project, &provider, 1).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "up to the cap: {body}");
    // A project it is not shared with stays out; the owner is not bound by the guest's cap.
    let (status, body) = allocate(&app, 3, STRANGER.project, &provider, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = allocate(&app, 4, OWNER.project, &provider, 4).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    // What each sees: the owner (and its readers) every share, the guest its own, others 404.
    for who in [OWNER, OWNER_READER, ADMIN, GUEST] {
        let (status, listed) = app
            .call_as(who, Method::GET, &format!("{LEASES}/{lease}/shares"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{} sees: {listed}", who.user);
        assert_eq!(listed["shares"][0]["used"]["VCPU"], 4, "{listed}");
    }
    let (status, _) = app
        .call_as(
            STRANGER,
            Method::GET,
            &format!("{LEASES}/{lease}/shares"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Only the owner (or an admin) shares and revokes: the guest, a reader and a stranger cannot.
    let (status, _) = share(&app, GUEST, &lease, "third", json!({"VCPU": 1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the guest does not own it");
    let (status, _) = share(&app, OWNER_READER, &lease, "third", json!({"VCPU": 1})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a reader changes nothing");
    let (status, _) = share(&app, STRANGER, &lease, "third", json!({"VCPU": 1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = revoke(&app, GUEST, &lease).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Revoked: nothing new, what is held stays; both projects hear of it.
    let (status, _) = revoke(&app, OWNER, &lease).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = allocate(&app, 5, GUEST.project, &provider, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = app
        .call_as(
            SERVICE,
            Method::GET,
            "/placement/allocations/a0000000-0000-4000-8000-000000000001",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["allocations"][&provider]["resources"]["VCPU"], 3,
        "{body}"
    );
    let (status, again) = revoke(&app, OWNER, &lease).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    assert!(
        text(&again["error_message"]).contains("is not shared with project"),
        "{again}"
    );
    for who in [OWNER, GUEST] {
        let types = feed_types(&app, who).await;
        assert!(
            types.iter().any(|t| t.contains("lease.share.revoked")),
            "{} hears of the revocation: {types:?}",
            who.user
        );
    }
    let stranger = feed_types(&app, STRANGER).await;
    assert!(
        stranger.iter().all(|t| !t.contains("lease.share")),
        "{stranger:?}"
    );
}

#[tokio::test]
async fn a_shared_promise_reservation_takes_the_second_projects_instances_up_to_its_cap() {
    let app = app().await;
    host(&app, "h1").await;
    let (status, body) = app
        .call_as(
            ADMIN,
            Method::POST,
            "/promise/flavors",
            Some(json!({"id": "small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 0})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let lease = running_lease(
        &app,
        json!([{"resource_type": "virtual:instance", "vcpus": 2, "memory_mb": 2048,
                "disk_gb": 0, "amount": 3}]),
    )
    .await;
    let create = |who: Who<'static>, name: &'static str| {
        let body = json!({"name": name, "flavor": "m1.small", "image": "cirros",
                          "reservation-id": lease});
        let app = &app;
        async move {
            app.call_as(who, Method::POST, "/promise/create-instance", Some(body))
                .await
        }
    };
    let (status, body) = create(GUEST, "early").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "not shared yet: {body}");
    let (status, body) = share(&app, OWNER, &lease, GUEST.project, json!({"VCPU": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = create(GUEST, "one").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["instance"]["project-id"], GUEST.project, "{body}");
    let (status, body) = create(GUEST, "two").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("its share's cap"), "{body}");
    // The owner's own instance still fits: two slots of three are left.
    let (status, body) = create(OWNER, "mine").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn bad_shares_are_refused_naming_the_field() {
    let app = app().await;
    host(&app, "h1").await;
    let lease = running_lease(
        &app,
        json!([{"resource_type": "physical:host", "min": 1, "max": 1}]),
    )
    .await;
    let cases = [
        (OWNER.project, json!({"cap": {"VCPU": 1}}), "project_id"),
        (GUEST.project, json!({"cap": {}}), "cap"),
        (GUEST.project, json!({"cap": {"VCPU": -1}}), "cap.VCPU"),
        (GUEST.project, json!({"cap": {"VCPU": 0}}), "cap.VCPU"),
        (GUEST.project, json!({"cap": {"CUSTOM_NOPE": 1}}), "cap"),
        (GUEST.project, json!({"cap": {"VCPU": "many"}}), "cap"),
        (GUEST.project, json!({}), "cap"),
        (
            GUEST.project,
            json!({"cap": {"VCPU": 1}, "extra": 1}),
            "cap",
        ),
    ];
    for (project, body, field) in cases {
        let (status, answer) = app
            .call_as(
                OWNER,
                Method::PUT,
                &share_path(&lease, project),
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let said = answer["error_message"].as_str().unwrap_or_default();
        assert!(said.starts_with(field), "{body}: {said}");
    }
    let (status, _) = share(
        &app,
        OWNER,
        "not-a-lease",
        GUEST.project,
        json!({"VCPU": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An ended lease is shared no more.
    let (status, _) = app
        .call_as(OWNER, Method::DELETE, &format!("{LEASES}/{lease}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = share(&app, OWNER, &lease, GUEST.project, json!({"VCPU": 1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A running one-host lease on `apps[0]`'s host `h1`, shared with the guest within 5 VCPU; then
/// 32 consumers of the guest, one VCPU each, sent at once, spread over `apps`: exactly five are
/// admitted, the others refused, and every replica's listing says the guest holds 5.
pub(crate) async fn race_for_the_last_of_a_share(apps: &[&TestApp]) {
    let first = apps[0];
    let provider = host(first, "h1").await;
    let lease = running_lease(
        first,
        json!([{"resource_type": "physical:host", "min": 1, "max": 1}]),
    )
    .await;
    let (status, body) = share(first, OWNER, &lease, GUEST.project, json!({"VCPU": 5})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let racers: Vec<_> = (0..32u32)
        .map(|n| {
            let app = apps[n as usize % apps.len()];
            let (client, base, provider) = (app.client.clone(), app.base.clone(), provider.clone());
            tokio::spawn(async move {
                let body = json!({"allocations": {&provider: {"resources": {"VCPU": 1}}},
                                  "project_id": GUEST.project, "user_id": "u",
                                  "consumer_generation": null, "consumer_type": "INSTANCE"});
                let request = client
                    .put(format!(
                        "{base}/placement/allocations/b0000000-0000-4000-8000-{n:012}"
                    ))
                    .header("OpenStack-API-Version", format!("placement {MV}"))
                    .header("x-project-id", SERVICE.project)
                    .header("x-user-id", SERVICE.user)
                    .header("x-roles", SERVICE.roles)
                    .json(&body);
                crate::support::parse(request.send().await.expect("send")).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.expect("a racer"));
    }
    let admitted = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::NO_CONTENT)
        .count();
    assert_eq!(admitted, 5, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(status, _)| matches!(*status, StatusCode::NO_CONTENT | StatusCode::CONFLICT)),
        "{answers:?}"
    );
    for app in apps {
        let (_, listed) = app
            .call_as(
                OWNER,
                Method::GET,
                &format!("{LEASES}/{lease}/shares"),
                None,
            )
            .await;
        assert_eq!(listed["shares"][0]["used"]["VCPU"], 5, "{listed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_racing_for_the_last_of_a_share_never_exceed_its_cap() {
    let app = app().await;
    race_for_the_last_of_a_share(&[&app]).await;
}
