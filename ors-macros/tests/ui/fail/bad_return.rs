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

    #[tool]
    fn count(&self) -> u32 {
        7
    }
}

fn main() {}
