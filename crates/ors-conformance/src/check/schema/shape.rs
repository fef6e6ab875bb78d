//! The shape of a schema: what the draft 2020-12 meta-schema asks of the keywords
//! [`super`] reads, checked before any input is.

use serde_json::Value;

use super::text::{below, percent_decoded, short};

/// Why a schema is not a usable JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} (at {})", if .at.is_empty() { "/" } else { .at.as_str() })]
pub struct Malformed {
    /// The JSON Pointer of the offending value in the schema (`/properties/n/minimum`).
    pub at: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The names `type` takes.
const TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

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
pub(super) fn well_formed(schema: &Value, root: &Value, at: &mut String) -> Result<(), Malformed> {
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
        below(at, key, |at| well_formed_keyword(key, arg, root, at))?;
    }
    Ok(())
}

fn well_formed_keyword(
    k: &str,
    arg: &Value,
    root: &Value,
    at: &mut String,
) -> Result<(), Malformed> {
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
            Some(members) if !members.is_empty() => each_member(members, root, at),
            _ => Err(bad(at, format!("'{k}' is a non-empty array of schemas"))),
        },
        // Draft-07's tuple form.
        "items" if arg.is_array() => each_member(
            arg.as_array().map(Vec::as_slice).unwrap_or_default(),
            root,
            at,
        ),
        // Draft-07: an array of names (`dependentRequired`) or a schema (`dependentSchemas`).
        "dependencies" => match arg.as_object() {
            Some(deps) => each_schema(deps.iter().filter(|(_, d)| !d.is_array()), root, at),
            None => Err(bad(at, "'dependencies' is an object")),
        },
        _ if ONE_SCHEMA.contains(&k) => well_formed(arg, root, at),
        _ if NAMED_SCHEMAS.contains(&k) => match arg.as_object() {
            Some(named) => each_schema(named.iter(), root, at),
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
    members: impl Iterator<Item = (impl AsRef<str>, &'a Value)>,
    root: &Value,
    at: &mut String,
) -> Result<(), Malformed> {
    for (step, member) in members {
        below(at, step.as_ref(), |at| well_formed(member, root, at))?;
    }
    Ok(())
}

/// [`each_schema`] over the members of an array, stepping by index.
fn each_member(members: &[Value], root: &Value, at: &mut String) -> Result<(), Malformed> {
    each_schema(
        members.iter().enumerate().map(|(i, m)| (i.to_string(), m)),
        root,
        at,
    )
}

/// A [`Malformed`] at `at`.
fn bad(at: &str, problem: impl Into<String>) -> Malformed {
    Malformed {
        at: at.to_owned(),
        problem: problem.into(),
    }
}
