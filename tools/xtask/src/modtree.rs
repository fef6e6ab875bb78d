//! The module tree of a package as `syn` reads it: each target's root (`src/lib.rs`,
//! `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`), the files its `mod x;` declarations
//! name (`x.rs`, `x/mod.rs`, or a `#[path]`), and the inline `mod x { ... }` blocks. Items under
//! `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) and `#[test]` functions are test code: they are
//! left out of the tree, and the files only they declare are listed apart.

use std::collections::BTreeMap;

use syn::punctuated::Punctuated;
use syn::{Attribute, Item, Meta, Token};

use crate::workspace::{Package, Tree};

/// One module of a target.
pub struct Module {
    /// Its parent module, none for a target's root.
    pub parent: Option<usize>,
    /// The file that holds it, relative to the workspace root.
    pub file: String,
    /// Whether it is written inline (`mod x { ... }`) in its parent's file.
    pub inline: bool,
    /// Its items, test code left out.
    pub items: Vec<Item>,
    /// Its child modules by name.
    pub children: BTreeMap<String, usize>,
}

/// Every module of one package's targets.
#[derive(Default)]
pub struct ModuleTree {
    /// The modules; each target's root has no parent.
    pub modules: Vec<Module>,
    /// Files only test code declares (`#[cfg(test)] mod tests;`), and theirs.
    pub test_files: Vec<String>,
    /// Files that are declared but missing or do not parse.
    pub errors: Vec<String>,
}

impl ModuleTree {
    /// The module trees of every target of `package` in `tree`.
    pub fn load(tree: &Tree, package: &Package) -> ModuleTree {
        let src = format!("{}/src", package.dir);
        let mut roots: Vec<String> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| format!("{src}/{f}"))
            .collect();
        let bin = format!("{src}/bin/");
        roots.extend(
            tree.rust_files(&format!("{src}/bin"))
                .into_iter()
                .filter(|f| {
                    let rest = &f[bin.len()..];
                    !rest.contains('/')
                        || (rest.matches('/').count() == 1 && rest.ends_with("/main.rs"))
                }),
        );
        let mut out = ModuleTree::default();
        for root in roots {
            if let Some(text) = tree.read(&root) {
                out.add_file(tree, None, String::new(), root, text, true);
            }
        }
        out
    }

    /// The file module that holds module `m` (itself unless it is inline).
    pub fn file_module(&self, mut m: usize) -> usize {
        while self.modules[m].inline {
            match self.modules[m].parent {
                Some(p) => m = p,
                None => break,
            }
        }
        m
    }

    /// The root of the target module `m` belongs to.
    pub fn root(&self, mut m: usize) -> usize {
        while let Some(p) = self.modules[m].parent {
            m = p;
        }
        m
    }

    fn add_file(
        &mut self,
        tree: &Tree,
        parent: Option<usize>,
        name: String,
        file: String,
        text: String,
        mod_rs: bool,
    ) {
        let items = match syn::parse_file(&text) {
            Ok(parsed) => parsed.items,
            Err(e) => {
                self.errors.push(format!("{file}: {e}"));
                Vec::new()
            }
        };
        let dir = parent_dir(&file);
        // Where `mod x;` looks: beside a root or mod.rs, in `foo/` for `foo.rs`.
        let children_dir = if mod_rs {
            dir.clone()
        } else {
            file.trim_end_matches(".rs").to_owned()
        };
        let id = self.push(parent, name, file, false);
        self.add_items(tree, id, items, &children_dir, &dir);
    }

    fn push(&mut self, parent: Option<usize>, name: String, file: String, inline: bool) -> usize {
        let id = self.modules.len();
        if let Some(p) = parent {
            self.modules[p].children.insert(name, id);
        }
        self.modules.push(Module {
            parent,
            file,
            inline,
            items: Vec::new(),
            children: BTreeMap::new(),
        });
        id
    }

    /// Add `items` to module `id`: `children_dir` is where its `mod x;` files are,
    /// `path_dir` what its `#[path]`s are relative to.
    fn add_items(
        &mut self,
        tree: &Tree,
        id: usize,
        items: Vec<Item>,
        children_dir: &str,
        path_dir: &str,
    ) {
        let mut kept = Vec::new();
        for item in items {
            let Item::Mod(module) = &item else {
                if !is_test(item_attrs(&item)) {
                    kept.push(item);
                }
                continue;
            };
            let name = module.ident.to_string();
            let test = is_test(&module.attrs);
            match &module.content {
                Some((_, inner)) => {
                    if test {
                        continue;
                    }
                    let file = self.modules[id].file.clone();
                    let child = self.push(Some(id), name.clone(), file, true);
                    let dir = format!("{children_dir}/{name}");
                    self.add_items(tree, child, inner.clone(), &dir, &dir);
                }
                None => {
                    let Some((file, text, mod_rs)) =
                        find_module_file(tree, module, &name, children_dir, path_dir)
                    else {
                        self.errors
                            .push(format!("{children_dir}: no file for `mod {name};`"));
                        continue;
                    };
                    if test {
                        self.add_test_file(tree, file, text, mod_rs);
                    } else {
                        self.add_file(tree, Some(id), name, file, text, mod_rs);
                    }
                }
            }
        }
        self.modules[id].items = kept;
    }

    /// Record a file only test code declares, and the files it declares.
    fn add_test_file(&mut self, tree: &Tree, file: String, text: String, mod_rs: bool) {
        let dir = parent_dir(&file);
        let children_dir = if mod_rs {
            dir.clone()
        } else {
            file.trim_end_matches(".rs").to_owned()
        };
        self.test_files.push(file);
        let Ok(parsed) = syn::parse_file(&text) else {
            return;
        };
        for item in parsed.items {
            if let Item::Mod(module) = item {
                if module.content.is_none() {
                    let name = module.ident.to_string();
                    if let Some((file, text, mod_rs)) =
                        find_module_file(tree, &module, &name, &children_dir, &dir)
                    {
                        self.add_test_file(tree, file, text, mod_rs);
                    }
                }
            }
        }
    }
}

/// The file of `mod name;`: its `#[path]`, else `name.rs`, else `name/mod.rs`; with its text
/// and whether it is a `mod.rs`-like file (its children sit beside it).
fn find_module_file(
    tree: &Tree,
    module: &syn::ItemMod,
    name: &str,
    children_dir: &str,
    path_dir: &str,
) -> Option<(String, String, bool)> {
    let explicit = module.attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    });
    let candidates = match explicit {
        Some(p) => vec![(normalize(&format!("{path_dir}/{p}")), true)],
        None => vec![
            (format!("{children_dir}/{name}.rs"), false),
            (format!("{children_dir}/{name}/mod.rs"), true),
        ],
    };
    candidates
        .into_iter()
        .find_map(|(file, mod_rs)| tree.read(&file).map(|text| (file, text, mod_rs)))
}

fn parent_dir(file: &str) -> String {
    file.rsplit_once('/')
        .map_or_else(String::new, |(d, _)| d.to_owned())
}

/// `a/b/../c.rs` as `a/c.rs`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The attributes of an item (none for the kinds that have none).
pub fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether attributes make an item test code: `#[cfg(test)]`, `#[cfg(all(test, ...))]`, or a
/// test function (`#[test]`, `#[tokio::test]`).
pub fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && attr
                .parse_args::<Meta>()
                .is_ok_and(|meta| implies_test(&meta))
    })
}

fn implies_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .is_ok_and(|all| all.iter().any(implies_test)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::memory;

    fn package() -> Package {
        Package {
            name: "p".into(),
            dir: "p".into(),
        }
    }

    #[test]
    fn files_are_found_in_both_layouts_and_test_modules_are_apart() {
        let tree = memory(&[
            (
                "p/src/lib.rs",
                "mod a; mod b; #[path = \"odd/place.rs\"] mod c; #[cfg(test)] mod t; mod i { mod j; }",
            ),
            ("p/src/a.rs", "mod deep; pub struct A;"),
            ("p/src/a/deep.rs", ""),
            ("p/src/b/mod.rs", "mod sub;"),
            ("p/src/b/sub.rs", ""),
            ("p/src/odd/place.rs", ""),
            ("p/src/t.rs", "mod helper;"),
            ("p/src/t/helper.rs", ""),
            ("p/src/i/j.rs", ""),
            ("p/src/bin/tool.rs", "fn main() {}"),
        ]);
        let mods = ModuleTree::load(&tree, &package());
        let files: Vec<&str> = mods.modules.iter().map(|m| m.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "p/src/lib.rs",
                "p/src/a.rs",
                "p/src/a/deep.rs",
                "p/src/b/mod.rs",
                "p/src/b/sub.rs",
                "p/src/odd/place.rs",
                "p/src/lib.rs",
                "p/src/i/j.rs",
                "p/src/bin/tool.rs",
            ]
        );
        assert_eq!(mods.test_files, ["p/src/t.rs", "p/src/t/helper.rs"]);
        assert!(mods.errors.is_empty(), "{:?}", mods.errors);
        assert_eq!(mods.file_module(7), 7);
        assert_eq!(mods.file_module(6), 0);
    }

    #[test]
    fn test_attributes_are_recognised() {
        let item: syn::ItemFn = syn::parse_quote! {
            #[cfg(all(test, unix))]
            fn f() {}
        };
        assert!(is_test(&item.attrs));
        let item: syn::ItemFn = syn::parse_quote! {
            #[tokio::test]
            async fn f() {}
        };
        assert!(is_test(&item.attrs));
        let item: syn::ItemFn = syn::parse_quote! {
            #[cfg(not(test))]
            fn f() {}
        };
        assert!(!is_test(&item.attrs));
        let item: syn::ItemFn = syn::parse_quote! {
            #[cfg(any(test, feature = "x"))]
            fn f() {}
        };
        assert!(!is_test(&item.attrs));
    }

    #[test]
    fn a_missing_module_file_is_reported() {
        let tree = memory(&[("p/src/main.rs", "mod gone;")]);
        let mods = ModuleTree::load(&tree, &package());
        assert_eq!(mods.errors.len(), 1);
        assert!(mods.errors[0].contains("mod gone;"), "{:?}", mods.errors);
    }
}
