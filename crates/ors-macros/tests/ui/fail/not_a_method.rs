use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Has no `self`.
    #[tool]
    fn lonely() -> String {
        String::new()
    }
}

fn main() {}
