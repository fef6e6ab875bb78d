//! A tool's input schema as `ors check` reads it: is the schema usable, and is an input valid,
//! invalid (and why), or beyond what this reader knows?
//!
//! A JSON Schema validator (regular expressions, big numbers, URIs, internationalised
//! e-mail addresses) was two thirds of the CLI's first build for a check that meets small
//! schemas: typed tools' schemas from schemars and Pydantic, hand-written ones from MCP
//! servers. This one knows the keywords such schemas use (draft 2020-12, and draft-07's
//! `definitions`, tuple `items` and `dependencies`), and says [`Verdict::Unknown`] where it
//! would have to guess: a `pattern` or `patternProperties` met by a value, a remote or anchor
//! `$ref`, `unevaluated*`, `$dynamicRef`, an inexact `multipleOf`. The check then judges no
//! server's answer on that input. `format` is an annotation, as in draft 2020-12. Unknown
//! keywords are ignored, as the specification says. A test compares every verdict it gives
//! with a full validator's.

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Number, Value};

/// What a schema says of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The schema accepts it.
    Valid,
    /// The schema rejects it, for this reason (where, and which keyword).
    Invalid(String),
    /// This reader cannot tell (the schema uses a keyword it does not evaluate).
    Unknown,
}

/// Why a schema is not a usable JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The JSON Pointer of the offending value in the schema (`/properties/n/minimum`).
    pub at: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.at.is_empty() { "/" } else { &self.at };
        write!(f, "{} (at {at})", self.problem)
    }
}

/// A checked schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
}

/// The names `type` takes.
const TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// How deep `$ref`s and nesting are followed before the answer is [`Verdict::Unknown`]: a
/// `$ref` loop that consumes no input would otherwise never end.
const MAX_DEPTH: usize = 64;

impl Schema {
    /// Check that `root` is a JSON Schema this reader understands the shape of.
    pub fn new(root: Value) -> Result<Self, Malformed> {
        well_formed(&root, &root, &mut String::new())?;
        Ok(Self { root })
    }

    /// What the schema says of `input`.
    pub fn verdict(&self, input: &Value) -> Verdict {
        self.eval(&self.root, input, &mut String::new(), 0)
    }

    fn eval(&self, schema: &Value, v: &Value, at: &mut String, depth: usize) -> Verdict {
        if depth > MAX_DEPTH {
            return Verdict::Unknown;
        }
        let s = match schema {
            Value::Bool(true) => return Verdict::Valid,
            Value::Bool(false) => return invalid(at, "no value is allowed here (schema false)"),
            Value::Object(s) => s,
            _ => return Verdict::Unknown,
        };
        let mut unknown = false;
        // The keywords are a conjunction: any rejection decides, an unknown one only blurs
        // an acceptance.
        for (key, arg) in s {
            let verdict = self.keyword(s, key, arg, v, at, depth);
            match verdict {
                Verdict::Valid => {}
                Verdict::Unknown => unknown = true,
                Verdict::Invalid(_) => return verdict,
            }
        }
        if unknown {
            Verdict::Unknown
        } else {
            Verdict::Valid
        }
    }

    /// Evaluate `schema` below `at` extended by `step`.
    fn sub(&self, schema: &Value, v: &Value, at: &mut String, step: &str, depth: usize) -> Verdict {
        let len = at.len();
        push_step(at, step);
        let verdict = self.eval(schema, v, at, depth + 1);
        at.truncate(len);
        verdict
    }

    fn keyword(
        &self,
        s: &Map<String, Value>,
        key: &str,
        arg: &Value,
        v: &Value,
        at: &mut String,
        depth: usize,
    ) -> Verdict {
        match key {
            "type" => {
                let names: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => return Verdict::Unknown,
                };
                if names.iter().any(|t| has_type(v, t)) {
                    Verdict::Valid
                } else {
                    invalid(at, format!("{} is not of type {}", short(v), arg))
                }
            }
            "enum" => match arg.as_array() {
                Some(values) if values.iter().any(|e| same(e, v)) => Verdict::Valid,
                Some(_) => invalid(at, format!("{} is not one of {arg}", short(v))),
                None => Verdict::Unknown,
            },
            "const" if same(arg, v) => Verdict::Valid,
            "const" => invalid(at, format!("{} is not {arg}", short(v))),
            "$ref" => match arg.as_str().and_then(|r| self.target(r)) {
                Some(target) => self.eval(target, v, at, depth + 1),
                None => Verdict::Unknown,
            },
            "$dynamicRef" | "$recursiveRef" => Verdict::Unknown,
            "allOf" | "anyOf" | "oneOf" => self.combined(key, arg, v, at, depth),
            "not" => match self.eval(arg, v, at, depth + 1) {
                Verdict::Valid => invalid(at, format!("{} is valid under {arg}", short(v))),
                Verdict::Invalid(_) => Verdict::Valid,
                Verdict::Unknown => Verdict::Unknown,
            },
            "if" => {
                let branch = match self.eval(arg, v, at, depth + 1) {
                    Verdict::Valid => "then",
                    Verdict::Invalid(_) => "else",
                    Verdict::Unknown => return Verdict::Unknown,
                };
                match s.get(branch) {
                    Some(then) => self.eval(then, v, at, depth + 1),
                    None => Verdict::Valid,
                }
            }
            _ => match v {
                Value::Object(o) => self.object_keyword(s, key, arg, o, at, depth),
                Value::Array(a) => self.array_keyword(s, key, arg, a, at, depth),
                Value::String(t) => string_keyword(key, arg, t, at),
                Value::Number(n) => number_keyword(key, arg, n, at),
                _ => Verdict::Valid,
            },
        }
    }

    fn combined(
        &self,
        key: &str,
        arg: &Value,
        v: &Value,
        at: &mut String,
        depth: usize,
    ) -> Verdict {
        let Some(members) = arg.as_array() else {
            return Verdict::Unknown;
        };
        let verdicts: Vec<Verdict> = members
            .iter()
            .map(|m| self.eval(m, v, at, depth + 1))
            .collect();
        let valid = verdicts.iter().filter(|d| **d == Verdict::Valid).count();
        let unknown = verdicts.contains(&Verdict::Unknown);
        match key {
            "allOf" => all(verdicts.into_iter()),
            "anyOf" if valid > 0 => Verdict::Valid,
            "oneOf" if valid > 1 => invalid(
                at,
                format!(
                    "{} is valid under more than one of the schemas of 'oneOf'",
                    short(v)
                ),
            ),
            _ if unknown => Verdict::Unknown,
            "oneOf" if valid == 1 => Verdict::Valid,
            _ => invalid(
                at,
                format!(
                    "{} is not valid under any of the schemas of '{key}'",
                    short(v)
                ),
            ),
        }
    }

    fn object_keyword(
        &self,
        s: &Map<String, Value>,
        key: &str,
        arg: &Value,
        o: &Map<String, Value>,
        at: &mut String,
        depth: usize,
    ) -> Verdict {
        match key {
            "required" => {
                let names = arg.as_array().map(Vec::as_slice).unwrap_or_default();
                match names
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|n| !o.contains_key(*n))
                {
                    Some(missing) => invalid(at, format!("'{missing}' is a required property")),
                    None => Verdict::Valid,
                }
            }
            "properties" => {
                let Some(props) = arg.as_object() else {
                    return Verdict::Unknown;
                };
                all(o.iter().filter_map(|(k, value)| {
                    props.get(k).map(|p| self.sub(p, value, at, k, depth))
                }))
            }
            "patternProperties" if o.is_empty() => Verdict::Valid,
            "patternProperties" => Verdict::Unknown,
            "additionalProperties" => {
                if s.contains_key("patternProperties") {
                    return Verdict::Unknown;
                }
                let known = s.get("properties").and_then(Value::as_object);
                let extra = o
                    .iter()
                    .filter(|(k, _)| !known.is_some_and(|p| p.contains_key(*k)));
                if *arg == Value::Bool(false) {
                    return match extra.map(|(k, _)| format!("'{k}'")).collect::<Vec<_>>() {
                        names if names.is_empty() => Verdict::Valid,
                        names => invalid(
                            at,
                            format!(
                                "additional properties are not allowed ({} unexpected)",
                                names.join(", ")
                            ),
                        ),
                    };
                }
                all(extra.map(|(k, value)| self.sub(arg, value, at, k, depth)))
            }
            "propertyNames" => all(o
                .keys()
                .map(|k| self.eval(arg, &Value::String(k.clone()), at, depth + 1))),
            "minProperties" | "maxProperties" => count_bound(key, arg, o.len(), "properties", at),
            "dependentRequired" | "dependencies" | "dependentSchemas" => {
                let Some(deps) = arg.as_object() else {
                    return Verdict::Unknown;
                };
                all(deps
                    .iter()
                    .filter(|(k, _)| o.contains_key(*k))
                    .map(|(k, dep)| match dep.as_array() {
                        Some(names) => match names
                            .iter()
                            .filter_map(Value::as_str)
                            .find(|n| !o.contains_key(*n))
                        {
                            Some(n) => {
                                invalid(at, format!("'{n}' is required when '{k}' is present"))
                            }
                            None => Verdict::Valid,
                        },
                        None => self.eval(dep, &Value::Object(o.clone()), at, depth + 1),
                    }))
            }
            "unevaluatedProperties" if *arg == Value::Bool(true) => Verdict::Valid,
            "unevaluatedProperties" => Verdict::Unknown,
            _ => Verdict::Valid,
        }
    }

    fn array_keyword(
        &self,
        s: &Map<String, Value>,
        key: &str,
        arg: &Value,
        a: &[Value],
        at: &mut String,
        depth: usize,
    ) -> Verdict {
        let each = |from: usize, schema: &Value, at: &mut String| {
            all(a
                .iter()
                .enumerate()
                .skip(from)
                .map(|(i, item)| self.sub(schema, item, at, &i.to_string(), depth)))
        };
        // The first items, each under its own schema.
        let tuple = |schemas: &[Value], at: &mut String| {
            all(schemas
                .iter()
                .zip(a)
                .enumerate()
                .map(|(i, (schema, item))| self.sub(schema, item, at, &i.to_string(), depth)))
        };
        match key {
            "prefixItems" => match arg.as_array() {
                Some(schemas) => tuple(schemas, at),
                None => Verdict::Unknown,
            },
            // Draft-07's tuples: `items` as an array, the rest under `additionalItems`.
            "items" => match arg.as_array() {
                Some(schemas) => tuple(schemas, at),
                None => {
                    let from = s
                        .get("prefixItems")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    each(from, arg, at)
                }
            },
            "additionalItems" => match s.get("items").and_then(Value::as_array) {
                Some(tuple) => each(tuple.len(), arg, at),
                None => Verdict::Valid,
            },
            "minItems" | "maxItems" => count_bound(key, arg, a.len(), "items", at),
            "uniqueItems" if *arg == Value::Bool(true) => {
                let repeated = a
                    .iter()
                    .enumerate()
                    .any(|(i, x)| a[..i].iter().any(|y| same(x, y)));
                if repeated {
                    invalid(at, "the items are not unique")
                } else {
                    Verdict::Valid
                }
            }
            "contains" => {
                let verdicts: Vec<Verdict> = a
                    .iter()
                    .map(|item| self.eval(arg, item, at, depth + 1))
                    .collect();
                let found = verdicts.iter().filter(|d| **d == Verdict::Valid).count();
                let unsure = verdicts.iter().filter(|d| **d == Verdict::Unknown).count();
                let min = s.get("minContains").and_then(Value::as_u64).unwrap_or(1) as usize;
                let max = s
                    .get("maxContains")
                    .and_then(Value::as_u64)
                    .map(|m| m as usize);
                let fits = |n: usize| n >= min && max.is_none_or(|m| n <= m);
                if (found..=found + unsure).all(fits) {
                    Verdict::Valid
                } else if (found..=found + unsure).any(fits) {
                    Verdict::Unknown
                } else {
                    invalid(at, format!("{found} items match 'contains'"))
                }
            }
            "unevaluatedItems" if *arg == Value::Bool(true) => Verdict::Valid,
            "unevaluatedItems" => Verdict::Unknown,
            _ => Verdict::Valid,
        }
    }

    /// The schema a local `$ref` (`#`, `#/$defs/Move`) points to; `None` for a remote one or
    /// an anchor.
    fn target(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            return None;
        }
        self.root.pointer(&percent_decoded(pointer)?)
    }
}

fn string_keyword(key: &str, arg: &Value, t: &str, at: &str) -> Verdict {
    match key {
        "minLength" | "maxLength" => count_bound(key, arg, t.chars().count(), "characters", at),
        "pattern" => Verdict::Unknown,
        _ => Verdict::Valid,
    }
}

fn number_keyword(key: &str, arg: &Value, n: &Number, at: &str) -> Verdict {
    let Some(bound) = arg.as_number() else {
        // Draft-04's `exclusiveMinimum: true` changes `minimum`: not read here.
        return match arg {
            Value::Bool(true) => Verdict::Unknown,
            _ => Verdict::Valid,
        };
    };
    let order = compare(n, bound);
    let fails = match key {
        "minimum" => order == Some(Ordering::Less),
        "maximum" => order == Some(Ordering::Greater),
        "exclusiveMinimum" => order != Some(Ordering::Greater),
        "exclusiveMaximum" => order != Some(Ordering::Less),
        "multipleOf" => return multiple_of(n, bound, at),
        _ => false,
    };
    if fails {
        let what = match key {
            "minimum" => "less than the minimum of",
            "maximum" => "greater than the maximum of",
            "exclusiveMinimum" => "not greater than the exclusive minimum of",
            _ => "not less than the exclusive maximum of",
        };
        invalid(at, format!("{n} is {what} {bound}"))
    } else {
        Verdict::Valid
    }
}

fn multiple_of(n: &Number, m: &Number, at: &str) -> Verdict {
    if let (Some(a), Some(b)) = (int(n), int(m)) {
        return match b != 0 && a % b == 0 {
            true => Verdict::Valid,
            false => invalid(at, format!("{n} is not a multiple of {m}")),
        };
    }
    let (Some(a), Some(b)) = (n.as_f64(), m.as_f64()) else {
        return Verdict::Unknown;
    };
    let q = a / b;
    if !q.is_finite() {
        return Verdict::Unknown;
    }
    if q.fract() == 0.0 {
        Verdict::Valid
    } else if (q - q.round()).abs() < 1e-9 * q.abs().max(1.0) {
        // Binary floating point cannot tell 0.3 / 0.1 from 2.9999999999999996.
        Verdict::Unknown
    } else {
        invalid(at, format!("{n} is not a multiple of {m}"))
    }
}

/// `minItems`, `maxLength` and the like.
fn count_bound(key: &str, arg: &Value, len: usize, unit: &str, at: &str) -> Verdict {
    let Some(bound) = arg.as_f64() else {
        return Verdict::Valid;
    };
    let len_f = len as f64;
    if key.starts_with("min") && len_f < bound {
        invalid(at, format!("has {len} {unit}, fewer than {key} {bound}"))
    } else if key.starts_with("max") && len_f > bound {
        invalid(at, format!("has {len} {unit}, more than {key} {bound}"))
    } else {
        Verdict::Valid
    }
}

/// Several verdicts that must all hold: the first rejection, else unknown if any is.
fn all(verdicts: impl Iterator<Item = Verdict>) -> Verdict {
    let mut unknown = false;
    for verdict in verdicts {
        match verdict {
            Verdict::Invalid(_) => return verdict,
            Verdict::Unknown => unknown = true,
            Verdict::Valid => {}
        }
    }
    if unknown {
        Verdict::Unknown
    } else {
        Verdict::Valid
    }
}

fn invalid(at: &str, why: impl Into<String>) -> Verdict {
    let why = why.into();
    if at.is_empty() {
        Verdict::Invalid(why)
    } else {
        Verdict::Invalid(format!("{at}: {why}"))
    }
}

/// A value as a message shows it: whole when short.
fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let head: String = text.chars().take(57).collect();
    format!("{head}...")
}

fn has_type(v: &Value, t: &str) -> bool {
    match (t, v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            int(n).is_some() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// A number as an exact integer, when it is one that fits.
fn int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Numbers by value: exact for integers, 1 and 1.0 alike.
fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// JSON equality as JSON Schema defines it (`enum`, `const`, `uniqueItems`): numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| same(p, q)))
        }
        _ => a == b,
    }
}

/// A `$ref`'s fragment with its `%XX` escapes decoded (`#/$defs/a%20b`).
fn percent_decoded(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The keywords whose value is one schema.
const ONE_SCHEMA: [&str; 12] = [
    "additionalProperties",
    "additionalItems",
    "contains",
    "else",
    "if",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "items",
];

/// The keywords whose value is an object of schemas.
const NAMED_SCHEMAS: [&str; 5] = [
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

/// The keywords whose value is a count.
const COUNTS: [&str; 8] = [
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
];

/// Check the shape of `schema` (at `at` in `root`) as the draft 2020-12 meta-schema would, for
/// the keywords above.
fn well_formed(schema: &Value, root: &Value, at: &mut String) -> Result<(), Malformed> {
    let s = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(s) => s,
        other => {
            return Err(bad(
                at,
                format!("a schema is an object or a boolean, not {}", short(other)),
            ))
        }
    };
    for (key, arg) in s {
        let len = at.len();
        push_step(at, key);
        well_formed_keyword(key, arg, root, at)?;
        at.truncate(len);
    }
    Ok(())
}

fn well_formed_keyword(
    key: &str,
    arg: &Value,
    root: &Value,
    at: &mut String,
) -> Result<(), Malformed> {
    let k = key;
    match k {
        "type" => {
            let names = match arg {
                Value::String(_) => std::slice::from_ref(arg),
                Value::Array(names) => names.as_slice(),
                _ => return Err(bad(at, "'type' is a type name or an array of them")),
            };
            for name in names {
                if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                    return Err(bad(
                        at,
                        format!(
                            "{} is not a JSON Schema type (one of: {})",
                            short(name),
                            TYPES.join(", ")
                        ),
                    ));
                }
            }
            Ok(())
        }
        "enum" | "examples" if !arg.is_array() => Err(bad(at, format!("'{k}' is an array"))),
        "required" => match arg.as_array() {
            Some(names) if names.iter().all(Value::is_string) => Ok(()),
            _ => Err(bad(
                at,
                "'required' is an array of property names (strings)",
            )),
        },
        "dependentRequired" => match arg.as_object() {
            Some(deps)
                if deps
                    .values()
                    .all(|d| d.as_array().is_some_and(|a| a.iter().all(Value::is_string))) =>
            {
                Ok(())
            }
            _ => Err(bad(
                at,
                "'dependentRequired' is an object of arrays of property names",
            )),
        },
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match arg {
            // Booleans are draft-04's exclusive bounds.
            Value::Number(_) => Ok(()),
            Value::Bool(_) if k.starts_with("exclusive") => Ok(()),
            _ => Err(bad(at, format!("'{k}' is a number, not {}", short(arg)))),
        },
        "multipleOf" => match arg.as_f64() {
            Some(m) if m > 0.0 => Ok(()),
            _ => Err(bad(
                at,
                format!("'multipleOf' is a number above 0, not {}", short(arg)),
            )),
        },
        "pattern" | "format" | "title" | "description" | "$ref" | "$anchor" | "$comment"
            if !arg.is_string() =>
        {
            Err(bad(at, format!("'{k}' is a string, not {}", short(arg))))
        }
        "$ref" => {
            let r = arg.as_str().unwrap_or_default();
            let local = r
                .strip_prefix('#')
                .filter(|p| p.is_empty() || p.starts_with('/'));
            match local {
                Some(p)
                    if percent_decoded(p)
                        .and_then(|p| root.pointer(&p).cloned())
                        .is_none() =>
                {
                    Err(bad(
                        at,
                        format!("the $ref '{r}' points to nothing in this schema"),
                    ))
                }
                _ => Ok(()),
            }
        }
        "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" if !arg.is_boolean() => Err(bad(
            at,
            format!("'{k}' is true or false, not {}", short(arg)),
        )),
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => match arg.as_array() {
            Some(members) if !members.is_empty() => each_schema(
                members.iter().enumerate().map(|(i, m)| (i.to_string(), m)),
                root,
                at,
            ),
            _ => Err(bad(at, format!("'{k}' is a non-empty array of schemas"))),
        },
        // Draft-07's tuple form.
        "items" if arg.is_array() => {
            let members = arg.as_array().map(Vec::as_slice).unwrap_or_default();
            each_schema(
                members.iter().enumerate().map(|(i, m)| (i.to_string(), m)),
                root,
                at,
            )
        }
        // Draft-07: an array of names (`dependentRequired`) or a schema (`dependentSchemas`).
        "dependencies" => match arg.as_object() {
            Some(deps) => each_schema(
                deps.iter()
                    .filter(|(_, d)| !d.is_array())
                    .map(|(n, d)| (n.clone(), d)),
                root,
                at,
            ),
            None => Err(bad(at, "'dependencies' is an object")),
        },
        _ if ONE_SCHEMA.contains(&k) => well_formed(arg, root, at),
        _ if NAMED_SCHEMAS.contains(&k) => match arg.as_object() {
            Some(named) => each_schema(named.iter().map(|(n, m)| (n.clone(), m)), root, at),
            None => Err(bad(at, format!("'{k}' is an object of schemas"))),
        },
        _ if COUNTS.contains(&k) => match arg.as_f64() {
            Some(n) if n >= 0.0 && n.fract() == 0.0 => Ok(()),
            _ => Err(bad(
                at,
                format!("'{k}' is a whole number of at least 0, not {}", short(arg)),
            )),
        },
        _ => Ok(()),
    }
}

fn each_schema<'a>(
    members: impl Iterator<Item = (String, &'a Value)>,
    root: &Value,
    at: &mut String,
) -> Result<(), Malformed> {
    for (step, member) in members {
        let len = at.len();
        push_step(at, &step);
        well_formed(member, root, at)?;
        at.truncate(len);
    }
    Ok(())
}

/// Extend the JSON Pointer `at` by one step (a key or an index), escaped.
fn push_step(at: &mut String, step: &str) {
    at.push('/');
    at.push_str(&step.replace('~', "~0").replace('/', "~1"));
}

fn bad(at: &str, problem: impl Into<String>) -> Malformed {
    Malformed {
        at: at.to_owned(),
        problem: problem.into(),
    }
}

#[cfg(test)]
mod tests {
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
}
