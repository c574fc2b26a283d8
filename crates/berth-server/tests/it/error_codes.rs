//! One error-code table, each surface in its upstream's envelope: the error paths of every
//! route family outside Placement (400, 404, 405, 409, 413 and 415) never answer with
//! Placement's `placement.undefined_code`; Blazar answers its own envelope, the Promise and
//! berth routes problem details whose code is in the table (the Promise RPCs with Promise's
//! `result` and `message` beside it). The bare-metal surface is only checked for the absence
//! of Placement's code.

use crate::blazar_leases::enroll;
use crate::support::{Options, TestApp};
use berth_api::errors::error_code;
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How a family's errors are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Envelope {
    /// Blazar's `error_code`, `error_message`, `error_name`.
    Blazar,
    /// Problem details with a code of the table.
    Problem,
    /// Problem details with Promise's `result` and `message`.
    Rpc,
    /// Whatever the surface answers, without Placement's code.
    Any,
}

/// One error path: the request, its status and its envelope.
struct Case {
    method: Method,
    path: String,
    body: Option<String>,
    content_type: &'static str,
    status: StatusCode,
    envelope: Envelope,
}

fn case(method: Method, path: &str, body: Value, status: StatusCode, envelope: Envelope) -> Case {
    Case {
        method,
        path: path.to_owned(),
        body: (!body.is_null()).then(|| body.to_string()),
        content_type: "application/json",
        status,
        envelope,
    }
}

/// A body over the server's limit, and a JSON body sent as text: 413 and 415 on `path`.
fn oversized_and_untyped(path: &str, envelope: Envelope) -> [Case; 2] {
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    [
        Case {
            body: Some(big),
            ..case(
                Method::POST,
                path,
                Value::Null,
                StatusCode::PAYLOAD_TOO_LARGE,
                envelope,
            )
        },
        Case {
            content_type: "text/plain",
            ..case(
                Method::POST,
                path,
                json!({"name": "x"}),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                envelope,
            )
        },
    ]
}

/// Checks one answer against its case.
fn check(case: &Case, status: StatusCode, content_type: &str, text: &str) {
    let what = format!("{} {}: {status} {text}", case.method, case.path);
    assert_eq!(status, case.status, "{what}");
    assert!(!text.contains("placement.undefined_code"), "{what}");
    assert!(!text.contains("\"placement."), "no Placement code: {what}");
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    match case.envelope {
        Envelope::Blazar => {
            assert_eq!(body["error_code"], status.as_u16(), "{what}");
            assert_eq!(body["error_name"], status.as_u16(), "{what}");
            assert!(body["error_message"].is_string(), "{what}");
        }
        Envelope::Problem | Envelope::Rpc => {
            assert!(
                content_type.starts_with("application/problem+json"),
                "{content_type}: {what}"
            );
            assert_eq!(body["status"], status.as_u16(), "{what}");
            let code = body["code"].as_str().unwrap_or("");
            let row = error_code(code).unwrap_or_else(|| panic!("{code} is in the table: {what}"));
            assert_eq!(row.status, status.as_u16(), "{what}");
            assert_eq!(
                body["type"],
                format!("https://berth.dev/errors/{code}"),
                "{what}"
            );
            if case.envelope == Envelope::Rpc {
                let result = match status {
                    StatusCode::CONFLICT => "conflict",
                    _ => "error",
                };
                assert_eq!(body["result"], result, "{what}");
                assert_eq!(body["message"], body["detail"], "{what}");
            }
        }
        Envelope::Any => {}
    }
}

#[tokio::test]
async fn no_surface_but_placement_answers_with_a_placement_code() {
    let app = TestApp::spawn().await;
    enroll(&app, "cn1", "az1", 16).await;
    let (status, _) = app
        .post(
            "/promise/flavors",
            json!({"id": "small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, node) = app
        .post(
            "/baremetal/v1/nodes",
            json!({"name": "node-1", "resource_class": "baremetal-gold"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    let unknown = "6a4d2b8e-1c1f-4a43-9a59-5b8e1f0c3d21";
    let far = "2030-01-01T00:00:00Z";
    use Envelope::{Any, Blazar, Problem, Rpc};
    let mut cases = vec![
        // Blazar.
        case(
            Method::POST,
            "/reservation/v1/leases",
            json!({}),
            StatusCode::BAD_REQUEST,
            Blazar,
        ),
        case(
            Method::GET,
            &format!("/reservation/v1/leases/{unknown}"),
            Value::Null,
            StatusCode::NOT_FOUND,
            Blazar,
        ),
        case(
            Method::PATCH,
            "/reservation/v1/leases",
            Value::Null,
            StatusCode::METHOD_NOT_ALLOWED,
            Blazar,
        ),
        case(
            Method::POST,
            "/reservation/v1/os-hosts",
            json!({"name": "cn1", "availability_zone": "az1", "vcpus": 16, "memory_mb": 16384,
                   "local_gb": 100}),
            StatusCode::CONFLICT,
            Blazar,
        ),
        // Promise, ETSI style.
        case(
            Method::POST,
            "/promise/reservation/compute/create",
            json!({"computePoolReservation": {"numCpuCores": "many"}}),
            StatusCode::BAD_REQUEST,
            Problem,
        ),
        case(
            Method::GET,
            &format!("/promise/subscriptions/{unknown}"),
            Value::Null,
            StatusCode::NOT_FOUND,
            Problem,
        ),
        case(
            Method::PUT,
            "/promise/flavors",
            Value::Null,
            StatusCode::METHOD_NOT_ALLOWED,
            Problem,
        ),
        case(
            Method::POST,
            "/promise/flavors",
            json!({"id": "small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 10}),
            StatusCode::CONFLICT,
            Problem,
        ),
        // Promise RPCs.
        case(
            Method::POST,
            "/promise/create-reservation",
            json!({"start": "someday", "capacity": {"cores": 1}}),
            StatusCode::BAD_REQUEST,
            Rpc,
        ),
        case(
            Method::POST,
            "/promise/cancel-reservation",
            json!({"reservation-id": unknown}),
            StatusCode::NOT_FOUND,
            Rpc,
        ),
        case(
            Method::GET,
            "/promise/create-reservation",
            Value::Null,
            StatusCode::METHOD_NOT_ALLOWED,
            Problem,
        ),
        case(
            Method::POST,
            "/promise/create-reservation",
            json!({"start": far, "end": "2030-01-02T00:00:00Z", "capacity": {"cores": 1000}}),
            StatusCode::CONFLICT,
            Rpc,
        ),
        // Bare metal.
        case(
            Method::POST,
            "/baremetal/v1/nodes",
            json!({}),
            StatusCode::BAD_REQUEST,
            Any,
        ),
        case(
            Method::GET,
            &format!("/baremetal/v1/nodes/{unknown}"),
            Value::Null,
            StatusCode::NOT_FOUND,
            Any,
        ),
        case(
            Method::PUT,
            "/baremetal/v1/nodes",
            Value::Null,
            StatusCode::METHOD_NOT_ALLOWED,
            Any,
        ),
        case(
            Method::POST,
            "/baremetal/v1/nodes",
            json!({"name": "node-1", "resource_class": "baremetal-gold"}),
            StatusCode::CONFLICT,
            Any,
        ),
        // berth's own routes.
        case(
            Method::GET,
            "/no/such/route",
            Value::Null,
            StatusCode::NOT_FOUND,
            Problem,
        ),
        case(
            Method::DELETE,
            "/healthz",
            Value::Null,
            StatusCode::METHOD_NOT_ALLOWED,
            Problem,
        ),
    ];
    cases.extend(oversized_and_untyped("/reservation/v1/leases", Blazar));
    cases.extend(oversized_and_untyped(
        "/promise/reservation/compute/create",
        Problem,
    ));
    cases.extend(oversized_and_untyped("/promise/create-reservation", Rpc));
    cases.extend(oversized_and_untyped("/baremetal/v1/nodes", Any));
    // Every RPC refuses a body that is not JSON in Promise's envelope, before its handler too.
    for rpc in [
        "/promise/update-reservation",
        "/promise/cancel-reservation",
        "/promise/query-reservation",
        "/promise/query-capacity",
        "/promise/create-instance",
        "/promise/destroy-instance",
        "/promise/increase-capacity",
        "/promise/decrease-capacity",
    ] {
        let [_, untyped] = oversized_and_untyped(rpc, Rpc);
        cases.push(untyped);
    }
    let twice = "/promise/create-reservation?twice";
    cases.push(case(
        Method::POST,
        twice,
        json!({"capacity": {"cores": 1}}),
        StatusCode::BAD_REQUEST,
        Rpc,
    ));
    for case in &cases {
        let mut request = app.request(case.method.clone(), &case.path, None);
        // An Idempotency-Key given twice is refused before the RPC's handler reads its body.
        if case.path == twice {
            request = request
                .header("idempotency-key", "a")
                .header("idempotency-key", "b");
        }
        if let Some(body) = &case.body {
            request = request
                .header("content-type", case.content_type)
                .body(body.clone());
        }
        let response = request.send().await.expect("send");
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.expect("body");
        check(case, status, &content_type, &text);
        assert!(
            case.path != twice || text.contains("Idempotency-Key"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_promise_rpc_refused_before_its_handler_answers_in_promise_terms() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let unauthenticated = case(
        Method::POST,
        "/promise/create-reservation",
        json!({"capacity": {"cores": 1}}),
        StatusCode::UNAUTHORIZED,
        Envelope::Rpc,
    );
    let response = app
        .request(Method::POST, &unauthenticated.path, None)
        .header("content-type", "application/json")
        .body(unauthenticated.body.clone().unwrap_or_default())
        .send()
        .await
        .expect("send");
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.expect("body");
    check(&unauthenticated, status, &content_type, &text);
}
