use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

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

// Two toolsets selected by the same name, a name that is not URL-safe, and a field that is
// both always included and selectable.
struct Env {
    bash: Bash,
    zsh: Zsh,
    other: Bash,
}

#[environment(select_toolsets(bash = "shell", zsh = "shell", other = "no spaces"), toolsets(bash))]
impl Environment for Env {
    env_basics!(Env { bash: Bash, zsh: Zsh, other: Bash });
}

// A selectable toolset sharing a tool name with the environment.
struct Mine {
    bash: Bash,
}

#[environment(select_toolsets(bash))]
impl Environment for Mine {
    env_basics!(Mine { bash: Bash });

    /// Also called run.
    #[tool]
    fn run(&self) -> String {
        String::new()
    }
}

fn main() {}
