//! Placement as Placement's own tests see it: served at the root of `--placement-listen`, with
//! `--auth noauth2`, WebOb's HTTP details (content types, `Accept`, `Allow`, HTML errors), JSON
//! schema refusals in Python `jsonschema`'s words, CORS and the 1.2 to 1.6 rename.

use berth_server::auth::AuthMode;
use berth_server::config::{Config, ServeArgs};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

struct Rig {
    running: Option<berth_server::Running>,
    root: String,
    client: Client,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let args = ServeArgs {
            listen: Some("127.0.0.1:0".into()),
            placement_listen: Some("127.0.0.1:0".into()),
            auth: Some(AuthMode::Noauth2),
            cors_allowed_origins: vec!["http://valid.example.com".into()],
            database: Some(format!(
                "sqlite://{}",
                dir.path().join("berth.db").display()
            )),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&args).expect("config");
        let running = berth_server::start(&config).await.expect("start");
        let root = format!(
            "http://{}",
            running.placement_addr().expect("Placement's own listener")
        );
        Rig {
            running: Some(running),
            root,
            client: Client::new(),
            _dir: dir,
        }
    }

    fn request(&self, method: Method, path: &str, token: Option<&str>) -> reqwest::RequestBuilder {
        self.request_at(method, path, token, "latest")
    }

    fn request_at(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        version: &str,
    ) -> reqwest::RequestBuilder {
        let builder = self
            .client
            .request(method, format!("{}{path}", self.root))
            .header("OpenStack-API-Version", format!("placement {version}"));
        match token {
            Some(token) => builder.header("X-Auth-Token", token),
            None => builder,
        }
    }

    async fn send(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let response = builder.send().await.expect("request");
        let status = response.status();
        let headers = response.headers().clone();
        (status, headers, response.text().await.expect("body"))
    }

    async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("shutdown");
        }
    }
}

fn detail(body: &str) -> String {
    let value: Value = serde_json::from_str(body).expect("a JSON error");
    value["errors"][0]["detail"]
        .as_str()
        .expect("a detail")
        .to_owned()
}

#[tokio::test]
async fn placement_at_the_root_of_its_own_port_with_noauth2() {
    let rig = Rig::start().await;
    // The version document needs no token; everything else does.
    let (status, _, body) = rig.send(rig.request(Method::GET, "/", None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"max_version\":\"1.39\""), "{body}");
    let (status, _, _) = rig
        .send(rig.request(Method::GET, "/resource_providers", None))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Any other token is a user without roles.
    let (status, _, _) = rig
        .send(rig.request(Method::GET, "/resource_providers", Some("alice")))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Links and Location follow the mount: no `/placement` prefix here.
    let (status, headers, body) = rig
        .send(
            rig.request(Method::POST, "/resource_providers", Some("admin"))
                .json(&json!({"name": "cn1"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let provider: Value = serde_json::from_str(&body).expect("provider");
    let uuid = provider["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(
        provider["links"][0]["href"],
        format!("/resource_providers/{uuid}")
    );
    let location = headers["location"].to_str().expect("location");
    assert_eq!(location, format!("{}/resource_providers/{uuid}", rig.root));
    // A trait's PUT gives its Location too.
    let (status, headers, _) = rig
        .send(rig.request(Method::PUT, "/traits/CUSTOM_GOLD", Some("admin")))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        headers["location"].to_str().expect("location"),
        format!("{}/traits/CUSTOM_GOLD", rig.root)
    );
    assert!(headers.contains_key("cache-control"), "from 1.15");
    rig.stop().await;
}

#[tokio::test]
async fn bodies_and_methods_are_checked_as_webob_and_jsonschema_check_them() {
    let rig = Rig::start().await;
    let admin = Some("admin");
    // A body without a content type is 400, one of another type 415.
    let (status, _, body) = rig
        .send(
            rig.request(Method::POST, "/resource_providers", admin)
                .body("name=x"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        detail(&body).contains("content-type header required"),
        "{body}"
    );
    let (status, _, body) = rig
        .send(
            rig.request(Method::POST, "/resource_providers", admin)
                .header("content-type", "text/plain")
                .body("name=x"),
        )
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert!(
        detail(&body).contains("The media type text/plain is not supported, use application/json"),
        "{body}"
    );
    let (status, _, body) = rig
        .send(
            rig.request(Method::POST, "/resource_providers", admin)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(detail(&body).starts_with("Malformed JSON: "), "{body}");
    // Schema refusals read as Python jsonschema's.
    let (status, _, body) = rig
        .send(
            rig.request(Method::POST, "/resource_providers", admin)
                .json(&json!({"name": "x", "colour": "red"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = detail(&body);
    assert!(
        text.starts_with(
            "JSON does not validate: Additional properties are not allowed ('colour' was unexpected)"
        ),
        "{text}"
    );
    assert!(
        text.contains("Failed validating 'additionalProperties' in schema"),
        "{text}"
    );
    // 405 names the method and allows what the route serves, without HEAD.
    let (status, headers, body) = rig
        .send(rig.request(Method::DELETE, "/resource_providers", admin))
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET, POST");
    assert!(
        detail(&body).contains("The method DELETE is not allowed for this resource."),
        "{body}"
    );
    // An Accept without JSON is 406, and a caller preferring HTML gets its errors as a page.
    let (status, headers, body) = rig
        .send(
            rig.request(Method::GET, "/resource_providers", admin)
                .header("accept", "text/html"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    assert!(
        headers["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/html")
    );
    assert!(body.contains("Only application/json is provided"), "{body}");
    let (status, headers, body) = rig
        .send(
            rig.request(Method::GET, "/no-such-thing", admin)
                .header("accept", "text/html"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        headers["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/html")
    );
    assert!(body.contains("The resource could not be found"), "{body}");
    rig.stop().await;
}

#[tokio::test]
async fn cors_and_the_old_resource_class_rename() {
    let rig = Rig::start().await;
    let (status, headers, _) = rig
        .send(
            rig.request(Method::OPTIONS, "/", None)
                .header("origin", "http://valid.example.com")
                .header("access-control-request-method", "GET")
                .header("access-control-request-headers", "openstack-api-version"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["access-control-allow-origin"],
        "http://valid.example.com"
    );
    assert_eq!(
        headers["access-control-allow-headers"],
        "openstack-api-version"
    );
    let (_, headers, _) = rig
        .send(
            rig.request(Method::GET, "/", None)
                .header("origin", "http://other.example.com"),
        )
        .await;
    assert!(!headers.contains_key("access-control-allow-origin"));
    // From 1.2 to 1.6, PUT renames a custom class.
    let (status, _, _) = rig
        .send(
            rig.request(Method::POST, "/resource_classes", Some("admin"))
                .json(&json!({"name": "CUSTOM_OLD"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let rename = |name: &str, to: &str| {
        rig.request_at(
            Method::PUT,
            &format!("/resource_classes/{name}"),
            Some("admin"),
            "1.6",
        )
        .json(&json!({ "name": to }))
    };
    let (status, _, body) = rig.send(rename("CUSTOM_OLD", "CUSTOM_NEW")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("CUSTOM_NEW"), "{body}");
    let (status, _, body) = rig.send(rename("VCPU", "CUSTOM_CPU")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        detail(&body).contains("Cannot update standard resource class VCPU"),
        "{body}"
    );
    let (status, _, _) = rig.send(rename("CUSTOM_OLD", "CUSTOM_OTHER")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the old name is gone");
    rig.stop().await;
}
