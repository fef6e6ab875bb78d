//! Provider tool formats: golden outputs for a spec with a schema and one without, for each
//! provider, checked against what the reference client (`convert_tool_response` of ors-sdk
//! 0.1.0) gives for the same input, and the schema cleaning rules one by one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_core::provider::{
    self, anthropic_tool, gemini_function_declaration, gemini_tool, openai_responses_tool,
    openai_tool, sanitize_gemini_schema, sanitize_openai_schema, strip_titles, Provider,
};
use ors_core::ToolSpec;
use serde_json::{json, Value};

/// What pydantic (the reference server's schema source) writes for
/// `class Submit(BaseModel)` with `answer: str`, `confidence: Optional[float] = None`,
/// `tags: list[str] = []`, `mode: Literal["fast", "slow"] = "fast"`, `extra: dict[str, int] = {}`.
fn pydantic_schema() -> Value {
    json!({
        "description": "Submit an answer.",
        "properties": {
            "answer": {"description": "Your final answer, digits only.", "title": "Answer", "type": "string"},
            "confidence": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": null, "title": "Confidence"},
            "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"},
            "mode": {"default": "fast", "enum": ["fast", "slow"], "title": "Mode", "type": "string"},
            "extra": {"additionalProperties": {"type": "integer"}, "default": {}, "title": "Extra", "type": "object"}
        },
        "required": ["answer"],
        "title": "Submit",
        "type": "object"
    })
}

fn spec(name: &str, description: &str, schema: Option<Value>) -> ToolSpec {
    ToolSpec::new(
        name,
        description,
        schema.map(|s| s.as_object().expect("an object schema").clone()),
    )
}

fn submit() -> ToolSpec {
    spec(
        "submit",
        "Submit your final answer.",
        Some(pydantic_schema()),
    )
}

fn hint() -> ToolSpec {
    spec("hint", "A hint.", None)
}

/// The reference's OpenAI parameters for `submit`, except `confidence`, where the reference
/// drops the union's `default` and we keep the union's own keys.
fn openai_submit_parameters() -> Value {
    json!({
        "description": "Submit an answer.",
        "properties": {
            "answer": {"description": "Your final answer, digits only.", "type": "string"},
            "confidence": {"type": "number", "default": null},
            "tags": {"default": [], "items": {"type": "string"}, "type": "array"},
            "mode": {"default": "fast", "enum": ["fast", "slow"], "type": "string"},
            "extra": {"default": {}, "type": "object"}
        },
        "required": ["answer"],
        "type": "object"
    })
}

#[test]
fn openai_golden() {
    assert_eq!(
        openai_tool(&submit()),
        json!({
            "type": "function",
            "function": {
                "name": "submit",
                "description": "Submit your final answer.",
                "parameters": openai_submit_parameters()
            }
        })
    );
    // The reference sends `parameters: null`, which OpenAI rejects; an empty object schema
    // means the same thing and is accepted.
    assert_eq!(
        openai_tool(&hint()),
        json!({
            "type": "function",
            "function": {
                "name": "hint",
                "description": "A hint.",
                "parameters": {"type": "object", "properties": {}}
            }
        })
    );
}

#[test]
fn openai_responses_golden_is_the_reference_openai_format() {
    // Reference output: {"type": "function", "name": "submit", "description": ...,
    // "parameters": {...}} with the same parameters as above.
    assert_eq!(
        openai_responses_tool(&submit()),
        json!({
            "type": "function",
            "name": "submit",
            "description": "Submit your final answer.",
            "parameters": openai_submit_parameters()
        })
    );
    assert_eq!(
        openai_responses_tool(&hint()),
        json!({
            "type": "function",
            "name": "hint",
            "description": "A hint.",
            "parameters": {"type": "object", "properties": {}}
        })
    );
}

#[test]
fn anthropic_golden_is_exactly_the_reference_output() {
    assert_eq!(
        Provider::Anthropic.tools(&[submit(), hint()]),
        vec![
            json!({
                "type": "custom",
                "name": "submit",
                "description": "Submit your final answer.",
                "input_schema": {
                    "description": "Submit an answer.",
                    "properties": {
                        "answer": {"description": "Your final answer, digits only.", "type": "string"},
                        "confidence": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": null},
                        "tags": {"default": [], "items": {"type": "string"}, "type": "array"},
                        "mode": {"default": "fast", "enum": ["fast", "slow"], "type": "string"},
                        "extra": {"additionalProperties": {"type": "integer"}, "default": {}, "type": "object"}
                    },
                    "required": ["answer"],
                    "type": "object"
                }
            }),
            json!({
                "type": "custom",
                "name": "hint",
                "description": "A hint.",
                "input_schema": {"type": "object", "properties": {}}
            }),
        ]
    );
}

#[test]
fn gemini_golden() {
    assert_eq!(
        gemini_function_declaration(&submit()),
        json!({
            "name": "submit",
            "description": "Submit your final answer.",
            "parameters": {
                "description": "Submit an answer.",
                "properties": {
                    "answer": {"description": "Your final answer, digits only.", "type": "string"},
                    // The reference leaves `{}` here; Gemini's own form of a nullable number:
                    "confidence": {"type": "number", "nullable": true},
                    "tags": {"items": {"type": "string"}, "type": "array"},
                    "mode": {"enum": ["fast", "slow"], "type": "string"},
                    "extra": {"type": "object"}
                },
                "required": ["answer"],
                "type": "object"
            }
        })
    );
    // No `parameters` at all (the reference sends `null`).
    assert_eq!(
        gemini_function_declaration(&hint()),
        json!({"name": "hint", "description": "A hint."})
    );
    assert_eq!(
        gemini_tool(&[submit(), hint()]),
        json!({"functionDeclarations": [
            gemini_function_declaration(&submit()),
            gemini_function_declaration(&hint())
        ]})
    );
}

/// What `input_schema::<T>()` writes for a Rust input with an optional field, a documented
/// enum and a recursive type.
fn schemars_spec() -> ToolSpec {
    spec(
        "search",
        "Search the catalogue.",
        Some(json!({
            "title": "Search",
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "style": {
                    "description": "How to answer.",
                    "anyOf": [
                        {"oneOf": [
                            {"type": "string", "const": "Terse", "description": "Short."},
                            {"type": "string", "const": "Verbose", "description": "Long."}
                        ]},
                        {"type": "null"}
                    ]
                },
                "tree": {"$ref": "#/$defs/Tree"}
            },
            "required": ["query", "tree"],
            "$defs": {
                "Tree": {
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
                    "required": ["children"]
                }
            }
        })),
    )
}

#[test]
fn schemars_spec_golden_for_each_provider() {
    let tree_def = |r: &str| {
        json!({
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": r}}},
            "required": ["children"]
        })
    };
    assert_eq!(
        Provider::OpenAi.tool(&schemars_spec())["function"]["parameters"],
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                // Not the first constant only: every variant survives.
                "style": {"description": "How to answer.", "type": ["string", "null"], "enum": ["Terse", "Verbose", null]},
                "tree": {"$ref": "#/$defs/Tree"}
            },
            "required": ["query", "tree"],
            "$defs": {"Tree": tree_def("#/$defs/Tree")}
        })
    );
    let mut anthropic_schema = Value::Object(schemars_spec().input_schema.unwrap());
    anthropic_schema.as_object_mut().unwrap().remove("title");
    assert_eq!(
        Provider::Anthropic.tool(&schemars_spec())["input_schema"],
        anthropic_schema
    );
    assert_eq!(
        Provider::Gemini.tool(&schemars_spec())["parameters"],
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {"type": "integer", "nullable": true, "format": "uint32", "minimum": 0},
                "style": {"description": "How to answer.", "type": "string", "nullable": true, "enum": ["Terse", "Verbose"]},
                "tree": {"ref": "#/defs/Tree"}
            },
            "required": ["query", "tree"],
            "defs": {
                "Tree": {
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"ref": "#/defs/Tree"}}},
                    "required": ["children"]
                }
            }
        })
    );
}

#[test]
fn titles_go_but_properties_named_title_stay() {
    let schema = json!({
        "title": "Book",
        "type": "object",
        "properties": {
            "title": {"type": "string", "title": "Title"},
            "meta": {"type": "object", "default": {"title": "kept: data, not a keyword"}}
        },
        "required": ["title"]
    });
    assert_eq!(
        strip_titles(&schema),
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "meta": {"type": "object", "default": {"title": "kept: data, not a keyword"}}
            },
            "required": ["title"]
        })
    );
    // Gemini drops `default` keywords, but not a property called `default`.
    let gemini = sanitize_gemini_schema(&json!({
        "type": "object",
        "properties": {"default": {"type": "string", "default": "x"}}
    }));
    assert_eq!(
        gemini,
        json!({"type": "object", "properties": {"default": {"type": "string"}}})
    );
}

#[test]
fn openai_unions_pick_like_the_reference_and_arrays_get_items() {
    assert_eq!(
        sanitize_openai_schema(&json!({"anyOf": [{"type": "null"}, {"type": "integer"}]})),
        json!({"type": "integer"})
    );
    assert_eq!(
        sanitize_openai_schema(&json!({"oneOf": [{"type": "integer"}, {"type": "string"}]})),
        json!({"type": "integer"})
    );
    assert_eq!(
        sanitize_openai_schema(
            &json!({"allOf": [{"type": "integer", "minimum": 1}], "description": "n"})
        ),
        json!({"type": "integer", "minimum": 1, "description": "n"})
    );
    assert_eq!(
        sanitize_openai_schema(&json!({"type": "array"})),
        json!({"type": "array", "items": {}})
    );
    assert_eq!(
        sanitize_openai_schema(&json!({
            "type": "object",
            "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}, "patternProperties": {}}},
            "not": {"type": "null"}
        })),
        json!({"type": "object", "properties": {"m": {"type": "object"}}})
    );
}

#[test]
fn provider_names_parse() {
    for (name, provider) in [
        ("openai", Provider::OpenAi),
        ("OpenAI", Provider::OpenAi),
        ("anthropic", Provider::Anthropic),
        ("gemini", Provider::Gemini),
        ("google", Provider::Gemini),
        (" Google ", Provider::Gemini),
    ] {
        assert_eq!(name.parse::<Provider>(), Ok(provider), "{name}");
    }
    let err = "openrouter".parse::<Provider>().unwrap_err();
    assert!(err.to_string().contains("openrouter"), "{err}");
    for p in Provider::ALL {
        assert_eq!(p.to_string().parse::<Provider>(), Ok(p));
    }
}

#[test]
fn list_helpers_keep_order_and_an_empty_schema_is_no_input() {
    let specs = [submit(), hint()];
    assert_eq!(
        provider::openai_tools(&specs),
        vec![openai_tool(&specs[0]), openai_tool(&specs[1])]
    );
    assert_eq!(
        provider::anthropic_tools(&specs),
        vec![anthropic_tool(&specs[0]), anthropic_tool(&specs[1])]
    );
    assert_eq!(
        provider::gemini_function_declarations(&specs),
        vec![
            gemini_function_declaration(&specs[0]),
            gemini_function_declaration(&specs[1])
        ]
    );
    // `{}` counts as no schema, as in the reference (it is falsy in Python).
    let empty = spec("noop", "Does nothing.", Some(json!({})));
    assert_eq!(
        anthropic_tool(&empty)["input_schema"],
        json!({"type": "object", "properties": {}})
    );
    // A schema without properties is no input for Gemini, which rejects empty objects.
    let no_fields = spec(
        "noop",
        "Does nothing.",
        Some(json!({"type": "object", "properties": {}, "title": "Noop"})),
    );
    assert_eq!(
        gemini_function_declaration(&no_fields),
        json!({"name": "noop", "description": "Does nothing."})
    );
}
