//! The documentation's pages whose examples and tables are checked: the README and the guides
//! under `docs/` (but the protocol notes). `readme` runs their examples, `settings` writes and
//! checks their settings tables.

use std::path::Path;

/// The guides' folder.
const GUIDES: &str = "docs";
/// The file in it that is notes, not a guide.
pub const NOT_A_GUIDE: &str = "PROTOCOL_NOTES.md";

/// A page of the documentation whose examples are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Its path from the workspace root, with `/`: `README.md`, `docs/serving.md`.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// The pages under `root`: `README.md`, then the guides `docs/*.md` (but the protocol notes)
/// in the order of their names.
pub fn pages(root: &Path) -> Result<Vec<Page>, String> {
    let read = |path: String| {
        std::fs::read_to_string(root.join(&path))
            .map(|text| Page {
                path: path.clone(),
                text,
            })
            .map_err(|e| format!("reading {path}: {e}"))
    };
    let dir = root.join(GUIDES);
    let mut guides: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md") && name != NOT_A_GUIDE)
        .collect();
    guides.sort();
    std::iter::once("README.md".to_owned())
        .chain(guides.into_iter().map(|name| format!("{GUIDES}/{name}")))
        .map(read)
        .collect()
}
