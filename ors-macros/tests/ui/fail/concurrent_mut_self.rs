use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env {
    reads: u32,
}

#[environment]
impl Environment for Env {
    env_basics!(Env { reads: 0 });

    /// Counts reads: a concurrent tool cannot change the environment through `&mut self`.
    #[tool(concurrent)]
    fn read(&mut self) -> String {
        self.reads += 1;
        String::new()
    }
}

fn main() {}
