use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

#[wire]
struct Contact {
    name: String,
}

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Add a contact.
    #[tool(schema = r#"{"type": "object", "properties": {"name": {"type": "string"}}}"#)]
    fn add(&self, input: Contact) -> String {
        input.name
    }
}

fn main() {}
