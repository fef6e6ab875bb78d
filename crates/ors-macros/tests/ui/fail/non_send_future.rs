use std::rc::Rc;

use ors_server::prelude::*;

struct Tools;

#[toolset]
impl Tools {
    /// Holds an `Rc` across an await: the server runs tools on a multi-threaded runtime.
    #[tool]
    async fn wait(&self) -> String {
        let shared = Rc::new(1);
        std::future::ready(()).await;
        shared.to_string()
    }
}

fn main() {}
