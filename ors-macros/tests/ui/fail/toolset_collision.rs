use ors_server::prelude::*;

struct Calculator;

#[toolset]
impl Calculator {
    /// Add two numbers.
    #[tool]
    fn add(&self) -> String {
        String::new()
    }
}

struct Env {
    calc: Calculator,
}

#[environment(toolsets(calc))]
impl Environment for Env {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Env { calc: Calculator })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }

    /// Also called add.
    #[tool]
    fn add(&self) -> String {
        String::new()
    }
}

// Two fields of the same toolset type collide with each other.
struct Twice {
    first: Calculator,
    second: Calculator,
}

#[environment(toolsets(first, second))]
impl Environment for Twice {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Twice {
            first: Calculator,
            second: Calculator,
        })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
