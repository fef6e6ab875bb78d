//! Tool input schemas from `schemars`, in the shape LLM providers accept: an object at the
//! root with `properties` and `required`, doc comments as `description`, no `$schema` key,
//! nested types inlined (recursive ones stay in `$defs`, which still resolve).
//!
//! The dialect is JSON Schema 2020-12 (what a validator assumes when `$schema` is absent, and
//! what pydantic, the reference SDK's schema source, emits): definitions live under `$defs`.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

use ors_core::types::JsonObject;

/// Why a type cannot be a tool input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema's root is not an object (a tool input must be a JSON object).
    #[error("the input type '{type_name}' must serialize as a JSON object (a struct with named fields), but its schema root is {found}")]
    NotObject {
        /// The Rust type.
        type_name: String,
        /// What the root was instead.
        found: String,
    },
}

/// The JSON Schema of a tool input type; an error when the type is not a JSON object.
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Submit {
///     /// Your final answer.
///     answer: String,
/// }
/// let schema = ors_runtime::schema::input_schema::<Submit>().unwrap();
/// assert_eq!(schema["type"], "object");
/// assert_eq!(schema["properties"]["answer"]["description"], "Your final answer.");
/// assert!(!schema.contains_key("$schema"));
/// ```
pub fn input_schema<T: JsonSchema>() -> Result<JsonObject, SchemaError> {
    let not_object = |found: &str| SchemaError::NotObject {
        type_name: T::schema_name().into_owned(),
        found: found.to_owned(),
    };
    let Value::Object(mut obj) = root_schema::<T>() else {
        return Err(not_object("not an object schema"));
    };
    match obj.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(t) => return Err(not_object(&format!("of type {t}"))),
        None => return Err(not_object("without a type (an enum or untagged union?)")),
    }
    obj.entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    Ok(obj)
}

/// The JSON Schema of a tool's typed result (`Json<T>`), in the same dialect and shape as
/// input schemas, but of any type: a list or a number is a fine result.
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    match root_schema::<T>() {
        Value::Object(obj) => obj,
        // `true`: any value.
        _ => JsonObject::new(),
    }
}

/// `T`'s root schema in the dialect above, nested types inlined, without `$schema`.
fn root_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let mut schema = settings.into_generator().into_root_schema_for::<T>();
    schema.remove("$schema");
    schema.to_value()
}

/// Why a hand-written schema cannot describe a tool's input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSchema {
    /// The text is not JSON.
    #[error("the schema is not JSON: {0}")]
    NotJson(String),
    /// The schema is not an object with `"type": "object"` (a tool input is a JSON object).
    #[error("the schema must be a JSON object with \"type\": \"object\" (a tool input is an object), not {0}")]
    NotObject(String),
    /// A JSON Schema validator refused it (an unknown type, a bad regex, a broken `$ref`...).
    #[error("the schema is not a valid JSON Schema: {0}")]
    Invalid(String),
    /// This build has no validator: the cargo feature `validate` is off.
    #[error("validating tool inputs against a JSON Schema needs the cargo feature `validate` of ors-server (features = [\"validate\"])")]
    NoValidator,
}

/// A tool's input schema compiled for validating calls: every input is checked against it
/// before the tool runs, and a mismatch is an `ok: false` result naming the field.
///
/// The validator is the `jsonschema` crate, built only with the cargo feature `validate`
/// (ors-server's `validate`; on by default in this crate): the environments that need it are
/// those with hand-written schemas (`#[tool(schema = ...)]`, [`DynamicTool`](crate::DynamicTool),
/// webhooks, MCP servers) or `#[tool(validate)]`, and a newcomer's first build compiles none
/// of its regex, URL and big-number stacks. Without the feature [`InputValidator::new`] is
/// [`BadSchema::NoValidator`], and the macros' attributes that need it do not compile.
///
/// ```
/// use ors_runtime::schema::InputValidator;
/// use serde_json::json;
///
/// let v = InputValidator::new(&json!({
///     "type": "object",
///     "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}},
///     "required": ["n"],
/// })).unwrap();
/// assert!(v.check("pick", &json!({"n": 3})).is_ok());
/// let err = v.check("pick", &json!({"n": 11})).unwrap_err();
/// assert_eq!(err, "invalid input for tool 'pick': field 'n': 11 is greater than the maximum of 10");
/// ```
pub struct InputValidator {
    #[cfg(feature = "validate")]
    validator: jsonschema::Validator,
    /// Without a validator there is no value of this type.
    #[cfg(not(feature = "validate"))]
    none: std::convert::Infallible,
}

impl std::fmt::Debug for InputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InputValidator")
    }
}

/// At most this many problems are listed in one error, so a badly wrong input does not make
/// an error longer than the input.
#[cfg(feature = "validate")]
const MAX_LISTED_PROBLEMS: usize = 4;

impl InputValidator {
    /// Compile a schema (JSON Schema 2020-12 unless it says otherwise with `$schema`). It must
    /// be an object schema: a tool input is a JSON object.
    pub fn new(schema: &Value) -> Result<Self, BadSchema> {
        let not_object = |found: &str| Err(BadSchema::NotObject(found.to_owned()));
        match schema.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => return not_object(&format!("type {other}")),
            None if schema.is_object() => return not_object("a schema without \"type\""),
            None => return not_object(ors_core::types::json_kind(schema)),
        }
        #[cfg(feature = "validate")]
        {
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(schema)
                .map_err(|e| BadSchema::Invalid(e.to_string()))?;
            Ok(Self { validator })
        }
        #[cfg(not(feature = "validate"))]
        Err(BadSchema::NoValidator)
    }

    /// Parse and compile a schema given as JSON text.
    pub fn from_text(text: &str) -> Result<(Self, JsonObject), BadSchema> {
        Self::from_value(serde_json::from_str(text).map_err(|e| BadSchema::NotJson(e.to_string()))?)
    }

    /// Compile a schema given as a JSON value, and give it back as the object it is.
    pub(crate) fn from_value(value: Value) -> Result<(Self, JsonObject), BadSchema> {
        let validator = Self::new(&value)?;
        match value {
            Value::Object(obj) => Ok((validator, obj)),
            // `new` accepted it, so it is an object.
            other => Err(BadSchema::NotObject(
                ors_core::types::json_kind(&other).to_owned(),
            )),
        }
    }

    /// Check one input; the error is the message of an `ok: false` result, naming the tool
    /// and each offending field (`a.b[0]`), or the missing one.
    pub fn check(&self, tool: &str, input: &Value) -> Result<(), String> {
        #[cfg(not(feature = "validate"))]
        {
            let _ = (tool, input);
            match self.none {}
        }
        #[cfg(feature = "validate")]
        self.problems(tool, input)
    }

    #[cfg(feature = "validate")]
    fn problems(&self, tool: &str, input: &Value) -> Result<(), String> {
        let mut errors = self.validator.iter_errors(input);
        let listed = errors.by_ref().take(MAX_LISTED_PROBLEMS).map(|err| {
            let path = field_path(err.instance_path.as_str());
            if path.is_empty() {
                err.to_string()
            } else {
                format!("field '{path}': {err}")
            }
        });
        let problems: Vec<String> = listed.collect();
        if problems.is_empty() {
            return Ok(());
        }
        let mut msg = format!("invalid input for tool '{tool}': {}", problems.join("; "));
        let more = errors.count();
        if more > 0 {
            msg.push_str(&format!(" (and {more} more)"));
        }
        Err(msg)
    }
}

/// A JSON pointer (`/items/0/name`) as the dotted path the tools' other errors use
/// (`items[0].name`).
#[cfg(feature = "validate")]
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else if out.is_empty() {
            out.push_str(&seg);
        } else {
            out.push_str(&format!(".{seg}"));
        }
    }
    out
}

#[cfg(all(test, feature = "validate"))]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_become_dotted_paths() {
        assert_eq!(field_path(""), "");
        assert_eq!(field_path("/a"), "a");
        assert_eq!(field_path("/items/0/name"), "items[0].name");
        assert_eq!(field_path("/a~1b/c~0d"), "a/b.c~d");
    }

    #[test]
    fn past_the_listed_problems_the_rest_are_counted() {
        let required: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
        let v = InputValidator::new(&json!({"type": "object", "required": required})).unwrap();
        let err = v.check("t", &json!({})).unwrap_err();
        assert_eq!(err.matches("is a required property").count(), 4, "{err}");
        assert!(err.ends_with(" (and 2 more)"), "{err}");
    }

    #[test]
    fn non_object_schemas_are_refused() {
        assert!(matches!(
            InputValidator::new(&json!({"type": "string"})),
            Err(BadSchema::NotObject(_))
        ));
        assert!(matches!(
            InputValidator::new(&json!([1])),
            Err(BadSchema::NotObject(_))
        ));
        assert!(matches!(
            InputValidator::new(&json!({"type": "object", "properties": {"a": {"type": "strng"}}})),
            Err(BadSchema::Invalid(_))
        ));
        assert!(matches!(
            InputValidator::from_text("{nope"),
            Err(BadSchema::NotJson(_))
        ));
    }
}
