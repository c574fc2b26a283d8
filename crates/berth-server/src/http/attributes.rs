//! Typed provider attributes on the wire, as the Blazar hosts' extra capabilities and the
//! bare-metal nodes' properties show them: strings, numbers (whole ones as integers) and
//! booleans.

use crate::http::error::ApiError;
use berth_core::AttrValue;
use serde_json::{Number, Value};

/// A typed attribute (extra capability, node property) as JSON.
pub fn attr_json(value: &AttrValue) -> Value {
    match value {
        AttrValue::String(text) => Value::String(text.clone()),
        AttrValue::Bool(flag) => Value::Bool(*flag),
        AttrValue::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(*n as i64),
        AttrValue::Number(n) => Number::from_f64(*n).map_or(Value::Null, Value::Number),
    }
}

/// A typed attribute from JSON (`null`: remove it); 400 for arrays and objects.
pub fn attr_value(key: &str, value: &Value) -> Result<Option<AttrValue>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(AttrValue::String(text.clone()))),
        Value::Bool(flag) => Ok(Some(AttrValue::Bool(*flag))),
        Value::Number(n) => Ok(Some(AttrValue::Number(n.as_f64().unwrap_or(f64::NAN)))),
        Value::Array(_) | Value::Object(_) => Err(ApiError::bad_request(format!(
            "Invalid value for extra capability {key}: only strings, numbers and booleans are allowed"
        ))),
    }
}
