//! What the client prints: aligned tables for people (the default), and berth's JSON, as JSON
//! or YAML, for scripts (`--output json|yaml`).

use crate::error::CliError;
use clap::ValueEnum;
use serde_json::Value;
use std::io::Write as _;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// Aligned columns with headers.
    #[default]
    Table,
    /// berth's JSON, pretty-printed.
    Json,
    /// berth's JSON as YAML.
    Yaml,
}

/// Rows under headers, printed with aligned columns (numbers to the right).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these headers.
    pub(crate) fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// One row per item, each cell from `cells`.
    pub(crate) fn of(
        headers: &[&str],
        items: &[Value],
        cells: impl Fn(&Value) -> Vec<String>,
    ) -> Table {
        let mut table = Table::new(headers);
        for item in items {
            table.row(cells(item));
        }
        table
    }

    /// A two-column view of an object: the `first` keys in that order, then the others sorted.
    pub(crate) fn fields(value: &Value, first: &[&str]) -> Table {
        let mut table = Table::new(&["FIELD", "VALUE"]);
        let Some(object) = value.as_object() else {
            table.row(vec!["value".to_owned(), cell(value)]);
            return table;
        };
        let rest = object.keys().filter(|k| !first.contains(&k.as_str()));
        for key in first.iter().copied().chain(rest.map(String::as_str)) {
            if let Some(value) = object.get(key) {
                let text = match is_time(key) {
                    true => crate::time::show(&cell(value)),
                    false => cell(value),
                };
                table.row(vec![key.to_owned(), text]);
            }
        }
        table
    }

    /// Inserts a column at `index`, one cell per row.
    pub(crate) fn insert_column(&mut self, index: usize, header: &str, cells: Vec<String>) {
        let index = index.min(self.headers.len());
        self.headers.insert(index, header.to_owned());
        for (row, cell) in self.rows.iter_mut().zip(cells) {
            row.insert(index.min(row.len()), cell);
        }
    }

    /// Keeps the rows whose first cell passes `keep`.
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.rows.retain(|row| row.first().is_some_and(|c| keep(c)));
    }

    /// The table as text, one line per row, columns separated by two spaces.
    pub(crate) fn render(&self) -> String {
        let columns = self.headers.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .chain(std::iter::once(&self.headers[i]))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let numeric: Vec<bool> = (0..columns)
            .map(|i| {
                let mut cells = self
                    .rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .filter(|c| !c.is_empty());
                let mut any = false;
                let all = cells.all(|c| {
                    any = true;
                    c.parse::<f64>().is_ok()
                });
                any && all
            })
            .collect();
        // Numbers, and their headers, go to the right.
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, width) in widths.iter().enumerate() {
                let text = cells.get(i).map_or("", String::as_str);
                let pad = width.saturating_sub(text.chars().count());
                if i > 0 {
                    out.push_str("  ");
                }
                match numeric[i] {
                    true => {
                        out.push_str(&" ".repeat(pad));
                        out.push_str(text);
                    }
                    false => {
                        out.push_str(text);
                        out.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.trim_end().to_owned()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// Whether a field holds a time (shown as `YYYY-MM-DD HH:MM:SS`, UTC).
fn is_time(key: &str) -> bool {
    key.ends_with("_date")
        || key.ends_with("_at")
        || matches!(key, "created" | "time" | "timestamp")
}

/// A JSON value as one table cell: strings bare, null empty, lists of scalars joined with
/// commas, anything else as compact JSON.
pub(crate) fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        Value::Array(items) if items.iter().all(|i| !i.is_array() && !i.is_object()) => {
            items.iter().map(cell).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

/// The items of a JSON list (none for anything else).
pub(crate) fn items(value: &Value) -> &[Value] {
    value.as_array().map_or(&[][..], Vec::as_slice)
}

/// The text at `key` of an object, as a cell.
pub(crate) fn get(value: &Value, key: &str) -> String {
    value.get(key).map(cell).unwrap_or_default()
}

/// Writes text to standard output (a closed pipe is not an error worth reporting).
pub(crate) fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints `data` in the chosen format; a table is built by `table` only when it is wanted.
pub(crate) fn emit(
    format: Format,
    data: &Value,
    table: impl FnOnce(&Value) -> Table,
) -> Result<(), CliError> {
    match format {
        Format::Table => print(&table(data).render()),
        Format::Json | Format::Yaml => print(&structured(format, data)?),
    }
    Ok(())
}

/// Prints `data` in the chosen format; tables are given as text by `text`.
pub(crate) fn emit_text(
    format: Format,
    data: &Value,
    text: impl FnOnce(&Value) -> String,
) -> Result<(), CliError> {
    match format {
        Format::Table => print(&text(data)),
        Format::Json | Format::Yaml => print(&structured(format, data)?),
    }
    Ok(())
}

/// `data` as pretty JSON or YAML, ending with a newline.
pub(crate) fn structured(format: Format, data: &Value) -> Result<String, CliError> {
    match format {
        Format::Yaml => serde_norway::to_string(data)
            .map_err(|e| CliError::Failed(format!("cannot write YAML: {e}"))),
        Format::Json | Format::Table => serde_json::to_string_pretty(data)
            .map(|text| text + "\n")
            .map_err(|e| CliError::Failed(format!("cannot write JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_numbers_go_right() {
        let mut table = Table::new(&["ID", "NAME", "VCPUS"]);
        table.row(vec!["1".into(), "compute-1".into(), "16".into()]);
        table.row(vec!["12".into(), "c2".into(), "128".into()]);
        assert_eq!(
            table.render(),
            "ID  NAME       VCPUS\n 1  compute-1     16\n12  c2           128\n"
        );
        assert_eq!(Table::new(&["A", "B"]).render(), "A  B\n");
    }

    #[test]
    fn cells_and_fields() {
        assert_eq!(cell(&json!(null)), "");
        assert_eq!(cell(&json!(["a", 1, true])), "a,1,true");
        assert_eq!(cell(&json!({"a": 1})), r#"{"a":1}"#);
        let fields = Table::fields(&json!({"z": 1, "id": "x", "a": null}), &["id", "missing"]);
        assert_eq!(fields.render(), "FIELD  VALUE\nid     x\na\nz      1\n");
    }

    #[test]
    fn structured_formats() {
        let data = json!({"name": "x", "n": 2});
        let yaml = structured(Format::Yaml, &data).expect("yaml");
        assert!(yaml.contains("name: x"), "{yaml}");
        let json = structured(Format::Json, &data).expect("json");
        assert_eq!(serde_json::from_str::<Value>(&json).expect("parses"), data);
    }
}
