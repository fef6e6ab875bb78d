use ors_server::prelude::*;

#[tool]
fn free() -> String {
    String::new()
}

fn main() {}
