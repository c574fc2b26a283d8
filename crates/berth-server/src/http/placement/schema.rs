//! Placement's JSON schemas for request bodies and query strings, checked as Placement checks
//! them: a body that is not JSON is `Malformed JSON: ...`, one the route's schema (at the
//! request's microversion) refuses is `JSON does not validate: ...`, a query string that fails
//! its schema is `Invalid query string parameters: ...`, each followed by the message Python's
//! `jsonschema` gives (`'total' is a required property`, `0 is less than the minimum of 1`,
//! `Additional properties are not allowed ('x' was unexpected)`, ... and
//! `Failed validating 'minimum' in schema[...]`), which clients and Placement's own tests match.
//!
//! The schemas are Placement's (`placement/schemas/`), written out once per microversion that
//! changed them; each is compiled the first time a request needs it.

use crate::http::error::ApiError;
use crate::http::surface::Microversion;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

/// The microversions a schema can differ by (Placement's 1.0 to 1.39).
const MINORS: usize = 40;

/// One body's or query string's schemas, by the microversion's minor number.
pub(super) struct Schemas {
    build: fn(u16) -> Value,
    compiled: [OnceLock<Compiled>; MINORS],
}

struct Compiled {
    schema: Value,
    validator: jsonschema::Validator,
}

impl Schemas {
    /// Schemas built by `build` for a minor version.
    pub(super) const fn new(build: fn(u16) -> Value) -> Schemas {
        Schemas {
            build,
            compiled: [const { OnceLock::new() }; MINORS],
        }
    }

    fn at(&self, minor: u16) -> &Compiled {
        let index = usize::from(minor).min(MINORS - 1);
        self.compiled[index].get_or_init(|| {
            let schema = (self.build)(minor);
            // Placement's `uuid` format is oslo's `is_uuid_like`: dashes are optional.
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .with_format("uuid", |text| uuid::Uuid::parse_str(text).is_ok())
                .build(&schema)
                .expect("invariant: Placement's schemas compile");
            Compiled { schema, validator }
        })
    }

    /// Checks `instance` at `minor`: `None` when it is valid, otherwise Python `jsonschema`'s
    /// account of the most relevant error (the one nearest the top of the document).
    pub(super) fn check(&self, minor: u16, instance: &Value) -> Option<String> {
        let compiled = self.at(minor);
        if compiled.validator.is_valid(instance) {
            return None;
        }
        let error = compiled
            .validator
            .iter_errors(instance)
            .min_by_key(|error| error.instance_path().as_str().matches('/').count())?;
        Some(describe(&compiled.schema, &error))
    }

    /// A body's check: 400 `JSON does not validate: ...` when it fails.
    pub(super) fn check_body(&self, minor: u16, body: &Value) -> Result<(), ApiError> {
        match self.check(minor, body) {
            None => Ok(()),
            Some(message) => Err(ApiError::bad_request(format!(
                "JSON does not validate: {message}"
            ))),
        }
    }

    /// The body of a request at `mv`, checked against this schema and decoded.
    pub(super) fn decode<T: DeserializeOwned>(
        &self,
        mv: Microversion,
        body: Value,
    ) -> Result<T, ApiError> {
        self.check_body(mv.minor(), &body)?;
        serde_json::from_value(body)
            .map_err(|error| ApiError::bad_request(format!("JSON does not validate: {error}")))
    }

    /// A query string's check: 400 `Invalid query string parameters: ...` when it fails. The
    /// parameters named in `extensions` are berth's own, which Placement's schema does not know.
    /// As Placement reads a query string into a dict, a repeated parameter's last value counts.
    pub(super) fn check_query(
        &self,
        minor: u16,
        pairs: &[(String, String)],
        extensions: &[&str],
    ) -> Result<(), ApiError> {
        let object: Map<String, Value> = pairs
            .iter()
            .filter(|(key, _)| !extensions.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect();
        match self.check(minor, &Value::Object(object)) {
            None => Ok(()),
            Some(message) => Err(ApiError::bad_request(format!(
                "Invalid query string parameters: {message}"
            ))),
        }
    }
}

/// The message Python's `jsonschema` gives for `error`, with the schema and instance paths.
fn describe(schema: &Value, error: &jsonschema::ValidationError<'_>) -> String {
    let schema_path = error.schema_path().as_str();
    let (parent_path, keyword) = schema_path.rsplit_once('/').unwrap_or(("", schema_path));
    let parent = schema.pointer(parent_path).unwrap_or(&Value::Null);
    let value = &parent[keyword];
    let instance = error.instance().as_ref();
    let shown = repr(instance);
    let message = match error.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            format!("{} is a required property", repr(property))
        }
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            let mut extras: Vec<&String> = unexpected.iter().collect();
            extras.sort();
            let joined = extras
                .iter()
                .map(|extra| repr(&Value::String((*extra).clone())))
                .collect::<Vec<_>>()
                .join(", ");
            match parent.get("patternProperties").and_then(Value::as_object) {
                Some(patterns) => {
                    let verb = if extras.len() == 1 { "does" } else { "do" };
                    let mut names: Vec<&String> = patterns.keys().collect();
                    names.sort();
                    let patterns = names
                        .iter()
                        .map(|p| repr(&Value::String((*p).clone())))
                        .collect::<Vec<_>>()
                        .join(", ");
                    format!("{joined} {verb} not match any of the regexes: {patterns}")
                }
                None => {
                    let verb = if extras.len() == 1 { "was" } else { "were" };
                    format!("Additional properties are not allowed ({joined} {verb} unexpected)")
                }
            }
        }
        _ => keyword_message(keyword, value, &shown),
    };
    format!(
        "{message}\n\nFailed validating {} in schema{}:\n    {}\n\nOn instance{}:\n    {shown}",
        repr(&Value::String(keyword.to_owned())),
        python_path(parent_path),
        repr(parent),
        python_path(error.instance_path().as_str()),
    )
}

fn keyword_message(keyword: &str, value: &Value, shown: &str) -> String {
    let one = value.as_u64() == Some(1);
    match keyword {
        "minimum" => format!("{shown} is less than the minimum of {}", repr(value)),
        "maximum" => format!("{shown} is greater than the maximum of {}", repr(value)),
        "type" => {
            let kinds = match value {
                Value::Array(kinds) => kinds.iter().map(repr).collect::<Vec<_>>().join(", "),
                other => repr(other),
            };
            format!("{shown} is not of type {kinds}")
        }
        "minLength" | "minItems" | "minProperties" if one => {
            format!("{shown} should be non-empty")
        }
        "minLength" | "minItems" => format!("{shown} is too short"),
        "minProperties" => format!("{shown} does not have enough properties"),
        "maxLength" | "maxItems" => format!("{shown} is too long"),
        "maxProperties" => format!("{shown} has too many properties"),
        "pattern" => format!("{shown} does not match {}", repr(value)),
        "format" => format!("{shown} is not a {}", repr(value)),
        "enum" => format!("{shown} is not one of {}", repr(value)),
        "uniqueItems" => format!("{shown} has non-unique elements"),
        "anyOf" | "oneOf" => format!("{shown} is not valid under any of the given schemas"),
        _ => format!("{shown} is not valid under {keyword}"),
    }
}

/// A JSON pointer as Python's `jsonschema` prints a path: `['properties']['total']`.
fn python_path(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            match segment.parse::<u64>() {
                Ok(index) => format!("[{index}]"),
                Err(_) => format!("[{}]", repr(&Value::String(segment))),
            }
        })
        .collect()
}

/// A JSON value as Python's `repr` prints the object `json.loads` makes of it.
pub(super) fn repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < 1e16 => {
                format!("{float:.1}")
            }
            _ => number.to_string(),
        },
        Value::String(text) => {
            let quote = if text.contains('\'') && !text.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::with_capacity(text.len() + 2);
            out.push(quote);
            for c in text.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(members) => format!(
            "{{{}}}",
            members
                .iter()
                .map(|(k, v)| format!("{}: {}", repr(&Value::String(k.clone())), repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

// --- the schemas -------------------------------------------------------------------------------

const UUID_PATTERN: &str = "^[0-9a-fA-F-]{36}$";
const RC_PATTERN: &str = "^[A-Z0-9_]+$";
const CUSTOM_PATTERN: &str = "^CUSTOM_[A-Z0-9_]+$";
/// `INT_MAX` of Placement's database columns.
const MAX_INT: i64 = 2_147_483_647;
/// The largest allocation ratio (a single-precision float column).
const MAX_FLOAT: f64 = 3.402_823_466e38;

fn uuid_string() -> Value {
    json!({"type": "string", "format": "uuid"})
}

fn project_or_user() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 255})
}

/// `POST /resource_providers`.
pub(super) static CREATE_PROVIDER: Schemas = Schemas::new(|minor| provider(minor, true));
/// `PUT /resource_providers/{uuid}`.
pub(super) static UPDATE_PROVIDER: Schemas = Schemas::new(|minor| provider(minor, false));

fn provider(minor: u16, with_uuid: bool) -> Value {
    let mut properties = json!({"name": {"type": "string", "maxLength": 200}});
    if with_uuid {
        properties["uuid"] = uuid_string();
    }
    if minor >= 14 {
        properties["parent_provider_uuid"] =
            json!({"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]});
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["name"],
        "additionalProperties": false,
    })
}

fn inventory_fields() -> Value {
    json!({
        "resource_provider_generation": {"type": "integer"},
        "total": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
        "min_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "max_unit": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "step_size": {"type": "integer", "maximum": MAX_INT, "minimum": 1},
        "allocation_ratio": {"type": "number", "maximum": MAX_FLOAT},
    })
}

/// `PUT /resource_providers/{uuid}/inventories/{class}`.
pub(super) static UPDATE_INVENTORY: Schemas = Schemas::new(|_| {
    json!({
        "type": "object",
        "properties": inventory_fields(),
        "required": ["total", "resource_provider_generation"],
        "additionalProperties": false,
    })
});

/// `POST /resource_providers/{uuid}/inventories`.
pub(super) static CREATE_INVENTORY: Schemas = Schemas::new(|_| {
    let mut properties = inventory_fields();
    properties["resource_class"] = json!({"type": "string", "pattern": RC_PATTERN});
    json!({
        "type": "object",
        "properties": properties,
        "required": ["total", "resource_class"],
        "additionalProperties": false,
    })
});

fn inventories() -> Value {
    json!({
        "type": "object",
        "properties": {
            "resource_provider_generation": {"type": "integer"},
            "inventories": {
                "type": "object",
                "patternProperties": {
                    RC_PATTERN: {
                        "type": "object",
                        "properties": inventory_fields(),
                        "required": ["total"],
                        "additionalProperties": false,
                    }
                }
            }
        },
        "required": ["resource_provider_generation", "inventories"],
        "additionalProperties": false,
    })
}

/// `PUT /resource_providers/{uuid}/inventories`.
pub(super) static REPLACE_INVENTORIES: Schemas = Schemas::new(|_| inventories());

/// `PUT /resource_providers/{uuid}/aggregates` (a bare list before 1.19).
pub(super) static AGGREGATES: Schemas = Schemas::new(|minor| {
    let list = json!({"type": "array", "items": uuid_string(), "uniqueItems": true});
    if minor < 19 {
        return list;
    }
    json!({
        "type": "object",
        "properties": {
            "aggregates": list,
            "resource_provider_generation": {"type": "integer"},
        },
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": false,
    })
});

/// `POST /resource_classes` and `PUT /resource_classes/{name}` (1.2 to 1.6, a rename).
pub(super) static RESOURCE_CLASS: Schemas = Schemas::new(|_| {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": 255},
        },
        "required": ["name"],
        "additionalProperties": false,
    })
});

/// `PUT /resource_providers/{uuid}/traits`.
pub(super) static PROVIDER_TRAITS: Schemas = Schemas::new(|_| {
    json!({
        "type": "object",
        "properties": {
            "traits": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 255},
            },
            "resource_provider_generation": {"type": "integer"},
        },
        "required": ["traits", "resource_provider_generation"],
        "additionalProperties": false,
    })
});

fn amounts() -> Value {
    json!({
        "type": "object",
        "minProperties": 1,
        "patternProperties": {RC_PATTERN: {"type": "integer", "minimum": 1}},
        "additionalProperties": false,
    })
}

/// One consumer's allocations as a dict (1.12 on); `empty_ok` from 1.28 (and in `POST`).
fn consumer_allocations(minor: u16, empty_ok: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": if empty_ok { 0 } else { 1 },
                "patternProperties": {
                    UUID_PATTERN: {
                        "type": "object",
                        "properties": {
                            "generation": {"type": "integer"},
                            "resources": amounts(),
                        },
                        "required": ["resources"],
                        "additionalProperties": false,
                    }
                },
                "additionalProperties": false,
            },
            "project_id": project_or_user(),
            "user_id": project_or_user(),
        },
        "additionalProperties": false,
        "required": ["allocations", "project_id", "user_id"],
    });
    let required = |schema: &mut Value, name: &str| {
        schema["required"]
            .as_array_mut()
            .expect("invariant: a list")
            .push(json!(name));
    };
    if minor >= 28 {
        schema["properties"]["consumer_generation"] = json!({"type": ["integer", "null"]});
        required(&mut schema, "consumer_generation");
    }
    if minor >= 34 {
        schema["properties"]["mappings"] = json!({
            "type": "object",
            "minProperties": 1,
            "patternProperties": {
                "[a-zA-Z0-9_-]{1,64}": {"type": "array", "minItems": 1, "items": uuid_string()}
            }
        });
    }
    if minor >= 38 {
        schema["properties"]["consumer_type"] = json!({
            "type": "string", "pattern": RC_PATTERN, "minLength": 1, "maxLength": 255
        });
        required(&mut schema, "consumer_type");
    }
    schema
}

/// `PUT /allocations/{consumer}`.
pub(super) static PUT_ALLOCATIONS: Schemas = Schemas::new(|minor| {
    if minor >= 12 {
        return consumer_allocations(minor, minor >= 28);
    }
    let mut schema = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "resource_provider": {
                            "type": "object",
                            "properties": {"uuid": uuid_string()},
                            "additionalProperties": false,
                            "required": ["uuid"],
                        },
                        "resources": amounts(),
                    },
                    "required": ["resource_provider", "resources"],
                    "additionalProperties": false,
                }
            }
        },
        "required": ["allocations"],
        "additionalProperties": false,
    });
    if minor >= 8 {
        schema["properties"]["project_id"] = project_or_user();
        schema["properties"]["user_id"] = project_or_user();
        schema["required"] = json!(["allocations", "project_id", "user_id"]);
    }
    schema
});

fn consumers(minor: u16, min_properties: u64) -> Value {
    json!({
        "type": "object",
        "minProperties": min_properties,
        "additionalProperties": false,
        "patternProperties": {UUID_PATTERN: consumer_allocations(minor, true)},
    })
}

/// `POST /allocations` (1.13).
pub(super) static POST_ALLOCATIONS: Schemas = Schemas::new(|minor| consumers(minor, 1));

/// `POST /reshaper` (1.30).
pub(super) static RESHAPER: Schemas = Schemas::new(|minor| {
    json!({
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {UUID_PATTERN: inventories()},
                "minProperties": 1,
                "additionalProperties": false,
            },
            "allocations": consumers(minor, 0),
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": false,
    })
});

/// `GET /usages` (1.9).
pub(super) static USAGES_QUERY: Schemas = Schemas::new(|minor| {
    let mut schema = json!({
        "type": "object",
        "properties": {"project_id": project_or_user(), "user_id": project_or_user()},
        "required": ["project_id"],
        "additionalProperties": false,
    });
    if minor >= 38 {
        schema["properties"]["consumer_type"] = json!({
            "type": "string",
            "pattern": "^[A-Z0-9_]+$|^all|^unknown$",
            "minLength": 1,
            "maxLength": 255,
        });
    }
    schema
});

/// `GET /allocation_candidates` (1.10).
pub(super) static CANDIDATES_QUERY: Schemas = Schemas::new(|minor| {
    let mut properties = Map::new();
    if minor >= 16 {
        properties.insert(
            "limit".into(),
            json!({"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1}),
        );
    }
    if minor < 25 {
        properties.insert("resources".into(), json!({"type": "string"}));
        if minor >= 17 {
            properties.insert("required".into(), json!({"type": ["string"]}));
        }
        if minor >= 21 {
            properties.insert("member_of".into(), json!({"type": ["string"]}));
        }
        return json!({
            "type": "object",
            "properties": properties,
            "required": ["resources"],
            "additionalProperties": false,
        });
    }
    properties.insert(
        "group_policy".into(),
        json!({"type": "string", "enum": ["none", "isolate"]}),
    );
    if minor >= 35 {
        properties.insert("root_required".into(), json!({"type": ["string"]}));
    }
    if minor >= 36 {
        properties.insert("same_subtree".into(), json!({"type": ["string"]}));
    }
    let suffix = if minor >= 33 {
        "[a-zA-Z0-9_-]{1,64}"
    } else {
        "[1-9][0-9]*"
    };
    let mut groups = vec!["resources", "required", "member_of"];
    if minor >= 31 {
        groups.push("in_tree");
    }
    let patterns: Map<String, Value> = groups
        .into_iter()
        .map(|group| (format!("^{group}({suffix})?$"), json!({"type": "string"})))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "patternProperties": patterns,
        "additionalProperties": false,
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_python_jsonschema_writes_them() {
        let missing = CREATE_INVENTORY
            .check(39, &json!({"resource_class": "VCPU"}))
            .expect("refused");
        assert!(
            missing.starts_with("'total' is a required property"),
            "{missing}"
        );
        assert!(
            missing.contains("Failed validating 'required' in schema:"),
            "{missing}"
        );
        let low = CREATE_INVENTORY
            .check(39, &json!({"resource_class": "VCPU", "total": 0}))
            .expect("refused");
        assert!(low.starts_with("0 is less than the minimum of 1"), "{low}");
        assert!(
            low.contains("Failed validating 'minimum' in schema['properties']['total']"),
            "{low}"
        );
        assert!(low.contains("On instance['total']:\n    0"), "{low}");
        let extra = UPDATE_PROVIDER
            .check(1, &json!({"name": "a", "uuid": "x"}))
            .expect("refused");
        assert!(
            extra.starts_with("Additional properties are not allowed ('uuid' was unexpected)"),
            "{extra}"
        );
        let regexes = CANDIDATES_QUERY
            .check(25, &json!({"resources01": "VCPU:1"}))
            .expect("refused");
        assert!(
            regexes.starts_with("'resources01' does not match any of the regexes: "),
            "{regexes}"
        );
        let kind = PROVIDER_TRAITS
            .check(
                39,
                &json!({"traits": [], "resource_provider_generation": "invalid_generation"}),
            )
            .expect("refused");
        assert!(
            kind.starts_with("'invalid_generation' is not of type 'integer'"),
            "{kind}"
        );
        let format = CREATE_PROVIDER
            .check(39, &json!({"name": "a", "uuid": "not-a-uuid"}))
            .expect("refused");
        assert!(format.contains("Failed validating 'format'"), "{format}");
        assert!(CREATE_PROVIDER.check(39, &json!({"name": "a"})).is_none());
    }

    #[test]
    fn values_print_as_python_reprs() {
        assert_eq!(
            repr(&json!({"a": [1, 2.5, null, true, "it's"]})),
            "{'a': [1, 2.5, None, True, \"it's\"]}"
        );
        assert_eq!(repr(&json!(16.0)), "16.0");
    }
}
