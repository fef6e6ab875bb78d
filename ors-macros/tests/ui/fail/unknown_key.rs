use ors_server::prelude::*;

struct Env;

#[environment]
impl Environment for Env {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Env)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }

    #[tool(sharde = false)]
    fn hint(&self) -> String {
        String::new()
    }

    // Every mistake in one attribute is reported, not just the first.
    #[tool(nme = "answer", descripton = "Answer.", shared = "no")]
    fn answer(&self) -> String {
        String::new()
    }
}

fn main() {}
