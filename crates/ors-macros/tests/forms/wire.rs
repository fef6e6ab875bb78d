// #[wire] on the shapes tasks and inputs take, with serde attributes, without a direct
// serde or schemars dependency in scope.
use ors_server::prelude::*;

#[wire]
#[derive(Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Task {
    /// The question.
    question_text: String,
    #[serde(default)]
    hints: Vec<String>,
}

#[wire]
#[derive(Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Action {
    Move { dx: i32, dy: i32 },
    Wait,
}

#[wire]
struct Page<T> {
    items: Vec<T>,
    next: Option<u32>,
}

mod sdk {
    pub use ors_server::*;
}

#[wire(crate = crate::wire::sdk)]
struct ThroughAnotherPath {
    value: u8,
}

pub fn main() {
    use ors_server::__private::serde_json::{from_value, json, to_value};

    let task: Task = from_value(json!({"questionText": "2+2?"})).unwrap();
    assert_eq!(
        task,
        Task {
            question_text: "2+2?".into(),
            hints: vec![]
        }
    );
    let action: Action = from_value(json!({"kind": "move", "dx": 1, "dy": -1})).unwrap();
    assert_eq!(action, Action::Move { dx: 1, dy: -1 });
    assert_eq!(to_value(Action::Wait).unwrap(), json!({"kind": "wait"}));
    let page = Page {
        items: vec![task],
        next: None,
    };
    assert_eq!(
        to_value(&page).unwrap(),
        json!({"items": [{"questionText": "2+2?", "hints": []}], "next": null})
    );
    let schema = ors_server::runtime::schema::input_schema::<Task>().unwrap();
    assert_eq!(schema["required"], json!(["questionText"]));
    assert_eq!(
        schema["properties"]["questionText"]["description"],
        "The question."
    );
    let _ = ThroughAnotherPath { value: 1 }.value;
    let _ = to_value(ThroughAnotherPath { value: 1 }).unwrap();
}
