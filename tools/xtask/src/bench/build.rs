//! The release binaries the benchmark runs, built before any server starts.

use std::path::PathBuf;

use super::servers::Kind;

/// The release binaries: the load generator, our server, the scripted model server and the
/// `code` example.
pub(super) struct Built {
    pub(super) bench: PathBuf,
    pub(super) ours: Option<PathBuf>,
    pub(super) model: Option<PathBuf>,
    pub(super) code: Option<PathBuf>,
    pub(super) failure: Option<String>,
}

/// Build the release binaries; our server may fail to build (reported, the rest still runs).
pub(super) fn build(kinds: &[Kind], agent: bool, code: bool) -> Result<Built, String> {
    let dir = crate::procs::cargo_build(&["-p", "ors-bench", "--bin", "ors-bench"], true)?;
    let mut built = Built {
        bench: dir.join("ors-bench"),
        ours: None,
        model: None,
        code: None,
        failure: None,
    };
    if kinds.contains(&Kind::Ours) {
        let mut bins = vec!["conformance"];
        if agent {
            bins.push("scripted-model");
        }
        if code {
            bins.push("code");
        }
        match crate::procs::build_examples(&bins, true) {
            Ok(dir) => {
                built.ours = Some(dir.join("conformance"));
                built.model = agent.then(|| dir.join("scripted-model"));
                built.code = code.then(|| dir.join("code"));
            }
            Err(e) => built.failure = Some(e),
        }
    }
    Ok(built)
}
