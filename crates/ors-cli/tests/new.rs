//! `ors new`, run as a user would: the crate it writes, and what it refuses. The template's
//! environment is compiled here as it is, and its own tests (episodes played in-process) run
//! with these; `cargo xtask test` builds a generated crate, serves it and runs `ors check`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

/// The template, unchanged (its `main` is what `cargo run` runs in a generated crate).
#[allow(dead_code)]
#[path = "../template/main.rs"]
mod template;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The checkout this test runs in.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A fresh scratch directory of this test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("ors-new")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ors_new(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ors"))
        .arg("new")
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_crate_with_a_path_dependency_names_its_environment_after_itself() {
    let dir = scratch("path");
    let root = checkout();
    let out = ors_new(&dir, &["demo", "--path", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ors check demo"), "{stdout}");

    let manifest = std::fs::read_to_string(dir.join("demo/Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"demo\""), "{manifest}");
    let server = root.join("crates/ors-server");
    assert!(
        manifest.contains(&format!(
            "ors-server = {{ path = \"{}\" }}",
            server.display()
        )),
        "{manifest}"
    );
    // The scratch directory is inside this workspace, which does not list the crate.
    assert!(manifest.contains("\n[workspace]\n"), "{manifest}");

    let main = std::fs::read_to_string(dir.join("demo/src/main.rs")).unwrap();
    assert!(main.contains("#[environment(name = \"demo\")]"), "{main}");
    assert_eq!(
        main.replace("name = \"demo\"", "name = \"template\""),
        include_str!("../template/main.rs"),
        "the template is written as compiled here, only its name changed"
    );
    let readme = std::fs::read_to_string(dir.join("demo/README.md")).unwrap();
    assert!(readme.starts_with("# demo\n"), "{readme}");
    assert!(readme.contains("ors check demo"), "{readme}");
    assert!(dir.join("demo/.gitignore").is_file());
}

#[test]
fn git_is_the_default_and_the_checkout_may_be_the_crate_itself() {
    let dir = scratch("git");
    let out = ors_new(&dir, &["sub/my-env"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(dir.join("sub/my-env/Cargo.toml")).unwrap();
    assert!(
        manifest.contains("ors-server = { git = \"https://github.com/ors-rs/ors-rs\" }"),
        "{manifest}"
    );
    let main = std::fs::read_to_string(dir.join("sub/my-env/src/main.rs")).unwrap();
    assert!(main.contains("#[environment(name = \"my-env\")]"));

    let server = checkout().join("crates/ors-server");
    let out = ors_new(&dir, &["other", "--path", server.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(dir.join("other/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("path = \"{}\"", server.display())),
        "{manifest}"
    );
}

#[test]
fn an_existing_directory_a_bad_name_or_checkout_is_refused_naming_it() {
    let dir = scratch("refused");
    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken/keep.txt"), "mine").unwrap();
    let out = ors_new(&dir, &["taken"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("'taken' already exists"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_dir(dir.join("taken")).unwrap().count(),
        1,
        "nothing written into it"
    );

    for (name, says) in [
        (
            "9lives",
            "invalid crate name '9lives': it starts with a digit",
        ),
        ("my env", "invalid crate name 'my env': ' ' is not allowed"),
        ("fn", "invalid crate name 'fn': it is a Rust keyword"),
        ("tokio", "invalid crate name 'tokio'"),
    ] {
        let out = ors_new(&dir, &[name]);
        assert!(!out.status.success(), "{name}");
        assert!(stderr(&out).contains(says), "{name}: {}", stderr(&out));
        assert!(!dir.join(name).exists(), "{name} was created");
    }

    let out = ors_new(&dir, &["fine", "--path", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no ors-server crate there"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("fine").exists());
}
