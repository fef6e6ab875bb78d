//! The README's settings tables, made from the declarations of `ServerConfig` and the
//! client's `Config` (field, variable, default, doc): `cargo xtask readme --settings` writes
//! them, and a test fails while the README's differ.
//!
//! A table sits between `<!-- settings: NAME ... -->` and `<!-- /settings -->`.

use ors_core::settings::Setting;

/// Each table's name and rows.
fn declarations() -> [(&'static str, Vec<Setting>); 2] {
    [
        ("ServerConfig", ors_server::ServerConfig::settings()),
        ("Config", ors_client::Config::settings()),
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

/// `readme` with every settings table made anew; an error names a table the README lacks.
pub fn with_tables(readme: &str) -> Result<String, String> {
    let mut out = readme.to_owned();
    for (name, rows) in declarations() {
        let open = format!("<!-- settings: {name} ");
        let start = out
            .find(&open)
            .and_then(|i| out[i..].find("-->\n").map(|j| i + j + 4))
            .ok_or_else(|| format!("README.md has no `{open}...-->` line"))?;
        let end = out[start..]
            .find("<!-- /settings -->")
            .map(|j| start + j)
            .ok_or_else(|| format!("README.md's {name} table has no `<!-- /settings -->`"))?;
        out.replace_range(start..end, &table(&rows));
    }
    Ok(out)
}

/// Rewrite the README's settings tables from the declarations.
pub fn write() -> Result<(), String> {
    let path = crate::workspace::workspace_root().join("README.md");
    let readme = std::fs::read_to_string(&path).map_err(|e| format!("reading README.md: {e}"))?;
    let made = with_tables(&readme)?;
    std::fs::write(&path, made).map_err(|e| format!("writing README.md: {e}"))?;
    println!("README.md: settings tables written");
    Ok(())
}

/// An error unless the README's settings tables are the declarations'.
pub fn check(readme: &str) -> Result<(), String> {
    if with_tables(readme)? == readme {
        Ok(())
    } else {
        Err(
            "README.md's settings tables differ from the declarations in \
             crates/ors-server/src/config.rs and crates/ors-client/src/config.rs: run \
             `cargo xtask readme --settings`"
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_settings_tables_are_made_from_the_declarations() {
        let readme = std::fs::read_to_string(crate::workspace::workspace_root().join("README.md"))
            .expect("README.md");
        check(&readme).unwrap();
    }

    #[test]
    fn a_table_is_replaced_between_its_markers() {
        let readme = "a\n<!-- settings: ServerConfig (x) -->\n| old |\n<!-- /settings -->\nb\n\
                      <!-- settings: Config -->\n<!-- /settings -->\n";
        let made = with_tables(readme).unwrap();
        assert!(made.starts_with("a\n<!-- settings: ServerConfig (x) -->\n| setting |"));
        assert!(made.contains("| `port` | `ORS_PORT` | 8080 | Port to listen on"));
        assert!(made.contains("| `max_retries` | — | 3 |"));
        assert!(!made.contains("| old |"));
        assert_eq!(with_tables(&made).unwrap(), made);
        assert!(check(readme).is_err());
        assert!(with_tables("no tables").is_err());
    }
}
