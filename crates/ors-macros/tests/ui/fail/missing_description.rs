// The model reads a tool's description to decide when to call it: a tool without one does
// not compile.
use ors_server::prelude::*;

struct Tools;

#[toolset]
impl Tools {
    #[tool]
    fn undocumented(&self) -> String {
        String::new()
    }

    ///
    #[tool]
    fn blank_doc(&self) -> String {
        String::new()
    }

    #[tool(description = " ")]
    fn blank_description(&self) -> String {
        String::new()
    }
}

fn main() {}
