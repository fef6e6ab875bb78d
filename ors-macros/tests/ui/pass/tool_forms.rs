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
    type Task = JsonObject;
    const NAME: &'static str = "custom-name";
    fn splits() -> Vec<Split> {
        vec!["train".into()]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Forms)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }

    #[tool]
    fn sync_ref(&self) -> ToolOutput {
        ToolOutput::text("")
    }
    #[tool]
    fn sync_mut(&mut self, _input: Input) -> String {
        String::new()
    }
    #[tool]
    async fn async_ref(&self, _ctx: &ToolContext) -> &'static str {
        ""
    }
    #[tool]
    async fn async_mut(
        &mut self,
        _ctx: &ToolContext,
        Input { x }: Input,
    ) -> Result<String, String> {
        Ok(x.to_string())
    }
    #[tool]
    fn typed_self(self: &mut Self, _ctx: ToolContext) -> Blocks {
        vec![]
    }
    #[tool]
    fn block(&self) -> Block {
        Block::text("one")
    }
    #[tool]
    fn fallible_blocks(&self) -> Result<Blocks, std::io::Error> {
        Ok(vec![])
    }
    #[tool]
    fn r#type(&self) -> String {
        "the raw prefix is not part of the tool name".into()
    }
    #[tool]
    async fn with_lifetime<'a>(&'a self, _input: Input) -> String {
        String::new()
    }
}

struct Named;

#[environment(name = "renamed_env")]
impl Environment for Named {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Named)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {
    assert_eq!(Forms::NAME, "custom-name");
    assert_eq!(Named::NAME, "renamed_env");
    let names: Vec<_> = Forms::__ors_tool_table()
        .all_specs()
        .map(|s| s.name.as_str())
        .collect();
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
    assert!(Named::__ors_tool_table().all_specs().next().is_none());
}
