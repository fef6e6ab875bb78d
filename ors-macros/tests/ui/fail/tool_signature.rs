// Mistakes in a tool's parameter list, each reported on its own token.
use ors_server::prelude::*;

#[wire]
struct Input {
    x: u32,
}

struct Tools;

#[toolset]
impl Tools {
    #[tool]
    fn late_context(&self, input: Input, ctx: &ToolContext) -> String {
        format!("{} {}", input.x, ctx.call_id())
    }

    #[tool]
    fn borrowed_input(&self, input: &Input) -> String {
        input.x.to_string()
    }

    #[tool]
    fn generic<T: Default>(&self) -> String {
        String::new()
    }

    #[tool]
    #[tool]
    fn twice(&self) -> String {
        String::new()
    }
}

fn main() {}
