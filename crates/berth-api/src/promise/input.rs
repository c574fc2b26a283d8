//! The lenient members of Promise requests, as OPNFV clients send them: numbers as JSON numbers
//! or numeric strings, flags as booleans or text, lists as arrays or comma-separated text.
//!
//! The server reads each member of a request through one of these types (then checks its
//! value: a range, a known name), so what the OpenAPI document says a member may be and what
//! the handler accepts are one definition. Any member may also be `null`, which reads as absent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A whole number, as a JSON number or a numeric string (`8` or `"8"`); the member's own
/// documentation gives its range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "PromiseCount")]
#[serde(untagged)]
pub enum Count {
    /// A JSON number.
    Number(u64),
    /// Its decimal text.
    Text(String),
}

/// A flag, as a JSON boolean or the text `true` or `false` (in any case).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "PromiseFlag")]
#[serde(untagged)]
pub enum Flag {
    /// A JSON boolean.
    Bool(bool),
    /// `true` or `false`.
    Text(String),
}

/// A name or id: a non-empty string (trimmed), or a JSON number taken as its text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "PromiseText")]
#[serde(untagged)]
pub enum Text {
    /// A string that is not blank.
    Text(String),
    /// A number, read as its text.
    Number(serde_json::Number),
}

/// A list of names or ids: a JSON array of strings, or one comma-separated string.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[schemars(rename = "PromiseNames")]
#[serde(untagged)]
pub enum Names {
    /// A JSON array of strings.
    List(Vec<String>),
    /// One string, the items separated by commas.
    Joined(String),
}
