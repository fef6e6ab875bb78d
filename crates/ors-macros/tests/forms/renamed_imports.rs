// The context and the trait are recognised by type, not by name: renamed imports and aliases
// work, and the context may come before or after the input.
use ors_server::prelude::{environment, tool, wire, Blocks, EnvError, JsonObject, Secrets, Split};
use ors_server::runtime::env::EnvHandle;
use ors_server::{Environment as Env, RunToolOutput, ToolContext as Ctx};

type Context = ors_server::ToolContext;

#[wire]
struct Input {
    x: u32,
}

struct Renamed;

#[environment]
impl Env for Renamed {
    env_basics!(Renamed);

    /// The context by reference, under another name, before the input.
    #[tool]
    fn before(&self, ctx: &Ctx, input: Input) -> String {
        format!("{} {}", ctx.call_id(), input.x)
    }

    /// The context by value, after the input.
    #[tool]
    async fn after(&mut self, input: Input, ctx: Ctx) -> String {
        format!("{} {}", input.x, ctx.call_id())
    }

    /// The context through a type alias, and no input.
    #[tool]
    fn aliased(&self, ctx: &Context) -> String {
        ctx.session_id().to_owned()
    }
}

fn text(out: RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(out) => out.blocks[0].as_text().unwrap_or_default().to_owned(),
        RunToolOutput::Error(e) => panic!("tool failed: {e}"),
    }
}

pub fn main() {
    let served = EnvHandle::<Renamed>::default();
    let specs = served.table().shared_specs();
    let schema_keys: Vec<(&str, bool)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.input_schema.is_some()))
        .collect();
    assert_eq!(
        schema_keys,
        [("before", true), ("after", true), ("aliased", false)]
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let mut env = served
            .episode(Default::default(), Default::default())
            .await
            .expect("an episode");
        let ctx = Ctx::detached();
        let input = ors_server::__private::serde_json::json!({ "x": 7 });
        let before = env.call(ctx.clone(), "before", input.clone()).await;
        assert_eq!(text(before), "detached 7");
        let after = env.call(ctx.clone(), "after", input).await;
        assert_eq!(text(after), "7 detached");
        let aliased = env
            .call(ctx, "aliased", ors_server::__private::Value::Null)
            .await;
        assert_eq!(text(aliased), "detached");
    });
}
