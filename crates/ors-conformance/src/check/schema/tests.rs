use serde_json::json;

use super::*;
use crate::check::fuzz;
use crate::check::rng::Rng;

/// Schemas as tools publish them: schemars and Pydantic output, hand-written MCP schemas,
/// draft-07 forms.
fn corpus() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {"answer": {"type": "string"}},
               "required": ["answer"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 10},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
            "step": {"type": "integer", "multipleOf": 3},
            "mode": {"enum": ["fast", "slow", 1, null]},
            "flag": {"type": ["boolean", "null"]},
            "word": {"type": "string", "minLength": 2, "maxLength": 5}
        }, "required": ["n", "mode"]}),
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"Move": {"type": "object", "properties": {
                "row": {"type": "integer"}, "col": {"type": "integer", "maximum": 2}},
                "required": ["row", "col"]}},
            "properties": {
                "moves": {"type": "array", "items": {"$ref": "#/$defs/Move"},
                          "minItems": 1, "maxItems": 3, "uniqueItems": true},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
            },
            "required": ["moves"]}),
        json!({"type": "object", "definitions": {"Color": {"type": "string",
                "enum": ["red", "green"]}},
            "properties": {
                "color": {"$ref": "#/definitions/Color"},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "circle"},
                        "r": {"type": "number", "minimum": 0}}, "required": ["kind", "r"]},
                    {"type": "object", "properties": {"kind": {"const": "square"},
                        "side": {"type": "number"}}, "required": ["kind", "side"]}
                ]},
                "pair": {"type": "array", "prefixItems": [{"type": "string"},
                    {"type": "integer"}], "items": false}
            },
            "dependentRequired": {"shape": ["color"]}}),
        json!({"type": "object", "properties": {
            "q": {"type": "string", "not": {"const": ""}},
            "limit": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"},
                     "contains": {"const": "main"}},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"},
                     "propertyNames": {"maxLength": 3}, "maxProperties": 2}
        }, "required": ["q"],
           "if": {"properties": {"limit": {"const": 1}}, "required": ["limit"]},
           "then": {"required": ["tags"]}}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"point": {"type": "array", "items": [{"type": "number"},
                {"type": "number"}], "additionalItems": false},
                "a": {"type": "string"}, "b": {"type": "string"}},
            "dependencies": {"a": ["b"]}}),
        json!({"type": "object", "properties": {}}),
    ]
}

fn schema(v: &Value) -> Schema {
    Schema::new(v.clone()).expect("a well-formed schema")
}

#[test]
fn every_verdict_agrees_with_a_full_validator() {
    let mut checked = 0;
    for s in corpus() {
        let full = jsonschema::validator_for(&s).expect("the full validator takes it");
        let ours = schema(&s);
        let map = s.as_object().cloned().unwrap_or_default();
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            for g in fuzz::inputs(Some(&map), 30, &mut rng) {
                if beyond_floats(&g.input) {
                    // The full validator (without its arbitrary-precision feature) divides
                    // in floating point there: 2^53 + 1 is not a multiple of 3 to it.
                    continue;
                }
                let expected = full.is_valid(&g.input);
                match ours.verdict(&g.input) {
                    Verdict::Valid => assert!(expected, "{s}\n{} accepted", g.input),
                    Verdict::Invalid(why) => {
                        assert!(!expected, "{s}\n{} rejected: {why}", g.input);
                    }
                    // None of these schemas uses a keyword read as unknown.
                    Verdict::Unknown => panic!("{s}\n{}: unknown", g.input),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 2_500, "{checked}");
}

/// Whether `v` holds an integer that a 64-bit float cannot represent exactly.
fn beyond_floats(v: &Value) -> bool {
    match v {
        Value::Number(n) => int(n).is_some_and(|i| i.unsigned_abs() > 1 << 53),
        Value::Array(a) => a.iter().any(beyond_floats),
        Value::Object(o) => o.values().any(beyond_floats),
        _ => false,
    }
}

#[test]
fn integers_are_exact_where_floats_are_not() {
    // 2^53 + 1: a float rounds it to 2^53.
    let big = json!(9_007_199_254_740_993u64);
    let s = schema(&json!({"maximum": 9_007_199_254_740_992u64}));
    assert!(matches!(s.verdict(&big), Verdict::Invalid(_)));
    let s = schema(&json!({"multipleOf": 3}));
    assert_eq!(s.verdict(&big), Verdict::Valid);
    assert!(matches!(
        s.verdict(&json!(9_007_199_254_740_992u64)),
        Verdict::Invalid(_)
    ));
}

#[test]
fn hand_picked_inputs_agree_with_a_full_validator() {
    let s = &corpus();
    let cases = [
        (&s[1], json!({"n": 1.0, "mode": 1.0})),
        (&s[1], json!({"n": 18446744073709551615u64, "mode": "fast"})),
        (&s[1], json!({"n": 3, "mode": null, "x": 1.5})),
        (
            &s[1],
            json!({"n": 3, "mode": "fast", "word": "\u{e9}t\u{e9}"}),
        ),
        (&s[1], json!({"n": 3, "mode": "fast", "step": -9})),
        (&s[1], json!({"n": 3, "mode": "fast", "step": 9.5})),
        (
            &s[2],
            json!({"moves": [{"row": 1, "col": 1}, {"col": 1, "row": 1.0}]}),
        ),
        (
            &s[3],
            json!({"shape": {"kind": "circle", "r": 1}, "color": "red"}),
        ),
        (&s[3], json!({"shape": {"kind": "circle", "r": 1}})),
        (&s[3], json!({"pair": ["a", 1, 2]})),
        (
            &s[4],
            json!({"q": "x", "limit": 1, "tags": ["main"], "meta": {"abcd": 1}}),
        ),
        (&s[4], json!({"q": "x", "limit": 1})),
        (&s[4], json!({"q": "x", "tags": ["a", "b"]})),
        (&s[5], json!({"point": [1, 2, 3]})),
        (&s[5], json!({"a": "x"})),
    ];
    for (s, input) in cases {
        let expected = jsonschema::validator_for(s).unwrap().is_valid(&input);
        let got = schema(s).verdict(&input);
        assert_eq!(got == Verdict::Valid, expected, "{s}\n{input}: {got:?}");
    }
}

#[test]
fn a_rejection_says_where_and_why() {
    let s = schema(&corpus()[2]);
    let Verdict::Invalid(why) = s.verdict(&json!({"moves": [{"row": 1, "col": 7}]})) else {
        panic!("col 7 is over the maximum");
    };
    assert_eq!(why, "/moves/0/col: 7 is greater than the maximum of 2");
    let Verdict::Invalid(why) = s.verdict(&json!({})) else {
        panic!("moves is required");
    };
    assert_eq!(why, "'moves' is a required property");
    let s = schema(&corpus()[0]);
    let Verdict::Invalid(why) = s.verdict(&json!({"answer": "1", "extra": 2})) else {
        panic!("no additional properties");
    };
    assert!(why.contains("'extra' unexpected"), "{why}");
}

#[test]
fn what_is_not_read_is_unknown_unless_something_else_rejects() {
    let s = schema(&json!({"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "n": {"type": "integer"},
        "far": {"$ref": "https://example.com/schema.json"},
        "price": {"type": "number", "multipleOf": 0.1}
    }}));
    assert_eq!(s.verdict(&json!({"code": "ABC"})), Verdict::Unknown);
    assert_eq!(s.verdict(&json!({"far": 1})), Verdict::Unknown);
    assert_eq!(s.verdict(&json!({"price": 0.3})), Verdict::Unknown);
    assert!(matches!(
        s.verdict(&json!({"price": 0.35})),
        Verdict::Invalid(_)
    ));
    assert!(matches!(
        s.verdict(&json!({"code": "ABC", "n": "x"})),
        Verdict::Invalid(_)
    ));
    assert!(matches!(
        s.verdict(&json!({"code": 5})),
        Verdict::Invalid(_)
    ));
    assert_eq!(s.verdict(&json!({"n": 2})), Verdict::Valid);
}

#[test]
fn a_malformed_schema_is_named_where_it_breaks_and_the_full_validator_agrees() {
    let cases = [
        (
            json!({"type": "object", "properties": {"stars": {"type": "integer",
            "minimum": "one"}}}),
            "/properties/stars/minimum",
        ),
        (json!({"type": "obj"}), "/type"),
        (json!({"type": "object", "required": "answer"}), "/required"),
        (
            json!({"properties": {"a": {"$ref": "#/$defs/Missing"}}}),
            "/properties/a/$ref",
        ),
        (json!({"anyOf": []}), "/anyOf"),
        (json!({"properties": {"a": 5}}), "/properties/a"),
        (json!({"items": {"minItems": -1}}), "/items/minItems"),
        (json!({"multipleOf": 0}), "/multipleOf"),
    ];
    for (s, at) in cases {
        assert!(
            jsonschema::validator_for(&s).is_err(),
            "the full validator takes {s}"
        );
        let e = Schema::new(s.clone()).expect_err("malformed");
        assert_eq!(e.at, at, "{s}: {e}");
    }
    let e = Schema::new(json!({"type": "strnig"})).unwrap_err();
    assert!(e.to_string().contains("one of: array, boolean"), "{e}");
    for s in corpus() {
        assert!(Schema::new(s.clone()).is_ok(), "{s}");
    }
}
