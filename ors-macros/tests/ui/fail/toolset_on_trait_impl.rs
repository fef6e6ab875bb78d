use ors_server::prelude::*;

struct Tools;

#[toolset]
impl Default for Tools {
    fn default() -> Self {
        Tools
    }
}

fn main() {}
