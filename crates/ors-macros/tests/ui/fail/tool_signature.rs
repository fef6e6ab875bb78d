// Mistakes in a tool's parameter list, each reported once, on its own token.
use ors_server::prelude::*;

#[wire]
struct Input {
    x: u32,
}

struct Tools;

#[toolset]
impl Tools {
    /// Takes its input by reference.
    #[tool]
    fn borrowed_input(&self, input: &Input) -> String {
        input.x.to_string()
    }

    /// Takes the context mutably.
    #[tool]
    fn mutable_context(&self, ctx: &mut ToolContext) -> String {
        ctx.call_id().to_owned()
    }

    /// Generic over its return.
    #[tool]
    fn generic<T: Default>(&self) -> String {
        String::new()
    }

    /// Takes `impl Trait`.
    #[tool]
    fn opaque(&self, input: impl Into<String>) -> String {
        input.into()
    }

    /// Marked twice.
    #[tool]
    #[tool]
    fn twice(&self) -> String {
        String::new()
    }
}

fn main() {}
