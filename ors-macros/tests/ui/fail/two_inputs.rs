use ors_server::prelude::*;

#[wire]
struct A {
    a: u32,
}

#[wire]
struct B {
    b: u32,
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
    fn both(&self, a: A, b: B) -> String {
        format!("{} {}", a.a, b.b)
    }
}

fn main() {}
