//! The parameters of a `#[tool]` method after `self`, recognised by their type, not by their
//! name: any type that is [`ToolContext`] (however it is imported or aliased) is the call's
//! context, any other by-value type must be the tool's input. The generated code asks one
//! question per parameter, spanned on its type, so a wrong type gives one error, there.

use serde_json::Value;

use ors_core::types::{JsonObject, RunToolOutput};

use crate::env::{invalid_input, not_an_object, CallInput, ToolContext};
use crate::schema::input_schema;

/// A type a `#[tool]` method can take as its input: deserialized from the call's JSON and
/// described to the model by its schema.
trait ToolInput: serde::de::DeserializeOwned + schemars::JsonSchema {}

impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> ToolInput for T {}

/// What a by-value parameter is to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// The call's [`ToolContext`].
    Context,
    /// The tool's input.
    Input,
}

/// Whether a parameter of kind `this`, after parameters of kinds `earlier`, is a second input.
pub const fn second_input(mut earlier: &[ArgKind], this: ArgKind) -> bool {
    while let [first, rest @ ..] = earlier {
        if matches!((first, this), (ArgKind::Input, ArgKind::Input)) {
            return true;
        }
        earlier = rest;
    }
    false
}

/// Makes the schema of a tool's input type.
pub type SchemaFn = fn() -> Result<JsonObject, crate::schema::SchemaError>;

/// How the adapter gets one by-value parameter, and what it adds to the tool's spec.
pub struct ArgOps<T> {
    /// The parameter's role.
    pub kind: ArgKind,
    /// Produce the value: clone the context, or take and parse the input (the slot is `None`
    /// once an input has been taken).
    pub extract: fn(&ToolContext, &mut Option<CallInput>, &str) -> Result<T, RunToolOutput>,
    /// The input's schema (`None` for the context).
    pub schema: Option<SchemaFn>,
}

/// A type a `#[tool]` method can take by value after `self`: [`ToolContext`], or an input
/// (`Deserialize + JsonSchema`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a parameter of a #[tool] method",
    label = "not `ToolContext`, and not a tool input (`Deserialize + JsonSchema`)",
    note = "for a tool input, put `#[wire]` on `{Self}`: it derives both through ors_server"
)]
pub trait ToolArg: Sized {
    /// How the adapter gets it.
    const OPS: ArgOps<Self>;
}

// `do_not_recommend` on the impls for the context: an error about an input type is about
// `#[wire]`, not a list of the other types the trait has.
#[diagnostic::do_not_recommend]
impl ToolArg for ToolContext {
    const OPS: ArgOps<Self> = CONTEXT;
}

/// The context, for [`ToolArg`] and [`RawToolArg`] alike: a clone of the call's.
const CONTEXT: ArgOps<ToolContext> = ArgOps {
    kind: ArgKind::Context,
    extract: |ctx, _, _| Ok(ctx.clone()),
    schema: None,
};

// `do_not_recommend`: an input type that lacks `JsonSchema` is reported with this trait's
// message ("put #[wire] on it"), not as a bound buried in this impl and the long list of types
// that implement `JsonSchema`.
#[diagnostic::do_not_recommend]
impl<T: ToolInput> ToolArg for T {
    const OPS: ArgOps<Self> = ArgOps {
        kind: ArgKind::Input,
        extract: take_input::<T>,
        schema: Some(input_schema::<T>),
    };
}

/// The [`ArgOps`] of a by-value parameter type: the one place the generated code requires
/// `T: ToolArg`, made once per parameter in a `const` spanned on its type.
pub const fn arg_ops<T: ToolArg>() -> ArgOps<T> {
    T::OPS
}

fn take_input<T: ToolInput>(
    _ctx: &ToolContext,
    input: &mut Option<CallInput>,
    tool: &str,
) -> Result<T, RunToolOutput> {
    // Taken, so the input (and the request body it is a slice of) is released once read. An
    // input that does not fit is an `ok: false` result naming the tool and the field (what the
    // model needs to fix its call).
    let read = input.take().unwrap_or_default().deserialize();
    read.map_err(|e| invalid_input(tool, e.to_string().replace('`', "'")))
}

/// A type a `#[tool(schema = "...")]` method can take by value after `self`: the
/// [`ToolContext`], or the raw input as [`JsonObject`] or [`Value`] (the hand-written schema
/// describes it and has validated it before the method runs).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the input of a #[tool] with a hand-written `schema`",
    label = "the `schema = \"...\"` describes the input, so the method takes it as raw JSON",
    note = "take the input as `JsonObject` (it is validated against the schema before the \
            method runs), or drop `schema` and let `{Self}`'s type describe the input"
)]
pub trait RawToolArg: Sized {
    /// How the adapter gets it.
    const RAW_OPS: ArgOps<Self>;
}

#[diagnostic::do_not_recommend]
impl RawToolArg for ToolContext {
    const RAW_OPS: ArgOps<Self> = CONTEXT;
}

#[diagnostic::do_not_recommend]
impl RawToolArg for JsonObject {
    const RAW_OPS: ArgOps<Self> = ArgOps {
        kind: ArgKind::Input,
        extract: take_input::<JsonObject>,
        schema: None,
    };
}

#[diagnostic::do_not_recommend]
impl RawToolArg for Value {
    const RAW_OPS: ArgOps<Self> = ArgOps {
        kind: ArgKind::Input,
        extract: |_, input, tool| crate::env::as_value(tool, input.take().unwrap_or_default()),
        schema: None,
    };
}

/// The [`ArgOps`] of a by-value parameter of a tool with a hand-written schema.
pub const fn raw_arg_ops<T: RawToolArg>() -> ArgOps<T> {
    T::RAW_OPS
}

/// A type a `#[tool]` method can take by reference: only the tool context.
#[diagnostic::on_unimplemented(
    message = "a #[tool] method takes only the tool context by reference, not `&{Self}`",
    label = "a tool input is taken by value (it is deserialized from the call's JSON): drop the `&`",
    note = "a #[tool] method takes `&self` or `&mut self`, then, in any order, optionally \
            `&ToolContext` and at most one input by value"
)]
pub trait ContextRef {
    /// The context itself.
    fn from_context(ctx: &ToolContext) -> &Self;
}

#[diagnostic::do_not_recommend]
impl ContextRef for ToolContext {
    fn from_context(ctx: &ToolContext) -> &Self {
        ctx
    }
}

/// After the parameters took what they need: the input of a tool that takes none must be `{}`
/// or `null` (other keys are ignored, as models sometimes send them).
pub fn no_input(tool: &str, input: Option<CallInput>) -> Result<(), RunToolOutput> {
    match input.as_ref().map(CallInput::kind) {
        None | Some("null" | "an object") => Ok(()),
        Some(kind) => Err(not_an_object(tool, kind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_core::types::ToolErrorReason;

    #[test]
    fn only_an_input_after_an_input_is_a_second_input() {
        use ArgKind::{Context, Input};
        assert!(!second_input(&[], Input));
        assert!(!second_input(&[Context], Input));
        assert!(!second_input(&[Input], Context));
        assert!(second_input(&[Context, Input], Input));
    }

    #[test]
    fn a_tool_without_input_accepts_an_object_or_nothing() {
        assert!(no_input("t", None).is_ok());
        assert!(no_input("t", Some(Value::Null.into())).is_ok());
        assert!(no_input("t", Some(serde_json::json!({"extra": 1}).into())).is_ok());
        let text = CallInput::from_json_text(bytes::Bytes::from_static(b" {\"extra\": 1}"));
        assert!(no_input("t", Some(text)).is_ok());
        let Err(RunToolOutput::Error(err)) = no_input("t", Some(serde_json::json!([1]).into()))
        else {
            panic!("an array is not a tool input");
        };
        assert_eq!(
            err.error,
            "invalid input for tool 't': expected an object, got an array"
        );
        assert_eq!(err.reason, Some(ToolErrorReason::InputValidation));
    }
}
