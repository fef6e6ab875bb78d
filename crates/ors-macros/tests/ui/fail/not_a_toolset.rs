use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Plain;

struct Env {
    plain: Plain,
}

#[environment(toolsets(plain, missing))]
impl Environment for Env {
    env_basics!(Env { plain: Plain });
}

fn main() {}
