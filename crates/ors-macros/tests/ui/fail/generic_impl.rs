// A generic impl stops the expansion: one error each, and nothing that follows from the
// missing table (not "missing #[environment]", not "not a toolset" where it is included).
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env<T> {
    tools: Tools<T>,
}

#[environment(toolsets(tools))]
impl<T: Default + Send + Sync + 'static> Environment for Env<T> {
    env_basics!(Env { tools: Tools(T::default()) });

    /// Count.
    #[tool]
    fn count(&self) -> String {
        String::new()
    }
}

struct Tools<T>(T);

#[toolset]
impl<T> Tools<T> {
    /// Ping.
    #[tool]
    fn ping(&self) -> String {
        String::new()
    }
}

// Includes the generic toolset: no second error here.
struct Holder {
    tools: Tools<u8>,
}

#[environment(toolsets(tools))]
impl Environment for Holder {
    env_basics!(Holder { tools: Tools(0) });
}

fn main() {}
