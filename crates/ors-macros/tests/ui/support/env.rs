// Shared by the ui tests and forms.rs (included with `#[path]`, not a test itself): the items
// of an `impl Environment` that no test is about, so each test shows only its mistake.

/// `type Task = JsonObject`, no splits, no tasks, an empty prompt, and `new` returning `$value`;
/// `no_prompt: $value` leaves `prompt` to the test.
macro_rules! env_basics {
    ($value:expr) => {
        env_basics!(no_prompt: $value);
        async fn prompt(&self) -> Result<Blocks, EnvError> {
            Ok(vec![])
        }
    };
    (no_prompt: $value:expr) => {
        type Task = JsonObject;
        fn splits() -> Vec<Split> {
            vec![]
        }
        async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
            Ok(vec![])
        }
        async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
            Ok($value)
        }
    };
}
