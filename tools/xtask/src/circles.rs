//! `cargo xtask circles [--crate NAME] [--rev REV]`: the import circles inside each crate.
//!
//! For each member of the workspace, a graph with one node per module file (inline modules
//! belong to their file) and an edge A → B when A's code names an item of B. A circle is a
//! strongly connected component of more than one node, looked for at each module among its own
//! file and its children, each child taken with everything below it: a reference between two
//! files counts at their nearest common ancestor. So a file circle is always found (at the
//! module holding its files), and so is `agent/ ↔ rollout/` when no single file of either names
//! the other back. The command prints each circle with one reference behind each of its edges,
//! and the totals per crate; it fails when a crate has a circle, except the crates in
//! [`PENDING`], whose circles it prints only.
//!
//! What is resolved, from `syn`'s parse of each file (no build, so it also reads old revisions):
//! - paths: `use` trees (groups, `self`, renames), paths in types, expressions, patterns and
//!   trait bounds, `path::to!` macros, and `a::b` paths inside macro arguments (`format!`,
//!   `matches!`, `$crate::...` in `macro_rules!` bodies) and in string attributes
//!   (`#[serde(with = "crate::x")]`);
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

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Item, UseTree};

use crate::modtree::{is_test, item_attrs, ModuleTree};
use crate::workspace::{Package, Tree};

/// Crates whose circles are printed but do not fail the command yet: their modules are being
/// rewritten (issue 22), and the check joins `cargo xtask test` once they are clean.
const PENDING: [&str; 2] = ["ors-server", "ors-runtime"];

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

/// Print the circles of every crate (or one); fail when a crate outside [`PENDING`] has one.
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
        graph.print(package, &circles);
        rows.push((package, graph, circles.len()));
    }
    println!(
        "\n{:<18} {:>7} {:>6} {:>7}",
        "crate", "modules", "edges", "circles"
    );
    let (mut failing, mut pending) = (Vec::new(), Vec::new());
    for (package, graph, circles) in &rows {
        println!(
            "{:<18} {:>7} {:>6} {:>7}",
            package.name,
            graph.labels.len(),
            graph.edge_count(),
            circles
        );
        if *circles > 0 {
            if PENDING.contains(&package.name.as_str()) {
                pending.push(package.name.as_str());
            } else {
                failing.push(package.name.as_str());
            }
        }
    }
    if !pending.is_empty() {
        println!(
            "{}: circles printed only, being removed (issue 22)",
            pending.join(", ")
        );
    }
    if failing.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("xtask: circles: import circles in {}", failing.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

/// The module graph of one package: file modules and the references between them.
pub struct Graph {
    /// Each file module, relative to the package's `src/`.
    labels: Vec<String>,
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
        let mut parents = Vec::new();
        for (i, m) in modules.modules.iter().enumerate() {
            if !m.inline {
                node.insert(i, labels.len());
                labels.push(m.file.strip_prefix(&src).unwrap_or(&m.file).to_owned());
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

    fn print(&self, package: &Package, circles: &[Circle]) {
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
            let names: Vec<String> = circle
                .members
                .iter()
                .map(|m| self.member_label(circle.level, *m))
                .collect();
            println!(
                "  circle {} (in {}): {}",
                k + 1,
                self.labels[circle.level],
                names.join(", ")
            );
            for (from, to) in &circle.edges {
                if let Some((line, path)) = self.edges.get(from).and_then(|t| t.get(to)) {
                    println!(
                        "    {} -> {}: {path} (line {line})",
                        self.labels[*from], self.labels[*to]
                    );
                }
            }
        }
    }
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

/// A name a module's code uses.
struct Ref {
    segs: Vec<String>,
    line: usize,
    kind: RefKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    /// A path (or the first segments of one).
    Path,
    /// A lone identifier: found only through a glob import.
    Name,
    /// A lone macro name: through imports, globs, or the `macro_rules!` that defines it.
    Macro,
}

/// What one module names: items it defines, its imports, and the references of its code.
#[derive(Default)]
struct Scope {
    defined: BTreeSet<String>,
    imports: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    refs: Vec<Ref>,
}

/// Where a path leads: a module, an item defined in a module, or another crate.
#[derive(Clone, Copy)]
enum Found {
    Module(usize),
    Item(usize),
    /// Imported from another crate (`pub use ors_core::Provider`).
    Elsewhere,
}

/// The scopes of every module of a tree, and name resolution across them.
struct Scopes<'t> {
    tree: &'t ModuleTree,
    scopes: Vec<Scope>,
    /// `(root, name) → module` of each `macro_rules!`; `#[macro_export]` ones also answer
    /// `crate::name`.
    macros: BTreeMap<(usize, String), usize>,
    exported: BTreeSet<(usize, String)>,
}

impl<'t> Scopes<'t> {
    fn of(tree: &'t ModuleTree) -> Scopes<'t> {
        let mut scopes = Scopes {
            tree,
            scopes: Vec::new(),
            macros: BTreeMap::new(),
            exported: BTreeSet::new(),
        };
        for (m, module) in tree.modules.iter().enumerate() {
            let mut scope = Scope::default();
            let mut collect = Collect {
                refs: &mut scope.refs,
            };
            for item in &module.items {
                collect.visit_item(item);
            }
            for item in &module.items {
                if let Some(name) = defined_name(item) {
                    scope.defined.insert(name);
                }
                match item {
                    Item::Use(u) => {
                        let mut entries = Vec::new();
                        expand_use(&u.tree, Vec::new(), &mut entries);
                        for (name, path) in entries {
                            match name {
                                UseName::Name(n) => {
                                    scope.imports.insert(n, path);
                                }
                                UseName::Glob => scope.globs.push(path),
                                UseName::Anonymous => {}
                            }
                        }
                    }
                    Item::Macro(mac) => {
                        if let Some(ident) = &mac.ident {
                            let root = tree.root(m);
                            scopes.macros.insert((root, ident.to_string()), m);
                            if mac.attrs.iter().any(|a| a.path().is_ident("macro_export")) {
                                scopes.exported.insert((root, ident.to_string()));
                            }
                        }
                    }
                    _ => {}
                }
            }
            scopes.scopes.push(scope);
        }
        scopes
    }

    /// The module a reference of module `m` leads to.
    fn resolve_ref(&self, m: usize, r: &Ref) -> Option<usize> {
        let mut stack = Vec::new();
        let found = match r.kind {
            RefKind::Path => self.resolve(m, &r.segs, &mut stack),
            RefKind::Name => {
                let name = r.segs.first()?;
                if self.names_locally(m, name) {
                    return None;
                }
                self.through_globs(m, name, &mut stack)
            }
            RefKind::Macro => {
                let name = r.segs.first()?;
                self.lookup(m, name, &mut stack).or_else(|| {
                    self.macros
                        .get(&(self.tree.root(m), name.clone()))
                        .map(|d| Found::Item(*d))
                })
            }
        }?;
        match found {
            Found::Module(d) | Found::Item(d) => Some(d),
            Found::Elsewhere => None,
        }
    }

    /// Whether `m` names `name` itself (child, item or named import), which hides globs.
    fn names_locally(&self, m: usize, name: &str) -> bool {
        let scope = &self.scopes[m];
        self.tree.modules[m].children.contains_key(name)
            || scope.defined.contains(name)
            || scope.imports.contains_key(name)
    }

    /// What `name` is in module `x`'s namespace.
    fn lookup(&self, x: usize, name: &str, stack: &mut Vec<(usize, String)>) -> Option<Found> {
        if let Some(c) = self.tree.modules[x].children.get(name) {
            return Some(Found::Module(*c));
        }
        let scope = &self.scopes[x];
        if scope.defined.contains(name) {
            return Some(Found::Item(x));
        }
        if self.tree.modules[x].parent.is_none() && self.exported.contains(&(x, name.to_owned())) {
            return self
                .macros
                .get(&(x, name.to_owned()))
                .map(|d| Found::Item(*d));
        }
        let key = (x, name.to_owned());
        if stack.contains(&key) {
            return None;
        }
        stack.push(key);
        let found = match scope.imports.get(name) {
            Some(path) => Some(self.resolve(x, path, stack).unwrap_or(Found::Elsewhere)),
            None => self.through_globs(x, name, stack),
        };
        stack.pop();
        found
    }

    fn through_globs(
        &self,
        x: usize,
        name: &str,
        stack: &mut Vec<(usize, String)>,
    ) -> Option<Found> {
        self.scopes[x]
            .globs
            .iter()
            .find_map(|glob| match self.resolve(x, glob, stack)? {
                Found::Module(g) => self.lookup(g, name, stack),
                Found::Item(_) | Found::Elsewhere => None,
            })
    }

    /// Where path `segs`, written in module `m`, leads; none for other crates and locals.
    fn resolve(
        &self,
        m: usize,
        segs: &[String],
        stack: &mut Vec<(usize, String)>,
    ) -> Option<Found> {
        let first = segs.first()?;
        let (mut cur, mut i) = match first.as_str() {
            "crate" => (self.tree.root(m), 1),
            "self" => (m, 1),
            "super" => {
                let mut cur = m;
                let mut i = 0;
                while segs.get(i).is_some_and(|s| s == "super") {
                    cur = self.tree.modules[cur].parent?;
                    i += 1;
                }
                (cur, i)
            }
            "Self" => return None,
            name => match self.lookup(m, name, stack)? {
                Found::Module(c) => (c, 1),
                item => return Some(item),
            },
        };
        while let Some(seg) = segs.get(i) {
            match self.lookup(cur, seg, stack) {
                Some(Found::Module(c)) => {
                    cur = c;
                    i += 1;
                }
                Some(item) => return Some(item),
                // A name made by a macro or a derive: the module reached is as far as it goes.
                None => return Some(Found::Item(cur)),
            }
        }
        Some(Found::Module(cur))
    }
}

/// The name an item defines in its module's namespace (modules are children, not names).
fn defined_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The name a `use` entry binds.
enum UseName {
    Name(String),
    Glob,
    /// `use x as _` (a trait brought into scope for its methods).
    Anonymous,
}

/// The entries of a use tree, each with its full path (`self` resolved to its module).
fn expand_use(tree: &UseTree, prefix: Vec<String>, out: &mut Vec<(UseName, Vec<String>)>) {
    let join = |ident: &syn::Ident| {
        let mut path = prefix.clone();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        UseTree::Path(p) => expand_use(&p.tree, join(&p.ident), out),
        UseTree::Name(n) => {
            let path = join(&n.ident);
            if let Some(last) = path.last() {
                out.push((UseName::Name(last.clone()), path));
            }
        }
        UseTree::Rename(r) => {
            let name = if r.rename == "_" {
                UseName::Anonymous
            } else {
                UseName::Name(r.rename.to_string())
            };
            out.push((name, join(&r.ident)));
        }
        UseTree::Glob(_) => out.push((UseName::Glob, prefix)),
        UseTree::Group(g) => {
            for t in &g.items {
                expand_use(t, prefix.clone(), out);
            }
        }
    }
}

/// Collects the references of one module's items, test code and inline modules left out.
struct Collect<'r> {
    refs: &'r mut Vec<Ref>,
}

impl Collect<'_> {
    fn push(&mut self, segs: Vec<String>, line: usize, kind: RefKind) {
        if !segs.is_empty() {
            self.refs.push(Ref { segs, line, kind });
        }
    }

    /// `a::b` paths among the tokens of a macro call.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    let mut segs = vec![first.to_string()];
                    let mut j = i + 1;
                    while let (Some(a), Some(b), Some(TokenTree::Ident(next))) =
                        (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if !(is_colon(a) && is_colon(b)) {
                            break;
                        }
                        segs.push(next.to_string());
                        j += 3;
                    }
                    if segs.len() > 1 {
                        self.push(segs, first.span().start().line, RefKind::Path);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }

    /// Paths written as strings in attributes (`#[serde(with = "crate::x")]`).
    fn scan_literals(&mut self, tokens: TokenStream) {
        for token in tokens {
            match token {
                TokenTree::Group(g) => self.scan_literals(g.stream()),
                TokenTree::Literal(lit) => {
                    let line = lit.span().start().line;
                    let Ok(s) = syn::parse2::<syn::LitStr>(TokenTree::Literal(lit).into()) else {
                        continue;
                    };
                    if let Ok(path) = syn::parse_str::<syn::Path>(&s.value()) {
                        if path.leading_colon.is_none() && path.segments.len() > 1 {
                            let segs = path.segments.iter().map(|s| s.ident.to_string()).collect();
                            self.push(segs, line, RefKind::Path);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn is_colon(token: &TokenTree) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == ':')
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test(item_attrs(item)) {
            return;
        }
        match item {
            // Inline modules are modules of their own; file modules were never items here.
            Item::Mod(_) => {}
            Item::Use(u) => {
                let mut entries = Vec::new();
                expand_use(&u.tree, Vec::new(), &mut entries);
                let line = u.use_token.span.start().line;
                for (_, path) in entries {
                    self.push(path, line, RefKind::Path);
                }
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_trait_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            let kind = if segs.len() == 1 {
                RefKind::Name
            } else {
                RefKind::Path
            };
            self.push(segs, line, kind);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if mac.path.leading_colon.is_none() {
            let segs: Vec<String> = mac
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            let line = mac
                .path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            let kind = if segs.len() == 1 {
                RefKind::Macro
            } else {
                RefKind::Path
            };
            self.push(segs, line, kind);
        }
        self.scan_tokens(mac.tokens.clone());
    }

    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if !attr.path().is_ident("doc") {
            if let syn::Meta::List(list) = &attr.meta {
                self.scan_literals(list.tokens.clone());
            } else if let syn::Meta::NameValue(nv) = &attr.meta {
                self.scan_literals(quote::ToTokens::to_token_stream(&nv.value));
            }
        }
    }
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
