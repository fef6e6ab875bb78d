//! Provider conversion of arbitrary tool specs and schemas: nothing panics, the sanitizers
//! are idempotent (a schema cleaned once is clean), titles are gone at the top, a provider
//! name parses back to itself, and every converted tool is JSON again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ors_core::provider::{
    self, sanitize_gemini_schema, sanitize_openai_schema, strip_titles, Provider,
};
use ors_core::ToolSpec;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(name) = std::str::from_utf8(data) {
        if let Ok(p) = name.parse::<Provider>() {
            assert_eq!(p.as_str().parse::<Provider>(), Ok(p));
        }
    }
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for (name, clean) in [
        ("strip_titles", strip_titles as fn(&Value) -> Value),
        ("openai", sanitize_openai_schema),
        ("gemini", sanitize_gemini_schema),
    ] {
        let once = clean(&schema);
        assert_eq!(clean(&once), once, "{name} is not idempotent on {schema}");
        if let Value::Object(obj) = &once {
            if name != "openai" {
                assert!(!obj.contains_key("title"), "{name} kept a title: {once}");
            }
            if name != "strip_titles" {
                for key in ["anyOf", "oneOf", "allOf", "not", "additionalProperties"] {
                    assert!(!obj.contains_key(key), "{name} kept {key}: {once}");
                }
            }
        }
    }
    let spec = match &schema {
        Value::Object(obj) => serde_json::from_value::<ToolSpec>(schema.clone())
            .ok()
            .or_else(|| Some(ToolSpec::new("t", "d", Some(obj.clone())))),
        _ => None,
    };
    if let Some(spec) = spec {
        for p in Provider::ALL {
            let tool = p.tool(&spec);
            let text = serde_json::to_string(&tool).expect("a converted tool is JSON");
            assert_eq!(
                serde_json::from_str::<Value>(&text).ok().as_ref(),
                Some(&tool)
            );
        }
        let gemini = provider::gemini_tool(std::slice::from_ref(&spec));
        assert!(gemini.get("functionDeclarations").is_some());
        let _ = provider::openai_responses_tool(&spec);
    }
});
