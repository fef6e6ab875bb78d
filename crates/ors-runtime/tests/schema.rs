//! Tool input schemas: snapshots of representative types, the shape rules providers need, and
//! agreement between each schema and serde (what serde accepts the schema accepts; some inputs
//! serde rejects the schema rejects too), checked with the `jsonschema` validator.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_runtime::schema::{input_schema, SchemaError};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// How a search matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Exact,
    Fuzzy,
}

/// An answer style.
// Each variant is documented, so schemars writes a `oneOf` of constants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
enum Style {
    /// Short answers.
    Terse,
    /// Long answers.
    Verbose,
}

/// A range of years.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Years {
    /// Earliest year.
    from: i32,
    to: Option<i32>,
}

/// Search the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Search {
    /// Words to look for.
    query: String,
    /// At most this many results.
    limit: Option<u32>,
    /// Only items with all these tags.
    tags: Vec<String>,
    /// How to match.
    mode: Mode,
    /// Publication years.
    years: Years,
    #[serde(default)]
    page: u32,
    style: Option<Style>,
}

/// A tree of integers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Tree {
    value: i64,
    children: Vec<Tree>,
}

/// Two trees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Forest {
    /// The main tree.
    main: Tree,
    spare: Option<Box<Tree>>,
}

/// A name (a newtype over a string: not an object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Name(String);

/// One of two shapes (an untagged union: no root `type`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Either {
    A { a: i32 },
    B { b: String },
}

fn schema_of<T: JsonSchema>() -> Value {
    Value::Object(input_schema::<T>().expect("an object schema"))
}

fn tree_schema_body(child_ref: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "value": {"type": "integer", "format": "int64"},
            "children": {"type": "array", "items": {"$ref": child_ref}}
        },
        "required": ["value", "children"]
    })
}

#[test]
fn snapshot_of_a_struct_with_every_kind_of_field() {
    assert_eq!(
        schema_of::<Search>(),
        json!({
            "title": "Search",
            "description": "Search the catalogue.",
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {
                    "type": ["integer", "null"],
                    "format": "uint32",
                    "minimum": 0,
                    "description": "At most this many results."
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only items with all these tags."
                },
                "mode": {"type": "string", "enum": ["exact", "fuzzy"], "description": "How to match."},
                "years": {
                    "type": "object",
                    "description": "Publication years.",
                    "properties": {
                        "from": {"type": "integer", "format": "int32", "description": "Earliest year."},
                        "to": {"type": ["integer", "null"], "format": "int32"}
                    },
                    "required": ["from"],
                    "additionalProperties": false
                },
                "page": {"type": "integer", "format": "uint32", "minimum": 0, "default": 0},
                "style": {
                    "anyOf": [
                        {"description": "An answer style.", "oneOf": [
                            {"type": "string", "const": "Terse", "description": "Short answers."},
                            {"type": "string", "const": "Verbose", "description": "Long answers."}
                        ]},
                        {"type": "null"}
                    ]
                }
            },
            "required": ["query", "tags", "mode", "years"]
        })
    );
}

#[test]
fn snapshot_of_a_recursive_root() {
    let mut expected = tree_schema_body("#");
    expected["title"] = json!("Tree");
    expected["description"] = json!("A tree of integers.");
    assert_eq!(schema_of::<Tree>(), expected);
}

#[test]
fn snapshot_of_a_nested_recursive_type_keeps_resolvable_defs() {
    let mut main = tree_schema_body("#/$defs/Tree");
    main["description"] = json!("The main tree.");
    let mut spare = tree_schema_body("#/$defs/Tree");
    spare["description"] = json!("A tree of integers.");
    spare["type"] = json!(["object", "null"]);
    let mut def = tree_schema_body("#/$defs/Tree");
    def["description"] = json!("A tree of integers.");
    assert_eq!(
        schema_of::<Forest>(),
        json!({
            "title": "Forest",
            "description": "Two trees.",
            "type": "object",
            "properties": {"main": main, "spare": spare},
            "required": ["main"],
            "$defs": {"Tree": def}
        })
    );
}

/// Every `$ref` in `v` points at something that exists in `root`.
fn assert_refs_resolve(root: &Value, v: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let pointer = r.strip_prefix('#').expect("a local reference");
                assert!(root.pointer(pointer).is_some(), "{r} does not resolve");
            }
            m.values().for_each(|x| assert_refs_resolve(root, x));
        }
        Value::Array(a) => a.iter().for_each(|x| assert_refs_resolve(root, x)),
        _ => {}
    }
}

#[test]
fn shape_rules_hold_for_every_object_type() {
    for schema in [
        schema_of::<Search>(),
        schema_of::<Years>(),
        schema_of::<Tree>(),
        schema_of::<Forest>(),
        schema_of::<std::collections::BTreeMap<String, i32>>(),
    ] {
        assert_eq!(schema["type"], "object", "{schema}");
        assert!(schema.get("$schema").is_none(), "{schema}");
        assert!(schema["properties"].is_object(), "{schema}");
        assert!(schema.get("definitions").is_none(), "{schema}");
        assert_refs_resolve(&schema, &schema);
    }
}

#[test]
fn non_object_types_are_refused_naming_the_type() {
    fn refused<T: JsonSchema>() -> String {
        match input_schema::<T>() {
            Err(e @ SchemaError::NotObject { .. }) => e.to_string(),
            Ok(s) => panic!("expected NotObject, got {s:?}"),
        }
    }
    for (msg, type_name) in [
        (refused::<Mode>(), "Mode"),
        (refused::<Name>(), "Name"),
        (refused::<String>(), "string"),
        (refused::<Vec<i32>>(), "Array_of_int32"),
        (refused::<Option<Years>>(), "Nullable_Years"),
        (refused::<Either>(), "Either"),
    ] {
        assert!(msg.contains(&format!("'{type_name}'")), "{msg}");
        assert!(msg.contains("JSON object"), "{msg}");
    }
}

/// The schema accepts every value in `accepted` (which serde accepts too) and rejects every
/// value in `rejected` (which serde rejects too).
#[track_caller]
fn agree<T: JsonSchema + DeserializeOwned>(accepted: &[Value], rejected: &[Value]) {
    let schema = schema_of::<T>();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    for v in accepted {
        assert!(
            serde_json::from_value::<T>(v.clone()).is_ok(),
            "serde rejects {v}"
        );
        assert!(
            validator.is_valid(v),
            "schema rejects {v}, which serde accepts"
        );
    }
    for v in rejected {
        assert!(
            serde_json::from_value::<T>(v.clone()).is_err(),
            "serde accepts {v}"
        );
        assert!(
            !validator.is_valid(v),
            "schema accepts {v}, which serde rejects"
        );
    }
}

fn search_json() -> Value {
    json!({"query": "q", "tags": [], "mode": "exact", "years": {"from": 1990}})
}

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().unwrap().remove(key);
    base
}

#[test]
fn search_schema_agrees_with_serde() {
    let base = search_json();
    agree::<Search>(
        &[
            base.clone(),
            with(base.clone(), "limit", json!(10)),
            with(base.clone(), "limit", Value::Null),
            with(base.clone(), "page", json!(3)),
            with(base.clone(), "style", json!("Verbose")),
            with(base.clone(), "style", Value::Null),
            with(base.clone(), "tags", json!(["a", "b"])),
            with(base.clone(), "years", json!({"from": -5, "to": 2000})),
            with(base.clone(), "unknown", json!(1)), // serde ignores unknown keys
        ],
        &[
            json!({}),
            json!([]),
            json!("q"),
            without(base.clone(), "query"),
            without(base.clone(), "mode"),
            with(base.clone(), "query", json!(5)),
            with(base.clone(), "limit", json!(-1)),
            with(base.clone(), "limit", json!(1.5)),
            with(base.clone(), "tags", json!("a")),
            with(base.clone(), "tags", json!([1])),
            with(base.clone(), "mode", json!("Exact")),
            with(base.clone(), "style", json!("loud")),
            with(base.clone(), "years", json!({"to": 1})),
            with(base.clone(), "years", json!({"from": 1, "extra": 2})), // deny_unknown_fields
            with(base.clone(), "page", Value::Null),
        ],
    );
}

#[test]
fn recursive_schemas_agree_with_serde() {
    let leaf = json!({"value": 1, "children": []});
    let deep = json!({"value": 1, "children": [{"value": 2, "children": [leaf.clone()]}]});
    let bad_deep = json!({"value": 1, "children": [{"value": 2, "children": [{"value": "x", "children": []}]}]});
    agree::<Tree>(
        &[leaf.clone(), deep.clone()],
        &[json!({"value": 1}), bad_deep.clone()],
    );
    agree::<Forest>(
        &[
            json!({"main": deep.clone()}),
            json!({"main": leaf.clone(), "spare": deep.clone()}),
            json!({"main": leaf.clone(), "spare": null}),
        ],
        &[
            json!({}),
            json!({"main": bad_deep.clone()}),
            json!({"main": leaf.clone(), "spare": bad_deep}),
        ],
    );
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Exact), Just(Mode::Fuzzy)]
}

fn style() -> impl Strategy<Value = Style> {
    prop_oneof![Just(Style::Terse), Just(Style::Verbose)]
}

fn search() -> impl Strategy<Value = Search> {
    (
        ".*",
        any::<Option<u32>>(),
        prop::collection::vec(".{0,5}", 0..4),
        mode(),
        (any::<i32>(), any::<Option<i32>>()),
        any::<u32>(),
        prop::option::of(style()),
    )
        .prop_map(
            |(query, limit, tags, mode, (from, to), page, style)| Search {
                query,
                limit,
                tags,
                mode,
                years: Years { from, to },
                page,
                style,
            },
        )
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = any::<i64>().prop_map(|value| Tree {
        value,
        children: vec![],
    });
    leaf.prop_recursive(4, 24, 4, |inner| {
        (any::<i64>(), prop::collection::vec(inner, 0..4))
            .prop_map(|(value, children)| Tree { value, children })
    })
}

/// Every value serde writes for `T` is one the schema accepts, and serde reads it back.
fn schema_accepts_serialized<T>(value: &T) -> Result<(), TestCaseError>
where
    T: JsonSchema + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let schema = schema_of::<T>();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let json = serde_json::to_value(value).unwrap();
    prop_assert!(validator.is_valid(&json), "schema rejects {}", json);
    prop_assert_eq!(&serde_json::from_value::<T>(json).unwrap(), value);
    Ok(())
}

proptest! {
    #[test]
    fn search_schema_accepts_what_serde_writes(s in search()) {
        schema_accepts_serialized(&s)?;
    }

    #[test]
    fn forest_schema_accepts_what_serde_writes(main in tree(), spare in prop::option::of(tree())) {
        schema_accepts_serialized(&Forest { main, spare: spare.map(Box::new) })?;
    }
}
