use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment(name = "no spaces", toolset(calc))]
impl Environment for Env {
    env_basics!(Env);
}

fn main() {}
