use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `submit` tool.
    #[tool]
    fn submit(&self) -> String {
        String::new()
    }

    /// The `submit_again` tool.
    #[tool(name = "submit")]
    fn submit_again(&self) -> String {
        String::new()
    }
}

fn main() {}
