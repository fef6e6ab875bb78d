//! `cargo xtask readme` (and a step of `cargo xtask test`): the shell examples of the README
//! and of the guides in `docs/` are run and must print what the pages show.
//!
//! The pages are `README.md` and every `docs/*.md` but `docs/PROTOCOL_NOTES.md`. Every
//! ```` ```console ```` block of a page is a transcript: `$ command` lines (a line ending in `\`
//! continues on the next), each followed by its expected stdout. The block runs in one `bash`
//! (so `SID=$(...)` carries over), from the workspace root, against a `gsm8k` server started on
//! a free port: `localhost:8080` in a command becomes that server, `ORS_URL` points at it, and
//! the `ors` built from this tree comes first on `PATH`. In the expected output, `[..]` matches
//! any text within a line and a line `...` any number of lines. The client example shown in
//! the client guide must be `crates/ors-client/examples/quickstart.rs`, which a console block
//! runs, and the settings tables must be the declarations' ([`crate::settings`]).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::interop::{build_examples, our_server};
use crate::pages::{pages, Page};
use crate::procs::run_captured;
use crate::workspace::workspace_root;

/// Limit on one block (the client example may have to compile first).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(600);

/// The file the client example must equal.
const CLIENT_EXAMPLE: &str = "crates/ors-client/examples/quickstart.rs";

/// Separates the outputs of a block's commands.
const MARK: &str = "@@ors-readme-command@@";

/// The page that shows the client example.
const CLIENT_EXAMPLE_PAGE: &str = "docs/client-and-eval.md";

/// One `$ command` and what it should print.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    command: String,
    expected: Vec<String>,
}

/// Check the pages: the client example is the example file, the settings tables are the
/// declarations', and every console block prints what it shows.
pub fn run() -> Result<(), String> {
    let root = workspace_root();
    let pages = pages(&root)?;
    client_example_matches(&pages, &root.join(CLIENT_EXAMPLE))?;
    crate::settings::check(&pages)?;
    let mut blocks = Vec::new();
    for page in &pages {
        for (n, block) in console_blocks(&page.text)
            .map_err(|e| format!("{}: {e}", page.path))?
            .into_iter()
            .enumerate()
        {
            blocks.push((format!("{} block {}", page.path, n + 1), block));
        }
    }
    if blocks.is_empty() {
        return Err("neither README.md nor a guide has a ```console block".to_owned());
    }
    let ors = crate::procs::ors_binary()?;
    let debug = ors.parent().ok_or("`ors` has no directory")?;
    let bins = build_examples()?;
    let server = our_server(&bins, "gsm8k", &[])?;
    let mut failures = Vec::new();
    for (name, block) in &blocks {
        match run_block(block, &server.url, debug) {
            Ok(()) => println!("PASS {name} ({} command(s))", block.len()),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failures.push(name.as_str());
            }
        }
    }
    println!(
        "{} passed, {} failed",
        blocks.len() - failures.len(),
        failures.len()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "console blocks do not print what they show: {}",
            failures.join(", ")
        ))
    }
}

/// One `rust` block of the client guide must be the example file verbatim.
fn client_example_matches(pages: &[Page], example: &Path) -> Result<(), String> {
    let code = std::fs::read_to_string(example)
        .map_err(|e| format!("reading {}: {e}", example.display()))?;
    let page = pages
        .iter()
        .find(|page| page.path == CLIENT_EXAMPLE_PAGE)
        .ok_or_else(|| format!("{CLIENT_EXAMPLE_PAGE} is missing"))?;
    let found = fenced(&page.text, "rust")
        .into_iter()
        .any(|block| block.join("\n").trim() == code.trim());
    if found {
        Ok(())
    } else {
        Err(format!(
            "{CLIENT_EXAMPLE_PAGE} has no rust block equal to {CLIENT_EXAMPLE} (keep them the same)"
        ))
    }
}

/// The lines of every fenced block whose info string starts with `lang`.
fn fenced<'a>(text: &'a str, lang: &str) -> Vec<Vec<&'a str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match &mut current {
            None => {
                if let Some(info) = line.trim_start().strip_prefix("```") {
                    if info.split([',', ' ']).next() == Some(lang) {
                        current = Some(Vec::new());
                    }
                }
            }
            Some(lines) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(lines));
                current = None;
            }
            Some(lines) => lines.push(line),
        }
    }
    blocks
}

/// The steps of every console block.
fn console_blocks(page: &str) -> Result<Vec<Vec<Step>>, String> {
    fenced(page, "console")
        .into_iter()
        .map(|lines| parse_block(&lines))
        .collect()
}

fn parse_block(lines: &[&str]) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continuing = false;
    for line in lines {
        if continuing {
            if let Some(step) = steps.last_mut() {
                step.command.push('\n');
                step.command.push_str(line);
            }
            continuing = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: cmd.to_owned(),
                expected: Vec::new(),
            });
            continuing = cmd.ends_with('\\');
        } else {
            match steps.last_mut() {
                Some(step) => step.expected.push((*line).to_owned()),
                None => return Err(format!("console block output before any command: {line:?}")),
            }
        }
    }
    Ok(steps)
}

/// Run a block's commands in one bash and compare each output.
fn run_block(steps: &[Step], url: &str, bin_dir: &Path) -> Result<(), String> {
    let hostport = url.trim_start_matches("http://");
    let mut script = String::new();
    for step in steps {
        script.push_str(&format!("printf '\\n%s\\n' '{MARK}'\n"));
        let cmd = step
            .command
            .replace("localhost:8080", hostport)
            .replace("127.0.0.1:8080", hostport);
        script.push_str(&cmd);
        script.push('\n');
    }
    script.push_str(&format!("printf '\\n%s\\n' '{MARK}'\n"));
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut dirs = vec![bin_dir.to_path_buf()];
            dirs.extend(std::env::split_paths(&p));
            std::env::join_paths(dirs).map_err(|e| format!("PATH: {e}"))?
        }
        None => bin_dir.as_os_str().to_owned(),
    };
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(workspace_root())
        .env("PATH", path)
        .env("ORS_URL", url)
        .env_remove("ORS_API_KEY");
    let out = run_captured(cmd, None, BLOCK_TIMEOUT)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let sep = format!("\n{MARK}\n");
    // The text before the first mark is empty; one piece per command follows.
    let pieces: Vec<&str> = stdout.split(sep.as_str()).skip(1).collect();
    for (i, step) in steps.iter().enumerate() {
        let got = pieces.get(i).copied().unwrap_or("");
        let got_lines: Vec<&str> = trim_blank_end(got.lines().collect());
        let want: Vec<&str> = trim_blank_end(step.expected.iter().map(String::as_str).collect());
        if !lines_match(&want, &got_lines) {
            return Err(format!(
                "`{}` printed\n{}\nbut the page shows\n{}\n(stderr: {})",
                step.command,
                got_lines.join("\n"),
                want.join("\n"),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

fn trim_blank_end(mut lines: Vec<&str>) -> Vec<&str> {
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines
}

/// Whether `got` matches the pattern lines `want` (`...` lines, `[..]` within lines).
fn lines_match(want: &[&str], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((&"...", rest)) => (0..=got.len()).any(|skip| lines_match(rest, &got[skip..])),
        Some((w, rest)) => match got.split_first() {
            Some((g, got_rest)) => line_matches(w, g) && lines_match(rest, got_rest),
            None => false,
        },
    }
}

/// Whether `got` matches the pattern line `want`, where `[..]` stands for any text.
fn line_matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split("[..]").collect();
    if parts.len() == 1 {
        return want == got;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !got.starts_with(first) || !got[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    got.len() >= first.len() + last.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_into_commands_and_outputs() {
        let readme = "text\n```console\n$ echo a \\\n  b\na b\n$ true\n```\n```sh\n$ no\n```\n";
        let blocks = console_blocks(readme).unwrap();
        assert_eq!(
            blocks,
            vec![vec![
                Step {
                    command: "echo a \\\n  b".into(),
                    expected: vec!["a b".into()]
                },
                Step {
                    command: "true".into(),
                    expected: vec![]
                },
            ]]
        );
    }

    #[test]
    fn the_pages_are_the_readme_and_the_guides() {
        let pages = pages(&workspace_root()).unwrap();
        let paths: Vec<&str> = pages.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths[0], "README.md");
        assert!(paths.contains(&CLIENT_EXAMPLE_PAGE), "{paths:?}");
        assert!(paths.contains(&"docs/serving.md"), "{paths:?}");
        assert!(
            !paths.iter().any(|p| p.ends_with(crate::pages::NOT_A_GUIDE)),
            "{paths:?}"
        );
        for page in &pages {
            console_blocks(&page.text).unwrap_or_else(|e| panic!("{}: {e}", page.path));
        }
        let example = workspace_root().join(CLIENT_EXAMPLE);
        client_example_matches(&pages, &example).unwrap();
        let moved: Vec<Page> = pages
            .iter()
            .filter(|p| p.path != CLIENT_EXAMPLE_PAGE)
            .cloned()
            .collect();
        assert!(client_example_matches(&moved, &example).is_err());
    }

    #[test]
    fn every_page_with_rust_blocks_is_a_doctest() {
        let root = workspace_root();
        let lib = std::fs::read_to_string(root.join("tests/src/lib.rs")).unwrap();
        for page in pages(&root).unwrap() {
            if !fenced(&page.text, "rust").is_empty() {
                let include = format!("include_str!(\"../../{}\")", page.path);
                assert!(
                    lib.contains(&include),
                    "tests/src/lib.rs does not make {} a doctest: add `#[doc = {include}] mod ...`",
                    page.path
                );
            }
        }
    }

    #[test]
    fn patterns_match_any_text_and_any_lines() {
        assert!(line_matches("session [..]", "session abc123"));
        assert!(line_matches("a [..] c [..] e", "a b c d e"));
        assert!(!line_matches("a [..] c", "a b d"));
        assert!(!line_matches("ab[..]ba", "aba"));
        assert!(lines_match(&["x", "...", "z"], &["x", "1", "2", "z"]));
        assert!(lines_match(&["x", "...", "z"], &["x", "z"]));
        assert!(!lines_match(&["x", "z"], &["x", "y", "z"]));
    }
}
