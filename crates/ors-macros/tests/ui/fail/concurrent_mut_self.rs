use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Reads, through `&mut self`.
    #[tool(concurrent)]
    fn read(&mut self) -> String {
        String::new()
    }
}

fn main() {}
