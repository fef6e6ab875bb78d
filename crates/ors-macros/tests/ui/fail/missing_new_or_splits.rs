use ors_server::prelude::*;

struct NoNew;

#[environment]
impl Environment for NoNew {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

struct NoSplits;

// The state is taken, so `new` is there: only `splits` is missing.
#[environment]
impl Environment for NoSplits {
    type Task = JsonObject;
    type State = u32;
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![])
    }
    async fn new(_n: &u32, _task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(NoSplits)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
