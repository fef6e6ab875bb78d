//! The attribute macros of ors-rs: `#[environment]`, `#[tool]`, `#[toolset]` and `#[wire]`.
//!
//! Use them through `ors_server` (`use ors_server::prelude::*;`): the generated code names
//! everything by absolute path through `::ors_server::__private`, so an environment crate
//! needs neither `serde`, `schemars` nor `serde_json` as direct dependencies. If you depend
//! on the SDK under another name, say so with `crate = ::your_name` on each macro.
//!
//! Each macro parses, then checks, then expands; every problem found is reported at once,
//! on the offending token, and the item is still emitted so one mistake gives one message.
//! What depends on types (is this parameter the `ToolContext`? is this impl's trait
//! `Environment`? can this type be a task?) is decided by traits in the generated code, whose
//! `#[diagnostic::on_unimplemented]` messages say what to write; after a mistake that stops
//! the expansion (a generic impl, an impl of no trait), the items the macro would have added
//! are emitted as stubs, so nothing else fails because of it.

use proc_macro::TokenStream;

mod args;
mod environment;
mod item;
mod table;
mod tool;
mod toolset;
mod wire;

// The helpers every macro's module calls as `crate::respan` and so on; they live in item.rs.
use item::{cfgs, impl_beside, item_head, parse_impl, respan};

/// Turns `impl Environment for T { ... }` into an ORS environment.
///
/// The macro moves the `#[tool]` methods into an inherent `impl T` and implements
/// `EnvironmentMeta` for `T`: `const NAME` (the type name lower-cased, unless you write one in
/// the impl or pass `name = "..."`), `type State` (what you write in the impl, else `()`), and
/// the tool table, built once per served environment with O(1) lookup by name. The start-up
/// functions (`splits`, `tasks`, `num_tasks`, `task`, `task_range`, `new`) take the state as
/// their first parameter, `&Self::State`; leave it out where you do not need it and the macro
/// adds an unused one. `Environment` requires `EnvironmentMeta`, so an impl without the macro
/// is one error saying to add it.
///
/// Arguments, all optional:
/// - `name = "..."`: the environment name in URLs;
/// - `toolsets(field, ...)`: fields of `T` whose type has a `#[toolset]` impl; their tools
///   join the environment's (a name collision is a compile error);
/// - `select_toolsets(field = "name", ...)`: toolset fields a session selects by name at
///   `/create`;
/// - `dynamic_tools = path`: a `fn(&State) -> Vec<T>` (`T` a `DynamicTool` or a `ToolEntry`)
///   whose tools, known only at start-up, join the table;
/// - `reasoning`: every tool takes an optional `reasoning` string;
/// - `calls_after_finished`: calls go on after one returned `finished: true`;
/// - `crate = ::path`: where the SDK is, when it is not `::ors_server`.
///
/// ```
/// use ors_server::prelude::*;
///
/// #[wire]
/// struct Submit {
///     /// Your final answer, digits only.
///     answer: String,
/// }
///
/// #[wire]
/// struct MathTask { question: String, answer: String }
///
/// struct Gsm8k { task: MathTask, calc: Calculator }
///
/// #[environment(toolsets(calc))]
/// impl Environment for Gsm8k {
///     type Task = MathTask;
///     fn splits() -> Vec<Split> { vec![Split::train("train"), Split::test("test")] }
///     async fn tasks(_split: &str) -> Result<Vec<MathTask>, EnvError> { Ok(vec![]) }
///     async fn new(task: MathTask, _secrets: Secrets) -> Result<Self, EnvError> {
///         Ok(Self { task, calc: Calculator })
///     }
///     async fn prompt(&self) -> Result<Blocks, EnvError> {
///         Ok(vec![Block::text(&self.task.question)])
///     }
///
///     /// Submit your final answer to the math problem.
///     #[tool]
///     async fn submit(&mut self, input: Submit) -> ToolOutput {
///         if input.answer.trim() == self.task.answer {
///             ToolOutput::text("Correct!").with_reward(1.0).finish()
///         } else {
///             ToolOutput::text("Wrong.").with_reward(0.0).finish()
///         }
///     }
/// }
///
/// struct Calculator;
///
/// #[wire]
/// struct AddInput { a: i64, b: i64 }
///
/// #[toolset]
/// impl Calculator {
///     /// Add two integers.
///     #[tool]
///     fn add(&self, input: AddInput) -> String {
///         (input.a + input.b).to_string()
///     }
/// }
///
/// assert_eq!(Gsm8k::NAME, "gsm8k");
/// let table = Gsm8k::tool_table(&());
/// let names: Vec<_> = table.shared_specs().iter().map(|t| t.name.as_str()).collect();
/// assert_eq!(names, ["submit", "add"]);
/// ```
#[proc_macro_attribute]
pub fn environment(attr: TokenStream, item: TokenStream) -> TokenStream {
    environment::expand(attr.into(), item.into()).into()
}

/// Marks a method of an `#[environment]` or `#[toolset]` impl as a tool.
///
/// A tool method takes `&self` or `&mut self`, then, in any order, optionally the tool context
/// (`&ToolContext` or `ToolContext`, recognised by its type, so under any import name) and at
/// most one input whose type is `Deserialize + JsonSchema` (use `#[wire]`). It may be `async`.
/// It returns a `ToolOutput`, anything `Into<ToolOutput>` (a `String` is one text block), or
/// `Result<T, E>` with `T: Into<ToolOutput>` and `E: Display` (an `Err` is `ok: false`).
///
/// Every tool has a description, which the model reads to decide when to call it: the doc
/// comment, or `description = "..."`; a tool with neither does not compile.
///
/// Arguments, all optional: `name = "..."` (default: the method name),
/// `description = "..."` (default: the doc comment), `shared = false` (list the tool only
/// among the episode's task tools). Names are 1 to 64 characters from `A-Z a-z 0-9 _ -`
/// and unique.
///
/// How a call shares its session (PROTOCOL_NOTES row `tool-concurrency`): by default a call
/// has the episode to itself, and a session's calls run one at a time in arrival order.
/// `concurrent` (an async or plain `fn` taking `&self`) lets calls run beside the session's
/// other concurrent calls: for read-only lookups and shells. `exclusive` says the default
/// explicitly: the call waits for every call in flight, concurrent ones included, and holds
/// back the concurrent calls that arrive after it. `concurrent` on `&mut self`, or with
/// `exclusive`, `terminal` (a terminal tool is always exclusive) or `blocking`, is an error.
///
/// ```
/// use ors_server::prelude::*;
///
/// #[wire]
/// struct Guess {
///     /// A number from 1 to 100.
///     number: u32,
/// }
///
/// struct Counter { secret: u32, guesses: u32 }
///
/// #[toolset]
/// impl Counter {
///     /// Guess the secret number.
///     #[tool]
///     async fn guess(&mut self, ctx: &ToolContext, input: Guess) -> Result<ToolOutput, String> {
///         self.guesses += 1;
///         ctx.progress(self.guesses);
///         match input.number {
///             0 | 101.. => Err(format!("{} is out of range", input.number)),
///             n if n == self.secret => Ok(ToolOutput::text("Yes!").with_reward(1.0).finish()),
///             _ => Ok(ToolOutput::text("No.")),
///         }
///     }
///
///     #[tool(name = "count", description = "How many guesses so far.", shared = false, concurrent)]
///     fn guesses(&self) -> String {
///         self.guesses.to_string()
///     }
/// }
///
/// let table = Counter::tool_table();
/// let specs: Vec<_> = table.all_specs().map(|s| s.name.as_str()).collect();
/// assert_eq!(specs, ["guess", "count"]);
/// assert!(table.is_concurrent("count"));
/// ```
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream {
    // Reached only when no #[environment] / #[toolset] took the attribute off first: the impl
    // around the method has neither. A method is dropped (its error stands in for it): kept,
    // it would add "not a member of trait `Environment`" to the missing-#[environment] error.
    let mut out = syn::Error::new(
        proc_macro2::Span::call_site(),
        "#[tool] is read by the #[environment] or #[toolset] on the impl around it, and there is \
         none: add #[environment] above `impl Environment for ...`, or #[toolset] above an \
         inherent impl",
    )
    .to_compile_error();
    if !syn::parse::<syn::ImplItemFn>(item.clone()).is_ok_and(|f| f.sig.receiver().is_some()) {
        out.extend(proc_macro2::TokenStream::from(item));
    }
    out.into()
}

/// Makes an inherent impl a reusable set of tools, for environments to include with
/// `#[environment(toolsets(field))]`.
///
/// The impl is emitted as written (without the `#[tool]` attributes), plus
/// `impl Toolset for T` with the tool names and the table. Argument: `crate = ::path`.
///
/// ```
/// use ors_server::prelude::*;
///
/// #[wire]
/// struct Path { path: String }
///
/// #[derive(Default)]
/// struct Files { files: std::collections::BTreeMap<String, String> }
///
/// #[toolset]
/// impl Files {
///     /// Read a file.
///     #[tool]
///     fn read(&self, input: Path) -> Result<String, String> {
///         self.files.get(&input.path).cloned().ok_or(format!("no such file: {}", input.path))
///     }
/// }
///
/// assert_eq!(<Files as Toolset>::TOOL_NAMES, ["read"]);
/// ```
#[proc_macro_attribute]
pub fn toolset(attr: TokenStream, item: TokenStream) -> TokenStream {
    toolset::expand(attr.into(), item.into()).into()
}

/// Derives `Serialize`, `Deserialize` and `JsonSchema` through the SDK's re-exports, for tool
/// inputs and task types. Serde and schemars attributes (`#[serde(rename = "...")]`, doc
/// comments as descriptions) work as usual. Argument: `crate = ::path`.
///
/// ```
/// use ors_server::prelude::*;
///
/// #[wire]
/// #[derive(Debug, PartialEq)]
/// struct Task {
///     /// The question.
///     question: String,
///     #[serde(default)]
///     answer: Option<String>,
/// }
///
/// let task: Task = ors_server::__private::serde_json::from_str(r#"{"question": "1+1?"}"#).unwrap();
/// assert_eq!(task, Task { question: "1+1?".into(), answer: None });
/// ```
#[proc_macro_attribute]
pub fn wire(attr: TokenStream, item: TokenStream) -> TokenStream {
    wire::expand(attr.into(), item.into()).into()
}
