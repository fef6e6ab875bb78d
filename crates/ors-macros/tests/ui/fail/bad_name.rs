use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `lookup` tool.
    #[tool(name = "look up")]
    fn lookup(&self) -> String {
        String::new()
    }
}

fn main() {}
