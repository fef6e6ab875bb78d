// A method of the `Environment` trait cannot also be a tool: the macro would move it out of
// the trait impl.
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Teardown is not a tool.
    #[tool]
    async fn teardown(&mut self) -> String {
        String::new()
    }
}

// For a required method, rustc also reports it missing from the trait impl.
struct Required;

#[environment]
impl Environment for Required {
    env_basics!(no_prompt: Required);

    /// The prompt is not a tool.
    #[tool]
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
