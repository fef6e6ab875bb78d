use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

// Deserialize but no JsonSchema: the model would get no schema for it.
#[derive(serde::Deserialize)]
struct Query {
    q: String,
}

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `search` tool.
    #[tool]
    fn search(&self, input: Query) -> String {
        input.q
    }
}

fn main() {}
