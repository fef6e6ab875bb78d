use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env {
    reads: u32,
}

#[environment]
impl Environment for Env {
    env_basics!(Env { reads: 0 });

    /// Reads.
    #[tool(concurrent, exclusive)]
    fn read(&self) -> String {
        self.reads.to_string()
    }
}

fn main() {}
