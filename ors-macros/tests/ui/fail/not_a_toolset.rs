use ors_server::prelude::*;

struct Plain;

struct Env {
    plain: Plain,
}

#[environment(toolsets(plain, missing))]
impl Environment for Env {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Env { plain: Plain })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
