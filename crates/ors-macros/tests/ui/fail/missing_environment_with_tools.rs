// Without `#[environment]`, each `#[tool]` too says the impl needs it (and nothing else
// follows from the tool methods).
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

impl Environment for Env {
    env_basics!(Env);

    /// Submit an answer.
    #[tool]
    fn submit(&mut self) -> String {
        String::new()
    }
}

fn main() {}
