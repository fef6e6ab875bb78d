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
use quote::ToTokens;

mod args;
mod environment;
mod table;
mod tool;
mod toolset;
mod wire;

/// Turns `impl Environment for T { ... }` into an ORS environment.
///
/// The macro moves the `#[tool]` methods into an inherent `impl T` and implements
/// `EnvironmentMeta` for `T`: `const NAME` (the type name lower-cased, unless you write one in
/// the impl or pass `name = "..."`) and the tool table, built once in a `static` with O(1)
/// lookup by name. `Environment` requires `EnvironmentMeta`, so an impl without the macro is
/// one error saying to add it.
///
/// Arguments, all optional:
/// - `name = "..."`: the environment name in URLs;
/// - `toolsets(field, ...)`: fields of `T` whose type has a `#[toolset]` impl; their tools
///   join the environment's (a name collision is a compile error);
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
/// let names: Vec<_> = ors_server::runtime::env::shared_tools::<Gsm8k>()
///     .into_iter()
///     .map(|t| t.name)
///     .collect();
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
/// let specs: Vec<_> = Counter::tool_table().all_specs().map(|s| s.name.as_str()).collect();
/// assert_eq!(specs, ["guess", "count"]);
/// assert!(Counter::tool_table().is_concurrent("count"));
/// ```
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream {
    // Reached only when no #[environment] / #[toolset] took the attribute off first: the impl
    // around the method has neither. A method is dropped (its error stands in for it): kept,
    // it would add "not a member of trait `Environment`" to the missing-#[environment] error.
    let err = syn::Error::new(
        proc_macro2::Span::call_site(),
        "#[tool] is read by the #[environment] or #[toolset] on the impl around it, and there is \
         none: add #[environment] above `impl Environment for ...`, or #[toolset] above an \
         inherent impl",
    )
    .to_compile_error();
    let item: proc_macro2::TokenStream = item.into();
    let is_method =
        syn::parse2::<syn::ImplItemFn>(item.clone()).is_ok_and(|f| f.sig.receiver().is_some());
    if is_method {
        err.into()
    } else {
        err.into_iter()
            .chain(item)
            .collect::<proc_macro2::TokenStream>()
            .into()
    }
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

/// Parse the item under `#[environment]` / `#[toolset]` as an `impl` block. Anything else is
/// emitted unchanged beside the collected errors (plus `wrong_item` on its head), so one
/// mistake gives one message.
fn parse_impl(
    item: proc_macro2::TokenStream,
    wrong_item: &str,
    errors: &mut args::Errors,
) -> Result<syn::ItemImpl, proc_macro2::TokenStream> {
    let emitted = |item: proc_macro2::TokenStream, errors: &mut args::Errors| {
        item.into_iter()
            .chain(std::mem::take(errors).into_compile_errors())
            .collect()
    };
    match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Impl(imp)) => Ok(imp),
        Ok(other) => {
            errors.spanned(item_head(&other), wrong_item);
            Err(emitted(other.into_token_stream(), errors))
        }
        Err(e) => {
            errors.push(e);
            Err(emitted(item, errors))
        }
    }
}

/// The head of an item (`struct Foo`, `fn foo`), so an error about the item as a whole
/// underlines one line rather than the whole body.
fn item_head(item: &syn::Item) -> proc_macro2::TokenStream {
    use syn::Item;
    let mut out = proc_macro2::TokenStream::new();
    match item {
        Item::Struct(s) => {
            s.struct_token.to_tokens(&mut out);
            s.ident.to_tokens(&mut out);
        }
        Item::Enum(e) => {
            e.enum_token.to_tokens(&mut out);
            e.ident.to_tokens(&mut out);
        }
        Item::Fn(f) => {
            f.sig.fn_token.to_tokens(&mut out);
            f.sig.ident.to_tokens(&mut out);
        }
        Item::Trait(t) => {
            t.trait_token.to_tokens(&mut out);
            t.ident.to_tokens(&mut out);
        }
        Item::Mod(m) => {
            m.mod_token.to_tokens(&mut out);
            m.ident.to_tokens(&mut out);
        }
        Item::Impl(i) => {
            i.impl_token.to_tokens(&mut out);
            i.self_ty.to_tokens(&mut out);
        }
        other => other.to_tokens(&mut out),
    }
    out
}

/// `tokens` with every span set to `span`: generated code that names the SDK carries the span
/// of the author's token it is about, so an error in it is reported there.
fn respan(tokens: proc_macro2::TokenStream, span: proc_macro2::Span) -> proc_macro2::TokenStream {
    use proc_macro2::{Group, TokenTree};
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(g) = &tt {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tt = TokenTree::Group(group);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

/// The `cfg` attributes of the author's impl, for the items the macros add beside it: what is
/// compiled out with the impl is compiled out with them.
fn cfgs(imp: &syn::ItemImpl) -> proc_macro2::TokenStream {
    imp.attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .map(quote::ToTokens::to_token_stream)
        .collect()
}

/// An impl the macros add beside the author's `imp`, for the same type with the same generics
/// and `cfg` / lint attributes: `impl #trait_ for Type` (or inherent, without a trait), with
/// `bounds` added to its where-clause.
fn impl_beside(
    imp: &syn::ItemImpl,
    trait_: Option<proc_macro2::TokenStream>,
    bounds: proc_macro2::TokenStream,
    body: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let attrs = imp.attrs.iter().filter(|attr| {
        ["cfg", "allow", "expect", "warn", "deny"]
            .iter()
            .any(|name| attr.path().is_ident(name))
    });
    let (impl_generics, _, where_clause) = imp.generics.split_for_impl();
    let predicates = where_clause.map(|w| &w.predicates);
    let self_ty = &imp.self_ty;
    let trait_ = trait_.map(|t| quote::quote!(#t for));
    quote::quote! {
        #(#attrs)*
        impl #impl_generics #trait_ #self_ty where #bounds #predicates {
            #body
        }
    }
}
