// Every accepted signature and return type of a #[tool] method, and the ways to name an
// environment.
use ors_server::prelude::*;

#[wire]
struct Input {
    x: u32,
}

struct Forms;

#[environment]
impl Environment for Forms {
    env_basics!(Forms);
    const NAME: &'static str = "custom-name";

    /// The `sync_ref` form.
    #[tool]
    fn sync_ref(&self) -> ToolOutput {
        ToolOutput::text("")
    }
    /// The `sync_mut` form.
    #[tool]
    fn sync_mut(&mut self, _input: Input) -> String {
        String::new()
    }
    /// The `async_ref` form.
    #[tool]
    async fn async_ref(&self, _ctx: &ToolContext) -> &'static str {
        ""
    }
    /// The `async_mut` form.
    #[tool]
    async fn async_mut(
        &mut self,
        _ctx: &ToolContext,
        Input { x }: Input,
    ) -> Result<String, String> {
        Ok(x.to_string())
    }
    /// The `typed_self` form.
    #[tool]
    fn typed_self(self: &mut Self, _ctx: ToolContext) -> Blocks {
        vec![]
    }
    /// The `block` form.
    #[tool]
    fn block(&self) -> Block {
        Block::text("one")
    }
    /// The `fallible_blocks` form.
    #[tool]
    fn fallible_blocks(&self) -> Result<Blocks, std::io::Error> {
        Ok(vec![])
    }
    /// The `type` form.
    #[tool]
    fn r#type(&self) -> String {
        "the raw prefix is not part of the tool name".into()
    }
    /// The `with_lifetime` form.
    #[tool]
    async fn with_lifetime<'a>(&'a self, _input: Input) -> String {
        String::new()
    }
}

struct Named;

#[environment(name = "renamed_env")]
impl Environment for Named {
    env_basics!(Named);
}

// A `cfg` on the impl (after the macro, so the macro sees it) covers what the macro adds beside
// it: nothing here names `Gone`, which does not exist.
#[cfg(any())]
struct Gone;

#[environment]
#[cfg(any())]
impl Environment for Gone {
    env_basics!(Gone);

    /// Takes an input, so the macro adds its parameter checks.
    #[tool]
    fn take(&self, _a: Input, _ctx: &ToolContext) -> String {
        String::new()
    }
}

#[toolset]
#[cfg(any())]
impl Gone {
    /// Also compiled out.
    #[tool]
    fn other(&self, _a: Input) -> String {
        String::new()
    }
}

pub fn main() {
    assert_eq!(Forms::NAME, "custom-name");
    assert_eq!(Named::NAME, "renamed_env");
    let table = Forms::tool_table(&());
    let names: Vec<_> = table.all_specs().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sync_ref",
            "sync_mut",
            "async_ref",
            "async_mut",
            "typed_self",
            "block",
            "fallible_blocks",
            "type",
            "with_lifetime"
        ]
    );
    assert!(Named::tool_table(&()).all_specs().next().is_none());
}
