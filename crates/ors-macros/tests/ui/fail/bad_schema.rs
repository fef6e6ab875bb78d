use ors_server::prelude::*;

#[macro_use]
#[path = "../support/env.rs"]
mod support;

struct Env;

#[environment]
impl Environment for Env {
    env_basics!(Env);

    /// Trailing comma.
    #[tool(schema = r#"{"type": "object", "properties": {},}"#)]
    fn trailing(&self, input: JsonObject) -> String {
        format!("{input:?}")
    }

    /// Not an object schema.
    #[tool(schema = r#"{"type": "string"}"#)]
    fn string(&self, input: JsonObject) -> String {
        format!("{input:?}")
    }

    /// Not a URL.
    #[tool(detail_url = "example.com/tool")]
    fn link(&self) -> String {
        String::new()
    }
}

fn main() {}
