//! `cargo xtask circles [--crate NAME] [--rev REV]`: the import circles inside each crate.
//!
//! For each member of the workspace, a graph with one node per module file (inline modules
//! belong to their file) and an edge A → B when A's code names an item of B. A circle is a
//! strongly connected component of more than one node, looked for at each module among its own
//! file and its children, each child taken with everything below it: a reference between two
//! files counts at their nearest common ancestor. So a file circle is always found (at the
//! module holding its files), and so is `agent/ ↔ rollout/` when no single file of either names
//! the other back. The command prints each circle with one reference behind each of its edges
//! (its file, line and source line), and the totals per crate; it fails when a crate has a
//! circle. `cargo xtask test` runs the same check ([`check`]) on the working tree.
//!
//! What is resolved, from `syn`'s parse of each file (no build, so it also reads old revisions):
//! - paths: `use` trees (groups, `self`, renames), paths in types, expressions, patterns and
//!   trait bounds, `path::to!` macros, and `a::b` paths inside macro arguments (`format!`,
//!   `matches!`, `$crate::...` in `macro_rules!` bodies) and in attributes, as paths
//!   (`#[arg(value_parser = crate::parse)]`) or strings (`#[serde(with = "crate::x")]`);
//! - from `crate::`, `self::`, `super::` and, as Rust 2018 does, a first segment that the
//!   module itself names (a child module, an item, or an import);
//! - through re-exports and imports, named or glob (`pub use types::*`), to the module that
//!   defines the item, so `crate::Error` counts as a reference to `error.rs`, not to `lib.rs`;
//! - a single identifier only when a glob import brings it (`use super::*` then `Foo`);
//! - `#[macro_export]` macros at the crate root, and a bare `name!` to the module whose
//!   `macro_rules!` defines it.
//!
//! What is not: test code (`#[cfg(test)]` items, `#[test]` functions: a test module naming its
//! parent is not an import circle of the product), method calls (they need a trait or type that
//! is already imported), names made by macros or derives (a path to them stops at the module
//! it reached), `mod x;` declarations themselves (a parent is not made to depend on the child
//! it declares), paths of `pub(in ...)`, doc links, and other crates.

mod names;

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use self::names::Scopes;
use crate::modtree::ModuleTree;
use crate::workspace::{Package, Tree};

/// Arguments of `cargo xtask circles`.
#[derive(clap::Args)]
pub struct CirclesArgs {
    /// Only this crate (its package name, e.g. ors-client).
    #[arg(long = "crate", value_name = "NAME")]
    pub krate: Option<String>,
    /// Read this git revision instead of the working tree (with git, without building it).
    #[arg(long, value_name = "REV")]
    pub rev: Option<String>,
}

/// Print the circles of every crate (or one); fail when a crate has one.
pub fn run(args: CirclesArgs) -> Result<ExitCode, String> {
    let tree = Tree::of(args.rev.as_deref())?;
    let mut packages = tree.packages()?;
    if let Some(name) = &args.krate {
        let known: Vec<String> = packages.iter().map(|p| p.name.clone()).collect();
        packages.retain(|p| &p.name == name);
        if packages.is_empty() {
            return Err(format!(
                "no crate `{name}` in the workspace; its crates: {}",
                known.join(", ")
            ));
        }
    }
    println!("import circles in {}", tree.label());
    let mut rows = Vec::new();
    for package in &packages {
        let graph = Graph::of(&tree, package);
        let circles = graph.circles();
        graph.print(&tree, package, &circles);
        rows.push((package, graph, circles.len()));
    }
    println!(
        "\n{:<18} {:>7} {:>6} {:>7}",
        "crate", "modules", "edges", "circles"
    );
    let mut failing = Vec::new();
    for (package, graph, circles) in &rows {
        println!(
            "{:<18} {:>7} {:>6} {:>7}",
            package.name,
            graph.labels.len(),
            graph.edge_count(),
            circles
        );
        if *circles > 0 {
            failing.push(package.name.as_str());
        }
    }
    if failing.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("xtask: circles: import circles in {}", failing.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

/// The step of `cargo xtask test`: no crate of the working tree has an import circle. The
/// error names each circle's modules and, for each of its edges, the line that makes it; a
/// module file it cannot read (missing, or not parsed) fails it too, as its circles would go
/// unseen.
pub fn check() -> Result<(), String> {
    let tree = Tree::disk();
    let packages = tree.packages()?;
    let (modules, failures) = failures(&tree, &packages);
    if failures.is_empty() {
        eprintln!(
            "xtask: circles: none in {} crates ({modules} modules)",
            packages.len()
        );
        return Ok(());
    }
    Err(format!(
        "import circles inside crates, or files the check could not read (a module and one it \
         uses must not use each other: move what both need into a module below them; `cargo \
         xtask circles` shows every crate's graph):\n{}",
        failures.join("\n")
    ))
}

/// The modules read, and each crate with circles or unread files described: its name, then
/// each file it could not read, and each circle's members and edges.
fn failures(tree: &Tree, packages: &[Package]) -> (usize, Vec<String>) {
    let mut modules = 0;
    let mut failures = Vec::new();
    for package in packages {
        let graph = Graph::of(tree, package);
        modules += graph.labels.len();
        for error in &graph.errors {
            failures.push(format!("{}: unread: {error}", package.name));
        }
        let circles = graph.circles();
        if circles.is_empty() {
            continue;
        }
        let mut text = format!("{}: {} circles", package.name, circles.len());
        for (k, circle) in circles.iter().enumerate() {
            for line in graph.describe(tree, k, circle) {
                text.push_str("\n  ");
                text.push_str(&line);
            }
        }
        failures.push(text);
    }
    (modules, failures)
}

/// The module graph of one package: file modules and the references between them.
pub struct Graph {
    /// Each file module, relative to the package's `src/`.
    labels: Vec<String>,
    /// Each file module's path in the tree.
    files: Vec<String>,
    /// Each file module's parent file module; none for a target's root.
    parents: Vec<Option<usize>>,
    /// `from → to → (line in from, the path as written)`: the first reference of each edge.
    edges: BTreeMap<usize, BTreeMap<usize, (usize, String)>>,
    /// Files that are declared but missing or do not parse.
    errors: Vec<String>,
}

/// Two nodes: an edge's ends.
type Pair = (usize, usize);

/// A circle: at one module, its own file and some of its children (each with everything below
/// it) that reach each other.
pub struct Circle {
    /// The module whose file and children it is made of.
    level: usize,
    /// Its members, the level itself or its children, sorted by label.
    members: Vec<usize>,
    /// For each edge between members, the first file edge behind it.
    edges: Vec<Pair>,
}

impl Graph {
    /// The graph of `package`'s targets in `tree`.
    pub fn of(tree: &Tree, package: &Package) -> Graph {
        let modules = ModuleTree::load(tree, package);
        let scopes = Scopes::of(&modules);
        let src = format!("{}/src/", package.dir);
        // Nodes are file modules, numbered in the tree's order (parents before children).
        let mut node = BTreeMap::new();
        let mut labels = Vec::new();
        let mut files = Vec::new();
        let mut parents = Vec::new();
        for (i, m) in modules.modules.iter().enumerate() {
            if !m.inline {
                node.insert(i, labels.len());
                labels.push(m.file.strip_prefix(&src).unwrap_or(&m.file).to_owned());
                files.push(m.file.clone());
                parents.push(m.parent.map(|p| node[&modules.file_module(p)]));
            }
        }
        let mut edges: BTreeMap<usize, BTreeMap<usize, (usize, String)>> = BTreeMap::new();
        for (m, scope) in scopes.scopes.iter().enumerate() {
            let from = node[&modules.file_module(m)];
            for r in &scope.refs {
                let Some(found) = scopes.resolve_ref(m, r) else {
                    continue;
                };
                let to = node[&modules.file_module(found)];
                if from != to {
                    edges
                        .entry(from)
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| (r.line, r.segs.join("::")));
                }
            }
        }
        Graph {
            labels,
            files,
            parents,
            edges,
            errors: modules.errors,
        }
    }

    fn edge_count(&self) -> usize {
        self.edges.values().map(BTreeMap::len).sum()
    }

    /// The file modules from `n`'s target root down to `n`.
    fn ancestry(&self, mut n: usize) -> Vec<usize> {
        let mut path = vec![n];
        while let Some(p) = self.parents[n] {
            path.push(p);
            n = p;
        }
        path.reverse();
        path
    }

    /// Every circle. An edge between files counts at their nearest common ancestor, between the
    /// two children of it (or its own file) that hold them: so `agent/mod.rs → rollout/mod.rs`
    /// and `rollout/episode.rs → agent/trace.rs` are a circle of `agent` and `rollout` though
    /// no file is in a circle, and every circle of files is one at some module.
    pub fn circles(&self) -> Vec<Circle> {
        // level → (member, member) → the first file edge behind it
        let mut levels: BTreeMap<usize, BTreeMap<Pair, Pair>> = BTreeMap::new();
        for (from, tos) in &self.edges {
            for to in tos.keys() {
                let (a, b) = (self.ancestry(*from), self.ancestry(*to));
                let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let Some(level) = common.checked_sub(1).map(|i| a[i]) else {
                    continue;
                };
                let na = a.get(common).copied().unwrap_or(level);
                let nb = b.get(common).copied().unwrap_or(level);
                levels
                    .entry(level)
                    .or_default()
                    .entry((na, nb))
                    .or_insert((*from, *to));
            }
        }
        let mut circles = Vec::new();
        for (level, edges) in levels {
            let nodes: Vec<usize> = edges
                .keys()
                .flat_map(|(a, b)| [*a, *b])
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let index = |n: usize| nodes.iter().position(|x| *x == n).unwrap_or(0);
            let components = tarjan(nodes.len(), |i| {
                edges
                    .keys()
                    .filter(|(a, _)| *a == nodes[i])
                    .map(|(_, b)| index(*b))
                    .collect()
            });
            for component in components.into_iter().filter(|c| c.len() > 1) {
                let mut members: Vec<usize> = component.iter().map(|i| nodes[*i]).collect();
                members.sort_by(|a, b| self.labels[*a].cmp(&self.labels[*b]));
                let file_edges = edges
                    .iter()
                    .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                    .map(|(_, file_edge)| *file_edge)
                    .collect();
                circles.push(Circle {
                    level,
                    members,
                    edges: file_edges,
                });
            }
        }
        circles
    }

    /// A member of a circle at `level`: its file, and `and below` for a child with children.
    fn member_label(&self, level: usize, member: usize) -> String {
        let below = member != level && self.parents.contains(&Some(member));
        if below {
            format!("{} and below", self.labels[member])
        } else {
            self.labels[member].clone()
        }
    }

    /// The circles as lists of member labels.
    #[cfg(test)]
    pub fn circle_labels(&self) -> Vec<Vec<String>> {
        self.circles()
            .iter()
            .map(|c| {
                c.members
                    .iter()
                    .map(|m| self.member_label(c.level, *m))
                    .collect()
            })
            .collect()
    }

    /// Circle number `k`: its level and members, then each edge as the file, line and source
    /// line behind it.
    fn describe(&self, tree: &Tree, k: usize, circle: &Circle) -> Vec<String> {
        let names: Vec<String> = circle
            .members
            .iter()
            .map(|m| self.member_label(circle.level, *m))
            .collect();
        let mut lines = vec![format!(
            "circle {} (in {}): {}",
            k + 1,
            self.labels[circle.level],
            names.join(", ")
        )];
        for (from, to) in &circle.edges {
            if let Some((line, path)) = self.edges.get(from).and_then(|t| t.get(to)) {
                let source = tree
                    .read(&self.files[*from])
                    .map(|text| statement_at(&text, *line))
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| path.clone());
                lines.push(format!(
                    "  {}:{line} -> {}: {source}",
                    self.labels[*from], self.labels[*to]
                ));
            }
        }
        lines
    }

    fn print(&self, tree: &Tree, package: &Package, circles: &[Circle]) {
        println!(
            "\n{}: {} modules, {} edges, {} circles",
            package.name,
            self.labels.len(),
            self.edge_count(),
            circles.len()
        );
        for error in &self.errors {
            println!("  unread: {error}");
        }
        for (k, circle) in circles.iter().enumerate() {
            for line in self.describe(tree, k, circle) {
                println!("  {line}");
            }
        }
    }
}

/// The source at 1-based `line` of `text`, trimmed: a `use` that starts there up to its `;`
/// (on one line, however many it spans), any other line as it is.
fn statement_at(text: &str, line: usize) -> String {
    let mut lines = text.lines().skip(line.saturating_sub(1));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let first = first.trim();
    if !first.starts_with("use ") && !first.starts_with("pub use ") && !first.contains(" use ") {
        return first.to_owned();
    }
    let mut statement = first.to_owned();
    for next in lines.take(40) {
        if statement.ends_with(';') {
            break;
        }
        let next = next.trim();
        if !(statement.ends_with('{') || next.starts_with('}')) {
            statement.push(' ');
        }
        statement.push_str(next);
    }
    statement.replace(",}", "}")
}

/// Tarjan's strongly connected components of nodes `0..n`.
fn tarjan(n: usize, successors: impl Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, s: &mut State, successors: &dyn Fn(usize) -> Vec<usize>) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for w in successors(v) {
            match s.index[w] {
                None => {
                    visit(w, s, successors);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &mut s, &successors);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::memory;

    fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let tree = memory(files);
        let package = Package {
            name: "p".into(),
            dir: "p".into(),
        };
        let graph = Graph::of(&tree, &package);
        assert!(graph.errors.is_empty(), "{:?}", graph.errors);
        graph.circle_labels()
    }

    #[test]
    fn two_modules_naming_each_other_are_a_circle() {
        let circles = circles_of(&[
            ("p/src/lib.rs", "mod a; mod b; mod c;"),
            ("p/src/a.rs", "use crate::b::B; pub struct A;"),
            (
                "p/src/b.rs",
                "pub struct B; fn f() { let _ = super::a::A; }",
            ),
            ("p/src/c.rs", "use crate::a::A;"),
        ]);
        assert_eq!(circles, [["a.rs", "b.rs"]]);
    }

    #[test]
    fn the_check_fails_on_a_circle_naming_its_modules_and_lines_not_on_a_chain() {
        let manifest = ("Cargo.toml", "[workspace]\nmembers = [\"p\", \"q\"]\n");
        let p = ("p/Cargo.toml", "[package]\nname = \"p\"\n");
        let q = ("q/Cargo.toml", "[package]\nname = \"q\"\n");
        // q is a chain, a -> b -> c: no circle.
        let chain = [
            ("q/src/lib.rs", "mod a; mod b; mod c;"),
            ("q/src/a.rs", "use crate::b::B;\npub struct A;"),
            ("q/src/b.rs", "use crate::c::C;\npub struct B;"),
            ("q/src/c.rs", "pub struct C;"),
        ];
        let mut files = vec![manifest, p, q, ("p/src/lib.rs", "")];
        files.extend(chain);
        let tree = memory(&files);
        let (modules, found) = failures(&tree, &tree.packages().unwrap());
        assert_eq!(modules, 5);
        assert!(found.is_empty(), "{found:?}");

        // p's a and b use each other: p fails, named with both edges' lines; q still passes.
        files[3] = ("p/src/lib.rs", "mod a;\nmod b;");
        files.push((
            "p/src/a.rs",
            "use crate::b::{\n    B,\n    f,\n};\npub struct A;",
        ));
        files.push((
            "p/src/b.rs",
            "pub struct B;\npub fn f() {}\nfn g() {\n    let _ = super::a::A;\n}",
        ));
        let tree = memory(&files);
        let (_, found) = failures(&tree, &tree.packages().unwrap());
        assert_eq!(
            found,
            ["p: 1 circles\n  circle 1 (in lib.rs): a.rs, b.rs\n    \
              a.rs:1 -> b.rs: use crate::b::{B, f};\n    \
              b.rs:4 -> a.rs: let _ = super::a::A;"]
        );

        // A file that does not parse could hide one: it fails the check, named.
        files[7] = ("q/src/c.rs", "pub struct C");
        let tree = memory(&files);
        let (_, found) = failures(&tree, &tree.packages().unwrap());
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[1].starts_with("q: unread: q/src/c.rs: "), "{found:?}");
    }

    #[test]
    fn a_reexport_leads_to_the_module_that_defines_the_item() {
        // lib re-exports a's item and calls b; b names the re-export. Resolved to a.rs, b's
        // reference is no edge back to lib.rs, so there is no circle.
        let files = [
            (
                "p/src/lib.rs",
                "mod a; mod b; pub use a::A; pub fn f() { b::g() }",
            ),
            ("p/src/a.rs", "pub struct A;"),
            ("p/src/b.rs", "pub fn g() { let _ = crate::A; }"),
        ];
        assert!(circles_of(&files).is_empty());
        // The same through globs two levels deep, and a lib item b really uses is a circle.
        let files = [
            (
                "p/src/lib.rs",
                "mod types; mod b; pub use types::*; pub struct Own;",
            ),
            ("p/src/types.rs", "mod messages; pub use messages::*;"),
            (
                "p/src/types/messages.rs",
                "pub struct Message; fn f() { crate::b::g(); }",
            ),
            ("p/src/b.rs", "use crate::Message; pub fn g() {}"),
        ];
        assert_eq!(circles_of(&files), [["b.rs", "types.rs and below"]]);
        // An item of another crate that the root re-exports is in neither.
        let files = [
            (
                "p/src/lib.rs",
                "mod b; pub use other::Thing; fn f() { b::g() }",
            ),
            ("p/src/b.rs", "pub fn g(_: crate::Thing) {}"),
        ];
        assert!(circles_of(&files).is_empty());
        let files = [
            ("p/src/lib.rs", "mod b; pub struct Own; fn f() { b::g() }"),
            ("p/src/b.rs", "use super::Own; pub fn g() {}"),
        ];
        assert_eq!(circles_of(&files), [["b.rs", "lib.rs"]]);
    }

    #[test]
    fn modules_whose_descendants_reach_each_other_are_a_circle() {
        // No file is in a circle, but agent and rollout need each other.
        let files = [
            ("p/src/lib.rs", "mod agent; mod rollout;"),
            (
                "p/src/agent/mod.rs",
                "mod trace; pub use trace::Trace; use crate::rollout::Step;",
            ),
            ("p/src/agent/trace.rs", "pub struct Trace;"),
            ("p/src/rollout/mod.rs", "mod episode; pub struct Step;"),
            ("p/src/rollout/episode.rs", "use crate::agent::Trace;"),
        ];
        assert_eq!(
            circles_of(&files),
            [["agent/mod.rs and below", "rollout/mod.rs and below"]]
        );
        // The trace in a module of its own that both use: no circle.
        let files = [
            ("p/src/lib.rs", "mod agent; mod rollout; mod trace;"),
            (
                "p/src/agent/mod.rs",
                "use crate::rollout::Step; use crate::trace::Trace;",
            ),
            ("p/src/trace.rs", "pub struct Trace;"),
            ("p/src/rollout/mod.rs", "mod episode; pub struct Step;"),
            ("p/src/rollout/episode.rs", "use crate::trace::Trace;"),
        ];
        assert!(circles_of(&files).is_empty());
    }

    #[test]
    fn test_code_is_not_an_import() {
        let files = [
            ("p/src/lib.rs", "mod a; mod b;"),
            (
                "p/src/a.rs",
                "pub struct A; #[cfg(test)] mod tests { use crate::b::B; } \
                 impl A { #[test] fn t() { crate::b::B; } }",
            ),
            ("p/src/b.rs", "pub struct B; use crate::a::A;"),
        ];
        assert!(circles_of(&files).is_empty());
    }

    #[test]
    fn paths_in_macros_attributes_and_globs_count() {
        let circle = [["a.rs", "b.rs"]];
        let b = ("p/src/b.rs", "pub struct B; pub fn f() {} use crate::a::A;");
        let lib = ("p/src/lib.rs", "mod a; mod b;");
        for a in [
            "pub struct A; fn f() { println!(\"{}\", crate::b::B); }",
            "pub struct A; #[derive(Serialize)] struct S { #[serde(with = \"crate::b\")] x: u8 }",
            "pub struct A; #[derive(Args)] struct S { #[arg(value_parser = crate::b::f)] x: u8 }",
            "pub struct A; use crate::b::*; fn g() { f() }",
            "pub struct A; fn g() -> Option<crate::b::B> { None }",
        ] {
            assert_eq!(circles_of(&[lib, ("p/src/a.rs", a), b]), circle, "{a}");
        }
        // A lone name no glob brings is a local (or another crate's), not an import.
        let a = ("p/src/a.rs", "pub struct A; fn g() { let f = 1; f; }");
        assert!(circles_of(&[lib, a, b]).is_empty());
    }

    #[test]
    fn macros_resolve_to_their_definition() {
        let files = [
            ("p/src/lib.rs", "mod a; mod b;"),
            (
                "p/src/a.rs",
                "#[macro_export] macro_rules! m { () => {} } fn f() { crate::b::g(); }",
            ),
            ("p/src/b.rs", "pub fn g() { crate::m!(); }"),
        ];
        assert_eq!(circles_of(&files), [["a.rs", "b.rs"]]);
        let files = [
            ("p/src/lib.rs", "#[macro_use] mod a; mod b;"),
            (
                "p/src/a.rs",
                "macro_rules! m { () => {} } fn f() { crate::b::g(); }",
            ),
            ("p/src/b.rs", "pub fn g() { m!(); }"),
        ];
        assert_eq!(circles_of(&files), [["a.rs", "b.rs"]]);
    }

    #[test]
    fn inline_modules_belong_to_their_file_and_super_is_followed() {
        let files = [
            ("p/src/lib.rs", "mod a; mod b;"),
            (
                "p/src/a.rs",
                "use crate::b::B; pub mod inner { pub struct I; }",
            ),
            (
                "p/src/b.rs",
                "pub struct B; mod x { fn f() { super::super::a::inner::I; } }",
            ),
        ];
        assert_eq!(circles_of(&files), [["a.rs", "b.rs"]]);
    }

    #[test]
    fn components_are_found_in_a_larger_graph() {
        // 0 → 1 → 2 → 0, 2 → 3, 3 → 4 → 3, 5 alone.
        let edges = [vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut found: Vec<Vec<usize>> = tarjan(6, |n| edges[n].clone())
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        found.sort();
        assert_eq!(found, [vec![0, 1, 2], vec![3, 4], vec![5]]);
    }
}
