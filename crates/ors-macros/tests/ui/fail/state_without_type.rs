use ors_server::prelude::*;

struct Data {
    questions: Vec<String>,
}

struct Quiz;

// `tasks` takes the state, but the impl does not say what the state is.
#[environment]
impl Environment for Quiz {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![Split::test("test")]
    }
    async fn tasks(data: &Data, _split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(data.questions.iter().map(|_| JsonObject::new()).collect())
    }
    async fn new(_data: &Data, _task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Quiz)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
}

fn main() {}
