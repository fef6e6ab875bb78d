//! Tool inputs generated from a tool's input schema: typical valid ones and deliberately
//! broken ones (wrong types, missing required fields, extra fields, empty and huge strings,
//! boundary numbers, nulls).
//!
//! Each input is made by a [`Strategy`], but whether it is valid is decided afterwards by a
//! real JSON Schema validator, not by the strategy: an extra field is valid unless the schema
//! forbids additional properties, a null is valid for an optional field, a huge string is
//! invalid under a `maxLength`. The schedule is fixed (every applicable strategy comes in the
//! first pass, and boundary values are tried from the most extreme one down), so what kinds of
//! input a run covers does not depend on the seed; the seed picks fields and values.

use serde_json::{json, Map, Value};

use super::rng::Rng;

/// The length of the huge strings sent (1 MiB): well under every server's body limit, far over
/// what a tool that copies or scans its input carelessly handles quickly.
pub const HUGE_STRING_LEN: usize = 1 << 20;

/// How deep nested objects and arrays are generated.
const MAX_DEPTH: usize = 4;

ors_core::wire_enum! {
    /// How one input was made (`as_str` is its short description for reports).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Strategy {
        /// Every field, with ordinary values.
        Typical = "typical values",
        /// Only the required fields.
        Minimal = "required fields only",
        /// Every top-level string field empty.
        EmptyStrings = "empty strings",
        /// One string field of [`HUGE_STRING_LEN`] characters.
        HugeString = "a huge string",
        /// One number at a boundary (the type's extremes, zero, negatives, just outside the
        /// schema's minimum or maximum).
        Boundary = "a boundary number",
        /// One field of the wrong JSON type.
        WrongType = "a value of the wrong type",
        /// One required field left out.
        MissingRequired = "a required field missing",
        /// A field the schema does not name.
        ExtraField = "an extra field",
        /// One field set to `null`.
        NullField = "a null field",
    }
}

impl Strategy {
    /// A short description for reports.
    pub fn describe(self) -> &'static str {
        self.as_str()
    }
}

/// After the first pass, this cycle, weighted toward what finds bugs most often.
const CYCLE: [Strategy; 8] = [
    Strategy::Boundary,
    Strategy::Typical,
    Strategy::WrongType,
    Strategy::Boundary,
    Strategy::Typical,
    Strategy::MissingRequired,
    Strategy::Boundary,
    Strategy::EmptyStrings,
];

/// One generated input.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The input object.
    pub input: Value,
    /// How it was made.
    pub strategy: Strategy,
}

/// Up to `n` distinct inputs for a tool with this input schema (`None`: the tool takes no
/// input). Fewer come back when the schema allows fewer distinct inputs.
pub fn inputs(schema: Option<&Map<String, Value>>, n: usize, rng: &mut Rng) -> Vec<Generated> {
    let root = schema.map_or(Value::Null, |s| Value::Object(s.clone()));
    let mut g = Gen::new(&root, rng);
    let mut out: Vec<Generated> = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    // The first pass is every strategy once, in declaration order.
    let schedule = Strategy::ALL.iter().chain(CYCLE.iter().cycle());
    for strategy in schedule.take(n.saturating_mul(4) + Strategy::ALL.len()) {
        if out.len() >= n {
            break;
        }
        if let Some(input) = g.make(*strategy).filter(|i| seen.insert(i.to_string())) {
            out.push(Generated {
                input,
                strategy: *strategy,
            });
        }
    }
    out
}

/// One valid input for a tool with this input schema (`None`: the tool takes no input, so
/// `{}`): its required fields and each optional one with even odds, every value within the
/// schema's types, enums, bounds and lengths. `ors eval --policy random` plays these.
pub fn valid_input(schema: Option<&Map<String, Value>>, rng: &mut Rng) -> Value {
    let root = schema.map_or(Value::Null, |s| Value::Object(s.clone()));
    let mut g = Gen::new(&root, rng);
    g.make(Strategy::Typical).unwrap_or_else(|| json!({}))
}

/// A short ordinary string, as the generated inputs hold (a random answer in prose).
pub fn text(rng: &mut Rng) -> String {
    Gen::new(&Value::Null, rng).word()
}

/// The JSON type a (resolved) schema asks for.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    Null,
    Enum(Vec<Value>),
    Const(Value),
    /// No constraint worth following: any value.
    Any,
}

impl Kind {
    /// A string, or an enum of strings (whose empty and huge strings are invalid: worth
    /// sending).
    fn is_stringy(&self) -> bool {
        match self {
            Kind::String => true,
            Kind::Enum(values) => values.iter().all(Value::is_string),
            _ => false,
        }
    }
}

struct Gen<'a> {
    root: &'a Value,
    rng: &'a mut Rng,
    /// How many boundary inputs were made, so each tries the next boundary value.
    boundary_round: usize,
}

impl<'a> Gen<'a> {
    fn new(root: &'a Value, rng: &'a mut Rng) -> Self {
        Self {
            root,
            rng,
            boundary_round: 0,
        }
    }

    /// The input a strategy makes, or `None` when it does not apply to this schema.
    fn make(&mut self, strategy: Strategy) -> Option<Value> {
        let root = self.root;
        if !root.is_object() {
            // No input schema: the tool takes no input; `{}` and a stray field are all there is.
            return match strategy {
                Strategy::Typical => Some(json!({})),
                Strategy::ExtraField => Some(json!({"unexpected_field": self.word()})),
                _ => None,
            };
        }
        let props = self.properties(root);
        let mut obj = self.object(root, 0, strategy != Strategy::Minimal);
        let Value::Object(map) = &mut obj else {
            return None;
        };
        match strategy {
            Strategy::Typical | Strategy::Minimal => {}
            Strategy::EmptyStrings => {
                let strings = self.properties_where(&props, Kind::is_stringy);
                if strings.is_empty() {
                    return None;
                }
                for (k, _) in strings {
                    map.insert(k.clone(), json!(""));
                }
            }
            Strategy::HugeString => {
                let key = self
                    .rng
                    .pick(&self.properties_where(&props, Kind::is_stringy))?
                    .0
                    .clone();
                let c = char::from(b'a' + self.rng.below(26) as u8);
                map.insert(key, Value::String(c.to_string().repeat(HUGE_STRING_LEN)));
            }
            Strategy::Boundary => {
                let numbers =
                    self.properties_where(&props, |k| matches!(k, Kind::Integer | Kind::Number));
                let (key, schema) = *self.rng.pick(&numbers)?;
                let values = self.boundaries(schema);
                let v = values
                    .get(self.boundary_round % values.len().max(1))?
                    .clone();
                self.boundary_round += 1;
                map.insert(key.clone(), v);
            }
            Strategy::WrongType => {
                let (key, schema) = *self
                    .rng
                    .pick(&self.properties_where(&props, |k| *k != Kind::Any))?;
                map.insert(key.clone(), self.wrong_type(schema));
            }
            Strategy::MissingRequired => {
                let mut present = required(root.get("required"));
                present.retain(|k| map.contains_key(*k));
                map.remove(*self.rng.pick(&present)?);
            }
            Strategy::ExtraField => {
                let mut name = "unexpected_field".to_owned();
                while props.iter().any(|(k, _)| **k == name) {
                    name.push('_');
                }
                let v = if self.rng.coin() {
                    Value::String(self.word())
                } else {
                    json!(self.rng.between(0, 1000) as i64)
                };
                map.insert(name, v);
            }
            Strategy::NullField => {
                let key = self.rng.pick(&props)?.0;
                map.insert(key.clone(), Value::Null);
            }
        }
        Some(obj)
    }

    /// The properties whose kind `keep` accepts.
    fn properties_where(
        &self,
        props: &[(&'a String, &'a Value)],
        keep: impl Fn(&Kind) -> bool,
    ) -> Vec<(&'a String, &'a Value)> {
        props
            .iter()
            .copied()
            .filter(|(_, s)| keep(&self.kind(s)))
            .collect()
    }

    /// Follow local `$ref`s (`#/$defs/X`, `#/definitions/X`) and one-element `allOf`s.
    fn resolve(&self, mut s: &'a Value) -> &'a Value {
        for _ in 0..16 {
            let next = match s.get("$ref").and_then(Value::as_str) {
                Some(r) => r.strip_prefix('#').and_then(|p| self.root.pointer(p)),
                None => match s.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                    Some([only]) => Some(only),
                    _ => None,
                },
            };
            let Some(next) = next else { return s };
            s = next;
        }
        s
    }

    /// The resolved schema of each property, in the schema's order.
    fn properties(&self, s: &'a Value) -> Vec<(&'a String, &'a Value)> {
        let s = self.resolve(s);
        s.get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k, self.resolve(v))).collect())
            .unwrap_or_default()
    }

    fn kind(&self, s: &Value) -> Kind {
        let s = self.resolve(s);
        if let Some(values) = s["enum"].as_array().filter(|v| !v.is_empty()) {
            return Kind::Enum(values.clone());
        }
        if let Some(c) = s.get("const") {
            return Kind::Const(c.clone());
        }
        let named = match s.get("type") {
            Some(Value::String(t)) => Some(t.as_str()),
            // A union such as ["string", "null"]: generate the first non-null member.
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .or(Some("null")),
            _ => None,
        };
        match named {
            Some("object") => Kind::Object,
            Some("array") => Kind::Array,
            Some("string") => Kind::String,
            Some("integer") => Kind::Integer,
            Some("number") => Kind::Number,
            Some("boolean") => Kind::Boolean,
            Some("null") => Kind::Null,
            _ if s.get("properties").is_some() => Kind::Object,
            _ if s.get("items").is_some() => Kind::Array,
            _ => match union_members(s) {
                // `Option<T>` from pydantic or schemars: anyOf [T, null]; follow the non-null.
                Some(members) => members
                    .iter()
                    .map(|m| self.kind(m))
                    .find(|k| *k != Kind::Null)
                    .unwrap_or(Kind::Null),
                None => Kind::Any,
            },
        }
    }

    /// An ordinary valid value for a schema.
    fn value(&mut self, s: &'a Value, depth: usize) -> Value {
        let s = self.resolve(s);
        if let Some(members) = union_members(s) {
            let non_null: Vec<&Value> = members
                .iter()
                .filter(|m| self.kind(m) != Kind::Null)
                .collect();
            if let Some(m) = self.rng.pick(&non_null) {
                return self.value(m, depth);
            }
        }
        match self.kind(s) {
            Kind::Object if depth < MAX_DEPTH => self.object(s, depth + 1, true),
            Kind::Object => json!({}),
            Kind::Array => {
                let lo = uint(s, "minItems").unwrap_or(0);
                let hi = uint(s, "maxItems").unwrap_or(u64::MAX);
                let len = self.rng.between(i128::from(lo), i128::from(hi.min(lo + 3)));
                let items = s.get("items").map(|i| self.resolve(i));
                let unique = s.get("uniqueItems") == Some(&Value::Bool(true));
                let mut out = Vec::new();
                for _ in 0..len {
                    let v = match items {
                        Some(i) if depth < MAX_DEPTH => self.value(i, depth + 1),
                        _ => Value::String(self.word()),
                    };
                    if !(unique && out.contains(&v)) {
                        out.push(v);
                    }
                }
                Value::Array(out)
            }
            Kind::String => {
                let min = uint(s, "minLength").unwrap_or(0) as usize;
                let max = uint(s, "maxLength").map_or(usize::MAX, |m| m as usize);
                // A word, padded with `x` up to `minLength` and cut at `maxLength`.
                let w = self.word();
                let len = w.chars().count().max(min).min(max);
                Value::String(w.chars().chain(std::iter::repeat('x')).take(len).collect())
            }
            Kind::Integer => {
                let (lo, hi) = int_bounds(s);
                let start = match (lo, hi) {
                    (Some(lo), _) => lo,
                    (None, Some(hi)) if hi < 0 => hi - 100,
                    (None, _) => 0,
                };
                let end = hi.unwrap_or(i128::MAX).min(start.saturating_add(100));
                let v = self.rng.between(start, end);
                // A `multipleOf` is met by the nearest multiple at or above `v` within the
                // bounds (or below, when above would leave them).
                let step = s
                    .get("multipleOf")
                    .and_then(Value::as_u64)
                    .filter(|m| *m > 1)
                    .map(i128::from);
                int_value(match step {
                    Some(m) => {
                        let up = v.div_euclid(m) * m + if v.rem_euclid(m) == 0 { 0 } else { m };
                        up - if hi.is_some_and(|h| up > h) { m } else { 0 }
                    }
                    None => v,
                })
            }
            Kind::Number => {
                let lo = num(s, "minimum").or_else(|| num(s, "exclusiveMinimum"));
                let hi = num(s, "maximum").or_else(|| num(s, "exclusiveMaximum"));
                let start = lo.unwrap_or(match hi {
                    Some(h) if h <= 0.0 => h - 100.0,
                    _ => 0.0,
                });
                let end = hi.unwrap_or(start + 100.0).min(start + 100.0);
                let t = self.rng.below(10_001) as f64 / 10_000.0;
                let v = (start + (end - start) * t).clamp(start, end);
                let rounded = (v * 100.0).round() / 100.0;
                // Rounding, or a bound that is exclusive, can put the value on or past an
                // edge; the middle of the range is inside every bound.
                let inside = |x: f64| {
                    num(s, "minimum").is_none_or(|m| x >= m)
                        && num(s, "maximum").is_none_or(|m| x <= m)
                        && num(s, "exclusiveMinimum").is_none_or(|m| x > m)
                        && num(s, "exclusiveMaximum").is_none_or(|m| x < m)
                };
                json!(if inside(rounded) {
                    rounded
                } else {
                    (start + end) / 2.0
                })
            }
            Kind::Boolean => Value::Bool(self.rng.coin()),
            Kind::Null => Value::Null,
            Kind::Enum(values) => self.rng.pick(&values).cloned().unwrap_or(Value::Null),
            Kind::Const(v) => v,
            Kind::Any => Value::String(self.word()),
        }
    }

    /// An object for an object schema: its required properties, and the others too when
    /// `optional` (each with even odds).
    fn object(&mut self, s: &'a Value, depth: usize, optional: bool) -> Value {
        let req = required(self.resolve(s).get("required"));
        let mut map = Map::new();
        for (k, ps) in self.properties(s) {
            if req.contains(&k.as_str()) || (optional && self.rng.coin()) {
                map.insert(k.clone(), self.value(ps, depth));
            }
        }
        Value::Object(map)
    }

    /// The boundary values tried for a number, most extreme first.
    fn boundaries(&self, s: &Value) -> Vec<Value> {
        let s = self.resolve(s);
        let mut out: Vec<Value> = Vec::new();
        let mut push = |v: Value| {
            if !out.contains(&v) {
                out.push(v);
            }
        };
        if self.kind(s) == Kind::Integer {
            let (lo, hi) = int_bounds(s);
            let top = match (hi, lo) {
                (Some(h), _) => h,
                (None, Some(l)) if l >= 0 => i128::from(u64::MAX),
                _ => i128::from(i64::MAX),
            };
            push(int_value(top));
            if let Some(h) = hi {
                push(int_value(h + 1));
            }
            if let Some(l) = lo {
                push(int_value(l - 1));
            }
            push(int_value(0));
            push(int_value(-1));
            push(int_value(i128::from(i64::MIN)));
            if let Some(l) = lo {
                push(int_value(l));
            }
            push(int_value((1 << 53) + 1));
        } else {
            let lo = num(s, "minimum").or_else(|| num(s, "exclusiveMinimum"));
            let hi = num(s, "maximum").or_else(|| num(s, "exclusiveMaximum"));
            push(json!(hi.unwrap_or(1e308)));
            if let Some(h) = hi {
                push(json!(h + 1.0));
            }
            if let Some(l) = lo {
                push(json!(l - 1.0));
            }
            push(json!(0.0));
            push(json!(-1e308));
            push(json!(f64::MIN_POSITIVE));
            push(json!(-0.5));
        }
        out
    }

    /// A value of another JSON type than the schema asks for.
    fn wrong_type(&mut self, s: &Value) -> Value {
        // Values no lax parser coerces (pydantic turns "12" into 12, true into 1).
        let choices: Vec<Value> = match self.kind(s) {
            Kind::Enum(values) if values.iter().all(Value::is_string) => {
                // A string, but not one of the values: the mistake a model makes most.
                vec![
                    json!("none-of-the-listed-values"),
                    json!(12345),
                    json!(["a", "list"]),
                ]
            }
            Kind::String | Kind::Enum(_) | Kind::Const(_) => {
                vec![json!(12345), json!(["a", "list"]), json!({"an": "object"})]
            }
            Kind::Integer | Kind::Number => {
                vec![json!("not a number"), json!([1, 2]), json!({"n": 1})]
            }
            Kind::Boolean => vec![json!("maybe"), json!(7), json!([true])],
            Kind::Array => vec![json!("not a list"), json!({"not": "a list"}), json!(3)],
            Kind::Object => vec![json!("not an object"), json!([1]), json!(4)],
            Kind::Null => vec![json!("not null"), json!(0)],
            Kind::Any => vec![json!(null)],
        };
        self.rng.pick(&choices).cloned().unwrap_or(Value::Null)
    }

    /// A short ordinary string.
    fn word(&mut self) -> String {
        const WORDS: [&str; 12] = [
            "hello",
            "42",
            "alpha beta",
            "x",
            "Zürich",
            "3.14",
            "yes",
            "a_b-c",
            "line one",
            "file.txt",
            "0",
            "the quick brown fox",
        ];
        let w = self.rng.pick(&WORDS).copied().unwrap_or("hello");
        if self.rng.below(4) == 0 {
            format!("{w} {}", self.rng.below(1000))
        } else {
            w.to_owned()
        }
    }
}

/// The `anyOf` / `oneOf` members of a schema.
fn union_members(s: &Value) -> Option<&Vec<Value>> {
    s.get("anyOf")
        .or_else(|| s.get("oneOf"))
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
}

/// The property names an object schema lists as required, from its `required` (which
/// `schema.get("required")` gives, of a schema as a map or as a value).
pub fn required(names: Option<&Value>) -> Vec<&str> {
    let names = names.and_then(Value::as_array).into_iter().flatten();
    names.filter_map(Value::as_str).collect()
}

fn uint(s: &Value, key: &str) -> Option<u64> {
    s.get(key).and_then(Value::as_u64)
}

fn num(s: &Value, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64).filter(|v| v.is_finite())
}

/// The inclusive integer bounds of a schema (`exclusive*` turned inclusive).
fn int_bounds(s: &Value) -> (Option<i128>, Option<i128>) {
    let lo = num(s, "minimum")
        .map(|v| v.ceil() as i128)
        .or_else(|| num(s, "exclusiveMinimum").map(|v| v.floor() as i128 + 1));
    let hi = num(s, "maximum")
        .map(|v| v.floor() as i128)
        .or_else(|| num(s, "exclusiveMaximum").map(|v| v.ceil() as i128 - 1));
    (lo, hi)
}

/// An integer as JSON: exact when it fits 64 bits, else the nearest float.
fn int_value(v: i128) -> Value {
    i64::try_from(v)
        .map(|i| json!(i))
        .or_else(|_| u64::try_from(v).map(|u| json!(u)))
        .unwrap_or_else(|_| json!(v as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn valid(schema: &Map<String, Value>, input: &Value) -> bool {
        jsonschema::validator_for(&Value::Object(schema.clone()))
            .expect("a valid schema")
            .is_valid(input)
    }

    #[test]
    fn every_strategy_is_tried_and_inputs_are_distinct() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["answer", "n"]
        }));
        let got = inputs(Some(&s), 20, &mut Rng::new(3));
        assert_eq!(got.len(), 20);
        for strategy in Strategy::ALL {
            assert!(got.iter().any(|g| g.strategy == strategy), "{strategy:?}");
        }
        let texts: std::collections::HashSet<String> =
            got.iter().map(|g| g.input.to_string()).collect();
        assert_eq!(texts.len(), got.len());
        // Typical and minimal inputs are valid; a missing required field is not.
        for g in &got {
            match g.strategy {
                Strategy::Typical | Strategy::Minimal => assert!(valid(&s, &g.input), "{g:?}"),
                Strategy::MissingRequired | Strategy::WrongType => {
                    assert!(!valid(&s, &g.input), "{g:?}")
                }
                _ => {}
            }
        }
        // Boundaries start at the maximum and step just outside it and below the minimum.
        let ns: Vec<&Value> = got
            .iter()
            .filter(|g| g.strategy == Strategy::Boundary)
            .map(|g| &g.input["n"])
            .collect();
        assert_eq!(&ns[..3], &[&json!(10), &json!(11), &json!(0)]);
    }

    #[test]
    fn valid_inputs_validate_for_every_seed() {
        // What schemars and pydantic write for typed tools: nested objects by reference,
        // optional fields, enums, bounded and exclusive numbers, multiples, unique lists.
        let s = schema(json!({
            "type": "object",
            "$defs": {"Move": {"type": "object", "properties": {
                "dx": {"type": "integer", "minimum": -1, "maximum": 1},
                "dir": {"type": "string", "enum": ["north", "south"]}},
                "required": ["dx", "dir"], "additionalProperties": false}},
            "properties": {
                "answer": {"type": "string", "minLength": 2, "maxLength": 5},
                "count": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255},
                "even": {"type": "integer", "multipleOf": 2, "minimum": 1, "maximum": 9},
                "p": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.01},
                "neg": {"type": "number", "exclusiveMaximum": 0},
                "flag": {"type": "boolean"},
                "moves": {"type": "array", "items": {"$ref": "#/$defs/Move"},
                          "minItems": 1, "maxItems": 3},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true},
                "label": {"type": ["string", "null"]},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "mode": {"const": "strict"}
            },
            "required": ["answer", "count", "even", "p", "neg", "moves", "mode"],
            "additionalProperties": false
        }));
        for seed in 0..300 {
            let input = valid_input(Some(&s), &mut Rng::new(seed));
            assert!(valid(&s, &input), "seed {seed}: {input}");
        }
        assert_eq!(valid_input(None, &mut Rng::new(1)), json!({}));
        assert_eq!(
            valid_input(Some(&s), &mut Rng::new(4)),
            valid_input(Some(&s), &mut Rng::new(4))
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_inputs() {
        let s = schema(json!({"type": "object", "properties": {"q": {"type": "string"}}}));
        assert_eq!(
            inputs(Some(&s), 10, &mut Rng::new(9)),
            inputs(Some(&s), 10, &mut Rng::new(9))
        );
    }

    #[test]
    fn a_tool_without_input_gets_the_few_inputs_there_are() {
        let got = inputs(None, 20, &mut Rng::new(1));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].input, json!({}));
        assert!(got[1].input.get("unexpected_field").is_some());
    }

    #[test]
    fn refs_and_optional_unions_are_followed() {
        // The shape pydantic gives nested models and Optional fields.
        let s = schema(json!({
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}},
                                "required": ["x"]}},
            "properties": {
                "p": {"$ref": "#/$defs/Point"},
                "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
            },
            "required": ["p"]
        }));
        let got = inputs(Some(&s), 12, &mut Rng::new(5));
        let typical = got
            .iter()
            .find(|g| g.strategy == Strategy::Typical)
            .expect("a typical input");
        assert!(typical.input["p"]["x"].is_i64(), "{typical:?}");
        assert!(valid(&s, &typical.input));
        let huge = got
            .iter()
            .find(|g| g.strategy == Strategy::HugeString)
            .expect("label is a string, so a huge one is sent");
        assert_eq!(
            huge.input["label"].as_str().map(str::len),
            Some(HUGE_STRING_LEN)
        );
    }

    #[test]
    fn unsigned_integers_reach_the_largest_u64() {
        let s = schema(json!({"type": "object",
            "properties": {"ms": {"type": "integer", "format": "uint64", "minimum": 0}},
            "required": ["ms"]}));
        let got = inputs(Some(&s), 20, &mut Rng::new(2));
        let first = got
            .iter()
            .find(|g| g.strategy == Strategy::Boundary)
            .expect("a boundary input");
        assert_eq!(first.input["ms"], json!(u64::MAX));
        assert!(got
            .iter()
            .any(|g| g.strategy == Strategy::Boundary && g.input["ms"] == json!(-1)));
    }
}
