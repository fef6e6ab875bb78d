use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `consume` tool.
    #[tool]
    fn consume(self) -> String {
        String::new()
    }
}

fn main() {}
