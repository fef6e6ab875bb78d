use ors_server::prelude::*;

// Deserialize but no JsonSchema: the model would get no schema for it.
#[derive(Deserialize)]
struct Query {
    q: String,
}

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
    fn search(&self, input: Query) -> String {
        input.q
    }
}

fn main() {}
