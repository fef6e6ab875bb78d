//! What each module's code names (its items, imports and references, test code left out) and
//! where each name leads: the resolution the module graph of [`super`] is drawn from.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Item, UseTree};

use crate::modtree::{is_test, item_attrs, ModuleTree};

/// A name a module's code uses.
pub(super) struct Ref {
    pub(super) segs: Vec<String>,
    pub(super) line: usize,
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
pub(super) struct Scope {
    defined: BTreeSet<String>,
    imports: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    pub(super) refs: Vec<Ref>,
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
pub(super) struct Scopes<'t> {
    tree: &'t ModuleTree,
    pub(super) scopes: Vec<Scope>,
    /// `(root, name) → module` of each `macro_rules!`; `#[macro_export]` ones also answer
    /// `crate::name`.
    macros: BTreeMap<(usize, String), usize>,
    exported: BTreeSet<(usize, String)>,
}

impl<'t> Scopes<'t> {
    pub(super) fn of(tree: &'t ModuleTree) -> Scopes<'t> {
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
    pub(super) fn resolve_ref(&self, m: usize, r: &Ref) -> Option<usize> {
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
                self.scan_tokens(list.tokens.clone());
            } else if let syn::Meta::NameValue(nv) = &attr.meta {
                self.scan_literals(quote::ToTokens::to_token_stream(&nv.value));
            }
        }
    }
}
