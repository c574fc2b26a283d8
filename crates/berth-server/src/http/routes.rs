//! The route registry: every route is registered here with its authorization rule and a summary,
//! and the same registration builds the axum router, the table the authorization middleware
//! checks, and the OpenAPI document, so the document and the policy cover every route served by
//! construction.

use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter};
use berth_api::errors::{BlazarError, IronicError, PlacementErrors, Problem};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Writes a body type's schema into the document's components and answers a reference to it.
type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

struct Operation {
    method: Method,
    path: &'static str,
    rule: Rule,
    summary: &'static str,
    tag: &'static str,
    /// Whether the route may change something (every method but `GET`, `HEAD` and `OPTIONS`,
    /// unless marked as changing nothing): where replicas forward writes, these are forwarded.
    changes: bool,
    /// The JSON body the route accepts, if it takes one.
    request: Option<SchemaOf>,
    /// The answers it gives on success: status and body.
    responses: Vec<(u16, Body)>,
}

/// The body of a documented answer.
#[derive(Clone, Copy)]
enum Body {
    /// No body (`204 No Content`, or a header-only answer).
    Empty,
    /// A JSON wire type.
    Json(SchemaOf),
    /// A body of another media type (text, HTML, a static file).
    Other(&'static str),
}

/// Routes being registered.
#[derive(Default)]
pub struct Routes {
    paths: Vec<(&'static str, MethodRouter<AppState>)>,
    operations: Vec<Operation>,
}

impl Routes {
    /// Registers `handler` for `method` on `path`, callable by whoever `rule` admits.
    pub fn add<H, T>(
        &mut self,
        method: Method,
        path: &'static str,
        rule: Rule,
        summary: &'static str,
        handler: H,
    ) -> &mut Routes
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter =
            MethodFilter::try_from(method.clone()).expect("invariant: standard methods only");
        match self.paths.iter_mut().find(|(p, _)| *p == path) {
            Some((_, router)) => *router = std::mem::take(router).on(filter, handler),
            None => self
                .paths
                .push((path, MethodRouter::new().on(filter, handler))),
        }
        let tag = tag_of(path);
        self.operations.push(Operation {
            method: method.clone(),
            path,
            rule,
            summary,
            tag,
            changes: !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS),
            request: None,
            responses: Vec::new(),
        });
        self
    }

    /// Marks the route added last as changing nothing although its method could (a query sent
    /// by `POST`), so that it is answered where it arrives, never forwarded to the writer.
    pub fn changes_nothing(&mut self) -> &mut Routes {
        self.last().changes = false;
        self
    }

    /// Documents the JSON body that the route added last accepts.
    pub fn accepts<T: JsonSchema>(&mut self) -> &mut Routes {
        self.last().request = Some(SchemaGenerator::subschema_for::<T>);
        self
    }

    /// Documents an answer of the route added last: its status and JSON body.
    pub fn answers<T: JsonSchema>(&mut self, status: u16) -> &mut Routes {
        self.last()
            .responses
            .push((status, Body::Json(SchemaGenerator::subschema_for::<T>)));
        self
    }

    /// Documents an answer of the route added last that has no body (`204 No Content`).
    pub fn answers_empty(&mut self, status: u16) -> &mut Routes {
        self.last().responses.push((status, Body::Empty));
        self
    }

    /// Documents an answer of the route added last whose body is not a wire type: text, HTML,
    /// a static file, or this document itself.
    pub fn answers_media(&mut self, status: u16, media_type: &'static str) -> &mut Routes {
        self.last()
            .responses
            .push((status, Body::Other(media_type)));
        self
    }

    fn last(&mut self) -> &mut Operation {
        self.operations
            .last_mut()
            .expect("invariant: a body is documented after its route is added")
    }

    /// Every registered route with its declared rule.
    pub fn rules(&self) -> impl Iterator<Item = (Method, &'static str, Rule)> + '_ {
        self.operations
            .iter()
            .map(|op| (op.method.clone(), op.path, op.rule))
    }

    /// The routes that may change something (see [`Routes::changes_nothing`]).
    pub fn writes(&self) -> crate::http::writer::WriteRoutes {
        self.operations
            .iter()
            .filter(|op| op.changes)
            .map(|op| (op.method.clone(), op.path))
            .collect()
    }

    /// The axum router of every registered route.
    pub fn into_router(self) -> Router<AppState> {
        self.paths
            .into_iter()
            .fold(Router::new(), |router, (path, methods)| {
                router.route(path, methods)
            })
    }

    /// The OpenAPI 3.1 document of every registered route, with the rule in force for each
    /// (`x-berth-policy`: the role it needs, the scope it acts in, and `legacy_role`, a deprecated
    /// default also in force) and the schemas of the
    /// bodies it accepts and answers (`components/schemas`, generated from the wire types).
    pub fn openapi(&self, rules: &BTreeMap<(Method, &'static str), Rule>) -> Value {
        let mut generator = schemars::generate::SchemaSettings::draft2020_12()
            .with(|settings| settings.definitions_path = "/components/schemas/".into())
            .into_generator();
        let mut paths = Map::new();
        for op in &self.operations {
            let rule = rules
                .get(&(op.method.clone(), op.path))
                .copied()
                .unwrap_or(op.rule);
            let parameters: Vec<Value> = path_params(op.path)
                .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
                .collect();
            let mut operation = json!({
                "summary": op.summary,
                "operationId": format!("{}{}", op.method.as_str().to_lowercase(), op.path.replace(['/', '{', '}'], "_")),
                "tags": [op.tag],
                "x-berth-policy": {"role": rule.need.as_str(), "scope": rule.scope.as_str()},
                "parameters": parameters,
                "responses": responses(&op.responses, op.tag, &mut generator),
            });
            if let Some(legacy) = rule.legacy {
                operation["x-berth-policy"]["legacy_role"] = json!(legacy.as_str());
            }
            if let Some(schema_of) = op.request {
                operation["requestBody"] = json!({
                    "required": true,
                    "content": {"application/json": {"schema": schema_of(&mut generator)}},
                });
            }
            let item = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
            item[op.method.as_str().to_lowercase()] = operation;
        }
        json!({
            "openapi": "3.1.0",
            "info": {"title": "berth", "version": env!("CARGO_PKG_VERSION"),
                     "description": "Resource reservation, capacity management and placement"},
            "paths": paths,
            "components": {"schemas": generator.take_definitions(true)},
        })
    }
}

/// The `responses` object of an operation: each documented answer, or, for a route whose bodies
/// are not described yet, a pointer to the compatible API's reference.
fn responses(documented: &[(u16, Body)], tag: &str, generator: &mut SchemaGenerator) -> Value {
    if documented.is_empty() {
        return json!({"default": {"description": "See the compatible API's reference for the body"}});
    }
    let mut answers = Map::new();
    for (status, body) in documented {
        let mut answer = json!({"description": reason(*status)});
        match body {
            Body::Empty => {}
            Body::Json(schema_of) => {
                answer["content"] = json!({"application/json": {"schema": schema_of(generator)}});
            }
            Body::Other(media_type) => answer["content"] = json!({*media_type: {}}),
        }
        answers.insert(status.to_string(), answer);
    }
    let (media_type, schema) = match tag {
        "placement" => (
            "application/json",
            generator.subschema_for::<PlacementErrors>(),
        ),
        "reservation" => ("application/json", generator.subschema_for::<BlazarError>()),
        "baremetal" => ("application/json", generator.subschema_for::<IronicError>()),
        _ => (
            "application/problem+json",
            generator.subschema_for::<Problem>(),
        ),
    };
    answers.insert(
        "default".to_owned(),
        json!({"description": "An error, in the surface's format", "content": {media_type: {"schema": schema}}}),
    );
    Value::Object(answers)
}

fn reason(status: u16) -> &'static str {
    axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Answer")
}

fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

fn tag_of(path: &str) -> &'static str {
    if path.starts_with("/placement") {
        "placement"
    } else if path.starts_with("/reservation") {
        "reservation"
    } else if path.starts_with("/baremetal") {
        "baremetal"
    } else {
        "berth"
    }
}
