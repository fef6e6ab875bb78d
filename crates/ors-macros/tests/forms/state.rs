// An environment with start-up state: the functions that need it take it first, the others
// leave it out; its dynamic tools come from it; one type is served twice with two states.
use std::sync::Arc;

use ors_server::prelude::*;
use ors_server::runtime::{DynEnvironment, EnvHandle};
use ors_server::DynamicTool;

#[wire]
struct Task {
    n: u32,
}

/// What the server is started with.
struct Deck {
    size: u32,
    /// Shared with every episode.
    greeting: Arc<str>,
}

fn deck_tools(deck: &Deck) -> Vec<DynamicTool> {
    let size = deck.size;
    vec![DynamicTool::new(
        "size",
        "How many tasks the deck has.",
        ors_server::__private::serde_json::json!({"type": "object"}),
        move |_, _| async move { size.to_string() },
    )
    .expect("a valid tool")]
}

struct Card {
    task: Task,
    greeting: Arc<str>,
}

#[environment(dynamic_tools = deck_tools)]
impl Environment for Card {
    type Task = Task;
    type State = Deck;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn num_tasks(deck: &Deck, _split: &str) -> Result<Option<usize>, EnvError> {
        Ok(Some(deck.size as usize))
    }
    async fn task(_split: &str, index: usize) -> Result<Task, EnvError> {
        Ok(Task { n: index as u32 })
    }
    async fn task_range(
        deck: &Deck,
        _split: &str,
        start: usize,
        stop: usize,
    ) -> Result<Vec<Task>, EnvError> {
        Ok((start..stop.min(deck.size as usize))
            .map(|i| Task { n: i as u32 })
            .collect())
    }
    async fn new(deck: &Deck, task: Task, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            task,
            greeting: Arc::clone(&deck.greeting),
        })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(format!(
            "{} {}",
            self.greeting, self.task.n
        ))])
    }

    /// Say the greeting.
    #[tool]
    fn greet(&self) -> String {
        self.greeting.to_string()
    }
}

pub fn main() {
    let small = EnvHandle::<Card>::new(Deck {
        size: 2,
        greeting: "hi".into(),
    })
    .named("small");
    let big = EnvHandle::<Card>::new(Deck {
        size: 52,
        greeting: "hello".into(),
    });
    assert_eq!((small.name(), big.name()), ("small", "card"));
    let tools: Vec<&str> = big.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["greet", "size"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        assert_eq!(small.num_tasks("train").await.expect("counted"), 2);
        assert_eq!(big.num_tasks("train").await.expect("counted"), 52);
        let task = big.task("train", 7).await.expect("a task");
        let episode = big
            .create(task, Secrets::default(), None)
            .await
            .expect("an episode");
        let prompt = episode.prompt().await.expect("a prompt");
        assert_eq!(prompt[0].as_text(), Some("hello 7"));
    });
}
