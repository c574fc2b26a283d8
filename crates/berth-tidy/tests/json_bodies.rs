//! No handler builds a body with `json!`: every body is a wire type of berth-api, so that the
//! OpenAPI document describes it.

use std::path::{Path, PathBuf};

use berth_tidy::json_macros;

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn handlers_answer_with_wire_types() {
    let http = Path::new(env!("CARGO_MANIFEST_DIR")).join("../berth-server/src/http");
    let mut files = Vec::new();
    rust_files(&http, &mut files);
    assert!(
        files.len() > 20,
        "found only {} files under {}",
        files.len(),
        http.display()
    );
    let mut left = Vec::new();
    for file in files {
        // The OpenAPI document itself is assembled from generated schemas, and Placement's
        // request schemas are documents requests are checked against, not bodies sent.
        if file.ends_with("routes.rs") || file.ends_with("placement/schema.rs") {
            continue;
        }
        let count = json_macros(&file).unwrap_or_else(|e| panic!("{e}"));
        if count > 0 {
            left.push((count, file));
        }
    }
    let listing: Vec<String> = left
        .iter()
        .map(|(count, file)| format!("{count:4}  {}", file.display()))
        .collect();
    assert!(
        left.is_empty(),
        "handlers build bodies with json!:\n{}",
        listing.join("\n")
    );
}

/// The counter sees through nesting and leaves test code out.
#[test]
fn json_macros_are_counted_outside_tests() {
    let dir = tempfile_dir();
    let file = dir.join("handler.rs");
    std::fs::write(
        &file,
        r#"
fn answer() -> Value { json!({"a": 1}) }
fn many() -> Vec<Value> { vec![json!(1), serde_json::json!(2)] }
#[cfg(test)]
mod tests { fn t() { json!(3); } }
"#,
    )
    .expect("write");
    assert_eq!(json_macros(&file).expect("parse"), 3);
    std::fs::remove_dir_all(&dir).expect("clean");
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-tidy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
