use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The model's plain answer.
    #[tool(terminal, concurrent)]
    fn answer(&self) -> String {
        String::new()
    }
}

fn main() {}
