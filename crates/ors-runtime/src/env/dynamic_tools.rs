//! Tools defined at run time, not by `#[tool]` methods: a [`ToolSpec`] with a hand-written
//! input schema and an async handler. For tools whose names are known only at start-up (a
//! configuration file, an MCP server's listing, webhooks).
//!
//! Two ways in:
//! - shared by every session: `#[environment(dynamic_tools = path::to::fn)]` names a
//!   `fn(&State) -> Vec<DynamicTool>` called once when the environment's tool table is built
//!   (when it is served, from its start-up state); its tools join the `#[tool]` methods in
//!   `/tools`, with the same dispatch;
//! - per session: keep a [`DynamicTools`] in the episode and serve it from
//!   `Environment::task_tools` and `Environment::call_task_tool`.
//!
//! Either way the schema is served verbatim and every input is validated against it before
//! the handler runs; a mismatch is an `ok: false` result naming the field.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{json, Value};

use ors_core::types::{IntoToolResult, JsonObject, RunToolOutput, ToolSpec};

use super::table::{as_object, as_value, refused_input};
use super::{valid_tool_name, ToolContext, ToolEntry, ToolTableError};
use crate::schema::InputValidator;

/// The handler of a [`DynamicTool`]: the call's context and its validated input object.
pub type DynamicHandler =
    Arc<dyn Fn(ToolContext, JsonObject) -> BoxFuture<'static, RunToolOutput> + Send + Sync>;

/// A tool defined at run time: its spec (with a hand-written input schema) and its handler.
/// Cheap to clone.
///
/// ```
/// use ors_runtime::env::{DynamicTool, ToolContext};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let tool = DynamicTool::new(
///     "get_weather",
///     "Get the current weather for a city",
///     json!({
///         "type": "object",
///         "properties": {
///             "city": {"type": "string"},
///             "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}
///         },
///         "required": ["city"]
///     }),
///     |_ctx: ToolContext, input| async move {
///         format!("Weather in {}: 22°", input["city"].as_str().unwrap_or("?"))
///     },
/// )
/// .expect("a valid tool");
/// let out = tool.call(ToolContext::detached(), json!({"city": "Paris"})).await;
/// assert_eq!(out.output().unwrap().blocks[0].as_text(), Some("Weather in Paris: 22°"));
/// let bad = tool.call(ToolContext::detached(), json!({"city": "Paris", "units": "K"})).await;
/// let refused = bad.error_info().expect("an invalid input is refused");
/// assert_eq!(refused.reason, Some(ors_core::types::ToolErrorReason::InputValidation));
/// # }
/// ```
#[derive(Clone)]
pub struct DynamicTool {
    spec: ToolSpec,
    validator: Arc<InputValidator>,
    handler: DynamicHandler,
}

impl std::fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl DynamicTool {
    /// A tool named `name` (1 to 64 characters from `A-Z a-z 0-9 _ -`) whose input is
    /// described by `schema` (a JSON Schema object with `"type": "object"`, served verbatim)
    /// and answered by `handler`, which returns anything a `#[tool]` method may.
    pub fn new<F, Fut, R>(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        handler: F,
    ) -> Result<Self, ToolTableError>
    where
        F: Fn(ToolContext, JsonObject) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult,
    {
        let name = name.into();
        let bad = |reason: &str| ToolTableError::schema(&name, reason);
        if !valid_tool_name(&name) {
            return Err(bad(
                "a tool name is 1 to 64 characters from `A-Z a-z 0-9 _ -`",
            ));
        }
        let description = description.into();
        if description.trim().is_empty() {
            return Err(bad(
                "a tool needs a description: the model reads it to decide when to call it",
            ));
        }
        let (validator, schema) =
            InputValidator::from_value(schema).map_err(|e| bad(&e.to_string()))?;
        let handler: DynamicHandler = Arc::new(move |ctx, input| {
            let fut = handler(ctx, input);
            Box::pin(async move { fut.await.into_tool_result() })
        });
        Ok(Self {
            spec: ToolSpec::new(name, description, Some(schema)),
            validator: Arc::new(validator),
            handler,
        })
    }

    /// Add a `detail_url` to the spec (Bedrock's link to more about the tool).
    pub fn with_detail_url(mut self, url: impl Into<String>) -> Self {
        self.spec.detail_url = Some(url.into());
        self
    }

    /// Mark the tool as one that runs the agent's commands or code: the spec says
    /// `"runs_commands": true`, and `ors check` tries to escape through it (PROTOCOL_NOTES row
    /// `runs-commands`).
    pub fn with_runs_commands(mut self) -> Self {
        self.spec.runs_commands = true;
        self
    }

    /// Add an `output_schema` to the spec (what the tool returns in `metadata.structured`).
    pub fn with_output_schema(mut self, schema: JsonObject) -> Self {
        self.spec.output_schema = Some(schema);
        self
    }

    /// The spec, as `/tools` lists it.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Validate the input, then run the handler (an invalid input is `ok: false` with reason
    /// `input_validation`, naming the field, as when the tool is in an environment's table,
    /// and the handler does not run).
    pub fn call(&self, ctx: ToolContext, input: Value) -> BoxFuture<'static, RunToolOutput> {
        match checked_input(&self.validator, &self.spec.name, input) {
            Ok(obj) => (self.handler)(ctx, obj),
            Err(out) => Box::pin(async move { out }),
        }
    }

    /// This tool as an entry of an environment's table (the handler ignores the episode). The
    /// table validates inputs before the entry runs, so the entry does not again.
    pub fn entry<E: 'static>(&self, shared: bool) -> ToolEntry<E> {
        let handler = Arc::clone(&self.handler);
        let name = self.spec.name.clone();
        ToolEntry::new(
            self.spec.clone(),
            shared,
            move |_env: &mut E, ctx, input| match as_value(&name, input)
                .and_then(|v| as_object(&name, v))
            {
                Ok(obj) => handler(ctx, obj),
                Err(out) => Box::pin(async move { out }),
            },
        )
        .validated(Arc::clone(&self.validator))
    }
}

/// An input checked against a tool's object schema (`null` read as `{}`), as the object it is;
/// the refusal names the tool and each offending field.
pub(crate) fn checked_input(
    validator: &InputValidator,
    tool: &str,
    input: Value,
) -> Result<JsonObject, RunToolOutput> {
    let input = if input.is_null() { json!({}) } else { input };
    validator.check(tool, &input).map_err(refused_input)?;
    // The schema is an object schema, so the validator refused anything else.
    as_object(tool, input)
}

/// A dynamic tool as a shared entry of an environment's table (`#[environment(dynamic_tools =
/// ...)]`).
impl<E: 'static> From<DynamicTool> for ToolEntry<E> {
    fn from(tool: DynamicTool) -> Self {
        tool.entry(true)
    }
}

/// A set of [`DynamicTool`]s with unique names, for an episode's own tools. Cheap to clone.
///
/// ```
/// use ors_runtime::env::{DynamicTool, DynamicTools, ToolContext};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let echo = DynamicTool::new(
///     "echo",
///     "Repeat the text.",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |_ctx, input| async move { input["text"].as_str().unwrap_or_default().to_owned() },
/// ).unwrap();
/// let tools = DynamicTools::new(vec![echo]).unwrap();
/// assert_eq!(tools.specs()[0].name, "echo");
/// let out = tools.call(ToolContext::detached(), "echo", json!({"text": "hi"})).unwrap().await;
/// assert!(out.is_ok());
/// assert!(tools.call(ToolContext::detached(), "nope", json!({})).is_none());
/// # }
/// ```
#[derive(Clone, Default, Debug)]
pub struct DynamicTools {
    tools: Arc<[DynamicTool]>,
    by_name: Arc<HashMap<String, usize>>,
}

impl DynamicTools {
    /// A set of tools; two with one name is an error.
    pub fn new(tools: Vec<DynamicTool>) -> Result<Self, ToolTableError> {
        let mut by_name = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if by_name.insert(t.spec.name.clone(), i).is_some() {
                return Err(ToolTableError::Duplicate(t.spec.name.clone()));
            }
        }
        Ok(Self {
            tools: tools.into(),
            by_name: Arc::new(by_name),
        })
    }

    /// The specs, in the order given.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    /// The tools, in the order given.
    pub fn tools(&self) -> &[DynamicTool] {
        &self.tools
    }

    /// Call a tool of the set; `None` when the set has no tool of that name.
    pub fn call(
        &self,
        ctx: ToolContext,
        name: &str,
        input: Value,
    ) -> Option<BoxFuture<'static, RunToolOutput>> {
        Some(self.tools[*self.by_name.get(name)?].call(ctx, input))
    }
}
