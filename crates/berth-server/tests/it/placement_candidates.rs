//! Placement: `GET /allocation_candidates` over HTTP, by microversion, with bad input.

use crate::support::{TestApp, code};
use berth_api::placement::AllocationCandidates;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

async fn world(app: &TestApp) -> Vec<String> {
    let mut uuids = Vec::new();
    for (n, vcpus) in [8u64, 8, 8, 1].into_iter().enumerate() {
        let uuid = app.create_provider(&format!("cn{}", n + 1), None).await;
        let body = json!({"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": vcpus, "allocation_ratio": 1.0}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 100}}});
        let path = format!("/placement/resource_providers/{uuid}/inventories");
        assert_eq!(
            app.call(Method::PUT, &path, Some("1.39"), Some(body))
                .await
                .0,
            StatusCode::OK
        );
        uuids.push(uuid);
    }
    for (uuid, aggregate) in [(&uuids[0], A), (&uuids[1], B)] {
        let body = json!({"aggregates": [aggregate], "resource_provider_generation": 1});
        let path = format!("/placement/resource_providers/{uuid}/aggregates");
        assert_eq!(
            app.call(Method::PUT, &path, Some("1.39"), Some(body))
                .await
                .0,
            StatusCode::OK
        );
    }
    uuids
}

fn providers_of(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = body["allocation_requests"]
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
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn candidates_respect_forbidden_aggregates_and_capacity() {
    let app = TestApp::spawn().await;
    let uuids = world(&app).await;
    let (status, body) = app.get(&format!("/placement/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048&member_of=!in:{A},{B}"), Some("1.39")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        providers_of(&body),
        vec![uuids[2].clone()],
        "cn3 only: cn1/cn2 forbidden, cn4 too small"
    );
    let request = &body["allocation_requests"][0];
    assert_eq!(
        request["allocations"][&uuids[2]]["resources"],
        json!({"VCPU": 2, "MEMORY_MB": 2048})
    );
    assert_eq!(request["mappings"], json!({"": [uuids[2]]}));
    let summary = &body["provider_summaries"][&uuids[2]];
    assert_eq!(
        summary["resources"]["VCPU"],
        json!({"capacity": 8, "used": 0})
    );
    assert_eq!(
        summary["resources"]["DISK_GB"],
        json!({"capacity": 100, "used": 0}),
        "all classes from 1.27"
    );
    assert_eq!(summary["traits"], json!([]));
    assert_eq!(summary["root_provider_uuid"], uuids[2]);

    let (_, limited) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:1&limit=2",
            Some("1.39"),
        )
        .await;
    assert_eq!(
        limited["allocation_requests"]
            .as_array()
            .expect("list")
            .len(),
        2
    );
    assert_eq!(
        limited["provider_summaries"]
            .as_object()
            .expect("map")
            .len(),
        2,
        "summaries follow the kept candidates"
    );
    let (_, all) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:1",
            Some("1.39"),
        )
        .await;
    assert_eq!(
        all["allocation_requests"].as_array().expect("list").len(),
        4
    );

    // Usage counts: fill cn3 and it stops being a candidate.
    let body = json!({"allocations": {&uuids[2]: {"resources": {"VCPU": 7}}}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"});
    let path = "/placement/allocations/c0000000-0000-4000-8000-000000000001";
    assert_eq!(
        app.call(Method::PUT, path, Some("1.38"), Some(body))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (_, after) = app
        .get(
            &format!("/placement/allocation_candidates?resources=VCPU:2&member_of=!in:{A},{B}"),
            Some("1.39"),
        )
        .await;
    assert_eq!(after["allocation_requests"], json!([]));
    assert_eq!(after["provider_summaries"], json!({}));
}

#[tokio::test]
async fn response_shapes_follow_the_microversion() {
    let app = TestApp::spawn().await;
    let uuids = world(&app).await;
    let (status, old) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:8",
            Some("1.10"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{old}");
    let first = &old["allocation_requests"][0]["allocations"][0];
    assert_eq!(
        first["resource_provider"]["uuid"], uuids[0],
        "list form before 1.12"
    );
    assert_eq!(first["resources"], json!({"VCPU": 8}));
    let summary = &old["provider_summaries"][&uuids[0]];
    assert_eq!(
        summary["resources"].as_object().expect("map").len(),
        1,
        "only requested classes before 1.27"
    );
    assert!(summary.get("traits").is_none() && summary.get("root_provider_uuid").is_none());
    let (_, dict) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:8",
            Some("1.12"),
        )
        .await;
    assert!(dict["allocation_requests"][0]["allocations"][&uuids[0]].is_object());
    assert!(
        dict["allocation_requests"][0].get("mappings").is_none(),
        "mappings arrive in 1.34"
    );
    let (_, traits) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:8",
            Some("1.17"),
        )
        .await;
    assert_eq!(traits["provider_summaries"][&uuids[0]]["traits"], json!([]));
    assert_eq!(
        app.get(
            "/placement/allocation_candidates?resources=VCPU:1",
            Some("1.9")
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
}

/// The body is written by hand for speed; at every microversion that changes its shape it is
/// the wire type the OpenAPI document describes, field for field.
#[tokio::test]
async fn answers_are_the_documented_wire_type() {
    let app = TestApp::spawn().await;
    world(&app).await;
    for mv in ["1.10", "1.12", "1.17", "1.27", "1.29", "1.34", "1.39"] {
        let (status, body) = app
            .get(
                "/placement/allocation_candidates?resources=VCPU:1",
                Some(mv),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{mv}: {body}");
        let typed: AllocationCandidates =
            serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{mv}: {e} in {body}"));
        assert!(!typed.allocation_requests.is_empty(), "{mv}: {body}");
        assert_eq!(
            serde_json::to_value(&typed).expect("serializes"),
            body,
            "{mv}"
        );
    }
}

#[tokio::test]
async fn granular_requests_and_policies() {
    let app = TestApp::spawn().await;
    let root = app.create_provider("cn", None).await;
    let mut pfs = Vec::new();
    for name in ["pf1", "pf2"] {
        let pf = app.create_provider(name, Some(&root)).await;
        let body = json!({"resource_provider_generation": 0, "inventories": {"SRIOV_NET_VF": {"total": 2}}});
        let path = format!("/placement/resource_providers/{pf}/inventories");
        assert_eq!(
            app.call(Method::PUT, &path, Some("1.39"), Some(body))
                .await
                .0,
            StatusCode::OK
        );
        pfs.push(pf);
    }
    let base =
        "/placement/allocation_candidates?resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1";
    let (status, body) = app.get(base, Some("1.25")).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "group_policy is required: {body}"
    );
    let (_, isolated) = app
        .get(&format!("{base}&group_policy=isolate"), Some("1.34"))
        .await;
    let requests = isolated["allocation_requests"].as_array().expect("list");
    assert_eq!(requests.len(), 2);
    for request in requests {
        let mappings = request["mappings"].as_object().expect("mappings");
        assert_ne!(
            mappings["1"], mappings["2"],
            "isolated groups use different providers"
        );
    }
    assert!(
        isolated["provider_summaries"].get(&root).is_some(),
        "summaries cover the whole tree"
    );
    let (_, shared) = app
        .get(&format!("{base}&group_policy=none"), Some("1.34"))
        .await;
    assert_eq!(
        shared["allocation_requests"]
            .as_array()
            .expect("list")
            .len(),
        4
    );
    let (status, body) = app
        .get(
            "/placement/allocation_candidates?resources_NET=SRIOV_NET_VF:1",
            Some("1.33"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "string suffixes from 1.33: {body}");
    let (status, _) = app
        .get(
            "/placement/allocation_candidates?resources_NET=SRIOV_NET_VF:1",
            Some("1.32"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = app
        .get(
            &format!(
                "/placement/allocation_candidates?resources=SRIOV_NET_VF:1&in_tree={}",
                pfs[0]
            ),
            Some("1.31"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["allocation_requests"].as_array().expect("list").len(),
        2,
        "both PFs are in the tree"
    );
    let subtree = "/placement/allocation_candidates?resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate&same_subtree=1,2";
    let (status, body) = app.get(subtree, Some("1.36")).await;
    assert_eq!(
        (status, body["allocation_requests"].clone()),
        (StatusCode::OK, json!([])),
        "siblings share no subtree"
    );
}

#[tokio::test]
async fn bad_candidate_requests_get_placement_errors() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let cases: [(&str, &str, &str); 18] = [
        ("resources=VCPU", "1.39", "placement.undefined_code"),
        ("resources=VCPU:0", "1.39", "placement.undefined_code"),
        ("resources=VCPU:-1", "1.39", "placement.undefined_code"),
        (
            "resources=CUSTOM_NOPE:1",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&required=CUSTOM_NOPE",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of=!in:x",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of=in:A,!B",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of=aaaaaaaa-0000-4000-8000-000000000001,bbbbbbbb-0000-4000-8000-000000000002",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of=!aaaaaaaa-0000-4000-8000-000000000001",
            "1.31",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of=aaaaaaaa-0000-4000-8000-000000000001&member_of=bbbbbbbb-0000-4000-8000-000000000002",
            "1.23",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&member_of1=aaaaaaaa-0000-4000-8000-000000000001",
            "1.35",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&required2=HW_CPU_X86_AVX2",
            "1.39",
            "placement.query.bad_value",
        ),
        (
            "resources1=VCPU:1&resources2=VCPU:1&group_policy=sometimes",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&limit=0",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&limit=many",
            "1.39",
            "placement.undefined_code",
        ),
        (
            "resources=VCPU:1&root_required=HW_CPU_X86_AVX2&root_required=HW_CPU_X86_SSE",
            "1.39",
            "placement.query.duplicate_key",
        ),
        (
            "resources=VCPU:1&same_subtree=9",
            "1.39",
            "placement.query.bad_value",
        ),
        (
            "required=HW_CPU_X86_AVX2",
            "1.39",
            "placement.query.missing_value",
        ),
    ];
    for (query, mv, want) in cases {
        let (status, body) = app
            .get(
                &format!("/placement/allocation_candidates?{query}"),
                Some(mv),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query} at {mv}: {body}");
        assert_eq!(code(&body), want, "{query} at {mv}: {body}");
    }
    let (status, body) = app
        .get("/placement/allocation_candidates?limit=1", Some("1.39"))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "placement.query.missing_value")
    );
    let (status, _) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:1&limit=1",
            Some("1.15"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "limit arrives in 1.16");
    let (status, _) = app
        .get(
            "/placement/allocation_candidates?resources=VCPU:1&colour=red",
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
