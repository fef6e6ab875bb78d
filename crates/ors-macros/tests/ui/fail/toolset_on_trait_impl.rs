// `#[toolset]` on a trait impl stops the expansion: one error, and nothing that follows from
// it (neither for its tool methods nor where an environment includes it).
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

#[derive(Default)]
struct Tools;

#[toolset]
impl Clone for Tools {
    fn clone(&self) -> Self {
        Tools
    }

    /// Ping.
    #[tool]
    fn ping(&self) -> String {
        String::new()
    }
}

struct Env {
    tools: Tools,
}

#[environment(toolsets(tools))]
impl Environment for Env {
    env_basics!(Env { tools: Tools });
}

fn main() {}
