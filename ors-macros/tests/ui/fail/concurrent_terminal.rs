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

    /// The model's plain answer.
    #[tool(terminal, concurrent)]
    fn answer(&self) -> String {
        self.reads.to_string()
    }
}

fn main() {}
