use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Reads.
    #[tool(concurrent, exclusive)]
    fn read(&self) -> String {
        String::new()
    }
}

fn main() {}
