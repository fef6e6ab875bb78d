//! `ors new DIR`: a ready environment crate from the template in `template/` (a multi-step
//! tool, two splits, a typed task, a start-up state, a test that plays episodes in-process),
//! depending on ors-server by git or by the path of a checkout until the crates are published.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The template's environment. ors-cli's tests compile it and run its tests as they are.
const MAIN_RS: &str = include_str!("../template/main.rs");
const CARGO_TOML: &str = include_str!("../template/Cargo.toml.tmpl");
const README_MD: &str = include_str!("../template/README.md.tmpl");
/// The environment name in [`MAIN_RS`], replaced by the crate's.
const TEMPLATE_ENV_NAME: &str = "#[environment(name = \"template\")]";
/// The repository the git dependency points at.
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");
/// The template's own dependencies: a crate of one of these names would not build.
const DEPENDENCIES: [&str; 3] = ["ors-server", "tokio", "serde_json"];

/// Arguments of `ors new`.
#[derive(clap::Args, Debug)]
pub struct NewArgs {
    /// Directory to create; its last component names the crate and the environment.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Depend on the ors-rs checkout at this directory (the repository, or its
    /// crates/ors-server) instead of git.
    #[arg(long, value_name = "CHECKOUT", conflicts_with = "git")]
    path: Option<PathBuf>,
    /// Depend on ors-rs from this git repository.
    #[arg(long, value_name = "URL", default_value = REPOSITORY)]
    git: String,
}

/// Why a crate was not made.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name is not a crate name.
    #[error("invalid crate name '{name}': {why}")]
    Name {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The directory is there already.
    #[error("'{}' already exists: ors new makes a new directory; choose another name or remove it", .0.display())]
    Exists(PathBuf),
    /// `--path` names no ors-rs checkout.
    #[error("--path {}: no ors-server crate there (looked for {}); give the directory of an ors-rs checkout", .given.display(), .looked.display())]
    NoCheckout {
        /// The directory given.
        given: PathBuf,
        /// The manifest looked for.
        looked: PathBuf,
    },
    /// Writing a file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Run `ors new`.
pub fn run(args: &NewArgs) -> ExitCode {
    match create(args) {
        Ok((name, source)) => {
            let dir = args.dir.display();
            println!("Created the environment '{name}' in {dir}/ (ors-server from {source})");
            let serve = format!("cd {dir} && cargo run");
            let check = format!("ors check {name}");
            let steps: [(&str, &str); 3] = [
                (&serve, "serve it on http://127.0.0.1:8080"),
                (&check, "in a second terminal: is it ready for training?"),
                ("cargo test", "play episodes in-process"),
            ];
            let width = steps.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
            for (command, what) in steps {
                println!("  {command:<width$}   {what}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => crate::render::fail("ors new", &e.to_string()),
    }
}

/// Make the crate; returns its name and where ors-server comes from, for people.
fn create(args: &NewArgs) -> Result<(String, String), NewError> {
    let name = crate_name(&args.dir)?;
    if args.dir.symlink_metadata().is_ok() {
        return Err(NewError::Exists(args.dir.clone()));
    }
    let (key, source) = match &args.path {
        Some(dir) => ("path", checkout(dir)?.display().to_string()),
        None => ("git", args.git.clone()),
    };
    let dependency = format!("ors-server = {{ {key} = {} }}", toml_string(&source));
    let parent = args.dir.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NewError::Io { path, source }
    };
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    // Inside another workspace, cargo would take the crate for a member it does not list.
    let workspace = if in_workspace(parent) {
        "\n# Its own workspace, though inside another one's directory.\n[workspace]\n"
    } else {
        ""
    };
    let cargo_toml = CARGO_TOML
        .replace("{name}", &name)
        .replace("{ors_server}", &dependency)
        .replace("{workspace}\n", workspace);
    let attribute = format!("#[environment(name = \"{name}\")]");
    let main_rs = MAIN_RS.replace(TEMPLATE_ENV_NAME, &attribute);
    let readme = README_MD.replace("{name}", &name);
    // create_dir (not _all) refuses a directory made since the check above.
    std::fs::create_dir(&args.dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => NewError::Exists(args.dir.clone()),
        _ => io(&args.dir)(e),
    })?;
    let src = args.dir.join("src");
    std::fs::create_dir(&src).map_err(io(&src))?;
    for (file, text) in [
        ("Cargo.toml", cargo_toml.as_str()),
        ("src/main.rs", main_rs.as_str()),
        ("README.md", readme.as_str()),
        (".gitignore", "/target\n"),
    ] {
        let path = args.dir.join(file);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok((name, source))
}

/// The crate name a directory gives: its last component, if cargo and ORS both take it
/// (ASCII letters, digits, `-` and `_`, not starting with a digit, at most 64 characters, no
/// keyword, no name of the standard library or of the template's dependencies).
fn crate_name(dir: &Path) -> Result<String, NewError> {
    let bad = |name: &str, why: String| NewError::Name {
        name: name.to_owned(),
        why,
    };
    let name = dir
        .file_name()
        .ok_or("a directory path must end in the crate's name")
        .and_then(|n| n.to_str().ok_or("it is not UTF-8"))
        .map_err(|why| bad(&dir.display().to_string(), why.into()))?;
    let rust = name.replace('-', "_");
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let why = if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        format!("{c:?} is not allowed; use ASCII letters, digits, '-' and '_'")
    } else if name.starts_with(|c: char| c.is_ascii_digit()) {
        "it starts with a digit".into()
    } else if name.len() > 64 {
        let n = name.len();
        format!("it has {n} characters, and an environment name at most 64")
    } else if KEYWORDS.contains(&rust.as_str()) {
        "it is a Rust keyword".into()
    } else if ["std", "core", "alloc", "proc_macro", "test"].contains(&rust.as_str()) {
        "it is the name of a crate of the standard library".into()
    } else if DEPENDENCIES.iter().any(|d| d.replace('-', "_") == rust) {
        "the crate depends on a crate of that name (ors-server, tokio, serde_json)".into()
    } else {
        return Ok(name.to_owned());
    };
    Err(bad(name, why))
}

/// The keywords of Rust 2021, strict and reserved: cargo refuses them as package names.
const KEYWORDS: [&str; 51] = [
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// The ors-server crate of a checkout (its root or the crate itself), as an absolute path.
fn checkout(dir: &Path) -> Result<PathBuf, NewError> {
    let nested = dir.join("crates").join("ors-server");
    let missing = |looked: &Path| NewError::NoCheckout {
        given: dir.to_path_buf(),
        looked: looked.join("Cargo.toml"),
    };
    let krate = [dir, nested.as_path()]
        .into_iter()
        .find(|d| manifest_has(d, "name = \"ors-server\""))
        .ok_or_else(|| missing(&nested))?;
    std::fs::canonicalize(krate).map_err(|_| missing(krate))
}

/// Whether `dir` holds a manifest with this line (blanks around it aside).
fn manifest_has(dir: &Path, line: &str) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|toml| toml.lines().any(|l| l.trim() == line))
}

/// Whether `dir` or a directory above it holds a workspace's manifest.
fn in_workspace(dir: &Path) -> bool {
    std::fs::canonicalize(dir)
        .is_ok_and(|dir| dir.ancestors().any(|d| manifest_has(d, "[workspace]")))
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => out.push_str(&format!("\\{c}")),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out + "\""
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_are_checked_as_cargo_and_ors_do() {
        for ok in ["demo", "my-env", "guess_2", "a", "x/y/demo"] {
            assert!(crate_name(Path::new(ok)).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("2fast", "starts with a digit"),
            ("my env", "' ' is not allowed"),
            ("café", "'é' is not allowed"),
            ("fn", "keyword"),
            ("async", "keyword"),
            ("std", "standard library"),
            ("tokio", "depends on"),
            ("ors_server", "depends on"),
            ("..", "must end in the crate's name"),
        ] {
            let err = crate_name(Path::new(bad)).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let long = "a".repeat(65);
        assert!(crate_name(Path::new(&long))
            .unwrap_err()
            .to_string()
            .contains("65 characters"));
    }

    #[test]
    fn the_template_names_its_environment_once() {
        assert_eq!(MAIN_RS.matches(TEMPLATE_ENV_NAME).count(), 1);
        for hole in ["{name}", "{ors_server}", "{workspace}"] {
            assert_eq!(CARGO_TOML.matches(hole).count(), 1, "{hole}");
        }
    }

    #[test]
    fn toml_strings_escape_quotes_and_backslashes() {
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }
}
