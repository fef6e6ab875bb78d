//! Two selectable toolsets may share tool names: a session has at most one of them.
use ors_server::prelude::*;

struct Bash;

#[toolset]
impl Bash {
    /// Run a line.
    #[tool]
    fn run(&self) -> String {
        String::new()
    }
}

struct Zsh;

#[toolset]
impl Zsh {
    /// Run a line.
    #[tool]
    fn run(&self) -> String {
        String::new()
    }
}

struct Env {
    bash: Bash,
    zsh: Zsh,
}

#[environment(select_toolsets(bash, zsh = "z-shell"))]
impl Environment for Env {
    env_basics!(Env {
        bash: Bash,
        zsh: Zsh
    });
}

pub fn main() {
    let table = Env::tool_table(&());
    let names: Vec<&str> = table.selectable_names().collect();
    assert_eq!(names, ["bash", "z-shell"]);
}
