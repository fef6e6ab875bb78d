//! The settings tables of the guides, made from the declarations of `ServerConfig` and the
//! client's `Config` (field, variable, default, doc): `cargo xtask readme --settings` writes
//! them, and a test fails while a page's differ.
//!
//! A table sits between `<!-- settings: NAME ... -->` and `<!-- /settings -->`, in the page its
//! declaration names (a path from the workspace root); a table of that name in another page is
//! an error, so a table cannot be left behind when it moves.

use ors_core::settings::Setting;

use crate::pages::Page;

/// The opening of a table's marker, before its name.
const OPEN: &str = "<!-- settings: ";

/// Each table's name, the page that holds it, and its rows.
fn declarations() -> [(&'static str, &'static str, Vec<Setting>); 2] {
    [
        (
            "ServerConfig",
            "docs/serving.md",
            ors_server::ServerConfig::settings(),
        ),
        (
            "Config",
            "docs/client-and-eval.md",
            ors_client::Config::settings(),
        ),
    ]
}

/// The Markdown table of `rows`.
fn table(rows: &[Setting]) -> String {
    let mut out =
        String::from("| setting | variable | default | what it does |\n|---|---|---|---|\n");
    for row in rows {
        let var = row.var.map_or_else(|| "—".to_owned(), |v| format!("`{v}`"));
        out.push_str(&format!(
            "| `{}` | {var} | {} | {} |\n",
            row.field, row.default, row.doc
        ));
    }
    out
}

/// The names of the tables marked in `text`, in order.
fn marked(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.strip_prefix(OPEN))
        .filter_map(|rest| rest.split([' ', '\t']).next())
        .collect()
}

/// `text`, the page at `path`, with every settings table declared for it made anew; an error
/// names a table the page lacks, or one it holds that is declared for another page.
pub fn with_tables(path: &str, text: &str) -> Result<String, String> {
    let declared = declarations();
    for name in marked(text) {
        match declared.iter().find(|(n, _, _)| *n == name) {
            Some((_, home, _)) if *home != path => {
                return Err(format!(
                    "{path} has a {name} settings table, which belongs in {home} (see \
                     tools/xtask/src/settings.rs)"
                ))
            }
            Some(_) => {}
            None => {
                return Err(format!(
                    "{path} has a settings table of no declaration: {name}"
                ))
            }
        }
    }
    let mut out = text.to_owned();
    for (name, _, rows) in declared.iter().filter(|(_, home, _)| *home == path) {
        let open = format!("{OPEN}{name} ");
        let start = out
            .find(&open)
            .and_then(|i| out[i..].find("-->\n").map(|j| i + j + 4))
            .ok_or_else(|| format!("{path} has no `{open}...-->` line"))?;
        let end = out[start..]
            .find("<!-- /settings -->")
            .map(|j| start + j)
            .ok_or_else(|| format!("{path}'s {name} table has no `<!-- /settings -->`"))?;
        out.replace_range(start..end, &table(rows));
    }
    Ok(out)
}

/// The pages that hold tables, each once.
fn homes() -> Vec<&'static str> {
    let mut homes: Vec<&str> = declarations().iter().map(|(_, home, _)| *home).collect();
    homes.sort_unstable();
    homes.dedup();
    homes
}

/// Rewrite the settings tables from the declarations, in the pages that hold them.
pub fn write() -> Result<(), String> {
    let root = crate::workspace::workspace_root();
    for home in homes() {
        let path = root.join(home);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {home}: {e}"))?;
        let made = with_tables(home, &text)?;
        if made != text {
            std::fs::write(&path, made).map_err(|e| format!("writing {home}: {e}"))?;
            println!("{home}: settings tables written");
        } else {
            println!("{home}: settings tables already up to date");
        }
    }
    Ok(())
}

/// An error unless every page's settings tables are the declarations' and every declared
/// table is in its page.
pub fn check(pages: &[Page]) -> Result<(), String> {
    for home in homes() {
        if !pages.iter().any(|page| page.path == home) {
            return Err(format!("{home}, which holds settings tables, is missing"));
        }
    }
    for page in pages {
        if with_tables(&page.path, &page.text)? != page.text {
            return Err(format!(
                "{}'s settings tables differ from the declarations in \
                 crates/ors-server/src/config.rs and crates/ors-client/src/config.rs: run \
                 `cargo xtask readme --settings`",
                page.path
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(path: &str, text: &str) -> Page {
        Page {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn the_settings_tables_are_made_from_the_declarations() {
        let pages = crate::pages::pages(&crate::workspace::workspace_root()).expect("pages");
        check(&pages).unwrap();
    }

    #[test]
    fn a_table_is_replaced_between_its_markers() {
        let serving = "a\n<!-- settings: ServerConfig (x) -->\n| old |\n<!-- /settings -->\nb\n";
        let made = with_tables("docs/serving.md", serving).unwrap();
        assert!(made.starts_with("a\n<!-- settings: ServerConfig (x) -->\n| setting |"));
        assert!(made.contains("| `port` | `ORS_PORT` | 8080 | Port to listen on"));
        assert!(!made.contains("| old |"));
        assert!(made.ends_with("<!-- /settings -->\nb\n"));
        assert_eq!(with_tables("docs/serving.md", &made).unwrap(), made);
        let client = "<!-- settings: Config -->\n<!-- /settings -->\n";
        let made_client = with_tables("docs/client-and-eval.md", client).unwrap();
        assert!(made_client.contains("| `max_retries` | — | 3 |"));
        let pages = [
            page("README.md", "no tables\n"),
            page("docs/serving.md", &made),
            page("docs/client-and-eval.md", &made_client),
        ];
        check(&pages).unwrap();
        // A stale table, a missing one, a missing page: each an error.
        let stale = [
            page("docs/serving.md", serving),
            page("docs/client-and-eval.md", &made_client),
        ];
        assert!(check(&stale).is_err());
        assert!(with_tables("docs/serving.md", "no tables").is_err());
        assert!(check(&pages[..2]).is_err());
    }

    #[test]
    fn a_table_in_another_page_than_its_declarations_is_an_error() {
        let text = "<!-- settings: ServerConfig (x) -->\n<!-- /settings -->\n";
        let err = with_tables("README.md", text).unwrap_err();
        assert!(err.contains("belongs in docs/serving.md"), "{err}");
        let err = with_tables("README.md", "<!-- settings: Nothing -->\n").unwrap_err();
        assert!(err.contains("Nothing"), "{err}");
        assert_eq!(marked("x\n<!-- settings: Config (y) -->\n"), ["Config"]);
    }
}
