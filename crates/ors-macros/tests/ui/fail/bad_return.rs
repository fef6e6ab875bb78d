use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `count` tool.
    #[tool]
    fn count(&self) -> u32 {
        7
    }
}

fn main() {}
