// An `impl Environment` without `#[environment]`: one error, on the impl, saying to add it.
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

impl Environment for Env {
    env_basics!(Env);
}

fn main() {}
