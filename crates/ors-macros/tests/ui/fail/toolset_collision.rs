use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Calculator;

#[toolset]
impl Calculator {
    /// Add two numbers.
    #[tool]
    fn add(&self) -> String {
        String::new()
    }
}

struct Env {
    calc: Calculator,
}

#[environment(toolsets(calc))]
impl Environment for Env {
    env_basics!(Env { calc: Calculator });

    /// Also called add.
    #[tool]
    fn add(&self) -> String {
        String::new()
    }
}

// Two fields of the same toolset type collide with each other.
struct Twice {
    first: Calculator,
    second: Calculator,
}

#[environment(toolsets(first, second))]
impl Environment for Twice {
    env_basics!(Twice { first: Calculator, second: Calculator });
}

fn main() {}
