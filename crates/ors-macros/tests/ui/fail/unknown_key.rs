use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `hint` tool.
    #[tool(sharde = false)]
    fn hint(&self) -> String {
        String::new()
    }

    // Every mistake in one attribute is reported, not just the first.
    /// The `answer` tool.
    #[tool(nme = "answer", descripton = "Answer.", shared = "no")]
    fn answer(&self) -> String {
        String::new()
    }
}

fn main() {}
