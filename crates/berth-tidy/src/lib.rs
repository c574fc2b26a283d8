//! Checks of berth's source tree that the compiler does not make.
//!
//! [`ModuleGraph::load`] reads a crate root and every module file it declares, and records which
//! modules each one refers to: its `use` declarations and the paths in its code (`crate::a::b`,
//! `super::x`, `self::x`, or a child module's name). [`ModuleGraph::cycles`] finds the groups of
//! modules that refer to each other, directly or through others: a layered crate has none, so
//! that each module can be read knowing only the modules below it.
//!
//! A module's inline submodules (`mod tests { .. }`) count as part of it. Paths inside macro
//! invocations are not read.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module's path inside its crate, `crate` for the root: `crate::http::placement`.
pub type ModuleName = String;

/// The modules of one crate root and the references between them.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Every module stored in a file of its own, with that file.
    pub modules: BTreeMap<ModuleName, PathBuf>,
    /// `edges[a][b]`: the first path by which module `a` refers to module `b`.
    pub edges: BTreeMap<ModuleName, BTreeMap<ModuleName, String>>,
}

/// A group of modules that refer to each other, with the references that close the circle.
#[derive(Debug)]
pub struct Cycle {
    pub modules: Vec<ModuleName>,
    pub references: Vec<(ModuleName, ModuleName, String)>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} modules refer to each other: {}",
            self.modules.len(),
            self.modules.join(", ")
        )?;
        for (from, to, path) in &self.references {
            writeln!(f, "    {from} -> {to}   (`{path}`)")?;
        }
        Ok(())
    }
}

/// Why a crate's modules could not be read.
#[derive(Debug)]
pub struct LoadError(String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

impl ModuleGraph {
    /// Reads the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`, a test or bench
    /// file) and every module file it declares.
    pub fn load(root: &Path) -> Result<Self, LoadError> {
        let mut files = Vec::new();
        let mut graph = ModuleGraph::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        collect(root, dir, Vec::new(), &mut graph.modules, &mut files)?;
        for (segments, file) in &files {
            let mut visitor = References {
                graph_modules: &graph.modules,
                file_module: segments.clone(),
                current: segments.clone(),
                found: BTreeMap::new(),
            };
            visitor.visit_file(file);
            let from = name_of(segments);
            for (to, path) in visitor.found {
                if to != from {
                    graph
                        .edges
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert(path);
                }
            }
        }
        Ok(graph)
    }

    /// The groups of two or more modules that refer to each other (Tarjan's strongly connected
    /// components), each with the references among its members.
    pub fn cycles(&self) -> Vec<Cycle> {
        let names: Vec<&ModuleName> = self.modules.keys().collect();
        let index: BTreeMap<&ModuleName, usize> =
            names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let successors: Vec<Vec<usize>> = names
            .iter()
            .map(|n| {
                self.edges
                    .get(*n)
                    .map(|to| to.keys().filter_map(|t| index.get(t).copied()).collect())
                    .unwrap_or_default()
            })
            .collect();
        strongly_connected(&successors)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| {
                let members: BTreeSet<&ModuleName> = component.iter().map(|&i| names[i]).collect();
                let references = members
                    .iter()
                    .flat_map(|from| {
                        self.edges
                            .get(*from)
                            .into_iter()
                            .flatten()
                            .filter(|(to, _)| members.contains(to))
                            .map(|(to, path)| ((*from).clone(), to.clone(), path.clone()))
                    })
                    .collect();
                Cycle {
                    modules: members.into_iter().cloned().collect(),
                    references,
                }
            })
            .collect()
    }
}

/// The crate roots under a crate's directory: its library, binaries, tests and benches.
pub fn crate_roots(crate_dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for file in ["src/lib.rs", "src/main.rs"] {
        let path = crate_dir.join(file);
        if path.is_file() {
            roots.push(path);
        }
    }
    for dir in ["src/bin", "tests", "benches"] {
        let Ok(entries) = fs::read_dir(crate_dir.join(dir)) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if path.extension().is_some_and(|e| e == "rs") {
                roots.push(path);
            } else if path.join("main.rs").is_file() {
                roots.push(path.join("main.rs"));
            }
        }
    }
    roots
}

fn name_of(segments: &[String]) -> ModuleName {
    std::iter::once("crate")
        .chain(segments.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// Reads `file` as the module `segments`, then the files of the modules it declares: for a file
/// that owns its directory (a crate root or `mod.rs`) they sit in `dir`, otherwise in the folder
/// named after the file.
fn collect(
    file: &Path,
    dir: PathBuf,
    segments: Vec<String>,
    modules: &mut BTreeMap<ModuleName, PathBuf>,
    files: &mut Vec<(Vec<String>, syn::File)>,
) -> Result<(), LoadError> {
    let text =
        fs::read_to_string(file).map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
    let parsed =
        syn::parse_file(&text).map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
    modules.insert(name_of(&segments), file.to_path_buf());
    for item in &parsed.items {
        let syn::Item::Mod(declared) = item else {
            continue;
        };
        if declared.content.is_some() {
            continue;
        }
        let child = declared.ident.to_string();
        let flat = dir.join(format!("{child}.rs"));
        let (child_file, child_dir) = if flat.is_file() {
            (flat, dir.join(&child))
        } else {
            (dir.join(&child).join("mod.rs"), dir.join(&child))
        };
        let mut child_segments = segments.clone();
        child_segments.push(child);
        collect(&child_file, child_dir, child_segments, modules, files)?;
    }
    files.push((segments, parsed));
    Ok(())
}

/// Finds the modules one file refers to.
struct References<'g> {
    graph_modules: &'g BTreeMap<ModuleName, PathBuf>,
    /// The module of the file being read.
    file_module: Vec<String>,
    /// Where the visitor is: the file's module, then any inline modules entered.
    current: Vec<String>,
    found: BTreeMap<ModuleName, String>,
}

impl References<'_> {
    fn is_module(&self, segments: &[String]) -> bool {
        self.graph_modules.contains_key(&name_of(segments))
    }

    /// Resolves a path's leading segments to the deepest module they name, if any.
    fn refer(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let (mut base, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (self.current.clone(), &segments[1..]),
            "super" => {
                let supers = segments.iter().take_while(|s| *s == "super").count();
                let keep = self.current.len().saturating_sub(supers);
                (self.current[..keep].to_vec(), &segments[supers..])
            }
            _ => {
                let mut child = self.current.clone();
                child.push(first.clone());
                if segments.len() < 2 || !self.is_module(&child) {
                    return;
                }
                (self.current.clone(), segments)
            }
        };
        for segment in rest {
            let mut deeper = base.clone();
            deeper.push(segment.clone());
            if !self.is_module(&deeper) {
                break;
            }
            base = deeper;
        }
        // An inline module's path resolves to the file that holds it.
        while !self.is_module(&base) && !base.is_empty() {
            base.pop();
        }
        if base == self.file_module {
            return;
        }
        self.found
            .entry(name_of(&base))
            .or_insert_with(|| segments.join("::"));
    }
}

fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            if n.ident != "self" {
                path.push(n.ident.to_string());
            }
            out.push(path);
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(path);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten_use(item, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.current.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.current.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_some() {
            return;
        }
        let mut paths = Vec::new();
        flatten_use(&item.tree, &mut Vec::new(), &mut paths);
        for path in paths {
            // `use x;` alone names a crate or a child module, neither of which is a reference.
            if path.len() > 1 || path.first().is_some_and(|s| s == "super" || s == "crate") {
                self.refer(&path);
            }
        }
    }

    /// `pub(crate)` and `pub(super)` say who may see an item; they refer to nothing.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.refer(&segments);
        }
        syn::visit::visit_path(self, path);
    }
}

/// How many `json!` invocations a file's code holds, leaving out `#[cfg(test)]` items: a body
/// built that way has no type, so no schema describes it.
pub fn json_macros(file: &Path) -> Result<usize, LoadError> {
    let text =
        fs::read_to_string(file).map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
    let parsed =
        syn::parse_file(&text).map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
    let mut counter = JsonMacros(0);
    counter.visit_file(&parsed);
    Ok(counter.0)
}

struct JsonMacros(usize);

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

impl<'ast> Visit<'ast> for JsonMacros {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if mac.path.segments.last().is_some_and(|s| s.ident == "json") {
            self.0 += 1;
        }
        // Nested invocations (`json!` inside `vec![..]` or `format!`) are counted too.
        let nested: Result<syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>, _> =
            mac.parse_body_with(syn::punctuated::Punctuated::parse_terminated);
        if let Ok(exprs) = nested {
            exprs.iter().for_each(|e| self.visit_expr(e));
        }
    }
}

/// Tarjan's algorithm, iterative: the strongly connected components of a graph given as
/// successor lists.
fn strongly_connected(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = successors.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0)];
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if *child == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = successors[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_circle_and_only_it() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 alone.
        let components = strongly_connected(&[vec![1], vec![2], vec![0, 3], vec![]]);
        let mut big: Vec<Vec<usize>> = components.into_iter().filter(|c| c.len() > 1).collect();
        for c in &mut big {
            c.sort_unstable();
        }
        assert_eq!(big, vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_layered_graph_has_no_circle() {
        let components = strongly_connected(&[vec![1, 2], vec![2], vec![]]);
        assert!(components.iter().all(|c| c.len() == 1));
    }
}
