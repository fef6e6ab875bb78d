//! A revision to measure against (`cargo xtask bench --against REV` and `--callgrind`): its
//! `conformance` server built in a git worktree.
//!
//! The worktree lives at `<target>/against/tree` and builds into the same target directory,
//! so every dependency at the same version and features is compiled once for both trees. Its
//! own crates would not be told apart from this tree's: cargo names artifacts by a hash of
//! the package's path *relative to its workspace*, its version and its dependencies, which two
//! nearby revisions share, and the second build would then take the first one's artifacts
//! for its own. So the worktree's manifests have `+against` added to their versions (build
//! metadata, which version requirements ignore), which gives its crates artifacts of their
//! own. The binary is kept as `<target>/against/conformance-<commit>`, so a revision is built
//! only once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A revision to compare with: as asked for, and its commit.
pub(crate) struct Revision {
    /// As asked for (`main`, `HEAD~1`, a commit).
    pub(crate) rev: String,
    pub(crate) commit: String,
}

/// `git ARGS` in `dir`, its output trimmed (a commit, a branch).
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::workspace::git(dir, args).map(|out| out.trim().to_owned())
}

/// The commit `rev` names in this repository.
pub(crate) fn resolve(rev: &str) -> Result<Revision, String> {
    let root = crate::workspace::workspace_root();
    let commit = git(
        &root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .map_err(|_| {
        format!(
            "'{rev}' names no commit of this repository (a shallow clone may lack it: \
                 `git fetch --unshallow`)"
        )
    })?;
    Ok(Revision {
        rev: rev.to_owned(),
        commit,
    })
}

/// What `cargo xtask test` compares with: the merge base of HEAD and `main` (or
/// `origin/main`), which is the change a branch makes; when HEAD is on main already (CI on
/// main, or a branch that adds nothing), HEAD's first parent, the last step that landed.
pub(crate) fn default_base() -> Result<Revision, String> {
    let root = crate::workspace::workspace_root();
    let head = git(&root, &["rev-parse", "HEAD"])?;
    for main in ["main", "origin/main"] {
        if let Ok(base) = git(&root, &["merge-base", "HEAD", main]) {
            if base != head {
                return Ok(Revision {
                    rev: format!("merge-base HEAD {main}"),
                    commit: base,
                });
            }
            break;
        }
    }
    resolve("HEAD^1").map(|r| Revision {
        rev: "HEAD^1 (HEAD is on main)".into(),
        ..r
    })
}

/// The short form of a commit, for messages.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

/// Where the target directory is (as cargo_build finds it).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| crate::workspace::workspace_root().join("target"))
}

/// Check the worktree out at `commit`, making it first if needed.
fn checkout(root: &Path, tree: &Path, commit: &str) -> Result<(), String> {
    if tree.join(".git").exists()
        && git(
            tree,
            &["checkout", "--quiet", "--detach", "--force", commit],
        )
        .is_ok()
    {
        return Ok(());
    }
    // Not a worktree (any more): start it over.
    let _ = std::fs::remove_dir_all(tree);
    git(root, &["worktree", "prune"])?;
    let path = tree
        .to_str()
        .ok_or("the target directory's path is not UTF-8")?;
    git(
        root,
        &[
            "worktree", "add", "--quiet", "--detach", "--force", path, commit,
        ],
    )?;
    Ok(())
}

/// The suffix the worktree's package versions get (see the module's doc).
const VERSION_SUFFIX: &str = "+against";

/// `manifest` with [`VERSION_SUFFIX`] added to the version of its `[package]` or
/// `[workspace.package]` section (inherited versions, `version.workspace = true`, follow the
/// workspace's); `None` when it has nothing to change.
fn suffixed_versions(manifest: &str) -> Option<String> {
    let mut section = "";
    let mut changed = false;
    let mut out = String::with_capacity(manifest.len() + 16);
    for line in manifest.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed;
        }
        let in_package = section == "[package]" || section == "[workspace.package]";
        let version = trimmed
            .strip_prefix("version")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
            .and_then(|v| v.strip_prefix('"'))
            .and_then(|v| v.strip_suffix('"'));
        match version {
            Some(v) if in_package && !v.contains('+') => {
                let end = if line.ends_with('\n') { "\n" } else { "" };
                out.push_str(&format!("version = \"{v}{VERSION_SUFFIX}\"{end}"));
                changed = true;
            }
            _ => out.push_str(line),
        }
    }
    changed.then_some(out)
}

/// Give every crate of the worktree its [`VERSION_SUFFIX`] (undone by the next checkout).
fn suffix_versions(tree: &Path) -> Result<(), String> {
    let files = git(tree, &["ls-files", "Cargo.toml", "*/Cargo.toml"])?;
    for file in files.lines() {
        let path = tree.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if let Some(text) = suffixed_versions(&text) {
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The release `conformance` binary of `rev`, built once per commit, and how long building it
/// took (`None`: it was there already).
pub(crate) fn old_binary(rev: &Revision) -> Result<(PathBuf, Option<Duration>), String> {
    let target = target_dir();
    let dir = target.join("against");
    let bin = dir.join(format!("conformance-{}", rev.commit));
    if bin.is_file() {
        return Ok((bin, None));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let root = crate::workspace::workspace_root();
    let tree = dir.join("tree");
    eprintln!(
        "bench: against: building {} ({}) in {}",
        rev.rev,
        short(&rev.commit),
        tree.display()
    );
    let started = Instant::now();
    checkout(&root, &tree, &rev.commit)?;
    suffix_versions(&tree)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "-p",
        "ors-examples",
        "--bin",
        "conformance",
    ])
    .arg("--target-dir")
    .arg(&target)
    .current_dir(&tree);
    // Since issue 27 jemalloc, which the servers are measured with, is a feature; before, it
    // was always on.
    let manifest = std::fs::read_to_string(tree.join("examples/Cargo.toml")).unwrap_or_default();
    if manifest.lines().any(|l| l.starts_with("jemalloc = ")) {
        cmd.args(["--features", "jemalloc"]);
    }
    crate::procs::run_to_success(&mut cmd, &format!("building {}'s server", rev.rev))?;
    // The shared target directory's `release/conformance` is whichever tree built last: the
    // old one is copied out before this tree's build links its own there again.
    let built = target.join("release").join("conformance");
    let partial = dir.join(format!("conformance-{}.partial", rev.commit));
    std::fs::copy(&built, &partial).map_err(|e| format!("copying {}: {e}", built.display()))?;
    std::fs::rename(&partial, &bin).map_err(|e| format!("keeping {}: {e}", bin.display()))?;
    Ok((bin, Some(started.elapsed())))
}

/// What this tree is: its HEAD commit, and whether files differ from it.
pub(crate) fn describe_head() -> String {
    let root = crate::workspace::workspace_root();
    let head = git(&root, &["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|_| "?".into());
    let dirty =
        git(&root, &["status", "--porcelain", "--untracked-files=no"]).is_ok_and(|s| !s.is_empty());
    format!(
        "{head}{}",
        if dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    )
}

/// What the conformance server is built from, relative to the workspace root: a revision
/// that differs from this tree in none of them builds the same binary.
pub(crate) const SERVER_SOURCES: [&str; 5] =
    ["crates", "examples", "Cargo.toml", "Cargo.lock", ".cargo"];

/// Whether the tree at `root` (uncommitted changes included) has the same
/// [`SERVER_SOURCES`] as `commit`.
pub(crate) fn server_unchanged(root: &Path, commit: &str) -> Result<bool, String> {
    let out = Command::new("git")
        .args(["diff", "--quiet", commit, "--"])
        .args(SERVER_SOURCES)
        .current_dir(root)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "git diff {commit}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worktree_versions_get_a_suffix_in_package_sections_only() {
        let manifest = "[workspace.package]\nversion = \"0.1.0\"\n\n[workspace.dependencies]\n\
                        ors-core = { path = \"crates/ors-core\", version = \"0.1.0\" }\n\
                        [package]\nname = \"x\"\nversion = \"1.2.3\"\n\
                        [dependencies]\nversion = \"9\"";
        let out = suffixed_versions(manifest).unwrap();
        assert!(
            out.contains("[workspace.package]\nversion = \"0.1.0+against\"\n"),
            "{out}"
        );
        assert!(
            out.contains("version = \"1.2.3+against\"\n[dependencies]"),
            "{out}"
        );
        assert!(out.contains("version = \"0.1.0\" }"), "{out}");
        assert!(out.ends_with("version = \"9\""), "{out}");
        // Inherited versions, and versions already suffixed, are left alone.
        assert_eq!(
            suffixed_versions("[package]\nversion.workspace = true\n"),
            None
        );
        assert_eq!(suffixed_versions(&out), None);
    }

    #[test]
    fn a_revision_differing_only_outside_the_servers_sources_counts_as_unchanged() {
        let dir = std::env::temp_dir().join(format!("xtask-against-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("crates/a")).unwrap();
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "--quiet"]);
        std::fs::write(dir.join("crates/a/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.join("README.md"), "one\n").unwrap();
        run(&["add", "."]);
        run(&["commit", "--quiet", "-m", "one"]);
        let first = git(&dir, &["rev-parse", "HEAD"]).unwrap();
        // A change to the docs (committed, then also uncommitted) builds the same server.
        std::fs::write(dir.join("README.md"), "two\n").unwrap();
        run(&["commit", "--quiet", "-am", "two"]);
        std::fs::write(dir.join("README.md"), "three\n").unwrap();
        assert_eq!(server_unchanged(&dir, &first), Ok(true));
        // An uncommitted change to a crate does not.
        std::fs::write(dir.join("crates/a/lib.rs"), "fn b() {}\n").unwrap();
        assert_eq!(server_unchanged(&dir, &first), Ok(false));
        assert!(server_unchanged(&dir, "0123456789abcdef0123456789abcdef01234567").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
