use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

#[wire]
struct A {
    a: u32,
}

#[wire]
struct B {
    b: u32,
}

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// The `both` tool.
    #[tool]
    fn both(&self, a: A, b: B) -> String {
        format!("{} {}", a.a, b.b)
    }
}

fn main() {}
