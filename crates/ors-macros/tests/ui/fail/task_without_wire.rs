// A task type without serde: the error says to put `#[wire]` on it, not to derive serde's
// traits (a crate the author need not depend on).
use ors_server::prelude::*;

struct Question {
    text: String,
}

struct Env {
    question: Question,
}

#[environment]
impl Environment for Env {
    type Task = Question;
    fn splits() -> Vec<Split> {
        vec![]
    }
    async fn tasks(_split: &str) -> Result<Vec<Question>, EnvError> {
        Ok(vec![])
    }
    async fn new(question: Question, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Env { question })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(&self.question.text)])
    }
}

fn main() {}
