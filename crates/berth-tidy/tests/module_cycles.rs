//! No crate of berth has modules that refer to each other in a circle: each crate's modules form
//! layers, so that each can be read knowing only those below it.

use std::path::Path;

use berth_tidy::{ModuleGraph, crate_roots};

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/");
    let mut dirs: Vec<_> = std::fs::read_dir(crates)
        .expect("read crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 8,
        "found only {} crates under {}",
        dirs.len(),
        crates.display()
    );
    let mut report = String::new();
    let mut roots_read = 0;
    for dir in &dirs {
        for root in crate_roots(dir) {
            let graph = ModuleGraph::load(&root).unwrap_or_else(|e| panic!("{e}"));
            roots_read += 1;
            for cycle in graph.cycles() {
                report.push_str(&format!("{}:\n  {cycle}", root.display()));
            }
        }
    }
    assert!(roots_read >= 8, "read only {roots_read} crate roots");
    assert!(report.is_empty(), "module import cycles:\n{report}");
}

/// The negative control: a crate whose `inventory` and `ledger` call each other is caught, with
/// the paths that close the circle, and the module both use is left out of it.
#[test]
fn a_circle_is_found_with_its_references() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/circle/src/lib.rs");
    let graph = ModuleGraph::load(&root).expect("fixture loads");
    assert_eq!(graph.modules.len(), 4);
    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].modules, ["crate::inventory", "crate::ledger"]);
    let references: Vec<_> = cycles[0]
        .references
        .iter()
        .map(|(from, to, path)| format!("{from} -> {to}: {path}"))
        .collect();
    assert_eq!(
        references,
        [
            "crate::inventory -> crate::ledger: super::ledger::booked",
            "crate::ledger -> crate::inventory: crate::inventory::total",
        ]
    );
    assert!(graph.edges["crate::inventory"].contains_key("crate::names"));
}
