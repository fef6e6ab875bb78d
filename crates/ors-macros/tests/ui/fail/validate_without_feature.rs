// `#[tool(validate)]` and `#[tool(schema = ...)]` in a build of ors-server without its cargo
// feature `validate`: one error each, on the attribute that needs the validator (not on
// `#[environment]`). The tests' own ors-server has the feature, so `lean` stands for the build
// without it: the macros' paths, with a `Validation` that has no validator.
use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

mod lean {
    pub mod __private {
        pub use ors_server::__private::*;
        pub struct Validation;
    }
}

#[wire]
struct Minutes {
    #[schemars(range(min = 1, max = 60))]
    minutes: u32,
}

struct Env;

#[environment(crate = lean)]
impl Environment for Env {
    env_basics!(Env);

    /// Wait a while.
    #[tool(validate)]
    fn wait(&self, input: Minutes) -> String {
        input.minutes.to_string()
    }

    /// Add a contact.
    #[tool(schema = r#"{"type": "object", "properties": {"name": {"type": "string"}}}"#)]
    fn add(&self, input: JsonObject) -> String {
        input.len().to_string()
    }
}

fn main() {}
