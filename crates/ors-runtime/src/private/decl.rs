//! What the macros say about one tool, turned into its spec and validator when the table is
//! built: [`ToolDecl`], and [`OutputProbe`], which finds a `Json<T>` return type's schema.

use std::marker::PhantomData;
use std::sync::Arc;

use ors_core::types::{Json, JsonObject, ToolSpec};
use serde_json::Value;

use super::params::SchemaFn;
use crate::env::ToolTableError;
use crate::schema::{output_schema, InputValidator};

/// Where a tool's input schema comes from.
enum InputDecl {
    /// The schemas of its by-value parameters (`None` for the context); the first is the input.
    Typed(&'static [Option<SchemaFn>]),
    /// `#[tool(schema = "...")]`: JSON text, inline or from a file, served verbatim.
    Raw(&'static str),
}

/// One tool as the macros declare it; builder methods, so new attributes add a method.
pub struct ToolDecl<'d> {
    name: &'d str,
    description: &'d str,
    shared: bool,
    detail_url: Option<&'d str>,
    input: InputDecl,
    validate: bool,
    output: Option<SchemaFn>,
    terminal: bool,
    runs_commands: bool,
}

impl<'d> ToolDecl<'d> {
    /// A tool with a name and a description, its input from typed parameters `inputs`.
    pub fn new(name: &'d str, description: &'d str, inputs: &'static [Option<SchemaFn>]) -> Self {
        Self {
            name,
            description,
            shared: true,
            detail_url: None,
            input: InputDecl::Typed(inputs),
            validate: false,
            output: None,
            terminal: false,
            runs_commands: false,
        }
    }

    /// `runs_commands`: the spec says `"runs_commands": true` (PROTOCOL_NOTES row
    /// `runs-commands`).
    pub fn runs_commands(mut self) -> Self {
        self.runs_commands = true;
        self
    }

    /// `terminal`: the environment's terminal tool (PROTOCOL_NOTES row `terminal-tool`).
    pub fn terminal(mut self) -> Self {
        self.terminal = true;
        self
    }

    /// Whether this is the terminal tool.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// `shared = false`: listed only among the episode's task tools.
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// `detail_url = "..."`.
    pub fn detail_url(mut self, url: &'d str) -> Self {
        self.detail_url = Some(url);
        self
    }

    /// `schema = "..."`: the input schema as JSON text (validated always).
    pub fn raw_schema(mut self, text: &'static str) -> Self {
        self.input = InputDecl::Raw(text);
        self
    }

    /// `validate`: check inputs against the typed input's schema too.
    pub fn validate(mut self) -> Self {
        self.validate = true;
        self
    }

    /// Next to `schema` and `validate`: compiles only when this build has a validator, so
    /// their use without the cargo feature `validate` is one error on the attribute.
    pub fn needs_validator<V: HasValidator>(self, _validation: V) -> Self {
        self
    }

    /// The output schema of a `Json<T>` return type, if it is one.
    pub fn output(mut self, schema: Option<SchemaFn>) -> Self {
        self.output = schema;
        self
    }

    /// Whether the tool is listed by `/tools`.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The spec and, when inputs are checked, the validator.
    pub fn build(self) -> Result<(ToolSpec, Option<Arc<InputValidator>>), ToolTableError> {
        let bad = |reason: &dyn std::fmt::Display| ToolTableError::schema(self.name, reason);
        let (input_schema, validator) = match self.input {
            InputDecl::Typed(schemas) => {
                let schema = schemas.iter().flatten().next().map(|f| f()).transpose();
                let schema = schema.map_err(|e| bad(&e))?;
                let validated = schema.as_ref().filter(|_| self.validate);
                let validator = validated.map(|s| InputValidator::new(&Value::Object(s.clone())));
                let validator = validator.transpose().map_err(|e| bad(&e))?;
                (schema, validator.map(Arc::new))
            }
            InputDecl::Raw(text) => {
                let (validator, schema) = InputValidator::from_text(text).map_err(|e| bad(&e))?;
                (Some(schema), Some(Arc::new(validator)))
            }
        };
        let mut spec = ToolSpec::new(self.name, self.description, input_schema);
        spec.detail_url = self.detail_url.map(str::to_owned);
        spec.runs_commands = self.runs_commands;
        spec.output_schema = self.output.map(|f| f()).transpose().map_err(|e| bad(&e))?;
        Ok((spec, validator))
    }
}

/// What `#[tool(schema = ...)]` and `#[tool(validate)]` need: a JSON Schema validator, which
/// [`Validation`] has when the cargo feature `validate` is on.
#[diagnostic::on_unimplemented(
    message = "this tool's inputs are validated against a JSON Schema, which needs the cargo feature `validate` of ors-server",
    label = "needs ors-server's feature `validate`",
    note = "in Cargo.toml: ors-server = {{ ..., features = [\"validate\"] }}"
)]
pub trait HasValidator {}

/// The witness of [`HasValidator`] the generated code passes.
pub struct Validation;

#[cfg(feature = "validate")]
impl HasValidator for Validation {}

/// Finds the output schema of a tool's return type by autoref specialisation: for
/// `Json<T>` (or `Result<Json<T>, E>`), [`JsonOutputSchema`] applies to the probe itself and
/// wins; for any other type only [`NoOutputSchema`], on a reference to it, does.
pub struct OutputProbe<T>(PhantomData<fn() -> T>);

impl<T> OutputProbe<T> {
    /// A probe for return type `T`.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for OutputProbe<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The fallback: a return type without an output schema.
pub trait NoOutputSchema {
    /// No schema.
    fn output_schema(&self) -> Option<SchemaFn> {
        None
    }
}

impl<T> NoOutputSchema for &OutputProbe<T> {}

/// A `Json<T>` return type: `T`'s schema.
pub trait JsonOutputSchema {
    /// The schema.
    fn output_schema(&self) -> Option<SchemaFn>;
}

impl<T: schemars::JsonSchema> JsonOutputSchema for OutputProbe<Json<T>> {
    fn output_schema(&self) -> Option<SchemaFn> {
        Some(ok_output_schema::<T>)
    }
}

impl<T: schemars::JsonSchema, E> JsonOutputSchema for OutputProbe<Result<Json<T>, E>> {
    fn output_schema(&self) -> Option<SchemaFn> {
        Some(ok_output_schema::<T>)
    }
}

fn ok_output_schema<T: schemars::JsonSchema>() -> Result<JsonObject, crate::schema::SchemaError> {
    Ok(output_schema::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Report {
        passed: u32,
    }

    #[test]
    // The `&` is the probe as the generated code writes it: needed for every type but `Json`.
    #[allow(clippy::needless_borrow)]
    fn the_probe_finds_json_return_types_only() {
        assert!((&OutputProbe::<Json<Report>>::new())
            .output_schema()
            .is_some());
        assert!((&OutputProbe::<Result<Json<Report>, String>>::new())
            .output_schema()
            .is_some());
        assert!((&OutputProbe::<String>::new()).output_schema().is_none());
        let schema = ((&OutputProbe::<Json<Report>>::new())
            .output_schema()
            .unwrap())()
        .unwrap();
        assert_eq!(schema["properties"]["passed"]["type"], "integer");
    }

    #[test]
    fn a_raw_schema_is_kept_as_written_and_validates() {
        let (spec, validator) = ToolDecl::new("t", "d", &[])
            .raw_schema(r#"{"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "x-extra": [1]}"#)
            .detail_url("https://example.com/t")
            .build()
            .unwrap();
        let schema = spec.input_schema.unwrap();
        assert_eq!(schema["x-extra"], serde_json::json!([1]));
        assert_eq!(spec.detail_url.as_deref(), Some("https://example.com/t"));
        let v = validator.unwrap();
        assert!(v.check("t", &serde_json::json!({"n": 4})).is_err());
        let err = ToolDecl::new("t", "d", &[])
            .raw_schema("{oops")
            .build()
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("tool 't': the schema is not JSON"),
            "{err}"
        );
    }
}
