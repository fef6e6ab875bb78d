use ors_server::prelude::*;

#[environment]
struct NotAnImpl;

struct Inherent;

#[environment]
impl Inherent {
    /// The `ping` tool.
    #[tool]
    fn ping(&self) -> String {
        String::new()
    }
}

struct OtherTrait;

#[environment]
impl Default for OtherTrait {
    fn default() -> Self {
        OtherTrait
    }
}

fn main() {}
