//! Small argument languages shared by several commands: `key=value,key=value` specs (commas
//! inside brackets, parentheses or quotes do not split), typed `key=value` properties, and
//! JSON files of bodies for bulk commands.

use crate::error::CliError;
use crate::filter::typed;
use serde_json::{Map, Value};
use std::path::Path;

/// Splits at `separator` outside brackets, parentheses and quotes.
pub(crate) fn split_top_level(text: &str, separator: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth: i32 = 0;
    let mut quote: Option<char> = None;
    for ch in text.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(ch),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, c) if c == separator && depth <= 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    parts.push(current);
    parts
}

/// `key=value,key=value` as pairs, keys lower-cased with `_` for `-`.
pub(crate) fn key_values(flag: &str, text: &str) -> Result<Vec<(String, String)>, CliError> {
    split_top_level(text, ',')
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                CliError::Usage(format!("{flag} {text}: {part:?} is not key=value"))
            })?;
            Ok((
                key.trim().to_ascii_lowercase().replace('-', "_"),
                value.trim().to_owned(),
            ))
        })
        .collect()
}

/// A whole number from a spec.
pub(crate) fn whole(flag: &str, key: &str, value: &str) -> Result<u64, CliError> {
    value
        .parse::<u64>()
        .map_err(|_| CliError::Usage(format!("{flag}: {key}={value} must be a whole number")))
}

/// `key=value` properties, typed (numbers and `true`/`false` as such, the rest as strings).
pub(crate) fn properties(flag: &str, items: &[String]) -> Result<Map<String, Value>, CliError> {
    items
        .iter()
        .map(|item| {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| CliError::Usage(format!("{flag} {item}: use key=value")))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(CliError::Usage(format!("{flag} {item}: the key is empty")));
            }
            Ok((key.to_owned(), typed(value.trim())))
        })
        .collect()
}

/// A comma-separated list, without empty items.
pub(crate) fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A JSON file holding a list of objects (or one object, or `{"<wrapper>": [...]}`).
pub(crate) fn bodies(path: &Path, wrapper: &str) -> Result<Vec<Value>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::Usage(format!("{} is not JSON: {e}", path.display())))?;
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut object) => match object.remove(wrapper) {
            Some(Value::Array(items)) => items,
            _ => vec![Value::Object(object)],
        },
        _ => Vec::new(),
    };
    if items.is_empty() || items.iter().any(|item| !item.is_object()) {
        return Err(CliError::Usage(format!(
            "{} must hold a JSON list of objects",
            path.display()
        )));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn specs_split_outside_brackets_and_quotes() {
        assert_eq!(
            split_top_level(r#"min=1,filter=["==", "$a", 1],max=2"#, ','),
            vec!["min=1", r#"filter=["==", "$a", 1]"#, "max=2"]
        );
        assert_eq!(
            split_top_level("filter=zone in (a, b),x='c,d'", ','),
            vec!["filter=zone in (a, b)", "x='c,d'"]
        );
        let pairs = key_values("--instance", "vcpus=2,Memory-MB=4096, filter = gpu == true")
            .expect("pairs");
        assert_eq!(
            pairs,
            vec![
                ("vcpus".to_owned(), "2".to_owned()),
                ("memory_mb".to_owned(), "4096".to_owned()),
                ("filter".to_owned(), "gpu == true".to_owned()),
            ]
        );
        assert!(key_values("--host", "min").is_err());
    }

    #[test]
    fn properties_are_typed() {
        let props = properties(
            "--extra",
            &[
                "gpu=true".to_owned(),
                "cores=48".to_owned(),
                "rack=r1".to_owned(),
            ],
        )
        .expect("props");
        assert_eq!(
            Value::Object(props),
            json!({"gpu": true, "cores": 48, "rack": "r1"})
        );
        assert!(properties("--extra", &["novalue".to_owned()]).is_err());
        assert_eq!(list("a, b,,c"), vec!["a", "b", "c"]);
    }
}
