//! The workspace's sources: its root on disk, its members (packages) and their files, read from
//! the working tree or from a git revision without building it, in either layout the project
//! has had (crates at the root, or under `crates/` and `tools/`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The seven published crates: the product, as opposed to examples and tooling.
pub const PRODUCT: [&str; 7] = [
    "ors-core",
    "ors-runtime",
    "ors-macros",
    "ors-server",
    "ors-client",
    "ors-cli",
    "ors-conformance",
];

/// The workspace root (this crate lives in `tools/xtask`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The files of the workspace at one point: the working tree, or a git revision.
pub enum Tree {
    /// The files on disk under this root, uncommitted changes included.
    Disk(PathBuf),
    /// The files of a revision of the repository at `root`: every path it holds.
    Rev {
        /// The repository.
        root: PathBuf,
        /// The revision as given.
        rev: String,
        /// Every file path of the revision, relative to the root.
        files: Vec<String>,
    },
    /// Files held in memory (tests).
    #[cfg(test)]
    Memory(std::collections::BTreeMap<String, String>),
}

/// A member of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// Its `[package] name`.
    pub name: String,
    /// Its directory relative to the workspace root, e.g. `crates/ors-core`.
    pub dir: String,
}

impl Tree {
    /// The working tree of this workspace.
    pub fn disk() -> Tree {
        Tree::Disk(workspace_root())
    }

    /// Revision `rev` of this workspace's repository.
    pub fn at(rev: &str) -> Result<Tree, String> {
        let root = workspace_root();
        let listing = git(&root, &["ls-tree", "-r", "--name-only", "-z", rev])?;
        let files = listing
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Tree::Rev {
            root,
            rev: rev.to_owned(),
            files,
        })
    }

    /// The tree `rev` names, or the working tree without one.
    pub fn of(rev: Option<&str>) -> Result<Tree, String> {
        rev.map_or_else(|| Ok(Tree::disk()), Tree::at)
    }

    /// What it is, for headings: `working tree` or the revision.
    pub fn label(&self) -> String {
        match self {
            Tree::Disk(_) => "working tree".to_owned(),
            Tree::Rev { rev, .. } => rev.clone(),
            #[cfg(test)]
            Tree::Memory(_) => "memory".to_owned(),
        }
    }

    /// The text of the file at `path` (relative to the root), if there is one.
    pub fn read(&self, path: &str) -> Option<String> {
        match self {
            Tree::Disk(root) => std::fs::read_to_string(root.join(path)).ok(),
            Tree::Rev { root, rev, files } => {
                if !files.iter().any(|f| f == path) {
                    return None;
                }
                git(root, &["show", &format!("{rev}:{path}")]).ok()
            }
            #[cfg(test)]
            Tree::Memory(files) => files.get(path).cloned(),
        }
    }

    /// Every `.rs` file under directory `dir` (relative to the root), sorted.
    pub fn rust_files(&self, dir: &str) -> Vec<String> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut found: Vec<String> = match self {
            Tree::Disk(root) => {
                let mut out = Vec::new();
                walk(root, &root.join(dir), &mut out);
                out
            }
            Tree::Rev { files, .. } => files
                .iter()
                .filter(|f| f.starts_with(&prefix))
                .cloned()
                .collect(),
            #[cfg(test)]
            Tree::Memory(files) => files
                .keys()
                .filter(|f| f.starts_with(&prefix))
                .cloned()
                .collect(),
        };
        found.retain(|f| f.ends_with(".rs"));
        found.sort();
        found
    }

    /// The members of the workspace, in the order the root manifest lists them.
    pub fn packages(&self) -> Result<Vec<Package>, String> {
        let manifest = self
            .read("Cargo.toml")
            .ok_or_else(|| format!("{}: no Cargo.toml at the root", self.label()))?;
        let mut packages = Vec::new();
        for dir in members(&manifest) {
            let text = self
                .read(&format!("{dir}/Cargo.toml"))
                .ok_or_else(|| format!("{}: member {dir} has no Cargo.toml", self.label()))?;
            let name = package_name(&text)
                .ok_or_else(|| format!("{}: {dir}/Cargo.toml names no package", self.label()))?;
            packages.push(Package { name, dir });
        }
        Ok(packages)
    }
}

/// Run `git ARGS` in `root`; its standard output.
pub(crate) fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| format!("`git {}`: not UTF-8", args.join(" ")))
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The quoted paths of the root manifest's `members = [...]`.
fn members(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members") else {
        return Vec::new();
    };
    let rest = &manifest[start..];
    let (Some(open), Some(close)) = (rest.find('['), rest.find(']')) else {
        return Vec::new();
    };
    rest[open + 1..close]
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"'))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `name` of a manifest's `[package]` table.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(value) = line.strip_prefix("name") {
                let value = value.trim_start().strip_prefix('=')?.trim();
                return Some(value.trim_matches('"').to_owned());
            }
        }
    }
    None
}

/// Files for a [`Tree::Memory`], from `(path, text)` pairs.
#[cfg(test)]
pub fn memory(files: &[(&str, &str)]) -> Tree {
    Tree::Memory(
        files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_and_names_are_read_from_either_layout() {
        let tree = memory(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\n    \"ors-core\", # the protocol\n    \"tools/xtask\",\n]\n",
            ),
            ("ors-core/Cargo.toml", "[package]\nname = \"ors-core\"\n"),
            (
                "tools/xtask/Cargo.toml",
                "[lib]\nname = \"other\"\n[package]\nname    = \"xtask\"\n",
            ),
        ]);
        let packages = tree.packages().unwrap();
        assert_eq!(
            packages,
            vec![
                Package {
                    name: "ors-core".into(),
                    dir: "ors-core".into()
                },
                Package {
                    name: "xtask".into(),
                    dir: "tools/xtask".into()
                },
            ]
        );
    }

    #[test]
    fn a_member_without_a_manifest_is_an_error_naming_it() {
        let tree = memory(&[("Cargo.toml", "[workspace]\nmembers = [\"gone\"]\n")]);
        let err = tree.packages().unwrap_err();
        assert!(err.contains("member gone"), "{err}");
    }
}
