use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Crunch numbers.
    #[tool(blocking)]
    async fn crunch(&self) -> String {
        String::new()
    }
}

fn main() {}
