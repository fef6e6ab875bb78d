use schemars::JsonSchema;
use serde::Deserialize;

/// Node doc.
#[derive(Deserialize, JsonSchema)]
struct Node { /// the value
 value: i32, /// children
 children: Vec<Node>, next: Option<Box<Node>> }

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode { /// fast
Fast, Slow }

#[derive(Deserialize, JsonSchema)]
struct Inner { /// x doc
 x: f64 }

/// Outer doc.
#[derive(Deserialize, JsonSchema)]
struct Outer { /// the inner
 inner: Inner, /// opt
 opt: Option<String>, mode: Mode, tags: Vec<String>, #[serde(default)] n: u32, oi: Option<Inner>, t: (i32, String) }

#[test]
fn show() {
    for s in [ors_core::schema::input_schema::<Node>(), ors_core::schema::input_schema::<Outer>()] {
        println!("{}", serde_json::to_string_pretty(&s.unwrap()).unwrap());
    }
    println!("{:?}", ors_core::schema::input_schema::<Mode>());
    println!("{:?}", ors_core::schema::input_schema::<String>());
    println!("{:?}", ors_core::schema::input_schema::<serde_json::Value>());
    println!("{:?}", ors_core::schema::input_schema::<std::collections::HashMap<String,i32>>());
}
#[derive(Deserialize, JsonSchema)]
struct HasTree { /// tree doc
 tree: Node, other: Option<Node> }
#[test]
fn show2() {
    println!("{}", serde_json::to_string_pretty(&ors_core::schema::input_schema::<HasTree>().unwrap()).unwrap());
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| { s.inline_subschemas = true; s.meta_schema = None; });
    let schema = settings.into_generator().into_root_schema_for::<HasTree>();
    println!("{}", serde_json::to_string_pretty(&schema).unwrap());
}
