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

use serde_json::{Map, Number, Value};

use shape::well_formed;
pub use shape::Malformed;
use text::{below, percent_decoded, short};

mod shape;
mod text;

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

/// A checked schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
}

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
        // The keywords are a conjunction: any rejection decides, an unknown one only blurs
        // an acceptance.
        all(s
            .iter()
            .map(|(key, arg)| self.keyword(s, key, arg, v, at, depth)))
    }

    /// Evaluate `schema` below `at` extended by `step`.
    fn sub(&self, schema: &Value, v: &Value, at: &mut String, step: &str, depth: usize) -> Verdict {
        below(at, step, |at| self.eval(schema, v, at, depth + 1))
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
                valid_if(names.iter().any(|t| has_type(v, t)), at, || {
                    format!("{} is not of type {}", short(v), arg)
                })
            }
            "enum" => match arg.as_array() {
                Some(values) if values.iter().any(|e| same(e, v)) => Verdict::Valid,
                Some(_) => invalid(at, format!("{} is not one of {arg}", short(v))),
                None => Verdict::Unknown,
            },
            "const" => valid_if(same(arg, v), at, || format!("{} is not {arg}", short(v))),
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
                s.get(branch)
                    .map_or(Verdict::Valid, |then| self.eval(then, v, at, depth + 1))
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
            "required" => first_missing(arg, o).map_or(Verdict::Valid, |missing| {
                invalid(at, format!("'{missing}' is a required property"))
            }),
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
                    let names: Vec<String> = extra.map(|(k, _)| format!("'{k}'")).collect();
                    return valid_if(names.is_empty(), at, || {
                        let names = names.join(", ");
                        format!("additional properties are not allowed ({names} unexpected)")
                    });
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
                    .map(|(k, dep)| match (dep, first_missing(dep, o)) {
                        (Value::Array(_), Some(n)) => {
                            invalid(at, format!("'{n}' is required when '{k}' is present"))
                        }
                        (Value::Array(_), None) => Verdict::Valid,
                        _ => self.eval(dep, &Value::Object(o.clone()), at, depth + 1),
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
            "prefixItems" => arg.as_array().map_or(Verdict::Unknown, |ts| tuple(ts, at)),
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
                valid_if(!repeated, at, || "the items are not unique".to_owned())
            }
            "contains" => {
                let verdicts: Vec<Verdict> = a
                    .iter()
                    .map(|item| self.eval(arg, item, at, depth + 1))
                    .collect();
                let found = verdicts.iter().filter(|d| **d == Verdict::Valid).count();
                let unsure = verdicts.iter().filter(|d| **d == Verdict::Unknown).count();
                let min = s.get("minContains").and_then(Value::as_u64).unwrap_or(1);
                let max = s.get("maxContains").and_then(Value::as_u64);
                let fits = |n: usize| n as u64 >= min && max.is_none_or(|m| n as u64 <= m);
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

/// The first of the property names `names` lists (an array) that `o` does not hold.
fn first_missing<'a>(names: &'a Value, o: &Map<String, Value>) -> Option<&'a str> {
    let mut names = names.as_array().into_iter().flatten();
    names.find_map(|n| n.as_str().filter(|n| !o.contains_key(*n)))
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
    valid_if(!fails, at, || {
        let what = match key {
            "minimum" => "less than the minimum of",
            "maximum" => "greater than the maximum of",
            "exclusiveMinimum" => "not greater than the exclusive minimum of",
            _ => "not less than the exclusive maximum of",
        };
        format!("{n} is {what} {bound}")
    })
}

fn multiple_of(n: &Number, m: &Number, at: &str) -> Verdict {
    if let (Some(a), Some(b)) = (int(n), int(m)) {
        return valid_if(b != 0 && a % b == 0, at, || {
            format!("{n} is not a multiple of {m}")
        });
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
    let mut all = Verdict::Valid;
    for verdict in verdicts {
        match verdict {
            Verdict::Invalid(_) => return verdict,
            Verdict::Unknown => all = Verdict::Unknown,
            Verdict::Valid => {}
        }
    }
    all
}

/// Valid when `ok`, else invalid for the reason `why` gives.
fn valid_if(ok: bool, at: &str, why: impl FnOnce() -> String) -> Verdict {
    if ok {
        Verdict::Valid
    } else {
        invalid(at, why())
    }
}

fn invalid(at: &str, why: impl Into<String>) -> Verdict {
    let why = why.into();
    Verdict::Invalid(if at.is_empty() {
        why
    } else {
        format!("{at}: {why}")
    })
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
pub(crate) fn same(a: &Value, b: &Value) -> bool {
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

#[cfg(test)]
mod tests;
