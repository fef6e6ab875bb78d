use ors_server::prelude::*;

struct NoTasks;

#[environment]
impl Environment for NoTasks {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(NoTasks)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

struct CountOnly;

#[environment]
impl Environment for CountOnly {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn num_tasks(_split: &str) -> Result<Option<usize>, EnvError> {
        Ok(Some(10))
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(CountOnly)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
