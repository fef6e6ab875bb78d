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
    #[error("the input type `{type_name}` must serialize as a JSON object (a struct with named fields), but its schema root is {found}")]
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
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    let type_name = T::schema_name().into_owned();
    let Value::Object(mut obj) = value.take() else {
        return Err(SchemaError::NotObject {
            type_name,
            found: "not an object schema".to_owned(),
        });
    };
    obj.remove("$schema");
    match obj.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        other => {
            return Err(SchemaError::NotObject {
                type_name,
                found: match other {
                    Some(t) => format!("of type {t}"),
                    None => "without a type (an enum or untagged union?)".to_owned(),
                },
            })
        }
    }
    obj.entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    Ok(obj)
}
