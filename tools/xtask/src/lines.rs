//! `cargo xtask lines [REV] [--by-file]`: how big the product is. The lines of code of the seven published
//! crates: non-blank lines of their `src/**/*.rs` that hold a token, so comments (doc comments
//! included) and blank lines do not count, nor test code (`#[cfg(test)]` items, `#[test]`
//! functions, and files only test code declares). With a revision, the same for it (read with
//! git, in whichever layout it has) and the change. With `--by-file`, each crate's files too,
//! named relative to the crate so both layouts line up, which tells the code a change added (a
//! file marked `new`) from the code it reworked.

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
    /// Also list each crate's files (paths relative to the crate), with their change against
    /// REV: a file REV does not have is marked `new`, one REV has and the tree lost `gone`.
    #[arg(long)]
    pub by_file: bool,
}

/// The lines of code of each file of each product crate, by crate name and then by the file's
/// path relative to the crate's directory (`src/lib.rs`), so that both layouts compare file by
/// file.
type Counts = BTreeMap<&'static str, BTreeMap<String, usize>>;

/// One row of the table: a crate, one of its files, or the total. A count is `None` where the
/// file is not in that tree.
struct Row {
    name: String,
    before: Option<usize>,
    after: Option<usize>,
}

/// Print the lines of each product crate and their total, beside those of `REV` if given, and
/// with `--by-file` those of each file above its crate.
pub fn run(args: LinesArgs) -> Result<ExitCode, String> {
    let now = Tree::disk();
    let now_counts = count(&now)?;
    let then = args.rev.as_deref().map(Tree::at).transpose()?;
    let then_counts = then.as_ref().map(count).transpose()?;
    let rows = rows(then_counts.as_ref(), &now_counts, args.by_file);
    let labels = then.map(|t| (t.label(), now.label()));
    print!("{}", render(&rows, labels.as_ref()));
    Ok(ExitCode::SUCCESS)
}

/// The rows for the counts of the tree (`now`) and of the revision if any (`then`): each crate
/// (after its files with `by_file`), then the total.
fn rows(then: Option<&Counts>, now: &Counts, by_file: bool) -> Vec<Row> {
    let empty = BTreeMap::new();
    let mut rows = Vec::new();
    for name in PRODUCT {
        let now_files = now.get(name).unwrap_or(&empty);
        let then_files = then.map(|t| t.get(name).unwrap_or(&empty));
        if by_file {
            let paths: BTreeSet<&String> = now_files
                .keys()
                .chain(then_files.into_iter().flat_map(BTreeMap::keys))
                .collect();
            rows.extend(paths.into_iter().map(|path| Row {
                name: format!("  {path}"),
                before: then_files.and_then(|f| f.get(path).copied()),
                after: now_files.get(path).copied(),
            }));
        }
        rows.push(Row {
            name: name.to_owned(),
            before: then_files.map(|f| f.values().sum()),
            after: Some(now_files.values().sum()),
        });
    }
    let total = |c: &Counts| c.values().flat_map(BTreeMap::values).sum();
    rows.push(Row {
        name: "total".to_owned(),
        before: then.map(total),
        after: Some(total(now)),
    });
    rows
}

/// The table of `rows`: names and counts, and with the labels of a revision and the tree, the
/// revision's counts and the change (`new` or `gone` for a file only one of them has).
fn render(rows: &[Row], labels: Option<&(String, String)>) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(18);
    let count = |n: Option<usize>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut out = String::new();
    let Some((then, now)) = labels else {
        out.push_str(&format!("{:<width$} {:>8}\n", "crate", "lines"));
        for row in rows {
            out.push_str(&format!("{:<width$} {:>8}\n", row.name, count(row.after)));
        }
        return out;
    };
    out.push_str(&format!(
        "{:<width$} {then:>10} {now:>12} {:>8}\n",
        "crate", "change"
    ));
    for row in rows {
        let mark = match (row.before, row.after) {
            (None, _) => "new".to_owned(),
            (_, None) => "gone".to_owned(),
            (Some(before), Some(after)) => change(before, after),
        };
        out.push_str(&format!(
            "{:<width$} {:>10} {:>12} {mark:>8}\n",
            row.name,
            count(row.before),
            count(row.after)
        ));
    }
    out
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

/// The lines of code of each file of each product crate in `tree`.
fn count(tree: &Tree) -> Result<Counts, String> {
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
        let mut files = BTreeMap::new();
        for file in tree.rust_files(&format!("{}/src", package.dir)) {
            if tests.contains(&file) {
                continue;
            }
            let text = tree
                .read(&file)
                .ok_or_else(|| format!("{}: cannot read {file}", tree.label()))?;
            let lines = code_lines(&text).map_err(|e| format!("{}: {file}: {e}", tree.label()))?;
            let relative = file
                .strip_prefix(&format!("{}/", package.dir))
                .unwrap_or(&file);
            files.insert(relative.to_owned(), lines);
        }
        out.insert(name, files);
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
            // `mod a;` and `fn a() {}` for each crate: the test module is out. Files are named
            // relative to their crate, whatever the layout.
            for files in counts.values() {
                let expected =
                    BTreeMap::from([("src/a.rs".to_owned(), 1), ("src/lib.rs".to_owned(), 1)]);
                assert_eq!(files, &expected, "{root}");
            }
        }
    }

    #[test]
    fn by_file_marks_new_and_gone_files_and_sums_each_crate() {
        let files = |pairs: &[(&str, usize)]| -> BTreeMap<String, usize> {
            pairs.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect()
        };
        let then: Counts = BTreeMap::from([
            (
                "ors-core",
                files(&[("src/lib.rs", 100), ("src/old.rs", 40)]),
            ),
            ("ors-cli", files(&[("src/main.rs", 50)])),
        ]);
        let now: Counts = BTreeMap::from([
            ("ors-core", files(&[("src/lib.rs", 90), ("src/new.rs", 30)])),
            ("ors-cli", files(&[("src/main.rs", 50)])),
        ]);
        let labels = ("258faae".to_owned(), "working tree".to_owned());
        let table = render(&rows(Some(&then), &now, true), Some(&labels));
        let cells: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let row = |name: &str| {
            cells
                .iter()
                .find(|c| c.first() == Some(&name))
                .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
                .clone()
        };
        assert_eq!(row("src/lib.rs"), ["src/lib.rs", "100", "90", "-10.0%"]);
        assert_eq!(row("src/old.rs"), ["src/old.rs", "40", "-", "gone"]);
        assert_eq!(row("src/new.rs"), ["src/new.rs", "-", "30", "new"]);
        assert_eq!(row("ors-core"), ["ors-core", "140", "120", "-14.3%"]);
        assert_eq!(row("total"), ["total", "190", "170", "-10.5%"]);
        // A crate's files come right above it, and a crate neither tree has counts 0.
        let core = cells.iter().position(|c| c[0] == "ors-core").unwrap();
        assert_eq!(
            cells[core - 3..core]
                .iter()
                .map(|c| c[0])
                .collect::<Vec<_>>(),
            ["src/lib.rs", "src/new.rs", "src/old.rs"]
        );
        assert_eq!(row("ors-server"), ["ors-server", "0", "0", "-"]);

        // Without --by-file, one row per crate; without a revision, one count per row.
        let crates = render(&rows(Some(&then), &now, false), Some(&labels));
        assert_eq!(crates.lines().count(), 1 + PRODUCT.len() + 1, "{crates}");
        let alone = render(&rows(None, &now, true), None);
        assert!(
            alone
                .lines()
                .any(|l| l.split_whitespace().eq(["src/new.rs", "30"])),
            "{alone}"
        );
        assert!(!alone.contains("old.rs"), "{alone}");
    }

    #[test]
    fn change_is_a_signed_percentage() {
        assert_eq!(change(200, 180), "-10.0%");
        assert_eq!(change(200, 201), "+0.5%");
        assert_eq!(change(0, 5), "-");
    }
}
