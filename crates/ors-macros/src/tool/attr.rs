//! The arguments of one `#[tool(...)]`: reading them, and the checks that concern only them
//! and the receiver (how a tool may run beside other calls of its session).

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, LitStr, Meta};

use crate::args::{self, Errors, Key};

const TOOL_KEYS: &[Key] = &[
    Key::new("name", "name = \"...\""),
    Key::new("description", "description = \"...\""),
    Key::new("shared", "shared = false"),
    Key::flag("blocking"),
    Key::new("schema", "schema = \"file.json\" or schema = \"{...}\""),
    Key::flag("validate"),
    Key::new("detail_url", "detail_url = \"https://...\""),
    Key::flag("terminal"),
    Key::flag("concurrent"),
    Key::flag("exclusive"),
    Key::flag("runs_commands"),
];

/// The arguments of one `#[tool(...)]`, as written. A new key is a field here, a [`Key`]
/// above and an arm in [`ToolArgs::parse`].
#[derive(Default)]
pub(super) struct ToolArgs {
    pub(super) name: Option<LitStr>,
    pub(super) description: Option<LitStr>,
    pub(super) shared: Option<bool>,
    /// `blocking`: where it was written, for errors about it.
    pub(super) blocking: Option<Span>,
    pub(super) schema: Option<LitStr>,
    /// `validate`: where it was written.
    pub(super) validate: Option<Span>,
    pub(super) detail_url: Option<LitStr>,
    /// `terminal`: where it was written; the tool a harness calls with the model's plain
    /// answer.
    pub(super) terminal: Option<Span>,
    /// `concurrent`: where it was written.
    pub(super) concurrent: Option<Span>,
    /// `exclusive`: where it was written.
    pub(super) exclusive: Option<Span>,
    /// `runs_commands`: the tool runs the agent's commands (PROTOCOL_NOTES row
    /// `runs-commands`).
    pub(super) runs_commands: bool,
}

impl ToolArgs {
    pub(super) fn parse(attr: &Attribute, errors: &mut Errors) -> Self {
        let mut out = ToolArgs::default();
        let tokens = match &attr.meta {
            Meta::Path(_) => return out,
            Meta::List(list) => list.tokens.clone(),
            Meta::NameValue(nv) => {
                errors.spanned(
                    nv,
                    "write `#[tool]` or `#[tool(name = \"...\", description = \"...\", shared = false)]`",
                );
                return out;
            }
        };
        args::parse_args(tokens, "#[tool]", TOOL_KEYS, errors, |key, meta| {
            match key {
                "name" => out.name = Some(args::lit_str(meta, key)?),
                "description" => out.description = Some(args::lit_str(meta, key)?),
                "shared" => out.shared = Some(args::lit_bool(meta, key)?.value),
                "blocking" => out.blocking = flag_span(meta, key)?,
                "schema" => out.schema = Some(args::lit_str(meta, key)?),
                "validate" => out.validate = flag_span(meta, key)?,
                "terminal" => out.terminal = flag_span(meta, key)?,
                "concurrent" => out.concurrent = flag_span(meta, key)?,
                "exclusive" => out.exclusive = flag_span(meta, key)?,
                "runs_commands" => out.runs_commands = args::flag(meta, key)?,
                _ => out.detail_url = Some(args::lit_str(meta, key)?),
            }
            Ok(())
        });
        out
    }
}

/// A `schema = "..."`: JSON written inline (checked now), or a file read with `include_str!`
/// (a path relative to the source file, checked when the table is built).
pub(super) enum SchemaSource {
    Inline(LitStr),
    File(LitStr),
}

impl SchemaSource {
    pub(super) fn parse(lit: LitStr, errors: &mut Errors) -> Self {
        let text = lit.value();
        if !text.trim_start().starts_with('{') {
            if text.trim().is_empty() {
                errors.spanned(
                    &lit,
                    "`schema` is empty: give a JSON object or a .json file",
                );
            }
            return SchemaSource::File(lit);
        }
        match serde_json::from_str::<serde_json::Value>(&text) {
            Err(e) => errors.spanned(
                &lit,
                format!("`schema` is not valid JSON: {e} (line and column within the string)"),
            ),
            Ok(v) if v.get("type").and_then(|t| t.as_str()) != Some("object") => errors.spanned(
                &lit,
                "a tool's input `schema` must be an object schema: `{\"type\": \"object\", \
                 \"properties\": {...}}`",
            ),
            Ok(_) => {}
        }
        SchemaSource::Inline(lit)
    }
}

/// A flag key: where it was written when it is on (`key` or `key = true`).
fn flag_span(meta: &ParseNestedMeta, key: &str) -> syn::Result<Option<Span>> {
    Ok(args::flag(meta, key)?.then(|| meta.path.span()))
}

/// Whether a tool's calls may run beside the session's other concurrent calls (PROTOCOL_NOTES
/// row `tool-concurrency`): `concurrent` on a `&self` tool. Otherwise, by default and with
/// `exclusive`, a call has the episode to itself. `concurrent` is checked against the other
/// arguments and the receiver; a misuse is one error where it was written, and the tool is then
/// generated as an exclusive one (so no second error follows from the generated code).
pub(super) fn concurrent(
    args: &ToolArgs,
    receiver: Option<(bool, &syn::Receiver)>,
    errors: &mut Errors,
) -> bool {
    let Some(at) = args.concurrent else {
        return false;
    };
    if args.exclusive.is_some() {
        errors.at(
            at,
            "a tool is `concurrent` or `exclusive`, not both: `concurrent` runs beside other \
             calls of the session, `exclusive` waits for all of them; keep one",
        );
    } else if args.terminal.is_some() {
        errors.at(
            at,
            "a terminal tool is always exclusive (it grades the episode, so nothing may \
             change the state it reads while it runs): drop `concurrent`",
        );
    } else if args.blocking.is_some() {
        errors.at(
            at,
            "a `blocking` tool cannot be `concurrent`: it takes the episode to a thread of \
             its own; make it an `async fn` (hand blocking work to \
             `tokio::task::spawn_blocking` with owned data) or drop `concurrent`",
        );
    } else if let Some((true, receiver)) = receiver {
        errors.spanned(
            receiver,
            "a #[tool(concurrent)] method runs beside other calls of the same session, so it \
             borrows the environment shared: take `&self` (keep what it changes behind a \
             Mutex or an atomic), or drop `concurrent` to have the episode to itself with \
             `&mut self`",
        );
    } else {
        return true;
    }
    false
}
