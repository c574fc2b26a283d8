//! Tidy checks over the whole workspace: module docs, no ignored tests, SQL only in store crates.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn workspace_files() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(files.len() > 20, "found the workspace sources");
    files
}

#[test]
fn every_file_starts_with_a_module_doc() {
    let missing: Vec<_> = workspace_files()
        .into_iter()
        .filter(|path| {
            !std::fs::read_to_string(path)
                .expect("read")
                .starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! paragraph: {missing:?}"
    );
}

#[test]
fn no_test_is_ignored_or_expects_a_panic() {
    let banned = [concat!("#[", "ignore"), concat!("#[", "should_panic")];
    for path in workspace_files() {
        let text = std::fs::read_to_string(&path).expect("read");
        for word in banned {
            assert!(!text.contains(word), "{} uses {word}", path.display());
        }
    }
}

#[test]
fn sql_lives_only_in_the_store_adapters() {
    let keywords = [
        concat!("SELECT", " "),
        concat!("INSERT", " INTO"),
        concat!("DELETE", " FROM"),
        concat!("UPDATE", " berth"),
    ];
    for path in workspace_files() {
        let shown = path.display().to_string();
        if shown.contains("berth-store-sqlite") || shown.contains("berth-store-postgres") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for keyword in keywords {
            assert!(!text.contains(keyword), "{shown} contains SQL ({keyword})");
        }
    }
}
