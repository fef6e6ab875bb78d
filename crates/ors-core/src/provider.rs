//! Tool specs in the formats LLM providers expect (OpenAI, Anthropic, Gemini), used by the
//! server and the client alike.
//!
//! The conversions follow the reference client (`ors/client/environment.py`,
//! `convert_tool_response`): `title` keys are stripped from every schema, OpenAI schemas lose
//! the keywords its function calling rejects (a union becomes its first non-null option),
//! Gemini schemas lose the keywords Gemini rejects and `$ref`/`$defs` become `ref`/`defs`.
//!
//! Where the reference would damage a schema, these differ on purpose:
//! - the walk knows which keywords hold subschemas, so a *property* named `title`, `default`
//!   or `anyOf` is kept, and `default`/`enum`/`const` values are never rewritten;
//! - a union of string constants (what `schemars` makes of an enum with documented variants)
//!   becomes one `{"type": "string", "enum": [...]}` instead of its first constant;
//! - when a union is replaced by one option, the union's own keys (`description`, ...) stay;
//! - Gemini: `"type": [T, "null"]` and a union with `null` become `T` with `nullable: true`,
//!   and `#/$defs/X` references follow the renamed `defs`;
//! - a tool without input gets an empty object schema for OpenAI (the reference sends
//!   `parameters: null`, which OpenAI's API rejects) and no `parameters` for Gemini (which
//!   rejects an object schema without properties).
//!
//! The OpenAI form is the Chat Completions tool (`{"type": "function", "function": {...}}`),
//! which OpenAI-compatible servers accept too; the reference's `openai` format is the flat
//! Responses-API form, available here as [`openai_responses_tool`].

use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::types::{JsonObject, ToolSpec};

wire_enum! {
    /// An LLM provider whose tool format ORS specs can be converted to; its name is the
    /// canonical lower-case one [`FromStr`] accepts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Provider {
        /// OpenAI Chat Completions (`"openai"`).
        OpenAi = "openai",
        /// Anthropic Messages (`"anthropic"`).
        Anthropic = "anthropic",
        /// Google Gemini function declarations (`"gemini"`, also parsed from `"google"`).
        Gemini = "gemini",
    }
}

impl Provider {
    /// One tool spec in this provider's format.
    pub fn tool(self, spec: &ToolSpec) -> Value {
        match self {
            Provider::OpenAi => openai_tool(spec),
            Provider::Anthropic => anthropic_tool(spec),
            Provider::Gemini => gemini_function_declaration(spec),
        }
    }

    /// A tool list in this provider's format, one entry per spec, in order (for Gemini the
    /// entries are function declarations; see [`gemini_tool`] for the wrapping object).
    pub fn tools(self, specs: &[ToolSpec]) -> Vec<Value> {
        specs.iter().map(|s| self.tool(s)).collect()
    }
}

/// A provider name that is not one of `openai`, `anthropic`, `gemini` or `google`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider '{0}'; expected one of: openai, anthropic, gemini (or google)")]
pub struct UnknownProvider(pub String);

impl FromStr for Provider {
    type Err = UnknownProvider;

    /// Parses a provider name, ignoring ASCII case; `google` is Gemini.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            "gemini" | "google" => Ok(Provider::Gemini),
            _ => Err(UnknownProvider(s.to_owned())),
        }
    }
}

/// `{"type": "object", "properties": {}}`: the schema of a tool that takes no input.
pub fn empty_object_schema() -> JsonObject {
    let mut m = Map::new();
    m.insert("type".to_owned(), Value::String("object".to_owned()));
    m.insert("properties".to_owned(), Value::Object(Map::new()));
    m
}

/// The spec's schema, or `None` when it takes no input (`null` or `{}`, like the reference).
fn schema_of(spec: &ToolSpec) -> Option<Value> {
    spec.input_schema
        .as_ref()
        .filter(|s| !s.is_empty())
        .map(|s| Value::Object(s.clone()))
}

/// The spec's schema without titles, passed through `clean`; for a tool without input,
/// [`empty_object_schema`].
fn schema_or_empty(spec: &ToolSpec, clean: impl FnOnce(Value) -> Value) -> Value {
    schema_of(spec).map_or_else(
        || Value::Object(empty_object_schema()),
        |schema| clean(strip_titles(&schema)),
    )
}

/// A spec as an OpenAI Chat Completions tool:
/// `{"type": "function", "function": {"name", "description", "parameters"}}`.
pub fn openai_tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": openai_function(spec),
    })
}

/// A spec as an OpenAI Responses-API tool (the reference client's `openai` format):
/// `{"type": "function", "name", "description", "parameters"}`.
pub fn openai_responses_tool(spec: &ToolSpec) -> Value {
    let mut tool = openai_function(spec);
    tool["type"] = json!("function");
    tool
}

fn openai_function(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "parameters": schema_or_empty(spec, |schema| sanitize_openai_schema(&schema)),
    })
}

/// A spec as an Anthropic tool: `{"type": "custom", "name", "description", "input_schema"}`;
/// a tool without input gets `{"type": "object", "properties": {}}`.
pub fn anthropic_tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "custom",
        "name": spec.name,
        "description": spec.description,
        "input_schema": schema_or_empty(spec, |schema| schema),
    })
}

/// A spec as a Gemini function declaration: `{"name", "description", "parameters"}`, the
/// schema cleaned of keys Gemini rejects; `parameters` is absent when the tool takes no input.
pub fn gemini_function_declaration(spec: &ToolSpec) -> Value {
    let mut decl = json!({ "name": spec.name, "description": spec.description });
    if let Some(schema) = schema_of(spec) {
        let parameters = sanitize_gemini_schema(&strip_titles(&schema));
        // Gemini rejects an object schema with no properties; such a tool takes no input.
        let properties = parameters["properties"].as_object();
        if properties.is_some_and(|p| !p.is_empty()) {
            decl["parameters"] = parameters;
        }
    }
    decl
}

/// OpenAI Chat Completions tools for a tool list.
pub fn openai_tools(specs: &[ToolSpec]) -> Vec<Value> {
    Provider::OpenAi.tools(specs)
}

/// Anthropic tools for a tool list.
pub fn anthropic_tools(specs: &[ToolSpec]) -> Vec<Value> {
    Provider::Anthropic.tools(specs)
}

/// Gemini function declarations for a tool list.
pub fn gemini_function_declarations(specs: &[ToolSpec]) -> Vec<Value> {
    Provider::Gemini.tools(specs)
}

/// One Gemini `Tool` holding every spec: `{"functionDeclarations": [...]}`.
pub fn gemini_tool(specs: &[ToolSpec]) -> Value {
    json!({ "functionDeclarations": gemini_function_declarations(specs) })
}

/// Keywords whose value is one subschema.
const SCHEMA_KEYS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAY_KEYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
const SCHEMA_MAP_KEYS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Rebuild a schema bottom-up: `f` sees each schema object after its subschemas were rebuilt.
/// Values of other keywords (`enum`, `const`, `default`, `examples`, ...) are data and kept.
fn map_schema(schema: &Value, f: &impl Fn(JsonObject) -> JsonObject) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone(); // `true`/`false` schemas
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let v = match v {
            Value::Array(items) if SCHEMA_ARRAY_KEYS.contains(&k.as_str()) => {
                Value::Array(items.iter().map(|s| map_schema(s, f)).collect())
            }
            Value::Object(_) if SCHEMA_KEYS.contains(&k.as_str()) => map_schema(v, f),
            Value::Object(m) if SCHEMA_MAP_KEYS.contains(&k.as_str()) => Value::Object(
                m.iter()
                    .map(|(name, s)| (name.clone(), map_schema(s, f)))
                    .collect(),
            ),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(f(out))
}

/// The schema without any `title` keyword, at every level (the reference's `_strip_titles`,
/// except that properties named `title` are kept).
pub fn strip_titles(schema: &Value) -> Value {
    map_schema(schema, &|mut obj| {
        obj.remove("title");
        obj
    })
}

/// Keywords the reference removes for OpenAI.
const OPENAI_UNSUPPORTED: &[&str] = &[
    "additionalProperties",
    "patternProperties",
    "oneOf",
    "allOf",
    "anyOf",
    "not",
];

/// The schema cleaned for OpenAI function calling (the reference's `_sanitize_openai_schema`):
/// a union becomes its first non-null option (keeping the union's own keys), the keywords in
/// the reference's unsupported list are removed, and an `array` without `items` gets `{}`.
pub fn sanitize_openai_schema(schema: &Value) -> Value {
    map_schema(schema, &|obj| {
        let mut obj = collapse_const_union(obj);
        // The union's keywords come along into the option, and go with the unsupported ones.
        if let Some(option) = pick_union_option(&obj) {
            obj = merge_into_option(option, obj);
        }
        for key in OPENAI_UNSUPPORTED {
            obj.remove(*key);
        }
        if obj.get("type").and_then(Value::as_str) == Some("array") && !obj.contains_key("items") {
            obj.insert("items".to_owned(), Value::Object(Map::new()));
        }
        obj
    })
}

/// Keywords the reference removes for Gemini besides those it removes for OpenAI.
const GEMINI_UNSUPPORTED: &[&str] = &[
    "additional_properties",
    "title",
    "default",
    "examples",
    "example",
];

/// The schema cleaned for Gemini function declarations (the reference's
/// `_sanitize_google_schema`): keys Gemini rejects are removed, `$ref`/`$defs` become
/// `ref`/`defs`, and nullable types become `nullable: true`.
pub fn sanitize_gemini_schema(schema: &Value) -> Value {
    map_schema(schema, &|obj| {
        let mut obj = collapse_const_union(obj);
        // A nullable union (`Option<Enum>`, `Option<Recursive>`) keeps its real option.
        if let Some(option) = nullable_union_option(&obj) {
            obj = merge_into_option(option, obj);
            obj.insert("nullable".to_owned(), Value::Bool(true));
        }
        if let Some(Value::Array(types)) = obj.get("type") {
            let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
            if let [single] = non_null[..] {
                let nullable = types.len() > 1;
                obj.insert("type".to_owned(), single.clone());
                if nullable {
                    obj.insert("nullable".to_owned(), Value::Bool(true));
                }
            }
        }
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            // Gemini enums hold strings only; `nullable` already admits null.
            if let Some(Value::Array(values)) = obj.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
        }
        for key in OPENAI_UNSUPPORTED.iter().chain(GEMINI_UNSUPPORTED) {
            obj.remove(*key);
        }
        if let Some(defs) = obj.remove("$defs") {
            obj.insert("defs".to_owned(), defs);
        }
        if let Some(mut reference) = obj.remove("$ref") {
            if let Some(name) = reference.as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
                reference = Value::String(format!("#/defs/{name}"));
            }
            obj.insert("ref".to_owned(), reference);
        }
        obj
    })
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

/// The option a union is replaced by for OpenAI, as the reference chooses it: `anyOf` gives
/// its first non-null option (or its first), `oneOf` and `allOf` their first.
fn pick_union_option(obj: &JsonObject) -> Option<JsonObject> {
    let options = |key: &str| {
        obj.get(key)
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
    };
    let chosen = match options("anyOf") {
        Some(any) => any.iter().find(|o| !is_null_schema(o)).or(any.first()),
        None => options("oneOf").or_else(|| options("allOf"))?.first(),
    };
    // A `true` schema (anything) is the empty object schema.
    Some(chosen?.as_object().cloned().unwrap_or_default())
}

/// For a union of exactly one option and `null`, that option.
fn nullable_union_option(obj: &JsonObject) -> Option<JsonObject> {
    let options = obj
        .get("anyOf")
        .or_else(|| obj.get("oneOf"))
        .and_then(Value::as_array)?;
    let mut non_null = options.iter().filter(|o| !is_null_schema(o));
    match (non_null.next(), non_null.next()) {
        (Some(Value::Object(o)), None) if options.len() == 2 => Some(o.clone()),
        _ => None,
    }
}

/// The union's own keys (`description`, `default`, ...) are added to the chosen option, the
/// option's own values winning.
fn merge_into_option(mut option: JsonObject, union: JsonObject) -> JsonObject {
    for (k, v) in union {
        option.entry(k).or_insert(v);
    }
    option
}

/// `oneOf`/`anyOf` of string constants (`{"const": "a"}` or `{"enum": ["a"]}` each) becomes
/// `{"type": "string", "enum": [...]}`; a `null` option makes the type nullable.
fn collapse_const_union(mut obj: JsonObject) -> JsonObject {
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(options)) = obj.get(key) else {
            continue;
        };
        let mut values = Vec::new();
        let mut nullable = false;
        let all_consts = options.iter().all(|o| {
            match (o.get("const"), o.get("enum")) {
                _ if is_null_schema(o) => nullable = true,
                (Some(c @ Value::String(_)), None) => values.push(c.clone()),
                (None, Some(Value::Array(e))) if e.iter().all(Value::is_string) => {
                    values.extend(e.iter().cloned());
                }
                _ => return false,
            }
            true
        });
        if !all_consts || values.is_empty() {
            continue;
        }
        obj.remove(key);
        let ty = if nullable {
            values.push(Value::Null);
            json!(["string", "null"])
        } else {
            json!("string")
        };
        obj.insert("type".to_owned(), ty);
        obj.insert("enum".to_owned(), Value::Array(values));
        break;
    }
    obj
}
