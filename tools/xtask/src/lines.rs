//! `cargo xtask lines [REV]`: how big the product is. The lines of code of the seven published
//! crates: non-blank lines of their `src/**/*.rs` that hold a token, so comments (doc comments
//! included) and blank lines do not count, nor test code (`#[cfg(test)]` items, `#[test]`
//! functions, and files only test code declares). With a revision, the same for it (read with
//! git, in whichever layout it has) and the change.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::Item;

use crate::modtree::{is_test, item_attrs, ModuleTree};
use crate::workspace::{Tree, PRODUCT};

/// Arguments of `cargo xtask lines`.
#[derive(clap::Args)]
pub struct LinesArgs {
    /// A git revision to compare the working tree with (e.g. `258faae`).
    #[arg(value_name = "REV")]
    pub rev: Option<String>,
}

/// Print the lines of each product crate and their total, beside those of `REV` if given.
pub fn run(args: LinesArgs) -> Result<ExitCode, String> {
    let now = Tree::disk();
    let now_counts = count(&now)?;
    let Some(rev) = args.rev else {
        println!("{:<18} {:>8}", "crate", "lines");
        for name in PRODUCT {
            println!(
                "{name:<18} {:>8}",
                now_counts.get(name).copied().unwrap_or(0)
            );
        }
        println!("{:<18} {:>8}", "total", now_counts.values().sum::<usize>());
        return Ok(ExitCode::SUCCESS);
    };
    let then = Tree::at(&rev)?;
    let then_counts = count(&then)?;
    println!(
        "{:<18} {:>10} {:>12} {:>8}",
        "crate",
        rev,
        now.label(),
        "change"
    );
    let row = |name: &str, before: usize, after: usize| {
        println!(
            "{name:<18} {before:>10} {after:>12} {:>8}",
            change(before, after)
        );
    };
    for name in PRODUCT {
        row(
            name,
            then_counts.get(name).copied().unwrap_or(0),
            now_counts.get(name).copied().unwrap_or(0),
        );
    }
    row(
        "total",
        then_counts.values().sum(),
        now_counts.values().sum(),
    );
    Ok(ExitCode::SUCCESS)
}

fn change(before: usize, after: usize) -> String {
    if before == 0 {
        return "-".to_owned();
    }
    format!(
        "{:+.1}%",
        (after as f64 - before as f64) * 100.0 / before as f64
    )
}

/// The lines of code of each product crate in `tree`, in [`PRODUCT`]'s order.
fn count(tree: &Tree) -> Result<BTreeMap<&'static str, usize>, String> {
    let packages = tree.packages()?;
    let mut out = BTreeMap::new();
    for name in PRODUCT {
        let package = packages
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("{}: no crate {name}", tree.label()))?;
        let tests: BTreeSet<String> = ModuleTree::load(tree, package)
            .test_files
            .into_iter()
            .collect();
        let mut total = 0;
        for file in tree.rust_files(&format!("{}/src", package.dir)) {
            if tests.contains(&file) {
                continue;
            }
            let text = tree
                .read(&file)
                .ok_or_else(|| format!("{}: cannot read {file}", tree.label()))?;
            total += code_lines(&text).map_err(|e| format!("{}: {file}: {e}", tree.label()))?;
        }
        out.insert(name, total);
    }
    Ok(out)
}

/// The lines of `text` that hold a token outside comments and test code.
fn code_lines(text: &str) -> Result<usize, String> {
    let file = syn::parse_file(text).map_err(|e| e.to_string())?;
    let mut tests = Vec::new();
    test_ranges(&file.items, &mut tests);
    let tokens: TokenStream = text
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    let lines: Vec<&str> = text.lines().collect();
    let mut code = BTreeSet::new();
    mark(tokens, &lines, &mut code);
    Ok(code
        .into_iter()
        .filter(|l| !tests.iter().any(|(from, to)| (from..=to).contains(&l)))
        .filter(|l| lines.get(l - 1).is_some_and(|s| !s.trim().is_empty()))
        .count())
}

/// The line ranges of test items, at any depth of inline modules and impls.
fn test_ranges(items: &[Item], out: &mut Vec<(usize, usize)>) {
    for item in items {
        let span = item.span();
        if is_test(item_attrs(item)) {
            out.push((span.start().line, span.end().line));
            continue;
        }
        match item {
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    test_ranges(inner, out);
                }
            }
            Item::Impl(i) => {
                for f in &i.items {
                    if let syn::ImplItem::Fn(f) = f {
                        if is_test(&f.attrs) {
                            let span = f.span();
                            out.push((span.start().line, span.end().line));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Mark the lines (1-based) that tokens occupy; doc comments, which the lexer turns into
/// `#[doc]` attributes spanning the comment, are left out.
fn mark(tokens: TokenStream, lines: &[&str], code: &mut BTreeSet<usize>) {
    for token in tokens {
        let span = token.span();
        let start = span.start();
        let is_comment = lines
            .get(start.line.wrapping_sub(1))
            .map(|l| l.chars().skip(start.column).take(2).collect::<String>())
            .is_some_and(|s| s == "//" || s == "/*");
        if is_comment {
            continue;
        }
        match token {
            TokenTree::Group(g) => {
                code.insert(g.span_open().start().line);
                code.insert(g.span_close().end().line);
                mark(g.stream(), lines, code);
            }
            other => {
                let span = other.span();
                code.extend(span.start().line..=span.end().line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blanks_and_tests_are_not_code() {
        let text = r#"//! The crate.

/// A thing.
pub struct A; // trailing comments do not hide code

/* a block
   comment */
/** an outer
    block doc */
fn f() -> &'static str {
    "a string
    over lines"
}

#[cfg(test)]
mod tests {
    #[test]
    fn t() {}
}

impl A {
    #[test]
    fn t() {}

    fn g() {}
}
"#;
        // pub struct A; / fn f() { / "a string / over lines" / } / impl A { / fn g() {} / }
        assert_eq!(code_lines(text).unwrap(), 8);
    }

    #[test]
    fn test_files_are_left_out_and_both_layouts_count() {
        let crates = |root: &str| {
            let mut files = vec![(
                "Cargo.toml".to_owned(),
                format!(
                    "[workspace]\nmembers = [{}]\n",
                    PRODUCT
                        .iter()
                        .map(|c| format!("\"{root}{c}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )];
            for c in PRODUCT {
                files.push((
                    format!("{root}{c}/Cargo.toml"),
                    format!("[package]\nname = \"{c}\"\n"),
                ));
                files.push((
                    format!("{root}{c}/src/lib.rs"),
                    "mod a;\n#[cfg(test)]\nmod t;\n".to_owned(),
                ));
                files.push((format!("{root}{c}/src/a.rs"), "fn a() {}\n".to_owned()));
                files.push((format!("{root}{c}/src/t.rs"), "fn t() {}\n".to_owned()));
            }
            files
        };
        for root in ["", "crates/"] {
            let files = crates(root);
            let pairs: Vec<(&str, &str)> = files
                .iter()
                .map(|(p, t)| (p.as_str(), t.as_str()))
                .collect();
            let counts = count(&crate::workspace::memory(&pairs)).unwrap();
            assert_eq!(counts.len(), 7);
            // `mod a;` and `fn a() {}` for each crate: the test module is out.
            assert!(counts.values().all(|n| *n == 2), "{root}: {counts:?}");
        }
    }

    #[test]
    fn change_is_a_signed_percentage() {
        assert_eq!(change(200, 180), "-10.0%");
        assert_eq!(change(200, 201), "+0.5%");
        assert_eq!(change(0, 5), "-");
    }
}
